"""DefaultPreemption: PostFilter that makes room for a pod by evicting lower-priority pods.

kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`` and
``pkg/scheduler/framework/preemption/preemption.go`` (``Evaluator.Preempt``, ``findCandidates``,
``DryRunPreemption``, ``SelectCandidate``), single pods:

1. **Eligibility** (``PodEligibleToPreemptOthers``): not with ``preemptionPolicy: Never`` ("not eligible due
   to preemptionPolicy=Never."); a pod nominated to a node whose filter status was not
   UnschedulableAndUnresolvable is not eligible again while a lower-priority pod there is terminating because
   of preemption ("not eligible due to a terminating pod on the nominated node.").
2. **Candidates**: only nodes whose filter status was ``Unschedulable`` (UnschedulableAndUnresolvable means
   evictions cannot help). From a random offset (``GetOffsetAndNumCandidates``), each node gets a dry run
   (:func:`~plugins.defaultpreemption.core.select_victims_on_node`) until at least one candidate without PDB
   violations was found and ``numCandidates`` candidates in all
   (``minCandidateNodesPercentage`` of the potential nodes, at least ``minCandidateNodesAbsolute``, at most
   all of them).
3. **No candidate**: Unschedulable with the dry runs' statuses as a FitError ("0/N nodes are available: ...",
   the nodes not tried counting as "Preemption is not helpful for scheduling") and the nomination cleared.
4. **Choice** (``pickOneNodeForPreemption``), then the API work (:mod:`plugins.defaultpreemption.executor`)
   after the cycle; the pod is nominated to the node ("found a potential placement for pod on node X,
   preempting N victims") and goes back to the queue. Every message is prefixed "preemption: ".
5. **PreEnqueue**: while its API work runs, the preemptor waits outside the queue ("waiting for the
   preemption for this pod to be finished"); assigned-pod deletions (and, here, claim updates: freed
   devices) re-check it.

Devices (goes beyond upstream, whose DynamicResources has no PreFilterExtensions): the dry run frees the
devices of a victim's claims that no surviving pod reserves (``plugins/dra/plugin.py`` ``remove_pod``), and
DynamicResources' Filter says Unschedulable rather than UnschedulableAndUnresolvable on a node whose devices
are in use, so such nodes become candidates. Nothing is evicted unless the dry run proved that the pod fits
after the evictions, and only lower-priority pods are victims.

Topology (goes beyond upstream; :mod:`plugins.defaultpreemption.topology`): with GpuTopology in the profile, among
victim sets no worse than upstream's on each of its criteria the one leaving the preemptor the best-connected
GPUs is chosen on each node, and among equally ranked candidate nodes the one where the preemptor's GPUs are best
connected. Without GpuTopology (or with ``topology_aware`` False) the choice is upstream's.

Workload-aware preemption (:mod:`plugins.defaultpreemption.group`): :meth:`DefaultPreemption.victims_on_node`
builds the victims of a node (a pod of a ``scheduling.k8s.io`` PodGroup with its group's priority; a PodGroup with
``disruptionMode: all`` one victim with all its pods, those on other nodes removed from the dry run through the
PreFilter extensions only); a PodGroup as preemptor: :meth:`DefaultPreemption.pod_group_post_filter`, the engine's
PodGroupPostFilter point (:class:`scheduler.framework.interface.PodGroupPostFilterPlugin`) that the gang cycle
(``scheduler/gang/cycle.py``) runs when a group does not fit, with
:func:`~plugins.defaultpreemption.group.preempt_group`. ``eligible`` adds a rule on victims, ``tie_breakers``
extends the node choice (e.g. topology).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from plugins.defaultpreemption.core import (
    NO_VICTIMS,
    NOT_HELPFUL,
    PRIORITY_OFFSET,
    Candidate,
    Eligible,
    ScoreFunc,
    Victim,
    calculate_num_candidates,
    pick_one_candidate,
    select_victims_on_node,
    terminating_by_preemption,
)
from plugins.defaultpreemption.executor import Executor
from plugins.defaultpreemption.group import (
    PREFIX,
    group_preemptor,
    preempt_group,
    remote_nodes,
    victim_index,
    victims_on_node,
)
from plugins.defaultpreemption.topology import TopologyPreference
from scheduler.api.model import Pod, node_selector_matches
from scheduler.api.workloads import PodDisruptionBudget
from scheduler.cache.cache import Cache, NodeInfo, Snapshot
from scheduler.framework.interface import (
    Code,
    CycleState,
    FrameworkHandle,
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupScheduling,
    PostFilterResult,
    Status,
)

NAME = "DefaultPreemption"
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
PDB_KIND = "PodDisruptionBudget"
NEVER = "Never"


def preemption_policy(pod: Pod) -> str:
    spec = pod.raw.get("spec")
    v = spec.get("preemptionPolicy") if isinstance(spec, Mapping) else None
    return v if isinstance(v, str) and v else "PreemptLowerPriority"


_VICTIM_FLOOR = "DefaultPreemption/victim-floor"


_NO_VICTIMS_STATUS = Status.unresolvable(NO_VICTIMS)


def victim_floor(node: NodeInfo) -> tuple[int, bool]:
    """``(lowest priority of a pod on node, any pod in a PodGroup)``, memoised on the (immutable) NodeInfo."""
    floor: tuple[int, bool] | None = node.memo.get(_VICTIM_FLOOR)
    if floor is None:
        lowest = min((p.priority for p in node.pod_list), default=PRIORITY_OFFSET)
        floor = node.memo[_VICTIM_FLOOR] = (lowest, any(p.pod_group for p in node.pod_list))
    return floor


def may_have_victims(node: NodeInfo, priority: int) -> bool:
    """Whether a pod on ``node`` may be a victim of a preemptor of ``priority``: one of lower priority, or one in
    a PodGroup (its victim priority is the group's, and a disruptionMode-all group spans nodes). False means
    select_victims_on_node finds no victim there (NO_VICTIMS)."""
    floor = victim_floor(node)
    return floor[1] or floor[0] < priority


class VictimFloors:
    """:func:`victim_floor` over the whole cluster, kept up to date from the snapshot's log of changed nodes
    (``Snapshot.changed_nodes_since``): whether any node may hold a victim for a preemptor of some priority,
    without a pass over the nodes. Upstream's ``SelectVictimsOnNode`` (kubernetes v1.37.2
    ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``) takes as potential victims only
    the pods of lower priority than the preemptor (``isPreemptionAllowed``) and answers every node without one
    "No preemption victims found for incoming pod" (UnschedulableAndUnresolvable): a cluster with no pod of lower
    priority (and, here, no PodGroup pod, whose victim priority is its group's) gives that on every node, and no
    candidate."""

    def __init__(self) -> None:
        self.mark: tuple[int, int] | None = None
        self.floors: dict[str, tuple[int, bool]] = {}
        self.lowest: Counter[int] = Counter()  # node's lowest pod priority -> nodes
        self.grouped = 0  # nodes with a PodGroup pod

    def _drop(self, name: str) -> None:
        old = self.floors.pop(name, None)
        if old is None:
            return
        self.lowest[old[0]] -= 1
        if not self.lowest[old[0]]:
            del self.lowest[old[0]]
        self.grouped -= old[1]

    def _add(self, name: str, node: NodeInfo) -> None:
        floor = self.floors[name] = victim_floor(node)
        self.lowest[floor[0]] += 1
        self.grouped += floor[1]

    def any_victim(self, snap: Snapshot, priority: int) -> bool:
        """Whether some node of ``snap`` may hold a victim of a preemptor of ``priority`` (may_have_victims)."""
        self.mark, changed = snap.changed_nodes_since(self.mark)
        node_map = snap.node_map
        if changed is None:
            self.floors, self.lowest, self.grouped = {}, Counter(), 0
            for name, info in node_map.items():
                self._add(name, info)
        else:
            for name in set(changed):
                self._drop(name)
                node = node_map.get(name)
                if node is not None:
                    self._add(name, node)
        return self.grouped > 0 or (bool(self.lowest) and min(self.lowest) < priority)


def fit_error(num_nodes: int, statuses: Mapping[str, Status], absent: str) -> str:
    """``FitError.Error`` for preemption: a histogram of the reasons per node, the nodes without a status
    counting with ``absent``."""
    counts: Counter[str] = Counter()
    for st in statuses.values():
        for r in st.reasons:
            counts[r] += 1
    return fit_message(num_nodes, counts, len(statuses), absent)


def fit_message(num_nodes: int, counts: Counter[str], with_status: int, absent: str) -> str:
    """:func:`fit_error` from the reasons' counts over the ``with_status`` nodes that have a status."""
    if with_status < num_nodes:
        counts[absent] += num_nodes - with_status
    parts = sorted(f"{n} {r}" for r, n in counts.items())
    msg = f"0/{num_nodes} nodes are available:"
    if parts:
        msg += f" {', '.join(parts)}."
    return msg


def releasing_claims_on(snap: Snapshot, node: NodeInfo) -> bool:
    """An allocated ResourceClaim on ``node`` whose every pod consumer is no longer on the node (deleted,
    e.g. a preemption victim): kube-controller-manager is about to drop the reservation and deallocate it."""
    present = {p.uid for p in node.pod_list}
    name = node.name
    labels = node.node.labels
    for claim in snap.claims.values():
        alloc = claim.allocation
        if alloc is None or not claim.reserved_for:
            continue
        pods = [r for r in claim.reserved_for if r.resource == "pods" and not r.api_group]
        if not pods or len(pods) != len(claim.reserved_for):
            continue
        if alloc.node_selector is None or not node_selector_matches(alloc.node_selector, labels, name):
            continue
        if not any(r.uid in present for r in pods):
            return True
    return False


class DefaultPreemption:
    name: ClassVar[str] = NAME
    # Topology-aware victim choice (plugins/defaultpreemption/topology.py; a no-op without GpuTopology). False:
    # upstream's choice even with GpuTopology on (benchmarks compare the two).
    topology_aware: bool = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        self.min_candidate_nodes_percentage = int(
            args.get("minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
        )
        self.min_candidate_nodes_absolute = int(
            args.get("minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
        )
        self.handle: FrameworkHandle | None = None
        self.executor = Executor()
        # Upstream draws the dry run's starting node at random; a seeded generator keeps simulate repeatable.
        self.rand = random.Random(0)
        self.eligible: Eligible | None = None  # upstream IsEligiblePod (beyond "lower priority")
        # after upstream's node choice functions; the first: the preemptor's device set (topology.py)
        self.tie_breakers: list[ScoreFunc] = [self._topology_tie_breaker]
        self._topology: TopologyPreference | None = None  # of the PostFilter call in progress
        self.topology_stats: Counter[str] = Counter()  # TopologyPreference.stats summed over calls
        self.floors = VictimFloors()  # is there any victim at all (a cluster of one priority has none)

    def set_handle(self, handle: FrameworkHandle) -> None:
        self.handle = handle

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return [("Pod", "Delete"), ("ResourceClaim", "Update"), ("ResourceClaim", "Delete")]

    # --- PreEnqueue -------------------------------------------------------------------------------------

    def pre_enqueue(self, snapshot: Snapshot, pod: Pod) -> Status:
        if self.executor.is_running(pod.uid, snapshot):
            return Status.unresolvable("waiting for the preemption for this pod to be finished")
        return Status.ok()

    # --- PostFilter -------------------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        result, st = self.preempt(state, pod, statuses)
        if st.message:
            st = Status(st.code, (f"preemption: {st.message}",), st.plugin)
        return result, st

    def preempt(
        self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        handle = self.handle
        if handle is None:
            return None, Status.error("DefaultPreemption has no framework handle")
        snap = state.snapshot
        ok, why = self.pod_eligible(snap, pod, statuses)
        if not ok:
            return None, Status.unschedulable(why)
        num_nodes = len(snap.nodes)
        potential = [n for n in snap.nodes if (s := statuses.get(n.name)) is not None and s.code == Code.UNSCHEDULABLE]
        candidates: list[Candidate] = []
        node_statuses: dict[str, Status] = {}
        if potential and not self.floors.any_victim(snap, pod.priority):
            # no pod of lower priority anywhere: every dry run would say NO_VICTIMS (VictimFloors); the offset is
            # still drawn, so later preemptions see the same random stream as with the dry runs
            self.offset_and_num_candidates(len(potential))
            self._topology = None
            msg = fit_message(num_nodes, Counter({NO_VICTIMS: len(potential)}), len(potential), NOT_HELPFUL)
            return PostFilterResult(""), Status.unschedulable(msg)
        if potential:
            pdbs = [p for p in snap.objects_of(PDB_KIND).values() if isinstance(p, PodDisruptionBudget)]
            offset, num = self.offset_and_num_candidates(len(potential))
            candidates, node_statuses = self.dry_run_preemption(state, pod, potential, pdbs, offset, num)
        if not candidates:
            self._topology = None
            errors = [s for s in node_statuses.values() if s.code == Code.ERROR]
            if errors:
                return None, Status.error(errors[0].message)
            msg = fit_error(num_nodes, node_statuses, NOT_HELPFUL)
            return PostFilterResult(""), Status.unschedulable(msg)
        best = pick_one_candidate(candidates, self.tie_breakers)
        self._topology = None
        if best is None:
            return None, Status.unschedulable("no candidate node for preemption")
        lower = [p for p in handle.nominated_pods_for_node(best.node) if p.priority < pod.priority]
        actuate = self.executor.prepare(pod, best, handle.scheduler_name, lower)
        return PostFilterResult(best.node, actuate=actuate), Status(
            Code.SUCCESS,
            (f"found a potential placement for pod on node {best.node}, preempting {len(best.pods)} victims",),
        )

    # --- PodGroupPostFilter ----------------------------------------------------------------------------

    async def pod_group_post_filter(
        self,
        cache: Cache,
        group: PodGroupInfo,
        nominated: Mapping[str, str],
        scheduling: PodGroupScheduling,
        scheduler_name: str,
    ) -> PodGroupPostFilterResult:
        """``PodGroupPostFilter`` (kubernetes v1.37.2 ``plugins/defaultpreemption/default_preemption.go``):
        workload-aware preemption for a group whose cycle found no placement
        (:func:`~plugins.defaultpreemption.group.preempt_group`); the status message is prefixed "pod group
        preemption: " as upstream's."""
        preemptor = group_preemptor(cache.snapshot(), group.pod_group, group.unscheduled, group.group_pods)
        res = await preempt_group(self.executor, self.eligible, cache, preemptor, nominated, scheduling, scheduler_name)
        st = res.status
        if st.message:
            res.status = Status(st.code, (f"{PREFIX}{st.message}",), st.plugin)
        return res

    # --- the steps, as upstream's Interface -------------------------------------------------------------

    def pod_eligible(self, snap: Snapshot, pod: Pod, statuses: Mapping[str, Status]) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if preemption_policy(pod) == NEVER:
            return False, "not eligible due to preemptionPolicy=Never."
        assert self.handle is not None
        nominated = self.handle.nominated_node_of(pod)
        if nominated:
            st = statuses.get(nominated)
            if st is None or st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""  # absent from the statuses: UnschedulableAndUnresolvable
            info = snap.node_map.get(nominated)
            if info is not None:
                units = victim_index(snap)  # a pod's priority as a victim: its PodGroup's (NewPodVictim)
                for p in info.pod_list:
                    if units.unit(p).priority < pod.priority and terminating_by_preemption(p):
                        return False, "not eligible due to a terminating pod on the nominated node."
                if releasing_claims_on(snap, info):
                    # Beyond upstream (which cannot free devices): a victim that is gone may still hold its
                    # devices until kube-controller-manager deallocates its claim. Preempting again now
                    # would evict a second pod elsewhere; the claim's update requeues this pod instead.
                    return False, (
                        "not eligible due to devices of a preempted pod still being released on the nominated node."
                    )
        return True, ""

    def _topology_tie_breaker(self, c: Candidate) -> float:
        return 0.0 if self._topology is None else self._topology.tie_breaker(c)

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """``GetOffsetAndNumCandidates``."""
        return self.rand.randrange(num_nodes), calculate_num_candidates(
            num_nodes, self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        )

    def victims_on_node(self, snap: Snapshot, node: NodeInfo) -> list[Victim]:
        """``GetVictimsOnNode`` with GenericWorkload (plugins/defaultpreemption/group.py): each pod its own victim,
        a pod of a ``scheduling.k8s.io`` PodGroup with its group's priority, a ``disruptionMode: all`` group one
        victim with all its pods (also those on other nodes)."""
        return victims_on_node(snap, node)

    def dry_run_preemption(
        self,
        state: CycleState,
        pod: Pod,
        potential: Sequence[NodeInfo],
        pdbs: Sequence[PodDisruptionBudget],
        offset: int,
        num_candidates: int,
    ) -> tuple[list[Candidate], dict[str, Status]]:
        """``DryRunPreemption``: candidates without PDB violations first, then the others."""
        assert self.handle is not None
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        self._topology = topo = TopologyPreference.of(state) if self.topology_aware else None
        refine = topo.refine if topo is not None else None
        n = len(potential)
        for i in range(n):
            node = potential[(offset + i) % n]
            if not may_have_victims(node, pod.priority):
                # what select_victims_on_node says without a victim of lower priority, without building the
                # dry run and the snapshot's victim index (a pass over every pod) for nothing
                statuses[node.name] = _NO_VICTIMS_STATUS  # immutable: one object for every such node
                continue
            dry = self.handle.dry_run(state, pod, node)
            victims, violations, st = select_victims_on_node(
                dry, pod.priority, self.victims_on_node(state.snapshot, node), pdbs, self.eligible,
                remote=remote_nodes(state.snapshot), refine=refine,
            )
            if st.is_success and victims:
                c = Candidate(node.name, tuple(victims), violations)
                target = non_violating if violations == 0 else violating
                if len(target) < num_candidates:
                    target.append(c)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if st.is_success:
                st = Status.error(f'expected at least one victim pod on node "{node.name}"')
            statuses[node.name] = st
        if topo is not None:
            self.topology_stats.update(topo.stats)
        return non_violating + violating, statuses
