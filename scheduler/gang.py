"""Gang scheduling: the pending members of a PodGroup are placed together, all or nothing.

When a member of a group is popped and the group has no ``minMember`` members bound yet, every pending
member is taken out of the queue and a placement is searched for the whole set on the current state:
nodes, node resources and the device allocations of every member's claims. The search is depth-first
over members with backtracking across members (a member's choice is undone when a later member cannot
be placed); members placed on the same node have their claims allocated *jointly*, so the allocator can
backtrack across their devices (kubernetes#138765: devices chosen pod by pod without backtracking).

Only when at least ``minMember`` members are placed is anything committed: claims are written for all
members first, then the Bindings. Otherwise nothing stays reserved (no member holds resources while
waiting) and every member goes back to the queue with the group's reason. Members arriving after the
group reached ``minMember`` bound members are scheduled one by one.

The search takes a placement score (``group_score``) so topology can prefer whole placements inside one
rack or NVLink domain. When the profile runs GpuTopology, the group is first searched inside the smallest
topology domain (NVLink clique, rack, block/spine, zone: node labels listed in the plugin args) whose free
capacity covers it, tightest first, then in the next larger ones, then anywhere — unless the PodGroup (annotation
``dra-scheduler.io/topology-required``) or the plugin args require a level, in which case the group waits
until one domain of that level can host it. The PodGroup status says where it went and why.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from plugins.dra.allocator import AllocationError, ClaimAllocation
from plugins.dra.plugin import GROUP_PENDING_KEY, DynamicResources
from plugins.topology.plugin import GpuTopology, placement_note
from scheduler.cache import NodeInfo
from scheduler.framework.interface import Code, CycleState, QueuedPodInfo, Status
from scheduler.framework.runtime import Framework
from scheduler.model import Pod, PodGroup

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler

log = structlog.get_logger("dra_scheduler.gang")

GANG = "Coscheduling"  # the pseudo-plugin name recorded for gang rejections (matches every event)
MAX_CANDIDATES_PER_MEMBER = 4
MAX_DOMAIN_ATTEMPTS = 3  # topology domains searched before the unrestricted search
SEARCH_BUDGET = 400  # placement attempts per group cycle (then the group fails this cycle and retries later)

GroupScore = Callable[[Pod, NodeInfo, Sequence[str]], int]  # (member, candidate, nodes used so far) -> bonus


@dataclass(slots=True)
class GroupState:
    """What the scheduler knows about a group between cycles (for status and timeouts)."""

    first_attempt: float
    message: str = ""
    scheduled_at: float | None = None
    timed_out: bool = False
    attempts: int = 0
    topology: str = ""  # where the group was placed in the topology and why (GpuTopology), for the status


@dataclass(slots=True)
class _Placed:
    pod: Pod
    node: str
    state: CycleState
    claim_uids: list[str]
    joint_with: list[tuple[_Placed, list[ClaimAllocation]]] = field(default_factory=list)


class _Budget(Exception):
    pass


def group_key(pod: Pod) -> str | None:
    return f"{pod.namespace}/{pod.pod_group}" if pod.pod_group else None


class GangScheduler:
    def __init__(self, sched: Scheduler, group_score: GroupScore | None = None) -> None:
        self.s = sched
        self.groups: dict[str, GroupState] = {}
        self.group_score = group_score
        self.last_results: Counter[str] = Counter()  # attempt results of the last group cycle, per member
        self.stats = {"cycles": 0, "placed": 0, "failed": 0, "search_steps": 0, "domain_attempts": 0}
        self._domain: frozenset[str] | None = None  # nodes of the topology domain being searched

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
        cycle = s.queue.scheduling_cycle
        gs = self.groups.setdefault(key, GroupState(first_attempt=s.clock.now()))
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
        placed, reason = self._search_group(fw, placeable, need, pg, gs)
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
                f"pod group {key}: cannot place minMember {pg.min_member} pods together ({len(bound)} bound): {reason}"
            )
            self._fail(list(infos.values()), Status.unschedulable(self._timeout_note(pg, gs, msg)), cycle, gs)
            await s.flush_writes()
            return True
        # unplaced pending members (beyond minMember) go back to the queue individually
        placed_keys = {pl.pod.key for pl in placed}
        rest = [infos[k] for k in infos if k not in placed_keys]
        for r in rest:
            self.last_results["unschedulable"] += 1
            s.queue.add_unschedulable(r, {GANG}, cycle)
            s.queue.done(r.pod.key)
        await self._commit(fw, placed, infos, gs, key)
        return True

    def _timeout_note(self, pg: PodGroup, gs: GroupState, msg: str) -> str:
        timeout = pg.schedule_timeout_seconds
        if timeout is not None and self.s.clock.now() - gs.first_attempt > timeout:
            gs.timed_out = True
            return f"{msg} (scheduleTimeoutSeconds {timeout} expired)"
        return msg

    def _fail(self, infos: Sequence[QueuedPodInfo], status: Status, cycle: int, gs: GroupState) -> None:
        gs.message = status.message
        result = "error" if status.code == Code.ERROR else "unschedulable"
        for i in infos:
            self.last_results[result] += 1
            self.s.fail(i, i.pod, status, {GANG}, cycle)

    # --- search -----------------------------------------------------------------------------------

    @staticmethod
    def _topology(fw: Framework) -> GpuTopology | None:
        t = fw.instances.get(GpuTopology.name)
        return t if isinstance(t, GpuTopology) else None

    def _search_group(
        self, fw: Framework, members: list[Pod], need: int, pg: PodGroup | None, gs: GroupState | None
    ) -> tuple[list[_Placed] | None, str]:
        """``_search`` inside the smallest topology domain that can host the group, then larger ones."""
        topo = self._topology(fw)
        if gs is not None:
            gs.topology = ""
        if topo is None or not members:
            return self._search(fw, members, need)
        state, st = self._state(fw, members[0], {})
        if not st.is_success:
            return self._search(fw, members, need)
        allowed = state.read("gang/node-names")
        sig = fw.signature(state, members[0])
        feasible = [
            n
            for n in state.snapshot.nodes
            if (allowed is None or n.name in allowed) and fw.run_filter_memo(state, members[0], n, sig).is_success
        ]
        plan, problem = topo.domain_plan(state, pg, feasible, need)
        reason = plan.note or "no placement found"
        tried = 0
        for att in plan.attempts:
            if att.nodes is not None:
                if tried >= MAX_DOMAIN_ATTEMPTS:
                    continue
                tried += 1
            self.stats["domain_attempts"] += 1
            self._domain = att.nodes
            try:
                placed, reason = self._search(fw, members, need)
            finally:
                self._domain = None
            if placed is not None:
                if gs is not None:
                    gs.topology = self._where(topo, placed, att.describe(need) if att.nodes is not None else "")
                    if problem:
                        gs.topology += f" ({problem}; ignored)"
                return placed, ""
        if problem:
            reason = f"{reason} ({problem}; ignored)"
        return None, reason

    def _where(self, topo: GpuTopology, placed: list[_Placed], chosen: str) -> str:
        if chosen:
            return chosen
        snap = self.s.cache.snapshot()
        labels = [snap.node_map[pl.node].node.labels for pl in placed if pl.node in snap.node_map]
        for lv in reversed(topo.args.levels):
            values = {lab.get(lv.label, "") for lab in labels}
            if len(values) == 1 and "" not in values:
                return (
                    f"no single smaller domain had room for {len(placed)} members; placed in {lv.name} "
                    f"{next(iter(values))} ({lv.label})"
                )
        return f"no single topology domain had room for {len(placed)} members; placed across domains"

    def _search(self, fw: Framework, members: list[Pod], need: int) -> tuple[list[_Placed] | None, str]:
        placed: list[_Placed] = []
        pending_claims: dict[str, ClaimAllocation] = {}
        reasons: dict[str, str] = {}
        steps = 0
        n = len(members)

        order = {ni.name: idx for idx, ni in enumerate(self.s.cache.snapshot().nodes)}
        sigs: list[Any] = []  # signature of each placed member, to break symmetry between equal members

        def dfs(i: int) -> bool:
            nonlocal steps
            if i == n:
                return len(placed) >= need
            steps += 1
            if steps > SEARCH_BUDGET:
                raise _Budget
            m = members[i]
            cands, sig = self._candidates(fw, m, placed, pending_claims, reasons)
            if sig is not None and placed and sigs and sigs[-1] == sig:
                # equal members: assignments are sets, so only try nodes at or after the previous one's
                floor = order.get(placed[-1].node, 0)
                cands = [c for c in cands if order.get(c, 0) >= floor]
            for node in cands[:MAX_CANDIDATES_PER_MEMBER] + [
                c for c in cands[MAX_CANDIDATES_PER_MEMBER:] if c in {p.node for p in placed}
            ]:
                pl = self._place(fw, m, node, placed, pending_claims)
                if pl is None:
                    continue
                placed.append(pl)
                sigs.append(sig)
                if dfs(i + 1):
                    return True
                placed.pop()
                sigs.pop()
                self._unplace(fw, pl, pending_claims)
            if n - (i + 1) + len(placed) >= need:  # this member may stay pending
                return dfs(i + 1)
            return False

        try:
            ok = dfs(0)
        except _Budget:
            ok = False
            reasons.setdefault("search", f"search budget of {SEARCH_BUDGET} steps exhausted")
        self.stats["search_steps"] += steps
        if ok:
            return placed, ""
        for pl in reversed(placed):
            self._unplace(fw, pl, pending_claims)
        reason = "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items())[:3]) or "no placement found"
        return None, reason

    def _state(self, fw: Framework, m: Pod, pending_claims: dict[str, ClaimAllocation]) -> tuple[CycleState, Status]:
        state = CycleState(self.s.cache.snapshot())
        state.write(GROUP_PENDING_KEY, dict(pending_claims))
        pre, st = fw.run_pre_filter(state, m)
        if pre is not None and pre.node_names is not None:
            state.write("gang/node-names", pre.node_names)
        return state, st

    def _candidates(
        self,
        fw: Framework,
        m: Pod,
        placed: list[_Placed],
        pending_claims: dict[str, ClaimAllocation],
        reasons: dict[str, str],
    ) -> tuple[list[str], Any]:
        """Nodes to try for member ``m`` (best first, at most a few) and its signature."""
        state, st = self._state(fw, m, pending_claims)
        if not st.is_success:
            reasons[m.key] = st.message
            return [], None
        allowed = state.read("gang/node-names")
        domain = self._domain
        nodes = [
            n
            for n in state.snapshot.nodes
            if (allowed is None or n.name in allowed) and (domain is None or n.name in domain)
        ]
        sig = fw.signature(state, m)
        feasible: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        used = {pl.node for pl in placed}
        for n in nodes:
            fst = fw.run_filter_memo(state, m, n, sig)
            if fst.is_success:
                feasible.append(n)
            elif fst.code == Code.ERROR:
                reasons[m.key] = fst.message
                return [], sig
            else:
                statuses[n.name] = fst
        joint = [name for name, fst in statuses.items() if name in used and fst.plugin == DynamicResources.name]
        if not feasible:
            from scheduler.scheduler import fit_error

            reasons[m.key] = fit_error(len(nodes), statuses)
            if not joint:
                return [], sig
        order: list[str] = []
        if feasible:
            scores = fw.run_score(state, m, feasible, sig) if len(feasible) > 1 else None
            ranked = list(range(len(feasible)))
            used_nodes = [pl.node for pl in placed]

            group_score = self.group_score
            if group_score is None:
                topo = self._topology(fw)
                group_score = topo.group_score if topo is not None else None

            def key(i: int) -> tuple[int, int]:
                bonus = group_score(m, feasible[i], used_nodes) if group_score else 0
                return (-(scores[i].score if scores else 0) - bonus, i)

            ranked.sort(key=key)
            order = [feasible[i].name for i in ranked]
        # equal members are filtered by node order after this, so keep the full ranking and cut later
        return order + joint, sig

    def _place(
        self, fw: Framework, m: Pod, node: str, placed: list[_Placed], pending_claims: dict[str, ClaimAllocation]
    ) -> _Placed | None:
        s = self.s
        state, st = self._state(fw, m, pending_claims)
        if not st.is_success:
            return None
        info = state.snapshot.node_map.get(node)
        if info is None:
            return None
        dra = fw.instances.get(DynamicResources.name)
        fst = fw.run_filter(state, m, info)
        joint_with: list[tuple[_Placed, list[ClaimAllocation]]] = []
        if not fst.is_success:
            if fst.plugin != DynamicResources.name or not isinstance(dra, DynamicResources):
                return None
            others = [pl for pl in placed if pl.node == node and pl.claim_uids]
            if not others:
                return None
            # re-allocate the devices of the members already on this node together with this one
            ledger = state.snapshot.ledger
            for pl in others:
                prev = dra.allocation_for(pl.state, node)
                joint_with.append((pl, list(prev)))
                for uid in pl.claim_uids:
                    ledger.unreserve(uid)
            try:
                got = dra.joint_allocate([*(pl.state for pl in others), state], info)
            except AllocationError:
                got = None
            if got is None:
                self._restore(others, joint_with, node, dra, pending_claims)
                return None
            for pl, allocs in zip(others, got[:-1], strict=True):
                self._reserve_claims(dra, pl.state, node, allocs, pending_claims, ledger)
        s.cache.assume_pod(m, node)
        rst = fw.run_reserve(state, m, node)
        if not rst.is_success:
            s.cache.forget_pod(m)
            if joint_with and isinstance(dra, DynamicResources):
                self._restore([pl for pl, _ in joint_with], joint_with, node, dra, pending_claims)
            return None
        claims = dra.claims_to_allocate(state) if isinstance(dra, DynamicResources) else []
        if isinstance(dra, DynamicResources):
            for c, a in zip(claims, dra.allocation_for(state, node), strict=False):
                pending_claims[c.meta.uid] = a
        return _Placed(m, node, state, [c.meta.uid for c in claims], joint_with)

    def _reserve_claims(
        self,
        dra: DynamicResources,
        state: CycleState,
        node: str,
        allocs: list[ClaimAllocation],
        pending_claims: dict[str, ClaimAllocation],
        ledger: Any,
    ) -> None:
        for c, a in zip(dra.claims_to_allocate(state), allocs, strict=True):
            ledger.reserve(c.meta.uid, c.key, a.results)
            pending_claims[c.meta.uid] = a
        dra.set_allocation(state, node, allocs)

    def _restore(
        self,
        others: list[_Placed],
        joint_with: list[tuple[_Placed, list[ClaimAllocation]]],
        node: str,
        dra: DynamicResources,
        pending_claims: dict[str, ClaimAllocation],
    ) -> None:
        ledger = self.s.cache.ledger
        for pl, prev in joint_with:
            if pl in others:
                self._reserve_claims(dra, pl.state, node, prev, pending_claims, ledger)

    def _unplace(self, fw: Framework, pl: _Placed, pending_claims: dict[str, ClaimAllocation]) -> None:
        fw.run_unreserve(pl.state, pl.pod, pl.node)
        self.s.cache.forget_pod(pl.pod)
        for uid in pl.claim_uids:
            pending_claims.pop(uid, None)
        dra = fw.instances.get(DynamicResources.name)
        if pl.joint_with and isinstance(dra, DynamicResources):
            self._restore([o for o, _ in pl.joint_with], pl.joint_with, pl.node, dra, pending_claims)

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
                break
            written.append(pl)
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
            if st.is_success:
                bound += 1
                self.last_results["scheduled"] += 1
                s.queue.done(pl.pod.key)
                s.attempts["scheduled"] += 1
                why = placement_note(pl.state, pl.node)
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


# --- PodGroup status -------------------------------------------------------------------------------------

PHASE_PENDING = "Pending"
PHASE_SCHEDULING = "Scheduling"
PHASE_SCHEDULED = "Scheduled"
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
PHASE_FINISHED = "Finished"


def podgroup_status(pg: PodGroup, members: Sequence[Pod], gs: GroupState | None) -> dict[str, Any]:
    """The status this scheduler reports for a PodGroup (scheduling.x-k8s.io/v1alpha1 fields plus
    conditions): phase, counts of scheduled/running/succeeded/failed members, and a condition whose reason
    says what the group waits for."""
    live = [p for p in members if not p.meta.deleting]
    scheduled = sum(1 for p in live if p.node_name)
    running = sum(1 for p in live if p.phase == "Running")
    succeeded = sum(1 for p in live if p.phase == "Succeeded")
    failed = sum(1 for p in live if p.phase == "Failed")
    ever_scheduled = gs is not None and gs.scheduled_at is not None
    m = pg.min_member
    if succeeded >= m:
        phase, reason, msg = PHASE_FINISHED, "Finished", f"{succeeded} members succeeded"
    elif ever_scheduled and scheduled < m:
        phase, reason = PHASE_FAILED, "MembersLost"
        msg = f"only {scheduled} of minMember {m} members remain bound (members were deleted or failed)"
    elif running >= m:
        phase, reason, msg = PHASE_RUNNING, "Running", f"{running} members running"
    elif scheduled >= m:
        phase, reason, msg = PHASE_SCHEDULED, "Scheduled", f"{scheduled} members bound"
    elif gs is not None and gs.timed_out:
        phase, reason, msg = PHASE_FAILED, "Timeout", gs.message
    elif gs is not None and gs.attempts:
        phase, reason, msg = PHASE_SCHEDULING, "Unschedulable", gs.message
    else:
        phase, reason = PHASE_PENDING, "WaitingForMembers"
        msg = gs.message if gs is not None and gs.message else f"{len(live)} of minMember {m} members exist"
    ok = phase in (PHASE_SCHEDULED, PHASE_RUNNING, PHASE_FINISHED)
    if gs is not None and gs.topology and msg:
        msg = f"{msg}; topology: {gs.topology}"
    return {
        "phase": phase,
        "scheduled": scheduled,
        "running": running,
        "succeeded": succeeded,
        "failed": failed,
        "conditions": [
            {"type": "PodGroupScheduled", "status": "True" if ok else "False", "reason": reason, "message": msg}
        ],
    }
