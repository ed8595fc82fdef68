"""Member classes of a gang and quick capacity bounds (used by :mod:`scheduler.gang`).

A *class* is a set of members that ask for the same thing: an equal pod spec apart from per-pod identity
(name-derived hostname, index labels of Jobs/StatefulSets/JobSets) and claims of equal spec and state (allocated
where, reserved, pending, being deleted) — so one representative per class goes through PreFilter for the
bounds, and every member is still verified by PreFilter and Filter when it is placed. A member with an
unallocated claim that another member also uses is a class of its own (the claim is allocated once, for the
first of them, and pins the others to its node).

For a class and a node this module computes an *upper bound* on how many members fit there together:

* NodeResourcesFit: free cpu / memory / ephemeral-storage / scalar resources divided by the member's
  request, free pod slots;
* DynamicResources: for each ``ExactCount`` request (grouped by device class and selectors) the node's free
  devices that match the class and the request's selectors divided by the devices one member takes; a
  ``firstAvailable`` request: the free devices any of its alternatives matches divided by the smallest
  alternative's count; an ``All`` request fits once. Devices
  that can be shared (``allowMultipleAllocations``) and admin-access requests are not bounded.

The gang scheduler verifies every count by allocating the members (so the bound only has to be an upper
bound, exact in the common case), and sums the bounds over all nodes and all members for the quick
rejection of a group that cannot fit, with a message that says what is short ("not enough devices of class
gpu.nvidia.com: 1,025 needed, 1,024 free ...").
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plugins.dra.allocator import AllocationError, Allocator, Pool, _Req
from plugins.dra.extended import should_delegate
from plugins.dra.plugin import STATE_KEY as DRA_STATE_KEY
from plugins.dra.plugin import DynamicResources
from plugins.noderesources.fit import NodeResourcesFit, is_extended_resource, is_scalar_resource
from scheduler.cache import NodeInfo, Snapshot
from scheduler.framework.interface import CycleState
from scheduler.ledger import DeviceID
from scheduler.model import ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT, CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Pod

UNBOUNDED = 1 << 30

# Labels and spec fields that differ between otherwise equal members of one workload (indexed Jobs,
# StatefulSets, JobSets) and that no placement decision of this scheduler depends on beyond the member itself.
_IDENTITY_LABELS = frozenset(
    {
        "batch.kubernetes.io/job-completion-index",
        "apps.kubernetes.io/pod-index",
        "statefulset.kubernetes.io/pod-name",
        "jobset.sigs.k8s.io/job-index",
        "jobset.sigs.k8s.io/job-global-index",
        "leaderworkerset.sigs.k8s.io/worker-index",
        "pod-template-hash",
        "controller-revision-hash",
    }
)
_IDENTITY_SPEC = ("nodeName", "hostname", "subdomain")


def structural_key(pod: Pod) -> Hashable:
    """What a member asks for, from its spec and labels, without per-pod identity (the names of the existing
    claims it uses are left out: the caller compares those claims' spec and state)."""
    spec = {k: v for k, v in (pod.raw.get("spec") or {}).items() if k not in _IDENTITY_SPEC}
    refs = spec.get("resourceClaims")
    if isinstance(refs, list):
        # which existing claim a member uses is compared by the claim's spec and state (see GangScheduler._classes)
        spec["resourceClaims"] = [
            {k: v for k, v in r.items() if k != "resourceClaimName"} if isinstance(r, dict) else r for r in refs
        ]
    labels = {k: v for k, v in pod.meta.labels.items() if k not in _IDENTITY_LABELS}
    return (pod.namespace, pod.scheduler_name, json.dumps([spec, labels], sort_keys=True, default=str))


@dataclass(slots=True)
class DeviceDemand:
    """What one member takes from one group of devices on a node."""

    key: Hashable  # (device class, selectors) of ExactCount requests; unique for the other modes
    device_class: str
    per_member: int  # devices one member takes (ExactCount); 1 for All and firstAvailable
    mode: str  # "exact" | "all" | "first"
    probes: list[tuple[Any, Any, int]]  # (ClaimInput, RequestSpec, devices) to count matching free devices
    what: str  # "request gpu: needs 1 device(s)" for messages

    @property
    def needs(self) -> str:
        """'2 device(s) of class gpu.nvidia.com (request gpu)'"""
        names = ", ".join(dict.fromkeys(p[1].name.split("/", 1)[0] for p in self.probes))
        if self.mode == "all":
            return f"all matching devices of class {self.device_class} (request {names})"
        if self.mode == "first":
            return f"one of the alternatives of request {names}"
        plural = "s" if "," in names else ""
        return f"{self.per_member} device(s) of class {self.device_class} (request{plural} {names})"


@dataclass(slots=True)
class MemberClass:
    key: Hashable
    members: list[Pod]
    allowed: frozenset[str] | None = None
    requests: Mapping[str, int] = field(default_factory=dict)
    demands: list[DeviceDemand] = field(default_factory=list)
    devices: int = 0  # devices one member takes (ExactCount requests), for ordering and domain sizes
    label: str = ""  # for messages: the claim templates / claims of its members
    target: int = 0  # members of this class to place
    state: Any = None  # the representative's cycle state after PreFilter (at class formation)

    @property
    def rep(self) -> Pod:
        return self.members[0]

    def describe(self) -> str:
        n = len(self.members)
        return f"{n} member{'s' if n != 1 else ''}" + (f" ({self.label})" if self.label else "")


def device_demands(state: CycleState) -> tuple[list[DeviceDemand], int]:
    """The device demands of a member after DynamicResources' PreFilter (its unallocated claims)."""
    data = state.read(DRA_STATE_KEY)
    if data is None or getattr(data, "allocator", None) is None:
        return [], 0
    by_key: dict[Hashable, DeviceDemand] = {}
    out: list[DeviceDemand] = []
    total = 0
    for inp in data.inputs:
        for req in inp.spec.requests:
            if req.exactly is not None:
                s = req.exactly
                if s.admin_access:
                    continue
                if s.allocation_mode == ALLOCATION_MODE_EXACT:
                    key: Hashable = ("exact", s.device_class_name, tuple(s.selectors))
                    total += s.count
                    d = by_key.get(key)
                    if d is None:
                        d = by_key[key] = DeviceDemand(key, s.device_class_name, 0, "exact", [], "")
                        out.append(d)
                    d.per_member += s.count
                    d.probes.append((inp, s, s.count))
                    d.what = (
                        f"request {s.name}: needs {s.count} device(s)"
                        if len(d.probes) == 1
                        else f"requests {', '.join(p[1].name for p in d.probes)}: need {d.per_member} device(s)"
                    )
                elif s.allocation_mode == ALLOCATION_MODE_ALL:
                    out.append(
                        DeviceDemand(
                            ("all", inp.uid, s.name), s.device_class_name, 1, "all", [(inp, s, 1)],
                            f"request {s.name}: needs all matching devices",
                        )
                    )
                continue
            subs = [s for s in req.first_available if not s.admin_access and s.allocation_mode == ALLOCATION_MODE_EXACT]
            if subs and len(subs) == len(req.first_available):
                out.append(
                    DeviceDemand(
                        ("first", inp.uid, req.name), subs[0].device_class_name, 1, "first",
                        [(inp, s, s.count) for s in subs], f"request {req.name}: needs one of its subrequests",
                    )
                )
    return out, total


@dataclass(slots=True)
class MatchCache:
    """Per node: its devices matching a (device class, selectors), and whether any of its devices is shareable;
    valid while the node's pool list (DynamicResources rebuilds it when slices change) and the classes are the
    same."""

    matching: dict[tuple[str, Hashable], tuple[list[Pool], int, tuple[DeviceID, ...]]] = field(default_factory=dict)
    shareable: dict[str, tuple[list[Pool], bool]] = field(default_factory=dict)


class CapacityModel:
    """Per-node upper bounds for member classes, over one profile's plugins.

    ``matches`` caches, per (node, device class and selectors), the node's devices that match — valid while the
    node's pools (DynamicResources' per-node pool list, rebuilt when slices change) and the device classes are
    the same objects/generation; only which of them are free is looked up each time."""

    def __init__(self, instances: Mapping[str, Any], filters: Iterable[Any], matches: MatchCache | None = None) -> None:
        self.device_classes: Mapping[str, Any] = {}
        names = {getattr(p, "name", "") for p in filters}
        dra = instances.get(DynamicResources.name)
        fit = instances.get(NodeResourcesFit.name)
        self.dra: DynamicResources | None = (
            dra if isinstance(dra, DynamicResources) and DynamicResources.name in names else None
        )
        self.fit: NodeResourcesFit | None = (
            fit if isinstance(fit, NodeResourcesFit) and NodeResourcesFit.name in names else None
        )
        self._probe: tuple[int, Allocator] | None = None
        self.matches: MatchCache = matches if matches is not None else MatchCache()

    # --- node resources ------------------------------------------------------------------------------------

    def checked_resources(self, requests: Mapping[str, int]) -> list[str]:
        """The resources NodeResourcesFit checks for these requests."""
        if self.fit is None:
            return []
        args = self.fit.args
        out = [r for r in (CPU, MEMORY, EPHEMERAL_STORAGE) if requests.get(r, 0) > 0]
        for r in sorted(requests):
            if requests[r] <= 0 or not is_scalar_resource(r):
                continue
            if is_extended_resource(r) and (
                r in args.ignored_resources
                or (args.ignored_resource_groups and r.split("/", 1)[0] in args.ignored_resource_groups)
            ):
                continue
            out.append(r)
        return out

    def free_resources(self, info: NodeInfo, resources: Sequence[str]) -> dict[str, int]:
        alloc, used = info.node.allocatable, info.requested
        out = {r: max(0, alloc.get(r, 0) - used.get(r, 0)) for r in resources}
        if self.device_classes:
            for r in resources:
                # An extended resource the node does not serve but a DeviceClass maps (KEP-5004) comes from
                # DRA devices: no node-resource bound (the placement allocates the devices themselves).
                if should_delegate(r, info.node, self.device_classes):
                    out[r] = UNBOUNDED
        out[PODS] = max(0, alloc.get(PODS, 0) - info.pod_count)
        return out

    def resource_cap(self, requests: Mapping[str, int], info: NodeInfo) -> int:
        if self.fit is None:
            return UNBOUNDED
        res = self.checked_resources(requests)
        free = self.free_resources(info, res)
        cap = free[PODS]
        for r in res:
            cap = min(cap, free[r] // requests[r])
        return cap

    # --- devices -----------------------------------------------------------------------------------------------

    def _allocator(self, snap: Snapshot) -> Allocator:
        assert self.dra is not None
        if self._probe is None or self._probe[0] != id(snap.ledger):
            dra = self.dra
            self._probe = (
                id(snap.ledger),
                Allocator(dra.features, snap.ledger, snap.classes, dra.selectors, dra.device_inputs),
            )
        probe = self._probe[1]
        probe.classes = snap.classes
        return probe

    def device_room(
        self, snap: Snapshot, info: NodeInfo, demands: Sequence[DeviceDemand]
    ) -> tuple[int, dict[Hashable, int]]:
        """(upper bound on members by devices, free matching devices per ExactCount demand key)."""
        if self.dra is None or not demands:
            return UNBOUNDED, {}
        pools = self.dra._node_pools(snap, info)
        shared = self.matches.shareable.get(info.name)
        if shared is None or shared[0] is not pools:
            shared = (pools, any(c.device.allow_multiple_allocations for p in pools for c in p.candidates))
            self.matches.shareable[info.name] = shared
        if shared[1]:
            return UNBOUNDED, {}  # shareable devices: one device may serve many members
        ledger = snap.ledger
        cap = UNBOUNDED
        free_by_key: dict[Hashable, int] = {}
        for d in demands:
            if d.mode == "exact":
                inp, spec, _ = d.probes[0]
                free = 0
                for dev in self._matching(snap, info, pools, inp, spec):
                    if not ledger.in_use(dev):
                        free += 1
                free_by_key[d.key] = free
                cap = min(cap, free // d.per_member if d.per_member else UNBOUNDED)
            elif d.mode == "all":
                cap = min(cap, 1)
            else:
                # each member takes at least the smallest subrequest's count, from the union of their devices
                union: set[DeviceID] = set()
                for inp, spec, _ in d.probes:
                    union.update(self._matching(snap, info, pools, inp, spec))
                free = sum(1 for dev in union if not ledger.in_use(dev))
                cap = min(cap, free // max(1, min(count for _, _, count in d.probes)))
        return cap, free_by_key

    def _matching(self, snap: Snapshot, info: NodeInfo, pools: list[Pool], inp: Any, spec: Any) -> tuple[DeviceID, ...]:
        """The node's devices matching the request's device class and selectors (as the allocator selects them)."""
        key = (info.name, (spec.device_class_name, tuple(spec.selectors)))
        hit = self.matches.matching.get(key)
        if hit is not None and hit[0] is pools and hit[1] == snap.class_generation:
            return hit[2]
        probe = self._allocator(snap)
        out: list[DeviceID] = []
        cls = snap.classes.get(spec.device_class_name)
        if cls is not None:
            rd = _Req(spec, cls, 0, [], bool(spec.admin_access), dict(spec.capacity))
            for p in pools:
                if p.incomplete or p.invalid:
                    continue
                for c in p.candidates:
                    try:
                        ok = probe._selectable(inp, rd, c, info.node)
                    except AllocationError:
                        ok = False
                    if ok:
                        out.append(c.id)
        if len(self.matches.matching) > 200_000:
            self.matches.matching.clear()
            self.matches.shareable.clear()
        got = tuple(out)
        self.matches.matching[key] = (pools, snap.class_generation, got)
        return got


# --- messages -------------------------------------------------------------------------------------------------


def fmt_quantity(resource: str, v: int) -> str:
    if resource == CPU:
        return f"{v / 1000:,.3f}".rstrip("0").rstrip(".") + " cpu"
    if resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith("hugepages-"):
        return f"{v / 2**30:,.1f}Gi {resource}"
    if resource == PODS:
        return f"{v:,} pod slot{'s' if v != 1 else ''}"
    return f"{v:,} {resource}"


def nodes_phrase(n: int) -> str:
    return f"on the {n:,} node{'s' if n != 1 else ''} the members can use"


@dataclass(slots=True)
class ClassRoom:
    """A class's room on the nodes in scope (upper bounds), from one scan of the current state."""

    caps: dict[str, int] = field(default_factory=dict)  # node -> members that may fit (> 0 only)
    free: dict[Hashable, dict[str, int]] = field(default_factory=dict)  # demand key -> node -> free devices
    resources: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> free checked resources, pods
    scores: dict[str, float] = field(default_factory=dict)  # node -> framework score (placement rank)
    joint: set[str] = field(default_factory=set)  # nodes that may fit only with a joint allocation
    rejected: dict[str, Any] = field(default_factory=dict)  # node -> Filter status (for fit errors)
    nodes_in_scope: int = 0
    state: Any = None  # the representative member's cycle state (after PreFilter) the room was computed in
    sig: Hashable | None = None
    scored: bool = False

    @property
    def total(self) -> int:
        return sum(self.caps.values())


def required_per_class(classes: Sequence[MemberClass], need: int) -> dict[Hashable, int]:
    """Members each class must place at least so the group reaches ``need`` whatever the others place."""
    total = sum(c.target for c in classes)
    slack = max(0, total - need)
    return {c.key: max(0, c.target - slack) for c in classes}


def shortage(
    classes: Sequence[MemberClass],
    rooms: Mapping[Hashable, ClassRoom],
    need: int,
    model: CapacityModel,
    fit_errors: Mapping[Hashable, str],
) -> str:
    """Why the group cannot fit, from the capacity bounds alone; empty when the bounds allow it.

    Every check is a necessary condition (upper bounds summed over the nodes the members can use), so a
    group that fits is never rejected here."""
    req = required_per_class(classes, need)
    # 1. each class on its own
    for c in classes:
        r = req[c.key]
        room = rooms[c.key]
        if r <= 0 or room.total >= r:
            continue
        if not room.caps:
            return f"{c.describe()}: {fit_errors.get(c.key) or 'no node can take one of them'}"
        nodes = len(room.caps)
        for d in c.demands:
            if d.mode != "exact":
                continue
            free = sum(room.free.get(d.key, {}).get(n, 0) for n in room.caps)
            if free < r * d.per_member:
                return (
                    f"not enough devices of class {d.device_class}: {r * d.per_member:,} needed, {free:,} free "
                    f"{nodes_phrase(nodes)} ({r:,} members{' of ' + c.label if c.label else ''}; {d.what} each)"
                )
        for res, amount in [*((x, c.requests[x]) for x in model.checked_resources(c.requests)), (PODS, 1)]:
            free = sum(room.resources.get(n, {}).get(res, 0) for n in room.caps)
            if free < r * amount:
                return (
                    f"not enough {res}: {fmt_quantity(res, r * amount)} needed, {fmt_quantity(res, free)} free "
                    f"{nodes_phrase(nodes)} ({r:,} members{' of ' + c.label if c.label else ''})"
                )
        what = " and ".join(d.needs for d in c.demands) or "its requests"
        return (
            f"room for at most {room.total:,} of the {r:,} members{' of ' + c.label if c.label else ''} "
            f"{nodes_phrase(nodes)}: each member needs {what} on one node, and the free capacity there comes in "
            "amounts too small"
        )
    # 2. classes together: devices of one kind, node resources, pod slots
    demand: dict[Hashable, list[tuple[MemberClass, DeviceDemand, int]]] = {}
    for c in classes:
        if req[c.key] <= 0:
            continue
        for d in c.demands:
            if d.mode == "exact":
                demand.setdefault(d.key, []).append((c, d, req[c.key]))
    for key, users in demand.items():
        if len(users) < 2:
            continue
        union: set[str] = set()
        for c, _, _ in users:
            union.update(rooms[c.key].caps)
        free = 0
        for n in union:
            free += max(rooms[c.key].free.get(key, {}).get(n, 0) for c, _, _ in users)
        needed = sum(r * d.per_member for _, d, r in users)
        if free < needed:
            parts = "; ".join(f"{r:,} members{' of ' + c.label if c.label else ''}: {d.what} each" for c, d, r in users)
            return (
                f"not enough devices of class {users[0][1].device_class}: {needed:,} needed, {free:,} free "
                f"{nodes_phrase(len(union))} ({parts})"
            )
    active = [c for c in classes if req[c.key] > 0]
    if len(active) >= 2:
        union = set()
        for c in active:
            union.update(rooms[c.key].caps)
        resources = sorted({r for c in active for r in model.checked_resources(c.requests)})
        for res in [*resources, PODS]:
            needed = sum(req[c.key] * (c.requests.get(res, 0) if res != PODS else 1) for c in active)
            free = 0
            for n in union:
                free += max(rooms[c.key].resources.get(n, {}).get(res, 0) for c in active)
            if free < needed:
                return (
                    f"not enough {res}: {fmt_quantity(res, needed)} needed, {fmt_quantity(res, free)} free "
                    f"{nodes_phrase(len(union))}"
                )
    # 3. the group as a whole (members beyond minMember may stay pending)
    reachable = sum(min(c.target, rooms[c.key].total) for c in classes)
    if reachable < need:
        return f"room for at most {reachable:,} of the {need:,} members still needed"
    return ""
