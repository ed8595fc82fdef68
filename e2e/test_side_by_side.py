"""Side by side with upstream kube-scheduler 1.37.2 (issue #9, item 5): the mixed workload of
:mod:`e2e.side_by_side` sent to kube-scheduler and then to dra-scheduler on the same nodes.

Checks: every pod kube-scheduler binds, dra-scheduler binds too (else the missing ones are listed with their
PodScheduled condition); every placement of either satisfies every constraint by the independent checker
(:func:`e2e.side_by_side.check_placements`); the two impossible pods stay pending with PodScheduled=False
under both. Prints the figures (pods bound, same-node agreement, time to bind all).

The checker itself is tested first, offline, on hand-made placements that break each constraint (a checker
that accepted everything would make the live test meaningless).

    .venv/bin/pytest e2e/test_side_by_side.py -q -p no:cacheprovider -s
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from e2e import cluster
from e2e import side_by_side as sbs
from e2e import side_by_side_explain as explain
from e2e.fleet import DELETE_PROTECTION, JSON, Kube, SchedulerProcess, pod_scheduled_condition

# --- the checker, offline -----------------------------------------------------------------------------


def _node(name: str, zone: str, cpu: str = "4", labels: dict[str, str] | None = None,
          taints: list[JSON] | None = None) -> JSON:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, sbs.ZONE: zone, **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}}}


def _pod(name: str, node: str | None, labels: dict[str, str] | None = None, cpu: str = "100m", ns: str = "ns",
         **spec: Any) -> JSON:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                     **spec}}


NODES = [_node("a1", "a"), _node("a2", "a"), _node("b1", "b", labels={"disk": "ssd"}),
         _node("t1", "b", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])]


def _check(pods: list[JSON], **kw: Any) -> list[str]:
    return sbs.check_placements(NODES, pods, **kw)


def test_checker_accepts_a_valid_placement() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "c"}}}]}}
    pods = [_pod("c0", "a1", {"app": "c"}, affinity=anti), _pod("c1", "a2", {"app": "c"}, affinity=anti),
            _pod("s", "b1", nodeSelector={"disk": "ssd"}),
            _pod("tol", "t1", tolerations=[{"key": "k", "operator": "Exists"}]),
            _pod("pending", None, {"app": "c"}, affinity=anti)]
    assert _check(pods) == []


def test_checker_node_selector_affinity_and_taints() -> None:
    assert "node selector" in _check([_pod("s", "a1", nodeSelector={"disk": "ssd"})])[0]
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": sbs.ZONE, "operator": "NotIn", "values": ["a"]}]}]}}}
    assert _check([_pod("x", "b1", affinity=aff)]) == []
    assert "required node affinity" in _check([_pod("x", "a2", affinity=aff)])[0]
    [p] = _check([_pod("t", "t1")])
    assert "taint k=v:NoSchedule not tolerated" in p
    assert "not tolerated" in _check([_pod("t", "t1", tolerations=[{"key": "k", "value": "other"}])])[0]
    assert _check([_pod("t", "t1", tolerations=[{"key": "k", "value": "v", "effect": "NoSchedule"}])]) == []


def test_checker_pod_affinity_and_anti_affinity() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": sbs.ZONE, "labelSelector": {"matchLabels": {"app": "c"}}}]}}
    # same zone, different hosts: violated; also from the side of a pod without the term (symmetry)
    problems = _check([_pod("c0", "a1", {"app": "c"}, affinity=anti), _pod("c1", "a2", {"app": "c"})])
    assert len(problems) == 1 and "anti-affinity" in problems[0] and "violated by ns/c1@a2" in problems[0]
    # another namespace is outside the term's default namespace
    assert _check([_pod("c0", "a1", {"app": "c"}, affinity=anti), _pod("c1", "a2", {"app": "c"}, ns="o")]) == []
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    db = _pod("db", "a1", {"app": "db"})
    assert _check([db, _pod("w", "a1", affinity=aff)]) == []
    assert "required pod affinity" in _check([db, _pod("w", "a2", affinity=aff)])[0]
    assert "required pod affinity" in _check([_pod("w", "a2", affinity=aff)])[0]  # no db at all
    # upstream's exception: nothing matches anywhere and the pod matches its own term
    assert _check([_pod("db2", "a2", {"app": "db"}, affinity=aff)]) == []


def test_checker_spread_skew_ports_and_resources() -> None:
    spread = [{"maxSkew": 1, "topologyKey": sbs.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "s"}}}]
    ok = [_pod(f"s{i}", n, {"app": "s"}, topologySpreadConstraints=spread) for i, n in enumerate(["a1", "b1", "a2"])]
    assert _check(ok) == []
    bad = [*ok, _pod("s3", "a1", {"app": "s"}, topologySpreadConstraints=spread)]  # a: 3, b: 1
    [p] = _check(bad)
    assert "skew 2 > maxSkew 1" in p
    # nodeAffinityPolicy Honor: a node the pods cannot use is no domain
    only_a = [_pod("s0", "a1", {"app": "s"}, topologySpreadConstraints=spread, nodeSelector={sbs.ZONE: "a"}),
              _pod("s1", "a2", {"app": "s"}, topologySpreadConstraints=spread, nodeSelector={sbs.ZONE: "a"})]
    assert _check(only_a) == []
    soft = copy.deepcopy(bad)
    for p_ in soft:
        p_["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] = "ScheduleAnyway"
    assert _check(soft) == []

    def ported(name: str, ip: str = "") -> JSON:
        p_ = _pod(name, "a1")
        p_["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080, "hostIP": ip}]
        return p_

    assert "host port TCP/8080" in _check([ported("p0"), ported("p1")])[0]
    assert "host port" in _check([ported("p0", "10.0.0.1"), ported("p1")])[0]  # 0.0.0.0 overlaps every IP
    assert _check([ported("p0", "10.0.0.1"), ported("p1", "10.0.0.2")]) == []
    assert _check([_pod("big", "a1", cpu="3"), _pod("b2", "a1", cpu="1")]) == []
    assert "cpu requested 4.5 > allocatable 4" in _check([_pod("big", "a1", cpu="3500m"), _pod("b", "a1", cpu="1")])[0]
    assert "pods requested 11" in _check([_pod(f"p{i}", "a2", cpu="1m") for i in range(11)])[0]


def test_checker_volumes_devices_and_extended_resources() -> None:
    pv = {"metadata": {"name": "pv"}, "spec": {"claimRef": {"uid": "pvc-uid"}, "nodeAffinity": {"required": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["b1"]}]}]}}}}
    pvc = {"metadata": {"name": "data", "namespace": "ns", "uid": "pvc-uid"}, "spec": {"volumeName": "pv"},
           "status": {"phase": "Bound"}}
    vol = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    assert _check([_pod("v", "b1", volumes=vol)], pvcs=[pvc], pvs=[pv]) == []
    assert "node affinity does not admit" in _check([_pod("v", "a1", volumes=vol)], pvcs=[pvc], pvs=[pv])[0]
    pending = {**pvc, "spec": {}, "status": {"phase": "Pending"}}
    assert "not Bound" in _check([_pod("v", "b1", volumes=vol)], pvcs=[pending], pvs=[pv])[0]
    assert "does not exist" in _check([_pod("v", "b1", volumes=vol)])[0]

    def claim(name: str, node: str, devices: list[str], pod: str) -> JSON:
        return {"metadata": {"name": name, "namespace": "ns", "finalizers": [DELETE_PROTECTION]},
                "status": {"allocation": {
                    "devices": {"results": [{"request": "r", "driver": "d", "pool": node, "device": d}
                                            for d in devices]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]}}

    def claimed(name: str, node: str, claim_name: str) -> JSON:
        return _pod(name, node, resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}])

    slices = [{"spec": {"driver": "d", "pool": {"name": n}, "devices": [{"name": "g0"}, {"name": "g1"}]}}
              for n in ("a1", "a2")]
    ok = [claimed("x", "a1", "cx"), claimed("y", "a1", "cy")]
    assert _check(ok, claims=[claim("cx", "a1", ["g0"], "x"), claim("cy", "a1", ["g1"], "y")], slices=slices) == []
    twice = _check(ok, claims=[claim("cx", "a1", ["g0"], "x"), claim("cy", "a1", ["g0"], "y")], slices=slices)
    assert any("allocated to ns/cx and ns/cy" in p for p in twice), twice
    assert any("in no ResourceSlice" in p for p in _check(
        ok[:1], claims=[claim("cx", "a1", ["g7"], "x")], slices=slices))

    classes = [{"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}]
    ext = _pod("e", "a1")
    ext["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "2"}}
    ext["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "ce"}}
    assert _check([ext], claims=[claim("ce", "a1", ["g0", "g1"], "e")], classes=classes, slices=slices) == []
    assert "has 1 devices, 2 asked" in _check([ext], claims=[claim("ce", "a1", ["g0"], "e")], classes=classes)[0]
    assert "no extended-resource claim" in _check([ext], classes=classes)[0]
    assert "neither allocatable" in _check([ext])[0]  # no DeviceClass maps the name


def test_quantities() -> None:
    assert [sbs.quantity(q) for q in ("100m", "2", "1500m", "1Gi", "1k", "1e3", "0.5")] == [
        Decimal("0.1"), 2, Decimal("1.5"), 2**30, 1000, 1000, Decimal("0.5")]


# --- live: kube-scheduler, then dra-scheduler --------------------------------------------------------------


@pytest.fixture(scope="module")
def environment(kube: Kube, scheduler: SchedulerProcess) -> Iterator[Kube]:
    sbs.create_environment(kube)
    yield kube
    sbs.delete_environment(kube)


def test_side_by_side_with_kube_scheduler(
    cluster_info: cluster.ClusterInfo, environment: Kube, scheduler: SchedulerProcess
) -> None:
    kube = environment
    cmp = sbs.compare(kube, cluster_info.run_dir)
    zones = sbs.zones(kube)
    print("\n" + sbs.report(cmp, zones))
    detail = sbs.report(cmp, zones, verbose=True)
    n = len(cmp.upstream.pods)
    assert n == len(cmp.ours.pods) == 50
    # the reference first: the workload is placeable and the checker agrees with kube-scheduler
    assert set(cmp.upstream.pending()) == set(sbs.IMPOSSIBLE), detail
    assert cmp.upstream.violations == [], detail
    # ours
    assert cmp.missing() == {}, f"bound by kube-scheduler, not by dra-scheduler: {cmp.missing()}\n{detail}"
    assert cmp.ours.violations == [], detail
    assert set(cmp.ours.pending()) == set(sbs.IMPOSSIBLE), detail
    for k in sbs.IMPOSSIBLE:
        cond = pod_scheduled_condition(cmp.ours.pods[k])
        assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    sbs.reset(kube, cmp.ours.namespaces)


def test_same_state_decisions_match_kube_scheduler_scores(
    cluster_info: cluster.ClusterInfo, environment: Kube, scheduler: SchedulerProcess
) -> None:
    """Free of ordering and tie-breaks: kube-scheduler (--v=10, one pod at a time) logs every plugin's score;
    each of its decisions is re-made by dra-scheduler's framework on the same state. Ours must pick a node
    kube-scheduler scored highest (the same node, or one it scored equal), unless only dra-scheduler's own
    scorers (GpuTopology) explain the difference."""
    kube = environment
    ks, verdicts = explain.explain(kube, cluster_info.run_dir)
    print("\n" + explain.format_verdicts(verdicts))
    assert len(verdicts) == len(ks.bound) == 48
    assert explain.unexplained(verdicts) == [], explain.format_verdicts(explain.unexplained(verdicts))
    sbs.reset(kube, ks.namespaces)


def test_parse_kube_scheduler_scores() -> None:
    log = "\n".join([
        'I1125 06:13:52.1 1 schedule_one.go:984] "Plugin scored node for pod" pod="sbs-ks1-apps/web-0" '
        'plugin="NodeResourcesFit" node="n1" score=96',
        'I1125 06:13:52.1 1 schedule_one.go:984] "Plugin scored node for pod" pod="sbs-ks1-apps/web-0" '
        'plugin="TaintToleration" node="n1" score=300',
        'I1125 06:13:52.1 1 schedule_one.go:984] "Plugin scored node for pod" pod="other/web-0" '
        'plugin="TaintToleration" node="n1" score=300',
        # a second attempt of the same pod replaces the first
        'I1125 06:13:53.1 1 schedule_one.go:984] "Plugin scored node for pod" pod="sbs-ks1-apps/db" '
        'plugin="NodeResourcesFit" node="n1" score=10',
        'I1125 06:13:54.1 1 schedule_one.go:984] "Plugin scored node for pod" pod="sbs-ks1-apps/db" '
        'plugin="NodeResourcesFit" node="n1" score=20',
    ])
    assert explain.parse_scores(log, ["sbs-ks1-apps"]) == {
        "apps/web-0": {"n1": {"NodeResourcesFit": 96, "TaintToleration": 300}},
        "apps/db": {"n1": {"NodeResourcesFit": 20}},
    }


def test_classify_same_state_decisions() -> None:
    ks = {"n1": {"NodeResourcesFit": 96, "TaintToleration": 300},
          "n2": {"NodeResourcesFit": 96, "TaintToleration": 300},
          "n3": {"NodeResourcesFit": 90, "TaintToleration": 300}}
    ours = {n: {**s, "GpuTopology": 0} for n, s in ks.items()}
    assert explain.classify("p", "n1", "n1", ks, ours).kind == "same"
    assert explain.classify("p", "n1", "n2", ks, ours).kind == "tie"
    # a real scoring difference: ours scored n3 higher through NodeResourcesFit
    bad = {**ours, "n3": {**ours["n3"], "NodeResourcesFit": 100}}
    v = explain.classify("p", "n1", "n3", ks, bad)
    assert v.kind == "DIFF" and v.disagree == {"NodeResourcesFit"} and explain.unexplained([v]) == [v]
    assert v.plugins["NodeResourcesFit"] == (96, 90, 96, 100)
    # explained by dra-scheduler's own scorer alone
    own = {**ours, "n3": {**ours["n3"], "GpuTopology": 300}}
    v = explain.classify("p", "n1", "n3", ks, own)
    assert v.kind == "DIFF" and v.disagree == {"GpuTopology"} and explain.unexplained([v]) == []
    # feasibility: a node kube-scheduler found infeasible, or none at all
    assert explain.classify("p", "n1", "n9", ks, ours).disagree == {"(feasibility)"}
    assert explain.unexplained([explain.classify("p", "n1", "", ks, ours)])
    assert explain.classify("p", "n1", "n2", {}, {}).disagree == {"(feasibility)"}  # only n1 was feasible
