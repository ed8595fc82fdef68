"""Node plugins: filter verdicts with kube-scheduler's messages, scores and their normalisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.nodeaffinity import SPEC as NODE_AFFINITY_SPEC
from plugins.nodeaffinity import NodeAffinity
from plugins.nodeaffinity import validate_args as validate_affinity_args
from plugins.nodename import SPEC as NODE_NAME_SPEC
from plugins.nodename import NodeName
from plugins.noderesources import SPEC as FIT_SPEC
from plugins.noderesources import NodeResourcesFit
from plugins.noderesources import validate_args as validate_fit_args
from plugins.noderesources.scoring import broken_linear_function, go_div
from plugins.nodeunschedulable import SPEC as UNSCHEDULABLE_SPEC
from plugins.nodeunschedulable import NodeUnschedulable
from plugins.queuesort import SPEC as SORT_SPEC
from plugins.queuesort import PrioritySort
from plugins.schedulinggates import SPEC as GATES_SPEC
from plugins.schedulinggates import SchedulingGates
from plugins.tainttoleration import SPEC as TAINT_SPEC
from plugins.tainttoleration import TaintToleration
from scheduler.api.model import Node, Pod, node_from, pod_from
from scheduler.cache.cache import NodeInfo, _node_info
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ScoreNormalizer,
    ScorePlugin,
    Status,
)

GI = 1024**3
MI = 1024**2

# --- builders ---------------------------------------------------------------------------------------------


def make_node(
    name: str = "n1",
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int | None = 110,
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> Node:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, **(extra or {})}
    if pods is not None:
        alloc["pods"] = str(pods)
    spec: dict[str, Any] = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return node_from(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec,
            "status": {"allocatable": alloc},
        }
    )


def container(name: str = "c", **requests: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "x",
        "resources": {"requests": {k.replace("_", "-"): v for k, v in requests.items()}},
    }


def make_pod(
    name: str = "p",
    *,
    containers: Sequence[Mapping[str, Any]] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    overhead: Mapping[str, str] | None = None,
    node_name: str = "",
    priority: int | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    gates: Sequence[str] = (),
) -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": "dra-scheduler",
        "containers": list(containers if containers is not None else [container()]),
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = dict(overhead)
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = {"nodeAffinity": dict(affinity)}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return pod_from(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": spec,
        }
    )


def info(node: Node, *pods: Pod) -> NodeInfo:
    return _node_info(node, {p.key: p for p in pods})


def state() -> CycleState:
    return CycleState(None)  # type: ignore[arg-type]  # the node plugins never read the snapshot


def scores_of(plugin: Any, pod: Pod, nodes: Sequence[NodeInfo]) -> list[int]:
    """PreScore + Score + NormalizeScore, as the runtime runs them."""
    cs = state()
    st_ = plugin.pre_score(cs, pod, nodes)
    assert st_.code in (Code.SUCCESS, Code.SKIP)
    out = [NodeScore(n.name, plugin.score(cs, pod, n)) for n in nodes]
    if isinstance(plugin, ScoreNormalizer):
        assert plugin.normalize_score(cs, pod, out).is_success
    return [s.score for s in out]


def unresolvable(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,))


# --- specs and protocols ------------------------------------------------------------------------------------

_PROTOCOLS = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
}

ALL_SPECS = [
    SORT_SPEC,
    GATES_SPEC,
    NODE_NAME_SPEC,
    UNSCHEDULABLE_SPEC,
    TAINT_SPEC,
    NODE_AFFINITY_SPEC,
    FIT_SPEC,
]


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name)
def test_spec_points_match_the_implementation(spec: Any) -> None:
    inst = spec.factory({})
    assert inst.name == spec.name
    for point, proto in _PROTOCOLS.items():
        assert isinstance(inst, proto) == (point in spec.points), point
    assert spec.validate_args is not None
    assert spec.validate_args(spec.default_args, "args") == []


@pytest.mark.parametrize(
    ("plugin", "events"),
    [
        (SchedulingGates(), {("Pod", "Update")}),
        (NodeName(), {("Node", "Add"), ("Node", "Update")}),
        (NodeUnschedulable(), {("Node", "Add"), ("Node", "Update"), ("Pod", "Update")}),
        (TaintToleration(), {("Node", "Add"), ("Node", "Update"), ("Pod", "Update")}),
        (NodeAffinity(), {("Node", "Add"), ("Node", "Update")}),
        (
            NodeResourcesFit(),
            {
                ("Node", "Add"),
                ("Node", "Update"),
                ("Pod", "Delete"),
                ("Pod", "Update"),  # an assigned pod scaled down in place (InPlacePodVerticalScaling)
                ("DeviceClass", "Add"),  # a class now maps a requested extended resource (DRAExtendedResource)
                ("DeviceClass", "Update"),
            },
        ),
    ],
    ids=lambda x: getattr(x, "name", ""),
)
def test_events_to_register(plugin: Any, events: set[tuple[str, str]]) -> None:
    assert isinstance(plugin, EnqueueExtensions)
    assert set(plugin.events_to_register()) == events


# --- PrioritySort -----------------------------------------------------------------------------------------


def test_priority_sort_higher_priority_first_then_earlier() -> None:
    s = PrioritySort()
    hi = QueuedPodInfo(make_pod("hi", priority=10), timestamp=5.0)
    lo_early = QueuedPodInfo(make_pod("lo1", priority=1), timestamp=1.0)
    lo_late = QueuedPodInfo(make_pod("lo2", priority=1), timestamp=2.0)
    assert s.less(hi, lo_early) and not s.less(lo_early, hi)
    assert s.less(lo_early, lo_late) and not s.less(lo_late, lo_early)
    assert not s.less(lo_early, lo_early)
    no_prio = QueuedPodInfo(make_pod("np"), timestamp=0.0)
    neg = QueuedPodInfo(make_pod("neg", priority=-5), timestamp=0.0)
    assert s.less(lo_late, no_prio) and s.less(no_prio, neg)


# --- SchedulingGates --------------------------------------------------------------------------------------


def test_scheduling_gates() -> None:
    g = SchedulingGates()
    assert g.pre_enqueue(None, make_pod()).is_success  # type: ignore[arg-type]
    st_ = g.pre_enqueue(None, make_pod(gates=["a", "b"]))  # type: ignore[arg-type]
    assert st_ == unresolvable("waiting for scheduling gates: [a b]")


# --- NodeName ---------------------------------------------------------------------------------------------


def test_node_name() -> None:
    p = NodeName()
    n1, n2 = info(make_node("n1")), info(make_node("n2"))
    assert p.filter(state(), make_pod(), n1).is_success
    assert p.filter(state(), make_pod(node_name="n1"), n1).is_success
    assert p.filter(state(), make_pod(node_name="n1"), n2) == unresolvable(
        "node(s) didn't match the requested node name"
    )


# --- NodeUnschedulable ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tolerations", "ok"),
    [
        ((), False),
        (({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},), True),
        (({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},), True),
        (({"operator": "Exists"},), True),
        (({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"},), False),
        (({"key": "other", "operator": "Exists"},), False),
    ],
)
def test_node_unschedulable(tolerations: Sequence[Mapping[str, Any]], ok: bool) -> None:
    p = NodeUnschedulable()
    cordoned = info(make_node(unschedulable=True))
    st_ = p.filter(state(), make_pod(tolerations=tolerations), cordoned)
    assert st_.is_success if ok else st_ == unresolvable("node(s) were unschedulable")
    assert p.filter(state(), make_pod(), info(make_node())).is_success


# --- TaintToleration --------------------------------------------------------------------------------------


def test_taint_filter_message_and_effects() -> None:
    p = TaintToleration()
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    node = info(make_node(taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}, gpu]))
    assert p.filter(state(), make_pod(), node) == unresolvable(
        "node(s) had untolerated taint(s)"
    )
    tol_eq = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    assert p.filter(state(), make_pod(tolerations=[tol_eq]), node).is_success
    tol_wrong_value = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}
    assert not p.filter(state(), make_pod(tolerations=[tol_wrong_value]), node).is_success
    assert p.filter(state(), make_pod(tolerations=[{"operator": "Exists"}]), node).is_success
    noexec = info(make_node(taints=[{"key": "k", "effect": "NoExecute"}]))
    assert p.filter(state(), make_pod(), noexec) == unresolvable("node(s) had untolerated taint(s)")
    soft_only = info(make_node(taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]))
    assert p.filter(state(), make_pod(), soft_only).is_success


def test_taint_score_reversed_normalisation() -> None:
    p = TaintToleration()

    def soft(*keys: str) -> list[dict[str, str]]:
        return [{"key": k, "value": "v", "effect": "PreferNoSchedule"} for k in keys]

    nodes = [
        info(make_node("a")),
        info(make_node("b", taints=soft("x"))),
        info(make_node("c", taints=soft("x", "y"))),
        info(make_node("d", taints=[{"key": "hard", "effect": "NoSchedule"}])),
    ]
    assert scores_of(p, make_pod(), nodes) == [100, 50, 0, 100]
    # Tolerating "x" (PreferNoSchedule or empty effect) removes it from the count; a NoSchedule toleration
    # is not considered for scoring.
    assert scores_of(p, make_pod(tolerations=[{"key": "x", "operator": "Exists"}]), nodes) == [
        100,
        100,
        0,
        100,
    ]
    assert scores_of(
        p, make_pod(tolerations=[{"key": "x", "operator": "Exists", "effect": "NoSchedule"}]), nodes
    ) == [100, 50, 0, 100]
    assert scores_of(p, make_pod(), nodes[:1] + nodes[3:]) == [100, 100]
    three = [info(make_node("e", taints=soft("x", "y", "z"))), nodes[1]]
    assert scores_of(p, make_pod(), three) == [0, 67]  # 100 - 100*1//3


# --- NodeAffinity -----------------------------------------------------------------------------------------


def req_affinity(*terms: Mapping[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    d: dict[str, Any] = {"key": key, "operator": op}
    if values:
        d["values"] = list(values)
    return d


POD_AFFINITY_MSG = "node(s) didn't match Pod's node affinity/selector"


def test_node_selector_and_required_terms() -> None:
    p = NodeAffinity()
    a100 = info(make_node("a", labels={"gpu": "a100", "zone": "z1"}))
    h100 = info(make_node("h", labels={"gpu": "h100", "zone": "z2"}))
    sel = make_pod(node_selector={"gpu": "h100"})
    assert p.pre_filter(state(), sel) == (None, Status.ok())
    assert p.filter(state(), sel, h100).is_success
    assert p.filter(state(), sel, a100) == unresolvable(POD_AFFINITY_MSG)
    # Terms are ORed, requirements inside a term ANDed.
    aff = make_pod(
        affinity=req_affinity(
            {"matchExpressions": [expr("gpu", "In", "a100"), expr("zone", "In", "z9")]},
            {"matchExpressions": [expr("zone", "NotIn", "z1")]},
        )
    )
    assert p.filter(state(), aff, h100).is_success
    assert p.filter(state(), aff, a100) == unresolvable(POD_AFFINITY_MSG)
    # Both nodeSelector and affinity must hold.
    both = make_pod(
        node_selector={"gpu": "a100"}, affinity=req_affinity({"matchExpressions": [expr("zone", "Exists")]})
    )
    assert p.filter(state(), both, a100).is_success
    assert not p.filter(state(), both, h100).is_success


def test_pre_filter_skip_and_node_name_pinning() -> None:
    p = NodeAffinity()
    _, st_ = p.pre_filter(state(), make_pod())
    assert st_.code == Code.SKIP
    pinned = make_pod(
        affinity=req_affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
        )
    )
    res, st_ = p.pre_filter(state(), pinned)
    assert st_.is_success and res is not None and res.node_names == frozenset({"n1", "n2"})
    assert p.filter(state(), pinned, info(make_node("n2"))).is_success
    assert not p.filter(state(), pinned, info(make_node("n3"))).is_success
    # One term without a name pin: every node stays eligible.
    open_term = make_pod(
        affinity=req_affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            {"matchExpressions": [expr("gpu", "Exists")]},
        )
    )
    assert p.pre_filter(state(), open_term) == (None, Status.ok())
    # Intersection inside a term is empty in every term: conflict.
    conflict = make_pod(
        affinity=req_affinity(
            {
                "matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                    {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                ]
            }
        )
    )
    assert p.pre_filter(state(), conflict) == (None, unresolvable("pod affinity terms conflict"))


def test_added_affinity_is_enforced_for_every_pod() -> None:
    args = {"addedAffinity": req_affinity({"matchExpressions": [expr("pool", "In", "ai")]})}
    assert validate_affinity_args(args, "args") == []
    p = NodeAffinity(args)
    _, st_ = p.pre_filter(state(), make_pod())
    assert st_.is_success  # not skipped: the added affinity applies
    assert p.filter(state(), make_pod(), info(make_node(labels={"pool": "ai"}))).is_success
    assert p.filter(state(), make_pod(), info(make_node(labels={"pool": "web"}))) == unresolvable(
        "node(s) didn't match scheduler-enforced node affinity"
    )


def test_node_affinity_score_is_max_normalised() -> None:
    p = NodeAffinity()
    pod = make_pod(
        affinity={
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "preference": {"matchExpressions": [expr("gpu", "In", "h100")]}},
                {"weight": 10, "preference": {"matchExpressions": [expr("zone", "In", "z1")]}},
            ]
        }
    )
    nodes = [
        info(make_node("a", labels={"gpu": "h100", "zone": "z1"})),
        info(make_node("b", labels={"gpu": "h100"})),
        info(make_node("c", labels={"zone": "z1"})),
        info(make_node("d")),
    ]
    assert scores_of(p, pod, nodes) == [100, 75, 25, 0]
    assert p.pre_score(state(), make_pod(), nodes).code == Code.SKIP
    added = NodeAffinity(
        {
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [expr("zone", "Exists")]}}
                ]
            }
        }
    )
    assert scores_of(added, make_pod(), nodes) == [100, 0, 100, 0]


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"bogus": 1}, ["a.bogus: unknown field"]),
        ({"addedAffinity": {"x": 1}}, ["a.addedAffinity.x: unknown field"]),
        (
            {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            [
                "a.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
                "must have at least one node selector term"
            ],
        ),
        (
            {"addedAffinity": req_affinity({"matchExpressions": [expr("k", "Near", "v")]})},
            [
                "a.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                ".matchExpressions[0].operator: unsupported value 'Near': supported values: "
                "In, NotIn, Exists, DoesNotExist, Gt, Lt"
            ],
        ),
        (
            {"addedAffinity": req_affinity({"matchExpressions": [expr("k", "Exists", "v")]})},
            [
                "a.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                ".matchExpressions[0].values: may not be specified when operator is Exists"
            ],
        ),
        (
            {"addedAffinity": req_affinity({"matchFields": [expr("metadata.uid", "In", "v")]})},
            [
                "a.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                ".matchFields[0].key: 'metadata.uid' is not a valid field selector key (only metadata.name)"
            ],
        ),
        (
            {
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 0, "preference": {"matchExpressions": [expr("k", "Gt", "x")]}}
                    ]
                }
            },
            [
                "a.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
                "must be in the range 1-100",
                "a.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
                ".matchExpressions[0].values[0]: must be an integer when operator is Gt",
            ],
        ),
    ],
)
def test_node_affinity_args_validation(args: Mapping[str, Any], errors: list[str]) -> None:
    assert validate_affinity_args(args, "a") == errors


# --- NodeResourcesFit: filter -----------------------------------------------------------------------------


def fit_filter(pod: Pod, node: NodeInfo, args: Mapping[str, Any] | None = None) -> Status:
    p = NodeResourcesFit(args or {})
    cs = state()
    _, st_ = p.pre_filter(cs, pod)
    assert st_.is_success
    return p.filter(cs, pod, node)


def test_fit_accepts_and_rejects_with_all_reasons() -> None:
    node = make_node(cpu="4", memory="8Gi")
    used = make_pod("used", containers=[container(cpu="3", memory="6Gi")])
    assert fit_filter(make_pod(containers=[container(cpu="1", memory="2Gi")]), info(node, used)).is_success
    st_ = fit_filter(make_pod(containers=[container(cpu="1500m", memory="3Gi")]), info(node, used))
    assert st_ == Status(Code.UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory"))
    # A request larger than the whole node: preemption cannot help.
    st_ = fit_filter(make_pod(containers=[container(cpu="5")]), info(node))
    assert st_ == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",))


def test_fit_too_many_pods() -> None:
    node = make_node(pods=2)
    others = [make_pod(f"o{i}", containers=[container()]) for i in range(2)]
    assert fit_filter(make_pod(), info(node, others[0])).is_success
    assert fit_filter(make_pod(), info(node, *others)) == Status(Code.UNSCHEDULABLE, ("Too many pods",))
    st_ = fit_filter(make_pod(containers=[container(cpu="8")]), info(node, *others))
    assert st_.reasons == ("Too many pods", "Insufficient cpu")
    # No pods allocatable at all, as kube-scheduler: nothing fits.
    assert fit_filter(make_pod(), info(make_node(pods=None))).reasons == ("Too many pods",)


def test_fit_extended_and_ephemeral_resources() -> None:
    gpu_node = make_node(extra={"nvidia.com/gpu": "8", "ephemeral-storage": "100Gi"})
    cpu_node = make_node("cpu-only")
    want = make_pod(containers=[container(**{"nvidia.com/gpu": "2"})])
    assert fit_filter(want, info(gpu_node)).is_success
    assert fit_filter(want, info(cpu_node)) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient nvidia.com/gpu",)
    )
    busy = make_pod("busy", containers=[container(**{"nvidia.com/gpu": "7"})])
    assert fit_filter(want, info(gpu_node, busy)) == Status(
        Code.UNSCHEDULABLE, ("Insufficient nvidia.com/gpu",)
    )
    disk = make_pod(containers=[container(ephemeral_storage="200Gi")])
    assert fit_filter(disk, info(gpu_node)).reasons == ("Insufficient ephemeral-storage",)
    # Requests of zero are not checked.
    zero = make_pod(containers=[container(**{"example.com/foo": "0"})])
    assert fit_filter(zero, info(cpu_node)).is_success


def test_fit_ignored_resources_and_groups() -> None:
    node = info(make_node())
    pod = make_pod(containers=[container(**{"nvidia.com/gpu": "1", "example.com/fpga": "1"})])
    assert fit_filter(pod, node).reasons == ("Insufficient example.com/fpga", "Insufficient nvidia.com/gpu")
    assert fit_filter(pod, node, {"ignoredResources": ["nvidia.com/gpu"]}).reasons == (
        "Insufficient example.com/fpga",
    )
    assert fit_filter(pod, node, {"ignoredResourceGroups": ["example.com", "nvidia.com"]}).is_success
    # Only extended resources can be ignored.
    cpu_pod = make_pod(containers=[container(cpu="10")])
    assert not fit_filter(cpu_pod, node, {"ignoredResources": ["cpu"]}).is_success


def test_fit_counts_init_containers_sidecars_and_overhead() -> None:
    node = make_node(cpu="4", memory="8Gi")
    # Regular init containers run one at a time: the largest one counts when it exceeds the containers.
    init_heavy = make_pod(
        containers=[container(cpu="1")], init_containers=[container("i1", cpu="3"), container("i2", cpu="2")]
    )
    assert init_heavy.requests["cpu"] == 3000
    assert fit_filter(init_heavy, info(node)).is_success
    busy = make_pod("busy", containers=[container(cpu="1500m")])
    assert fit_filter(init_heavy, info(node, busy)).reasons == ("Insufficient cpu",)
    # A sidecar (restartPolicy: Always) runs alongside everything after it.
    sidecar = dict(container("side", cpu="1"), restartPolicy="Always")
    with_sidecar = make_pod(
        containers=[container(cpu="2")], init_containers=[sidecar, container("i", cpu="2500m")]
    )
    assert with_sidecar.requests["cpu"] == 3500  # max(1 + 2, 1 + 2.5)
    assert fit_filter(with_sidecar, info(node)).is_success
    assert fit_filter(with_sidecar, info(node, make_pod("b", containers=[container(cpu="1")]))).reasons == (
        "Insufficient cpu",
    )
    # Pod overhead adds to the requests.
    with_overhead = make_pod(containers=[container(cpu="3", memory="1Gi")], overhead={"cpu": "1500m"})
    assert with_overhead.requests["cpu"] == 4500
    assert fit_filter(with_overhead, info(node)) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",)
    )


def test_fit_filter_without_pre_filter_state() -> None:
    p = NodeResourcesFit()
    assert p.filter(state(), make_pod(containers=[container(cpu="5")]), info(make_node())).reasons == (
        "Insufficient cpu",
    )


# --- NodeResourcesFit: pod requests as resource.PodRequests counts them (1.37 default gates) ---------------
# kubernetes v1.37.2 fit_test.go (TestEnoughRequests pod-level cases, TestFitScore), component-helpers
# resource/helpers_test.go (in-place resize), core/v1 defaults (limits -> requests) and pod validation.


def raw_pod(
    name: str = "p",
    containers: Sequence[Mapping[str, Any]] = (),
    *,
    init: Sequence[Mapping[str, Any]] = (),
    pod_resources: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    node_name: str = "",
) -> Pod:
    spec: dict[str, Any] = {"schedulerName": "dra-scheduler", "containers": list(containers) or [container()]}
    if init:
        spec["initContainers"] = list(init)
    if pod_resources is not None:
        spec["resources"] = dict(pod_resources)
    if node_name:
        spec["nodeName"] = node_name
    raw: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": spec,
    }
    if status is not None:
        raw["status"] = dict(status)
    return pod_from(raw)


def res_container(
    name: str = "c", requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
) -> dict[str, Any]:
    r: dict[str, Any] = {}
    if requests is not None:
        r["requests"] = dict(requests)
    if limits is not None:
        r["limits"] = dict(limits)
    return {"name": name, "image": "x", "resources": r}


HP = "hugepages-2Mi"


def test_fit_pod_level_resources() -> None:
    """fit_test.go TestEnoughRequests, pod-level cases (node: cpu 10m, memory 20, hugepages-2Mi 5)."""
    node = make_node(cpu="10m", memory="20", extra={HP: "5"})
    small = res_container(requests={"cpu": "1m", "memory": "1"})
    used_5 = make_pod("u", containers=[res_container(requests={"cpu": "5m", "memory": "5"})])
    used_19 = make_pod("u", containers=[res_container(requests={"cpu": "5m", "memory": "19"})])

    def lvl(**requests: str) -> dict[str, Any]:
        return {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}

    fits = raw_pod(containers=[small], pod_resources=lvl(cpu="1m", memory="2"))
    assert fits.requests["cpu"] == 1 and fits.requests["memory"] == 2
    assert fit_filter(fits, info(node, used_5)).is_success
    cpu_7 = raw_pod(containers=[small], pod_resources=lvl(cpu="7m", memory="2"))
    assert fit_filter(cpu_7, info(node, used_5)) == Status(Code.UNSCHEDULABLE, ("Insufficient cpu",))
    mem = raw_pod(containers=[small], pod_resources=lvl(cpu="3m", memory="2"))
    assert fit_filter(mem, info(node, used_19)) == Status(Code.UNSCHEDULABLE, ("Insufficient memory",))
    hp = {"cpu": "3m", "memory": "2", HP: "5"}
    assert fit_filter(raw_pod(pod_resources={"requests": hp}), info(node)).is_success
    both = raw_pod(
        containers=[res_container(requests={"cpu": "1m", "memory": "1", HP: "3"}, limits={HP: "3"})],
        pod_resources={"requests": hp},
    )
    assert both.requests[HP] == 5  # pod-level hugepages replace the containers'
    assert fit_filter(both, info(node)).is_success
    too_big = raw_pod(pod_resources={"requests": {**hp, HP: "10"}})
    assert fit_filter(too_big, info(node)) == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {HP}",))
    with_init = raw_pod(containers=[small], init=[small], pod_resources=lvl(cpu="3m", memory="2"))
    assert fit_filter(with_init, info(node, used_19)) == Status(Code.UNSCHEDULABLE, ("Insufficient memory",))
    # Resources other than cpu, memory and hugepages stay the containers' (IsSupportedPodLevelResource).
    gpu = raw_pod(containers=[container(**{"nvidia.com/gpu": "1"})], pod_resources=lvl(cpu="1"))
    assert gpu.requests == {"cpu": 1000, "nvidia.com/gpu": 1}


def test_pod_level_limits_default_requests() -> None:
    """defaultPodRequests: no pod-level request -> the containers' requests if they ask, else the limit."""
    nothing = raw_pod(containers=[res_container()], pod_resources={"limits": {"cpu": "2", "memory": "1Gi"}})
    assert nothing.requests == {"cpu": 2000, "memory": GI}
    some = raw_pod(
        containers=[res_container(requests={"cpu": "500m"})], pod_resources={"limits": {"cpu": "2", "memory": "1Gi"}}
    )
    assert some.requests == {"cpu": 500, "memory": GI}


