"""Kubernetes 1.37 workload-aware scheduling (issue #11): ``scheduling.k8s.io/v1beta1`` PodGroups (basic / gang
``minCount``, ``schedulingConstraints.topology``, ``resourceClaims``), ``v1alpha3`` CompositePodGroups
(``minGroupCount``, nesting), the ``PodGroupInitiallyScheduled`` / ``DisruptionTarget`` conditions, Workload objects.

Upstream references (kubernetes v1.37.2): ``pkg/scheduler/schedule_one_podgroup.go`` (the group cycle,
submitPodGroupAlgorithmResult's conditions, updatePodGroupCondition's "never back from True"),
``framework/plugins/gangscheduling/gangscheduling.go`` (PlacementFeasible: "minCount (%d) cannot be satisfied",
isCPGTreeReady, the PodGroup Update hint: a minCount change requeues the group),
``framework/plugins/topologyaware/topology_placement.go`` (one placement per domain, the bound members' domain
only), ``framework/plugins/podgrouppodscount`` + ``noderesources`` ScorePlacement (the best placement wins),
``pkg/controller/resourceclaim/controller.go`` (PodGroup claims), ``k8s.io/dynamic-resource-allocation``
``resourceclaim.BindTo`` / ``IsReservedForPod``, ``pkg/apis/scheduling/validation/validation.go`` (ValidatePodGroup).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scheduler.simulate.simulation import load_objects, simulate
from tests.test_gang import Live as _Live

Obj = dict[str, Any]
RACK = "topology.kubernetes.io/rack"
NS = "default"


class Live(_Live):
    """tests.test_gang's loop, with the gang invariant for v1beta1 PodGroups (ARCHITECTURE §3.3: never more than 0
    and fewer than minCount members bound, except when members are deleted after binding)."""

    def check_invariants(self) -> None:
        self.invariant_checks += 1
        count: dict[str, int] = {}
        for p in self.api.stored("Pod"):
            g = (p["spec"].get("schedulingGroup") or {}).get("podGroupName")
            if g and p["spec"].get("nodeName"):
                count[g] = count.get(g, 0) + 1
        for g in self.api.stored("PodGroup"):
            gang = g["spec"]["schedulingPolicy"].get("gang")
            name = g["metadata"]["name"]
            if gang and name not in self.shrunk and 0 < count.get(name, 0) < gang["minCount"]:
                raise AssertionError(f"group {name}: {count[name]} of minCount {gang['minCount']} bound")


def node(name: str, cpu: str = "4", **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def pod(name: str, group: str | None = None, cpu: str = "1", claims: list[Obj] | None = None, **spec: Any) -> Obj:
    container: Obj = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    if claims:
        container["resources"]["claims"] = [{"name": c["name"]} for c in claims]
    s: Obj = {"schedulerName": "dra-scheduler", "containers": [container], **spec}
    if group:
        s["schedulingGroup"] = {"podGroupName": group}
    if claims:
        s["resourceClaims"] = claims
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": s}


def group(name: str, min_count: int | None = None, key: str | None = None, **spec: Any) -> Obj:
    policy: Obj = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    sp: Obj = {"schedulingPolicy": policy, **spec}
    if key:
        sp["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": sp}


def composite(name: str, min_groups: int | None, parent: str | None = None, key: str | None = None) -> Obj:
    policy: Obj = {"gang": {"minGroupCount": min_groups}} if min_groups is not None else {"basic": {}}
    sp: Obj = {"workloadRef": {"workloadName": "w", "templateName": name}, "schedulingPolicy": policy}
    if parent:
        sp["parentCompositePodGroupName"] = parent
    if key:
        sp["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": sp}


def child(name: str, parent: str, min_count: int) -> Obj:
    return group(name, min_count, parentCompositePodGroupName=parent,
                 workloadRef={"workloadName": "w", "templateName": name})


def run(objs: list[Obj]) -> tuple[dict[str, Obj], dict[str, Obj], list[Obj]]:
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    groups = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "PodGroup"}
    claims = [o for o in res.items if o["kind"] == "ResourceClaim"]
    return pods, groups, claims


def bound(pods: dict[str, Obj]) -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}


def pod_condition(p: Obj) -> Obj | None:
    return next((c for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)


def group_condition(g: Obj, ctype: str = "PodGroupInitiallyScheduled") -> Obj | None:
    return next((c for c in (g.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


# --- gang minCount and basic ---------------------------------------------------------------------------------------


def test_gang_that_cannot_reach_min_count_binds_nothing_and_the_group_says_why() -> None:
    # 3 nodes x 4 cpu, members of 3 cpu: room for 3 of minCount 4
    objs = [node(f"n{i}") for i in range(3)] + [group("g", 4)] + [pod(f"m{i}", "g", "3") for i in range(4)]
    pods, groups, _ = run(objs)
    assert bound(pods) == {}
    for p in pods.values():
        c = pod_condition(p)
        assert c is not None and c["status"] == "False" and c["reason"] == "Unschedulable"
        assert "pod group default/g" in c["message"]
    cond = group_condition(groups["g"])
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] and cond["lastTransitionTime"]
    assert cond["observedGeneration"] == groups["g"]["metadata"].get("generation", 0)


def test_gang_placed_whole_gets_initially_scheduled_true() -> None:
    objs = [node(f"n{i}") for i in range(4)] + [group("g", 4)] + [pod(f"m{i}", "g", "3") for i in range(4)]
    pods, groups, _ = run(objs)
    assert len(bound(pods)) == 4
    cond = group_condition(groups["g"])
    assert cond is not None and cond["status"] == "True" and cond["reason"] == "Scheduled"


def test_gang_waiting_for_members_says_so() -> None:
    objs = [node("n0")] + [group("g", 3)] + [pod(f"m{i}", "g") for i in range(2)]
    pods, groups, _ = run(objs)
    assert bound(pods) == {}
    c = pod_condition(pods["m0"])
    assert c is not None and "2 of minCount 3 pods exist" in c["message"]
    gc = group_condition(groups["g"])
    assert gc is not None and gc["status"] == "False" and "2 of minCount 3" in gc["message"]


def test_basic_group_places_what_fits_and_the_rest_stay_pending_with_a_reason() -> None:
    """basic: no minimum; every member that fits is bound, the others carry PodScheduled=False with a reason."""
    objs = [node("n0"), node("n1")] + [group("g")] + [pod(f"m{i}", "g", "3") for i in range(3)]
    pods, groups, _ = run(objs)
    assert len(bound(pods)) == 2
    [left] = [p for n, p in pods.items() if n not in bound(pods)]
    c = pod_condition(left)
    assert c is not None and c["status"] == "False" and c["reason"] == "Unschedulable" and c["message"]
    assert "cpu" in c["message"], c["message"]
    gc = group_condition(groups["g"])
    assert gc is not None and gc["status"] == "True"


def test_min_count_change_re_evaluates_the_group() -> None:
    """minCount is mutable: lowering it requeues the group (GangScheduling's PodGroup/Update hint) and it is placed."""

    async def go() -> None:
        live = Live([node("n0"), node("n1"), group("g", 3), *(pod(f"m{i}", "g", "3") for i in range(3))])
        await live.run()
        assert not [p for p in live.api.list("Pod") if p["spec"].get("nodeName")]
        pg = live.api.objects[("PodGroup", NS, "g")]
        gc = group_condition(pg)
        assert gc is not None and gc["status"] == "False"
        await live.api.patch("PodGroup", NS, "g", {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
        live.clock.advance(1)
        await live.run()
        assert len([p for p in live.api.list("Pod") if p["spec"].get("nodeName")]) == 2
        gc = group_condition(live.api.objects[("PodGroup", NS, "g")])
        assert gc is not None and gc["status"] == "True"

    asyncio.run(go())


def test_initially_scheduled_never_goes_back_to_false() -> None:
    """updatePodGroupCondition: once True it stays True, even when later members cannot be placed."""

    async def go() -> None:
        live = Live([node("n0"), group("g", 1), pod("m0", "g", "3")])
        await live.run()
        pg = live.api.objects[("PodGroup", NS, "g")]
        first = group_condition(pg)
        assert first is not None and first["status"] == "True"
        live.add([pod("m1", "g", "3")])
        live.clock.advance(1)
        await live.run()
        again = group_condition(live.api.objects[("PodGroup", NS, "g")])
        assert again == first

    asyncio.run(go())


# --- schedulingConstraints.topology ---------------------------------------------------------------------------------


def racks(spec: dict[str, int], cpu: str = "4") -> list[Obj]:
    return [node(f"{r}-{i}", cpu, **{RACK: r}) for r, n in spec.items() for i in range(n)]


def rack_of(name: str) -> str:
    return name.rsplit("-", 1)[0]


def test_topology_key_keeps_every_member_in_one_domain() -> None:
    # 4 members of 3 cpu; ra has 2 nodes, rb 2 nodes, rc 4 nodes: only rc can take all 4 in one rack
    objs = racks({"ra": 2, "rb": 2, "rc": 4}) + [group("g", 4, RACK)] + [pod(f"m{i}", "g", "3") for i in range(4)]
    pods, groups, _ = run(objs)
    assert {rack_of(n) for n in bound(pods).values()} == {"rc"} and len(bound(pods)) == 4
    gc = group_condition(groups["g"])
    assert gc is not None and gc["status"] == "True" and f"{RACK}=rc" in gc["message"]


def test_group_too_big_for_any_domain_binds_nothing_and_names_the_key() -> None:
    objs = racks({"ra": 2, "rb": 3}) + [group("g", 4, RACK)] + [pod(f"m{i}", "g", "3") for i in range(4)]
    pods, groups, _ = run(objs)
    assert bound(pods) == {}  # 5 nodes would take 4 members, but no rack can
    for p in pods.values():
        c = pod_condition(p)
        assert c is not None and c["reason"] == "Unschedulable"
        assert f"spec.schedulingConstraints.topology[0].key {RACK}" in c["message"], c["message"]
        assert "no domain has room for 4 members (largest: rb with room for 3)" in c["message"]
    gc = group_condition(groups["g"])
    assert gc is not None and gc["status"] == "False" and RACK in gc["message"]


def test_domain_is_chosen_by_score_not_first_found() -> None:
    """minCount 2 of 4 members: ra (tightest, tried first) takes 2, rb takes all 4. PodGroupPodsCount makes rb win;
    the first feasible domain would have left 2 members pending."""
    objs = racks({"ra": 2, "rb": 4}) + [group("g", 2, RACK)] + [pod(f"m{i}", "g", "3") for i in range(4)]
    pods, groups, _ = run(objs)
    assert len(bound(pods)) == 4 and {rack_of(n) for n in bound(pods).values()} == {"rb"}
    gc = group_condition(groups["g"])
    assert gc is not None and "the best of 2 feasible domain(s)" in gc["message"] and "ra=" in gc["message"]


def test_equal_pod_counts_prefer_the_fuller_domain() -> None:
    """Both racks take the 2 members. ra (1 node, room for exactly 2) is the tightest and tried first; rb (2 nodes)
    has its memory nearly all requested by other pods. NodeResourcesFit's ScorePlacement (MostAllocated over cpu and
    memory of the domain's nodes, placed members included) scores rb 73 against ra's 50: the group goes to rb."""
    hogs = []
    for i, mem in enumerate(("30Gi", "32Gi")):
        h = pod(f"hog{i}", None, "0", nodeName=f"rb-{i}")
        h["spec"]["containers"][0]["resources"]["requests"] = {"memory": mem}
        hogs.append(h)
    objs = racks({"ra": 1, "rb": 2}) + hogs + [group("g", 2, RACK)] + [pod(f"m{i}", "g", "2") for i in range(2)]
    pods, groups, _ = run(objs)
    placed = {n: v for n, v in bound(pods).items() if n.startswith("m")}
    assert len(placed) == 2 and {rack_of(n) for n in placed.values()} == {"rb"}, placed
    gc = group_condition(groups["g"])
    assert gc is not None
    assert "resources 73" in gc["message"] and "ra=150" in gc["message"], gc["message"]


def test_later_members_follow_the_bound_members_domain() -> None:
    """TopologyPlacementGenerator: with members bound, only their domain is a placement."""

    async def go() -> None:
        live = Live([*racks({"ra": 4, "rb": 1}), group("g", None, RACK), pod("m0", "g", "1", nodeName="rb-0")])
        live.add([pod("m1", "g", "1"), pod("m2", "g", "1")])
        await live.run()
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in live.api.list("Pod")}
        assert placed["m1"] == placed["m2"] == "rb-0"  # ra is emptier, but the group lives in rb

    asyncio.run(go())


# --- PodGroup resourceClaims ----------------------------------------------------------------------------------------

DRIVER = "fabric.example.com"


def fabric_slice(rack: str, devices: int = 1) -> Obj:
    """A rack-wide device (e.g. an NVLink/IB switch partition) published once for every node of the rack."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"fabric-{rack}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": f"fabric-{rack}", "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": RACK, "operator": "In", "values": [rack]}]}]},
            "devices": [{"name": f"partition-{i}"} for i in range(devices)],
        },
    }


def fabric_objects() -> list[Obj]:
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fabric"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "fabric", "namespace": NS},
         "spec": {"spec": {"devices": {"requests": [{"name": "f", "exactly": {"deviceClassName": "fabric"}}]}}}},
    ]


FABRIC_CLAIM = [{"name": "fabric", "resourceClaimTemplateName": "fabric"}]


def test_podgroup_claim_is_made_once_owned_reserved_for_the_group_and_shared_by_every_member() -> None:
    objs = racks({"ra": 2, "rb": 3}) + [fabric_slice("rb")] + fabric_objects()
    objs += [group("g", 3, RACK, resourceClaims=FABRIC_CLAIM)]
    objs += [pod(f"m{i}", "g", "1", claims=FABRIC_CLAIM) for i in range(3)]
    pods, groups, claims = run(objs)
    assert len(bound(pods)) == 3 and {rack_of(n) for n in bound(pods).values()} == {"rb"}
    [claim] = claims  # one claim for the group, none per pod
    meta = claim["metadata"]
    assert meta["name"].startswith("g-fabric-")
    assert meta["annotations"]["resource.kubernetes.io/pod-claim-name"] == "fabric"
    [owner] = meta["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["controller"]) == (
        "scheduling.k8s.io/v1beta1", "PodGroup", "g", True)
    assert owner["uid"] == groups["g"]["metadata"]["uid"]
    assert groups["g"]["status"]["resourceClaimStatuses"] == [{"name": "fabric", "resourceClaimName": meta["name"]}]
    status = claim["status"]
    assert status["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g",
                                      "uid": groups["g"]["metadata"]["uid"]}]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["partition-0"]
    assert "resource.kubernetes.io/delete-protection" in meta["finalizers"]
    for p in pods.values():
        assert p["status"]["resourceClaimStatuses"] == [{"name": "fabric", "resourceClaimName": meta["name"]}]


def test_podgroup_claim_pins_the_group_where_its_device_is() -> None:
    """Without a topology key the shared claim alone keeps the members where the rack's device is visible."""
    objs = racks({"ra": 3, "rb": 3}) + [fabric_slice("rb")] + fabric_objects()
    objs += [group("g", 2, resourceClaims=FABRIC_CLAIM)]
    objs += [pod(f"m{i}", "g", "1", claims=FABRIC_CLAIM) for i in range(2)]
    pods, _, claims = run(objs)
    assert {rack_of(n) for n in bound(pods).values()} == {"rb"} and len(bound(pods)) == 2
    assert len(claims) == 1


def test_podgroup_claim_without_room_binds_nothing_and_holds_nothing() -> None:
    # the only fabric device is in ra, whose 2 nodes cannot take the 3 members
    objs = racks({"ra": 2, "rb": 3}) + [fabric_slice("ra")] + fabric_objects()
    objs += [group("g", 3, resourceClaims=FABRIC_CLAIM)]
    objs += [pod(f"m{i}", "g", "3", claims=FABRIC_CLAIM) for i in range(3)]
    pods, _, claims = run(objs)
    assert bound(pods) == {}
    [claim] = claims
    assert not (claim.get("status") or {}).get("allocation") and not (claim.get("status") or {}).get("reservedFor")


# --- shared claims are one demand in the group's capacity bound (issue 25 item 1) -----------------------------------
#
# Upstream semantics: a claim is allocated once and then reserved for many consumers (resource.k8s.io/v1
# ResourceClaim status.reservedFor: "which entities are currently allowed to use the claim ... a claim that is in
# use or might be in use because it has been reserved must not get deallocated"; up to 256 consumers). KEP-5729
# (DRAWorkloadResourceClaims, beta in 1.37) reserves a PodGroup's claim for the PodGroup and every member uses its
# devices; KEP-4671 (gang scheduling) places the members together. kube-scheduler v1.37.2 (pkg/scheduler, the
# DynamicResources plugin and schedule_one_podgroup.go) allocates such a claim for the first member that needs it
# and the other members find it allocated: its devices are taken once for the whole group.

SHARED_CLASS = "fabric.example.com"
GPU_CLASS = "gpu.example.com"


def _device_class(name: str) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]}}


