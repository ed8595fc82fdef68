"""Gang scheduling: the pending members of a PodGroup are placed together, all or nothing.

Semantics (ARCHITECTURE §3.3; scheduler-plugins Coscheduling): when a member of a group is popped and the
group has fewer than ``minMember`` members bound, every pending member is taken out of the queue and a
placement is searched for the whole set on the current state: nodes, node resources and the device
allocations of every member's claims. Only when at least ``minMember`` members are placed is anything
committed: claims are written for all members first, then the Bindings. Otherwise nothing stays reserved (no
member holds resources while waiting) and every member goes back to the queue with the group's reason.
Members arriving after the group reached ``minMember`` bound members are scheduled one by one.

The search scales with the number of *kinds* of members, not with the number of members:

1. **Classes.** Members that ask for the same thing (equal spec apart from per-pod identity, and claims of
   equal spec and state: :mod:`scheduler.gang.capacity`) form one class. A class is placed *by count*: each
   node's room for the class (an upper bound from free matching devices, cpu/memory, pod slots, on the nodes
   whose Filter accepts its representative), then a packing of counts over the nodes (:mod:`scheduler.gang.pack`),
   then the members are allocated node by node — each through PreFilter, Filter and Reserve, which verifies both
   the count and that the member is like its class. When a node takes fewer than its bound the rest is packed
   again over the other nodes. A feasible gang of identical members therefore never needs a search budget.
2. **Capacity bound.** Before any Filter or allocation the bounds of all members are added up over all nodes
   (devices per device class, cpu/memory, pod slots), so a group that cannot fit is rejected in milliseconds with
   what is short ("not enough devices of class gpu.nvidia.com: 1,025 needed, 1,024 free on the 128 nodes the
   members can use ..."); the same check runs again on the nodes Filter accepts, and the topology domains are
   sized with the same bounds.
3. **Backtracking only where members differ.** Classes are placed largest first; a class gets up to
   ``MAX_PACKINGS`` alternative packings (the best one, one that avoids the nodes later classes need most, one
   that uses up partially used nodes first), and the search backtracks across classes. Members placed on the
   same node have their claims allocated *jointly* when one by one fails (the JointAllocation point, below), so
   the allocator can backtrack across their devices (kubernetes#138765: devices chosen pod by pod without
   backtracking). Members sharing
   an unallocated claim are classes of their own (the claim pins them to one node). ``SEARCH_BUDGET`` limits
   the backtracking (packings tried again because a later class did not fit; the first packing of each class is
   free, so a group of any number of classes that needs no backtracking never meets it); when it ends the group
   is retried later (backoff), and the reason says so — it is never reported as "does not fit".
4. **Placement quality.** With a PlacementGenerate plugin (GpuTopology) the group is first placed inside the
   smallest topology domain (NVLink clique, rack, block/spine, zone: node labels listed in the plugin args) whose
   room covers it, tightest first, then in the next larger ones, then anywhere — unless the PodGroup (annotation
   ``dra-scheduler.io/topology-required``) or the plugin args require a level, in which case the group waits
   until one domain of that level can host it. A ``scheduling.k8s.io/v1beta1`` PodGroup's
   ``schedulingConstraints.topology`` key is planned by the engine itself (:mod:`scheduler.framework.domains`,
   one domain of the key, the best feasible one by placement score: :mod:`scheduler.gang.workload`). Inside the
   chosen domain the packing spans as few sub-domains and then as few nodes as possible and gives the remainder
   to the tightest node that takes it (a partially used node before an empty 8-GPU one); ties go to the
   framework's node scores (GpuTopology's Pack/NVLink score among them). Single members are ranked by those
   scores plus a GroupMemberScore plugin's ``group_score`` (GpuTopology: a bonus for nodes in the domains of the
   members placed so far). The PodGroup status says where the group went and why.
5. **Responsiveness.** The search (and the commit) yields to the event loop (``await asyncio.sleep(0)``) after
   every ``SLICE_SECONDS`` of work, so informers, binding tasks and health checks run meanwhile. The search works
   on the live cache — its tentative placements are assumed pods and in-flight device reservations, and no other
   scheduling cycle runs while it is under way — and notes whether anything else changed the cache or the device
   ledger while it yielded. If so, the placement found is re-validated before anything is written (members
   unchanged, nodes present and unchanged, node resources not overcommitted, no device taken by another claim)
   and searched again (``MAX_RESTARTS``) when it is no longer valid; then the group is retried later.
6. **Preemption.** A group that does not fit (not a search that merely ran out of budget) is handed to the
   PodGroupPostFilter plugins among the profile's PostFilter plugins (workload-aware preemption: DefaultPreemption):
   their dry runs run this same search on a private copy of the cache without the victims (``_DryRunOracle``, the
   framework's ``PodGroupScheduling``); on success each placed member is nominated to its node, the
   status writes go out, then the victims are evicted, and the group is retried once they are gone. While a group
   is searched, its own members' nominations are taken out of the nominator (they hold the group's own room; upstream
   deletes a member's nomination when it is assumed), and every Filter runs with the nominated pods of equal or
   higher priority (``Framework.filter_node``), so room held for other preemptors is respected.

**Framework extension points.** The group cycle names no plugin: besides the pod points it runs for each member
(PreFilter, Filter, PreScore/Score, Reserve/Unreserve, PreBind/Bind), it reaches plugins only through the group
points of :mod:`scheduler.framework.interface`, found with ``isinstance`` over the profile's plugins (upstream
kubernetes v1.37.2 ``pkg/scheduler/schedule_one_podgroup.go``; KEP-4671, KEP-5732):

* ``PodGroupPostFilterPlugin.pod_group_post_filter`` (upstream PodGroupPostFilter; DefaultPreemption): a group
  that does not fit, with the group, its nominations and ``PodGroupScheduling`` (this search on a cache copy);
  returns the status, nominations, victims, API work (``PodGroupPostFilterResult``);
* ``PlacementGeneratePlugin`` (upstream PlacementGenerate; GpuTopology): the topology levels, the domains to try
  with the required level and a problem with the PodGroup's annotations, and where a group landed;
* ``GroupMemberScorePlugin.group_score`` (GpuTopology): a node's bonus for a member given the members' nodes;
* ``JointAllocationPlugin`` (DynamicResources): whether a Filter rejection may be resolved by allocating the
  members on the node together, the joint allocation, each member's allocation (opaque values) and the claims it
  reserves, kept in the group's pending map (``GROUP_PENDING_KEY``, read by that plugin's PreFilter);
* ``BindingNotePlugin.binding_note`` (GpuTopology): the note of each member's Scheduled Event.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import structlog

from scheduler.api.clusterapi import ApiError, pod_writes
from scheduler.api.model import CPU, MEMORY, Pod, PodGroup
from scheduler.api.workload_api import (
    DISRUPTION_TARGET,
    REASON_PREEMPTION,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    CompositePodGroup,
    LayoutError,
    children_of,
    leaves_of,
    min_groups,
    podgroup_conditions,
    root_of,
)
from scheduler.cache.cache import Cache, NodeInfo
from scheduler.framework.domains import Attempt, Level, Plan, plan
from scheduler.framework.interface import (
    GROUP_PENDING_KEY,
    AllocatedDevices,
    Code,
    CycleState,
    JointAllocationPlugin,
    PlacementGeneratePlugin,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    QueuedPodInfo,
    Status,
)
from scheduler.framework.nominator import OVERRIDE
from scheduler.framework.runtime import Framework
from scheduler.gang.capacity import (
    CapacityModel,
    ClassRoom,
    MatchCache,
    MemberClass,
    device_demands,
    shortage,
    structural_key,
)
from scheduler.gang.pack import FEWEST, FRAGMENTS, Slot, pack
from scheduler.gang.workload import DomainUsage, best_placement, domain_usage, placement_scores

if TYPE_CHECKING:
    from scheduler.loop.scheduler import Scheduler

log = structlog.get_logger("dra_scheduler.gang")

GANG = "Coscheduling"  # the pseudo-plugin name recorded for gang rejections (matches every event)
MAX_CANDIDATES_PER_MEMBER = 4  # nodes tried for a member that is a class of its own
MAX_DOMAIN_ATTEMPTS = 3  # topology domains searched before the unrestricted search
MAX_EVAL_DOMAINS = 8  # domains of a schedulingConstraints.topology key placed and scored per group cycle
MAX_PACKINGS = 3  # alternative packings of a class when later classes fail
SEARCH_BUDGET = 400  # packings retried per group cycle when a later class did not fit (then: retried later)
SLICE_SECONDS = 0.02  # work between two yields to the event loop
JOINT_MAX_MEMBERS = 8  # joint re-allocation on a node only with at most this many members already there
MAX_RESTARTS = 2  # searches repeated in one cycle when the cluster changed under the placement
SCAN_CHUNK = 32  # nodes scanned between two checks of the time slice

GroupScore = Callable[[Pod, NodeInfo, Sequence[str]], int]  # (member, candidate, nodes used so far) -> bonus


@dataclass(slots=True)
class GroupState:
    """What the scheduler knows about a group between cycles (for status and timeouts)."""

    first_attempt: float
    message: str = ""
    scheduled_at: float | None = None
    timed_out: bool = False
    attempts: int = 0
    topology: str = ""  # where the group was placed in the topology and why (PlacementGenerate), for the status
    started: str = ""  # RFC 3339 wall time of the first attempt (x-k8s status.scheduleStartTime)
    # scheduling.k8s.io/v1beta1: the PodGroupInitiallyScheduled condition to write (placed?, reason, message)
    condition: tuple[bool, str, str] | None = None
    victims: list[str] = field(default_factory=list)  # members preempted by the scheduler (DisruptionTarget)
    disruption: str = ""  # DisruptionTarget=True message, once the group is disrupted
    disruption_time: str = ""


@dataclass(slots=True)
class _Placed:
    pod: Pod
    node: str
    state: CycleState
    claim_uids: list[str]
    # members re-allocated jointly with this one on its node, with their allocations before (JointAllocation point)
    joint_with: list[tuple[_Placed, Sequence[AllocatedDevices]]] = field(default_factory=list)


class _Budget(Exception):
    pass


@dataclass(slots=True)
class _Result:
    placed: list[_Placed] | None
    reason: str = ""
    retry: bool = False  # nothing proves the group cannot fit (budget, cluster changed): retry after a backoff


@dataclass(slots=True)
class _Search:
    """One group search: the framework, what is placed so far, and the counters."""

    fw: Framework
    order: dict[str, int]  # node -> position in the snapshot (determinism)
    levels: tuple[str, ...]  # topology level labels, outermost first
    labels: dict[str, Any]  # node -> labels
    placed: list[_Placed] = field(default_factory=list)
    pending: dict[str, AllocatedDevices] = field(default_factory=dict)  # claim uid -> allocation (this search)
    on_node: dict[str, list[_Placed]] = field(default_factory=dict)
    steps: int = 0  # packings tried
    backtracks: int = 0  # packings tried after the first one of a class (what SEARCH_BUDGET limits)
    failures: int = 0  # counts a node did not take (allocation verified fewer than its bound)
    failure_budget: int = 0


@dataclass(slots=True)
class _Frame:
    cls: MemberClass
    room: ClassRoom
    packings: list[list[tuple[str, int]] | None]  # None: leave the member pending (allowed by minMember)
    pos: int = 0
    got: list[_Placed] | None = None
    short: int = 0  # members of the class left pending by the packing in use
    reason: str = ""


@dataclass(slots=True)
class _Leaf:
    """One v1beta1 PodGroup in a group cycle (alone, or a leaf of a CompositePodGroup tree)."""

    pg: PodGroup
    key: str
    gs: GroupState
    bound: list[Pod]
    pending: list[Pod]
    placeable: list[Pod] = field(default_factory=list)
    placed: list[_Placed] | None = None
    reason: str = ""
    retry: bool = False


def group_key(pod: Pod) -> str | None:
    return f"{pod.namespace}/{pod.pod_group}" if pod.pod_group else None


class _ForkedScheduler:
    """The scheduler as a dry-run group search sees it: the real one, except for the cache (a private copy made
    by the PodGroupPostFilter plugin)."""

    def __init__(self, real: Scheduler, cache: Cache) -> None:
        self._real = real
        self.cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _DryRunOracle:
    """The group's own placement search, run on a copy of the cache for a PodGroupPostFilter plugin (group
    preemption; :class:`scheduler.framework.interface.PodGroupScheduling`): what the group cycle will run once the
    victims are gone."""

    def __init__(
        self, gang: GangScheduler, fw: Framework, members: list[Pod], need: int, pg: PodGroup, bound: Sequence[Pod]
    ) -> None:
        self.gang = gang
        self.fw = fw
        self.members = members
        self.need = need
        self.pg = pg
        self.bound = bound
        self._shadow_of: tuple[Cache, GangScheduler] | None = None

    def _shadow(self, cache: Cache) -> GangScheduler:
        if self._shadow_of is not None and self._shadow_of[0] is cache:
            return self._shadow_of[1]
        g = GangScheduler(cast("Scheduler", _ForkedScheduler(self.gang.s, cache)), self.gang.group_score)
        g._matches = self.gang._matches  # which devices match a class: valid for the copy too
        self._shadow_of = (cache, g)
        return g

    async def search(self, cache: Cache) -> tuple[PodGroupAssignments | None, str]:
        g = self._shadow(cache)
        self.gang.stats["preemption_searches"] += 1
        search, result = await g._search_once(
            self.fw, list(self.members), self.need, self.pg, GroupState(first_attempt=0.0), None, self.bound
        )
        placement = [(pl.pod, pl.node) for pl in result.placed] if result.placed is not None else None
        g._undo_all(search)
        return placement, result.reason

    async def check(self, cache: Cache, placement: PodGroupAssignments) -> bool:
        g = self._shadow(cache)
        self.gang.stats["preemption_checks"] += 1
        snap = cache.snapshot()
        search = _Search(self.fw, {ni.name: i for i, ni in enumerate(snap.nodes)}, (), {})
        ok = True
        for m, node in placement:
            if g._place(search, m, node) is None:
                ok = False
                break
        g._undo_all(search)
        await g._tick()
        return ok


class GangScheduler:
    def __init__(self, sched: Scheduler, group_score: GroupScore | None = None) -> None:
        self.s = sched
        self.groups: dict[str, GroupState] = {}
        self.group_score = group_score
        self.last_results: Counter[str] = Counter()  # attempt results of the last group cycle, per member
        self.stats = {
            "cycles": 0,
            "placed": 0,
            "failed": 0,
            "search_steps": 0,
            "backtracks": 0,
            "domain_attempts": 0,
            "classes": 0,
            "rejected_by_bound": 0,
            "corrections": 0,
            "joint_allocations": 0,
            "budget_ends": 0,
            "restarts": 0,
            "yields": 0,
            "max_slice_ms": 0,
            "preemptions": 0,  # group preemptions that chose victims
            "preemption_searches": 0,  # dry-run group searches (a PodGroupPostFilter plugin's PodGroupScheduling)
            "preemption_checks": 0,  # dry-run checks of a fixed placement (reprieve)
        }
        self._slice_start = time.perf_counter()
        self._dirty = False  # the cluster changed while the search yielded
        self._matches = MatchCache()  # CapacityModel's cache of matching devices per node (kept across cycles)
        self.cycle_seconds: dict[str, float] = {}  # group -> duration of its last group cycle (search + writes)
        self.search_seconds: dict[str, float] = {}  # group -> duration of the search in its last group cycle
        self._status_tasks: set[asyncio.Task[None]] = set()
        sched.cache.handlers.append(self._on_cache_event)

    # --- entry ------------------------------------------------------------------------------------

    async def run(self, info: QueuedPodInfo) -> bool:
        """Handle a popped group member. Returns False when the pod should be scheduled individually."""
        self.last_results = Counter()
        s = self.s
        cache = s.cache
        pod = cache.pod(info.pod.key)
        key = group_key(info.pod)
        if pod is None or key is None:
            return False
        pg = cache.podgroups().get(key)
        if pg is not None and pg.is_upstream:
            return await self._run_upstream(info, pod, pg, key)
        cycle = s.queue.scheduling_cycle
        gs = self._group_state(key)
        if pg is None:
            self._fail([info], Status.unresolvable(f"pod group {key} does not exist"), cycle, gs)
            await s.flush_writes()
            return True
        members = [
            p
            for p in cache.pods().values()
            if p.namespace == pod.namespace
            and p.pod_group == pod.pod_group
            and not p.terminated
            and not p.meta.deleting
        ]
        bound = [p for p in members if p.node_name or cache.is_assumed(p.key)]
        if len(bound) >= pg.min_member:
            return False
        pending = sorted((p for p in members if s.responsible(p) and not cache.is_assumed(p.key)), key=lambda p: p.key)
        present = len(bound) + len(pending)
        if present < pg.min_member:
            msg = f"pod group {key}: {present} of minMember {pg.min_member} pods exist; waiting for the rest"
            self._fail([info], Status.unschedulable(self._timeout_note(pg, gs, msg)), cycle, gs)
            await s.flush_writes()
            return True
        infos = {pod.key: info}
        for p in pending:
            if p.key not in infos:
                other = s.queue.pop_key(p.key)
                if other is not None:
                    infos[p.key] = other
        placeable = [p for p in pending if p.key in infos]
        if len(bound) + len(placeable) < pg.min_member:
            # members exist but cannot be scheduled yet (gated, e.g. their claims are not created yet)
            waiting = sorted(p.key for p in pending if p.key not in infos)
            msg = (
                f"pod group {key}: {len(bound) + len(placeable)} of minMember {pg.min_member} pods are ready to "
                f"schedule; waiting for {', '.join(waiting[:3])}{' ...' if len(waiting) > 3 else ''}"
            )
            self._fail(list(infos.values()), Status.unschedulable(self._timeout_note(pg, gs, msg)), cycle, gs)
            await s.flush_writes()
            return True
        need = pg.min_member - len(bound)
        self.stats["cycles"] += 1
        gs.attempts += 1
        fw = s.profiles[pod.scheduler_name]
        t0 = time.perf_counter()
        saved = self._take_nominations(placeable)
        try:
            result = await self._search_group(fw, placeable, need, pg, gs)
        except BaseException:
            self._give_back(saved)
            raise
        self.search_seconds[key] = time.perf_counter() - t0
        placed = result.placed
        log.info(
            "gang cycle",
            group=key,
            members=len(placeable),
            need=need,
            placed=len(placed) if placed else 0,
            seconds=round(time.perf_counter() - t0, 4),
        )
        if placed is None:
            self.stats["failed"] += 1
            msg = (
                f"pod group {key}: cannot place minMember {pg.min_member} pods together ({len(bound)} bound): "
                f"{result.reason}"
            )
            pre: PodGroupPostFilterResult | None = None
            if not result.retry:
                try:
                    pre = await self._preempt(fw, pg, placeable, need, bound, {p.key for p in members}, saved)
                except BaseException:
                    self._give_back(saved)
                    raise
            if result.retry or (pre is not None and pre.retry):
                self._give_back(saved)
                await self._retry_later(list(infos.values()), self._timeout_note(pg, gs, msg), gs)
            else:
                if pre is not None and pre.status.message:
                    msg = f"{msg}; {pre.status.message}"
                noms = saved if pre is None else pre.nominations
                self._fail(list(infos.values()), Status.unschedulable(self._timeout_note(pg, gs, msg)), cycle, gs, noms)
                await s.flush_writes()
                await self._run_preemption(pre, placeable)
            self.cycle_seconds[key] = time.perf_counter() - t0
            return True
        # unplaced pending members (beyond minMember) go back to the queue individually
        placed_keys = {pl.pod.key for pl in placed}
        self._give_back(saved, placed_keys)
        rest = [infos[k] for k in infos if k not in placed_keys]
        for r in rest:
            self.last_results["unschedulable"] += 1
            s.queue.add_unschedulable(r, {GANG}, cycle)
            s.queue.done(r.pod.key)
        if s.inline_binding:
            await self._commit(fw, placed, infos, gs, key)
        else:
            # Live: the group's binding cycle (claim writes, volume binding and device binding-condition
            # waits in PreBind, then the Bindings) runs as a task, like a pod's, so a slow PreBind does not
            # stop the scheduling loop. The members stay in flight in the queue until it ends.
            task = asyncio.create_task(self._commit_task(fw, placed, infos, gs, key))
            s._binding_tasks.add(task)
            task.add_done_callback(s._binding_tasks.discard)
        self.cycle_seconds[key] = time.perf_counter() - t0
        return True

    def _group_state(self, key: str) -> GroupState:
        gs = self.groups.get(key)
        if gs is None:
            gs = self.groups[key] = GroupState(first_attempt=self.s.clock.now(), started=self.s.wallclock())
        return gs

    # --- Kubernetes 1.37 PodGroups (scheduling.k8s.io/v1beta1) and CompositePodGroups (v1alpha3) ---------------

    def _members_of(self, ns: str, name: str) -> tuple[list[Pod], list[Pod]]:
        """(bound or assumed, pending and ours) members of the v1beta1 PodGroup ``ns/name``."""
        s = self.s
        cache = s.cache
        bound: list[Pod] = []
        pending: list[Pod] = []
        for p in cache.pods().values():
            if p.namespace != ns or p.pod_group != name or p.terminated or p.meta.deleting:
                continue
            if p.node_name or cache.is_assumed(p.key):
                bound.append(p)
            elif s.responsible(p):
                pending.append(p)
        return bound, sorted(pending, key=lambda p: p.key)

    async def _run_upstream(self, info: QueuedPodInfo, pod: Pod, pg: PodGroup, key: str) -> bool:
        """The group cycle of a Kubernetes 1.37 PodGroup (``pkg/scheduler/schedule_one_podgroup.go``,
        ``framework/plugins/gangscheduling``): a ``gang`` PodGroup is placed with at least ``minCount`` members or
        not at all; a ``basic`` one needs one member (the others are placed one by one and say why when they do not
        fit); ``schedulingConstraints.topology`` keeps all members in one domain of the key (also the members
        placed after the first cycle: they follow the domain of the bound ones); a PodGroup with a
        ``parentCompositePodGroupName`` is admitted with its whole CompositePodGroup tree (at least
        ``minGroupCount`` child groups together, or none). Writes ``PodGroupInitiallyScheduled``."""
        s = self.s
        cache = s.cache
        cycle = s.queue.scheduling_cycle
        gs = self._group_state(key)
        composites: Mapping[str, CompositePodGroup] = cache.objects("CompositePodGroup")
        podgroups = cache.podgroups()
        try:
            root = root_of(pod.namespace, pg, composites)
        except LayoutError as e:
            missing = "does not exist" in str(e)
            st = Status.unresolvable(str(e)) if missing else Status.error(str(e))
            self._fail([info], st, cycle, gs)
            gs.condition = (False, REASON_UNSCHEDULABLE if missing else REASON_SCHEDULER_ERROR, str(e))
            await s.flush_writes()
            await self._write_conditions([key])
            return True
        leaf_pgs = [pg] if root is None else leaves_of(root, podgroups, composites)
        leaves: dict[str, _Leaf] = {}
        for lp in leaf_pgs:
            lk = lp.meta.key
            b, pend = self._members_of(lp.meta.namespace, lp.meta.name)
            leaves[lk] = _Leaf(lp, lk, self._group_state(lk), b, pend)
        me = leaves[key]
        keyed = bool(pg.topology_key) or (root is not None and self._tree_has_key(root, podgroups, composites))
        if (
            len(me.bound) >= pg.min_member
            and not keyed
            and (root is None or self._tree_ok(root, podgroups, composites, leaves, lambda lf: len(lf.bound)))
        ):
            return False  # admitted: the rest are placed one by one, as kube-scheduler's members past minCount
        # PreEnqueue's quorum (GangScheduling): enough members exist
        if root is None:
            present = len(me.bound) + len(me.pending)
            if present < pg.min_member:
                msg = f"pod group {key}: {present} of minCount {pg.min_member} pods exist; waiting for the rest"
                self._fail([info], Status.unschedulable(msg), cycle, gs)
                gs.condition = (False, REASON_UNSCHEDULABLE, msg)
                await s.flush_writes()
                await self._write_conditions([key])
                return True
        elif not self._tree_ok(root, podgroups, composites, leaves, lambda lf: len(lf.bound) + len(lf.pending)):
            msg = (
                f"waiting for composite pod group {root.meta.key} tree to meet quorum: "
                + self._quorum_note(root, podgroups, composites, leaves)
            )
            self._fail([info], Status.unschedulable(msg), cycle, gs)
            for lf in leaves.values():
                lf.gs.condition = (False, REASON_UNSCHEDULABLE, msg)
            await s.flush_writes()
            await self._write_conditions(list(leaves))
            return True
        infos = {pod.key: info}
        for lf in leaves.values():
            for p in lf.pending:
                if p.key not in infos:
                    other = s.queue.pop_key(p.key)
                    if other is not None:
                        infos[p.key] = other
            lf.placeable = [p for p in lf.pending if p.key in infos]
        ready = (
            len(me.bound) + len(me.placeable) >= pg.min_member
            if root is None
            else self._tree_ok(root, podgroups, composites, leaves, lambda lf: len(lf.bound) + len(lf.placeable))
        )
        if not ready:
            waiting = sorted(p.key for lf in leaves.values() for p in lf.pending if p.key not in infos)
            msg = (
                f"pod group {key}: members are not ready to schedule yet; waiting for "
                f"{', '.join(waiting[:3])}{' ...' if len(waiting) > 3 else ''}"
            )
            self._fail(list(infos.values()), Status.unschedulable(msg), cycle, gs)
            await s.flush_writes()
            return True
        fw = s.profiles[pod.scheduler_name]
        self.stats["cycles"] += 1
        for lf in leaves.values():
            lf.gs.attempts += 1
        t0 = time.perf_counter()
        self._slice_start = t0
        node: PodGroup | CompositePodGroup = pg if root is None else root
        saved = self._take_nominations([p for lf in leaves.values() for p in lf.placeable])
        try:
            ok, why = await self._search_tree(fw, node, None, leaves, podgroups, composites)
        except BaseException:
            self._give_back(saved)
            raise
        placed = [pl for lf in leaves.values() if lf.placed for pl in lf.placed]
        self.search_seconds[key] = time.perf_counter() - t0
        log.info("pod group cycle", group=node.meta.key, members=len(infos), placed=len(placed), ok=ok)
        if not ok or not placed:
            self.stats["failed"] += 1
            retry = any(lf.retry for lf in leaves.values())
            pre: PodGroupPostFilterResult | None = None
            if not retry and root is None:
                # workload-aware preemption (PodGroupPostFilter); not for a CompositePodGroup tree
                try:
                    pre = await self._preempt(
                        fw, pg, me.placeable, max(1, pg.min_member - len(me.bound)), me.bound,
                        {p.key for p in (*me.bound, *me.pending)}, saved,
                    )
                except BaseException:
                    self._give_back(saved)
                    raise
                retry = pre is not None and pre.retry
            if retry:
                self._give_back(saved)
            for lf in leaves.values():
                msg = lf.reason or why or "no member could be placed"
                if not msg.startswith("pod group ") and not msg.startswith("composite pod group "):
                    msg = f"pod group {lf.key}: cannot place minCount {lf.pg.min_member} pods together: {msg}"
                if pre is not None and pre.status.message and lf is me:
                    msg = f"{msg}; {pre.status.message}"
                lf.gs.message = msg
                lf.gs.condition = (False, REASON_UNSCHEDULABLE, msg)
                mine = [infos[p.key] for p in lf.placeable]
                if retry:
                    await self._retry_later(mine, msg, lf.gs)
                else:
                    self._fail(mine, Status.unschedulable(msg), cycle, lf.gs, saved if pre is None else pre.nominations)
            await s.flush_writes()
            await self._write_conditions(list(leaves))
            if not retry:
                await self._run_preemption(pre, me.placeable)
            self.cycle_seconds[key] = time.perf_counter() - t0
            return True
        placed_keys = {pl.pod.key for pl in placed}
        self._give_back(saved, placed_keys)
        for lf in leaves.values():
            rest = [infos[p.key] for p in lf.placeable if p.key not in placed_keys]
            got = [pl for pl in lf.placed or ()]
            if got:
                lf.gs.condition = (
                    True,
                    REASON_SCHEDULED,
                    f"{len(lf.bound) + len(got)} pods of minCount {lf.pg.min_member} placed"
                    + (f"; {lf.gs.topology}" if lf.gs.topology else ""),
                )
            elif lf.placeable:
                msg = lf.reason or "no member could be placed"
                lf.gs.condition = (False, REASON_UNSCHEDULABLE, f"pod group {lf.key}: {msg}")
            if rest:
                msg = (
                    f"pod group {lf.key}: {len(got)} of its {len(lf.placeable)} pending pods were placed with the "
                    "group; "
                    f"no room for this one{': ' + lf.reason if lf.reason and not got else ''}"
                )
                self._fail(rest, Status.unschedulable(msg), cycle, lf.gs, saved)
        await s.flush_writes()
        for lf in leaves.values():
            if lf.placed:
                lf.gs.scheduled_at = s.clock.now()
        await self._write_conditions(list(leaves))
        if s.inline_binding:
            await self._commit(fw, placed, infos, gs, node.meta.key)
        else:
            task = asyncio.create_task(self._commit_task(fw, placed, infos, gs, node.meta.key))
            s._binding_tasks.add(task)
            task.add_done_callback(s._binding_tasks.discard)
        self.cycle_seconds[key] = time.perf_counter() - t0
        return True

    def _tree_has_key(
        self, cpg: CompositePodGroup, podgroups: Mapping[str, PodGroup], composites: Mapping[str, CompositePodGroup]
    ) -> bool:
        if cpg.topology_key:
            return True
        for c in children_of(cpg, podgroups, composites):
            if isinstance(c, CompositePodGroup):
                if self._tree_has_key(c, podgroups, composites):
                    return True
            elif c.topology_key:
                return True
        return False

    def _tree_ok(
        self,
        cpg: CompositePodGroup,
        podgroups: Mapping[str, PodGroup],
        composites: Mapping[str, CompositePodGroup],
        leaves: Mapping[str, _Leaf],
        count: Callable[[_Leaf], int],
    ) -> bool:
        """GangScheduling's ``isCPGTreeReady``: at least ``minGroupCount`` children whose count (members existing, or
        bound) reaches their ``minCount`` (recursively for CompositePodGroup children)."""
        ok = 0
        for c in children_of(cpg, podgroups, composites):
            if isinstance(c, CompositePodGroup):
                ok += self._tree_ok(c, podgroups, composites, leaves, count)
            else:
                lf = leaves.get(c.meta.key)
                ok += lf is not None and count(lf) >= c.min_member
        return ok >= min_groups(cpg)

    def _quorum_note(
        self,
        cpg: CompositePodGroup,
        podgroups: Mapping[str, PodGroup],
        composites: Mapping[str, CompositePodGroup],
        leaves: Mapping[str, _Leaf],
    ) -> str:
        parts = []
        for c in children_of(cpg, podgroups, composites):
            if isinstance(c, PodGroup) and c.meta.key in leaves:
                lf = leaves[c.meta.key]
                parts.append(f"{c.meta.name}: {len(lf.bound) + len(lf.pending)} of minCount {c.min_member} pods exist")
            else:
                parts.append(f"{c.meta.name}: a composite pod group")
        return f"minGroupCount {min_groups(cpg)}; " + ", ".join(parts)

    async def _search_tree(
        self,
        fw: Framework,
        node: PodGroup | CompositePodGroup,
        scope: frozenset[str] | None,
        leaves: dict[str, _Leaf],
        podgroups: Mapping[str, PodGroup],
        composites: Mapping[str, CompositePodGroup],
    ) -> tuple[bool, str]:
        """Place ``node`` (a PodGroup, or a CompositePodGroup's subtree) inside ``scope``; what is placed stays
        assumed. Returns (admitted, why not)."""
        if isinstance(node, PodGroup):
            lf = leaves[node.meta.key]
            satisfied = len(lf.bound) >= node.min_member
            if not lf.placeable:
                why = "" if satisfied else f"{len(lf.bound)} of minCount {node.min_member} pods bound, none pending"
                lf.reason = lf.reason or why
                return satisfied, why
            need = max(1, node.min_member - len(lf.bound))
            r = await self._search_group(fw, lf.placeable, need, node, lf.gs, scope, lf.bound)
            if r.placed is None:
                lf.reason, lf.retry = r.reason, r.retry
                return satisfied, r.reason
            lf.placed, lf.reason = r.placed, ""
            return True, ""
        children = children_of(node, podgroups, composites)
        if node.topology_key:
            return await self._search_composite_domains(fw, node, children, scope, leaves, podgroups, composites)
        return await self._search_children(fw, node, children, scope, leaves, podgroups, composites)

    async def _search_children(
        self,
        fw: Framework,
        cpg: CompositePodGroup,
        children: Sequence[PodGroup | CompositePodGroup],
        scope: frozenset[str] | None,
        leaves: dict[str, _Leaf],
        podgroups: Mapping[str, PodGroup],
        composites: Mapping[str, CompositePodGroup],
    ) -> tuple[bool, str]:
        """compositePodGroupSchedulingDefaultAlgorithm: the children one after the other; PlacementFeasible
        (GangScheduling) stops as soon as ``minGroupCount`` cannot be reached; below it, the subtree is reverted."""
        mgc = min_groups(cpg)
        done, remaining = 0, len(children)
        reasons: list[str] = []
        if remaining >= mgc:
            for ch in children:
                ok, why = await self._search_tree(fw, ch, scope, leaves, podgroups, composites)
                remaining -= 1
                if ok:
                    done += 1
                elif why:
                    reasons.append(f"{ch.meta.name}: {why}")
                if done + remaining < mgc:
                    break
        if done >= mgc:
            return True, ""
        msg = (
            f"composite pod group {cpg.meta.key}: minCount ({mgc}) cannot be satisfied: {done} scheduled, "
            f"{remaining} remaining"
        )
        if reasons:
            msg += " (" + "; ".join(reasons[:3]) + ")"
        for lf in self._subtree_leaves(cpg, leaves, podgroups, composites):
            self._revert_leaf(fw, lf)
            lf.reason = msg if not lf.reason else f"{msg}; {lf.reason}"
        return False, msg

    def _subtree_leaves(
        self,
        cpg: CompositePodGroup,
        leaves: Mapping[str, _Leaf],
        podgroups: Mapping[str, PodGroup],
        composites: Mapping[str, CompositePodGroup],
    ) -> list[_Leaf]:
        return [leaves[p.meta.key] for p in leaves_of(cpg, podgroups, composites) if p.meta.key in leaves]

    def _revert_leaf(self, fw: Framework, lf: _Leaf) -> None:
        for pl in reversed(lf.placed or []):
            fw.run_unreserve(pl.state, pl.pod, pl.node)
            self.s.cache.forget_pod(pl.pod)
        lf.placed = None

    async def _search_composite_domains(
        self,
        fw: Framework,
        cpg: CompositePodGroup,
        children: Sequence[PodGroup | CompositePodGroup],
        scope: frozenset[str] | None,
        leaves: dict[str, _Leaf],
        podgroups: Mapping[str, PodGroup],
        composites: Mapping[str, CompositePodGroup],
    ) -> tuple[bool, str]:
        """A CompositePodGroup with ``schedulingConstraints.topology``: its whole subtree in one domain of the key,
        the best of the feasible domains by placement score (as for a PodGroup)."""
        key = cpg.topology_key
        snap = self.s.cache.snapshot()
        mine = self._subtree_leaves(cpg, leaves, podgroups, composites)
        pinned: str | None = None
        for lf in mine:
            for b in lf.bound:
                info = snap.node_map.get(self._bound_node(b))
                value = info.node.labels.get(key) if info is not None else None
                if value is None or (pinned is not None and value != pinned):
                    why = f"composite pod group {cpg.meta.key}: bound members are not in one domain of {key}"
                    return False, why
                pinned = value
        domains: dict[str, set[str]] = {}
        for ni in snap.nodes:
            v = ni.node.labels.get(key)
            if v is not None and (scope is None or ni.name in scope) and (pinned is None or v == pinned):
                domains.setdefault(v, set()).add(ni.name)
        if not domains:
            return False, f"composite pod group {cpg.meta.key}: no node has the label {key}"
        bound = sum(len(lf.bound) for lf in mine)
        feasible: list[tuple[str, frozenset[str], DomainUsage]] = []
        first = ""
        for value in sorted(domains)[:MAX_EVAL_DOMAINS]:
            nodes = frozenset(domains[value])
            for lf in mine:
                lf.reason, lf.retry = "", False
            ok, why = await self._search_children(fw, cpg, children, nodes, leaves, podgroups, composites)
            if not ok:
                first = first or f"{value}: {why}"
                continue
            placed = sum(len(lf.placed or ()) for lf in mine)
            feasible.append((value, nodes, domain_usage(self.s.cache.snapshot(), nodes, bound + placed)))
            for lf in mine:
                self._revert_leaf(fw, lf)
        if not feasible:
            msg = (
                f"composite pod group {cpg.meta.key}: 0/{min(len(domains), MAX_EVAL_DOMAINS)} placements ({key} "
                f"domains) are available, first placement status: {first}"
            )
            for lf in mine:
                lf.reason = msg
            return False, msg
        i = best_placement([u for _, _, u in feasible])
        value, nodes, _ = feasible[i]
        for lf in mine:
            lf.reason, lf.retry = "", False
        ok, why = await self._search_children(fw, cpg, children, nodes, leaves, podgroups, composites)
        if ok:
            for lf in mine:
                lf.gs.topology = f"placed with composite pod group {cpg.meta.key} in {key}={value}"
        return ok, why

    def forget_group(self, key: str) -> None:
        self.groups.pop(key, None)
        self.cycle_seconds.pop(key, None)
        self.search_seconds.pop(key, None)

    def _on_cache_event(self, kind: str, event: str, old: Any, new: Any) -> None:
        """A member of a v1beta1 PodGroup preempted by the scheduler (its ``DisruptionTarget`` condition, reason
        PreemptionByScheduler) marks the group: ``DisruptionTarget=True`` on the PodGroup when the group as a whole is
        disrupted (``disruptionMode: all``, or fewer than ``minCount`` members left). A deleted PodGroup takes what
        was kept for it along (its GroupState and cycle timings: a scheduler under churn sees new groups all day)."""
        if kind == "PodGroup" and event == "DELETED" and isinstance(old, PodGroup):
            self.forget_group(old.meta.key)
            return
        if kind != "Pod":
            return
        p = new if isinstance(new, Pod) else old
        if not isinstance(p, Pod) or not p.pod_group:
            return
        conds = (p.raw.get("status") or {}).get("conditions") or []
        if not any(
            isinstance(c, Mapping)
            and c.get("type") == DISRUPTION_TARGET
            and c.get("status") == "True"
            and c.get("reason") == REASON_PREEMPTION
            for c in conds
        ):
            return
        key = f"{p.namespace}/{p.pod_group}"
        pg = self.s.cache.podgroups().get(key)
        if pg is None or not pg.is_upstream:
            return
        gs = self._group_state(key)
        if p.key in gs.victims:
            return
        gs.victims.append(p.key)
        bound, _ = self._members_of(p.namespace, p.pod_group)
        left = [b for b in bound if b.key not in gs.victims]
        if pg.disruption_all or len(left) < pg.min_member:
            why = "disruptionMode All: the group is disrupted as a whole" if pg.disruption_all else (
                f"{len(left)} of minCount {pg.min_member} members left"
            )
            gs.disruption = (
                f"{len(gs.victims)} member(s) preempted by the scheduler ({', '.join(gs.victims[:3])}"
                f"{' ...' if len(gs.victims) > 3 else ''}); {why}"
            )
            gs.disruption_time = gs.disruption_time or self.s.wallclock()
            if not self.s.writes_allowed():  # a standby notes it (for when it leads) and leaves the write to the leader
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            task = loop.create_task(self._write_conditions([key]))
            self._status_tasks.add(task)
            task.add_done_callback(self._status_tasks.discard)

    async def _write_conditions(self, keys: Sequence[str]) -> None:
        """Patch ``status.conditions`` of these v1beta1 PodGroups when they changed (kube-scheduler's
        updatePodGroupCondition: PodGroupInitiallyScheduled never goes back from True)."""
        s = self.s
        for key in keys:
            pg = s.cache.podgroups().get(key)
            gs = self.groups.get(key)
            if pg is None or not pg.is_upstream or gs is None:
                continue
            placed, reason, message = gs.condition if gs.condition is not None else (None, "", "")
            conds, changed = podgroup_conditions(
                pg, placed, reason, message, gs.disruption, gs.disruption_time or s.wallclock()
            )
            if not changed:
                continue
            try:
                await s.api.patch(
                    "PodGroup", pg.meta.namespace, pg.meta.name, {"status": {"conditions": conds}}, subresource="status"
                )
            except ApiError as e:
                log.warning("podgroup condition not written", podgroup=key, error=str(e))

    async def _commit_task(
        self, fw: Framework, placed: list[_Placed], infos: dict[str, QueuedPodInfo], gs: GroupState, key: str
    ) -> bool:
        # the live client's rate limiter serves older groups' writes first (scheduler/api/clusterapi.py)
        with pod_writes():
            await self._commit(fw, placed, infos, gs, key)
        return True

    def _timeout_note(self, pg: PodGroup, gs: GroupState, msg: str) -> str:
        timeout = pg.schedule_timeout_seconds
        if timeout is not None and self.s.clock.now() - gs.first_attempt > timeout:
            gs.timed_out = True
            return f"{msg} (scheduleTimeoutSeconds {timeout} expired)"
        return msg

    def _fail(
        self,
        infos: Sequence[QueuedPodInfo],
        status: Status,
        cycle: int,
        gs: GroupState,
        nominated: Mapping[str, str] | None = None,
    ) -> None:
        """Every member back to the queue with the group's status; ``nominated``: the ``nominatedNodeName`` of
        members (pod key -> node, "" clears; absent: the pod's own status is kept), from a group preemption."""
        gs.message = status.message
        result = "error" if status.code == Code.ERROR else "unschedulable"
        for i in infos:
            self.last_results[result] += 1
            self.s.fail(i, i.pod, status, {GANG}, cycle, nominated=(nominated or {}).get(i.pod.key))

    async def _retry_later(self, infos: Sequence[QueuedPodInfo], msg: str, gs: GroupState) -> None:
        """The search ended without proving that the group cannot fit: every member goes to backoff (the group is
        searched again soon) and says so in PodScheduled=False (reason Unschedulable)."""
        gs.message = msg
        s = self.s
        for i in infos:
            self.last_results["unschedulable"] += 1
            s.queue.add_backoff(i)
            s.queue.done(i.pod.key)
        await s.flush_writes()
        for i in infos:
            await s.write_failure(s.cache.pod(i.pod.key) or i.pod, "Unschedulable", msg)

    # --- PodGroupPostFilter (group preemption) ----------------------------------------------------

    def _take_nominations(self, members: Sequence[Pod]) -> dict[str, str]:
        """The members' nominations (left by a group preemption) hold the group's own room: they are taken out of
        the nominator while the group is searched, so that members do not count each other on their nodes
        (upstream: a member's nomination is deleted when it is assumed). Returns pod key -> node."""
        nom = self.s.nominator
        saved: dict[str, str] = {}
        for m in members:
            node = nom.node_of(m)
            if node:
                saved[m.key] = node
                nom.delete(m)
        return saved

    def _give_back(self, saved: Mapping[str, str], skip: Collection[str] = ()) -> None:
        """Nominations taken by :meth:`_take_nominations` back to the members not placed (``skip``: placed)."""
        cache = self.s.cache
        for key, node in saved.items():
            cur = cache.pod(key)
            if key in skip or cur is None or cur.node_name or cache.is_assumed(key):
                continue
            self.s.nominator.add(cur, node, OVERRIDE)

    async def _preempt(
        self,
        fw: Framework,
        pg: PodGroup,
        members: list[Pod],
        need: int,
        bound: Sequence[Pod],
        group_pods: Collection[str],
        nominated: Mapping[str, str],
    ) -> PodGroupPostFilterResult | None:
        """The PodGroupPostFilter plugins (workload-aware preemption: DefaultPreemption) for a group that does not
        fit; None when no PostFilter plugin of the profile implements it."""
        if not members or not fw.pod_group_post_filter_plugins():
            return None
        s = self.s
        oracle = _DryRunOracle(self, fw, members, need, pg, bound)
        group = PodGroupInfo(pg, tuple(members), frozenset(group_pods))
        t0 = time.perf_counter()
        res = await fw.run_pod_group_post_filter(s.cache, group, nominated, oracle)
        if res is None:
            return None
        if res.actuate is not None:
            self.stats["preemptions"] += 1
        log.info(
            "pod group preemption",
            group=pg.meta.key,
            code=res.status.code.name,
            message=res.status.message,
            victims=len(res.victims),
            seconds=round(time.perf_counter() - t0, 4),
        )
        return res

    async def _run_preemption(self, pre: PodGroupPostFilterResult | None, members: Sequence[Pod]) -> None:
        """The victims' API work, after the members' status writes (ARCHITECTURE §4): inline in simulate, else a
        task (async preemption)."""
        if pre is None or pre.actuate is None or not members:
            return
        s = self.s
        s._pending_preemptions.append((members[0].key, pre.actuate))
        await s.run_preemptions()

    # --- yielding ---------------------------------------------------------------------------------

    def _fingerprint(self) -> tuple[int, tuple[int, ...]]:
        cache = self.s.cache
        return cache.ledger.revision, tuple(cache.generations.values())

    async def _tick(self, force: bool = False) -> None:
        """Yield to the event loop when this slice of work is used up; note whether the cluster changed."""
        now = time.perf_counter()
        spent = now - self._slice_start
        if not force and spent < SLICE_SECONDS:
            return
        self.stats["yields"] += 1
        self.stats["max_slice_ms"] = max(self.stats["max_slice_ms"], round(spent * 1000))
        before = self._fingerprint()
        await asyncio.sleep(0)
        if self._fingerprint() != before:
            self._dirty = True
        self._slice_start = time.perf_counter()

    # --- search -----------------------------------------------------------------------------------

    async def _search_group(
        self,
        fw: Framework,
        members: list[Pod],
        need: int,
        pg: PodGroup | None,
        gs: GroupState | None,
        scope: frozenset[str] | None = None,
        bound: Sequence[Pod] = (),
    ) -> _Result:
        """Search, and search again when the cluster changed under a placement found while yielding. ``scope``: the
        nodes the group must stay on (a domain chosen for its CompositePodGroup); ``bound``: members already bound
        (a ``schedulingConstraints.topology`` group keeps to their domain)."""
        self._slice_start = time.perf_counter()
        problem = ""
        cache = self.s.cache
        for attempt in range(MAX_RESTARTS + 1):
            self._dirty = False
            if attempt:
                self.stats["restarts"] += 1
                # the members as they are now (deleted, replaced or bound ones leave the search)
                members = [
                    cur
                    for m in members
                    if (cur := cache.pod(m.key)) is not None
                    and cur.uid == m.uid
                    and not cur.node_name
                    and not cur.meta.deleting
                ]
                if len(members) < need:
                    return _Result(
                        None, f"members were deleted during the group search ({problem}); the group is retried later",
                        True,
                    )
            search, result = await self._search_once(fw, members, need, pg, gs, scope, bound)
            if result.placed is None or not self._dirty:
                return result
            problem = self._revalidate(search)
            if not problem:
                return result
            log.info("gang placement invalidated while searching", problem=problem)
            self._undo_all(search)
        return _Result(
            None, f"the cluster kept changing during the group search ({problem}); the group is retried later", True
        )

    async def _search_once(
        self,
        fw: Framework,
        members: list[Pod],
        need: int,
        pg: PodGroup | None,
        gs: GroupState | None,
        scope: frozenset[str] | None = None,
        bound: Sequence[Pod] = (),
    ) -> tuple[_Search, _Result]:
        snap = self.s.cache.snapshot()
        topo = fw.placement_generator()
        levels = tuple(lv.label for lv in topo.placement_levels()) if topo is not None else ()
        search = _Search(
            fw,
            {ni.name: i for i, ni in enumerate(snap.nodes)},
            levels,
            {ni.name: ni.node.labels for ni in snap.nodes},
        )
        if gs is not None:
            gs.topology = ""
        classes, reasons = await self._classes(search, members)
        if sum(c.target for c in classes) < need:
            reason = "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items())[:3]) or "no placement found"
            return search, _Result(None, reason)
        self.stats["classes"] += len(classes)
        model = CapacityModel(fw.instances, fw.filter, self._matches)
        model.device_classes = snap.classes  # extended resources backed by DRA are counted as devices
        rough = {c.key: await self._rough(search, c, model) for c in classes}
        if all(r.caps for r in rough.values()):
            short = shortage(classes, rough, need, model, {})
            if short:
                self.stats["rejected_by_bound"] += 1
                return search, _Result(None, short)
        rooms: dict[Hashable, ClassRoom] = {}
        fit_errors: dict[Hashable, str] = {}
        for c in classes:
            rooms[c.key] = await self._scan(search, c, model, None, fit_errors)
        short = shortage(classes, rooms, need, model, fit_errors)
        if short:
            self.stats["rejected_by_bound"] += 1
            return search, _Result(None, short)
        search.failure_budget = 4 * len(snap.nodes) + 2 * sum(c.target for c in classes) + 16

        attempts: tuple[Attempt, ...] = (Attempt(None, "", scope, 0),)
        note = problem = ""
        if pg is not None and pg.topology_key:
            # scheduling.k8s.io/v1beta1 schedulingConstraints.topology: every member in one domain of the key;
            # each domain with room is evaluated and the best placement wins (TopologyPlacementGenerator +
            # PlacementScore plugins), nothing is placed when no domain can host the group
            p = self._key_plan(pg, classes, rooms, need, scope, bound)
            if not p.attempts:
                return search, _Result(None, p.note)
            try:
                result = await self._evaluate_domains(search, classes, model, rooms, p.attempts, need, bound, pg, gs)
                return search, result
            except _Budget:
                self.stats["budget_ends"] += 1
                self._undo_all(search)
                return search, _Result(None, "the search budget ended before a domain was found; retried later", True)
            finally:
                self.stats["search_steps"] += search.steps
                self.stats["backtracks"] += search.backtracks
        if topo is not None and scope is None:
            p, problem = self._domain_plan(topo, pg, classes, rooms, need)
            attempts, note = p.attempts, p.note
        reason = note or "no placement found"
        tried = 0
        try:
            for att in attempts:
                if att.nodes is not None:
                    if tried >= MAX_DOMAIN_ATTEMPTS:
                        continue
                    tried += 1
                self.stats["domain_attempts"] += 1
                why = await self._place_classes(search, classes, model, rooms, att.nodes, need)
                if why is None:
                    if gs is not None and topo is not None:
                        chosen = att.describe(need) if att.nodes is not None else ""
                        gs.topology = self._where(topo, search.placed, chosen)
                        if problem:
                            gs.topology += f" ({problem}; ignored)"
                    return search, _Result(list(search.placed))
                reason = why
        except _Budget:
            self.stats["budget_ends"] += 1
            self._undo_all(search)
            return search, _Result(
                None,
                f"the search budget ({SEARCH_BUDGET} packings tried again after a later kind of member did not fit) "
                f"ended before a placement of the group's {len(classes)} kinds of members was found; the group is "
                "retried later",
                retry=True,
            )
        finally:
            self.stats["search_steps"] += search.steps
            self.stats["backtracks"] += search.backtracks
        if problem:
            reason = f"{reason} ({problem}; ignored)"
        return search, _Result(None, reason)

    def _domain_plan(
        self,
        topo: PlacementGeneratePlugin,
        pg: PodGroup | None,
        classes: Sequence[MemberClass],
        rooms: dict[Hashable, ClassRoom],
        need: int,
    ) -> tuple[Plan, str]:
        """Topology domains to try (the PlacementGenerate plugin's, e.g. GpuTopology's levels and required level),
        sized by the classes' rooms, and a problem with the PodGroup's topology settings."""
        slots = self._member_slots(classes, rooms)
        snap = self.s.cache.snapshot()
        labels = {n: snap.node_map[n].node.labels for n in slots if n in snap.node_map}
        return topo.generate_placements(pg, labels, slots, need)

    def _member_slots(
        self, classes: Sequence[MemberClass], rooms: dict[Hashable, ClassRoom]
    ) -> dict[str, int]:
        """How many members of the group's mix fit on each node (the classes sharing its room).

        The load of a class on a node is its members over how many of them the node takes alone (``fits``: its
        cap before the cut at the class's member count, so that a class of one member, e.g. each member that shares
        a claim with others, does not count as filling the node)."""
        total = sum(c.target for c in classes)
        nodes: set[str] = set()
        for c in classes:
            nodes.update(rooms[c.key].caps)
        slots: dict[str, int] = {}
        for n in nodes:
            if len(classes) == 1:
                v = rooms[classes[0].key].caps.get(n, 0)
            else:
                load = 0.0
                room = 0
                for c in classes:
                    r = rooms[c.key]
                    cap = r.caps.get(n, 0)
                    if cap > 0:
                        load += c.target / max(cap, r.fits.get(n, cap))
                        room += cap
                v = min(room, math.ceil(total / load)) if load > 0 else 0
            if v > 0:
                slots[n] = v
        return slots

    def _bound_node(self, p: Pod) -> str:
        return p.node_name or getattr(self.s.cache, "_assumed", {}).get(p.key, "")

    def _key_plan(
        self,
        pg: PodGroup,
        classes: Sequence[MemberClass],
        rooms: dict[Hashable, ClassRoom],
        need: int,
        scope: frozenset[str] | None,
        bound: Sequence[Pod],
    ) -> Plan:
        """The domains of ``spec.schedulingConstraints.topology[0].key`` that can host ``need`` members (all of
        them, tightest first, at most ``MAX_EVAL_DOMAINS``), as TopologyPlacementGenerator: only the domain of the
        members already bound when there are some. An empty plan carries the reason, naming the key."""
        key = pg.topology_key
        where = f"spec.schedulingConstraints.topology[0].key {key}"
        snap = self.s.cache.snapshot()
        pinned: str | None = None
        for b in bound:
            node = self._bound_node(b)
            info = snap.node_map.get(node)
            value = info.node.labels.get(key) if info is not None else None
            if value is None:
                return Plan((), f"{where}: member {b.key} is bound to node {node or '?'}, which has no {key} label")
            if pinned is not None and value != pinned:
                return Plan((), f"{where}: the bound members are in more than 1 domain: {pinned}, {value}")
            pinned = value
        slots = self._member_slots(classes, rooms)
        if scope is not None:
            slots = {n: v for n, v in slots.items() if n in scope}
        labels = {n: snap.node_map[n].node.labels for n in slots if n in snap.node_map}
        labels = {n: lab for n, lab in labels.items() if key in lab and (pinned is None or lab[key] == pinned)}
        level = Level(key.rsplit("/", 1)[-1] or key, key)
        p = plan((level,), labels, slots, need, required=level, max_domains=MAX_EVAL_DOMAINS, pack=True)
        if p.attempts:
            return p
        room: dict[str, int] = {}
        for n, lab in labels.items():
            room[lab[key]] = room.get(lab[key], 0) + slots.get(n, 0)
        if pinned is not None:
            have = room.get(pinned, 0)
            return Plan((), f"{where}: the bound members' domain {pinned} has room for {have} more, {need} needed")
        if not room:
            return Plan((), f"{where}: no node the members can use has the label {key}")
        largest = max(room.items(), key=lambda kv: (kv[1], kv[0]))
        return Plan(
            (),
            f"{where}: no domain has room for {need} members (largest: {largest[0]} with room for {largest[1]}); "
            "nothing is bound",
        )

    async def _evaluate_domains(
        self,
        search: _Search,
        classes: list[MemberClass],
        model: CapacityModel,
        rooms: dict[Hashable, ClassRoom],
        attempts: Sequence[Attempt],
        need: int,
        bound: Sequence[Pod],
        pg: PodGroup,
        gs: GroupState | None,
    ) -> _Result:
        """Place the group in every candidate domain in turn, score each feasible placement
        (:mod:`scheduler.gang.workload`) and keep the best; nothing stays placed in the others."""
        feasible: list[tuple[Attempt, DomainUsage]] = []
        first = ""
        for att in attempts:
            self.stats["domain_attempts"] += 1
            why = await self._place_classes(search, classes, model, rooms, att.nodes, need)
            if why is not None:
                first = first or f"{att.value}: {why}"
                continue
            assert att.nodes is not None
            usage = domain_usage(self.s.cache.snapshot(), att.nodes, len(search.placed) + len(bound))
            feasible.append((att, usage))
            self._undo_all(search)
        key = pg.topology_key
        if not feasible:
            return _Result(
                None,
                f"0/{len(attempts)} placements ({key} domains with room) are available, first placement status: "
                f"{first}; nothing is bound",
            )
        usages = [u for _, u in feasible]
        i = best_placement(usages)
        att, usage = feasible[i]
        why = await self._place_classes(search, classes, model, rooms, att.nodes, need)
        if why is not None:  # the same search on the same state: cannot happen, but never bind a partial group
            self._undo_all(search)
            return _Result(None, f"{key} {att.value}: {why}", retry=True)
        if gs is not None:
            scores = placement_scores(usages)
            others = ", ".join(f"{a.value}={sc}" for (a, _), sc in zip(feasible, scores, strict=True) if a is not att)
            gs.topology = (
                f"placed in {key}={att.value}, the best of {len(feasible)} feasible domain(s) by placement score "
                f"{scores[i]} (pods {usage.pods}, resources {usage.fit}"
                + (f", devices {usage.devices}" if usage.devices is not None else "")
                + ")"
                + (f"; others: {others}" if others else "")
            )
        return _Result(list(search.placed))

    def _where(self, topo: PlacementGeneratePlugin, placed: list[_Placed], chosen: str) -> str:
        if chosen:
            return chosen
        snap = self.s.cache.snapshot()
        labels = [snap.node_map[pl.node].node.labels for pl in placed if pl.node in snap.node_map]
        return topo.describe_placement(labels, len(placed))

    # --- classes and their room -------------------------------------------------------------------

    async def _classes(self, search: _Search, members: list[Pod]) -> tuple[list[MemberClass], dict[str, str]]:
        """Members grouped into classes, largest demand first. Members are grouped by what they ask for (their
        spec apart from per-pod identity, and the state and spec of each of their claims), so only one
        representative per class goes through PreFilter here; every member still goes through PreFilter and
        Filter when it is placed, which verifies that it is like its class. A member with an unallocated claim that
        another member also uses is a class of its own."""
        fw = search.fw
        snap = self.s.cache.snapshot()
        ledger = snap.ledger
        reasons: dict[str, str] = {}
        rows: list[tuple[Pod, Hashable, list[str]]] = []
        uses: Counter[str] = Counter()
        for i, m in enumerate(members):
            if i % SCAN_CHUNK == 0:
                await self._tick()
            claims: list[Hashable] = []
            uids: list[str] = []
            for pc in m.claims:
                name = pc.claim_name or m.claim_statuses.get(pc.name)
                claim = snap.claims.get(f"{m.namespace}/{name}") if name else None
                if claim is None:
                    claims.append(("missing", pc.name, pc.name in m.claim_statuses))
                    continue
                alloc = claim.allocation
                uid = claim.meta.uid
                pending = ledger.is_pending(uid)
                claims.append(
                    (
                        claim.spec.fingerprint,
                        repr(alloc.node_selector) if alloc is not None else None,
                        alloc is not None and any(r.uid == m.uid for r in claim.reserved_for),
                        claim.meta.deleting,
                        pending,
                    )
                )
                if alloc is None:
                    uids.append(uid)
            uses.update(uids)
            rows.append((m, (structural_key(m), tuple(claims)), uids))
        classes: dict[Hashable, MemberClass] = {}
        for m, key, uids in rows:
            shared = frozenset(u for u in uids if uses[u] > 1)
            if shared:
                key = ("shares-a-claim", m.key)  # interacts with another member through the claim
            c = classes.get(key)
            if c is None:
                templates = sorted({pc.template_name for pc in m.claims if pc.template_name})
                label = f"claim template{'s' if len(templates) > 1 else ''} {', '.join(templates)}" if templates else ""
                if not templates and any(pc.claim_name for pc in m.claims):
                    label = "claims like " + ", ".join(sorted(pc.claim_name for pc in m.claims if pc.claim_name))
                # a shared claim is allocated once for the group: the bounds count its devices once (shared)
                c = classes[key] = MemberClass(key, [], requests=m.requests, label=label, shared=shared)
            c.members.append(m)
        out: list[MemberClass] = []
        for c in classes.values():
            await self._tick()
            state, st = self._state(fw, c.rep, {})
            if not st.is_success:
                for m in c.members:
                    reasons[m.key] = st.message
                continue
            c.allowed = state.read("gang/node-names")
            c.demands, c.devices = device_demands(state, fw.filter)
            for d in c.demands:  # a shared claim's devices are taken once, however many of these members a node takes
                d.shared = sum(n for u, (_, n) in d.claims.items() if u in c.shared)
            c.state = state
            c.target = len(c.members)
            out.append(c)
        out.sort(
            key=lambda c: (-c.devices, -c.requests.get(CPU, 0), -c.requests.get(MEMORY, 0), -c.target, c.rep.key)
        )
        return out, reasons

    async def _rough(self, search: _Search, c: MemberClass, model: CapacityModel) -> ClassRoom:
        """The class's room from the capacity bounds alone (no Filter): an upper bound on every node the class's
        PreFilter allows, cheap enough to reject an impossible group before anything else."""
        room = ClassRoom()
        state = c.state
        if state is None:
            return room
        snap = state.snapshot
        resources = model.checked_resources(c.requests)
        for i, info in enumerate(snap.nodes):
            if i % SCAN_CHUNK == 0:
                await self._tick()
            if c.allowed is not None and info.name not in c.allowed:
                continue
            dev_cap, free = model.device_room(snap, info, c.demands)
            fits = min(dev_cap, model.resource_cap(c.requests, info))
            cap = min(fits, c.target)
            if cap <= 0:
                continue
            room.caps[info.name] = cap
            room.fits[info.name] = fits
            for k, v in free.items():
                room.free.setdefault(k, {})[info.name] = v
            room.resources[info.name] = model.free_resources(info, resources)
        return room

    async def _scan(
        self,
        search: _Search,
        c: MemberClass,
        model: CapacityModel,
        scope: frozenset[str] | None,
        fit_errors: dict[Hashable, str] | None = None,
    ) -> ClassRoom:
        """The class's room on every node in scope, on the current state (its bounds and the node scores)."""
        fw = search.fw
        rep = c.rep
        state, st = self._state(fw, rep, search.pending)
        room = ClassRoom()
        if not st.is_success:
            if fit_errors is not None:
                fit_errors[c.key] = st.message
            return room
        allowed = state.read("gang/node-names")
        snap = state.snapshot
        nodes = [
            n
            for n in snap.nodes
            if (allowed is None or n.name in allowed) and (scope is None or n.name in scope)
        ]
        room.nodes_in_scope = len(nodes)
        sig = fw.signature(state, rep)
        resources = model.checked_resources(c.requests)
        joint_plugin = fw.joint_allocator()
        error = ""
        for i, info in enumerate(nodes):
            if i % SCAN_CHUNK == 0:
                await self._tick()
            fst = fw.filter_node(state, rep, info, sig)  # with the nominated pods of >= priority, if any
            joint = False
            if not fst.is_success:
                if fst.code == Code.ERROR:
                    error = fst.message
                    room.rejected[info.name] = fst
                    continue
                others = search.on_node.get(info.name)
                if (
                    others
                    and len(others) <= JOINT_MAX_MEMBERS
                    and joint_plugin is not None
                    and joint_plugin.joint_resolvable(fst)
                ):
                    joint = True  # may fit when the members already there are re-allocated together with it
                else:
                    room.rejected[info.name] = fst
                    continue
            dev_cap, free = model.device_room(snap, info, c.demands)
            fits = min(dev_cap, model.resource_cap(c.requests, info))
            cap = min(fits, c.target)
            if cap <= 0:
                if joint:
                    continue
                cap = fits = 1  # Filter says one fits: the bound is not exact here, the allocation decides
            room.caps[info.name] = cap
            room.fits[info.name] = fits
            for k, v in free.items():
                room.free.setdefault(k, {})[info.name] = v
            room.resources[info.name] = model.free_resources(info, resources)
            if joint:
                room.joint.add(info.name)
        room.state, room.sig = state, sig
        if not room.caps and fit_errors is not None:
            if error:
                fit_errors[c.key] = error
            else:
                from scheduler.loop.scheduler import fit_error

                own = getattr(fw, "own_rejections", None)
                statuses = own(state, rep, room.rejected, snap.node_map) if callable(own) else room.rejected
                fit_errors[c.key] = fit_error(len(nodes), statuses)
        return room

    async def _score(self, search: _Search, c: MemberClass, room: ClassRoom) -> None:
        """The framework's node scores for the class (its representative) on the nodes of its room: the placement
        rank that breaks ties between nodes of equal room (computed for the nodes in scope only)."""
        if room.scored or room.state is None:
            return
        room.scored = True
        snap = room.state.snapshot
        nodes = [snap.node_map[n] for n in room.caps if n not in room.joint and n in snap.node_map]
        if len(nodes) < 2:
            return
        await self._tick()
        fw = search.fw
        if fw.run_pre_score(room.state, c.rep, nodes).is_success:
            for ns in fw.run_score(room.state, c.rep, nodes, room.sig):
                room.scores[ns.name] = float(ns.score)

    # --- placing classes --------------------------------------------------------------------------

    def _packings(
        self,
        search: _Search,
        c: MemberClass,
        room: ClassRoom,
        later: Sequence[MemberClass],
        rooms: dict[Hashable, ClassRoom],
        slack: int,
    ) -> tuple[list[list[tuple[str, int]] | None], str]:
        """Alternative placements of the class, best first (see the module docstring)."""
        if c.target == 1:
            return self._member_candidates(search, c, room, slack)
        target = min(c.target, room.total)
        if c.target - target > slack:
            return [], (
                f"room for at most {room.total:,} of the {c.target:,} members of {c.label or 'one kind'} "
                "beside the members placed before them"
            )
        slots = [Slot(n, cap, room.scores.get(n, 0.0), search.order.get(n, 0)) for n, cap in room.caps.items()]
        out: list[list[tuple[str, int]] | None] = []
        seen: set[tuple[tuple[str, int], ...]] = set()

        def add(p: list[tuple[str, int]] | None) -> None:
            if p is None:
                return
            k = tuple(sorted(p))
            if k not in seen:
                seen.add(k)
                out.append(p)

        add(pack(slots, target, search.levels, search.labels, FEWEST))
        if later:
            # keep the nodes the later classes need most for them
            contested = Counter[str]()
            for lc in later:
                for n, cap in rooms[lc.key].caps.items():
                    contested[n] += cap
            scale = max(room.scores.values(), default=0.0) + 1.0
            calm = [Slot(s.node, s.cap, -contested[s.node] * scale + s.rank, s.order) for s in slots]
            add(pack(calm, target, search.levels, search.labels, FEWEST))
            add(pack(slots, target, search.levels, search.labels, FRAGMENTS))
        return out[:MAX_PACKINGS], ""

    def _member_candidates(
        self, search: _Search, c: MemberClass, room: ClassRoom, slack: int
    ) -> tuple[list[list[tuple[str, int]] | None], str]:
        """A class of one member: its best nodes by score plus ``group_score``, and the nodes of the members placed
        so far (a joint allocation there may make room)."""
        m = c.rep
        group_score = self.group_score
        if group_score is None:
            scorer = search.fw.group_member_scorer()
            group_score = scorer.group_score if scorer is not None else None
        used = [n for n, pls in search.on_node.items() if pls]
        snap_nodes = self.s.cache.snapshot().node_map

        def key(n: str) -> tuple[float, int]:
            bonus = 0.0
            info = snap_nodes.get(n)
            if group_score is not None and info is not None:
                bonus = float(group_score(m, info, used))
            return (-(room.scores.get(n, 0.0) + bonus), search.order.get(n, 0))

        ranked = sorted(room.caps, key=key)
        nodes = ranked[:MAX_CANDIDATES_PER_MEMBER] + [n for n in ranked[MAX_CANDIDATES_PER_MEMBER:] if n in used]
        out: list[list[tuple[str, int]] | None] = [[(n, 1)] for n in nodes]
        if slack > 0:
            out.append(None)  # this member may stay pending
        return out, "" if out else f"{m.key}: no node can take it beside the members placed before it"

    async def _place_classes(
        self,
        search: _Search,
        classes: list[MemberClass],
        model: CapacityModel,
        rooms: dict[Hashable, ClassRoom],
        scope: frozenset[str] | None,
        need: int,
    ) -> str | None:
        """Place every class inside ``scope`` (None = anywhere), backtracking across classes. Returns None when
        placed (``search.placed``), else why not. Raises :class:`_Budget`."""
        slack = sum(c.target for c in classes) - need
        frames: list[_Frame] = []
        i = 0
        reason = "no placement found"
        while True:
            if i == len(classes):
                return None
            if len(frames) == i:
                c = classes[i]
                if i == 0 and not search.placed:
                    full = rooms[c.key]
                    room = full if scope is None else _restrict(full, scope)
                else:
                    room = await self._scan(search, c, model, scope)
                await self._score(search, c, room)
                packings, why = self._packings(search, c, room, classes[i + 1 :], rooms, slack)
                frames.append(_Frame(c, room, packings, reason=why))
            f = frames[i]
            if f.got is not None:
                for pl in reversed(f.got):
                    self._unplace(search, pl)
                f.got = None
                slack += f.short
            advanced = False
            while f.pos < len(f.packings):
                p = f.packings[f.pos]
                f.pos += 1
                if p is None:
                    if slack < 1:
                        continue
                    f.got, f.short = [], 1
                    slack -= 1
                    advanced = True
                    break
                search.steps += 1
                if f.pos > 1:  # another packing of a class because a later class did not fit: backtracking
                    search.backtracks += 1
                    if search.backtracks > SEARCH_BUDGET:
                        raise _Budget
                got, short, why = await self._materialize(search, f.cls, f.room, p, slack)
                if got is not None:
                    f.got, f.short = got, short
                    slack -= short
                    advanced = True
                    break
                f.reason = why or f.reason
                if f.cls.target > 1:
                    break  # allocated node by node with corrections: other packings cannot place more
            if advanced:
                i += 1
                continue
            reason = f.reason or reason
            frames.pop()
            i -= 1
            if i < 0:
                return reason

    async def _materialize(
        self, search: _Search, c: MemberClass, room: ClassRoom, packing: list[tuple[str, int]], slack: int
    ) -> tuple[list[_Placed] | None, int, str]:
        """Allocate the class's members as packed. A node that takes fewer than planned keeps what it took and the
        rest is packed again over the other nodes (for a class of several members). Returns (placed, members left
        pending, why not)."""
        target = sum(k for _, k in packing)
        correct = c.target > 1
        got: list[_Placed] = []
        on: Counter[str] = Counter()
        failed_at: dict[str, int] = {}
        fails: Counter[str] = Counter()
        queue = deque(packing)
        members = c.members
        while len(got) < target:
            if not queue:
                if not correct:
                    break
                avail = [
                    Slot(n, cap - on[n], room.scores.get(n, 0.0), search.order.get(n, 0))
                    for n, cap in room.caps.items()
                    if cap - on[n] > 0 and failed_at.get(n, -1) < len(got) and fails[n] <= 3
                ]
                left = target - len(got)
                more = pack(avail, min(left, sum(s.cap for s in avail)), search.levels, search.labels, FEWEST)
                if not more:
                    break
                queue.extend(more)
            node, k = queue.popleft()
            for _ in range(k):
                if len(got) >= len(members):
                    break
                pl = self._place(search, members[len(got)], node)
                if pl is None:
                    failed_at[node] = len(got)
                    fails[node] += 1
                    search.failures += 1
                    self.stats["corrections"] += 1
                    if search.failures > search.failure_budget:
                        for x in reversed(got):
                            self._unplace(search, x)
                        raise _Budget
                    break
                got.append(pl)
                on[node] += 1
                await self._tick()
        short = c.target - len(got)
        if short > slack:
            for pl in reversed(got):
                self._unplace(search, pl)
            what = c.label or "one kind"
            if c.target == 1:
                return None, 0, f"{c.rep.key}: does not fit on {packing[0][0]} beside the members placed before it"
            return None, 0, (
                f"{len(got):,} of the {c.target:,} members of {what} could be allocated "
                f"{'on the nodes in scope' if room.nodes_in_scope else ''} (node by node, beside the members placed "
                "before them)"
            )
        return got, short, ""

    # --- one member -------------------------------------------------------------------------------

    def _state(
        self, fw: Framework, m: Pod, pending_claims: dict[str, AllocatedDevices]
    ) -> tuple[CycleState, Status]:
        state = CycleState(self.s.cache.snapshot())
        state.write(GROUP_PENDING_KEY, pending_claims)  # read by the JointAllocation plugin's PreFilter only
        pre, st = fw.run_pre_filter(state, m)
        if pre is not None and pre.node_names is not None:
            state.write("gang/node-names", pre.node_names)
        return state, st

    def _place(self, search: _Search, m: Pod, node: str) -> _Placed | None:
        fw = search.fw
        pending_claims = search.pending
        s = self.s
        state, st = self._state(fw, m, pending_claims)
        if not st.is_success:
            return None
        allowed = state.read("gang/node-names")
        if allowed is not None and node not in allowed:
            return None
        info = state.snapshot.node_map.get(node)
        if info is None:
            return None
        joint = fw.joint_allocator()
        fst = fw.filter_node(state, m, info, None)  # nominated pods of >= priority hold their room
        joint_with: list[tuple[_Placed, Sequence[AllocatedDevices]]] = []
        if not fst.is_success:
            if joint is None or not joint.joint_resolvable(fst):
                return None
            others = [pl for pl in search.on_node.get(node, ()) if pl.claim_uids]
            if not others or len(others) > JOINT_MAX_MEMBERS:
                return None
            # re-allocate the devices of the members already on this node together with this one
            self.stats["joint_allocations"] += 1
            ledger = state.snapshot.ledger
            for pl in others:
                prev = joint.member_allocation(pl.state, node)
                joint_with.append((pl, list(prev)))
                for uid in pl.claim_uids:
                    ledger.unreserve(uid)
            got = joint.allocate_jointly([*(pl.state for pl in others), state], info)
            if got is None:
                self._restore(others, joint_with, node, joint, pending_claims)
                return None
            for pl, allocs in zip(others, got[:-1], strict=True):
                self._reserve_claims(joint, pl.state, node, allocs, pending_claims, ledger)
        s.cache.assume_pod(m, node)
        rst = fw.run_reserve(state, m, node)
        if not rst.is_success:
            s.cache.forget_pod(m)
            if joint_with and joint is not None:
                self._restore([pl for pl, _ in joint_with], joint_with, node, joint, pending_claims)
            return None
        uids: Sequence[str] = ()
        if joint is not None:
            uids, pairs = joint.member_claims(state, node)
            for uid, a in pairs:
                pending_claims[uid] = a
        pl = _Placed(m, node, state, list(uids), joint_with)
        search.placed.append(pl)
        search.on_node.setdefault(node, []).append(pl)
        return pl

    def _reserve_claims(
        self,
        joint: JointAllocationPlugin,
        state: CycleState,
        node: str,
        allocs: Sequence[AllocatedDevices],
        pending_claims: dict[str, AllocatedDevices],
        ledger: Any,
    ) -> None:
        for uid, a in joint.reserve_member_allocation(state, node, allocs, ledger):
            pending_claims[uid] = a

    def _restore(
        self,
        others: list[_Placed],
        joint_with: list[tuple[_Placed, Sequence[AllocatedDevices]]],
        node: str,
        joint: JointAllocationPlugin,
        pending_claims: dict[str, AllocatedDevices],
    ) -> None:
        ledger = self.s.cache.ledger
        for pl, prev in joint_with:
            if pl in others:
                self._reserve_claims(joint, pl.state, node, prev, pending_claims, ledger)

    def _unplace(self, search: _Search, pl: _Placed) -> None:
        fw = search.fw
        pending_claims = search.pending
        fw.run_unreserve(pl.state, pl.pod, pl.node)
        self.s.cache.forget_pod(pl.pod)
        for uid in pl.claim_uids:
            pending_claims.pop(uid, None)
        joint = fw.joint_allocator()
        if pl.joint_with and joint is not None:
            self._restore([o for o, _ in pl.joint_with], pl.joint_with, pl.node, joint, pending_claims)
        if search.placed and search.placed[-1] is pl:
            search.placed.pop()
        else:
            search.placed.remove(pl)
        on = search.on_node.get(pl.node)
        if on is not None:
            if on and on[-1] is pl:
                on.pop()
            elif pl in on:
                on.remove(pl)
            if not on:
                del search.on_node[pl.node]

    def _undo_all(self, search: _Search) -> None:
        for pl in reversed(list(search.placed)):
            self._unplace(search, pl)

    def _revalidate(self, search: _Search) -> str:
        """After the cluster changed while the search yielded: is the placement still valid? Empty when it is."""
        cache = self.s.cache
        snap = cache.snapshot()
        ledger = cache.ledger
        for pl in search.placed:
            cur = cache.pod(pl.pod.key)
            if cur is None or cur.uid != pl.pod.uid or cur.meta.deleting or cur.node_name or not cache.is_assumed(
                pl.pod.key
            ):
                return f"member {pl.pod.key} was deleted, replaced or bound meanwhile"
        for node, pls in search.on_node.items():
            info = snap.node_map.get(node)
            if info is None:
                return f"node {node} was deleted"
            before = pls[0].state.snapshot.node_map.get(node)
            if before is not None and before.node is not info.node:
                a, b = before.node, info.node
                if (a.unschedulable, a.taints, a.labels, a.allocatable) != (
                    b.unschedulable,
                    b.taints,
                    b.labels,
                    b.allocatable,
                ):
                    return f"node {node} changed"
            alloc = info.node.allocatable
            if info.pod_count > alloc.get("pods", 0):
                return f"node {node} has too many pods now"
            for r in {r for pl in pls for r, v in pl.pod.requests.items() if v > 0}:
                if r in alloc and info.requested.get(r, 0) > alloc[r]:
                    return f"node {node} has not enough {r} now"
        for uid, chosen in search.pending.items():
            for res in chosen.results:
                if res.admin_access or res.share_id:
                    continue
                users = ledger.exclusive_users((res.driver, res.pool, res.device))
                if users and users != {uid}:
                    return f"device {res.driver}/{res.pool}/{res.device} was allocated to another claim"
        return ""

    # --- commit -----------------------------------------------------------------------------------

    async def _commit(
        self, fw: Framework, placed: list[_Placed], infos: dict[str, QueuedPodInfo], gs: GroupState, key: str
    ) -> None:
        s = self.s
        api = s.api
        written: list[_Placed] = []
        failure: Status | None = None
        for pl in placed:
            st = await fw.run_pre_bind(pl.state, pl.pod, pl.node, api)
            if not st.is_success:
                failure = st
                written.append(pl)  # its PreBind may have written part of its claims: undo those too
                break
            written.append(pl)
            await self._tick()
        if failure is not None:
            for pl in reversed(written):
                await fw.run_rollback(pl.state, pl.pod, pl.node, api)
            for pl in reversed(placed):
                fw.run_unreserve(pl.state, pl.pod, pl.node)
                s.cache.forget_pod(pl.pod)
            msg = f"pod group {key}: writing claims failed, nothing was bound: {failure.message}"
            gs.message = msg
            for pl in placed:
                i = infos[pl.pod.key]
                self.last_results["error"] += 1
                s.queue.add_backoff(i)
                s.queue.done(pl.pod.key)
                await s.write_failure(pl.pod, "SchedulerError", msg)
            return
        bound = 0
        for pl in placed:
            st = await fw.run_bind(pl.state, pl.pod, pl.node, api)
            i = infos[pl.pod.key]
            await self._tick()
            if st.is_success:
                bound += 1
                self.last_results["scheduled"] += 1
                s.queue.done(pl.pod.key)
                s.attempts["scheduled"] += 1
                why = fw.binding_note(pl.state, pl.node)
                await api.event(
                    dict(pl.pod.raw),
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {pl.pod.key} to {pl.node} (pod group {key})" + (f": {why}" if why else ""),
                    "Binding",
                )
                continue
            # A Binding failed after the claims were written (pod deleted or replaced meanwhile).
            log.warning("gang member binding failed", pod=pl.pod.key, node=pl.node, error=st.message)
            await fw.run_rollback(pl.state, pl.pod, pl.node, api)
            fw.run_unreserve(pl.state, pl.pod, pl.node)
            s.cache.forget_pod(pl.pod)
            self.last_results["error"] += 1
            s.queue.add_backoff(i)
            s.queue.done(pl.pod.key)
        self.stats["placed"] += bound
        gs.scheduled_at = s.clock.now()
        gs.message = f"{bound} pods placed together"


def _restrict(room: ClassRoom, scope: frozenset[str]) -> ClassRoom:
    return ClassRoom(
        caps={n: v for n, v in room.caps.items() if n in scope},
        fits={n: v for n, v in room.fits.items() if n in scope},
        free={k: {n: v for n, v in d.items() if n in scope} for k, d in room.free.items()},
        resources={n: v for n, v in room.resources.items() if n in scope},
        scores={n: v for n, v in room.scores.items() if n in scope},
        joint={n for n in room.joint if n in scope},
        rejected={n: v for n, v in room.rejected.items() if n in scope},
        nodes_in_scope=len(scope),
        state=room.state,
        sig=room.sig,
        scored=False,
    )


# --- PodGroup status -------------------------------------------------------------------------------------

# scheduler-plugins' PodGroupPhase values (sigs.k8s.io/scheduler-plugins apis/scheduling/v1alpha1 types.go)
PHASE_PENDING = "Pending"
PHASE_SCHEDULING = "Scheduling"
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
PHASE_FINISHED = "Finished"
PHASE_UNKNOWN = "Unknown"
# The fields of scheduler-plugins' PodGroupStatus (its CRD, manifests/crds/scheduling.x-k8s.io_podgroups.yaml,
# prunes anything else): what the scheduler writes, so that both projects can share the CRD.
XK8S_STATUS_FIELDS = ("phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime")


def podgroup_reason(pg: PodGroup, members: Sequence[Pod], gs: GroupState | None) -> tuple[str, str, str]:
    """(phase, reason, message) of a scheduling.x-k8s.io/v1alpha1 PodGroup: the phase as scheduler-plugins'
    PodGroup controller defines it (``pkg/controllers/podgroup_controller.go``: Pending while fewer than
    ``minMember`` pods exist, Scheduling until ``minMember`` run, Running, Finished when ``minMember`` succeeded,
    Failed when failed pods count towards ``minMember``), plus dra-scheduler's own Failed cases (the
    ``scheduleTimeoutSeconds`` expired; members lost after the group was placed). The reason and message are
    what the phase-transition Event says."""
    live = [p for p in members if not p.meta.deleting]
    scheduled = sum(1 for p in live if p.node_name)
    running = sum(1 for p in live if p.phase == "Running")
    succeeded = sum(1 for p in live if p.phase == "Succeeded")
    failed = sum(1 for p in live if p.phase == "Failed")
    ever_scheduled = gs is not None and gs.scheduled_at is not None
    m = pg.min_member
    if succeeded >= m:
        return PHASE_FINISHED, "Finished", f"{succeeded} members succeeded"
    if failed and failed + running + succeeded >= m:
        return PHASE_FAILED, "MembersFailed", f"{failed} members failed"
    if ever_scheduled and scheduled < m:
        return PHASE_FAILED, "MembersLost", (
            f"only {scheduled} of minMember {m} members remain bound (members were deleted or failed)"
        )
    if running + succeeded >= m:
        return PHASE_RUNNING, "Running", f"{running} members running"
    if gs is not None and gs.timed_out:
        return PHASE_FAILED, "Timeout", gs.message
    if len(live) < m:
        msg = gs.message if gs is not None and gs.message else f"{len(live)} of minMember {m} members exist"
        return PHASE_PENDING, "WaitingForMembers", msg
    if scheduled >= m:
        msg = f"{scheduled} members bound"
        if gs is not None and gs.topology:
            msg = f"{msg}; topology: {gs.topology}"
        return PHASE_SCHEDULING, "Scheduled", msg
    if gs is not None and gs.attempts:
        return PHASE_SCHEDULING, "Unschedulable", gs.message
    return PHASE_SCHEDULING, "Scheduling", f"{len(live)} members waiting to be scheduled"


def podgroup_status(pg: PodGroup, members: Sequence[Pod], gs: GroupState | None) -> dict[str, Any]:
    """The status this scheduler reports for a PodGroup.

    * ``scheduling.x-k8s.io/v1alpha1``: the fields of scheduler-plugins' PodGroupStatus only (``XK8S_STATUS_FIELDS``:
      phase, occupiedBy, running, succeeded, failed, scheduleStartTime); why a group waits is in its members'
      ``PodScheduled`` conditions and in the Events of each phase transition.
    * ``scheduling.k8s.io/v1beta1``: ``conditions`` (``PodGroupInitiallyScheduled``, ``DisruptionTarget``); the
      ``resourceClaimStatuses`` kube-controller-manager writes are left alone (a merge patch does not touch them).
    """
    if pg.is_upstream:
        if gs is None:
            return {}
        placed, reason, message = gs.condition if gs.condition is not None else (None, "", "")
        conds, _ = podgroup_conditions(
            pg, placed, reason, message, gs.disruption, gs.disruption_time or gs.started or pg.meta.creation_timestamp
        )
        return {"conditions": conds} if conds else {}
    live = [p for p in members if not p.meta.deleting]
    phase, _, _ = podgroup_reason(pg, members, gs)
    status: dict[str, Any] = {
        "phase": phase,
        "running": sum(1 for p in live if p.phase == "Running"),
        "succeeded": sum(1 for p in live if p.phase == "Succeeded"),
        "failed": sum(1 for p in live if p.phase == "Failed"),
    }
    if len(live) >= pg.min_member:
        # scheduler-plugins' fillOccupiedObj: the owners of a member, "<namespace>/<owner name>", sorted
        owned = next((p for p in sorted(live, key=lambda p: p.key) if p.meta.owners), None)
        if owned is not None:
            status["occupiedBy"] = ",".join(sorted(f"{owned.namespace}/{o.name}" for o in owned.meta.owners))
    if gs is not None and gs.started:
        status["scheduleStartTime"] = gs.started
    return status