def test_container_limits_default_requests() -> None:
    """SetDefaults_Pod: a limit without a request is the request (the usual way to ask for a GPU)."""
    p = make_pod(containers=[res_container(limits={"cpu": "2", "nvidia.com/gpu": "1"}, requests={"cpu": "1"})])
    assert p.requests == {"cpu": 1000, "nvidia.com/gpu": 1}
    node = make_node(extra={"nvidia.com/gpu": "1"})
    assert fit_filter(p, info(node)).is_success
    assert fit_filter(p, info(make_node())).reasons == ("Insufficient nvidia.com/gpu",)


@pytest.mark.parametrize(
    ("resources", "field", "why"),
    [
        ({"requests": {"cpu": "-1"}}, "spec.containers[0].resources.requests[cpu]", 'Invalid value: "-1"'),
        ({"requests": {"memory": "lots"}}, "spec.containers[0].resources.requests[memory]", "Invalid value"),
        ({"limits": {"nvidia.com/gpu": "1.5"}}, "spec.containers[0].resources.limits[nvidia.com/gpu]", "integer"),
        (
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            "spec.containers[0].resources.requests",
            "must be less than or equal to cpu limit of 1",
        ),
        (
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
            "spec.containers[0].resources.requests",
            "must be equal to nvidia.com/gpu limit of 2",
        ),
    ],
)
def test_fit_rejects_quantities_the_api_server_refuses(resources: dict[str, Any], field: str, why: str) -> None:
    p = make_pod(containers=[{"name": "c", "image": "x", "resources": resources}])
    cs = state()
    _, st_ = NodeResourcesFit().pre_filter(cs, p)
    assert st_.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert f"{field}: " in st_.message and why in st_.message
    assert st_.message.startswith('Pod "default/p" is invalid: ')


