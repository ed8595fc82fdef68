"""Kubernetes 1.37 workload-aware scheduling live (issue #11 item 4), on the 1.37.2 control plane with the gates
GenericWorkload, DRAWorkloadResourceClaims, TopologyAwareWorkloadScheduling, WorkloadWithJob and CompositePodGroup
on (e2e/versions.env):

* a Job with ``.spec.scheduling`` (gang): kube-controller-manager's job controller creates the Workload
  (``spec.controllerRef`` = the Job), the PodGroup (``spec.workloadRef``) and pods with ``spec.schedulingGroup``;
  dra-scheduler places the pods as a gang (all or none) and writes ``PodGroupInitiallyScheduled``;
* a ``scheduling.k8s.io/v1beta1`` PodGroup with ``schedulingConstraints.topology`` (the rack label) and a PodGroup
  ``resourceClaims`` entry: the resourceclaim controller makes one claim owned by the PodGroup, dra-scheduler
  allocates it once, reserves it for the PodGroup (``apiGroup: scheduling.k8s.io, resource: podgroups``) and places
  every member in one rack, where the claim's device is; a group too big for any rack binds nothing;
* a ``scheduling.k8s.io/v1alpha3`` CompositePodGroup (``minGroupCount``): child PodGroups admitted whole, at least
  minGroupCount of them together, or none.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from bench.fleet import RACK_LABEL
from e2e.fleet import (
    FLEET_LABEL,
    JSON,
    KINDS,
    UPSTREAM_PODGROUP,
    Kind,
    Kube,
    KubeError,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_template,
    create_objects,
    create_scale_fleet,
    device_slice,
    fresh_namespace,
    gpu_pod,
    pod_scheduled_condition,
    scale_objects,
    upstream_member,
    wait_for,
)

KINDS.setdefault("Job", Kind("batch", "v1", "jobs", True))
FABRIC_DRIVER = "fabric.example.com"


def _group_condition(pg: JSON, ctype: str = "PodGroupInitiallyScheduled") -> JSON | None:
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def _bound(pods: list[JSON]) -> list[JSON]:
    return [p for p in pods if p["spec"].get("nodeName")]


# --- Job .spec.scheduling (WorkloadWithJob) --------------------------------------------------------------------------


def _job(ns: str, name: str, parallelism: int, fleet: str) -> JSON:
    tmpl = gpu_pod(ns, "x", template="eight", fleet=fleet)
    spec = tmpl["spec"]
    spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "backoffLimit": 0,
            "scheduling": {"schedulingPolicy": {"gang": {"minCount": parallelism}}},
            "template": {"metadata": {"labels": {"job": name}}, "spec": spec},
        },
    }



def _fabric_members(
    pods: list[dict[str, Any]], claims: list[dict[str, Any]], shared: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Check that every member names the shared ``fabric`` claim; return the members without it and the claims
    generated per pod (for check_state's invariants on the GPU claims)."""
    for p in pods:
        names = {s["name"]: s.get("resourceClaimName") for s in p["status"]["resourceClaimStatuses"]}
        assert names["fabric"] == shared["metadata"]["name"]
    gpu_only = []
    for p in pods:
        q = copy.deepcopy(p)
        q["spec"]["resourceClaims"] = [c for c in q["spec"]["resourceClaims"] if c["name"] != "fabric"]
        gpu_only.append(q)
    per_pod = [c for c in claims if (c["metadata"].get("ownerReferences") or [{}])[0].get("kind") == "Pod"]
    return gpu_only, per_pod

