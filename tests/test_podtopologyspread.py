"""PodTopologySpread: kube-scheduler v1.37.2 semantics.

Case lists ported from ``pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go``
(TestPreFilterState, TestSingleConstraint, TestMultipleConstraints, TestPreFilterStateAddPod/RemovePod,
TestPodTopoSignatures), ``scoring_test.go`` (TestPreScoreSkip, TestPreScoreStateEmptyNodes,
TestPodTopologySpreadScore) and ``apis/config/validation/validation_pluginargs_test.go``
(TestValidatePodTopologySpreadArgs). Feature gates as in 1.37 (node inclusion policies and matchLabelKeys
on), so the cases that run with a gate switched off are not ported. Then end to end through ``simulate``:
the zone spread of the issue, the system default constraints, and the reuse memo never returning a
verdict made stale by a pod placed on another node.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    SPEC,
    PodTopologySpread,
    validate_args,
)
from plugins.podtopologyspread.common import pod_specs
from plugins.podtopologyspread.filtering import PreFilterState
from plugins.podtopologyspread.scoring import PreScoreState, go_round
from scheduler.api.labelselector import selector_from
from scheduler.api.model import Pod, pod_from
from scheduler.api.workloads import ReplicaSet, Service, replicaset_from, service_from, statefulset_from
from scheduler.cache.cache import Cache, Snapshot
from scheduler.config.registry import default_registry
from scheduler.config.schedulerconfig import ConfigError, load_config_text
from scheduler.framework.interface import Code, CycleState, NodeScore
from scheduler.simulate.simulation import simulate

Obj = dict[str, Any]

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DNS = "DoNotSchedule"
SA = "ScheduleAnyway"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSET: Any = object()
LIST = {"defaultingType": "List"}
SYSTEM = {"defaultingType": "System"}
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}

S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- builders -----------------------------------------------------------------------------------------------


def node(name: str, labels: Mapping[str, str] | None = None, taints: Sequence[Obj] = ()) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": list(taints)},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def zn(name: str, zone: str, **extra: str) -> Obj:
    """A node with the test labels ``zone`` and ``node`` (upstream's st.MakeNode().Label(...))."""
    return node(name, {"zone": zone, "node": name, **extra})


def hn(name: str, **extra: str) -> Obj:
    return node(name, {HOST: name, **extra})


def tsc(
    skew: int,
    key: str,
    when: str = DNS,
    selector: Any = UNSET,
    *,
    min_domains: int | None = None,
    affinity: str | None = None,
    taints: str | None = None,
    keys: Sequence[str] | None = None,
) -> Obj:
    c: Obj = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not UNSET and selector is not None:
        c["labelSelector"] = selector
    elif selector is UNSET:
        c["labelSelector"] = FOO
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity is not None:
        c["nodeAffinityPolicy"] = affinity
    if taints is not None:
        c["nodeTaintsPolicy"] = taints
    if keys is not None:
        c["matchLabelKeys"] = list(keys)
    return c


def pod(
    name: str = "p",
    labels: Mapping[str, str] | None = None,
    *,
    on: str = "",
    ns: str = "default",
    spread: Sequence[Obj] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: Sequence[Obj] | None = None,
    tolerations: Sequence[Obj] = (),
    terminating: bool = False,
    owner: tuple[str, str, str] | None = None,
    cpu: str = "100m",
) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "labels": dict(labels or {})}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner is not None:
        api, kind, oname = owner
        meta["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": oname, "uid": oname, "controller": True}]
    spec: Obj = {
        "schedulerName": "dra-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }
    if on:
        spec["nodeName"] = on
    if spread:
        spec["topologySpreadConstraints"] = list(spread)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if affinity is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(affinity)}]
                }
            }
        }
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def on(node_name: str, name: str, *labels: str, ns: str = "default", terminating: bool = False) -> Obj:
    """An existing pod on ``node_name`` with the given labels (value "")."""
    return pod(name, dict.fromkeys(labels, ""), on=node_name, ns=ns, terminating=terminating)


def service(name: str, selector: Mapping[str, str] | None, ns: str = "default") -> Obj:
    spec: Obj = {} if selector is None else {"selector": dict(selector)}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def workload(kind: str, name: str, selector: Any, ns: str = "default") -> Obj:
    api = "v1" if kind == "ReplicationController" else "apps/v1"
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": selector},
    }


def snapshot(nodes: Sequence[Obj], pods: Sequence[Obj] = (), objs: Sequence[Obj] = ()) -> Snapshot:
    c = Cache()
    for n in nodes:
        c.apply("Node", "ADDED", n)
    for o in objs:
        c.apply(o["kind"], "ADDED", o)
    for p in pods:
        c.apply("Pod", "ADDED", p)
    assert not c.conversion_errors, c.conversion_errors
    return c.snapshot()


def pre_filter(
    p: Obj, nodes: Sequence[Obj], existing: Sequence[Obj] = (), objs: Sequence[Obj] = (), args: Obj = LIST
) -> tuple[PodTopologySpread, CycleState, Pod, Code]:
    pl = PodTopologySpread(args)
    cs = CycleState(snapshot(nodes, existing, objs))
    the_pod = pod_from(p)
    res, st = pl.pre_filter(cs, the_pod)
    assert res is None
    return pl, cs, the_pod, st.code


def filter_codes(p: Obj, nodes: Sequence[Obj], existing: Sequence[Obj] = ()) -> dict[str, Code]:
    pl, cs, the_pod, code = pre_filter(p, nodes, existing)
    assert code == S
    out = {}
    for n in cs.snapshot.nodes:
        st = pl.filter(cs, the_pod, n)
        out[n.name] = st.code
        if st.code == U:
            assert st.reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
        elif st.code == UU:
            assert st.reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,)
    return out


def counts(cs: CycleState) -> list[dict[str, int]]:
    s: PreFilterState = cs.read(PRE_FILTER_STATE_KEY)
    return s.counts


def mins(cs: CycleState) -> list[int]:
    s: PreFilterState = cs.read(PRE_FILTER_STATE_KEY)
    return [s.min_match(i) for i in range(len(s.constraints))]


def scores(
    p: Obj,
    nodes: Sequence[Obj],
    failed: Sequence[Obj] = (),
    existing: Sequence[Obj] = (),
    objs: Sequence[Obj] = (),
    args: Obj = SYSTEM,
) -> dict[str, int]:
    pl = PodTopologySpread(args)
    snap = snapshot([*nodes, *failed], existing, objs)
    cs = CycleState(snap)
    the_pod = pod_from(p)
    cand = [snap.node_map[n["metadata"]["name"]] for n in nodes]
    assert pl.pre_score(cs, the_pod, cand).is_success
    out = [NodeScore(n.name, pl.score(cs, the_pod, n)) for n in cand]
    assert pl.normalize_score(cs, the_pod, out).is_success
    return {s.name: s.score for s in out}


FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
SPREAD_2_1_0_3 = [
    on("node-a", "p-a1", "foo"),
    on("node-a", "p-a2", "foo"),
    on("node-b", "p-b1", "foo"),
    on("node-y", "p-y1", "foo"),
    on("node-y", "p-y2", "foo"),
    on("node-y", "p-y3", "foo"),
]


def codes(a: Code, b: Code, x: Code, y: Code) -> dict[str, Code]:
    return {"node-a": a, "node-b": b, "node-x": x, "node-y": y}


# --- Filter: TestSingleConstraint ----------------------------------------------------------------------------