def test_a_negative_request_never_adds_capacity() -> None:
    node = make_node(cpu="4")
    liar = make_pod("liar", containers=[container(cpu="-3")], node_name="n1")
    assert "cpu" not in liar.requests
    nodeinfo = info(node, liar, make_pod("used", containers=[container(cpu="3")]))
    assert nodeinfo.requested["cpu"] == 3000
    assert fit_filter(make_pod(containers=[container(cpu="2")]), nodeinfo).reasons == ("Insufficient cpu",)
    overhead = make_pod(containers=[container(cpu="1")], overhead={"cpu": "-1"})
    assert overhead.requests["cpu"] == 1000
    _, st_ = NodeResourcesFit().pre_filter(state(), overhead)
    assert "spec.overhead[cpu]" in st_.message


def test_simulate_reports_a_negative_request_with_its_field() -> None:
    import asyncio

    from scheduler.simulate.simulation import simulate

    node_raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }
    pod_raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "neg", "namespace": "default"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": -1}}}],
        },
    }
    res = asyncio.run(simulate([node_raw, pod_raw]))
    [p] = [o for o in res.items if o["kind"] == "Pod"]
    assert not p["spec"].get("nodeName")
    [cond] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "Unschedulable"
    assert "spec.containers[0].resources.requests[cpu]" in cond["message"]
    assert "must be greater than or equal to 0" in cond["message"]


