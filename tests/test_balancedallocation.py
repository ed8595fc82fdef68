"""NodeResourcesBalancedAllocation (kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go``; cases from
``balanced_allocation_test.go`` TestNodeResourcesBalancedAllocation, args validation from
``validation_pluginargs_test.go`` TestValidateNodeResourcesBalancedAllocationArgs), plus simulate."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from plugins.balancedallocation import (
    SPEC,
    BalancedAllocation,
    balanced_resource_score,
    balanced_score,
    parse_args,
    validate_args,
)
from scheduler.api.model import Node, Pod, node_from, pod_from
from scheduler.cache.cache import NodeInfo, _node_info
from scheduler.config.schedulerconfig import ConfigError, parse_config
from scheduler.framework.interface import (
    Code,
    CycleState,
    FilterPlugin,
    PreScorePlugin,
    ScoreNormalizer,
    ScorePlugin,
    SignPlugin,
)
from scheduler.simulate.simulation import simulate

DEFAULT = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
WITH_GPU = {
    "resources": [
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
        {"name": "nvidia.com/gpu", "weight": 1},
    ]
}


def _node(name: str, milli_cpu: int, memory: int, extra: Mapping[str, int] | None = None) -> Node:
    alloc: dict[str, Any] = {"cpu": f"{milli_cpu}m", "memory": str(memory), "pods": "110"}
    alloc.update({k: str(v) for k, v in (extra or {}).items()})
    return node_from({"metadata": {"name": name}, "status": {"allocatable": alloc}})


def _pod(*containers: Mapping[str, str], name: str = "p", node: str = "") -> Pod:
    """One container per requests map, as upstream's ``st.MakePod().Req(...).Req(...)``."""
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "image": "x", "resources": {"requests": dict(r)}} for i, r in enumerate(containers)
        ]
        or [{"name": "c", "image": "x"}]
    }
    if node:
        spec["nodeName"] = node
    return pod_from({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec})