SINGLE: list[tuple[str, Obj, list[Obj], list[Obj], dict[str, Code]]] = [
    ("no existing pods", pod(labels={"foo": ""}, spread=[tsc(1, "zone")]), FOUR, [], codes(S, S, S, S)),
    (
        "no existing pods, incoming pod doesn't match itself",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", selector=BAR)]),
        FOUR,
        [],
        codes(S, S, S, S),
    ),
    (
        "existing pods in a different namespace do not count",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone")]),
        FOUR,
        [
            on("node-a", "p-a1", "foo", ns="ns1"),
            on("node-a", "p-b1", "foo", ns="ns2"),
            on("node-x", "p-x1", "foo"),
            on("node-y", "p-y1", "foo"),
        ],
        codes(S, S, U, U),
    ),
    (
        "existing pods do not match null selector",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", selector=None)]),
        FOUR,
        [on("node-x", "p-x1", "foo"), on("node-y", "p-y1", "foo")],
        codes(S, S, S, S),
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone")]),
        FOUR,
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-y", "p-y1", "foo"),
            on("node-y", "p-y2", "foo"),
            on("node-y", "p-y3", "foo"),
        ],
        codes(S, S, S, S),
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone")]),
        [zn("node-a", "zone1"), node("node-b", {"zon": "zone1", "node": "node-b"}), *FOUR[2:]],
        [
            on("node-a", "p-a1", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-x", "p-x1", "foo"),
            on("node-y", "p-y1", "foo"),
        ],
        codes(S, UU, U, U),
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        pod(labels={"foo": ""}, spread=[tsc(1, "rack")]),
        [zn("node-a", "zone1"), zn("node-x", "zone2")],
        [],
        {"node-a": UU, "node-x": UU},
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        pod(labels={"foo": ""}, spread=[tsc(1, "node")]),
        FOUR,
        SPREAD_2_1_0_3,
        codes(U, U, S, U),
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        pod(labels={"foo": ""}, spread=[tsc(2, "node")]),
        FOUR,
        SPREAD_2_1_0_3,
        codes(U, S, S, U),
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        pod(labels={"bar": ""}, spread=[tsc(1, "node")]),
        FOUR,
        SPREAD_2_1_0_3,
        codes(U, S, S, U),
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        pod(
            labels={"foo": ""},
            spread=[tsc(1, "node")],
            affinity=[{"key": "node", "operator": "In", "values": ["node-a", "node-y"]}],
        ),
        FOUR,
        SPREAD_2_1_0_3,
        codes(S, S, S, U),
    ),
    (
        "terminating Pods should be excluded",
        pod(labels={"foo": ""}, spread=[tsc(1, "node")]),
        [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
        [on("node-a", "p-a", "foo", terminating=True), on("node-b", "p-b", "foo")],
        {"node-a": S, "node-b": U},
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        pod(
            labels={"foo": ""},
            spread=[tsc(1, "zone")],
            affinity=[{"key": "node", "operator": "NotIn", "values": ["node-b"]}],
        ),
        FOUR,
        [on("node-b", "p-b1", "foo"), on("node-b", "p-b2", "foo"), on("node-y", "p-y1", "foo")],
        codes(S, S, U, U),
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, "
        "then the third node fits",
        pod(labels={"foo": ""}, spread=[tsc(2, "node", min_domains=4)]),
        [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-b", "p-b2", "foo"),
            on("node-c", "p-c1", "foo"),
        ],
        {"node-a": U, "node-b": U, "node-c": S},
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, "
        "then the all nodes fit",
        pod(labels={"foo": ""}, spread=[tsc(2, "node", min_domains=2)]),
        [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-b", "p-b2", "foo"),
            on("node-c", "p-c1", "foo"),
        ],
        {"node-a": S, "node-b": S, "node-c": S},
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, "
        "then the third and fourth nodes fit",
        pod(labels={"foo": ""}, spread=[tsc(2, "zone", min_domains=3)]),
        FOUR,
        [on("node-a", "p-b1", "foo"), on("node-b", "p-b2", "foo"), on("node-y", "p-y1", "foo")],
        codes(U, U, S, S),
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
        pod(labels={"foo": ""}, spread=[tsc(2, "zone", min_domains=1)]),
        FOUR,
        [on("node-a", "p-b1", "foo"), on("node-b", "p-b2", "foo"), on("node-y", "p-y1", "foo")],
        codes(S, S, S, S),
    ),
]

_INCL_NODES = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-x", {"node": "node-x", "foo": ""}),
    node("node-y", {"node": "node-y"}),
]
_INCL_TAINT_NODES = [*_INCL_NODES[:3], node("node-y", {"node": "node-y"}, [TAINT])]
_INCL_PODS = [on("node-a", "p-b1", "foo"), on("node-b", "p-b2", "foo"), on("node-y", "p-y1", "foo")]
_FOO_IN = [{"key": "foo", "operator": "In", "values": [""]}]

SINGLE += [
    (
        "NodeAffinityPolicy honored with labelSelectors",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "node")]),
        _INCL_NODES,
        _INCL_PODS,
        codes(U, U, S, S),
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "node", affinity="Ignore")]),
        _INCL_NODES,
        _INCL_PODS,
        codes(U, U, S, U),
    ),
    (
        "NodeAffinityPolicy honored with nodeAffinity",
        pod(labels={"foo": ""}, affinity=_FOO_IN, spread=[tsc(1, "node")]),
        _INCL_NODES,
        _INCL_PODS,
        codes(U, U, S, S),
    ),
    (
        "NodeAffinityPolicy ignored with nodeAffinity",
        pod(labels={"foo": ""}, affinity=_FOO_IN, spread=[tsc(1, "node", affinity="Ignore")]),
        _INCL_NODES,
        _INCL_PODS,
        codes(U, U, S, U),
    ),
    (
        "NodeTaintsPolicy honored",
        pod(labels={"foo": ""}, spread=[tsc(1, "node", taints="Honor")]),
        _INCL_TAINT_NODES,
        _INCL_PODS,
        codes(U, U, S, S),
    ),
    (
        "NodeTaintsPolicy ignored",
        pod(labels={"foo": ""}, spread=[tsc(1, "node")]),
        _INCL_TAINT_NODES,
        _INCL_PODS,
        codes(U, U, S, U),
    ),
]


@pytest.mark.parametrize(("p", "nodes", "existing", "want"), [c[1:] for c in SINGLE], ids=[c[0] for c in SINGLE])
def test_filter_single_constraint(p: Obj, nodes: list[Obj], existing: list[Obj], want: dict[str, Code]) -> None:
    assert filter_codes(p, nodes, existing) == want


# --- Filter: TestMultipleConstraints ---------------------------------------------------------------------------

_ZN = [tsc(1, "zone"), tsc(1, "node")]
_FB = [tsc(1, "zone"), tsc(1, "node", selector=BAR)]