def test_job_with_scheduling_is_placed_as_a_gang(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "wl-job")
    fleet = create_scale_fleet(kube, "wl-job", 4, 8)
    kube.create(claim_template(ns, "eight", count=8))
    job = kube.create(_job(ns, "train", 4, "wl-job"))

    def placed() -> list[JSON] | None:
        pods = kube.list("Pod", ns, labelSelector="job=train")
        return pods if len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(placed, 90, "the Job's 4 pods bound", interval=0.5)
    # what the 1.37 job controller made of spec.scheduling
    [wl] = kube.list("Workload", ns)
    ref = wl["spec"]["controllerRef"]
    assert (ref.get("apiGroup"), ref["kind"], ref["name"]) == ("batch", "Job", "train")
    [tmpl] = wl["spec"]["podGroupTemplates"]
    assert tmpl["schedulingPolicy"] == {"gang": {"minCount": 4}}
    [pg] = kube.list(UPSTREAM_PODGROUP, ns)
    assert pg["spec"]["workloadRef"] == {"workloadName": wl["metadata"]["name"], "templateName": tmpl["name"]}
    assert any(o["uid"] == job["metadata"]["uid"] for o in pg["metadata"]["ownerReferences"])
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {pg["metadata"]["name"]}
    # one whole 8-GPU node each (kwok then completes the Job's pods and the claim controller deletes their claims)
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(fleet.node_names)

    def initially_scheduled() -> JSON | None:
        c = _group_condition(kube.get(UPSTREAM_PODGROUP, pg["metadata"]["name"], ns))
        return c if c and c["status"] == "True" else None

    cond = wait_for(initially_scheduled, 30, "PodGroupInitiallyScheduled=True on the Job's PodGroup")
    assert cond["reason"] == "Scheduled" and cond["lastTransitionTime"]


def test_job_gang_too_big_binds_no_pod(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "wl-job-big")
    create_scale_fleet(kube, "wl-job-big", 3, 8)
    kube.create(claim_template(ns, "eight", count=8))
    kube.create(_job(ns, "big", 4, "wl-job-big"))

    def explained() -> list[JSON] | None:
        pods = kube.list("Pod", ns, labelSelector="job=big")
        conds = [pod_scheduled_condition(p) for p in pods]
        ok = len(pods) == 4 and all(c and c.get("status") == "False" and "pod group" in c.get("message", "")
                                    for c in conds)
        return pods if ok else None

    wait_for(explained, 90, "every pod of the too-big Job gang unschedulable, naming its pod group", interval=0.5)
    time.sleep(2)
    pods = kube.list("Pod", ns, labelSelector="job=big")
    assert _bound(pods) == []
    [pg] = kube.list(UPSTREAM_PODGROUP, ns)
    cond = _group_condition(pg)
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    claims = kube.list("ResourceClaim", ns)
    assert not [c for c in claims if allocated_devices(c)]


# --- a v1beta1 PodGroup with a rack constraint and a PodGroup ResourceClaim -----------------------------------------


def _fabric(kube: Kube, ns: str, fleet: str, racks: list[str]) -> None:
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "e2e-fabric"},
                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{FABRIC_DRIVER}"'}}]}},
                exist_ok=True)
    for rack in racks:
        kube.create({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{fleet}-fabric-{rack}", "labels": {FLEET_LABEL: fleet}},
            "spec": {
                "driver": FABRIC_DRIVER,
                "pool": {"name": f"{fleet}-{rack}", "generation": 1, "resourceSliceCount": 1},
                "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": RACK_LABEL, "operator": "In", "values": [rack]},
                    {"key": FLEET_LABEL, "operator": "In", "values": [fleet]}]}]},
                "devices": [{"name": "partition-0"}],
            },
        })
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "fabric", "namespace": ns},
                 "spec": {"spec": {"devices": {"requests": [
                     {"name": "f", "exactly": {"deviceClassName": "e2e-fabric"}}]}}}})


FABRIC = {"name": "fabric", "resourceClaimTemplateName": "fabric"}


def _rack_group(ns: str, name: str, min_count: int) -> JSON:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                     "schedulingConstraints": {"topology": [{"key": RACK_LABEL}]},
                     "resourceClaims": [dict(FABRIC)]}}


def _rack_member(ns: str, name: str, group: str, fleet: str) -> JSON:
    p = upstream_member(gpu_pod(ns, name, template="eight", fleet=fleet), group)
    p["spec"]["resourceClaims"].append(dict(FABRIC))
    p["spec"]["containers"][0]["resources"]["claims"].append({"name": "fabric"})
    return p