def test_in_place_resize_counts_the_largest_of_spec_allocated_and_actuated() -> None:
    """resource.PodRequests with UseStatusResources (InPlacePodVerticalScaling, GA): assigned pods count
    max(spec, allocated, actuated); while a resize is Infeasible the spec is left out."""

    def resized(spec_cpu: str, allocated: str | None, actuated: str | None, infeasible: bool = False) -> Pod:
        cs: dict[str, Any] = {"name": "c"}
        if allocated is not None:
            cs["allocatedResources"] = {"cpu": allocated}
        if actuated is not None:
            cs["resources"] = {"requests": {"cpu": actuated}}
        status: dict[str, Any] = {"containerStatuses": [cs]}
        if infeasible:
            status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
        return raw_pod("r", [container(cpu=spec_cpu)], status=status, node_name="n1")

    assert resized("2", "1", "1").requests["cpu"] == 2000  # scaling up: the new spec counts at once
    assert resized("1", "2", "2").requests["cpu"] == 2000  # scaling down: until the kubelet actuated it
    assert resized("1", "1", "3").requests["cpu"] == 3000
    assert resized("4", "1", None, infeasible=True).requests["cpu"] == 1000
    assert resized("4", None, None).requests["cpu"] == 4000
    node = make_node(cpu="4")
    assert fit_filter(make_pod(containers=[container(cpu="2")]), info(node, resized("1", "3", "3"))).reasons == (
        "Insufficient cpu",
    )
    # pod-level status (InPlacePodLevelResourcesVerticalScaling, beta, on)
    lvl = raw_pod(
        "l",
        [container()],
        pod_resources={"requests": {"cpu": "1"}},
        status={"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "2"}},
        node_name="n1",
    )
    assert lvl.requests["cpu"] == 2000


def test_non_zero_requests_default_each_container() -> None:
    """PodInfo.CalculateResource: 100m / 200Mi for every container without a request (an explicit 0
    stays 0); with pod-level requests only a resource nobody requests gets the default."""
    from scheduler.api.model import pod_non_zero_requests

    two = make_pod(containers=[container("a", cpu="1"), container("b")])
    assert pod_non_zero_requests(two) == (1100, 2 * 200 * MI)
    zero = make_pod(containers=[container("a", cpu="0", memory="0")])
    assert pod_non_zero_requests(zero) == (0, 0)
    lvl = raw_pod(containers=[container("a"), container("b")], pod_resources={"requests": {"cpu": "1"}})
    assert pod_non_zero_requests(lvl) == (1000, 2 * 200 * MI)
    node = info(make_node(), two)
    assert node.non_zero_requested == {"cpu": 1100, "memory": 400 * MI}


def _upstream_node(name: str, cpu: str) -> Node:
    return make_node(name, cpu=cpu, memory="10000")


def _req_pod(name: str, cpu: str, memory: str, node_name: str = "", sidecar: bool = False) -> Pod:
    containers = [container("c", cpu=cpu, memory=memory)]
    init = [dict(container("s", cpu=cpu, memory=memory), restartPolicy="Always")] if sidecar else []
    return make_pod(name, containers=containers, init_containers=init, node_name=node_name)


def _shape(*pts: tuple[int, int]) -> dict[str, Any]:
    return {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in pts]},
        }
    }


