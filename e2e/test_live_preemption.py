"""Preemption live, on the Kubernetes 1.37.2 control plane, with ``dra-scheduler run`` (issue #10, "Done when").

PriorityClasses are created live; pods name them in ``priorityClassName`` and the API server's Priority
admission fills ``spec.priority`` and ``spec.preemptionPolicy``. Every test records the ResourceClaim watch
stream from before its first pod to its end and replays it (:func:`e2e.fleet.replay_device_owners`): no
device is allocated to two claims in any state the cluster went through.

* A high-priority GPU pod on a full GPU fleet (2 nodes x 2 GPUs, a priority-100 and a priority-500 pod of 2
  GPUs each): the priority-100 pod is the victim (upstream ``pickOneNodeForPreemption``: lowest highest
  victim priority). It gets ``DisruptionTarget=True`` (reason ``PreemptionByScheduler``, kubernetes v1.37.2
  ``pkg/scheduler/framework/preemption/executor.go`` ``PreemptPod``), is deleted, and the Event ``Preempted``
  names the preemptor; the preemptor carries ``status.nominatedNodeName`` before it is bound; the victim's
  claim is deallocated and deleted by kube-controller-manager; the preemptor is bound on that node with the
  very devices the victim had, the priority-500 pod is untouched.
* The same with a victim that terminates slowly (a test finalizer keeps it Terminating 2 s, as a kubelet's
  grace period would): meanwhile its claim stays allocated, the preemptor stays nominated and unbound
  (``PodEligibleToPreemptOthers``: "not eligible due to a terminating pod on the nominated node."); once it
  is gone, the preemptor must land on that node and nothing else may be evicted. (This found a race: the
  victim's Pod Delete event retried the preemptor before kube-controller-manager released the claim; a claim
  on the nominated node still reserved only by gone pods now makes the preemptor wait, as a terminating
  victim does.)
* PodDisruptionBudgets (``FilterVictimsWithPDBViolation``, ``pickOneNodeForPreemption`` rule 1): two
  victims of equal priority on two nodes. Without a budget the one that started later is evicted (rule 5:
  latest start time); with a PDB over it whose ``disruptionsAllowed`` is 0 (computed live by
  kube-controller-manager's disruption controller), the other one is.
* ``preemptionPolicy: Never`` (``PodEligibleToPreemptOthers``): nothing is evicted, the pod stays Pending
  with "preemption: not eligible due to preemptionPolicy=Never."; a pod of the same priority that may preempt
  then evicts the victim and gets its devices; the Never pod, of equal priority, does not take them
  (a nominated pod's resources count in the filters of pods of equal or lower priority, upstream
  ``addGENominatedPods``), whichever of the two is retried first.
* Side by side with upstream kube-scheduler 1.37.2: the same CPU preemption scenario (4 nodes full of pods of
  various priorities and sizes, one preemptor) run once with kube-scheduler and once with dra-scheduler from
  the same state: the same victims on the same node. And the device scenario: kube-scheduler 1.37.2 leaves a
  GPU preemptor Pending (DynamicResources has no PreFilterExtensions and rejects the full node as
  UnschedulableAndUnresolvable: ``../shared/reference/k8s-1.37-facts.md``), dra-scheduler places it.
* Not here yet: a gang (PodGroup) preemptor; workload-aware preemption has not landed.

    E2E_TEST_RUN_DIR=/tmp/h-preempt E2E_LOG_DIR=/tmp/h-preempt-logs \\
        .venv/bin/pytest e2e/test_live_preemption.py -q -p no:cacheprovider -s
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from e2e import cluster
from e2e.fleet import (
    FLEET_LABEL,
    HOLD_FINALIZER,
    JSON,
    Kube,
    KubeError,
    Recorder,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_names,
    claim_template,
    condition,
    create_nodes,
    create_scale_fleet,
    fresh_namespace,
    gpu_pod,
    plain_node,
    pod_scheduled_condition,
    podgroup,
    priority_class,
    release,
    replay_device_owners,
    wait_for,
)

OURS = "dra-scheduler"
UPSTREAM = "default-scheduler"
PRIORITIES = (10, 20, 50, 60, 100, 150, 200, 250, 300, 400, 500, 1000, 2000)
NEVER_CLASS = "e2e-pre-never-2000"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
NEVER_MESSAGE = "preemption: not eligible due to preemptionPolicy=Never."  # default_preemption.go
DRA_UNRESOLVABLE = "cannot allocate all claims"  # dynamicresources.go, UnschedulableAndUnresolvable


def pc(value: int) -> str:
    return f"e2e-pre-{value}"


@pytest.fixture(scope="module")
def classes(kube: Kube, scheduler: SchedulerProcess) -> Iterator[None]:
    """The module's PriorityClasses (PreemptLowerPriority), and one with preemptionPolicy Never."""
    objs = [priority_class(pc(v), v) for v in PRIORITIES] + [priority_class(NEVER_CLASS, 2000, "Never")]
    for o in objs:
        with contextlib.suppress(KubeError):
            kube.delete("PriorityClass", o["metadata"]["name"])
    wait_for(lambda: not any(kube.try_get("PriorityClass", o["metadata"]["name"]) for o in objs), 30,
             "old PriorityClasses gone")
    kube.create_many(objs)
    yield
    for o in objs:
        with contextlib.suppress(KubeError):
            kube.delete("PriorityClass", o["metadata"]["name"])