MULTI: list[tuple[str, Obj, list[Obj], list[Obj], dict[str, Code]]] = [
    (
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        pod(labels={"foo": ""}, spread=_ZN),
        FOUR,
        SPREAD_2_1_0_3,
        codes(U, U, S, U),
    ),
    (
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        pod(labels={"foo": ""}, spread=_ZN),
        FOUR,
        [*SPREAD_2_1_0_3, on("node-y", "p-y4", "foo")],
        codes(U, U, U, U),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        pod(labels={"foo": "", "bar": ""}, spread=_FB),
        FOUR,
        [on("node-a", "p-a1", "foo"), on("node-y", "p-y1", "bar")],
        codes(U, U, S, U),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        pod(labels={"foo": "", "bar": ""}, spread=_FB),
        FOUR,
        [on("node-a", "p-a1", "foo"), on("node-x", "p-x1", "bar"), on("node-y", "p-y1", "bar")],
        codes(U, U, U, U),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        pod(labels={"foo": "", "bar": ""}, spread=_FB),
        FOUR,
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo", "bar"),
            on("node-y", "p-y1", "foo"),
            on("node-y", "p-y2", "foo", "bar"),
            on("node-y", "p-y3", "foo"),
        ],
        codes(U, S, U, U),
    ),
    (
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
        pod(labels={"bar": ""}, spread=_FB),
        FOUR,
        [on("node-a", "p-a1", "foo"), on("node-x", "p-x1", "bar"), on("node-y", "p-y1", "bar")],
        codes(S, S, U, U),
    ),
    (
        "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
        pod(labels={"foo": ""}, spread=_ZN),
        [FOUR[0], FOUR[1], node("node-x", {"zone": "zone2"}), FOUR[3]],
        [on("node-a", "p-a1", "foo"), on("node-y", "p-y3", "foo")],
        codes(U, S, UU, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "zone"), tsc(1, "node", affinity="Ignore")]),
        [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", foo=""), zn("node-x", "zone2", foo=""), FOUR[3]],
        [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo"), on("node-y", "p-y1", "foo")],
        codes(U, U, S, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", taints="Honor"), tsc(1, "node")]),
        [
            zn("node-a", "zone1", foo=""),
            zn("node-b", "zone1", foo=""),
            zn("node-x", "zone2", foo=""),
            node("node-y", {"zone": "zone2", "node": "node-y"}, [TAINT]),
        ],
        [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo"), on("node-y", "p-y1", "foo")],
        codes(U, U, S, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=_ZN),
        [
            zn("node-a", "zone1", foo=""),
            FOUR[1],
            zn("node-x", "zone2", foo=""),
            node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, [TAINT]),
        ],
        [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo"), on("node-y", "p-y1", "foo")],
        codes(U, S, S, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        pod(
            labels={"foo": ""},
            node_selector={"foo": ""},
            spread=[tsc(1, "zone", taints="Honor"), tsc(1, "node", affinity="Ignore")],
        ),
        [
            zn("node-a", "zone1", foo=""),
            FOUR[1],
            zn("node-x", "zone2", foo=""),
            node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, [TAINT]),
        ],
        [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo"), on("node-y", "p-y1", "foo")],
        codes(U, U, S, U),
    ),
    (
        "two Constraints on zone, spreads = [3/3, 2/1]",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone", selector=BAR), tsc(1, "zone")]),
        FOUR,
        [
            on("node-a", "p-a1", "foo", "bar"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo", "bar"),
            on("node-y", "p-y1", "foo"),
            on("node-y", "p-y2", "foo", "bar"),
            on("node-y", "p-y3", "foo"),
        ],
        codes(U, U, S, S),
    ),
    (
        "two Constraints on zone, spreads = [3/4, 2/1]",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone", selector=BAR), tsc(1, "zone")]),
        FOUR,
        [
            on("node-a", "p-a1", "foo", "bar"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo", "bar"),
            on("node-y", "p-y1", "foo"),
            on("node-y", "p-y2", "foo", "bar"),
            on("node-y", "p-y3", "foo"),
            on("node-y", "p-y4", "foo"),
        ],
        codes(U, U, U, U),
    ),
]


@pytest.mark.parametrize(("p", "nodes", "existing", "want"), [c[1:] for c in MULTI], ids=[c[0] for c in MULTI])
def test_filter_multiple_constraints(p: Obj, nodes: list[Obj], existing: list[Obj], want: dict[str, Code]) -> None:
    assert filter_codes(p, nodes, existing) == want


# --- PreFilter state: TestPreFilterState -----------------------------------------------------------------------

_P5 = [
    on("node-a", "p-a1", "foo"),
    on("node-a", "p-a2", "foo"),
    on("node-b", "p-b1", "foo"),
    on("node-y", "p-y1", "foo"),
    on("node-y", "p-y2", "foo"),
]

PRE_FILTER: list[tuple[str, Obj, list[Obj], list[Obj], list[dict[str, int]], list[int]]] = [
    (
        "clean cluster with one spreadConstraint",
        pod(labels={"foo": ""}, spread=[tsc(5, "zone", selector={"matchLabels": {"foo": "bar"}})]),
        FOUR,
        [],
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "normal case with one spreadConstraint",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone")]),
        FOUR,
        _P5,
        [{"zone1": 3, "zone2": 2}],
        [2],
    ),
    (
        "normal case with null label selector",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", selector=None)]),
        FOUR,
        _P5,
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "normal case with one spreadConstraint, on a 3-zone cluster",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone")]),
        [*FOUR, zn("node-o", "zone3"), zn("node-p", "zone3")],
        _P5,
        [{"zone1": 3, "zone2": 2, "zone3": 0}],
        [0],
    ),
    (
        "namespace mismatch doesn't count",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone")]),
        FOUR,
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo", ns="ns1"),
            on("node-b", "p-b1", "foo"),
            on("node-y", "p-y1", "foo", ns="ns2"),
            on("node-y", "p-y2", "foo"),
        ],
        [{"zone1": 2, "zone2": 1}],
        [1],
    ),
    (
        "normal case with two spreadConstraints",
        pod(labels={"foo": ""}, spread=_ZN),
        FOUR,
        [*SPREAD_2_1_0_3, on("node-y", "p-y4", "foo")],
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}],
        [3, 0],
    ),
    (
        "soft spreadConstraints should be bypassed",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA), tsc(1, "zone"), tsc(1, "node", SA), tsc(1, "node")]),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [*SPREAD_2_1_0_3, on("node-y", "p-y4", "foo")],
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
        [3, 1],
    ),
    (
        "different labelSelectors - simple version",
        pod(labels={"foo": "", "bar": ""}, spread=_FB),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [on("node-a", "p-a", "foo"), on("node-b", "p-b", "bar")],
        [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}],
        [0, 0],
    ),
    (
        "two spreadConstraints, and with podAffinity",
        pod(
            labels={"foo": ""},
            spread=_ZN,
            affinity=[{"key": "node", "operator": "NotIn", "values": ["node-x"]}],
        ),
        FOUR,
        [*SPREAD_2_1_0_3, on("node-y", "p-y4", "foo")],
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
        [3, 1],
    ),
    (
        "NodeAffinityPolicy honored with labelSelectors",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "node", selector=BAR)]),
        [
            node("node-a", {"node": "node-a", "foo": ""}),
            node("node-b", {"node": "node-b", "foo": ""}),
            node("node-c", {"node": "node-c", "bar": ""}),
        ],
        [on("node-a", "p-a", "bar"), on("node-b", "p-b", "bar"), on("node-b", "p-c", "bar"), on("node-c", "p-d")],
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "node", selector=BAR, affinity="Ignore")]),
        [
            node("node-a", {"node": "node-a", "foo": ""}),
            node("node-b", {"node": "node-b", "foo": ""}),
            node("node-c", {"node": "node-c", "bar": ""}),
        ],
        [on("node-a", "p-a", "bar"), on("node-b", "p-b", "bar"), on("node-b", "p-c", "bar"), on("node-c", "p-d")],
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "NodeTaintsPolicy honored",
        pod(labels={"foo": ""}, spread=[tsc(1, "node", selector=BAR, taints="Honor")]),
        [
            node("node-a", {"node": "node-a"}),
            node("node-b", {"node": "node-b"}),
            node("node-c", {"node": "node-c", "bar": ""}, [TAINT]),
        ],
        [on("node-a", "p-a", "bar"), on("node-b", "p-b", "bar"), on("node-b", "p-c", "bar"), on("node-c", "p-d")],
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "NodeTaintsPolicy honored with tolerated taints",
        pod(
            labels={"foo": ""},
            spread=[tsc(1, "node", selector=BAR, taints="Honor")],
            tolerations=[{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
        ),
        [
            node("node-a", {"node": "node-a"}),
            node("node-b", {"node": "node-b"}),
            node("node-c", {"node": "node-c", "bar": ""}, [TAINT]),
        ],
        [on("node-a", "p-a", "bar"), on("node-b", "p-b", "bar"), on("node-b", "p-c", "bar"), on("node-c", "p-d")],
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
        pod(
            labels={"foo": ""},
            node_selector={"foo": ""},
            spread=[tsc(1, "zone", affinity="Ignore"), tsc(1, "node", taints="Honor")],
        ),
        [
            zn("node-a", "zone1"),
            node("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}, [TAINT]),
            zn("node-x", "zone2", foo=""),
            zn("node-y", "zone2", foo=""),
        ],
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo"),
            on("node-x", "p-x1", "foo"),
            on("node-x", "p-x2", "foo"),
            on("node-y", "p-y1", "foo"),
        ],
        [{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}],
        [2, 1],
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        pod(labels={"foo": "", "bar": "a"}, spread=[tsc(1, "zone", keys=["bar"])]),
        FOUR,
        [
            on("node-a", "p-a1", "foo"),
            pod("p-a2", {"foo": "", "bar": "a"}, on="node-a"),
            on("node-b", "p-b1", "foo"),
            pod("p-y1", {"foo": "", "bar": "a"}, on="node-y"),
            on("node-y", "p-y2", "bar"),
        ],
        [{"zone1": 1, "zone2": 1}],
        [1],
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        pod(labels={"foo": "a"}, spread=[tsc(1, "zone", selector={}, keys=["foo"])]),
        FOUR,
        [pod(f"p-{i}", {"foo": "a"}, on=n) for i, n in enumerate(["node-a", "node-a", "node-b", "node-y", "node-y"])],
        [{"zone1": 3, "zone2": 2}],
        [2],
    ),
    (
        "key in matchLabelKeys is ignored when LabelSelector is nil",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", selector=None, keys=["bar"])]),
        FOUR,
        [pod(f"p-{i}", {"foo": "a"}, on=n) for i, n in enumerate(["node-a", "node-a", "node-b", "node-y", "node-y"])],
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "key in matchLabelKeys is ignored when it isn't exist in pod.labels",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", keys=["bar"])]),
        FOUR,
        [pod(f"p-{i}", {"foo": "a"}, on=n) for i, n in enumerate(["node-a", "node-a", "node-b", "node-y", "node-y"])],
        [{"zone1": 3, "zone2": 2}],
        [2],
    ),
    (
        "two spreadConstraints with the same topologyKey",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone"), tsc(1, "zone", selector=BAR)]),
        FOUR,
        [
            on("node-a", "p-a1", "foo", "bar"),
            on("node-b", "p-b1", "foo"),
            on("node-x", "p-x1", "bar"),
            on("node-y", "p-y1", "foo", "bar"),
            on("node-y", "p-y2", "bar"),
        ],
        [{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}],
        [1, 1],
    ),
]