@pytest.mark.parametrize(
    ("args", "pod_req", "sidecar", "node2_cpu", "node2_used", "want"),
    [
        pytest.param(
            _shape((0, 10), (100, 0)), ("3000", "5000"), False, "6000", ("1000", "2000"), [10, 32], id="rtcr1"
        ),
        pytest.param(
            _shape((0, 0), (100, 10)), ("3000", "5000"), False, "6000", ("1000", "2000"), [95, 68], id="rtcr2"
        ),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            ("1000", "2000"),
            False,
            "6000",
            ("1000", "2000"),
            [67, 36],
            id="most",
        ),
        pytest.param({}, ("1000", "2000"), False, "6000", ("1000", "2000"), [32, 63], id="least"),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            ("1000", "2000"),
            True,
            "4000",
            ("1000", "2000"),
            [67, 45],
            id="most-sidecar",
        ),
        pytest.param({}, ("1000", "2000"), True, "4000", ("1000", "2000"), [32, 55], id="least-sidecar"),
    ],
)
def test_fit_score_upstream_cases(
    args: dict[str, Any],
    pod_req: tuple[str, str],
    sidecar: bool,
    node2_cpu: str,
    node2_used: tuple[str, str],
    want: list[int],
) -> None:
    """fit_test.go TestFitScore: node1 cpu 4000 with a pod of 2000/4000 (with a sidecar of 1000/2000 in the
    sidecar cases, whose pod is 1000/2000), node2 with a pod of 1000/2000; memory 10000 each."""
    n1_used = (
        _req_pod("u1", "1000", "2000", "node1", sidecar=True) if sidecar else _req_pod("u1", "2000", "4000", "node1")
    )
    n1 = info(_upstream_node("node1", "4000"), n1_used)
    n2 = info(_upstream_node("node2", node2_cpu), _req_pod("u2", *node2_used, "node2"))
    assert fit_scores(args, _req_pod("p", *pod_req), n1, n2) == want