# --- pods and waits -------------------------------------------------------------------------------------


def cpu_pod(ns: str, name: str, cpu: str, prio: int, *, scheduler: str = OURS, node: str | None = None,
            fleet: str | None = None, labels: Mapping[str, str] | None = None) -> JSON:
    """A pause pod asking ``cpu``, of PriorityClass ``pc(prio)``; ``node`` binds it directly (no scheduler),
    ``fleet`` pins it to a fleet's nodes."""
    spec: JSON = {"schedulerName": scheduler, "priorityClassName": pc(prio), "terminationGracePeriodSeconds": 0,
                  "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if fleet:
        spec["nodeSelector"] = {FLEET_LABEL: fleet}
    meta: JSON = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def dra_pod(ns: str, name: str, template: str, fleet: str, *, prio: int | None = None, klass: str | None = None,
            scheduler: str = OURS, hold: bool = False) -> JSON:
    """A GPU pod (one claim from ``template``) of PriorityClass ``klass`` or ``pc(prio)``, pinned to ``fleet``."""
    p = gpu_pod(ns, name, template=template, fleet=fleet)
    p["spec"]["schedulerName"] = scheduler
    p["spec"]["priorityClassName"] = klass or pc(prio or 0)
    if hold:
        p["metadata"]["finalizers"] = [HOLD_FINALIZER]
    return p


def gpu_fleet(kube: Kube, name: str, nodes: int, gpus: int) -> list[str]:
    """``nodes`` x ``gpus`` DGX H100 nodes (fleet ``name``), once kwok reports them Ready; their names."""
    f = create_scale_fleet(kube, name, nodes, gpus_per_node=gpus)
    names = set(f.node_names)
    wait_for(lambda: names <= {n["metadata"]["name"] for n in kube.list("Node", labelSelector=f"{FLEET_LABEL}={name}")
                               if (c := condition(n, "Ready")) and c.get("status") == "True"},
             60, f"fleet {name} Ready")
    return sorted(names)


def wait_bound(kube: Kube, ns: str, names: Sequence[str], timeout: float = 30.0) -> dict[str, JSON]:
    def bound() -> dict[str, JSON] | None:
        pods = {p["metadata"]["name"]: p for p in kube.list("Pod", ns)}
        return pods if all(pods.get(n, {}).get("spec", {}).get("nodeName") for n in names) else None

    try:
        got: dict[str, JSON] = wait_for(bound, timeout, f"{list(names)} bound in {ns}", interval=0.1)
    except TimeoutError as e:
        raise AssertionError(f"{e}: {describe(kube, ns)}") from None
    return got


def wait_running(kube: Kube, ns: str, names: Sequence[str], timeout: float = 30.0) -> dict[str, JSON]:
    def running() -> dict[str, JSON] | None:
        pods = {p["metadata"]["name"]: p for p in kube.list("Pod", ns)}
        ok = all((pods.get(n, {}).get("status") or {}).get("phase") == "Running" for n in names)
        return pods if ok else None

    got: dict[str, JSON] = wait_for(running, timeout, f"{list(names)} Running in {ns}", interval=0.1)
    return got


def wait_unschedulable(kube: Kube, ns: str, name: str, timeout: float = 30.0) -> JSON:
    def marked() -> JSON | None:
        p = kube.get("Pod", name, ns)
        c = pod_scheduled_condition(p)
        return p if c and c.get("status") == "False" and not p["spec"].get("nodeName") else None

    got: JSON = wait_for(marked, timeout, f"{ns}/{name} PodScheduled=False", interval=0.1)
    return got


def claim_of(kube: Kube, pod: JSON) -> JSON:
    """The pod's (only) ResourceClaim once it is allocated."""
    ns = pod["metadata"]["namespace"]

    def allocated() -> JSON | None:
        cur = kube.get("Pod", pod["metadata"]["name"], ns)
        [name] = claim_names(cur).values()
        c = kube.try_get("ResourceClaim", name, ns) if name else None
        return c if c is not None and allocated_devices(c) else None

    got: JSON = wait_for(allocated, 20, f"claim of {ns}/{pod['metadata']['name']} allocated", interval=0.1)
    return got


def describe(kube: Kube, ns: str) -> dict[str, object]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or {
        "nominated": (p.get("status") or {}).get("nominatedNodeName"),
        "PodScheduled": (pod_scheduled_condition(p) or {}).get("message")} for p in kube.list("Pod", ns)}


