"""Reuse of work between equal pods (scheduler/framework/batch.py) never changes a result.

The same cycles run three ways -- ``batch`` (per-signature verdicts and scores, only changed nodes redone),
``memo`` (the per-node memo) and ``off`` (every plugin on every node looked at) -- and must agree on the node,
the status and where the next cycle starts (``nextStartNodeIndex``); a test with the change tracking switched
off shows that a stale entry of the node the previous pod took would be noticed."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.model import Pod, pod_from
from scheduler.cache.cache import Cache, NodeInfo, Snapshot
from scheduler.config.registry import PluginRef, PluginSpec, default_registry
from scheduler.config.schedulerconfig import Profile, SchedulerConfig
from scheduler.framework.helpers import (
    default_normalize_score,
    max_normalization,
    max_normalized,
    min_max_normalization,
    min_max_normalize_score,
)
from scheduler.framework.interface import MAX_NODE_SCORE, CycleState, NodeScore, Status
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import simulate
from tests.test_framework import Binder, Sorter  # the trivial QueueSort and Bind plugins

MODES = ("batch", "memo", "off")


# --- a framework of test plugins over a mutable world ---------------------------------------------------------


class World:
    """Per-node facts the test plugins read; every change is logged for ``token_changes``."""

    def __init__(self, names: list[str], seed: int) -> None:
        rng = random.Random(seed)
        self.fit = {n: rng.random() < 0.7 for n in names}
        self.static = {n: rng.randrange(0, 101) for n in names}
        self.peak = {n: rng.choice((0, 0, 5, 10, 700, 1000)) for n in names}
        self.version = dict.fromkeys(names, 0)
        self.log: list[str] = []
        self.hide_changes = False  # sabotage: pretend nothing changed

    def change(self, name: str, fit: bool, static: int, peak: int) -> None:
        self.fit[name], self.static[name], self.peak[name] = fit, static, peak
        self.version[name] += 1
        self.log.append(name)


class Fits:
    """Filter: the world's ``fit``; a node token (its version) with ``token_changes`` from the world's log."""

    name: ClassVar[str] = "Fits"

    def __init__(self, world: World) -> None:
        self.world = world

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return "same"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return Status.ok() if self.world.fit[node.name] else Status.unschedulable(f"{node.name[-1]} does not fit")

    def node_token(self, state: CycleState, node: NodeInfo) -> Hashable:
        return self.world.version[node.name]

    def token_changes(self, state: CycleState, since: Hashable | None) -> tuple[Hashable, Collection[str] | None]:
        log = self.world.log
        if since is None:
            return len(log), None
        assert isinstance(since, int)
        return len(log), ([] if self.world.hide_changes else log[since:])


class Static:
    """Score without NormalizeScore: a fixed amount per node."""

    name: ClassVar[str] = "Static"

    def __init__(self, world: World) -> None:
        self.world = world

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return "same"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return self.world.static[node.name]


class Peak:
    """Score normalised by the highest of the nodes scored together (DefaultNormalizeScore), reversed or not."""

    name: ClassVar[str] = "Peak"
    reverse: ClassVar[bool] = False

    def __init__(self, world: World) -> None:
        self.world = world

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return "same"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return self.world.peak[node.name]

    @max_normalized()
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return Status.ok()


class LowPeak(Peak):
    name: ClassVar[str] = "LowPeak"

    @max_normalized(reverse=True)
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return Status.ok()


class Spread(Peak):
    """A normaliser of its own (min-max): the batch hands it the window's raw scores as run_score would."""

    name: ClassVar[str] = "Spread"

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        lo, hi = min(s.score for s in scores), max(s.score for s in scores)
        for s in scores:
            s.score = 0 if hi == lo else (s.score - lo) * MAX_NODE_SCORE // (hi - lo)
        return Status.ok()


def _registry(world: World) -> dict[str, PluginSpec]:
    points = frozenset({"queueSort", "bind", "filter", "score"})
    return {
        c.name: PluginSpec(c.name, (lambda args, c=c: c(world)) if c not in (Sorter, Binder) else (lambda a, c=c: c()),
                           points)
        for c in (Sorter, Binder, Fits, Static, Peak, LowPeak, Spread)
    }


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}}


def _pod(i: int) -> Pod:
    return pod_from({"metadata": {"name": f"p{i}", "namespace": "d", "uid": f"u{i}"},
                     "spec": {"schedulerName": "t", "containers": [{"name": "c", "image": "i"}]}})


def _schedulers(world: World, cache: Cache, pct: int, scorers: tuple[str, ...]) -> dict[str, Scheduler]:
    plugins: Mapping[str, tuple[PluginRef, ...]] = {
        "queueSort": (PluginRef("Sorter"),),
        "bind": (PluginRef("Binder"),),
        "filter": (PluginRef("Fits"),),
        "score": tuple(PluginRef(s, w) for s, w in zip(scorers, (1, 2, 3, 1), strict=False)),
    }
    config = SchedulerConfig(profiles=(Profile("t", plugins),), percentage_of_nodes_to_score=pct)
    out = {}
    for mode in MODES:
        sched = Scheduler(cache, InMemoryAPI(), config, registry=_registry(world))
        sched.profiles["t"].reuse = mode
        out[mode] = sched
    return out


