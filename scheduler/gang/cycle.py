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
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

import structlog

from scheduler.api.clusterapi import ApiError, pod_writes
from scheduler.api.model import Pod, PodGroup
from scheduler.api.workload_api import (
    DISRUPTION_TARGET,
    REASON_PREEMPTION,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    CompositePodGroup,
    LayoutError,
    leaves_of,
    podgroup_conditions,
    root_of,
)
from scheduler.cache.cache import Cache
from scheduler.framework.interface import (
    Code,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    QueuedPodInfo,
    Status,
)
from scheduler.framework.nominator import OVERRIDE
from scheduler.framework.runtime import Framework
from scheduler.gang.capacity import (
    MatchCache,
)
from scheduler.gang.host import GroupHost
from scheduler.gang.search import GroupSearcher
from scheduler.gang.state import (
    GANG,
    GroupScore,
    GroupState,
    _Leaf,
    _Placed,
    _Search,
    group_key,
)

log = structlog.get_logger("dra_scheduler.gang")


class _ForkedScheduler:
    """The scheduler as a dry-run group search sees it: the real one, except for the cache (a private copy made
    by the PodGroupPostFilter plugin)."""

    def __init__(self, real: GroupHost, cache: Cache) -> None:
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
        g = GangScheduler(cast("GroupHost", _ForkedScheduler(self.gang.s, cache)), self.gang.group_score)
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


class GangScheduler(GroupSearcher):
    def __init__(self, sched: GroupHost, group_score: GroupScore | None = None) -> None:
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