@pytest.mark.parametrize(
    ("p", "nodes", "existing", "want_counts", "want_mins"), [c[1:] for c in PRE_FILTER], ids=[c[0] for c in PRE_FILTER]
)
def test_pre_filter_state(
    p: Obj, nodes: list[Obj], existing: list[Obj], want_counts: list[dict[str, int]], want_mins: list[int]
) -> None:
    _, cs, _, code = pre_filter(p, nodes, existing)
    assert code == S
    assert counts(cs) == want_counts
    assert mins(cs) == want_mins


def test_pre_filter_skips_without_hard_constraints() -> None:
    # "skip if not specified" and a pod with soft constraints only.
    assert pre_filter(pod(labels={"foo": ""}), FOUR[:1])[3] == Code.SKIP
    assert pre_filter(pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA)]), FOUR[:1])[3] == Code.SKIP


def test_filter_without_pre_filter_state_is_an_error() -> None:
    """TestPreFilterDisabled."""
    pl = PodTopologySpread(LIST)
    cs = CycleState(snapshot(FOUR[:1]))
    st = pl.filter(cs, pod_from(pod()), cs.snapshot.nodes[0])
    assert st.code == Code.ERROR
    assert st.message == 'reading "PreFilterPodTopologySpread" from cycleState: not found'


def test_matchlabelkeys_merge_and_the_api_server_merge_agree() -> None:
    """The API server (1.34+) appends ``key In (value)`` to labelSelector at creation; the scheduler merges
    matchLabelKeys again: the duplicated requirement changes nothing."""
    c = tsc(1, "zone", keys=["bar"])
    merged = dict(
        c,
        labelSelector={
            "matchExpressions": [*FOO["matchExpressions"], {"key": "bar", "operator": "In", "values": ["a"]}]
        },
    )
    existing = [
        on("node-a", "p-a1", "foo"),
        pod("p-a2", {"foo": "", "bar": "a"}, on="node-a"),
        pod("p-y1", {"foo": "", "bar": "b"}, on="node-y"),
    ]
    a = pre_filter(pod(labels={"foo": "", "bar": "a"}, spread=[c]), FOUR, existing)[1]
    b = pre_filter(pod(labels={"foo": "", "bar": "a"}, spread=[merged]), FOUR, existing)[1]
    assert counts(a) == counts(b) == [{"zone1": 1, "zone2": 0}]


# --- default constraints --------------------------------------------------------------------------------------


def test_default_constraints_and_a_service() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": DNS},
            {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SA},
            {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": DNS},
        ],
    }
    p = pod(labels={"foo": "bar", "baz": "kar"})
    pl, cs, the_pod, code = pre_filter(p, [], objs=[service("s", {"foo": "bar"})], args=args)
    assert code == S
    s: PreFilterState = cs.read(PRE_FILTER_STATE_KEY)
    want_sel = selector_from({"matchLabels": {"foo": "bar"}}, "s")
    assert [(c.max_skew, c.topology_key, c.selector) for c in s.constraints] == [
        (3, "node", want_sel),
        (5, "rack", want_sel),
    ]
    assert pl.sign(cs, the_pod) is None
    # A service that doesn't match: no constraints, Skip, and the pod is signable.
    pl, cs, the_pod, code = pre_filter(p, [], objs=[service("s", {"baz": "kep"})], args=args)
    assert code == Code.SKIP
    assert pl.sign(cs, the_pod) == ()
    # The pod has its own constraints: the defaults do not apply.
    own = pod(
        labels={"foo": "bar", "baz": "tar"},
        spread=[
            tsc(1, "zone", selector={"matchLabels": {"baz": "tar"}}),
            tsc(2, "planet", SA, {"matchLabels": {"fot": "rok"}}),
        ],
    )
    _, cs, _, code = pre_filter(own, [], objs=[service("s", {"foo": "bar"})], args=args)
    s = cs.read(PRE_FILTER_STATE_KEY)
    assert [(c.max_skew, c.topology_key) for c in s.constraints] == [(1, "zone")]
    # Default soft constraints only: PreFilter skips.
    soft = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SA}],
    }
    assert pre_filter(pod(labels={"foo": "bar"}), [], objs=[service("s", {"foo": "bar"})], args=soft)[3] == Code.SKIP


def _sel(pl_pod: Obj, objs: Sequence[Obj]) -> Any:
    pl = PodTopologySpread(SYSTEM)
    snap = snapshot([], (), objs)
    return pl._default_selector(snap, pod_from(pl_pod))


def test_default_selector_from_services_and_controllers() -> None:
    """helper.DefaultSelector: services merged, then the controller (RC merged as a map, RS/SS requirements
    added); services of another namespace, nil selectors and non-controller owners do not count."""
    labels = {"app": "web", "tier": "fe", "pod-template-hash": "h"}
    p = pod(labels=labels)
    objs = [
        service("a", {"app": "web"}),
        service("b", {"tier": "fe"}),
        service("c", {"app": "other"}),
        service("nil", None),
        service("elsewhere", {"app": "web", "x": "y"}, ns="other"),
    ]
    sel = _sel(p, objs)
    assert sel == selector_from({"matchLabels": {"app": "web", "tier": "fe"}}, "s")
    rs = workload(
        "ReplicaSet",
        "rs1",
        {"matchLabels": {"pod-template-hash": "h"}, "matchExpressions": [{"key": "app", "operator": "Exists"}]},
    )
    sel = _sel(pod(labels=labels, owner=("apps/v1", "ReplicaSet", "rs1")), [*objs, rs])
    assert (
        sel.matches(labels)
        and not sel.matches({"app": "web", "tier": "fe"})
        and not sel.matches({"pod-template-hash": "h", "app": "x"})
    )
    assert len(sel.requirements) == 4
    # StatefulSet alone (no service).
    ss = workload("StatefulSet", "db", {"matchLabels": {"app": "db"}})
    sel = _sel(pod(labels={"app": "db"}, owner=("apps/v1", "StatefulSet", "db")), [ss])
    assert sel == selector_from({"matchLabels": {"app": "db"}}, "s")
    # ReplicationController: its selector map merged with the services'.
    rc = workload("ReplicationController", "rc", {"rc": "1"})
    sel = _sel(
        pod(labels={"app": "web", "rc": "1"}, owner=("v1", "ReplicationController", "rc")),
        [service("a", {"app": "web"}), rc],
    )
    assert sel == selector_from({"matchLabels": {"app": "web", "rc": "1"}}, "s")
    # Owner missing, owner of another kind or apiVersion: only the services.
    for owner in [
        ("apps/v1", "ReplicaSet", "missing"),
        ("batch/v1", "Job", "rs1"),
        ("extensions/v1beta1", "ReplicaSet", "rs1"),
    ]:
        sel = _sel(pod(labels=labels, owner=owner), [*objs, rs])
        assert sel == selector_from({"matchLabels": {"app": "web", "tier": "fe"}}, "s"), owner
    # No service, no controller: empty, hence no default constraint.
    assert _sel(pod(labels=labels), []).is_empty


