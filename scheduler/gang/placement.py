"""Placing the members of a group: member classes, their rough and exact room per node, packings, placing and
unplacing members on a search's copy of the state, the final revalidation and commit.

:class:`GroupPlacer` is the lowest layer of :class:`~scheduler.gang.cycle.GangScheduler` (placer < searcher <
cycle): it calls nothing of the layers above it. ``_tick`` yields to the event loop between slices of work.
"""


from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Hashable, Sequence
from typing import Any

import structlog

from scheduler.api.model import CPU, MEMORY, Pod
from scheduler.framework.helpers import fit_error
from scheduler.framework.interface import (
    GROUP_PENDING_KEY,
    AllocatedDevices,
    Code,
    CycleState,
    JointAllocationPlugin,
    QueuedPodInfo,
    Status,
)
from scheduler.framework.runtime import Framework
from scheduler.gang import state
from scheduler.gang.capacity import (
    CapacityModel,
    ClassRoom,
    MatchCache,
    MemberClass,
    device_demands,
    structural_key,
)
from scheduler.gang.host import GroupHost
from scheduler.gang.pack import FEWEST, FRAGMENTS, Slot, pack
from scheduler.gang.state import (
    JOINT_MAX_MEMBERS,
    MAX_CANDIDATES_PER_MEMBER,
    MAX_PACKINGS,
    SCAN_CHUNK,
    GroupScore,
    GroupState,
    _Budget,
    _Frame,
    _Placed,
    _restrict,
    _Search,
)

log = structlog.get_logger("dra_scheduler.gang")


class GroupPlacer:
    """The placement layer of the group cycle (see the module docstring); its state is set by
    :class:`~scheduler.gang.cycle.GangScheduler`'s constructor."""

    s: GroupHost
    groups: dict[str, GroupState]
    group_score: GroupScore | None
    last_results: Counter[str]
    stats: dict[str, int]
    _slice_start: float
    _dirty: bool
    _matches: MatchCache
    cycle_seconds: dict[str, float]
    search_seconds: dict[str, float]
    _status_tasks: set[asyncio.Task[None]]

    # --- yielding ---------------------------------------------------------------------------------

    def _fingerprint(self) -> tuple[int, tuple[int, ...]]:
        cache = self.s.cache
        return cache.ledger.revision, tuple(cache.generations.values())

    async def _tick(self, force: bool = False) -> None:
        """Yield to the event loop when this slice of work is used up; note whether the cluster changed."""
        now = time.perf_counter()
        spent = now - self._slice_start
        if not force and spent < state.SLICE_SECONDS:
            return
        self.stats["yields"] += 1
        self.stats["max_slice_ms"] = max(self.stats["max_slice_ms"], round(spent * 1000))
        before = self._fingerprint()
        await asyncio.sleep(0)
        if self._fingerprint() != before:
            self._dirty = True
        self._slice_start = time.perf_counter()

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
                    if search.backtracks > state.SEARCH_BUDGET:
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
