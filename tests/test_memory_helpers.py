"""The live process's memory helpers (scheduler/kube/memory.py): the untraced report's figures and the cycle
descriptions an operator reads to find which references keep garbage cyclic (issue 24)."""

from __future__ import annotations

import gc
from typing import Any

from scheduler.kube import memory


class _Holder:
    __slots__ = ("back",)

    def __init__(self) -> None:
        self.back: Any = None


class _Node:
    def __init__(self) -> None:
        self.holder = _Holder()
        self.holder.back = {"owner": self}


def _saved_garbage(make: Any) -> list[Any]:
    gc.collect()
    with memory.saving_garbage() as saved:
        make()
        gc.collect()
        return list(saved)


def test_describe_cycles_names_each_reference_of_the_shortest_cycle() -> None:
    garbage = _saved_garbage(lambda: _Node())
    shapes = memory.describe_cycles(garbage)
    assert "_Node.holder -> _Holder.back -> dict['owner'] -> _Node" in shapes, shapes
    # every shape is a closed walk: it ends on the type it starts with
    for s in shapes:
        assert s.split(".")[0].split("[")[0].split(" ")[0] == s.rsplit("-> ", 1)[1], s


def test_describe_cycles_ignores_objects_outside_the_garbage() -> None:
    live = _Node()  # a cycle that is still reachable: not garbage, so not walked
    assert memory.describe_cycles([live, live.holder]) == []  # the dict closing the cycle is not in the list


def test_collect_and_trim_frees_cycles_and_reports() -> None:
    import weakref

    node = _Node()
    gone = weakref.ref(node)
    del node
    done = memory.collect_and_trim(full_collection=True)
    assert gone() is None and done["unreachable"] >= 3
    assert set(done) >= {"collect_ms", "rss_before_kib", "rss_kib", "trimmed"}
    assert "unreachable" not in memory.collect_and_trim(full_collection=False)


def test_pymalloc_stats_parse_cpython_s_own_text() -> None:
    stats = memory.pymalloc_stats()
    assert stats["arenas_current"] >= 1 and stats["used_bytes"] > 0, stats
    assert (memory.rss_kib() or 0) > 0