def cm(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def _infos(nodes: Sequence[Node], existing: Sequence[Pod]) -> list[NodeInfo]:
    return [_node_info(n, {p.key: p for p in existing if p.node_name == n.name}) for n in nodes]


def _state() -> CycleState:
    return CycleState(None)  # type: ignore[arg-type]  # BalancedAllocation never reads the snapshot


# (name, pod, nodes, existing pods, args, expected scores, run PreScore)
CASES: list[tuple[str, Pod, list[Node], list[Pod], Mapping[str, Any], list[int], bool]] = [
    (
        # node1: cpu 0 -> 75%, memory 0 -> 50%: 100 -> 87 => 68; node2: 0 -> 50% both: 100 -> 100 => 75
        "nothing scheduled, resources requested, differently sized nodes",
        _pod(cm("1000m", "2000"), cm("2000m", "3000")),
        [_node("node1", 4000, 10000), _node("node2", 6000, 10000)],
        [],
        DEFAULT,
        [68, 75],
        True,
    ),
    (
        # node1: cpu 30% -> 60%, memory 0 -> 25%: 85 -> 82 => 73; node2: 30 -> 60, 25 -> 50: 97 -> 95 => 74
        "resources requested, pods scheduled with resources",
        _pod(cm("1000m", "2000"), cm("2000m", "3000")),
        [_node("node1", 10000, 20000), _node("node2", 10000, 20000)],
        [
            _pod({"cpu": "1000m"}, {"cpu": "2000m"}, name="e1", node="node1"),
            _pod(cm("1000m", "2000"), cm("2000m", "3000"), name="e2", node="node2"),
        ],
        DEFAULT,
        [73, 74],
        True,
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        _pod(cm("1000m", "2000"), cm("2000m", "3000")),
        [_node("node1", 10000, 20000), _node("node2", 10000, 50000)],
        [
            _pod({"cpu": "1000m"}, {"cpu": "2000m"}, name="e1", node="node1"),
            _pod(cm("1000m", "2000"), cm("2000m", "3000"), name="e2", node="node2"),
        ],
        DEFAULT,
        [73, 70],
        True,
    ),
    (
        # node1: cpu 100%, memory 0 -> 100%: 50 -> 100 => 100; node2: cpu 0, memory 0 -> 100%: 100 -> 50 => 50
        "resources requested, pods scheduled with resources, nodes to reach min/max score",
        _pod({"memory": "2000"}, {"memory": "3000"}),
        [_node("node1", 3000, 5000), _node("node2", 3000, 5000)],
        [_pod({"cpu": "1000m"}, {"cpu": "2000m"}, name="e1", node="node1")],
        DEFAULT,
        [100, 50],
        True,
    ),
    (
        "requested resources at node capacity",
        _pod({"cpu": "1000m"}, {"cpu": "2000m"}),
        [_node("node1", 6000, 10000), _node("node2", 6000, 10000)],
        [
            _pod({"cpu": "1000m"}, {"cpu": "2000m"}, name="e1", node="node1"),
            _pod(cm("1000m", "2000"), cm("2000m", "3000"), name="e2", node="node2"),
        ],
        DEFAULT,
        [62, 62],
        True,
    ),
    (
        # three resources: population standard deviation
        "scalar resource is included in the score computation if pod requests the scalar resource",
        _pod({"cpu": "0", "memory": "0", "nvidia.com/gpu": "1"}),
        [_node("node1", 3500, 40000, {"nvidia.com/gpu": 8}), _node("node2", 3500, 40000, {"nvidia.com/gpu": 8})],
        [
            _pod(
                cm("1000m", "2000"), {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": "3"}, name="e1", node="node1"
            ),
            _pod(cm("1000m", "2000"), cm("2000m", "3000"), name="e2", node="node2"),
        ],
        WITH_GPU,
        [75, 76],
        True,
    ),
    (
        "scalar resource is not included in the score computation if pod doesn't request the scalar resource",
        _pod(cm("1000m", "2000"), cm("2000m", "3000")),
        [_node("node1", 3500, 40000, {"nvidia.com/gpu": 8}), _node("node2", 3500, 40000)],
        [],
        WITH_GPU,
        [56, 56],
        True,
    ),
    (
        "resources requested, pods scheduled with resources if PreScore not called",
        _pod(cm("1000m", "2000"), cm("2000m", "3000")),
        [_node("node1", 10000, 20000), _node("node2", 10000, 20000)],
        [
            _pod({"cpu": "1000m"}, {"cpu": "2000m"}, name="e1", node="node1"),
            _pod(cm("1000m", "2000"), cm("2000m", "3000"), name="e2", node="node2"),
        ],
        DEFAULT,
        [73, 74],
        False,
    ),
    # --- beyond upstream's list ---
    (
        # the node lists no nvidia.com/gpu: left out (cpu 0 -> 85.7%, memory 0 -> 12.5%)
        "requested scalar resource the node does not list is left out",
        _pod(cm("3000m", "5000"), {"nvidia.com/gpu": "1"}),
        [_node("node1", 3500, 40000)],
        [],
        WITH_GPU,
        [56],
        True,
    ),
    (
        # "pods" is not a resource kube-scheduler has allocatable for in scoring: left out, cpu alone => std 0
        "non-scalar resource without allocatable (pods) is left out",
        _pod({"cpu": "1000m", "memory": "100"}),
        [_node("node1", 4000, 10000)],
        [],
        {"resources": [{"name": "cpu"}, {"name": "pods"}]},
        [75],
        True,
    ),
    (
        # plain requests, not the 100m / 200Mi non-zero defaults: the existing best-effort pod counts 0
        "existing best-effort pods count zero",
        _pod(cm("2000m", "5000")),
        [_node("node1", 4000, 10000)],
        [_pod(name="be", node="node1")],
        DEFAULT,
        [75],
        True,
    ),
    (
        # over capacity: fractions capped at 1 (cpu 150% -> 1, memory 100% -> 1): 100 -> 100 => 75
        "fractions are capped at 1",
        _pod(cm("6000m", "10000")),
        [_node("node1", 4000, 10000)],
        [],
        DEFAULT,
        [75],
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "existing", "args", "want", "pre_score"), CASES, ids=[c[0] for c in CASES]
)
def test_balanced_allocation(
    name: str,
    pod: Pod,
    nodes: list[Node],
    existing: list[Pod],
    args: Mapping[str, Any],
    want: list[int],
    pre_score: bool,
) -> None:
    assert validate_args(args, "args") == []
    pl = BalancedAllocation(args)
    infos = _infos(nodes, existing)
    cs = _state()
    if pre_score:
        assert pl.pre_score(cs, pod, infos).is_success
    assert [pl.score(cs, pod, n) for n in infos] == want


def test_best_effort_pod_is_skipped_in_pre_score() -> None:
    pl = BalancedAllocation(DEFAULT)
    infos = _infos([_node("node1", 4000, 10000), _node("node2", 4000, 10000)], [])
    assert pl.pre_score(_state(), _pod(), infos).code == Code.SKIP
    # ... and scores 0 when PreScore did not run
    assert pl.score(_state(), _pod(), infos[0]) == 0


def test_pod_requesting_only_unconfigured_resources_is_best_effort_here() -> None:
    pl = BalancedAllocation(DEFAULT)
    pod = _pod({"nvidia.com/gpu": "1"})
    assert pl.pre_score(_state(), pod, []).code == Code.SKIP
    assert BalancedAllocation(WITH_GPU).pre_score(_state(), pod, []).is_success


def test_init_containers_and_overhead_count() -> None:
    """The pod's effective requests (max with init containers, plus overhead) are what is scored."""
    pod = pod_from(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "initContainers": [{"name": "i", "image": "x", "resources": {"requests": cm("3000m", "1000")}}],
                "containers": [{"name": "c", "image": "x", "resources": {"requests": cm("1000m", "4000")}}],
                "overhead": {"memory": "1000"},
            },
        }
    )
    # cpu 3000/4000 = 75%, memory 5000/10000 = 50% (as the first upstream case) => 68
    [info] = _infos([_node("node1", 4000, 10000)], [])
    assert BalancedAllocation(DEFAULT).score(_state(), pod, info) == 68


