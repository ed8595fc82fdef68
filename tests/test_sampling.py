"""Node sampling as kube-scheduler does it (v1.37.2 ``pkg/scheduler/schedule_one.go``): Filter stops once
``numFeasibleNodesToFind`` nodes fit and the next cycle starts where this one stopped (``nextStartNodeIndex``);
and with reuse between equal pods (scheduler/framework/batch.py) a cycle filters only the nodes that changed, so
its cost does not grow with the number of nodes."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import ClassVar

import pytest

from scheduler.api.model import Pod, pod_from
from scheduler.cache.cache import Cache, NodeInfo
from scheduler.config.registry import PluginRef, PluginSpec
from scheduler.config.schedulerconfig import Profile, SchedulerConfig
from scheduler.framework.interface import CycleState, Status
from scheduler.loop.scheduler import Scheduler, num_feasible_nodes_to_find
from scheduler.simulate.memapi import InMemoryAPI
from tests.test_framework import Binder, Sorter  # the trivial QueueSort and Bind plugins


class Counting:
    """Filter (every node fits but those listed in ``full``) and Score (0), counting the nodes it filters."""

    name: ClassVar[str] = "Counting"
    filtered: ClassVar[list[str]] = []
    full: ClassVar[set[str]] = set()

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return "equal"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        self.filtered.append(node.name)
        return Status.unschedulable("full") if node.name in self.full else Status.ok()

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return 0


def _scheduler(n: int, pct: int = 0, reuse: str = "batch") -> tuple[Scheduler, Cache]:
    cache = Cache()
    for i in range(n):
        cache.apply("Node", "ADDED", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:05d}"},
                                      "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}})
    points = frozenset({"queueSort", "bind", "filter", "score"})
    registry: Mapping[str, PluginSpec] = {c.name: PluginSpec(c.name, lambda a, c=c: c(), points)
                                          for c in (Sorter, Binder, Counting)}
    plugins = {
        "queueSort": (PluginRef("Sorter"),),
        "bind": (PluginRef("Binder"),),
        "filter": (PluginRef("Counting"),),
        "score": (PluginRef("Counting", 1),),
    }
    sched = Scheduler(cache, InMemoryAPI(), SchedulerConfig((Profile("t", plugins),), percentage_of_nodes_to_score=pct),
                      registry=registry)
    sched.profiles["t"].reuse = reuse
    Counting.filtered.clear()
    Counting.full.clear()
    return sched, cache


def _pod(i: int) -> Pod:
    return pod_from({"metadata": {"name": f"p{i}", "namespace": "d", "uid": f"u{i}"},
                     "spec": {"schedulerName": "t", "containers": [{"name": "c", "image": "i"}]}})


def _cycle(sched: Scheduler, cache: Cache, i: int) -> str | None:
    pod = _pod(i)
    node, _, _ = sched._find_node(sched.profiles["t"], CycleState(cache.snapshot()), pod)
    if node is not None:
        cache.assume_pod(pod, node)  # the node it went to changes (its NodeInfo)
    return node


@pytest.mark.parametrize("reuse", ["batch", "off"])
@pytest.mark.parametrize(("n", "pct"), [(1000, 0), (250, 0), (5000, 0), (300, 10), (80, 0), (400, 100)])
def test_filter_stops_at_the_sample_and_the_next_cycle_starts_where_it_stopped(n: int, pct: int, reuse: str) -> None:
    sched, cache = _scheduler(n, pct, reuse)
    want = num_feasible_nodes_to_find(pct, n)
    assert _cycle(sched, cache, 0) == "n00000"  # scores tie: the first node of the sample
    assert sched._next_start == want % n
    Counting.full.update(f"n{i:05d}" for i in range(want, want + 10))  # the next 10 nodes stop fitting
    cache.apply("Node", "MODIFIED", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{want:05d}"},
                                     "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}})
    sched2, cache2 = sched, cache  # (the same scheduler: its nextStartNodeIndex carries over)
    if reuse == "batch":  # only n{want} changed as far as the cache knows: the others' verdicts would be stale
        sched2, cache2 = _scheduler(n, pct, reuse)
        Counting.full.update(f"n{i:05d}" for i in range(want, want + 10))
        sched2._next_start = sched._next_start
    node = _cycle(sched2, cache2, 1)
    if want < n:
        # the sample starts at n{want}; the 10 full nodes are skipped and counted as looked at
        assert node == f"n{(want + 10) % n:05d}"
        assert sched2._next_start == (want + min(want + 10, n)) % n
    else:
        assert sched2._next_start == 0


@pytest.mark.parametrize("n", [1000, 4000])
def test_with_reuse_a_cycle_filters_only_the_nodes_that_changed(n: int) -> None:
    """Each node is filtered once for a signature as the samples go round; after that a cycle filters only the
    node the previous pod went to (when its sample reaches it): the cost per pod does not grow with the nodes."""
    sched, cache = _scheduler(n)
    want = num_feasible_nodes_to_find(0, n)
    _cycle(sched, cache, 0)
    assert len(Counting.filtered) == want
    rounds = -(-n // want)  # cycles until the samples went round once
    for i in range(1, rounds + 1):
        _cycle(sched, cache, i)
    assert len(Counting.filtered) <= n + rounds  # every node once, plus the ones the pods changed
    Counting.filtered.clear()
    for i in range(rounds + 1, rounds + 41):
        _cycle(sched, cache, i)
    assert len(Counting.filtered) <= 40  # (without reuse: 40 x the sample)


def test_without_reuse_every_cycle_filters_its_whole_sample() -> None:
    sched, cache = _scheduler(1000, reuse="off")
    for i in range(5):
        _cycle(sched, cache, i)
    assert len(Counting.filtered) == 5 * num_feasible_nodes_to_find(0, 1000)


def test_token_changes_protocol_is_what_the_batch_asks_of_token_plugins() -> None:
    """A token plugin without ``token_changes`` still gets exact results: the framework filters node by node."""

    class Tokened(Counting):
        name: ClassVar[str] = "Tokened"

        def node_token(self, state: CycleState, node: NodeInfo) -> Hashable:
            return 0

    class Tracked(Tokened):
        name: ClassVar[str] = "Tracked"

        def token_changes(self, state: CycleState, since: Hashable | None) -> tuple[Hashable, Collection[str] | None]:
            return 0, (None if since is None else ())

    for cls, batched in ((Tokened, False), (Tracked, True)):
        cache = Cache()
        cache.apply("Node", "ADDED", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"},
                                      "status": {"allocatable": {"pods": "10"}}})
        points = frozenset({"queueSort", "bind", "filter"})
        registry = {c.name: PluginSpec(c.name, lambda a, c=c: c(), points) for c in (Sorter, Binder, cls)}
        plugins = {
            "queueSort": (PluginRef("Sorter"),), "bind": (PluginRef("Binder"),), "filter": (PluginRef(cls.name),),
        }
        sched = Scheduler(cache, InMemoryAPI(), SchedulerConfig((Profile("t", plugins),)), registry=registry)
        fw = sched.profiles["t"]
        state = CycleState(cache.snapshot())
        assert sched._find_node(fw, state, _pod(0))[0] == "a"
        assert (fw._batch_runner is not None and fw._batch_runner.usable) is batched