def _requests(request: str, cls: str, count: int = 1) -> Obj:
    return {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": cls, "count": count}}]}}


def _template(name: str, cls: str, count: int = 1) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS}, "spec": {"spec": _requests(name, cls, count)}}


def _node_slice(node_name: str, driver: str, devices: int) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{driver}"},
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"{driver.split('.')[0]}-{i}"} for i in range(devices)]}}


def _shared_fleet(fabric: int = 2, gpus: int = 4, key: str | None = None) -> list[Obj]:
    """One 8-cpu node (rack ra) with ``fabric`` fabric devices and ``gpus`` GPUs, and an empty node in rack rb."""
    return [node("n0", "8", **{RACK: "ra"}), node("n1", "8", **{RACK: "rb"}),
            _device_class(SHARED_CLASS), _device_class(GPU_CLASS),
            _node_slice("n0", SHARED_CLASS, fabric), _node_slice("n0", GPU_CLASS, gpus),
            _template("fabric", SHARED_CLASS), _template("gpu", GPU_CLASS)]


GPU_CLAIM = {"name": "gpu", "resourceClaimTemplateName": "gpu"}


@pytest.mark.parametrize("key", [None, RACK])
def test_podgroup_claim_shared_by_four_members_is_one_demand(key: str | None) -> None:
    """Issue 25 item 1: a gang of 4 (minCount 4) whose members each use the PodGroup's claim ``fabric`` (one device
    of fabric.example.com) and a GPU claim of their own, on a node with 2 fabric devices and 4 GPUs.
    kube-scheduler 1.37.2 binds all 4 on the one PodGroup claim (KEP-5729, allocated once and reserved for the
    PodGroup in status.reservedFor); the capacity bound counted the claim once per member ("4 needed, 2 free") and,
    with a topology key, gave the rack room for 1 member. Cited upstream: KEP-4671, KEP-5729, kubernetes v1.37.2
    pkg/scheduler, resource.k8s.io/v1 ResourceClaim status.reservedFor."""
    objs = _shared_fleet(fabric=2, gpus=4) + [group("g", 4, key, resourceClaims=FABRIC_CLAIM)]
    objs += [pod(f"m{i}", "g", "1", claims=[*FABRIC_CLAIM, GPU_CLAIM]) for i in range(4)]
    pods, groups, claims = run(objs)
    assert bound(pods) == {f"m{i}": "n0" for i in range(4)}, [pod_condition(p) for p in pods.values()]
    [shared] = [c for c in claims if c["metadata"]["name"].startswith("g-fabric-")]
    results = shared["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1  # one device for the group, not one per member
    assert shared["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                                "name": "g", "uid": groups["g"]["metadata"]["uid"]}]
    for p in pods.values():
        assert {"name": "fabric", "resourceClaimName": shared["metadata"]["name"]} in (
            p["status"]["resourceClaimStatuses"])
    gpus = [c for c in claims if not c["metadata"]["name"].startswith("g-fabric-")]
    assert len(gpus) == 4 and all(c["status"]["allocation"] for c in gpus)


def test_plain_claim_named_by_every_gang_member_is_one_demand() -> None:
    """One user-made ResourceClaim (spec.resourceClaims[].resourceClaimName) named by all 4 members of a gang is
    allocated once and reserved for each of them (resource.k8s.io/v1 ResourceClaim status.reservedFor, up to 256
    consumers; kubernetes v1.37.2 pkg/scheduler DynamicResources): 2 fabric devices are enough for the group. The
    capacity bound counted it once per member and refused the gang (KEP-4671 gang scheduling)."""
    shared: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": "fabric-shared", "namespace": NS}, "spec": _requests("f", SHARED_CLASS)}
    ref = {"name": "fabric", "resourceClaimName": "fabric-shared"}
    objs = _shared_fleet(fabric=2, gpus=4) + [shared, group("g", 4)]
    objs += [pod(f"m{i}", "g", "1", claims=[ref, GPU_CLAIM]) for i in range(4)]
    pods, _, claims = run(objs)
    assert bound(pods) == {f"m{i}": "n0" for i in range(4)}, [pod_condition(p) for p in pods.values()]
    [claim] = [c for c in claims if c["metadata"]["name"] == "fabric-shared"]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == [f"m{i}" for i in range(4)]


def test_already_allocated_shared_claim_is_no_new_demand() -> None:
    """The members' shared claim already holds both fabric devices (allocated on n0, not yet reserved): the group
    needs no fabric device more, so the 4 members bind on n0 with the claim's devices (zero free fabric devices is
    no shortage). A claim is allocated once and then only reserved for more consumers (resource.k8s.io/v1
    ResourceClaim status.reservedFor; kubernetes v1.37.2 pkg/scheduler DynamicResources PreFilter skips
    allocated claims)."""
    shared: Obj = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "fabric-shared", "namespace": NS,
                     "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": _requests("f", SHARED_CLASS, 2),
        "status": {"allocation": {
            "devices": {"results": [{"request": "f", "driver": SHARED_CLASS, "pool": "n0", "device": f"fabric-{i}"}
                                    for i in range(2)]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}}},
    }
    ref = {"name": "fabric", "resourceClaimName": "fabric-shared"}
    objs = _shared_fleet(fabric=2, gpus=4) + [shared, group("g", 4)]
    objs += [pod(f"m{i}", "g", "1", claims=[ref, GPU_CLAIM]) for i in range(4)]
    pods, _, claims = run(objs)
    assert bound(pods) == {f"m{i}": "n0" for i in range(4)}, [pod_condition(p) for p in pods.values()]
    [claim] = [c for c in claims if c["metadata"]["name"] == "fabric-shared"]
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["fabric-0", "fabric-1"]
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == [f"m{i}" for i in range(4)]


def test_shared_claim_plus_own_claims_over_supply_is_refused_with_the_right_numbers() -> None:
    """The bound still refuses a group that cannot fit: the PodGroup claim (1 fabric device, once) plus one fabric
    device of each member's own claim is 1 + 4 = 5 devices of fabric.example.com, and n0 has 4. The message counts
    the shared claim once (it was "8 needed": 2 per member) and says who needs what. Upstream: KEP-4671 (the gang
    binds all or nothing), KEP-5729 + resource.k8s.io/v1 ResourceClaim status.reservedFor (the PodGroup claim is
    allocated once), kubernetes v1.37.2 pkg/scheduler."""
    objs = _shared_fleet(fabric=4, gpus=4) + [_template("own-fabric", SHARED_CLASS)]
    objs += [group("g", 4, resourceClaims=FABRIC_CLAIM)]
    own = {"name": "own", "resourceClaimTemplateName": "own-fabric"}
    objs += [pod(f"m{i}", "g", "1", claims=[*FABRIC_CLAIM, own]) for i in range(4)]
    pods, _, claims = run(objs)
    assert bound(pods) == {}
    [shared] = [c["metadata"]["name"] for c in claims if c["metadata"]["name"].startswith("g-fabric-")]
    c = pod_condition(pods["m0"])
    assert c is not None and c["status"] == "False"
    assert (
        f"not enough devices of class {SHARED_CLASS}: 5 needed, 4 free on the 1 node the members can use "
        f"(4 members of claim templates fabric, own-fabric: their own claims need 1 device(s) each; "
        f"claim default/{shared} shared by 4 members: 1 device(s) once)"
    ) in c["message"], c["message"]
    # with one fabric device more the same group fits, on the one shared claim
    pods, _, _ = run(objs[:4] + [_node_slice("n0", SHARED_CLASS, 5)] + objs[5:])
    assert len(bound(pods)) == 4, [pod_condition(p) for p in pods.values()]


# --- CompositePodGroup ----------------------------------------------------------------------------------------------


def roles(nodes: int, sizes: dict[str, int], cpu: str = "3", min_groups: int | None = 2) -> list[Obj]:
    objs: list[Obj] = [node(f"n{i}") for i in range(nodes)] + [composite("svc", min_groups)]
    for name, n in sizes.items():
        objs.append(child(name, "svc", n))
        objs += [pod(f"{name}-{i}", name, cpu) for i in range(n)]
    return objs


def test_composite_admits_min_group_count_children_together() -> None:
    # prefill 2 + decode 2 + router 1 pods of 3 cpu on 4 nodes: room for 4 pods; minGroupCount 2
    pods, groups, _ = run(roles(4, {"decode": 2, "prefill": 2, "router": 1}))
    placed = bound(pods)
    done = {n.rsplit("-", 1)[0] for n in placed}
    assert len(done) >= 2 and len(placed) == 4
    for role in done:  # each admitted child is whole
        assert all(f"{role}-{i}" in placed for i in range({"decode": 2, "prefill": 2, "router": 1}[role]))
    for role in ("decode", "prefill", "router"):
        gc = group_condition(groups[role])
        assert gc is not None
        assert (gc["status"] == "True") == (role in done)


def test_composite_below_min_group_count_binds_nothing() -> None:
    # room for 2 pods only: one child at most, minGroupCount 2
    pods, groups, _ = run(roles(2, {"decode": 2, "prefill": 2, "router": 2}))
    assert bound(pods) == {}
    c = pod_condition(pods["decode-0"])
    assert c is not None and "composite pod group default/svc: minCount (2) cannot be satisfied" in c["message"]
    for role in ("decode", "prefill", "router"):
        gc = group_condition(groups[role])
        assert gc is not None and gc["status"] == "False"


def test_composite_waits_for_the_tree_quorum() -> None:
    objs = roles(4, {"decode": 2, "prefill": 2})
    objs = [o for o in objs if o["metadata"]["name"] not in ("prefill-1",)]  # prefill misses a member
    objs = [o for o in objs if o["metadata"]["name"] not in ("decode-1",)]
    pods, _, _ = run(objs)
    assert bound(pods) == {}
    c = pod_condition(pods["decode-0"])
    assert c is not None and "waiting for composite pod group default/svc tree to meet quorum" in c["message"]


def test_nested_composites() -> None:
    """root (minGroupCount 2) = [inner (minGroupCount 2) = [a, b], c]: c cannot fit, so the root fails whole even
    though inner could be placed."""
    objs: list[Obj] = [node(f"n{i}") for i in range(2)]
    objs += [composite("root", 2), composite("inner", 2, parent="root")]
    objs += [child("a", "inner", 1), child("b", "inner", 1), child("c", "root", 1)]
    objs += [pod("a-0", "a", "3"), pod("b-0", "b", "3"), pod("c-0", "c", "3")]
    pods, _, _ = run(objs)
    assert bound(pods) == {}
    objs.append(node("n2"))
    pods, _, _ = run(objs)
    assert sorted(bound(pods)) == ["a-0", "b-0", "c-0"]


def test_composite_topology_key_keeps_the_whole_tree_in_one_domain() -> None:
    objs: list[Obj] = racks({"ra": 2, "rb": 3}) + [composite("svc", 2, key=RACK)]
    objs += [child("p", "svc", 2), child("d", "svc", 1)]
    objs += [pod("p-0", "p", "3"), pod("p-1", "p", "3"), pod("d-0", "d", "3")]
    pods, _, _ = run(objs)
    assert len(bound(pods)) == 3 and {rack_of(n) for n in bound(pods).values()} == {"rb"}


# --- validation as the API server -----------------------------------------------------------------------------------


def _load(tmp_path: Any, objs: list[Obj]) -> tuple[list[Obj], list[str]]:
    import yaml

    f = tmp_path / "in.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    rejected: list[str] = []
    return load_objects([str(f)], rejected), rejected


def test_podgroup_with_parent_needs_workload_ref(tmp_path: Any) -> None:
    bad = group("g", 1, parentCompositePodGroupName="svc")
    loaded, rejected = _load(tmp_path, [bad, composite("svc", 1)])
    assert [o["kind"] for o in loaded] == ["CompositePodGroup"]
    assert any("spec.workloadRef: Required value: must be set when parentCompositePodGroupName is set" in r
               for r in rejected), rejected


def test_composite_needs_workload_ref_and_min_group_count(tmp_path: Any) -> None:
    c = composite("svc", 0)
    del c["spec"]["workloadRef"]
    _, rejected = _load(tmp_path, [c])
    assert any("spec.workloadRef: Required value" in r for r in rejected), rejected
    assert any("spec.schedulingPolicy.gang.minGroupCount: Invalid value: 0: must be greater than or equal to 1" in r
               for r in rejected), rejected


def test_podgroup_policy_union_and_min_count(tmp_path: Any) -> None:
    both = group("both", 1)
    both["spec"]["schedulingPolicy"]["basic"] = {}
    zero = group("zero", 0)
    two_keys = group("keys", 1, RACK)
    two_keys["spec"]["schedulingConstraints"]["topology"].append({"key": "zone"})
    _, rejected = _load(tmp_path, [both, zero, two_keys])
    text = "\n".join(rejected)
    assert 'spec.schedulingPolicy: Invalid value: "{basic, gang}": must specify exactly one of: `basic`, `gang`' in text
    assert "spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than or equal to 1" in text
    assert "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item" in text


def test_workload_is_accepted_and_validated(tmp_path: Any) -> None:
    ok: Obj = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
               "metadata": {"name": "w", "namespace": NS},
               "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                   "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]}}
    dup = copy.deepcopy(ok)
    dup["metadata"]["name"] = "dup"
    dup["spec"]["podGroupTemplates"].append(copy.deepcopy(dup["spec"]["podGroupTemplates"][0]))
    loaded, rejected = _load(tmp_path, [ok, dup])
    assert [o["metadata"]["name"] for o in loaded] == ["w"]
    assert any('spec.podGroupTemplates[1].name: Duplicate value: "workers"' in r for r in rejected), rejected
    # and the scheduler caches it (typed, controllerRef and templates)
    res = asyncio.run(simulate([ok, node("n0")]))
    assert res.scheduler is not None
    wl = res.scheduler.cache.objects("Workload")["default/w"]
    assert wl.controller_ref == ("batch", "Job", "train") and wl.templates[0].min_count == 2