def assert_preempted_by(victim: JSON, scheduler: str) -> None:
    """``PreemptPod``'s condition on the victim (executor.go): DisruptionTarget=True, PreemptionByScheduler."""
    cond = condition(victim, DISRUPTION_TARGET)
    assert cond is not None, f"{victim['metadata']['name']}: no {DISRUPTION_TARGET} condition"
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", PREEMPTION_BY_SCHEDULER, f"{scheduler}: preempting to accommodate a higher priority pod"), cond


def last_version(rec: Recorder, name: str) -> JSON:
    """The last recorded version of ``name`` before it was deleted (the DELETED event's object)."""
    versions = rec.versions(name)
    assert versions, f"no event recorded for {name}"
    return versions[-1][1]


def nominations(rec: Recorder, name: str) -> list[str]:
    """Every ``status.nominatedNodeName`` the pod ``name`` carried in the recorded versions, in order."""
    seen: list[str] = []
    for _, o in rec.versions(name):
        v = (o.get("status") or {}).get("nominatedNodeName")
        if v and (not seen or seen[-1] != v):
            seen.append(v)
    return seen


def no_double_allocation(claims: Recorder) -> int:
    assert claims.error is None, claims.error
    states, problems = replay_device_owners(claims.initial, claims.events)
    assert problems == [], problems
    return states


def delete_pods(kube: Kube, ns: str, timeout: float = 30.0) -> None:
    """Delete every pod of ``ns`` at once and wait until they and the claims made for them are gone."""
    for p in kube.list("Pod", ns):
        if p["metadata"].get("finalizers"):
            release(kube, ns, p["metadata"]["name"])
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods",
                 {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    wait_for(lambda: not kube.list("Pod", ns) and not kube.list("ResourceClaim", ns), timeout,
             f"pods and claims of {ns} gone")


# --- the replay of the claim stream, offline ------------------------------------------------------------


def _claim(name: str, devices: Sequence[str], rv: int) -> JSON:
    alloc = {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "n1", "device": d} for d in devices]}}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)},
            "status": {"allocation": alloc} if devices else {}}


def test_replay_finds_a_device_allocated_twice_in_any_intermediate_state() -> None:
    """The check every live test ends with must see a transient double allocation, not only the end state."""
    ok = [(0.0, "MODIFIED", _claim("a", [], 2)), (0.0, "MODIFIED", _claim("b", ["g0"], 3)),
          (0.0, "DELETED", _claim("a", [], 4))]
    assert replay_device_owners([_claim("a", ["g0"], 1)], ok) == (4, [])
    # b gets g0 while a still holds it; a lets go afterwards: the end state is fine, the history is not
    bad = [(0.0, "MODIFIED", _claim("b", ["g0"], 2)), (0.0, "DELETED", _claim("a", ["g0"], 3))]
    states, problems = replay_device_owners([_claim("a", ["g0"], 1), _claim("b", [], 1)], bad)
    assert states == 3 and len(problems) == 1, problems
    assert problems[0] == "after MODIFIED ns/b (resourceVersion 2): device d/n1/g0 allocated to ns/a and ns/b"


# --- 1. a high-priority GPU pod preempts a low-priority one -------------------------------------------


def claim_history(claims: Recorder, name: str) -> list[str]:
    """The recorded changes of one claim: the event type, what its status holds (allocation, reservedFor),
    deletion, and the manager of the last status write."""
    out: list[str] = []
    for typ, o in claims.versions(name):
        st = o.get("status") or {}
        managers = [m.get("manager") for m in o["metadata"].get("managedFields") or []
                    if m.get("subresource") == "status"]
        reserved = [r.get("name") for r in st.get("reservedFor") or []]
        out.append(f"{typ} alloc={bool(st.get('allocation'))} reservedFor={reserved}"
                   f" deleting={bool(o['metadata'].get('deletionTimestamp'))} status-managers={managers}")
    return out