def test_fit_score_leaves_out_non_scalar_resources_and_unrequested_scalars() -> None:
    pod = make_pod(containers=[container(cpu="1", memory="1Gi")])
    node = info(make_node(extra={"nvidia.com/gpu": "8"}))
    base = fit_scores({}, pod, node)
    with_pods = {"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "pods"}]}}
    assert fit_scores(with_pods, pod, node) == base
    with_gpu = {"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}]}}
    assert fit_scores(with_gpu, pod, node) == base  # the pod does not request it


# --- NodeResourcesFit: score ------------------------------------------------------------------------------


def fit_scores(args: Mapping[str, Any], pod: Pod, *nodes: NodeInfo) -> list[int]:
    assert validate_fit_args(args, "args") == []
    return scores_of(NodeResourcesFit(args), pod, list(nodes))


def test_least_and_most_allocated() -> None:
    node = info(make_node(cpu="4", memory="8Gi"))
    pod = make_pod(containers=[container(cpu="1", memory="2Gi")])
    assert fit_scores({}, pod, node) == [75]
    assert fit_scores({"scoringStrategy": {"type": "MostAllocated"}}, pod, node) == [25]
    # cpu 1/4 used, memory 6/8 used; weights cpu 3, memory 1.
    heavy_mem = make_pod(containers=[container(cpu="1", memory="6Gi")])
    weighted = {
        "scoringStrategy": {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}
    }
    assert fit_scores(weighted, heavy_mem, node) == [(75 * 3 + 25) // 4]
    # Requests above capacity: LeastAllocated 0, MostAllocated capped at 100.
    huge = make_pod(containers=[container(cpu="8", memory="16Gi")])
    assert fit_scores({}, huge, node) == [0]
    assert fit_scores({"scoringStrategy": {"type": "MostAllocated"}}, huge, node) == [100]


def test_score_uses_non_zero_defaults() -> None:
    node = make_node(cpu="4", memory="8Gi")
    empty = make_pod(containers=[container()])
    # 100m of 4 cpu, 200Mi of 8Gi.
    assert fit_scores({}, empty, info(node)) == [((3900 * 100 // 4000) + ((8192 - 200) * 100 // 8192)) // 2]
    # Existing pods without requests count with the defaults too.
    others = [make_pod(f"o{i}", containers=[container()]) for i in range(10)]
    assert fit_scores({}, empty, info(node, *others)) == [
        ((4000 - 1100) * 100 // 4000 + (8192 - 2200) * 100 // 8192) // 2
    ]


def test_extended_resource_scoring() -> None:
    args = {
        "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}
    }
    gpu_node = info(
        make_node(extra={"nvidia.com/gpu": "8"}),
        make_pod("u", containers=[container(**{"nvidia.com/gpu": "2"})]),
    )
    cpu_node = info(make_node("c"))
    want = make_pod(containers=[container(**{"nvidia.com/gpu": "2"})])
    assert fit_scores(args, want, gpu_node, cpu_node) == [50, 0]
    # The pod does not request the scalar resource: it is left out (weight sum 0 -> 0).
    assert fit_scores(args, make_pod(), gpu_node) == [0]


def test_requested_to_capacity_ratio() -> None:
    node = info(make_node(cpu="4", memory="8Gi"))
    pod = make_pod(containers=[container(cpu="1", memory="2Gi")])

    def rtcr(*points: tuple[int, int]) -> dict[str, Any]:
        return {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in points]},
            }
        }

    assert fit_scores(rtcr((0, 0), (100, 10)), pod, node) == [25]
    assert fit_scores(rtcr((0, 10), (100, 0)), pod, node) == [75]
    # Go truncates toward zero in the interpolation: 100 + (-100*10)/30 = 100 - 33.
    assert broken_linear_function([(0, 100), (30, 0)])(10) == 67
    assert go_div(-1000, 30) == -33 and go_div(1000, 30) == 33
    ten_pct = make_pod(containers=[container(cpu="400m", memory="1Gi")])
    assert fit_scores(rtcr((0, 10), (30, 0)), ten_pct, info(make_node(cpu="4", memory="10Gi"))) == [67]
    # cpu 10% -> 67, memory 800Mi/8Gi = 9% -> 70: the mean 68.5 rounds half away from zero (Go's math.Round).
    uneven = make_pod(containers=[container(cpu="400m", memory="800Mi")])
    assert fit_scores(rtcr((0, 10), (30, 0)), uneven, node) == [69]
    # Past the last point the last score holds; before the first point, the first score.
    assert broken_linear_function([(20, 30), (50, 60)])(10) == 30
    assert broken_linear_function([(20, 30), (50, 60)])(90) == 60


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"nope": 1}, ["a.nope: unknown field"]),
        (
            {"ignoredResources": ["nvidia.com/gpu", "bad name"]},
            ["a.ignoredResources[1]: invalid name 'bad name'"],
        ),
        (
            {"ignoredResourceGroups": ["nvidia.com/x"]},
            ["a.ignoredResourceGroups[0]: resource group name can't contain '/'"],
        ),
        (
            {"scoringStrategy": {"type": "Balanced"}},
            [
                "a.scoringStrategy.type: unsupported value 'Balanced': supported values: "
                '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'
            ],
        ),
        (
            # SetDefaults_NodeResourcesFitArgs turns a weight of 0 into 1 before validation.
            {
                "scoringStrategy": {
                    "resources": [
                        {"name": "cpu", "weight": 0},
                        {"name": "memory", "weight": 101},
                        {"name": "nvidia.com/gpu", "weight": -1},
                    ]
                }
            },
            [
                "a.scoringStrategy.resources[1].weight: "
                "resource weight of memory not in valid range (0, 100]",
                "a.scoringStrategy.resources[2].weight: "
                "resource weight of nvidia.com/gpu not in valid range (0, 100]",
            ],
        ),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            ["a.scoringStrategy.requestedToCapacityRatio: must be specified when type is RequestedToCapacityRatio"],
        ),
        (
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]},
                }
            },
            ["a.scoringStrategy.requestedToCapacityRatio: must be nil when type is not RequestedToCapacityRatio"],
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            ["a.scoringStrategy.requestedToCapacityRatio.shape: at least one point must be specified"],
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [
                            {"utilization": 50, "score": 1},
                            {"utilization": 40, "score": 11},
                            {"utilization": 101},
                        ]
                    },
                }
            },
            [
                # validateFunctionShape: the first unsorted point, then every point's ranges
                "a.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: "
                "values must be sorted in increasing order",
                "a.scoringStrategy.requestedToCapacityRatio.shape[1].score: not in valid range [0, 10]",
                "a.scoringStrategy.requestedToCapacityRatio.shape[2].utilization: "
                "not in valid range [0, 100]",
            ],
        ),
    ],
)
def test_fit_args_validation(args: Mapping[str, Any], errors: list[str]) -> None:
    got = validate_fit_args(args, "a")
    assert [e.split(": ", 1)[0] for e in got] == [e.split(": ", 1)[0] for e in errors]
    for g, e in zip(got, errors, strict=True):
        assert g.startswith(e)