def test_job_with_scheduling_is_skipped_with_a_note(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS},
           "spec": {"scheduling": {"schedulingPolicy": {"gang": {"minCount": 2}}},
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    loaded, _ = _load(tmp_path, [job])
    assert loaded == []
    assert "spec.scheduling (WorkloadWithJob)" in capsys.readouterr().err


def test_missing_parent_waits_with_a_reason() -> None:
    objs = [node("n0"), child("a", "nowhere", 1), pod("a-0", "a")]
    pods, _, _ = run(objs)
    c = pod_condition(pods["a-0"])
    assert c is not None and "composite pod group default/nowhere does not exist" in c["message"]


# --- DisruptionTarget -----------------------------------------------------------------------------------------------


def test_preempted_member_of_an_all_group_marks_the_group_disrupted() -> None:
    async def go() -> None:
        g = group("g", 2, disruptionMode={"all": {}})
        live = Live([node("n0"), node("n1"), g, pod("m0", "g", "3"), pod("m1", "g", "3")])
        await live.run()
        assert all(p["spec"].get("nodeName") for p in live.api.list("Pod"))
        # what the preemption executor writes before deleting a victim
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": "dra-scheduler: preempting to accommodate a higher priority pod"}
        await live.api.patch("Pod", NS, "m0", {"status": {"conditions": [cond]}}, subresource="status")
        await asyncio.sleep(0)
        await live.api.delete("Pod", NS, "m0")
        for _ in range(3):
            await asyncio.sleep(0)
        dt = group_condition(live.api.objects[("PodGroup", NS, "g")], "DisruptionTarget")
        assert dt is not None and dt["status"] == "True" and dt["reason"] == "PreemptionByScheduler"
        assert "default/m0" in dt["message"] and "disruptionMode All" in dt["message"]
        init = group_condition(live.api.objects[("PodGroup", NS, "g")])
        assert init is not None and init["status"] == "True"  # both conditions kept

    asyncio.run(go())


def test_single_mode_victim_does_not_disrupt_a_group_that_keeps_min_count() -> None:
    async def go() -> None:
        live = Live([node("n0"), node("n1"), node("n2"), group("g", 2), *(pod(f"m{i}", "g", "3") for i in range(3))])
        await live.run()
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "x"}
        await live.api.patch("Pod", NS, "m0", {"status": {"conditions": [cond]}}, subresource="status")
        for _ in range(3):
            await asyncio.sleep(0)
        assert group_condition(live.api.objects[("PodGroup", NS, "g")], "DisruptionTarget") is None

    asyncio.run(go())


