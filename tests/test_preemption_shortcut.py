"""DefaultPreemption skips the dry run on nodes without a possible victim (issue #23 item 5: a hopeless pod
must be cheap). kube-scheduler 1.37.2's ``SelectVictimsOnNode`` (pkg/scheduler/framework/preemption) finds no
victim on a node where no pod has lower priority than the preemptor; the shortcut gives that node the same
status ("No preemption victims found for incoming pod") without building the dry run or the snapshot's victim
index, so the outcome and message are unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plugins.defaultpreemption import group
from plugins.defaultpreemption import plugin as dp
from scheduler.simulate.simulation import simulate


def _objs(priority: int, bound: bool = False) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for i in range(3):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}},
            }
        )
    for i in range(4):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default", "creationTimestamp": f"2026-01-01T00:0{i}:00Z"},
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "priority": priority if i == 3 else 0,
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
        if bound and i < 3:
            objs[-1]["spec"]["nodeName"] = f"n{i}"
    return objs


def _message(objs: list[dict[str, Any]]) -> str:
    res = asyncio.run(simulate(objs))
    [pod] = [o for o in res.items if o["kind"] == "Pod" and o["metadata"]["name"] == "p3"]
    [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return str(cond["message"])


def test_no_victim_anywhere_same_message_without_dry_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dp, "may_have_victims", lambda node, prio: True)
    monkeypatch.setattr(dp.VictimFloors, "any_victim", lambda self, snap, prio: True)
    full = _message(_objs(0))
    monkeypatch.undo()
    built: list[Any] = []
    real = group.VictimIndex.__init__

    def spy(self: Any, snap: Any) -> None:
        built.append(snap)
        real(self, snap)

    monkeypatch.setattr(group.VictimIndex, "__init__", spy)
    fast = _message(_objs(0))
    assert fast == full
    assert "3 No preemption victims found for incoming pod" in fast
    assert built == []


def test_lower_priority_pods_still_get_the_dry_run() -> None:
    """With victims of lower priority the shortcut does not apply: the high-priority pod preempts one."""
    res = asyncio.run(simulate(_objs(1000, bound=True)))
    assert res.summary["preempted"] == 1


def test_may_have_victims_reads_priorities_and_groups() -> None:
    from scheduler.cache.cache import NodeInfo

    class P:
        def __init__(self, priority: int, pod_group: str = "") -> None:
            self.priority, self.pod_group = priority, pod_group

    class N:
        name = "n"

    def info(*pods: Any) -> Any:
        return NodeInfo(N(), {}, {}, len(pods), pod_list=tuple(pods), name="n")  # type: ignore[arg-type]

    assert not dp.may_have_victims(info(), 10)
    assert not dp.may_have_victims(info(P(10), P(20)), 10)
    assert dp.may_have_victims(info(P(10), P(5)), 10)
    assert dp.may_have_victims(info(P(50, "g")), 10)  # a group's victim priority is the group's


def test_one_priority_cluster_skips_the_whole_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pod of one priority (the trace replay): no node is dry-run, not even asked may_have_victims, and the
    message and the random stream are those of the full pass."""
    calls: list[int] = []
    monkeypatch.setattr(dp.DefaultPreemption, "dry_run_preemption", lambda *a, **k: calls.append(1) or ([], {}))
    fast = _message(_objs(0, bound=True))
    assert calls == []
    monkeypatch.undo()
    monkeypatch.setattr(dp.VictimFloors, "any_victim", lambda self, snap, prio: True)
    assert _message(_objs(0, bound=True)) == fast
    assert "3 No preemption victims found for incoming pod" in fast


def _pod_event(name: str, node: str, priority: int, group: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "dra-scheduler", "nodeName": node, "priority": priority,
                            "containers": [{"name": "c", "image": "x"}]}
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"}, "spec": spec}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return raw


def test_victim_floors_follow_changed_nodes() -> None:
    """VictimFloors is kept from the snapshot's log of changed nodes: a lower-priority pod bound later is seen
    (preemption runs again), and its deletion too; every answer equals a rebuild and may_have_victims on every
    node."""
    from scheduler.cache.cache import Cache

    cache = Cache()
    for i in range(3):
        cache.apply("Node", "ADDED", _objs(0)[i])
    floors = dp.VictimFloors()

    def check(priority: int, want: bool) -> None:
        snap = cache.snapshot()
        assert floors.any_victim(snap, priority) is want
        assert dp.VictimFloors().any_victim(snap, priority) is want
        assert any(dp.may_have_victims(n, priority) for n in snap.nodes) is want

    check(0, False)  # no pod at all
    cache.apply("Pod", "ADDED", _pod_event("a", "n0", 10))
    check(10, False)
    check(11, True)
    cache.apply("Pod", "ADDED", _pod_event("low", "n2", -5))
    check(0, True)  # only n2 changed: the tracker must see it
    cache.apply("Pod", "DELETED", _pod_event("low", "n2", -5))
    check(0, False)
    check(10, False)