def test_high_priority_gpu_pod_preempts_a_low_priority_one(kube: Kube, classes: None) -> None:
    nodes = gpu_fleet(kube, "pre-gpu", 2, 2)
    ns = fresh_namespace(kube, "pre-gpu")
    kube.create(claim_template(ns, "two-gpus", count=2))
    t0 = time.monotonic()
    with Recorder(kube, "ResourceClaim") as claims, Recorder(kube, "Pod", ns) as pods:
        kube.create(dra_pod(ns, "low", "two-gpus", "pre-gpu", prio=100))
        kube.create(dra_pod(ns, "mid", "two-gpus", "pre-gpu", prio=500))
        placed = wait_bound(kube, ns, ["low", "mid"])
        low_node, mid_node = placed["low"]["spec"]["nodeName"], placed["mid"]["spec"]["nodeName"]
        assert {low_node, mid_node} == set(nodes)
        assert (placed["low"]["spec"]["priority"], placed["mid"]["spec"]["priority"]) == (100, 500)  # admission
        low_claim = claim_of(kube, placed["low"])
        low_name = low_claim["metadata"]["name"]
        low_devices = sorted(allocated_devices(low_claim))
        assert len(low_devices) == 2 and all(d[1] == low_node for d in low_devices), low_devices

        t_pre = time.monotonic()
        kube.create(dra_pod(ns, "high", "two-gpus", "pre-gpu", prio=1000))
        high = wait_bound(kube, ns, ["high"])["high"]
        t_bound = time.monotonic()
        assert high["spec"]["nodeName"] == low_node, describe(kube, ns)
        assert kube.try_get("Pod", "low", ns) is None
        wait_for(lambda: kube.try_get("ResourceClaim", low_name, ns) is None, 30, "the victim's claim deleted",
                 interval=0.1)
        high_devices = sorted(allocated_devices(claim_of(kube, high)))
        assert high_devices == low_devices, (high_devices, low_devices)
        mid = kube.get("Pod", "mid", ns)
        assert mid["metadata"].get("deletionTimestamp") is None and condition(mid, DISRUPTION_TARGET) is None
        final_pods, final_claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
        assert sorted(p["metadata"]["name"] for p in final_pods) == ["high", "mid"]
        assert check_state(final_pods, final_claims) == []
    states = no_double_allocation(claims)

    # the recorded history: the victim marked, then deleted; the preemptor nominated to the victim's node
    # before it was bound; the victim's claim released by kube-controller-manager and deleted
    assert_preempted_by(last_version(pods, "low"), OURS)
    assert pods.versions("low")[-1][0] == "DELETED"
    assert nominations(pods, "high") == [low_node]
    versions = pods.versions("high")
    first_bound = next(i for i, (_, o) in enumerate(versions) if o["spec"].get("nodeName"))
    assert any((o.get("status") or {}).get("nominatedNodeName") == low_node for _, o in versions[:first_bound])
    history = claim_history(claims, low_name)
    # allocated by us, then deallocated (reservation and allocation removed) and deleted: `run` has no claim
    # controller, this is kube-controller-manager's resourceclaim controller (and the garbage collector)
    last_alloc = max(i for i, h in enumerate(history) if "alloc=True reservedFor=['low']" in h)
    assert any(h.startswith("MODIFIED alloc=False reservedFor=[]") for h in history[last_alloc + 1:]), history
    assert history[-1].startswith("DELETED"), history
    events = [e for e in kube.list("Event", ns) if e.get("reason") == "Preempted"]
    assert [(e["involvedObject"]["name"], e["message"]) for e in events] == [
        ("low", f"Preempted by pod {high['metadata']['uid']} on node {low_node}")], events
    print(f"\nGPU preemption: preemptor bound on {low_node} with {high_devices} {t_bound - t_pre:.2f}s after it "
          f"was created; {states} claim states checked; test {time.monotonic() - t0:.1f}s\n"
          f"victim's claim {low_name}:\n  " + "\n  ".join(history))


