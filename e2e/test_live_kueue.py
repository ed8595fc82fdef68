"""dra-scheduler under Kueue v0.17.0 (issue 27, item 1), on the shared live control plane.

Kueue owns quota and admission: its pod integration gates every pod of a LocalQueue (scheduling gate
``kueue.x-k8s.io/admission``) and lifts the gate once the pod's Workload fits its ClusterQueue, adding the
ResourceFlavor's nodeLabels (and, with TAS, the chosen topology domain) to the pod's nodeSelector. dra-scheduler
owns placement: nodes, DRA devices and gangs, for pods whose ``schedulerName`` names it. Gated pods are Kueue's to
explain: dra-scheduler writes nothing about them.

DRA quota follows KEP-2941 as shipped in 0.17 (alpha feature gate ``DynamicResourceAllocation``): the devices of a
pod's ResourceClaimTemplates are counted per DeviceClass and charged to the logical resource that
``resources.deviceClassMappings`` of Kueue's Configuration maps the class to (e2e/cluster.sh: ``whole-gpus`` for
gpu.nvidia.com). What 0.17 does not count (sigs.k8s.io/kueue@v0.17.0 pkg/dra/claims.go,
pkg/controller/core/workload_controller.go) makes the Workload inadmissible, and the pod stays gated.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

from bench import fleet as gen
from e2e import cluster
from e2e import kueue as kq
from e2e.fleet import (
    FLEET_LABEL,
    JSON,
    POD_GROUP_LABEL,
    Kube,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_template,
    create_nodes,
    create_objects,
    create_scale_fleet,
    gpu_pod,
    plain_node,
    pod_scheduled_condition,
    podgroup,
    scale_objects,
    wait_for,
)

GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"  # the API server's (KEP-3521)


class Queues:
    """Kueue objects of one test: a ResourceFlavor, a ClusterQueue and a LocalQueue ``team`` in ``ns``;
    cluster-scoped ones deleted at the end."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.made: dict[str, list[str]] = {"ClusterQueue": [], "ResourceFlavor": [], "Topology": []}
        self.namespaces: list[str] = []

    def namespace(self, prefix: str) -> str:
        """A fresh namespace of Kueue's; its pods are deleted when the test ends, while Kueue still runs."""
        ns = kq.kueue_namespace(self.kube, prefix)
        self.namespaces.append(ns)
        return ns

    def make(self, ns: str, quotas: dict[str, str | int], node_labels: dict[str, str] | None = None,
             topology: str | None = None, queue: str = "team") -> str:
        s = kq.suffix()
        flavor, cq = f"flavor-{s}", f"cq-{s}"
        self.kube.create(kq.resource_flavor(flavor, node_labels, topology))
        self.kube.create(kq.cluster_queue(cq, flavor, quotas))
        self.made["ResourceFlavor"].append(flavor)
        self.made["ClusterQueue"].append(cq)
        self.kube.create(kq.local_queue(ns, queue, cq))
        wait_for(lambda: _active(self.kube.get("ClusterQueue", cq)), 30, f"ClusterQueue {cq} active")
        return queue

    def topology(self, levels: list[str]) -> str:
        name = f"topo-{kq.suffix()}"
        self.kube.create(kq.topology(name, levels))
        self.made["Topology"].append(name)
        return name


def _active(obj: JSON) -> bool:
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"), None)
    return bool(c and c.get("status") == "True")


@pytest.fixture
def queues(kube: Kube, kueue: cluster.Kueue) -> Iterator[Queues]:
    q = Queues(kube)
    yield q
    for ns in q.namespaces:
        kq.release_pods(kube, ns)
    kq.delete_cluster_objects(kube, q.made)


def _pods(kube: Kube, ns: str) -> dict[str, JSON]:
    return {p["metadata"]["name"]: p for p in kube.list("Pod", ns)}


def _bound(pods: dict[str, JSON]) -> set[str]:
    return {n for n, p in pods.items() if p["spec"].get("nodeName")}


def _assert_silent_about(kube: Kube, ns: str, gated: set[str]) -> None:
    """dra-scheduler said nothing about the gated pods: no Event, no status write, and their PodScheduled condition
    is the one the API server set when the gate was there at creation."""
    pods = _pods(kube, ns)
    for name in gated:
        p = pods[name]
        assert kq.ADMISSION_GATE in kq.gates(p), (name, kq.gates(p))
        assert not p["spec"].get("nodeName")
        cond = pod_scheduled_condition(p)
        assert cond is not None and cond["reason"] == "SchedulingGated" and cond["message"] == GATED_MESSAGE, cond
        assert "dra-scheduler" not in kq.managers(p), kq.managers(p)
    about = [e for e in kq.scheduler_events(kube, ns) if e["involvedObject"].get("name") in gated]
    assert about == [], about
    failed = [e for e in kube.list("Event", ns) if e.get("reason") == "FailedScheduling"]
    assert failed == [], failed


