"""The pure core of preemption: victims, PDB accounting, victim selection on a node, choice of the node.

Semantics of kubernetes v1.37.2 ``pkg/scheduler/framework/preemption/{preemption.go,util.go,types.go}``,
``pkg/scheduler/util/utils.go`` (``GetPodStartTime``, ``GetEarliestPodStartTime``) and
``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`` (``SelectVictimsOnNode``,
``calculateNumCandidates``), written from their behaviour:

* a :class:`Victim` is the unit that is evicted together: one pod here (a PodGroup with
  ``disruptionMode: all`` would be one victim made of all its pods, with the group's priority: the gang pass
  builds such victims and passes them to the same functions);
* :func:`more_important_victim`: higher priority, then (groups) composite > group > pod, then more pods, then
  the earlier start time (a pod that has not started counts as starting now);
* :func:`filter_victims_with_pdb_violation`: walks the victims in the given order, decrementing the
  ``disruptionsAllowed`` of every matching budget that has not already processed the pod's eviction
  (``status.disruptedPods``); a pod that drives a budget below zero violates it. A victim with any violating
  pod is violating as a whole, counted by its number of violating pods;
* :func:`select_victims_on_node`: remove every eligible lower-priority victim, fail when the pod still does
  not fit; else sort by importance and reprieve as many as possible, the PDB-violating victims first, each
  group from the most important down; the rest are the victims, sorted by importance (the loop is
  :class:`Reprieve`). Beyond upstream, an optional ``refine`` (:data:`Refine`) may then replace that choice by
  another minimal set built with the same loop: GpuTopology's preference among sets no worse on every upstream
  criterion (:mod:`plugins.defaultpreemption.topology`; absent without GpuTopology, so upstream's choice);
* :func:`pick_one_candidate`: fewest PDB violations, then lowest highest-victim priority, then lowest sum of
  priorities (each shifted by 2^31 so negative priorities count), then fewest victims, then the latest start
  time among the highest-priority victims, then extra tie-breakers (``tie_breakers``: the topology pass adds
  "best interconnect left for the preemptor" here), then the first candidate.

All of these work on a :class:`~scheduler.framework.interface.DryRun` or on plain values and never touch the
cluster: a gang preemptor can evaluate victim sets jointly by running several dry runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from scheduler.framework.interface import Code, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.api.workloads import PodDisruptionBudget
    from scheduler.cache.cache import NodeInfo
    from scheduler.framework.interface import DryRun

POD = "Pod"
POD_GROUP = "PodGroup"
COMPOSITE_POD_GROUP = "CompositePodGroup"
_RANK = {COMPOSITE_POD_GROUP: 3, POD_GROUP: 2, POD: 1}
PRIORITY_OFFSET = 2**31  # math.MaxInt32 + 1

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def parse_time(v: object) -> float | None:
    """RFC 3339 (``metav1.Time``) to seconds since the epoch; None when absent or not parseable."""
    if not isinstance(v, str) or not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pod_start_time(pod: Pod) -> float:
    """``GetPodStartTime``: ``status.startTime``; a pod that has not started yet counts as starting now,
    i.e. later than every pod that has."""
    status = pod.raw.get("status")
    t = parse_time(status.get("startTime")) if isinstance(status, dict) else None
    return math.inf if t is None else t


def terminating_by_preemption(pod: Pod) -> bool:
    """``PodTerminatingByPreemption``: being deleted, and its DisruptionTarget condition (the first one) is
    True with reason PreemptionByScheduler."""
    if not pod.meta.deleting:
        return False
    status = pod.raw.get("status")
    for c in (status.get("conditions") or []) if isinstance(status, dict) else []:
        if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET:
            return c.get("status") == "True" and c.get("reason") == PREEMPTION_BY_SCHEDULER
    return False


@dataclass(frozen=True, slots=True)
class Victim:
    """Pods evicted together (upstream ``Victim``), with the priority preemption compares."""

    pods: tuple[Pod, ...]
    priority: int
    kind: str = POD

    @staticmethod
    def of(pod: Pod) -> Victim:
        return Victim((pod,), pod.priority)

    @property
    def earliest_start(self) -> float:
        return min((pod_start_time(p) for p in self.pods), default=math.inf)


def more_important_victim(a: Victim, b: Victim) -> bool:
    """``MoreImportantVictim``: whether ``a`` should be kept in preference to ``b``."""
    if a.priority != b.priority:
        return a.priority > b.priority
    ra, rb = _RANK.get(a.kind, 1), _RANK.get(b.kind, 1)
    if ra != rb:
        return ra > rb
    if len(a.pods) != len(b.pods):
        return len(a.pods) > len(b.pods)
    return a.earliest_start < b.earliest_start


def sort_by_importance(victims: Iterable[Victim]) -> list[Victim]:
    """Most important first (stable for equal ones)."""

    def cmp(a: Victim, b: Victim) -> int:
        if more_important_victim(a, b):
            return -1
        if more_important_victim(b, a):
            return 1
        return 0

    return sorted(victims, key=functools.cmp_to_key(cmp))


def filter_victims_with_pdb_violation(
    victims: Sequence[Victim], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """``FilterVictimsWithPDBViolation``: (violating victims with their number of violating pods,
    non-violating victims), each in the given order."""
    allowed = [p.disruptions_allowed for p in pdbs]

    def violates(pod: Pod) -> bool:
        labels = pod.meta.labels
        if not labels:
            return False
        for i, pdb in enumerate(pdbs):
            if not pdb.selects(pod.namespace, labels):
                continue
            if pod.name in pdb.disrupted_pods:
                continue  # its eviction was already processed by the API server
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[Victim, int]] = []
    non_violating: list[Victim] = []
    for v in victims:
        n = sum(1 for p in v.pods if violates(p))
        if n:
            violating.append((v, n))
        else:
            non_violating.append(v)
    return violating, non_violating


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node and the victims to evict there (upstream ``Candidate``), victims most important first."""

    node: str
    victims: tuple[Victim, ...]
    num_pdb_violations: int = 0
    pods: tuple[Pod, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.pods:
            object.__setattr__(self, "pods", tuple(p for v in self.victims for p in v.pods))


Eligible = Callable[[Victim], bool]


class Reprieve:
    """The reprieve step of :func:`select_victims_on_node` on one dry run, also for extensions (:data:`Refine`):
    which victims are removed from the dry run now, upstream's reprieve order and each PDB-violating victim's
    number of violating pods."""

    __slots__ = ("_removed", "dry", "node_of", "order", "violations")

    def __init__(self, dry: DryRun, node_of: Callable[[Pod], NodeInfo | None]) -> None:
        self.dry = dry
        self.node_of = node_of
        self.order: list[Victim] = []  # upstream's reprieve order: PDB-violating victims first, each by importance
        self.violations: dict[int, int] = {}  # id(victim) -> its violating pods, for PDB-violating victims
        self._removed: set[int] = set()

    def set_order(self, violating: Sequence[tuple[Victim, int]], non_violating: Sequence[Victim]) -> None:
        self.order = [v for v, _ in violating] + list(non_violating)
        self.violations = {id(v): n for v, n in violating}

    def is_removed(self, v: Victim) -> bool:
        return id(v) in self._removed

    def remove(self, v: Victim) -> Status:
        for p in v.pods:
            st = self.dry.remove(p, self.node_of(p))
            if not st.is_success:
                return st
        self._removed.add(id(v))
        return Status.ok()

    def add(self, v: Victim) -> Status:
        for p in v.pods:
            st = self.dry.add(p, self.node_of(p))
            if not st.is_success:
                return st
        self._removed.discard(id(v))
        return Status.ok()

    def settle(self, victims: Iterable[Victim]) -> Status:
        """Make exactly ``victims`` (of :attr:`order`) the removed ones (no filter runs)."""
        want = {id(v) for v in victims}
        for v in self.order:
            if id(v) in want and id(v) not in self._removed:
                st = self.remove(v)
            elif id(v) not in want and id(v) in self._removed:
                st = self.add(v)
            else:
                continue
            if not st.is_success:
                return Status.error(st.message)
        return Status.ok()

    def num_violations(self, victims: Iterable[Victim]) -> int:
        return sum(self.violations.get(id(v), 0) for v in victims)

    def reprieve(self, order: Sequence[Victim]) -> list[Victim] | Status:
        """Upstream's loop: with the victims of ``order`` removed and the pod fitting, add each back in turn and
        keep it when the pod still fits; the rest are the victims (in ``order``'s order)."""
        victims: list[Victim] = []
        for v in order:
            st = self.add(v)
            if not st.is_success:
                return Status.error(st.message)
            fit = self.dry.fits()
            if fit.code == Code.ERROR:
                return fit
            if not fit.is_success:
                st = self.remove(v)
                if not st.is_success:
                    return Status.error(st.message)
                victims.append(v)
        return victims

    def reprieve_from(self, order: Sequence[Victim]) -> list[Victim] | Status:
        """:meth:`reprieve` starting from exactly the victims of ``order`` removed (the other victims of
        :attr:`order` present): Unschedulable when the pod does not fit then."""
        st = self.settle(order)
        if not st.is_success:
            return st
        fit = self.dry.fits()
        if not fit.is_success:
            return fit
        return self.reprieve(order)


# An extension of the reprieve step (goes beyond upstream): given the node's Reprieve with upstream's victims
# removed, upstream's victims and violations, return the victims to use instead (leaving exactly them removed).
Refine = Callable[[Reprieve, list[Victim], int], tuple[list[Victim], int] | Status]


def select_victims_on_node(
    dry: DryRun,
    preemptor_priority: int,
    all_victims: Sequence[Victim],
    pdbs: Sequence[PodDisruptionBudget],
    eligible: Eligible | None = None,
    remote: Callable[[Pod], NodeInfo | None] | None = None,
    refine: Refine | None = None,
) -> tuple[list[Victim], int, Status]:
    """``SelectVictimsOnNode`` on a dry run of the preemptor on one node: (victims, number of PDB
    violations, status). ``eligible`` adds a plugin's own rule (upstream ``IsEligiblePod``) to "lower
    priority than the preemptor"; ``remote`` gives the NodeInfo of a victim pod on another node (gangs);
    ``refine`` may replace upstream's choice afterwards (topology: :mod:`plugins.defaultpreemption.topology`)."""

    def node_of(p: Pod) -> NodeInfo | None:
        return remote(p) if remote is not None and p.node_name != dry.base.name else None

    potential = [v for v in all_victims if v.priority < preemptor_priority and (eligible is None or eligible(v))]
    if not potential:
        return [], 0, Status.unresolvable(NO_VICTIMS)
    rep = Reprieve(dry, node_of)
    for v in potential:
        st = rep.remove(v)
        if not st.is_success:
            return [], 0, Status.error(st.message)
    st = dry.fits()
    if not st.is_success:
        return [], 0, st
    potential = sort_by_importance(potential)
    violating, non_violating = filter_victims_with_pdb_violation(potential, pdbs)
    rep.set_order(violating, non_violating)
    got = rep.reprieve(rep.order)
    if isinstance(got, Status):
        return [], 0, got
    victims = got
    num_violations = rep.num_violations(victims)
    if violating and non_violating:
        victims = sort_by_importance(victims)
    if refine is not None and victims:
        refined = refine(rep, victims, num_violations)
        if isinstance(refined, Status):
            return [], 0, refined
        victims, num_violations = refined
    return victims, num_violations, Status.ok()


ScoreFunc = Callable[[Candidate], float]


def _highest_priority(c: Candidate) -> float:
    return -max(p.priority for p in c.pods)


def _sum_priorities(c: Candidate) -> float:
    return -sum(p.priority + PRIORITY_OFFSET for p in c.pods)


def earliest_start_of_highest(c: Candidate) -> float:
    """``GetEarliestPodStartTime``: the earliest start time among the victims of the highest priority."""
    top = max(p.priority for p in c.pods)
    return min(pod_start_time(p) for p in c.pods if p.priority == top)


DEFAULT_SCORE_FUNCS: tuple[ScoreFunc, ...] = (
    lambda c: -c.num_pdb_violations,
    _highest_priority,
    _sum_priorities,
    lambda c: -len(c.pods),
    earliest_start_of_highest,
)


def pick_one_candidate(candidates: Sequence[Candidate], tie_breakers: Sequence[ScoreFunc] = ()) -> Candidate | None:
    """``pickOneNodeForPreemption``: keep the candidates with the best score of each function in turn until
    one is left; ``tie_breakers`` run after upstream's functions; then the first candidate."""
    if not candidates:
        return None
    pool = list(candidates)
    for f in (*DEFAULT_SCORE_FUNCS, *tie_breakers):
        if len(pool) == 1:
            break
        scores = [f(c) for c in pool]
        best = max(scores)
        pool = [c for c, s in zip(pool, scores, strict=True) if s == best]
    return pool[0]


def calculate_num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """``calculateNumCandidates``: ``num_nodes * percentage / 100`` (integer), at least ``absolute``, at most
    ``num_nodes``."""
    n = num_nodes * percentage // 100
    n = max(n, absolute)
    return min(n, num_nodes)