def test_podgroup_rack_constraint_and_shared_claim(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "wl-rack")
    fleet = "wl-rack"
    # rack-0: 2 nodes, rack-1: 3 nodes (8 GPUs each); a fabric partition in each rack
    objs = [o for o in scale_objects(fleet, 6, 8, nodes_per_rack=3)
            if not (o["kind"] == "Node" and o["metadata"]["name"].endswith("-002"))
            and not (o["kind"] == "ResourceSlice" and o["spec"].get("nodeName", "").endswith("-002"))]
    f = create_objects(kube, objs, fleet)
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in f.nodes}
    assert sorted(rack_of.values()) == ["rack-0", "rack-0", "rack-1", "rack-1", "rack-1"]
    kube.create(claim_template(ns, "eight", count=8))
    _fabric(kube, ns, fleet, ["rack-0", "rack-1"])
    # first a group too big for any rack (4 whole nodes: the cluster has 5, no rack more than 3): nothing bound,
    # the reason names the key
    kube.create(_rack_group(ns, "huge", 4))
    kube.create_many([_rack_member(ns, f"h-{i}", "huge", fleet) for i in range(4)])

    def refused() -> JSON | None:
        c = _group_condition(kube.get(UPSTREAM_PODGROUP, "huge", ns))
        return c if c and c["status"] == "False" and RACK_LABEL in c.get("message", "") else None

    cond = wait_for(refused, 60, "PodGroupInitiallyScheduled=False on huge, naming the rack key")
    assert cond["reason"] == "Unschedulable" and "no domain has room for 4 members" in cond["message"], cond
    time.sleep(2)
    huge = kube.list("Pod", ns)
    assert _bound(huge) == []
    for p in huge:
        c = pod_scheduled_condition(p)
        assert c is not None and c["status"] == "False" and RACK_LABEL in c["message"], c
    for p in huge:
        kube.delete("Pod", p["metadata"]["name"], ns, grace=0)
    wait_for(lambda: not kube.list("Pod", ns), 30, "huge's pods gone")

    # then a group of 3 that fits one rack, with the PodGroup's shared claim
    pg = kube.create(_rack_group(ns, "train", 3))
    kube.create_many([_rack_member(ns, f"t-{i}", "train", fleet) for i in range(3)])

    def placed() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(placed, 90, "the 3 members of train bound", interval=0.5)
    assert {rack_of[p["spec"]["nodeName"]] for p in pods} == {"rack-1"}  # the only rack with room for 3
    claims = kube.list("ResourceClaim", ns)
    [shared] = [c for c in claims if (c["metadata"].get("ownerReferences") or [{}])[0].get("kind") == "PodGroup"
                and c["metadata"]["ownerReferences"][0]["name"] == "train"]
    owner = shared["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["name"], owner["uid"], owner.get("controller")) == (
        "scheduling.k8s.io/v1beta1", "train", pg["metadata"]["uid"], True)
    st = shared["status"]
    assert st["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train",
                                  "uid": pg["metadata"]["uid"]}]
    assert allocated_devices(shared) == [(FABRIC_DRIVER, f"{fleet}-rack-1", "partition-0")]
    # every member names the one claim; the per-pod GPU claims keep the usual invariants
    gpu_only, per_pod = _fabric_members(pods, claims, shared)
    assert check_state(gpu_only, per_pod) == []

    def initially_scheduled() -> JSON | None:
        c = _group_condition(kube.get(UPSTREAM_PODGROUP, "train", ns))
        return c if c and c["status"] == "True" else None

    cond = wait_for(initially_scheduled, 30, "PodGroupInitiallyScheduled=True on train")
    assert "rack-1" in cond["message"]