def test_podgroup_claim_by_name_is_reserved_for_the_group() -> None:
    """A PodGroup ``resourceClaims`` entry naming an existing claim (``resourceClaimName``): no claim is made; the
    members that reference it the same way share it, reserved for the PodGroup (BindTo)."""
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "fabric-shared", "namespace": NS},
              "spec": {"devices": {"requests": [{"name": "f", "exactly": {"deviceClassName": "fabric"}}]}}}
    ref = [{"name": "fabric", "resourceClaimName": "fabric-shared"}]
    objs = racks({"ra": 2}) + [fabric_slice("ra")] + fabric_objects() + [shared]
    objs += [group("g", 2, resourceClaims=ref)] + [pod(f"m{i}", "g", "1", claims=ref) for i in range(2)]
    objs += [pod("loner", None, "1", claims=ref)]  # not a member: the claim is reserved for it as a pod
    pods, groups, claims = run(objs)
    assert {"m0", "m1"} <= set(bound(pods))
    [claim] = claims
    reserved = claim["status"]["reservedFor"]
    assert {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g",
            "uid": groups["g"]["metadata"]["uid"]} in reserved
    assert len([r for r in reserved if r.get("resource") == "podgroups"]) == 1  # once for the group, not per member
    if "loner" in bound(pods):
        assert {"resource": "pods", "name": "loner", "uid": pods["loner"]["metadata"]["uid"]} in reserved


