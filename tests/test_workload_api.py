"""Pure parts of the Kubernetes 1.37 workload API (scheduler/api/workload_api.py, scheduler/gang/workload.py).

* ``apimeta.SetStatusCondition`` (k8s.io/apimachinery v0.37.2 ``pkg/api/meta/conditions.go``): lastTransitionTime
  changes only with the status;
* ``resourceclaim.BindTo`` / ``IsReservedForPod`` / ``isForPodGroupByPod`` (k8s.io/dynamic-resource-allocation
  v0.37.2): which object a claim is reserved for;
* PodGroupPodsCount's NormalizePlacementScore and NodeResourcesFit's MostAllocated placement score;
* the hierarchy (``GetRootKeyForGroup``: missing parent, cycle, depth).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.dra import claim_from
from scheduler.api.model import pod_from, podgroup_from
from scheduler.api.workload_api import (
    CompositePodGroup,
    LayoutError,
    composite_from,
    consumer_for,
    is_for_pod_group_by_pod,
    is_reserved_for_pod,
    podgroup_conditions,
    root_of,
    set_condition,
)
from scheduler.gang.workload import DomainUsage, best_placement, most_requested_score, placement_scores

NS = "default"


def _pg(name: str = "g", uid: str = "pg-uid", **spec: Any) -> Any:
    return podgroup_from({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": 3},
                          "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}})


def _pod(claims: list[dict[str, Any]], group: str | None = "g") -> Any:
    spec: dict[str, Any] = {"containers": [], "resourceClaims": claims}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return pod_from({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS, "uid": "pod-uid"},
                     "spec": spec})


def test_set_condition_keeps_the_transition_time_when_only_the_message_changes() -> None:
    c = {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable", "message": "a"}
    conds, changed = set_condition([], c, "t1")
    assert changed and conds[0]["lastTransitionTime"] == "t1"
    conds, changed = set_condition(conds, {**c, "message": "b"}, "t2")
    assert changed and conds[0]["lastTransitionTime"] == "t1" and conds[0]["message"] == "b"
    conds, changed = set_condition(conds, {**c, "message": "b"}, "t3")
    assert not changed
    conds, changed = set_condition(conds, {**c, "status": "True", "reason": "Scheduled"}, "t4")
    assert changed and conds[0]["lastTransitionTime"] == "t4"


def test_initially_scheduled_true_is_terminal_and_other_conditions_are_kept() -> None:
    raw = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "g", "namespace": NS, "generation": 2},
           "spec": {"schedulingPolicy": {"basic": {}}},
           "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                                      "message": "", "lastTransitionTime": "t0"}]}}
    pg = podgroup_from(raw)
    conds, changed = podgroup_conditions(pg, False, "Unschedulable", "later pods do not fit", "", "t1")
    assert not changed and conds[0]["status"] == "True"
    conds, changed = podgroup_conditions(pg, None, "", "", "1 member(s) preempted", "t2")
    assert changed and [c["type"] for c in conds] == ["PodGroupInitiallyScheduled", "DisruptionTarget"]
    dt = conds[1]
    assert (dt["status"], dt["reason"], dt["observedGeneration"], dt["lastTransitionTime"]) == (
        "True", "PreemptionByScheduler", 2, "t2")


def test_bind_to_the_podgroup_only_when_the_claim_matches_exactly() -> None:
    pg = _pg(resourceClaims=[{"name": "fabric", "resourceClaimTemplateName": "t"}])
    same = _pod([{"name": "fabric", "resourceClaimTemplateName": "t"}])
    assert consumer_for(same, pg, "fabric") == {"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                                "name": "g", "uid": "pg-uid"}
    other_template = _pod([{"name": "fabric", "resourceClaimTemplateName": "u"}])
    assert consumer_for(other_template, pg, "fabric") == {"resource": "pods", "name": "p", "uid": "pod-uid"}
    other_name = _pod([{"name": "net", "resourceClaimTemplateName": "t"}])
    assert consumer_for(other_name, pg, "net")["resource"] == "pods"
    not_member = _pod([{"name": "fabric", "resourceClaimTemplateName": "t"}], group="h")
    assert consumer_for(not_member, pg, "fabric")["resource"] == "pods"


def _claim(owner: dict[str, Any] | None = None, reserved: list[dict[str, Any]] | None = None) -> Any:
    meta: dict[str, Any] = {"name": "c", "namespace": NS, "uid": "claim-uid"}
    if owner:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    return claim_from({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
                       "spec": {"devices": {"requests": []}}, "status": {"reservedFor": reserved or []}})


def test_is_reserved_for_pod_accepts_its_podgroup_by_name() -> None:
    member = _pod([{"name": "fabric", "resourceClaimTemplateName": "t"}])
    by_group = _claim(reserved=[{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "x"}])
    assert is_reserved_for_pod(member, by_group)
    other_group = _claim(reserved=[{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "h", "uid": "x"}])
    assert not is_reserved_for_pod(member, other_group)
    wrong_group = _claim(reserved=[{"apiGroup": "example.com", "resource": "podgroups", "name": "g", "uid": "x"}])
    assert not is_reserved_for_pod(member, wrong_group)
    assert is_reserved_for_pod(member, _claim(reserved=[{"resource": "pods", "name": "p", "uid": "pod-uid"}]))


def test_claim_owned_by_the_pods_podgroup_is_for_the_pod() -> None:
    member = _pod([{"name": "fabric", "resourceClaimTemplateName": "t"}])
    owner = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "g", "uid": "whatever"}
    assert is_for_pod_group_by_pod(member, _claim(owner))
    assert not is_for_pod_group_by_pod(member, _claim({**owner, "name": "h"}))
    assert not is_for_pod_group_by_pod(member, _claim({**owner, "apiVersion": "scheduling.x-k8s.io/v1alpha1"}))
    assert not is_for_pod_group_by_pod(_pod([], group=None), _claim(owner))


def test_placement_scores_as_podgrouppodscount_plus_fit() -> None:
    usages = [DomainUsage(2, 50, None), DomainUsage(4, 25, None), DomainUsage(4, 30, 10)]
    assert placement_scores(usages) == [50 + 50, 100 + 25, 100 + 30 + 10]
    assert best_placement(usages) == 2
    assert best_placement([DomainUsage(3, 10, None), DomainUsage(3, 10, None)]) == 0  # first on ties
    assert most_requested_score(5, 4) == 100 and most_requested_score(1, 4) == 25 and most_requested_score(1, 0) == 0


def _cpg(name: str, parent: str | None = None) -> CompositePodGroup:
    spec: dict[str, Any] = {"workloadRef": {"workloadName": "w", "templateName": name},
                            "schedulingPolicy": {"gang": {"minGroupCount": 1}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return composite_from({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                           "metadata": {"name": name, "namespace": NS}, "spec": spec})


def test_root_of_follows_parents_and_refuses_bad_layouts() -> None:
    pg = _pg(parentCompositePodGroupName="inner")
    tree = {f"{NS}/inner": _cpg("inner", "root"), f"{NS}/root": _cpg("root")}
    root = root_of(NS, pg, tree)
    assert root is not None and root.meta.name == "root"
    assert root_of(NS, _pg(), tree) is None
    with pytest.raises(LayoutError, match="does not exist"):
        root_of(NS, pg, {f"{NS}/inner": _cpg("inner", "gone")})
    with pytest.raises(LayoutError, match="cycle"):
        root_of(NS, pg, {f"{NS}/inner": _cpg("inner", "outer"), f"{NS}/outer": _cpg("outer", "inner")})
    deep = {f"{NS}/c{i}": _cpg(f"c{i}", f"c{i + 1}" if i < 5 else None) for i in range(6)}
    with pytest.raises(LayoutError, match="deeper than 4"):
        root_of(NS, _pg(parentCompositePodGroupName="c0"), deep)


def test_podgroup_parsing() -> None:
    pg = _pg(schedulingConstraints={"topology": [{"key": "rack"}]}, parentCompositePodGroupName="svc",
             resourceClaims=[{"name": "f", "resourceClaimName": "shared"}], disruptionMode={"all": {}})
    assert (pg.policy, pg.min_member, pg.topology_key, pg.parent, pg.disruption_all) == ("gang", 2, "rack", "svc", True)
    assert pg.claims[0].claim_name == "shared" and pg.claims[0].template_name is None
    basic = podgroup_from({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": "b"}, "spec": {"schedulingPolicy": {"basic": {}}}})
    assert (basic.policy, basic.min_member, basic.is_upstream) == ("basic", 1, True)