def test_pod_level_resources_count() -> None:
    """PodLevelResources (beta, on in 1.37): ``spec.resources.requests`` replace the containers' cpu and
    memory (``resource.PodRequests``)."""
    pod = pod_from(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "resources": {"requests": cm("3000m", "5000")},
                "containers": [{"name": "c", "image": "x", "resources": {"requests": cm("100m", "100")}}],
            },
        }
    )
    [info] = _infos([_node("node1", 4000, 10000)], [])
    assert BalancedAllocation(DEFAULT).score(_state(), pod, info) == 68


def test_score_formula() -> None:
    assert balanced_resource_score([3000, 5000], [4000, 10000]) == 87
    assert balanced_resource_score([0, 0], [0, 0]) == 100  # no resource: std 0
    assert balanced_resource_score([1], [2]) == 100  # one resource: std 0
    # three resources: population std of (0.5, 0.25, 1.0) = 0.3118 => 68
    assert balanced_resource_score([1, 1, 4], [2, 4, 4]) == 68
    assert balanced_score([3000, 5000], [0, 0], [4000, 10000]) == 68
    assert balanced_score([1, 1], [0, 0], [1, 1]) == 75  # no change in balance
    assert balanced_score([1, 0], [0, 0], [1, 1]) == 50  # 100 -> 50: worst
    assert balanced_score([1, 1], [1, 0], [1, 1]) == 100  # 50 -> 100: best


# --- args -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        (DEFAULT, []),
        ({}, []),
        ({"resources": []}, []),
        ({"resources": [{"name": "cpu"}, {"name": "memory", "weight": 0}]}, []),  # defaulted to 1
        (
            {"resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]},
            ["args.resources[0].weight: Invalid value: 2: must be 1"],
        ),
        (
            {"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}]},
            ['args.resources[1].name: Duplicate value: "cpu"'],
        ),
        (
            {"resources": [{"name": "cpu", "weight": -1}, {"name": "cpu", "weight": 3}]},
            [
                "args.resources[0].weight: Invalid value: -1: must be 1",
                'args.resources[1].name: Duplicate value: "cpu"',
                "args.resources[1].weight: Invalid value: 3: must be 1",
            ],
        ),
        ({"resources": "cpu"}, ["args.resources: must be a list"]),
        ({"scoringStrategy": {}}, ["args.scoringStrategy: unknown field"]),
        ({"resources": [{"name": "cpu", "wieght": 1}]}, ["args.resources[0].wieght: unknown field"]),
    ],
)
def test_validate_args(args: Mapping[str, Any], errors: list[str]) -> None:
    assert validate_args(args, "args") == errors


