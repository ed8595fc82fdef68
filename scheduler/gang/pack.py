"""Packing counts of equal gang members onto nodes (pure; used by :mod:`scheduler.gang.cycle`).

Members of a gang that ask for the same thing form one class; a class is placed by *count*: each node has a
capacity for the class (how many members fit there together), and a packing says how many members go to
which node. This module chooses that packing. It never allocates anything: the gang scheduler verifies every
packing by allocating the members on their nodes and corrects a node's capacity when the verification
places fewer.

The packing follows the topology levels (zone, block, rack, clique: node labels, outermost first, from the
GpuTopology plugin args) so a group that does not fit one domain spans as few domains as possible, level by
level, and then as few nodes as possible:

* at each level, when some domain (or, at the last step, some node) can take every remaining member, the
  *tightest* one does (best fit: the partially used node or rack is filled, a whole one stays free);
* otherwise the domain with the most room is filled completely and the rest is placed the same way.

Taking the largest capacities first gives the fewest domains/nodes; giving the remainder to the tightest one
that can take it fills partially used nodes before an empty node is broken up. Ties are broken by the
placement rank the caller passes (the scheduling framework's weighted node scores, GpuTopology's Pack/NVLink
score among them), then by node order, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FEWEST = "fewest"  # largest capacities first, best fit for the remainder (the default)
FRAGMENTS = "fragments"  # smallest capacities first: use up partially used nodes, keep big ones whole


@dataclass(frozen=True, slots=True)
class Slot:
    """One node's room for a class."""

    node: str
    cap: int  # members of the class that fit on the node (an upper bound, verified by allocation)
    rank: float = 0.0  # higher is better (framework score), used to break ties
    order: int = 0  # node order, the last tie-breaker


@dataclass(slots=True)
class _Item:
    key: str
    cap: int
    rank: float
    order: int


def _choose(items: list[_Item], need: int, mode: str) -> list[tuple[_Item, int]]:
    """Items to use and how much of each, covering ``need`` (the caller checked the total suffices)."""
    if mode == FRAGMENTS:
        pool = sorted(items, key=lambda it: (it.cap, -it.rank, it.order))
        out: list[tuple[_Item, int]] = []
        rem = need
        for it in pool:
            if rem <= 0:
                break
            take = min(it.cap, rem)
            out.append((it, take))
            rem -= take
        return out
    pool = sorted(items, key=lambda it: (-it.cap, -it.rank, it.order))
    out = []
    rem = need
    i = 0
    while rem > 0 and i < len(pool):
        if pool[i].cap >= rem:
            # best fit: the smallest capacity that still takes all of the remainder (pool is sorted by
            # capacity descending, so scan back from the end of the run of items with cap >= rem)
            j = i
            while j + 1 < len(pool) and pool[j + 1].cap >= rem:
                j += 1
            tight = pool[j].cap
            best = min((it for it in pool[i : j + 1] if it.cap == tight), key=lambda it: (-it.rank, it.order))
            out.append((best, rem))
            return out
        out.append((pool[i], pool[i].cap))
        rem -= pool[i].cap
        i += 1
    return out


def pack(
    slots: Sequence[Slot],
    need: int,
    levels: Sequence[str] = (),
    labels: Mapping[str, Mapping[str, str]] | None = None,
    mode: str = FEWEST,
) -> list[tuple[str, int]] | None:
    """``[(node, count), ...]`` placing ``need`` members, or None when the capacities do not add up.

    ``levels``: node label keys of the topology levels, outermost first; ``labels``: node -> labels."""
    usable = [s for s in slots if s.cap > 0]
    if need <= 0:
        return []
    if sum(s.cap for s in usable) < need:
        return None
    return _pack(usable, need, 0, levels, labels or {}, mode)


def _pack(
    slots: list[Slot],
    need: int,
    depth: int,
    levels: Sequence[str],
    labels: Mapping[str, Mapping[str, str]],
    mode: str,
) -> list[tuple[str, int]]:
    if depth >= len(levels):
        items = [_Item(s.node, s.cap, s.rank, s.order) for s in slots]
        return [(it.key, take) for it, take in _choose(items, need, mode)]
    label = levels[depth]
    groups: dict[str, list[Slot]] = {}
    for s in slots:
        v = labels.get(s.node, {}).get(label, "")
        groups.setdefault(v if v else "\x00" + s.node, []).append(s)  # unlabelled: a domain of its own
    if len(groups) == 1:
        return _pack(slots, need, depth + 1, levels, labels, mode)
    items = [
        _Item(k, sum(s.cap for s in g), max(s.rank for s in g), min(s.order for s in g)) for k, g in groups.items()
    ]
    out: list[tuple[str, int]] = []
    for it, take in _choose(items, need, mode):
        out += _pack(groups[it.key], take, depth + 1, levels, labels, mode)
    return out


def domains_spanned(
    nodes: Sequence[str], levels: Sequence[str], labels: Mapping[str, Mapping[str, str]]
) -> dict[str, int]:
    """How many distinct values of each level label the nodes have (nodes without the label not counted)."""
    return {lv: len({labels.get(n, {}).get(lv) for n in nodes} - {None, ""}) for lv in levels}
