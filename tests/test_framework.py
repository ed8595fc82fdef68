"""Framework runtime: score normalisation and weights, status handling, node sampling, fit errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from scheduler.api.model import Pod, node_from, pod_from
from scheduler.cache.cache import NodeInfo, Snapshot, _node_info
from scheduler.config.registry import PluginRef, PluginSpec
from scheduler.config.schedulerconfig import Profile
from scheduler.framework.helpers import fit_error
from scheduler.framework.interface import Code, CycleState, NodeScore, QueuedPodInfo, Status
from scheduler.framework.runtime import Framework
from scheduler.framework.scoring import FrameworkError
from scheduler.loop.scheduler import num_feasible_nodes_to_find


class Sorter:
    name: ClassVar[str] = "Sorter"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class Binder:
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node: str, api: Any) -> Status:
        return Status.ok()


class Raw:
    """Scores the digit at the end of the node name (raw 0..9), normalised to 0..100."""

    name: ClassVar[str] = "Raw"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return int(node.name[-1])

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        top = max(s.score for s in scores) or 1
        for s in scores:
            s.score = s.score * 100 // top
        return Status.ok()


class Flat:
    name: ClassVar[str] = "Flat"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return 50


class Bad:
    name: ClassVar[str] = "Bad"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return 101


def _registry() -> dict[str, PluginSpec]:
    return {
        c.name: PluginSpec(c.name, lambda args, c=c: c(), frozenset({"queueSort", "bind", "score"}))
        for c in (Sorter, Binder, Raw, Flat, Bad)
    }


def _fw(scores: tuple[PluginRef, ...]) -> Framework:
    plugins: Mapping[str, tuple[PluginRef, ...]] = {
        "queueSort": (PluginRef("Sorter"),),
        "bind": (PluginRef("Binder"),),
        "score": scores,
    }
    return Framework(Profile("test", plugins), _registry())


def _nodes(*names: str) -> list[NodeInfo]:
    return [
        _node_info(node_from({"metadata": {"name": n}, "status": {"allocatable": {"pods": "10"}}}), {}) for n in names
    ]


def _pod() -> Pod:
    return pod_from({"metadata": {"name": "p", "namespace": "d"}, "spec": {}})


def test_weights_and_normalisation() -> None:
    fw = _fw((PluginRef("Raw", 3), PluginRef("Flat", 1)))
    state = CycleState(Snapshot.__new__(Snapshot))
    scores = fw.run_score(state, _pod(), _nodes("n2", "n4", "n0"))
    assert [s.score for s in scores] == [50 * 3 + 50, 100 * 3 + 50, 0 + 50]


def test_out_of_range_score_is_an_error() -> None:
    fw = _fw((PluginRef("Bad", 1),))
    with pytest.raises(FrameworkError, match="invalid score 101"):
        fw.run_score(CycleState(Snapshot.__new__(Snapshot)), _pod(), _nodes("n1"))


def test_unknown_plugin_and_missing_queue_sort() -> None:
    with pytest.raises(FrameworkError, match="not registered"):
        _fw((PluginRef("Nope", 1),))
    with pytest.raises(FrameworkError, match="queueSort"):
        Framework(Profile("t", {"bind": (PluginRef("Binder"),)}), _registry())


def test_status_helpers() -> None:
    st = Status.unschedulable("a", "b").with_plugin("P")
    assert st.code == Code.UNSCHEDULABLE and st.plugin == "P" and st.message == "a, b"
    assert Status.ok().with_plugin("P").plugin == ""
    assert Status.unresolvable("x").is_rejected and not Status.error("x").is_rejected


@pytest.mark.parametrize(
    ("pct", "n", "want"),
    [(0, 50, 50), (0, 1000, 420), (0, 5000, 500), (0, 100, 100), (10, 1000, 100), (30, 1000, 300), (100, 1000, 1000)],
)
def test_number_of_feasible_nodes_to_find(pct: int, n: int, want: int) -> None:
    assert num_feasible_nodes_to_find(pct, n) == want


def test_fit_error_message() -> None:
    msg = fit_error(
        3,
        {
            "a": Status.unschedulable("Insufficient cpu"),
            "b": Status.unschedulable("Insufficient cpu", "Insufficient memory"),
            "c": Status.unresolvable("node(s) were unschedulable"),
        },
    )
    assert msg == "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, 2 Insufficient cpu."


def test_a_status_memo_lives_on_the_status_and_is_not_part_of_its_value() -> None:
    """Status.memo (DynamicResources keeps its retarget template there instead of a table keyed by the status's
    identity, which had to hold every status seen, up to 50,000, in a long-running scheduler): not compared, not
    hashed, not copied by dataclasses.replace."""
    import dataclasses

    from scheduler.framework.interface import UNSET, Code, Status

    a = Status(Code.UNSCHEDULABLE, ("no device",), "DynamicResources")
    b = Status(Code.UNSCHEDULABLE, ("no device",), "DynamicResources")
    assert a.memo is UNSET
    object.__setattr__(a, "memo", ("template",))
    assert a == b and hash(a) == hash(b) and b.memo is UNSET
    assert dataclasses.replace(a, reasons=("other",)).memo is UNSET
    assert "memo" not in repr(a)