def _cycle(sched: Scheduler, pod: Pod) -> tuple[str | None, str, int]:
    fw = sched.profiles["t"]
    node, status, _ = sched._find_node(fw, CycleState(sched.cache.snapshot()), pod)
    return node, status.message if status is not None else "", sched._next_start


changes = st.lists(
    st.tuples(st.integers(0, 10_000), st.booleans(), st.integers(0, 100), st.sampled_from((0, 3, 700, 1000))),
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 160),
    pct=st.sampled_from((0, 1, 10, 50, 100)),
    scorers=st.sampled_from((("Static",), ("Static", "Peak"), ("Peak", "LowPeak", "Static"), ("Static", "Spread"),
                             ("LowPeak",), ())),
    seed=st.integers(0, 1000),
    steps=st.lists(st.tuples(changes, st.booleans()), min_size=1, max_size=12),
)
def test_batch_memo_and_no_reuse_agree_cycle_by_cycle(
    n: int, pct: int, scorers: tuple[str, ...], seed: int, steps: list[tuple[list[Any], bool]]
) -> None:
    names = [f"node-{i:03d}" for i in range(n)]
    world = World(names, seed)
    cache = Cache()
    for name in names:
        cache.apply("Node", "ADDED", _node(name))
    scheds = _schedulers(world, cache, pct, scorers)
    for i, (step, assume) in enumerate(steps):
        for idx, fit, static, peak in step:
            world.change(names[idx % n], fit, static, peak)
        pod = _pod(i)
        got = {mode: _cycle(s, pod) for mode, s in scheds.items()}
        assert got["batch"] == got["off"] == got["memo"], (i, got)
        node = got["off"][0]
        if assume and node is not None:
            cache.assume_pod(pod, node)  # a NodeInfo changes: the snapshot's log names it


def test_a_stale_verdict_of_the_changed_node_would_be_caught() -> None:
    """The node the previous pod took stops fitting; with its change hidden from the batch, the batch would
    hand it out again -- the comparison above would fail."""
    names = [f"node-{i:03d}" for i in range(5)]
    world = World(names, 1)
    for name in names:
        world.change(name, True, 50, 0)
    cache = Cache()
    for name in names:
        cache.apply("Node", "ADDED", _node(name))
    scheds = _schedulers(world, cache, 0, ("Static",))
    first = {mode: _cycle(s, _pod(0)) for mode, s in scheds.items()}
    assert first["batch"] == first["off"] and first["off"][0] == "node-000"
    for s in scheds.values():
        s._next_start = 0
    world.change("node-000", False, 50, 0)  # full now
    assert _cycle(scheds["batch"], _pod(1))[0] == "node-001"
    world.change("node-000", True, 100, 0)  # fits again, and is the best now
    world.hide_changes = True
    scheds["batch"]._next_start = scheds["off"]._next_start = 0
    stale, fresh = _cycle(scheds["batch"], _pod(2))[0], _cycle(scheds["off"], _pod(2))[0]
    assert fresh == "node-000" and stale != fresh


def test_equal_pods_see_the_previous_pods_node_change_through_the_snapshot() -> None:
    """Three identical CPU pods on three identical nodes: LeastAllocated sends each to a node of its own. A batch
    that kept the node the previous pod took as it was (its change hidden) would stack them."""
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
         "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}}
        for i in range(3)
    ]
    objs += [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
         "spec": {"schedulerName": "dra-scheduler",
                  "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}
        for i in range(3)
    ]

    def placements() -> list[str]:
        res = asyncio.run(simulate([dict(o) for o in objs]))
        assert res.scheduler is not None and res.scheduler.profiles["dra-scheduler"].memo_stats["filter_hits"] > 0
        return sorted(o["spec"].get("nodeName", "") for o in res.items if o["kind"] == "Pod")

    assert placements() == ["n0", "n1", "n2"]
    original = Snapshot.changed_nodes_since

    def hidden(self: Snapshot, mark: Any) -> Any:
        now, names = original(self, mark)
        return now, (names if mark is None else [])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Snapshot, "changed_nodes_since", hidden)
        assert placements() != ["n0", "n1", "n2"]  # the stale entry of n0 is noticed by the check above


# --- every default plugin, a mixed workload -------------------------------------------------------------------