def test_workload_converters_are_typed() -> None:
    svc = service_from(service("s", {"a": "b"}))
    assert isinstance(svc, Service) and svc.namespace == "default" and svc.selector == {"a": "b"}
    assert service_from(service("s", None)).selector is None
    rs = replicaset_from(workload("ReplicaSet", "r", {"matchLabels": {"a": "b"}}))
    assert isinstance(rs, ReplicaSet) and rs.selector == selector_from({"matchLabels": {"a": "b"}}, "s")
    # Absent or invalid selectors contribute nothing (upstream ignores a selector it cannot convert).
    assert replicaset_from(workload("ReplicaSet", "r", None)).selector is None
    bad = {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}
    assert statefulset_from(workload("StatefulSet", "s", bad)).selector is None


# --- AddPod / RemovePod (preemption dry run) ------------------------------------------------------------------


def test_add_and_remove_pod_update_counts_and_minimum() -> None:
    p = pod(labels={"foo": ""}, spread=_ZN)
    pl, cs, the_pod, _ = pre_filter(p, FOUR, [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo")])
    snap = cs.snapshot
    assert counts(cs) == [{"zone1": 2, "zone2": 0}, {"node-a": 1, "node-b": 1, "node-x": 0, "node-y": 0}]
    assert mins(cs) == [0, 0]
    # "node a and x both impact current min match"
    pl.add_pod(cs, the_pod, pod_from(on("node-x", "p-x1", "foo")), snap.node_map["node-x"])
    pl.add_pod(cs, the_pod, pod_from(on("node-y", "p-y1", "foo")), snap.node_map["node-y"])
    assert counts(cs)[0] == {"zone1": 2, "zone2": 2}
    assert mins(cs) == [2, 1]
    # A pod of another namespace, or one the selector does not match, changes nothing.
    pl.add_pod(cs, the_pod, pod_from(on("node-x", "other", "foo", ns="ns1")), snap.node_map["node-x"])
    pl.add_pod(cs, the_pod, pod_from(on("node-x", "nomatch", "bar")), snap.node_map["node-x"])
    assert counts(cs)[0] == {"zone1": 2, "zone2": 2}
    pl.remove_pod(cs, the_pod, pod_from(on("node-a", "p-a1", "foo")), snap.node_map["node-a"])
    assert counts(cs) == [{"zone1": 1, "zone2": 2}, {"node-a": 0, "node-b": 1, "node-x": 1, "node-y": 1}]
    assert mins(cs) == [1, 0]
    assert pl.filter(cs, the_pod, snap.node_map["node-a"]).is_success


def test_add_pod_honours_node_inclusion_policies() -> None:
    """ "add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled"."""
    nodes = [zn("node-a", "zone1", foo=""), zn("node-b", "zone1"), zn("node-x", "zone2", foo="")]
    p = pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "zone")])
    pl, cs, the_pod, _ = pre_filter(p, nodes)
    pl.add_pod(cs, the_pod, pod_from(on("node-b", "p-b1", "foo")), cs.snapshot.node_map["node-b"])
    assert counts(cs) == [{"zone1": 0, "zone2": 0}]
    pl.add_pod(cs, the_pod, pod_from(on("node-a", "p-a1", "foo")), cs.snapshot.node_map["node-a"])
    assert counts(cs) == [{"zone1": 1, "zone2": 0}]


# --- Score: TestPodTopologySpreadScore ------------------------------------------------------------------------

_4321 = [
    *(on("node-a", f"p-a{i}", "foo") for i in range(4)),
    *(on("node-b", f"p-b{i}", "foo") for i in range(3)),
    *(on("node-c", f"p-c{i}", "foo") for i in range(2)),
    on("node-d", "p-d1", "foo"),
]
_2103 = [
    on("node-a", "p-a1", "foo"),
    on("node-a", "p-a2", "foo"),
    on("node-b", "p-b1", "foo"),
    on("node-d", "p-d1", "foo"),
    on("node-d", "p-d2", "foo"),
    on("node-d", "p-d3", "foo"),
]
_4213 = [
    *(on("node-a", f"p-a{i}", "foo") for i in range(4)),
    on("node-b", "p-b1", "foo"),
    on("node-b", "p-b2", "foo"),
    on("node-x", "p-x1", "foo"),
    *(on("node-y", f"p-y{i}", "foo") for i in range(3)),
]
_ABCD = [hn(n) for n in ("node-a", "node-b", "node-c", "node-d")]
_HZ = [
    node(n, {"zone": z, HOST: n})
    for n, z in [("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")]
]
_DIFF_PODS = [
    on("node-a", "p-a1", "foo"),
    on("node-b", "p-b1", "foo", "bar"),
    on("node-y", "p-y1", "foo"),
    on("node-y", "p-y2", "bar"),
]
_3NODES = [node(n, {"node": n, **({"foo": ""} if n != "node-c" else {})}) for n in ("node-a", "node-b", "node-c")]
_3PODS = [
    on("node-a", "p-a1", "foo"),
    on("node-a", "p-a2", "foo"),
    on("node-b", "p-b1", "foo"),
    on("node-c", "p-c1", "foo"),
]
_TAINTED3 = [
    node("node-a", {"node": "node-a"}),
    node("node-b", {"node": "node-b"}),
    node("node-c", {"node": "node-c"}, [TAINT]),
]
_ZH4 = [
    node(n, {"zone": z, HOST: n})
    for n, z in [("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")]
]

