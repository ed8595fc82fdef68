"""Searching a placement for a group: topology domains first (the smallest that can host the group), then the
whole cluster; the tree of a CompositePodGroup; restarts when the cluster changed under the search.

:class:`GroupSearcher` sits between the placer (:mod:`scheduler.gang.placement`, which it builds on) and the cycle
(:mod:`scheduler.gang.cycle`).
"""


from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence

import structlog

from scheduler.api.model import Pod, PodGroup
from scheduler.api.workload_api import (
    CompositePodGroup,
    children_of,
    leaves_of,
    min_groups,
)
from scheduler.framework.domains import Attempt, Level, Plan, plan
from scheduler.framework.interface import (
    PlacementGeneratePlugin,
)
from scheduler.framework.runtime import Framework
from scheduler.gang import state
from scheduler.gang.capacity import (
    CapacityModel,
    ClassRoom,
    MemberClass,
    shortage,
)
from scheduler.gang.placement import GroupPlacer
from scheduler.gang.state import (
    MAX_DOMAIN_ATTEMPTS,
    MAX_EVAL_DOMAINS,
    MAX_RESTARTS,
    GroupState,
    _Budget,
    _Leaf,
    _Placed,
    _Result,
    _Search,
)
from scheduler.gang.workload import DomainUsage, best_placement, domain_usage, placement_scores

log = structlog.get_logger("dra_scheduler.gang")


class GroupSearcher(GroupPlacer):
    """The search layer of the group cycle (see the module docstring)."""

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
                f"the search budget ({state.SEARCH_BUDGET} packings tried again after a later kind of member did not "
                f"fit) ended before a placement of the group's {len(classes)} kinds of members was found; the group is "
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