def test_quota_admits_part_and_dra_scheduler_binds_exactly_the_admitted(
    kube: Kube, kueue: cluster.Kueue, scheduler: SchedulerProcess, queues: Queues
) -> None:
    """6 one-GPU pods, a ClusterQueue with 4 GPUs of quota on a fleet of 16: Kueue admits 4, dra-scheduler binds
    those 4 (devices allocated, on the flavor's nodes), the other 2 stay gated with Kueue's reason and without a
    word from dra-scheduler. Deleting a running pod frees quota: Kueue admits one more and it is bound."""
    ns = queues.namespace("kq-quota")
    fleet = "kq-quota"
    create_scale_fleet(kube, fleet, 2, 8)
    queue = queues.make(ns, {"cpu": 100, kq.WHOLE_GPUS: 4}, node_labels={FLEET_LABEL: fleet})
    kube.create(claim_template(ns, "one"))
    kube.create_many([kq.queued(gpu_pod(ns, f"p-{i}", template="one"), queue) for i in range(6)])

    def settled() -> tuple[dict[str, JSON], list[JSON]] | None:
        pods, wls = _pods(kube, ns), kq.workloads(kube, ns)
        admitted = [w for w in wls if kq.is_admitted(w)]
        pending = [w for w in wls if "insufficient" in kq.pending_message(w)]
        if len(_bound(pods)) == 4 and len(admitted) == 4 and len(pending) == 2:
            return pods, wls
        return None

    pods, wls = wait_for(settled, 90, "4 workloads admitted and their pods bound, 2 pending", interval=0.5)
    admitted_pods = {n for w in wls if kq.is_admitted(w) for n in kq.owner_pods(w)}
    assert _bound(pods) == admitted_pods
    for w in wls:
        if kq.is_admitted(w):
            assert kq.usage(w).get(kq.WHOLE_GPUS) == "1", kq.usage(w)  # the template's one device
        else:
            msg = kq.pending_message(w)
            assert f"insufficient unused quota for {kq.WHOLE_GPUS}" in msg, msg
    for n in admitted_pods:
        p = pods[n]
        assert kq.gates(p) == [] and p["spec"]["nodeSelector"] == {FLEET_LABEL: fleet}  # the flavor's nodeLabels
    claims = kube.list("ResourceClaim", ns)
    assert check_state(list(pods.values()), claims) == []
    assert len([c for c in claims if allocated_devices(c)]) == 4
    scheduled = {e["involvedObject"]["name"] for e in kq.scheduler_events(kube, ns) if e.get("reason") == "Scheduled"}
    assert scheduled == admitted_pods
    gated = set(pods) - admitted_pods
    time.sleep(3)  # past dra-scheduler's gated-condition delay
    _assert_silent_about(kube, ns, gated)

    # quota comes back when an admitted pod goes: Kueue admits one of the two, dra-scheduler binds it
    gone = sorted(admitted_pods)[0]
    kube.delete("Pod", gone, ns, grace=0)

    def refilled() -> dict[str, JSON] | None:
        now = _pods(kube, ns)
        return now if gone not in now and len(_bound(now)) == 4 and len(set(now) - _bound(now)) == 1 else None

    pods = wait_for(refilled, 60, "one more pod admitted by Kueue and bound after a running one was deleted")
    assert len(_bound(pods) & gated) == 1
    _assert_silent_about(kube, ns, set(pods) - _bound(pods))