SCORE: list[tuple[str, Obj, list[Obj], list[Obj], list[Obj], list[Obj], dict[str, int]]] = [
    (
        "one constraint on node, no existing pods",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        _ABCD[:2],
        [],
        [],
        [],
        {"node-a": 100, "node-b": 100},
    ),
    (
        "one constraint on node, only one node is candidate",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        _ABCD[:1],
        _ABCD[1:2],
        [on("node-a", "p-a1", "foo"), on("node-a", "p-a2", "foo"), on("node-b", "p-b1", "foo")],
        [],
        {"node-a": 100},
    ),
    (
        "one constraint on node, all nodes have the same number of matching pods",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        _ABCD[:2],
        [],
        [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo")],
        [],
        {"node-a": 100, "node-b": 100},
    ),
    (
        "one constraint on node, all 4 nodes are candidates",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        _ABCD,
        [],
        _2103,
        [],
        {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
    ),
    (
        "one constraint on node, null selector",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA, None)]),
        _ABCD,
        [],
        _2103,
        [],
        {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        pod(labels={"foo": ""}, spread=[tsc(2, HOST, SA)]),
        _ABCD,
        [],
        _2103,
        [],
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        pod(labels={"foo": ""}, spread=[tsc(3, HOST, SA)]),
        _ABCD,
        [],
        _4321,
        [],
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "system defaulting, nodes don't have zone, pods match service",
        pod(labels={"foo": ""}),
        _ABCD,
        [],
        _4321,
        [service("svc", {"foo": ""})],
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        [hn("node-a"), hn("node-b"), hn("node-x")],
        [hn("node-y")],
        _4213,
        [],
        {"node-a": 33, "node-b": 83, "node-x": 100},
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        [hn("node-a"), node("node-b", {"n": "node-b"}), hn("node-x")],
        [hn("node-y")],
        _4213,
        [],
        {"node-a": 16, "node-b": 0, "node-x": 100},
    ),
    (
        "one constraint on zone, 3 out of 4 nodes are candidates",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA)]),
        _HZ[:3],
        _HZ[3:],
        _4213,
        [],
        {"node-a": 75, "node-b": 75, "node-x": 100},
    ),
    (
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA)]),
        [_HZ[0], _HZ[2]],
        [_HZ[1], _HZ[3]],
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-x", "p-x1", "foo"),
            on("node-x", "p-x2", "foo"),
            *(on("node-y", f"p-y{i}", "foo") for i in range(4)),
        ],
        [],
        {"node-a": 100, "node-x": 63},
    ),
    (
        "two Constraints on zone, 2 out of 4 nodes are candidates",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone", SA), tsc(1, "zone", SA, BAR)]),
        [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"})],
        [node("node-b", {"zone": "zone1"}), node("node-y", {"zone": "zone2"})],
        [
            on("node-a", "p-a1", "foo", "bar"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo", "bar"),
            on("node-y", "p-y1", "foo"),
            on("node-y", "p-y2", "foo", "bar"),
            on("node-y", "p-y3", "foo"),
        ],
        [],
        {"node-a": 85, "node-x": 100},
    ),
    (
        "two Constraints on zone and node, with different labelSelectors",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA, BAR)]),
        _HZ,
        [],
        _DIFF_PODS,
        [],
        {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
    ),
    (
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA, BAR)]),
        _HZ,
        [],
        [on("node-b", "p-b1", "bar"), on("node-x", "p-x1", "foo"), on("node-y", "p-y1", "foo", "bar")],
        [],
        {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
    ),
    (
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
        pod(labels={"foo": "", "bar": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA, BAR)]),
        _HZ[:3],
        _HZ[3:],
        _DIFF_PODS,
        [],
        {"node-a": 50, "node-b": 25, "node-x": 100},
    ),
    (
        "existing pods in a different namespace do not count",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        _ABCD[:2],
        [],
        [
            on("node-a", "p-a1", "foo", ns="ns1"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-b", "p-b2", "foo"),
        ],
        [],
        {"node-a": 100, "node-b": 33},
    ),
    (
        "terminating Pods should be excluded",
        pod(labels={"foo": ""}, spread=[tsc(1, HOST, SA)]),
        _ABCD[:2],
        [],
        [on("node-a", "p-a", "foo", terminating=True), on("node-b", "p-b", "foo")],
        [],
        {"node-a": 100, "node-b": 0},
    ),
    (
        "minDomains has no effect when ScheduleAnyway",
        pod(labels={"foo": ""}, spread=[tsc(2, "node", SA, min_domains=10)]),
        [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        [],
        [
            on("node-a", "p-a1", "foo"),
            on("node-a", "p-a2", "foo"),
            on("node-b", "p-b1", "foo"),
            on("node-b", "p-b2", "foo"),
            on("node-c", "p-c1", "foo"),
        ],
        [],
        {"node-a": 75, "node-b": 75, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy honored with labelSelectors",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "node", SA)]),
        _3NODES,
        [],
        _3PODS,
        [],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "node", SA, affinity="Ignore")]),
        _3NODES,
        [],
        _3PODS,
        [],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy honored with nodeAffinity",
        pod(labels={"foo": ""}, affinity=_FOO_IN, spread=[tsc(1, "node", SA)]),
        _3NODES,
        [],
        _3PODS,
        [],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy ignored with nodeAffinity",
        pod(labels={"foo": ""}, affinity=_FOO_IN, spread=[tsc(1, "node", SA, affinity="Ignore")]),
        _3NODES,
        [],
        _3PODS,
        [],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    (
        "NodeTaintsPolicy honored",
        pod(labels={"foo": ""}, spread=[tsc(1, "node", SA, taints="Honor")]),
        _TAINTED3,
        [],
        _3PODS,
        [],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    (
        "NodeTaintsPolicy ignored",
        pod(labels={"foo": ""}, spread=[tsc(1, "node", SA)]),
        _TAINTED3,
        [],
        _3PODS,
        [],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        pod(
            labels={"foo": "", "bar": ""},
            spread=[tsc(1, "zone", SA, {}, keys=["foo"]), tsc(1, HOST, SA, {}, keys=["bar"])],
        ),
        _ZH4,
        [],
        [
            on("node-a", "p-a1", "foo"),
            on("node-b", "p-b1", "foo", "bar"),
            on("node-c", "p-y1", "foo"),
            on("node-c", "p-y2", "bar"),
        ],
        [],
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        pod(labels={"foo": "", "bar": "", "baz": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA, BAR, keys=["baz"])]),
        _ZH4,
        [],
        [
            on("node-a", "p-a1", "foo"),
            on("node-b", "p-b1", "foo", "bar", "baz"),
            on("node-c", "p-c1", "foo"),
            on("node-c", "p-c2", "bar"),
            on("node-c", "p-d3", "bar", "baz"),
        ],
        [],
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
]


@pytest.mark.parametrize(
    ("p", "nodes", "failed", "existing", "objs", "want"), [c[1:] for c in SCORE], ids=[c[0] for c in SCORE]
)
def test_score(
    p: Obj, nodes: list[Obj], failed: list[Obj], existing: list[Obj], objs: list[Obj], want: dict[str, int]
) -> None:
    assert scores(p, nodes, failed, existing, objs) == want


# --- PreScore: TestPreScoreSkip, TestPreScoreStateEmptyNodes ---------------------------------------------------


def _pre_score(
    p: Obj, nodes: Sequence[Obj], objs: Sequence[Obj] = (), args: Obj = LIST
) -> tuple[Code, PreScoreState | None]:
    pl = PodTopologySpread(args)
    snap = snapshot(nodes, (), objs)
    cs = CycleState(snap)
    st = pl.pre_score(cs, pod_from(p), snap.nodes)
    return st.code, cs.read(PRE_SCORE_STATE_KEY)


def test_pre_score_skip() -> None:
    assert _pre_score(pod(), [hn("node-a"), hn("node-b")])[0] == Code.SKIP
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA}],
    }
    rs = workload("ReplicaSet", "rs1", {"matchExpressions": [{"key": "tar", "operator": "Exists"}]})
    p = pod(labels={"foo": "bar", "baz": "sup"}, owner=("apps/v1", "ReplicaSet", "rs2"))
    assert _pre_score(p, [node("node-a", {"planet": "mars"})], [rs], args)[0] == Code.SKIP
    # No node at all.
    assert _pre_score(pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA)]), [])[0] == Code.SKIP
    # Hard constraints only: nothing to score.
    assert _pre_score(pod(labels={"foo": ""}, spread=[tsc(1, "zone")]), [zn("node-a", "z")])[0] == Code.SKIP


L = math.log


@pytest.mark.parametrize(
    ("p", "nodes", "objs", "args", "ignored", "want_counts", "want_weights"),
    [
        pytest.param(
            pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA)]),
            [node(n, {"zone": z, HOST: n}) for n, z in [("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2")]],
            [],
            LIST,
            set(),
            [{"zone1": 0, "zone2": 0}, {}],
            [L(4), L(5)],
            id="normal case",
        ),
        pytest.param(
            pod(labels={"foo": ""}, spread=[tsc(1, "zone", SA), tsc(1, HOST, SA, BAR)]),
            [
                node("node-a", {"zone": "zone1", HOST: "node-a"}),
                node("node-b", {"zone": "zone1", HOST: "node-b"}),
                hn("node-x"),
            ],
            [],
            LIST,
            {"node-x"},
            [{"zone1": 0}, {}],
            [L(3), L(4)],
            id="node-x doesn't have label zone",
        ),
        pytest.param(
            pod(labels={"foo": "tar", "baz": "sup"}, owner=("apps/v1", "ReplicaSet", "rs1")),
            [
                node("node-a", {HOST: "node-a", ZONE: "mars"}),
                node("node-b", {HOST: "node-b", ZONE: "mars"}),
                hn("node-c"),  # nodes without a zone are a zone of their own
                hn("node-d"),
            ],
            [workload("ReplicaSet", "rs1", FOO)],
            SYSTEM,
            set(),
            [{}, {"mars": 0, "": 0}],
            [L(6), L(4)],
            id="system default constraints and a replicaset",
        ),
        pytest.param(
            pod(labels={"foo": "tar", "baz": "sup"}, owner=("apps/v1", "ReplicaSet", "rs1")),
            [node("node-a", {"rack": "rack1", HOST: "node-a", "planet": "mars"})],
            [workload("ReplicaSet", "rs1", FOO)],
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": SA},
                    {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": DNS},
                    {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA},
                ],
            },
            set(),
            [{}, {"mars": 0}],
            [L(3), L(3)],
            id="default constraints and a replicaset",
        ),
        pytest.param(
            pod(labels={"foo": ""}, node_selector={"foo": ""}, spread=[tsc(1, "zone", SA, BAR)]),
            [
                node("node-a", {"zone": "zone1", "foo": "", HOST: "node-a"}),
                node("node-b", {"zone": "zone1", "foo": "", HOST: "node-b"}),
                node("node-x", {"zone": "zone2", HOST: "node-x"}),
            ],
            [],
            LIST,
            set(),
            [{"zone1": 0, "zone2": 0}],
            [L(4)],
            id="NodeAffinityPolicy honored with labelSelectors",
        ),
    ],
)
def test_pre_score_state(
    p: Obj,
    nodes: list[Obj],
    objs: list[Obj],
    args: Obj,
    ignored: set[str],
    want_counts: list[dict[str, int]],
    want_weights: list[float],
) -> None:
    code, s = _pre_score(p, nodes, objs, args)
    assert code == S and s is not None
    assert s.ignored_nodes == ignored
    assert s.counts == want_counts
    assert s.weights == pytest.approx(want_weights)