def test_gang_preemptor_evicts_for_all_members_jointly(kube: Kube, classes: None) -> None:
    """Issue 10 item 3 (workload-aware preemption, kubernetes v1.37.2 framework/preemption executor.go
    ``actuatePodGroupPreemption``, which upstream cannot do for devices): a PodGroup (minMember 2) of 2-GPU pods
    on two full 2-GPU nodes gets victims for both members at once: both low-priority pods are evicted, both
    members bound on the freed devices, no device twice in any observed state; the priority-2000 pod on a third
    node is untouched."""
    nodes = gpu_fleet(kube, "pre-gang", 3, 2)
    ns = fresh_namespace(kube, "pre-gang")
    kube.create(claim_template(ns, "two-gpus", count=2))
    with Recorder(kube, "ResourceClaim") as claims:
        kube.create(dra_pod(ns, "low-a", "two-gpus", "pre-gang", prio=100))
        kube.create(dra_pod(ns, "low-b", "two-gpus", "pre-gang", prio=150))
        kube.create(dra_pod(ns, "top", "two-gpus", "pre-gang", prio=2000))
        placed = wait_bound(kube, ns, ["low-a", "low-b", "top"])
        top_node = placed["top"]["spec"]["nodeName"]
        kube.create(podgroup(ns, "job", 2))
        for i in range(2):
            m = dra_pod(ns, f"member-{i}", "two-gpus", "pre-gang", prio=1000)
            m["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "job"}
            kube.create(m)
        members = wait_bound(kube, ns, ["member-0", "member-1"], timeout=60)
        used = {members[f"member-{i}"]["spec"]["nodeName"] for i in range(2)}
        assert used == set(nodes) - {top_node}, describe(kube, ns)
        wait_for(lambda: not {"low-a", "low-b"} & {p["metadata"]["name"] for p in kube.list("Pod", ns)}, 30,
                 "both victims gone")
        top = kube.get("Pod", "top", ns)
        assert top["metadata"].get("deletionTimestamp") is None and condition(top, DISRUPTION_TARGET) is None
        final_pods, final_claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
        assert check_state(final_pods, final_claims) == []
    no_double_allocation(claims)


def test_preemptor_waits_while_its_victim_terminates(kube: Kube, classes: None) -> None:
    """The victim stays Terminating for 2 s (:data:`HOLD_FINALIZER`, standing in for the kubelet's grace
    period): its claim stays allocated (kube-controller-manager keeps the reservation of a scheduled pod until
    it is gone), the preemptor carries ``status.nominatedNodeName`` and waits (upstream
    ``PodEligibleToPreemptOthers``: "not eligible due to a terminating pod on the nominated node."); once the
    victim is gone and its claim released, the preemptor is bound on that node with the victim's devices and
    nothing else is evicted."""
    nodes = gpu_fleet(kube, "pre-grace", 2, 2)
    ns = fresh_namespace(kube, "pre-grace")
    kube.create(claim_template(ns, "two-gpus", count=2))
    with Recorder(kube, "ResourceClaim") as claims, Recorder(kube, "Pod", ns) as pods:
        try:
            kube.create(dra_pod(ns, "low", "two-gpus", "pre-grace", prio=100, hold=True))
            kube.create(dra_pod(ns, "mid", "two-gpus", "pre-grace", prio=500))
            placed = wait_bound(kube, ns, ["low", "mid"])
            low_node = placed["low"]["spec"]["nodeName"]
            assert {low_node, placed["mid"]["spec"]["nodeName"]} == set(nodes)
            low_claim = claim_of(kube, placed["low"])
            low_devices = sorted(allocated_devices(low_claim))

            kube.create(dra_pod(ns, "high", "two-gpus", "pre-grace", prio=1000))
            victim = wait_for(lambda: (p := kube.get("Pod", "low", ns))["metadata"].get("deletionTimestamp") and p,
                              30, "the low pod deleted by preemption", interval=0.1)
            assert_preempted_by(victim, OURS)
            high = wait_for(lambda: (p := kube.get("Pod", "high", ns)).get("status", {}).get("nominatedNodeName")
                            and p, 10, "the preemptor nominated", interval=0.1)
            assert high["status"]["nominatedNodeName"] == low_node
            assert not high["spec"].get("nodeName")

            time.sleep(2.0)  # the victim is Terminating: its claim stays allocated, the preemptor waits
            high = kube.get("Pod", "high", ns)
            assert not high["spec"].get("nodeName"), "bound while the victim still holds its devices"
            assert high["status"].get("nominatedNodeName") == low_node, high["status"]
            assert sorted(allocated_devices(kube.get("ResourceClaim", low_claim["metadata"]["name"], ns))) \
                == low_devices

            release(kube, ns, "low")
            high = wait_bound(kube, ns, ["high"])["high"]
            time.sleep(0.5)
            assert high["spec"]["nodeName"] == low_node, describe(kube, ns)
            mid = kube.get("Pod", "mid", ns)
            assert mid["metadata"].get("deletionTimestamp") is None and condition(mid, DISRUPTION_TARGET) is None, \
                "a second pod was evicted"
            assert sorted(allocated_devices(claim_of(kube, high))) == low_devices
            assert check_state(kube.list("Pod", ns), kube.list("ResourceClaim", ns)) == []
        finally:
            release(kube, ns, "low")
    no_double_allocation(claims)
    assert nominations(pods, "high") == [low_node]


# --- 2. a PDB-protected pod survives -------------------------------------------------------------------


PDB_FLEET = "pre-pdb"


def run_pdb_scenario(kube: Kube, with_pdb: bool) -> tuple[str, str, Recorder]:
    """Two priority-100 pods of 3 CPUs on two 4-CPU nodes, ``guarded`` started at least a second after ``free``;
    a PDB (minAvailable 1, so disruptionsAllowed 0) over ``guarded`` when ``with_pdb``; then a priority-1000
    preemptor of 3 CPUs. Returns (the evicted pod, the preemptor's node, the pod recording)."""
    ns = fresh_namespace(kube, "pre-pdb" if with_pdb else "pre-nopdb")
    with Recorder(kube, "Pod", ns) as pods:
        kube.create(cpu_pod(ns, "free", "3", 100, node=f"{PDB_FLEET}-0"))
        free = wait_running(kube, ns, ["free"])["free"]
        # startTime has a resolution of a second: the guarded pod must start in a later one
        wait_for(lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > free["status"]["startTime"], 2,
                 "the next second")
        kube.create(cpu_pod(ns, "guarded", "3", 100, node=f"{PDB_FLEET}-1", labels={"app": "guarded"}))
        guarded = wait_running(kube, ns, ["guarded"])["guarded"]
        assert guarded["status"]["startTime"] > free["status"]["startTime"]
        if with_pdb:
            kube.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": {"name": "guarded", "namespace": ns},
                         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})

            def computed() -> JSON | None:
                b = kube.get("PodDisruptionBudget", "guarded", ns)
                st = b.get("status") or {}
                ok = (st.get("observedGeneration") == b["metadata"]["generation"]
                      and st.get("currentHealthy") == 1 and st.get("expectedPods") == 1 and "disruptionsAllowed" in st)
                return b if ok else None

            pdb = wait_for(computed, 30, "the PDB status from kube-controller-manager's disruption controller")
            assert (pdb["status"]["disruptionsAllowed"], pdb["status"]["desiredHealthy"]) == (0, 1), pdb["status"]
            time.sleep(0.3)  # the scheduler's PDB informer
        kube.create(cpu_pod(ns, "urgent", "3", 1000, fleet=PDB_FLEET))
        urgent = wait_bound(kube, ns, ["urgent"])["urgent"]
        left = wait_for(lambda: [n for n in ("free", "guarded") if kube.try_get("Pod", n, ns) is not None]
                        if len(kube.list("Pod", ns)) == 2 else None, 10, "one victim gone")
        time.sleep(0.3)
    [survivor] = left
    survived = kube.get("Pod", survivor, ns)
    assert survived["metadata"].get("deletionTimestamp") is None and condition(survived, DISRUPTION_TARGET) is None
    [evicted] = {"free", "guarded"} - {survivor}
    assert_preempted_by(last_version(pods, evicted), OURS)
    assert nominations(pods, "urgent") == [urgent["spec"]["nodeName"]]
    if with_pdb:
        assert kube.get("PodDisruptionBudget", "guarded", ns)["status"]["disruptionsAllowed"] == 0
    delete_pods(kube, ns)
    return evicted, urgent["spec"]["nodeName"], pods