def test_dra_quota_counts_template_devices_and_what_kueue_cannot_count_stays_gated(
    kube: Kube, kueue: cluster.Kueue, scheduler: SchedulerProcess, queues: Queues
) -> None:
    """deviceClassMappings: a 4-GPU ResourceClaimTemplate charges 4 ``whole-gpus``, so 8 of quota admit 2 of 3 such
    pods. What Kueue 0.17 cannot count is inadmissible and its pod stays gated, with Kueue's reason on the Workload
    and nothing from dra-scheduler: a claim shared by pods (a ResourceClaim, not a template), a template with a CEL
    selector, and one with a matchAttribute constraint (e.g. GPUs under one PCIe root)."""
    ns = queues.namespace("kq-dra")
    fleet = "kq-dra"
    create_scale_fleet(kube, fleet, 2, 8)
    queue = queues.make(ns, {"cpu": 100, kq.WHOLE_GPUS: 8}, node_labels={FLEET_LABEL: fleet})
    kube.create(claim_template(ns, "four", count=4))
    picky = claim_template(ns, "picky", selectors=["device.attributes['gpu.nvidia.com'].productName != ''"])
    together = claim_template(ns, "together", count=2)
    together["spec"]["spec"]["devices"]["constraints"] = [
        {"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    kube.create_many([picky, together, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}])
    pods = [kq.queued(gpu_pod(ns, f"four-{i}", template="four"), queue) for i in range(3)]
    pods += [kq.queued(gpu_pod(ns, "cel", template="picky"), queue),
             kq.queued(gpu_pod(ns, "constrained", template="together"), queue),
             kq.queued(gpu_pod(ns, "shared-user", claim="shared"), queue)]
    kube.create_many(pods)
    unsupported = {"cel": "CEL selectors are not supported",
                   "constrained": "device constraints (MatchAttribute) are not supported",
                   "shared-user": "does not support use of resource claims"}

    def settled() -> tuple[dict[str, JSON], dict[str, JSON]] | None:
        now = _pods(kube, ns)
        by_pod = {n: w for w in kq.workloads(kube, ns) for n in kq.owner_pods(w)}
        fours = [n for n in now if n.startswith("four-")]
        ok = (len(_bound(now)) == 2 and len(by_pod) == 6
              and sum(kq.is_admitted(by_pod[n]) for n in fours) == 2
              and all(text in kq.pending_message(by_pod[n]) for n, text in unsupported.items()))
        return (now, by_pod) if ok else None

    now, by_pod = wait_for(settled, 90, "2 of 3 four-GPU pods admitted and bound, 3 inadmissible", interval=0.5)
    for n in now:
        w = by_pod[n]
        if kq.is_admitted(w):
            assert n in _bound(now) and kq.usage(w).get(kq.WHOLE_GPUS) == "4", (n, kq.usage(w))
    left = [n for n in now if n.startswith("four-") and not kq.is_admitted(by_pod[n])]
    assert len(left) == 1 and f"insufficient unused quota for {kq.WHOLE_GPUS}" in kq.pending_message(by_pod[left[0]])
    claims = kube.list("ResourceClaim", ns)
    assert check_state(list(now.values()), claims) == []
    assert sorted(len(allocated_devices(c)) for c in claims if allocated_devices(c)) == [4, 4]
    time.sleep(3)
    _assert_silent_about(kube, ns, set(now) - _bound(now))


def _cpu_pod(ns: str, name: str, cpu: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": "dra-scheduler", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}}


def test_tas_workload_lands_in_the_rack_kueue_chose(
    kube: Kube, kueue: cluster.Kueue, scheduler: SchedulerProcess, queues: Queues
) -> None:
    """Kueue TAS: a Topology over the fleet's block/rack labels (2 nodes x 8 CPUs per rack), a pod group of 4 x 3
    CPUs that must fit in one rack (``podset-required-topology``). Rack 1 has 6 CPUs taken by a pod Kueue does not
    manage: Kueue picks another rack, puts it in each pod's nodeSelector and lifts its topology gate;
    dra-scheduler binds all 4 inside that rack, 2 per node.

    Kueue sums the free capacity of its lowest level's domains (the next test). With kubernetes.io/hostname as the
    lowest level Kueue would choose the nodes itself."""
    ns = queues.namespace("kq-tas")
    fleet = "kq-tas"
    nodes = [plain_node(f"{fleet}-{i}", fleet, "zone-a", cpu="8",
                        labels={gen.BLOCK_LABEL: f"block-{i // 4}", gen.RACK_LABEL: f"rack-{i // 2}"})
             for i in range(8)]
    create_nodes(kube, nodes, fleet)
    other = queues.namespace("kq-tas-other")  # a pod Kueue does not manage (no queue), already bound
    busy = _cpu_pod(other, "busy", "6")
    busy["spec"]["nodeName"] = f"{fleet}-2"
    kube.create(busy)
    topo = queues.topology([gen.BLOCK_LABEL, gen.RACK_LABEL])
    queue = queues.make(ns, {"cpu": 100}, node_labels={FLEET_LABEL: fleet}, topology=topo)
    kube.create_many([kq.queued(_cpu_pod(ns, f"w-{i}", "3"), queue, group="train", total=4,
                                required_topology=gen.RACK_LABEL) for i in range(4)])

    def placed() -> dict[str, JSON] | None:
        now = _pods(kube, ns)
        return now if len(now) == 4 and len(_bound(now)) == 4 else None

    pods = wait_for(placed, 90, "the 4 TAS pods bound", interval=0.5)
    racks = {p["spec"]["nodeSelector"].get(gen.RACK_LABEL) for p in pods.values()}
    assert len(racks) == 1 and None not in racks, [p["spec"].get("nodeSelector") for p in pods.values()]
    rack = racks.pop()
    assert rack != "rack-1"  # 10 CPUs free there: 3 of the 4 pods
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][gen.RACK_LABEL] for n in nodes}
    assert {rack_of[p["spec"]["nodeName"]] for p in pods.values()} == {rack}
    assert sorted(Counter(p["spec"]["nodeName"] for p in pods.values()).values()) == [2, 2]
    assert all(kq.gates(p) == [] for p in pods.values())
    (wl,) = kq.workloads(kube, ns)
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta["levels"] == [gen.BLOCK_LABEL, gen.RACK_LABEL], ta
    scheduled = {e["involvedObject"]["name"] for e in kq.scheduler_events(kube, ns) if e.get("reason") == "Scheduled"}
    assert scheduled == set(pods)


def test_gang_admitted_whole_by_kueue_is_placed_all_or_nothing(
    kube: Kube, kueue: cluster.Kueue, scheduler: SchedulerProcess, queues: Queues
) -> None:
    """A Kueue pod group (``pod-group-name`` / ``pod-group-total-count``) whose pods are also a
    scheduling.x-k8s.io PodGroup of minMember 4, 8 GPUs each. Kueue counts quota, not nodes: with 32 GPUs of quota
    on 3 nodes x 8 it admits the group as one Workload; dra-scheduler binds none of the 4 and says why. A 4th node
    arrives: all 4 are bound, one per node."""
    ns = queues.namespace("kq-gang")
    fleet = "kq-gang"
    objs = scale_objects(fleet, 4, 8)
    last = f"{fleet}-003"
    create_objects(kube, [o for o in objs if _node_of(o) != last], fleet)
    queue = queues.make(ns, {"cpu": 100, kq.WHOLE_GPUS: 32}, node_labels={FLEET_LABEL: fleet})
    kube.create(claim_template(ns, "eight", count=8))
    kube.create(podgroup(ns, "train", 4))
    kube.create_many([kq.queued(gpu_pod(ns, f"w-{i}", template="eight", group="train"), queue, group="train",
                                total=4) for i in range(4)])

    def admitted_unplaced() -> dict[str, JSON] | None:
        now = _pods(kube, ns)
        wls = kq.workloads(kube, ns)
        conds = [pod_scheduled_condition(p) for p in now.values()]
        ok = (len(wls) == 1 and kq.is_admitted(wls[0]) and len(now) == 4
              and all(kq.gates(p) == [] for p in now.values())
              and all(c and c.get("reason") == "Unschedulable" and "cannot place minMember 4" in c.get("message", "")
                      for c in conds))
        return now if ok else None

    pods = wait_for(admitted_unplaced, 90, "the group admitted by Kueue, every member explained unschedulable")
    (wl,) = kq.workloads(kube, ns)
    assert sorted(kq.owner_pods(wl)) == sorted(pods)
    assert kq.usage(wl).get(kq.WHOLE_GPUS) == "32", kq.usage(wl)
    time.sleep(2)
    pods = _pods(kube, ns)
    assert _bound(pods) == set()
    assert not [c for c in kube.list("ResourceClaim", ns) if allocated_devices(c) or (c.get("status") or {}).get(
        "reservedFor")]

    create_objects(kube, [o for o in objs if _node_of(o) == last], fleet)

    def whole() -> dict[str, JSON] | None:
        now = _pods(kube, ns)
        return now if len(_bound(now)) == 4 else None

    pods = wait_for(whole, 60, "all 4 members bound once a 4th node exists", interval=0.5)
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == [f"{fleet}-{i:03d}" for i in range(4)]
    assert check_state(list(pods.values()), kube.list("ResourceClaim", ns)) == []
    assert all(p["metadata"]["labels"][POD_GROUP_LABEL] == "train" for p in pods.values())


def _node_of(obj: JSON) -> str | None:
    if obj["kind"] == "Node":
        return str(obj["metadata"]["name"])
    if obj["kind"] == "ResourceSlice":
        return str(obj["spec"].get("nodeName"))
    return None


def _gpu_job(ns: str, name: str, queue: str, pods: int, template: str) -> JSON:
    spec = gpu_pod(ns, "unused", template=template)["spec"]
    spec["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {kq.QUEUE_LABEL: queue}},
            "spec": {"parallelism": pods, "completions": pods, "template": {"spec": spec}}}


def _cond_time(obj: JSON, type_: str) -> str:
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)
    return str(c["lastTransitionTime"]) if c and c.get("status") == "True" else ""


