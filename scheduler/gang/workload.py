"""Choosing among feasible placements of a Kubernetes 1.37 PodGroup (pure; used by :mod:`scheduler.gang.cycle`).

With ``spec.schedulingConstraints.topology[0].key`` every member of a ``scheduling.k8s.io/v1beta1`` PodGroup (or of
all PodGroups under a ``v1alpha3`` CompositePodGroup with such a key) lands in one domain of that node label.
kube-scheduler 1.37.2 (gate TopologyAwareWorkloadScheduling) does it in three steps
(``pkg/scheduler/schedule_one_podgroup.go`` ``podGroupSchedulingPlacementAlgorithm``):

1. ``TopologyPlacementGenerator`` (``framework/plugins/topologyaware/topology_placement.go``) makes one placement
   per value of the key among the nodes — only the domain of the members already bound, when there are some
   (more than one such domain is an error);
2. the group is scheduled inside each placement; the feasible ones are kept;
3. ``PlacementScore`` plugins rank them and the best wins: ``PodGroupPodsCount`` (weight 1,
   ``framework/plugins/podgrouppodscount``: pods of the group bound or placed, normalized to the largest count,
   ``count * 100 / max``) and ``NodeResourcesFit`` (weight 1, ``ScorePlacement``: the MostAllocated score of the
   placement's nodes, cpu and memory weight 1, counting existing pods and the placed members).

dra-scheduler adds one score of the same form for devices (DRA devices of the domain's nodes in use after the
placement, ``used * 100 / total``), so among domains that fit the group equally a partially used rack is filled
before an empty one is broken up — the same best-fit rule the GPU packing follows inside a domain. Ties go to the
domain tried first (tightest room first), where upstream draws at random.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.api.model import CPU, MEMORY
from scheduler.cache.cache import Snapshot

MAX_SCORE = 100  # fwk.MaxNodeScore
FIT_RESOURCES = (CPU, MEMORY)  # NodeResourcesFit's default scoring resources, weight 1 each


@dataclass(frozen=True, slots=True)
class DomainUsage:
    """What the placement score plugins see of one feasible placement."""

    pods: int  # members of the group bound or placed (PodGroupPodsCount's raw score)
    fit: int  # NodeResourcesFit.ScorePlacement: MostAllocated over the domain's nodes, 0..100
    devices: int | None  # DRA devices of the domain in use after the placement, 0..100 (None: the domain has none)


def most_requested_score(requested: int, capacity: int) -> int:
    """``noderesources.mostRequestedScore``."""
    if capacity <= 0:
        return 0
    return min(requested, capacity) * MAX_SCORE // capacity


def domain_usage(snap: Snapshot, nodes: Iterable[str], pods: int) -> DomainUsage:
    """The usage of ``nodes`` in ``snap`` (the placed members assumed on them)."""
    req = dict.fromkeys(FIT_RESOURCES, 0)
    alloc = dict.fromkeys(FIT_RESOURCES, 0)
    total = used = 0
    ledger = snap.ledger
    for n in nodes:
        info = snap.node_map.get(n)
        if info is None:
            continue
        for r in FIT_RESOURCES:
            req[r] += info.requested.get(r, 0)
            alloc[r] += info.node.allocatable.get(r, 0)
        for sl in snap.slices.by_node.get(n, ()):
            for d in sl.devices:
                total += 1
                if ledger.in_use((sl.driver, sl.pool, d.name)):
                    used += 1
    scored = [most_requested_score(req[r], alloc[r]) for r in FIT_RESOURCES if alloc[r] > 0]
    fit = sum(scored) // len(scored) if scored else 0
    return DomainUsage(pods, fit, used * MAX_SCORE // total if total else None)


def placement_scores(usages: Sequence[DomainUsage]) -> list[int]:
    """The total score of each placement: PodGroupPodsCount (normalized: ``MinScore + count * (MaxScore - MinScore)
    / maxCount``) + NodeResourcesFit + the device score, all with weight 1."""
    top = max((u.pods for u in usages), default=0)
    return [
        (u.pods * MAX_SCORE // top if top else 0) + u.fit + (u.devices if u.devices is not None else 0) for u in usages
    ]


def best_placement(usages: Sequence[DomainUsage]) -> int:
    """Index of the best placement (the first one on ties)."""
    scores = placement_scores(usages)
    best = 0
    for i, sc in enumerate(scores):
        if sc > scores[best]:
            best = i
    return best
