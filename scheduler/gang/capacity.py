"""Member classes of a gang and quick capacity bounds (used by :mod:`scheduler.gang.cycle`).

A *class* is a set of members that ask for the same thing: an equal pod spec apart from per-pod identity
(name-derived hostname, index labels of Jobs/StatefulSets/JobSets) and claims of equal spec and state (allocated
where, reserved, pending, being deleted) — so one representative per class goes through PreFilter for the
bounds, and every member is still verified by PreFilter and Filter when it is placed. A member with an
unallocated claim that another member also uses is a class of its own (the claim is allocated once, for the
first of them, and pins the others to its node). Such a claim (a PodGroup's claim, KEP-5729, or one ResourceClaim
named by several members) is one demand in every bound: allocated once and reserved for all its consumers
(``resource.k8s.io/v1`` ResourceClaim ``status.reservedFor``), its devices count once per group and per node
(:attr:`MemberClass.shared`, ``DeviceDemand.claims`` / ``shared``), not once per member.

For a class and a node, :class:`CapacityModel` computes an *upper bound* on how many members fit there together:
the minimum over what the profile's plugins contribute through the extension points of
:mod:`scheduler.framework.capacity` (ours; kube-scheduler 1.37.2 has no capacity pre-check for groups):

* :class:`~scheduler.framework.capacity.ResourceCapacityPlugin` (NodeResourcesFit): free cpu / memory /
  ephemeral-storage / scalar resources divided by the member's request, free pod slots;
* :class:`~scheduler.framework.capacity.DeviceCapacityPlugin` (DynamicResources): the node's free devices that
  match each of the member's device demands divided by the devices one member takes.

The gang scheduler verifies every count by placing the members (so the bound only has to be an upper bound,
exact in the common case), and sums the bounds over all nodes and all members for the quick rejection of a group
that cannot fit, with a message (:func:`shortage`) that says what is short ("not enough devices of class
gpu.nvidia.com: 1,025 needed, 1,024 free ...").
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Pod
from scheduler.cache.cache import NodeInfo, Snapshot
from scheduler.framework.capacity import (
    EXACT,
    UNBOUNDED,
    DeviceCapacityPlugin,
    DeviceDemand,
    ResourceCapacityPlugin,
)
from scheduler.framework.interface import CycleState

__all__ = [
    "UNBOUNDED",
    "CapacityModel",
    "ClassRoom",
    "DeviceDemand",
    "MatchCache",
    "MemberClass",
    "device_demands",
    "fmt_quantity",
    "nodes_phrase",
    "required_per_class",
    "shortage",
    "structural_key",
]

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
    # unallocated claims its members use together with members of other classes (claim ids, as in
    # DeviceDemand.claims): allocated once for the group, so counted once in the group's bounds
    shared: frozenset[str] = frozenset()

    @property
    def rep(self) -> Pod:
        return self.members[0]

    def describe(self) -> str:
        n = len(self.members)
        return f"{n} member{'s' if n != 1 else ''}" + (f" ({self.label})" if self.label else "")


def device_demands(state: CycleState, plugins: Iterable[object]) -> tuple[list[DeviceDemand], int]:
    """The device demands of a member after PreFilter: what each :class:`DeviceCapacityPlugin` of ``plugins`` (a
    profile's Filter plugins, ``Framework.filter``) says from its PreFilter state in ``state``, and the devices one
    member takes over the ExactCount demands."""
    found = [p for p in plugins if isinstance(p, DeviceCapacityPlugin)]
    out: list[DeviceDemand] = []
    total = 0
    for p in found:
        demands, devices = p.member_demands(state)
        for d in demands:
            d.plugin = p.name
        out += demands
        total += devices
    return out, total


@dataclass(slots=True)
class MatchCache:
    """What the capacity plugins keep across group cycles, by plugin name (each plugin's ``memo``; e.g.
    DynamicResources: which of a node's devices match a device class and selectors, while the node's devices and
    the classes are unchanged). The gang scheduler keeps one for all its group cycles."""

    memos: dict[str, dict[Hashable, Any]] = field(default_factory=dict)

    def memo(self, plugin: str) -> dict[Hashable, Any]:
        m = self.memos.get(plugin)
        if m is None:
            m = self.memos[plugin] = {}
        return m


class CapacityModel:
    """Per-node upper bounds for member classes, over one profile's plugins: the minimum over the contributions
    of its :class:`ResourceCapacityPlugin` and :class:`DeviceCapacityPlugin` instances that are enabled at Filter.

    ``matches`` holds the plugins' memos (kept by the caller across group cycles)."""

    def __init__(self, instances: Mapping[str, Any], filters: Iterable[Any], matches: MatchCache | None = None) -> None:
        # DeviceClasses, for resources devices serve instead of the node (set by the caller: the snapshot's)
        self.device_classes: Mapping[str, Any] = {}
        names = {getattr(p, "name", "") for p in filters}
        enabled = [p for p in instances.values() if getattr(p, "name", None) in names]
        self.resource_plugins: list[ResourceCapacityPlugin] = [
            p for p in enabled if isinstance(p, ResourceCapacityPlugin)
        ]
        self.device_plugins: dict[str, DeviceCapacityPlugin] = {
            p.name: p for p in enabled if isinstance(p, DeviceCapacityPlugin)
        }
        self.matches: MatchCache = matches if matches is not None else MatchCache()
        self._memos = {name: self.matches.memo(name) for name in self.device_plugins}
        self._one = next(iter(self.device_plugins.values())) if len(self.device_plugins) == 1 else None

    # --- node resources ------------------------------------------------------------------------------------

    def checked_resources(self, requests: Mapping[str, int]) -> list[str]:
        """The resources the plugins check for these requests."""
        plugins = self.resource_plugins
        if len(plugins) == 1:
            return plugins[0].checked_resources(requests)
        out: dict[str, None] = {}
        for p in plugins:
            out.update(dict.fromkeys(p.checked_resources(requests)))
        return list(out)

    def free_resources(self, info: NodeInfo, resources: Sequence[str]) -> dict[str, int]:
        """The free amount of each of ``resources`` on the node (the least any plugin checking it says), and the
        free pod slots (``pods``)."""
        plugins = self.resource_plugins
        if len(plugins) == 1:
            out = plugins[0].free_resources(info, resources, self.device_classes)
        else:
            out = {}
            for p in plugins:
                for r, v in p.free_resources(info, resources, self.device_classes).items():
                    out[r] = min(out.get(r, v), v)
        out[PODS] = max(0, info.node.allocatable.get(PODS, 0) - info.pod_count)
        return out

    def resource_cap(self, requests: Mapping[str, int], info: NodeInfo) -> int:
        """An upper bound on the members with ``requests`` that fit on the node by its resources."""
        plugins = self.resource_plugins
        if len(plugins) == 1:
            return plugins[0].resource_room(requests, info, self.device_classes)
        cap = UNBOUNDED
        for p in plugins:
            cap = min(cap, p.resource_room(requests, info, self.device_classes))
        return cap

    # --- devices -----------------------------------------------------------------------------------------------

    def device_room(
        self, snap: Snapshot, info: NodeInfo, demands: Sequence[DeviceDemand]
    ) -> tuple[int, dict[Hashable, int]]:
        """(upper bound on members by devices, free matching devices per ExactCount demand key)."""
        if not demands or not self.device_plugins:
            return UNBOUNDED, {}
        one = self._one
        if one is not None:  # the common case: one device plugin, which made every demand
            for d in demands:
                if d.plugin != one.name:
                    break
            else:
                return one.device_room(snap, info, demands, self._memos[one.name])
        by_plugin: dict[str, list[DeviceDemand]] = {}
        for d in demands:
            by_plugin.setdefault(d.plugin, []).append(d)
        cap = UNBOUNDED
        free: dict[Hashable, int] = {}
        for name, own in by_plugin.items():
            p = self.device_plugins.get(name)
            if p is None:
                continue  # made by a plugin not enabled at Filter: not bounded
            c, f = p.device_room(snap, info, own, self._memos[name])
            cap = min(cap, c)
            free.update(f)
        return cap, free


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
    fits: dict[str, int] = field(default_factory=dict)  # node -> members of its kind it may take (caps before the cut
    # at the class's member count: how much of the node one member takes, for mixes of classes)
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


def _device_need(users: Sequence[tuple[MemberClass, DeviceDemand, int]]) -> tuple[int, list[str]]:
    """The devices of one kind (one ExactCount demand key) the classes need together, ``users`` being (class, its
    demand, members it must place), and the parts of the message saying who needs them. A claim that members of
    several classes use is allocated once and reserved for all of them (``resource.k8s.io/v1`` ResourceClaim
    ``status.reservedFor``; a PodGroup's claim, KEP-5729): its devices are needed once, not once per member."""
    needed = 0
    own: dict[tuple[str, str], int] = {}  # (label, what each member needs) -> members
    shared: dict[str, tuple[str, int]] = {}  # claim id -> (name, devices)
    users_of: dict[str, int] = {}  # claim id -> members that use it
    for c, d, r in users:
        common = {u: v for u, v in d.claims.items() if u in c.shared}
        for u, v in common.items():
            shared.setdefault(u, v)
            users_of[u] = users_of.get(u, 0) + r
        each = d.per_member - sum(n for _, n in common.values())
        if each <= 0:
            continue
        needed += r * each
        what = d.what if not common else f"their own claims need {each:,} device(s)"
        label = f" of {c.label}" if c.label else ""
        own[(label, what)] = own.get((label, what), 0) + r
    parts = [f"{r:,} members{label}: {what} each" for (label, what), r in own.items()]
    for u, (name, n) in shared.items():
        needed += n
        m = users_of[u]
        parts.append(f"claim {name} shared by {m:,} member{'s' if m != 1 else ''}: {n:,} device(s) once")
    return needed, parts


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
            if d.mode != EXACT:
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
            if d.mode == EXACT:
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
        needed, parts = _device_need(users)
        if free < needed:
            return (
                f"not enough devices of class {users[0][1].device_class}: {needed:,} needed, {free:,} free "
                f"{nodes_phrase(len(union))} ({'; '.join(parts)})"
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