def test_batch_jobs_admitted_one_after_the_other_run_on_dra_scheduler(
    kube: Kube, kueue: cluster.Kueue, scheduler: SchedulerProcess, queues: Queues
) -> None:
    """Kueue's batch/job integration with the e2e kube-controller-manager's Job controller: two Jobs of 2 one-GPU
    pods and 2 GPUs of quota. Kueue suspends both at creation and admits one; the Job controller creates its pods,
    dra-scheduler binds them, kwok completes them; only then is the other Job admitted (its quota was held)."""
    ns = queues.namespace("kq-jobs")
    fleet = "kq-jobs"
    create_scale_fleet(kube, fleet, 1, 8)
    queue = queues.make(ns, {"cpu": 100, kq.WHOLE_GPUS: 2}, node_labels={FLEET_LABEL: fleet})
    kube.create(claim_template(ns, "one"))
    kube.create_many([_gpu_job(ns, f"job-{x}", queue, 2, "one") for x in ("a", "b")])

    def done() -> list[JSON] | None:
        jobs = kube.list("Job", ns)
        return jobs if len(jobs) == 2 and all(_cond_time(j, "Complete") for j in jobs) else None

    wait_for(done, 120, "both Jobs complete", interval=0.5)
    wls = sorted(kq.workloads(kube, ns), key=lambda w: _cond_time(w, "Admitted"))
    assert len(wls) == 2 and all(_cond_time(w, "Finished") for w in wls), wls
    first, second = wls
    assert _cond_time(first, "Finished") <= _cond_time(second, "Admitted")  # the second waited for the quota
    for w in wls:
        assert kq.usage(w).get(kq.WHOLE_GPUS) == "2", kq.usage(w)  # 2 pods x 1 device
    scheduled = [e for e in kq.scheduler_events(kube, ns) if e.get("reason") == "Scheduled"]
    assert len({e["involvedObject"]["name"] for e in scheduled}) == 4, scheduled
    failed = [e for e in kube.list("Event", ns) if e.get("reason") == "FailedScheduling"]
    assert failed == [], failed