def test_system_defaults_are_hostname_3_and_zone_5() -> None:
    code, s = _pre_score(
        pod(labels={"app": "a"}), [node("n", {HOST: "n", ZONE: "z"})], [service("s", {"app": "a"})], SYSTEM
    )
    assert code == S and s is not None
    assert [(c.topology_key, c.max_skew) for c in s.constraints] == [(HOST, 3), (ZONE, 5)]
    # Not with the List defaulting and no constraints, nor for a pod with its own constraints.
    assert (
        _pre_score(pod(labels={"app": "a"}), [node("n", {HOST: "n"})], [service("s", {"app": "a"})], LIST)[0]
        == Code.SKIP
    )


def test_go_round_is_half_away_from_zero() -> None:
    assert [go_round(x) for x in (0.5, 1.5, 2.5, 2.4999, -0.5, -1.5)] == [1, 2, 3, 2, -1, -2]


# --- signing and the reuse memo -------------------------------------------------------------------------------


def test_sign() -> None:
    """TestPodTopoSignatures, with the refinement documented in plugin.py: a pod without effective
    constraints stays signable under System defaulting."""
    snap = snapshot([hn("n")], (), [service("s", {"app": "a"})])
    cs = CycleState(snap)
    pl = PodTopologySpread(SYSTEM)
    assert pl.sign(cs, pod_from(pod(spread=[tsc(1, "test", SA)]))) is None
    assert pl.sign(cs, pod_from(pod(labels={"app": "a"}))) is None  # default constraints apply
    assert pl.sign(cs, pod_from(pod(labels={"app": "b"}))) == ()  # no Service selects it
    assert (
        PodTopologySpread({"defaultingType": "List", "defaultConstraints": []}).sign(
            cs, pod_from(pod(labels={"app": "a"}))
        )
        == ()
    )


def _spread_pods(n: int, when: str, prefix: str = "web") -> list[Obj]:
    return [
        pod(f"{prefix}-{i}", {"app": "web"}, spread=[tsc(1, ZONE, when, {"matchLabels": {"app": "web"}})])
        for i in range(1, n + 1)
    ]


ZONE_NODES = [node(n, {ZONE: z, HOST: n}) for n, z in [("a1", "a"), ("a2", "a"), ("b1", "b")]]


def _placements(objs: list[Obj], config: Any = None) -> dict[str, str]:
    res = asyncio.run(simulate(objs, config))
    return {o["metadata"]["name"]: o["spec"].get("nodeName", "") for o in res.items if o["kind"] == "Pod"}


def _zone_counts(placed: Mapping[str, str], prefix: str = "web") -> dict[str, int]:
    zone = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in ZONE_NODES}
    out: dict[str, int] = {}
    for name, n in placed.items():
        if name.startswith(prefix) and n:
            out[zone[n]] = out.get(zone[n], 0) + 1
    return out


def test_simulate_six_pods_zone_spread_ends_3_3() -> None:
    """The issue: six pods, DoNotSchedule zone spread maxSkew 1, zones of 2 and 1 nodes: 3/3, not 4/2."""
    placed = _placements([*ZONE_NODES, *_spread_pods(6, DNS)])
    assert all(placed.values())
    assert _zone_counts(placed) == {"a": 3, "b": 3}


def test_simulate_existing_matching_pods_send_new_pods_to_the_other_zone_first() -> None:
    existing = [pod(f"old-{i}", {"app": "web"}, on=n) for i, n in enumerate(["a1", "a2"])]
    placed = _placements([*ZONE_NODES, *existing, *_spread_pods(2, DNS)])
    assert placed["web-1"] == "b1" and placed["web-2"] == "b1"
    placed = _placements([*ZONE_NODES, *existing, *_spread_pods(3, DNS)])
    assert _zone_counts(placed, "") == {"a": 3, "b": 2} or _zone_counts(placed, "") == {"a": 2, "b": 3}
    assert placed["web-1"] == placed["web-2"] == "b1"
    # Soft constraint: the same preference through Score.
    placed = _placements([*ZONE_NODES, *existing, *_spread_pods(1, SA)])
    assert placed["web-1"] == "b1"


def test_simulate_unschedulable_message_and_missing_label() -> None:
    nodes = [node("a1", {ZONE: "a", HOST: "a1"}), node("nolabel", {HOST: "nolabel"})]
    existing = [pod("old", {"app": "web"}, on="a1")]
    c = tsc(1, ZONE, DNS, {"matchLabels": {"app": "web"}}, min_domains=1)
    placed_pods = asyncio.run(
        simulate([*nodes, *existing, pod("new", {"app": "web"}, spread=[c]), pod("twice", {"app": "web"}, spread=[c])])
    )
    by_name = {o["metadata"]["name"]: o for o in placed_pods.items if o["kind"] == "Pod"}
    # One zone only: the global minimum is that zone's own count, so a1 keeps fitting (skew 1).
    assert by_name["new"]["spec"]["nodeName"] == "a1"
    # minDomains 2 with a single zone: the global minimum is 0 and the zone already holds 2.
    c2 = tsc(1, ZONE, DNS, {"matchLabels": {"app": "web"}}, min_domains=2)
    res = asyncio.run(simulate([*nodes, *existing, pod("new", {"app": "web"}, spread=[c2])]))
    p = next(o for o in res.items if o["kind"] == "Pod" and o["metadata"]["name"] == "new")
    assert not p["spec"].get("nodeName")
    cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["reason"] == "Unschedulable"
    assert f"1 {ERR_REASON_NODE_LABEL_NOT_MATCH}" in cond["message"]
    assert (
        f"1 {ERR_REASON_CONSTRAINTS_NOT_MATCH}." in cond["message"]
        or f"1 {ERR_REASON_CONSTRAINTS_NOT_MATCH}," in cond["message"]
    )


def test_memo_cannot_reuse_a_stale_filter_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two equal pods: the first lands in zone a (a1, first in node order), which changes no NodeInfo of a2
    or b1. The second must not reuse a2's "fits" from the first pod's cycle: zone a now holds one more."""
    placed = _placements([*ZONE_NODES, *_spread_pods(2, DNS)])
    assert _zone_counts(placed) == {"a": 1, "b": 1}
    # Control: were the plugin to sign such pods, the memo would hand the second pod a stale verdict.
    monkeypatch.setattr(PodTopologySpread, "sign", lambda self, state, pod: ())
    stale = _placements([*ZONE_NODES, *_spread_pods(2, DNS)])
    assert _zone_counts(stale) == {"a": 2}


def test_memo_cannot_reuse_a_stale_score_of_a_soft_only_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same with ScheduleAnyway only: PreFilter skips, but Score still depends on other nodes, so the
    framework must still ask the plugin to sign (and it refuses)."""
    placed = _placements([*ZONE_NODES, *_spread_pods(2, SA)])
    assert _zone_counts(placed) == {"a": 1, "b": 1}
    monkeypatch.setattr(PodTopologySpread, "sign", lambda self, state, pod: ())
    stale = _placements([*ZONE_NODES, *_spread_pods(2, SA)])
    assert _zone_counts(stale) == {"a": 2}