def test_podgroup_claim_shared_by_four_members_needs_its_devices_once(kube: Kube, scheduler: SchedulerProcess) -> None:
    """Issue 25 item 1: a gang of 4 (minCount 4) whose members each use the PodGroup's claim ``fabric`` (1 device)
    and a GPU claim of their own, on a node with 2 fabric devices. The PodGroup claim is allocated once and
    reserved for the PodGroup (KEP-5729, resource.k8s.io/v1 ResourceClaim status.reservedFor), as kube-scheduler
    1.37.2 does: all 4 members bind on it. The group capacity bound counted the claim once per member and refused
    the group ("not enough devices of class e2e-fabric: 4 needed, 2 free")."""
    ns = fresh_namespace(kube, "wl-shared")
    fleet = "wl-shared"
    f = create_scale_fleet(kube, fleet, 1, 8)
    [node] = f.nodes
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "e2e-fabric"},
                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{FABRIC_DRIVER}"'}}]}},
                exist_ok=True)
    kube.create(device_slice(node, FABRIC_DRIVER, [{"name": "fabric-0"}, {"name": "fabric-1"}], fleet))
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "fabric", "namespace": ns},
                 "spec": {"spec": {"devices": {"requests": [
                     {"name": "f", "exactly": {"deviceClassName": "e2e-fabric"}}]}}}})
    kube.create(claim_template(ns, "one", count=1))
    pg = kube.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                      "metadata": {"name": "g", "namespace": ns},
                      "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, "resourceClaims": [dict(FABRIC)]}})
    members = []
    for i in range(4):
        p = upstream_member(gpu_pod(ns, f"m-{i}", template="one", fleet=fleet), "g")
        p["spec"]["resourceClaims"].append(dict(FABRIC))
        p["spec"]["containers"][0]["resources"]["claims"].append({"name": "fabric"})
        members.append(p)
    kube.create_many(members)

    def placed() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods) else None

    def why() -> str:
        return "; ".join(f"{p['metadata']['name']}: {(pod_scheduled_condition(p) or {}).get('message')}"
                         for p in kube.list("Pod", ns))

    try:
        pods = wait_for(placed, 90, "the 4 members of g bound", interval=0.5)
    except TimeoutError as e:
        raise AssertionError(f"{e}: {why()}") from e
    assert {p["spec"]["nodeName"] for p in pods} == {node["metadata"]["name"]}
    claims = kube.list("ResourceClaim", ns)
    [shared] = [c for c in claims if (c["metadata"].get("ownerReferences") or [{}])[0].get("kind") == "PodGroup"]
    assert shared["metadata"]["ownerReferences"][0]["uid"] == pg["metadata"]["uid"]
    st = shared["status"]
    assert st["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g",
                                  "uid": pg["metadata"]["uid"]}]
    devices = allocated_devices(shared)
    assert len(devices) == 1 and devices[0][0] == FABRIC_DRIVER, devices  # one device for the whole group
    gpu_only, per_pod = _fabric_members(pods, claims, shared)
    assert len(per_pod) == 4 and check_state(gpu_only, per_pod) == []


# --- CompositePodGroup (v1alpha3) -------------------------------------------------------------------------------------