def test_tas_rack_admitted_on_its_summed_capacity_the_pod_that_does_not_fit_is_explained(
    kube: Kube, kueue: cluster.Kueue, scheduler: SchedulerProcess, queues: Queues
) -> None:
    """Kueue's TAS sums the free capacity of a domain of its lowest level (here a rack): one rack of 2 x 8 CPUs
    with 4 taken on one node has 12 free, so Kueue admits 4 pods of 3 CPUs there, though node by node only 3 fit.
    dra-scheduler binds 3 and says why the 4th cannot be placed (PodScheduled=False, Insufficient cpu)."""
    ns = queues.namespace("kq-tas-sum")
    fleet = "kq-tas-sum"
    nodes = [plain_node(f"{fleet}-{i}", fleet, "zone-a", cpu="8",
                        labels={gen.BLOCK_LABEL: "block-0", gen.RACK_LABEL: "rack-0"}) for i in range(2)]
    create_nodes(kube, nodes, fleet)
    other = queues.namespace("kq-tas-sum-other")
    busy = _cpu_pod(other, "busy", "4")
    busy["spec"]["nodeName"] = f"{fleet}-0"
    kube.create(busy)
    topo = queues.topology([gen.BLOCK_LABEL, gen.RACK_LABEL])
    queue = queues.make(ns, {"cpu": 100}, node_labels={FLEET_LABEL: fleet}, topology=topo)
    kube.create_many([kq.queued(_cpu_pod(ns, f"w-{i}", "3"), queue, group="train", total=4,
                                required_topology=gen.RACK_LABEL) for i in range(4)])

    def three_and_one_explained() -> dict[str, JSON] | None:
        now = _pods(kube, ns)
        waiting = [p for n, p in now.items() if n not in _bound(now)]
        ok = (len(now) == 4 and len(_bound(now)) == 3 and len(waiting) == 1 and kq.gates(waiting[0]) == []
              and "Insufficient cpu" in ((pod_scheduled_condition(waiting[0]) or {}).get("message") or ""))
        return now if ok else None

    pods = wait_for(three_and_one_explained, 60, "3 of 4 admitted pods bound, the 4th explained", interval=0.5)
    (wl,) = kq.workloads(kube, ns)
    assert kq.is_admitted(wl)
    assert Counter(p["spec"]["nodeName"] for p in pods.values() if p["spec"].get("nodeName")) == {
        f"{fleet}-0": 1, f"{fleet}-1": 2}
