"""The pure parts of ``make backlog`` (e2e/backlog.py): order fidelity against (priority desc, creation asc), the
latest release before an allocation, the delay percentiles, the claim watch's bookkeeping of releases and double
allocations (fed events by hand, no cluster), and the summary table."""

from __future__ import annotations

import itertools
from typing import Any

from e2e.backlog import ClaimWatch, Delays, Result, latest_before, order_fidelity, summary_table
from e2e.throughput_report import OURS, THEIRS

KEYS = {"a": (3, 1), "b": (3, 2), "c": (1, 3), "d": (2, 4)}  # queue order: a, b, d, c


def test_order_fidelity_of_the_queue_order_is_perfect() -> None:
    o = order_fidelity(KEYS, ["a", "b", "d", "c"])
    assert o["in_order"] == o["priority_respected"] == 4 and o["in_order_share"] == 1.0
    assert o["inversions"] == 0 and o["inversion_share"] == 0.0
    assert o["overtaken_mean"] == 0.0 and o["overtaken_max"] == 0
    assert o["binds_by_priority"] == {"3": 2, "2": 1, "1": 1}


def test_order_fidelity_of_the_reverse_order() -> None:
    o = order_fidelity(KEYS, ["c", "b", "a"])
    # c: a, b, d still pending; b: a pending (same priority, created earlier); a: first in the queue
    assert o["in_order"] == 1
    assert o["priority_respected"] == 2  # b and a: no higher priority was pending
    assert o["overtaken_max"] == 3 and o["overtaken_mean"] == (3 + 1 + 0) / 3
    assert o["inversions"] == 3 and o["inversion_share"] == 1.0


def test_order_fidelity_inversions_match_a_brute_force_count() -> None:
    keys = {f"p{i}": (i % 3, 100 - i) for i in range(7)}
    for perm in itertools.islice(itertools.permutations(keys), 0, 5040, 97):
        order = sorted(keys, key=lambda n: (-keys[n][0], keys[n][1]))
        rank = {n: i for i, n in enumerate(order)}
        binds = list(perm[:5])
        brute = sum(1 for i, j in itertools.combinations(range(len(binds)), 2) if rank[binds[i]] > rank[binds[j]])
        assert order_fidelity(keys, binds)["inversions"] == brute


def test_latest_before_and_delays() -> None:
    assert latest_before([1.0, 2.0, 5.0], 4.0) == 2.0
    assert latest_before([1.0, 2.0, 5.0], 5.0) == 5.0
    assert latest_before([1.0], 0.5) is None
    d = Delays.of([0.1 * i for i in range(1, 101)])
    assert d.count == 100 and d.p50 == 0.1 * 50 and d.p99 == 0.1 * 99 and d.max == 0.1 * 100
    assert Delays.of([]) == Delays(0, None, None, None)


def _claim(name: str, *devices: str) -> dict[str, Any]:
    results = [{"driver": "gpu.nvidia.com", "pool": "n0", "device": d, "request": "gpu"} for d in devices]
    status = {"allocation": {"devices": {"results": results}}} if devices else {}
    return {"metadata": {"name": name}, "status": status}


def test_claim_watch_records_releases_and_double_allocations() -> None:
    w = ClaimWatch(kube=None, namespace="ns", expect=10**9)  # type: ignore[arg-type]  # never started
    w._see(_claim("c1"), 1.0)
    w._see(_claim("c1", "gpu-0"), 2.0)
    w._see(_claim("c1", "gpu-0"), 2.5)  # reservedFor changed, say: no new allocation
    assert w.allocated == {"c1": 2.0} and w.devices["c1"] == [("gpu.nvidia.com", "n0", "gpu-0")]
    w._see(_claim("c1"), 3.0)  # deallocated
    w._gone(_claim("c1"), 3.5)  # then deleted: no second release
    w._see(_claim("c2", "gpu-0"), 4.0)
    w._see(_claim("c3", "gpu-1"), 4.1)
    w._gone(_claim("c3", "gpu-1"), 5.0)  # deleted while allocated
    assert w.releases == {("gpu.nvidia.com", "n0", "gpu-0"): [3.0], ("gpu.nvidia.com", "n0", "gpu-1"): [5.0]}
    assert w.violations == []
    w._see(_claim("c4", "gpu-0"), 6.0)  # c2 still holds gpu-0
    assert w.violations == ["device gpu.nvidia.com/n0/gpu-0 allocated to c2 and c4"]


def test_summary_table_ratios() -> None:
    ours, theirs = Result(OURS, 1, idle_cpu=0.5, binds_window=1200), Result(THEIRS, 1, idle_cpu=2.0, binds_window=1000)
    lines = summary_table([ours, theirs])
    row = {line[:34].strip(): line[34:].split() for line in lines[1:]}
    assert row["idle CPU-s (backlog waits)"] == ["0.500", "2.000", "0.25x"]
    assert row["binds in window"] == ["1,200", "1,000", "1.20x"]
    assert row["release->bind p50 (s)"] == ["-", "-", "-"]