def test_composite_pod_group_admits_min_group_count_children(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "wl-cpg")
    create_scale_fleet(kube, "wl-cpg", 4, 8)
    kube.create(claim_template(ns, "eight", count=8))
    sizes = {"decode": 2, "prefill": 2, "router": 1}
    for role, n in sizes.items():
        kube.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": role, "namespace": ns},
                     "spec": {"parentCompositePodGroupName": "svc",
                              "workloadRef": {"workloadName": "serving", "templateName": role},
                              "schedulingPolicy": {"gang": {"minCount": n}}}})
    kube.create_many([upstream_member(gpu_pod(ns, f"{role}-{i}", template="eight", fleet="wl-cpg"), role)
                      for role, n in sizes.items() for i in range(n)])

    # the members wait for their CompositePodGroup, then (once every claim exists) the tree is admitted at once
    def waiting() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        ok = len(pods) == 5 and all(
            (p.get("status") or {}).get("resourceClaimStatuses") and (c := pod_scheduled_condition(p))
            and "composite pod group" in c.get("message", "") for p in pods)
        return pods if ok else None

    wait_for(waiting, 60, "5 members waiting for composite pod group svc", interval=0.5)
    assert _bound(kube.list("Pod", ns)) == []
    kube.create({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                 "metadata": {"name": "svc", "namespace": ns},
                 "spec": {"workloadRef": {"workloadName": "serving", "templateName": "svc"},
                          "schedulingPolicy": {"gang": {"minGroupCount": 2}}}})

    def settled() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        waiting = [p for p in pods if not p["spec"].get("nodeName")]
        ok = len(pods) == 5 and len(_bound(pods)) == 4 and all(
            (c := pod_scheduled_condition(p)) and c.get("status") == "False" for p in waiting)
        return pods if ok else None

    pods = wait_for(settled, 90, "4 of 5 pods bound (room for 4), the 5th unschedulable", interval=0.5)
    by_role: dict[str, int] = {}
    for p in _bound(pods):
        role = p["spec"]["schedulingGroup"]["podGroupName"]
        by_role[role] = by_role.get(role, 0) + 1
    admitted = {r for r, n in by_role.items() if n == sizes[r]}
    assert len(admitted) >= 2 and set(by_role) == admitted, by_role  # whole children, at least minGroupCount
    assert check_state(pods, kube.list("ResourceClaim", ns)) == []
    for role in sizes:
        def cond(role: str = role) -> JSON | None:
            c = _group_condition(kube.get(UPSTREAM_PODGROUP, role, ns))
            return c if c and c["status"] == ("True" if role in admitted else "False") else None

        wait_for(cond, 30, f"PodGroupInitiallyScheduled of {role}")


def test_composite_below_min_group_count_binds_nothing(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "wl-cpg-no")
    create_scale_fleet(kube, "wl-cpg-no", 2, 8)
    kube.create(claim_template(ns, "eight", count=8))
    kube.create({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                 "metadata": {"name": "svc", "namespace": ns},
                 "spec": {"workloadRef": {"workloadName": "serving", "templateName": "svc"},
                          "schedulingPolicy": {"gang": {"minGroupCount": 2}}}})
    for role in ("a", "b"):
        kube.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": role, "namespace": ns},
                     "spec": {"parentCompositePodGroupName": "svc",
                              "workloadRef": {"workloadName": "serving", "templateName": role},
                              "schedulingPolicy": {"gang": {"minCount": 2}}}})
    kube.create_many([upstream_member(gpu_pod(ns, f"{role}-{i}", template="eight", fleet="wl-cpg-no"), role)
                      for role in ("a", "b") for i in range(2)])

    def explained() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        ok = len(pods) == 4 and all((c := pod_scheduled_condition(p)) and "composite pod group" in c.get("message", "")
                                    for p in pods)
        return pods if ok else None

    wait_for(explained, 90, "every pod unschedulable, naming the composite pod group", interval=0.5)
    time.sleep(2)
    pods = kube.list("Pod", ns)
    assert _bound(pods) == []
    assert not [c for c in kube.list("ResourceClaim", ns) if allocated_devices(c)]


def test_podgroup_naming_a_parent_needs_a_workload_ref(kube: Kube, scheduler: SchedulerProcess) -> None:
    """The API server's ValidatePodGroup: the same rule simulate applies (tests/test_workload_gangs.py)."""
    ns = fresh_namespace(kube, "wl-valid")
    bad = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": ns},
           "spec": {"parentCompositePodGroupName": "svc", "schedulingPolicy": {"gang": {"minCount": 1}}}}
    try:
        kube.create(bad)
    except KubeError as e:
        assert e.status == 422, e
        assert "spec.workloadRef" in str(e) and "must be set when parentCompositePodGroupName is set" in str(e), e
    else:
        raise AssertionError("the API server accepted a PodGroup with a parent and no workloadRef")