def _mixed_workload(seed: int) -> list[dict[str, Any]]:
    from bench.fleet import scale_fleet

    rng = random.Random(seed)
    objs = scale_fleet(110, gpus_per_node=4)  # 440 GPUs for about 520 asked: some pods stay pending
    for o in objs:
        if o["kind"] != "Node":
            continue
        i = int(o["metadata"]["name"].rsplit("-", 1)[1])
        if i % 7 == 0:
            o.setdefault("spec", {})["taints"] = [{"key": "slow", "value": "x", "effect": "PreferNoSchedule"}]
        if i % 5 == 0:
            o["status"]["images"] = [{"names": ["registry.example/trainer:v1"], "sizeBytes": 700 * 2**20}]
        o["metadata"]["labels"]["tier"] = "gold" if i % 3 == 0 else "silver"
    for gpus in (1, 2, 4, 8):
        objs.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"gpu-{gpus}", "namespace": "mix"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": gpus}}]}}},
        })
    pods = []
    for i in range(330):
        kind = rng.choice(("gpu-1", "gpu-1", "gpu-2", "gpu-4", "gpu-8", "cpu-s", "cpu-l", "pref", "tol", "img"))
        spec: dict[str, Any] = {"schedulerName": "dra-scheduler", "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
        if kind.startswith("gpu"):
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": kind}]
            spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        elif kind == "cpu-l":
            spec["containers"][0]["resources"]["requests"] = {"cpu": "24", "memory": "100Gi"}
        elif kind == "pref":
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gold"]}]}}]}}
        elif kind == "tol":
            spec["tolerations"] = [{"key": "slow", "operator": "Exists", "effect": "PreferNoSchedule"}]
        elif kind == "img":
            spec["containers"][0]["image"] = "registry.example/trainer:v1"
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{kind}-{i:03d}", "namespace": "mix"},
                     "spec": spec})
    return objs + pods


def _outcome(objs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    res = asyncio.run(simulate(objs))
    pods, claims = {}, {}
    for o in res.items:
        if o["kind"] == "Pod":
            conds = [c for c in (o.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
            pods[o["metadata"]["name"]] = (o["spec"].get("nodeName"), conds)
        elif o["kind"] == "ResourceClaim":
            claims[o["metadata"]["name"]] = (o.get("status") or {}).get("allocation")
    return pods, claims


@pytest.mark.parametrize("seed", [3, 11])
def test_mixed_workload_places_every_pod_the_same_with_and_without_reuse(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = {}
    for mode in MODES:
        monkeypatch.setenv("DRA_SCHEDULER_REUSE", mode)
        got[mode] = _outcome(_mixed_workload(seed))
    pods, _ = got["off"]
    assert any(node is None for node, _ in pods.values())  # some stay pending: their messages are compared too
    assert sum(node is not None for node, _ in pods.values()) > 150
    assert got["batch"] == got["off"]
    assert got["memo"] == got["off"]


# --- the plugins marked max_normalized normalise as DefaultNormalizeScore ------------------------------------


def _marked(mark: Any) -> dict[str, tuple[Any, Any]]:
    """The default registry's plugins (built with their default args) whose ``mark(instance)`` is not None."""
    out: dict[str, tuple[Any, Any]] = {}
    for name, spec in default_registry().items():
        try:
            inst = spec.factory(dict(spec.default_args))
        except Exception:
            continue
        got = mark(inst)
        if got is not None:
            out[name] = (inst, got)
    return out


def _assert_normalises_as(
    marked: dict[str, tuple[Any, Any]], rows: list[list[int]], reference: Callable[[Any, list[NodeScore]], None]
) -> None:
    """Every marked plugin's NormalizeScore gives, on every row, what ``reference(mark, scores)`` gives."""
    state = CycleState(Snapshot())
    for name, (inst, mark) in marked.items():
        for row in rows:
            got = [NodeScore(f"n{i}", v) for i, v in enumerate(row)]
            want = [NodeScore(f"n{i}", v) for i, v in enumerate(row)]
            assert inst.normalize_score(state, _pod(0), got).is_success
            reference(mark, want)
            assert got == want, (name, row)


def test_every_plugin_marked_max_normalized_is_default_normalize_score() -> None:
    marked = _marked(max_normalization)
    assert {"TaintToleration", "NodeAffinity", "DynamicResources", "GpuTopology"} <= set(marked)
    rng = random.Random(5)
    rows = [[], [0, 0, 0], [5], *([rng.randrange(0, 1000) for _ in range(rng.randrange(1, 20))] for _ in range(50))]
    _assert_normalises_as(marked, rows, lambda rev, want: default_normalize_score(MAX_NODE_SCORE, rev, want))


def test_every_plugin_marked_min_max_normalized_normalises_so() -> None:
    """The batch's C-speed path for min-max plugins (DeviceFragmentation) must give what their NormalizeScore gives,
    negative raw scores included (a placement can raise fragmentation)."""
    marked = _marked(min_max_normalization)
    assert set(marked) >= {"DeviceFragmentation"}
    assert marked["DeviceFragmentation"][1] == 100  # its ``scale`` arg
    rng = random.Random(7)
    rows = [[], [0, 0, 0], [-5]]
    rows += [[rng.randrange(-3000, 3000) for _ in range(rng.randrange(1, 20))] for _ in range(50)]
    rows += [[rng.randrange(-30, 30) for _ in range(10)] for _ in range(10)]  # spans below the floor
    _assert_normalises_as(marked, rows, lambda floor, want: min_max_normalize_score(MAX_NODE_SCORE, floor, want))