def test_pdb_protected_pod_survives(kube: Kube, classes: None) -> None:
    """Without the budget, the pod that started later is the victim (rule 5); with it, the other one."""
    create_nodes(kube, [plain_node(f"{PDB_FLEET}-{i}", PDB_FLEET, "zone-a", cpu="4") for i in range(2)], PDB_FLEET)
    evicted, node, _ = run_pdb_scenario(kube, with_pdb=False)
    assert (evicted, node) == ("guarded", f"{PDB_FLEET}-1")
    evicted, node, _ = run_pdb_scenario(kube, with_pdb=True)
    assert (evicted, node) == ("free", f"{PDB_FLEET}-0")


# --- 3. preemptionPolicy: Never ------------------------------------------------------------------------


def test_preemption_policy_never_evicts_nothing(kube: Kube, classes: None) -> None:
    [node] = gpu_fleet(kube, "pre-never", 1, 2)
    ns = fresh_namespace(kube, "pre-never")
    kube.create(claim_template(ns, "two-gpus", count=2))
    with Recorder(kube, "ResourceClaim") as claims, Recorder(kube, "Pod", ns) as pods:
        kube.create(dra_pod(ns, "low", "two-gpus", "pre-never", prio=100))
        low = wait_bound(kube, ns, ["low"])["low"]
        low_devices = sorted(allocated_devices(claim_of(kube, low)))
        kube.create(dra_pod(ns, "polite", "two-gpus", "pre-never", klass=NEVER_CLASS))
        polite = wait_unschedulable(kube, ns, "polite")
        assert (polite["spec"]["priority"], polite["spec"].get("preemptionPolicy")) == (2000, "Never")
        cond = pod_scheduled_condition(polite)
        assert cond is not None and cond["reason"] == "Unschedulable", cond
        assert NEVER_MESSAGE in cond["message"], cond["message"]
        time.sleep(2.0)  # nothing happens
        low = kube.get("Pod", "low", ns)
        assert low["metadata"].get("deletionTimestamp") is None and condition(low, DISRUPTION_TARGET) is None
        polite = kube.get("Pod", "polite", ns)
        assert not polite["spec"].get("nodeName") and not polite["status"].get("nominatedNodeName")

        # the same priority with PreemptLowerPriority does evict; the devices freed are held for it, the
        # Never pod (equal priority) cannot take them
        kube.create(dra_pod(ns, "urgent", "two-gpus", "pre-never", prio=2000))
        urgent = wait_bound(kube, ns, ["urgent"])["urgent"]
        assert urgent["spec"]["nodeName"] == node
        assert sorted(allocated_devices(claim_of(kube, urgent))) == low_devices
        time.sleep(1.0)
        polite = kube.get("Pod", "polite", ns)
        assert not polite["spec"].get("nodeName"), describe(kube, ns)
        assert kube.try_get("Pod", "low", ns) is None
        assert check_state(kube.list("Pod", ns), kube.list("ResourceClaim", ns)) == []
    no_double_allocation(claims)
    assert_preempted_by(last_version(pods, "low"), OURS)
    assert nominations(pods, "polite") == []
    delete_pods(kube, ns)