def test_basic_group_with_a_topology_key_stays_in_one_domain() -> None:
    """basic + schedulingConstraints.topology: no minimum, but every member placed lands in the same domain."""
    objs = racks({"ra": 1, "rb": 2}) + [group("g", None, RACK)] + [pod(f"m{i}", "g", "3") for i in range(3)]
    pods, _, _ = run(objs)
    placed = bound(pods)
    assert len(placed) == 2 and {rack_of(n) for n in placed.values()} == {"rb"}
    [left] = [p for n, p in pods.items() if n not in placed]
    c = pod_condition(left)
    assert c is not None and c["status"] == "False" and c["message"]


def test_simulate_reports_disruption_target_of_a_preempted_group() -> None:
    """DefaultPreemption evicts the only member of a ``disruptionMode: all`` group for a higher-priority pod: the
    PodGroup in simulate's output carries DisruptionTarget=True, reason PreemptionByScheduler."""
    boss = pod("boss", None, "3", priorityClassName="high")
    objs = [node("n0"), group("g", 1, disruptionMode={"all": {}}), pod("m0", "g", "3", nodeName="n0"), boss,
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
             "value": 1000}]
    pods, groups, _ = run(objs)
    assert pods["boss"]["spec"].get("nodeName") == "n0" and "m0" not in pods
    dt = group_condition(groups["g"], "DisruptionTarget")
    assert dt is not None and (dt["status"], dt["reason"]) == ("True", "PreemptionByScheduler")
    assert "default/m0" in dt["message"]