# --- score ranges (property) ------------------------------------------------------------------------------

_STRATEGIES: list[dict[str, Any]] = [
    {},
    {"scoringStrategy": {"type": "MostAllocated"}},
    {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
            },
        }
    },
    {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "nvidia.com/gpu", "weight": 5}],
            "requestedToCapacityRatio": {
                "shape": [
                    {"utilization": 10, "score": 2},
                    {"utilization": 60, "score": 9},
                    {"utilization": 90, "score": 3},
                ]
            },
        }
    },
]


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(st.integers(0, 64_000), st.integers(0, 256), st.integers(0, 8), st.integers(0, 40_000)),
        min_size=1,
        max_size=6,
    ),
    pod_cpu=st.integers(0, 80_000),
    pod_gpu=st.integers(0, 10),
    strategy=st.sampled_from(range(len(_STRATEGIES))),
)
def test_scores_stay_in_range(
    nodes: list[tuple[int, int, int, int]], pod_cpu: int, pod_gpu: int, strategy: int
) -> None:
    pod = make_pod(containers=[container(cpu=f"{pod_cpu}m", **{"nvidia.com/gpu": str(pod_gpu)})])
    infos = []
    for i, (cpu, mem_gi, gpus, used_cpu) in enumerate(nodes):
        node = make_node(f"n{i}", cpu=f"{cpu}m", memory=f"{mem_gi}Gi", extra={"nvidia.com/gpu": str(gpus)})
        infos.append(info(node, make_pod(f"u{i}", containers=[container(cpu=f"{used_cpu}m")])))
    for plugin in (NodeResourcesFit(_STRATEGIES[strategy]), TaintToleration(), NodeAffinity()):
        for s in scores_of(plugin, pod, infos):
            assert 0 <= s <= MAX_NODE_SCORE


