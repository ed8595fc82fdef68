"""Topology domains across nodes, for the group cycle: levels of node labels (outermost first) and the choice of
the smallest domain that can host a whole group.

A level is a node label (``topology.kubernetes.io/zone``, a spine/block label, a rack label,
``nvidia.com/gpu.clique``); a domain is one value of it. Nodes without the label are in no domain of that level.
Because levels are nested (a rack lies in one block, a block in one zone), the smallest domain that can host the
group is found by trying levels from the innermost outward.

Generic: the engine plans the domains of a ``scheduling.k8s.io/v1beta1`` PodGroup's
``schedulingConstraints.topology`` key with it (one level, upstream's TopologyPlacement plugin, KEP-5732), and a
:class:`~scheduler.framework.interface.PlacementGeneratePlugin` (GpuTopology) plans its levels with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Level:
    name: str  # short name used in messages and annotations ("rack")
    label: str  # node label key


@dataclass(frozen=True, slots=True)
class Attempt:
    """One step of the gang search: place the group inside ``nodes`` (None = anywhere)."""

    level: Level | None
    value: str
    nodes: frozenset[str] | None
    capacity: int

    def describe(self, need: int) -> str:
        if self.level is None:
            return f"no single topology domain has room for {need} members; placed across domains"
        return (
            f"placed in {self.level.name} {self.value} ({self.level.label}), the smallest domain with room for "
            f"{need} members"
        )


@dataclass(frozen=True, slots=True)
class Plan:
    attempts: tuple[Attempt, ...]
    note: str  # why nothing fits when a level is required (empty otherwise)


def find_level(levels: Sequence[Level], ref: str) -> Level | None:
    for lv in levels:
        if ref in (lv.name, lv.label):
            return lv
    return None


def plan(
    levels: Sequence[Level],
    labels: Mapping[str, Mapping[str, str]],  # node -> labels, feasible nodes only
    slots: Mapping[str, int],  # node -> how many members fit there (estimate)
    need: int,
    required: Level | None = None,
    max_domains: int = 6,
    pack: bool = True,
) -> Plan:
    """Domains to try in order: at each level from the innermost out (up to ``required`` when it is set), the
    domains whose capacity covers ``need``, tightest first (pack) or roomiest first (spread); then anywhere,
    unless a level is required."""
    attempts: list[Attempt] = []
    inner_first = list(reversed(levels))
    if required is not None:
        inner_first = inner_first[: inner_first.index(required) + 1] if required in inner_first else []
    largest: tuple[int, str] = (0, "")
    for lv in inner_first:
        caps: dict[str, int] = {}
        members: dict[str, set[str]] = {}
        for node, lab in labels.items():
            v = lab.get(lv.label)
            if not v:
                continue
            caps[v] = caps.get(v, 0) + slots.get(node, 0)
            members.setdefault(v, set()).add(node)
        if lv is required:
            for v, c in caps.items():
                largest = max(largest, (c, v))
        fitting = sorted((v for v, c in caps.items() if c >= need), key=lambda v: (caps[v] if pack else -caps[v], v))
        for v in fitting:
            if len(attempts) >= max_domains:
                break
            attempts.append(Attempt(lv, v, frozenset(members[v]), caps[v]))
    note = ""
    if required is None:
        attempts.append(Attempt(None, "", None, sum(slots.values())))
    elif not attempts:
        if largest[0]:
            note = (
                f"required topology level {required.name} ({required.label}): no {required.name} has room for "
                f"{need} members (largest: {largest[1]} with room for {largest[0]})"
            )
        else:
            note = f"required topology level {required.name} ({required.label}): no feasible node has that label"
    return Plan(tuple(attempts), note)


def shared_depth(levels: Sequence[Level], a: Mapping[str, str], b: Mapping[str, str]) -> int:
    """1-based depth (outermost = 1) of the innermost level at which two nodes share a domain; 0 if none."""
    depth = 0
    for i, lv in enumerate(levels):
        va = a.get(lv.label)
        if va and va == b.get(lv.label):
            depth = i + 1
    return depth