# --- 4. side by side with kube-scheduler 1.37.2 ----------------------------------------------------------

CPU_FLEET = "pre-sbs"
# node -> its pods (name, cpu, priority); every node has 4 CPUs and is full. The preemptor asks 2 CPUs at
# priority 1000. Minimal victim sets (reprieve from the most important down): n1 {b} (highest 400),
# n2 {e} (250: c and d are reprieved), n3 {h, i} (50: f and g are reprieved), n4 {j} (60: k is
# reprieved). pickOneNodeForPreemption: no PDB anywhere; lowest highest victim priority -> n3, although
# n1, n2 and n4 would need one victim only. Priorities differ within a node, so start times decide nothing.
CPU_SCENARIO: dict[str, tuple[tuple[str, str, int], ...]] = {
    "pre-sbs-1": (("a", "2", 500), ("b", "2", 400)),
    "pre-sbs-2": (("c", "1", 300), ("d", "1", 200), ("e", "2", 250)),
    "pre-sbs-3": (("f", "1", 150), ("g", "1", 100), ("h", "1", 50), ("i", "1", 20)),
    "pre-sbs-4": (("j", "3", 60), ("k", "1", 10)),
}
EXPECTED_CPU = ("pre-sbs-3", frozenset({"h", "i"}))


@dataclass
class Outcome:
    scheduler: str
    node: str = ""
    victims: frozenset[str] = frozenset()
    nominated: list[str] = field(default_factory=list)
    seconds: float = 0.0
    conditions: dict[str, JSON | None] = field(default_factory=dict)

    def __str__(self) -> str:
        return (f"{self.scheduler:>17}: preemptor on {self.node or '-'}, victims {sorted(self.victims)}, "
                f"nominated {self.nominated}, {self.seconds:.2f}s")


def run_cpu_scenario(kube: Kube, scheduler: str, tag: str) -> Outcome:
    ns = fresh_namespace(kube, f"pre-cpu-{tag}")
    fillers = [cpu_pod(ns, name, cpu, prio, scheduler=scheduler, node=node)
               for node, pods in CPU_SCENARIO.items() for name, cpu, prio in pods]
    with Recorder(kube, "Pod", ns) as rec:
        kube.create_many(fillers)
        wait_running(kube, ns, [f["metadata"]["name"] for f in fillers])
        t = time.monotonic()
        kube.create(cpu_pod(ns, "preemptor", "2", 1000, scheduler=scheduler, fleet=CPU_FLEET))
        pre = wait_bound(kube, ns, ["preemptor"])["preemptor"]
        out = Outcome(scheduler, pre["spec"]["nodeName"], seconds=time.monotonic() - t)
        time.sleep(0.5)  # late deletions
    out.victims = frozenset(o["metadata"]["name"] for _, typ, o in rec.events if typ == "DELETED")
    out.nominated = nominations(rec, "preemptor")
    out.conditions = {v: condition(last_version(rec, v), DISRUPTION_TARGET) for v in out.victims}
    delete_pods(kube, ns)
    return out