_SPREAD_ONLY = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: PodTopologySpread, weight: 1}]
"""


def test_simulate_system_default_constraints_spread_a_replicaset() -> None:
    """Pods of a ReplicaSet behind a Service, no constraints of their own: the system defaults (hostname
    maxSkew 3, zone maxSkew 5, ScheduleAnyway) spread them; without the Service and controller they would
    all go to the first node (only PodTopologySpread scores here)."""
    cfg = load_config_text(_SPREAD_ONLY)
    nodes = [node(n, {HOST: n, ZONE: "z"}) for n in ("n1", "n2", "n3")]
    rs = workload("ReplicaSet", "web-abc", {"matchLabels": {"app": "web"}})
    pods = [pod(f"web-{i}", {"app": "web"}, owner=("apps/v1", "ReplicaSet", "web-abc")) for i in range(3)]
    placed = _placements([*nodes, rs, service("web", {"app": "web"}), *pods], cfg)
    assert sorted(placed.values()) == ["n1", "n2", "n3"]
    orphans = [pod(f"web-{i}", {"app": "web"}) for i in range(3)]
    placed = _placements([*nodes, *orphans], cfg)
    assert sorted(placed.values()) == ["n1", "n1", "n1"]


def test_invalid_constraint_is_named_not_ignored() -> None:
    pl, _, _, code = pre_filter(pod(spread=[{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": DNS}]), FOUR)
    assert code == UU
    p = pod_from(pod(spread=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]))
    assert "spec.topologySpreadConstraints[0].whenUnsatisfiable" in pod_specs(p).error
    st = pl.pre_filter(CycleState(snapshot(FOUR)), p)[1]
    assert st.code == UU and "spec.topologySpreadConstraints[0].whenUnsatisfiable" in st.message


# --- events, spec ---------------------------------------------------------------------------------------------


def test_events_and_spec() -> None:
    pl = PodTopologySpread()
    assert set(pl.events_to_register()) == {
        ("Pod", "Add"),
        ("Pod", "Update"),
        ("Pod", "Delete"),
        ("Node", "Add"),
        ("Node", "Update"),
        ("Node", "Delete"),
    }
    assert SPEC.points == frozenset({"preFilter", "filter", "preScore", "score"})
    assert default_registry()["PodTopologySpread"] is SPEC
    assert SPEC.validate_args is not None and SPEC.validate_args(SPEC.default_args, "args") == []
    assert pl.system_defaulted


# --- args validation: TestValidatePodTopologySpreadArgs -------------------------------------------------------


def _c(**kw: Any) -> Obj:
    return {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": DNS, **kw}


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [_c(), _c(maxSkew=2, topologyKey="zone", whenUnsatisfiable=SA)],
            },
            [],
            id="valid config",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(maxSkew=-1)]},
            ["args.defaultConstraints[0].maxSkew: invalid value -1: not in valid range (0, inf)"],
            id="maxSkew less than zero",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(topologyKey="")]},
            ["args.defaultConstraints[0].topologyKey: required: can not be empty"],
            id="empty topology key",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(topologyKey="-bad-/x")]},
            [
                "args.defaultConstraints[0].topologyKey: invalid value '-bad-/x': "
                "prefix part must be a lowercase RFC 1123 subdomain"
            ],
            id="invalid topology key",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(whenUnsatisfiable="")]},
            ["args.defaultConstraints[0].whenUnsatisfiable: required: can not be empty"],
            id="whenUnsatisfiable is empty",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(whenUnsatisfiable="unknown action")]},
            [
                "args.defaultConstraints[0].whenUnsatisfiable: unsupported value 'unknown action': supported values: "
                '"DoNotSchedule", "ScheduleAnyway"'
            ],
            id="whenUnsatisfiable contains unsupported action",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(), _c(maxSkew=2)]},
            ["args.defaultConstraints[1]: duplicate value: {node, DoNotSchedule}"],
            id="duplicated constraints",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(labelSelector={"matchLabels": {"foo": "bar"}})]},
            [
                "args.defaultConstraints[0].labelSelector: forbidden: constraint must not define a selector, as they "
                "deduced for each pod"
            ],
            id="label selector present",
        ),
        pytest.param({"defaultingType": "List"}, [], id="list default constraints, no constraints"),
        pytest.param({"defaultingType": "System"}, [], id="system default constraints"),
        pytest.param({}, [], id="defaulted to System"),
        pytest.param(
            {"defaultingType": "unknown"},
            ['args.defaultingType: unsupported value \'unknown\': supported values: "System", "List"'],
            id="wrong constraints",
        ),
        pytest.param(
            {"defaultingType": "System", "defaultConstraints": [_c()]},
            ["args.defaultingType: invalid value 'System': when .defaultConstraints are not empty"],
            id="system default constraints, but has constraints",
        ),
        pytest.param(
            {"defaultConstraints": [_c()]},
            ["args.defaultingType: invalid value 'System': when .defaultConstraints are not empty"],
            id="constraints without defaultingType (defaulted to System)",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [_c(extra=1)], "other": True},
            ["args.other: unknown field", "args.defaultConstraints[0].extra: unknown field"],
            id="unknown fields",
        ),
    ],
)
def test_validate_args(args: Obj, want: list[str]) -> None:
    assert validate_args(args, "args") == want


def test_check_config_reports_field_paths() -> None:
    text = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}
      - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}
"""
    with pytest.raises(ConfigError) as ei:
        load_config_text(text)
    assert ei.value.errors == [
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: invalid value 0: not in valid range (0, inf)",
        "profiles[0].pluginConfig[0].args.defaultConstraints[1]: duplicate value: {zone, DoNotSchedule}",
    ]
    ok = load_config_text(
        text.replace("maxSkew: 0", "maxSkew: 2").replace(
            "zone, whenUnsatisfiable: DoNotSchedule}\n", "zone, whenUnsatisfiable: ScheduleAnyway}\n", 1
        )
    )
    args = ok.profiles[0].plugin_args["PodTopologySpread"]
    pl = PodTopologySpread(args)
    assert not pl.system_defaulted
    assert [(s.max_skew, s.when_unsatisfiable) for s in pl.default_specs] == [(2, SA), (1, DNS)]


def test_simulate_merges_match_label_keys_as_the_api_server_does() -> None:
    """pkg/registry/core/pod/strategy.go mutateTopologySpreadConstraints (1.34+): ``key In (value)`` appended
    to labelSelector for each matchLabelKeys key the pod has; nothing for a missing selector or key; once."""
    c = tsc(1, ZONE, DNS, {"matchLabels": {"app": "web"}}, keys=["pod-template-hash", "absent"])
    nil_sel = tsc(1, HOST, SA, None, keys=["pod-template-hash"])
    p = pod("web-1", {"app": "web", "pod-template-hash": "v2"}, spread=[c, nil_sel])
    again = pod("web-2", {"app": "web", "pod-template-hash": "v2"}, spread=[c, nil_sel])
    again["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] = [
        {"key": "pod-template-hash", "operator": "In", "values": ["v2"]}
    ]
    old = [pod(f"old-{i}", {"app": "web", "pod-template-hash": "v1"}, on="a1") for i in range(2)]
    res = asyncio.run(simulate([*ZONE_NODES, *old, p, again]))
    by_name = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    for name in ("web-1", "web-2"):
        tscs = by_name[name]["spec"]["topologySpreadConstraints"]
        assert tscs[0]["labelSelector"] == {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["v2"]}],
        }
        assert "labelSelector" not in tscs[1]
    # The old revision's pods (other hash) do not count: the new ones may share zone a with them.
    placed = {n: by_name[n]["spec"]["nodeName"] for n in ("web-1", "web-2")}
    assert sorted(_zone_counts(placed).values()) == [1, 1]