def test_parse_args_defaults() -> None:
    assert parse_args({}) == ("cpu", "memory")
    assert parse_args({"resources": []}) == ("cpu", "memory")
    assert parse_args(WITH_GPU) == ("cpu", "memory", "nvidia.com/gpu")


def test_config_validation_path() -> None:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "dra-scheduler",
                "pluginConfig": [
                    {"name": "NodeResourcesBalancedAllocation", "args": {"resources": [{"name": "cpu", "weight": 5}]}}
                ],
            }
        ],
    }
    with pytest.raises(ConfigError) as e:
        parse_config(doc)
    assert "profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 5: must be 1" in e.value.errors
    doc["profiles"][0]["pluginConfig"][0]["args"] = WITH_GPU  # type: ignore[index]
    cfg = parse_config(doc)
    assert cfg.profiles[0].plugin_args["NodeResourcesBalancedAllocation"] == WITH_GPU


def test_spec_and_signature() -> None:
    inst = SPEC.factory({})
    assert isinstance(inst, PreScorePlugin) and isinstance(inst, ScorePlugin) and isinstance(inst, SignPlugin)
    assert not isinstance(inst, FilterPlugin) and not isinstance(inst, ScoreNormalizer)
    assert SPEC.points == frozenset({"preScore", "score"})
    assert SPEC.validate_args is not None and SPEC.validate_args(SPEC.default_args, "args") == []
    cs = _state()
    a, b = _pod(cm("1", "1Gi"), name="a"), _pod(cm("1000m", "1024Mi"), name="b")
    assert inst.sign(cs, a) == inst.sign(cs, b)
    assert inst.sign(cs, a) != inst.sign(cs, _pod(cm("2", "1Gi")))
    # a resource outside the configured ones does not change the signature (the score does not read it)
    assert inst.sign(cs, a) == inst.sign(cs, _pod({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}))
    assert BalancedAllocation(WITH_GPU).sign(cs, a) != BalancedAllocation(WITH_GPU).sign(
        cs, _pod({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})
    )


# --- simulate ---------------------------------------------------------------------------------------------

SIM = """
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: memory-hog, namespace: default}
spec:
  nodeName: node-a
  containers: [{name: c, image: x, resources: {requests: {cpu: "2", memory: 24Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: cpu-hog, namespace: default}
spec:
  nodeName: node-b
  containers: [{name: c, image: x, resources: {requests: {cpu: "6", memory: 8Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: memory-job, namespace: default}
spec:
  schedulerName: dra-scheduler
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 4Gi}}}]
"""


def test_simulate_prefers_the_node_the_pod_balances() -> None:
    """node-a has 75% of its memory requested, node-b 75% of its cpu.  For the memory-hungry pod
    NodeResourcesFit (LeastAllocated) scores both 40, and a tie goes to the first node (node-a);
    BalancedAllocation scores node-a 73 (balance 75 -> 71) and node-b 76 (75 -> 78): node-b wins."""
    objs = [o for o in yaml.safe_load_all(SIM) if o]
    res = asyncio.run(simulate(objs))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    assert pods["memory-job"]["spec"]["nodeName"] == "node-b"
    [info_a, info_b] = _infos(
        [_node("node-a", 8000, 32 * 1024**3), _node("node-b", 8000, 32 * 1024**3)],
        [
            _pod(cm("2", "24Gi"), name="memory-hog", node="node-a"),
            _pod(cm("6", "8Gi"), name="cpu-hog", node="node-b"),
        ],
    )
    job = _pod(cm("500m", "4Gi"))
    pl = BalancedAllocation(DEFAULT)
    assert [pl.score(_state(), job, info_a), pl.score(_state(), job, info_b)] == [73, 76]