def test_side_by_side_cpu_preemption_same_victims(
    kube: Kube, classes: None, cluster_info: cluster.ClusterInfo
) -> None:
    create_nodes(kube, [plain_node(n, CPU_FLEET, "zone-a", cpu="4") for n in CPU_SCENARIO], CPU_FLEET)
    with cluster.kube_scheduler(cluster_info.run_dir):
        upstream = run_cpu_scenario(kube, UPSTREAM, "ks")
    ours = run_cpu_scenario(kube, OURS, "ours")
    print(f"\nCPU preemption, same scenario:\n{upstream}\n{ours}")
    assert (upstream.node, upstream.victims) == EXPECTED_CPU, str(upstream)
    assert (ours.node, ours.victims) == (upstream.node, upstream.victims), f"{upstream}\n{ours}"
    for out in (upstream, ours):
        assert out.nominated == [out.node], str(out)
        for v, cond in out.conditions.items():
            assert cond is not None and (cond["status"], cond["reason"]) == ("True", PREEMPTION_BY_SCHEDULER), (
                out.scheduler, v, cond)
            assert cond["message"] == f"{out.scheduler}: preempting to accommodate a higher priority pod", cond


def run_gpu_scenario(kube: Kube, scheduler: str, tag: str, fleet: str, node: str) -> tuple[JSON, JSON | None]:
    """A priority-100 pod holding both GPUs of ``node``, then a priority-1000 pod asking both; returns
    (the preemptor after it was bound or found unschedulable and 2 s passed, the low pod or None if gone)."""
    ns = fresh_namespace(kube, f"pre-dev-{tag}")
    kube.create(claim_template(ns, "two-gpus", count=2))
    with Recorder(kube, "ResourceClaim") as claims:
        kube.create(dra_pod(ns, "low", "two-gpus", fleet, prio=100, scheduler=scheduler))
        claim_of(kube, wait_bound(kube, ns, ["low"])["low"])
        kube.create(dra_pod(ns, "high", "two-gpus", fleet, prio=1000, scheduler=scheduler))

        def decided() -> JSON | None:
            p = kube.get("Pod", "high", ns)
            failed = (pod_scheduled_condition(p) or {}).get("status") == "False"
            return p if p["spec"].get("nodeName") or failed else None

        high: JSON = wait_for(decided, 30, f"{scheduler}: the GPU preemptor bound or unschedulable")
        if not high["spec"].get("nodeName"):
            time.sleep(2.0)  # an asynchronous preemption would have started by now
            if (p := kube.get("Pod", "high", ns))["spec"].get("nodeName") or kube.try_get("Pod", "low", ns) is None:
                high = wait_bound(kube, ns, ["high"])["high"]
            else:
                high = p
        low = kube.try_get("Pod", "low", ns)
        assert check_state(kube.list("Pod", ns), kube.list("ResourceClaim", ns)) == []
    no_double_allocation(claims)
    delete_pods(kube, ns)
    return high, low


def test_side_by_side_gpu_preemptor_pending_upstream_placed_by_us(
    kube: Kube, classes: None, cluster_info: cluster.ClusterInfo
) -> None:
    fleet = "pre-sbs-gpu"
    [node] = gpu_fleet(kube, fleet, 1, 2)
    with cluster.kube_scheduler(cluster_info.run_dir):
        ks_high, ks_low = run_gpu_scenario(kube, UPSTREAM, "ks", fleet, node)
    ours_high, ours_low = run_gpu_scenario(kube, OURS, "ours", fleet, node)
    ks_cond = pod_scheduled_condition(ks_high) or {}
    print(f"\nGPU preemptor, kube-scheduler 1.37.2: {ks_high['spec'].get('nodeName') or 'Pending'} "
          f"({ks_cond.get('message')}); low pod {'kept' if ks_low else 'evicted'}"
          f"\nGPU preemptor, dra-scheduler: {ours_high['spec'].get('nodeName') or 'Pending'}; "
          f"low pod {'kept' if ours_low else 'evicted'}")
    # upstream: nothing evicted, nothing nominated, the preemptor Pending on the DRA filter's unresolvable
    assert not ks_high["spec"].get("nodeName") and ks_low is not None
    assert not (ks_high.get("status") or {}).get("nominatedNodeName")
    assert ks_cond.get("reason") == "Unschedulable" and DRA_UNRESOLVABLE in ks_cond.get("message", ""), ks_cond
    assert condition(ks_low, DISRUPTION_TARGET) is None
    # ours: the low pod evicted, the preemptor bound on the node
    assert ours_high["spec"].get("nodeName") == node and ours_low is None


# --- 5. gang preemption ---------------------------------------------------------------------------------
# Not yet: workload-aware (PodGroup) preemption has not landed (plugins/defaultpreemption handles single
# pods only). A gang preemptor test belongs here once it does.