# --- through the framework runtime ------------------------------------------------------------------------


def test_default_node_plugins_in_the_runtime() -> None:
    """The node plugins of the default profile, run by the runtime: PreFilter result, Filter short-circuit
    with the plugin's name, weighted normalised scores (TaintToleration 3, NodeAffinity 2, Fit 1)."""
    from plugins.defaultbinder import SPEC as BINDER_SPEC
    from scheduler.config.schedulerconfig import parse_config
    from scheduler.framework.runtime import Framework

    registry = {s.name: s for s in [*ALL_SPECS, BINDER_SPEC]}
    cfg = parse_config(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}, registry
    )
    fw = Framework(cfg.profiles[0], registry)
    pod = make_pod(
        containers=[container(cpu="1", memory="2Gi")],
        affinity={
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [expr("gpu", "Exists")]}}
            ]
        },
    )
    nodes = [
        info(make_node("a", labels={"gpu": "h100"})),
        info(make_node("b", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])),
        info(make_node("c", taints=[{"key": "hard", "value": "1", "effect": "NoSchedule"}])),
        info(make_node("d", cpu="500m")),
    ]
    cs = state()
    res, st_ = fw.run_pre_filter(cs, pod)
    assert st_.is_success and res is None
    verdicts = {n.name: fw.run_filter(cs, pod, n) for n in nodes}
    assert verdicts["a"].is_success and verdicts["b"].is_success
    assert verdicts["c"] == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had untolerated taint(s)",), "TaintToleration"
    )
    assert verdicts["d"] == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",), "NodeResourcesFit"
    )
    feasible = nodes[:2]
    assert fw.run_pre_score(cs, pod, feasible).is_success
    totals = {s.name: s.score for s in fw.run_score(cs, pod, feasible)}
    assert totals == {"a": 3 * 100 + 2 * 100 + 75, "b": 3 * 0 + 2 * 0 + 75}
