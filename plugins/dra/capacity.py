"""DynamicResources' part of the group capacity bound (:class:`scheduler.framework.capacity.DeviceCapacityPlugin`).

For a member class (one representative after PreFilter) and a node, an *upper bound* on how many members fit
there by devices:

* each ``ExactCount`` request (grouped by device class and selectors): the node's free devices that match the
  class and the request's selectors, divided by the devices one member takes;
* a ``firstAvailable`` request: the free devices any of its alternatives matches, divided by the smallest
  alternative's count;
* an ``All`` request fits once.

Devices that can be shared (``allowMultipleAllocations``) and admin-access requests are not bounded. A device
matches as the allocator selects it (:meth:`plugins.dra.allocator.Allocator._selectable`: upstream's
``isSelectable``, the class's then the request's CEL selectors); it is free when the ledger has it in no use.
The devices of extended resources backed by DRA (KEP-5004: the pod's special claim) are not counted here; on the
nodes that do not serve such a resource NodeResourcesFit leaves it unbounded too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from plugins.dra.allocator import Allocator, ClaimInput
from plugins.dra.cel import SelectorCache
from plugins.dra.cel_engine import DeviceInput
from plugins.dra.pools import Features, Pool
from plugins.dra.state import _CycleData
from scheduler.api.dra import ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT, RequestSpec
from scheduler.cache.ledger import DeviceID
from scheduler.framework.capacity import ALL, EXACT, FIRST, UNBOUNDED, DeviceDemand

if TYPE_CHECKING:
    from scheduler.cache.cache import NodeInfo, Snapshot

__all__ = ["DeviceDemand", "MatchMemo", "device_room", "member_demands"]

class DeviceSelection(Protocol):
    """What selects a node's devices as the allocator does: DynamicResources' feature gates, CEL selector cache and
    device inputs (:class:`plugins.dra.plugin.DynamicResources` is one)."""

    @property
    def features(self) -> Features: ...

    @property
    def selectors(self) -> SelectorCache: ...

    @property
    def device_inputs(self) -> dict[tuple[int, int], DeviceInput]: ...


_MAX_MATCHES = 200_000  # cached (node, class and selectors) entries before the memo starts over
_MEMO_KEY = "matches"


def member_demands(data: _CycleData | None) -> tuple[list[DeviceDemand], int]:
    """The device demands of a member from DynamicResources' PreFilter state ``data`` (its unallocated claims),
    and the devices one member takes over the ExactCount ones."""
    if data is None or data.allocator is None:
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
                    key: Hashable = (EXACT, s.device_class_name, tuple(s.selectors))
                    total += s.count
                    d = by_key.get(key)
                    if d is None:
                        d = by_key[key] = DeviceDemand(
                            key, s.device_class_name, per_member=0, mode=EXACT, probes=[], what=""
                        )
                        out.append(d)
                    d.per_member += s.count
                    d.probes.append((inp, s, s.count))
                    name, n = d.claims.get(inp.uid, (inp.key, 0))
                    d.claims[inp.uid] = (name, n + s.count)
                    d.requests.append(_request_name(s))
                    d.what = (
                        f"request {s.name}: needs {s.count} device(s)"
                        if len(d.probes) == 1
                        else f"requests {', '.join(p[1].name for p in d.probes)}: need {d.per_member} device(s)"
                    )
                elif s.allocation_mode == ALLOCATION_MODE_ALL:
                    out.append(
                        DeviceDemand(
                            key=(ALL, inp.uid, s.name),
                            device_class=s.device_class_name,
                            per_member=1,
                            mode=ALL,
                            probes=[(inp, s, 1)],
                            what=f"request {s.name}: needs all matching devices",
                            requests=[_request_name(s)],
                        )
                    )
                continue
            subs = [s for s in req.first_available if not s.admin_access and s.allocation_mode == ALLOCATION_MODE_EXACT]
            if subs and len(subs) == len(req.first_available):
                out.append(
                    DeviceDemand(
                        key=(FIRST, inp.uid, req.name),
                        device_class=subs[0].device_class_name,
                        per_member=1,
                        mode=FIRST,
                        probes=[(inp, s, s.count) for s in subs],
                        what=f"request {req.name}: needs one of its subrequests",
                        requests=[_request_name(s) for s in subs],
                    )
                )
    return out, total


def _request_name(s: RequestSpec) -> str:
    """The claim request's name (a firstAvailable subrequest's spec is named ``request/subrequest``)."""
    return s.name.split("/", 1)[0]


@dataclass(slots=True)
class MatchMemo:
    """Per node: its devices matching a (device class, selectors), and whether any of its devices is shareable;
    valid while the node's pool list (DynamicResources rebuilds it when slices change) and the classes are the
    same. Kept across group cycles; ``probe`` selects devices as the allocator does (while the ledger is the same
    object: selecting does not read the ledger, only the allocator holds it)."""

    matching: dict[tuple[str, Hashable], tuple[list[Pool], int, tuple[DeviceID, ...]]] = field(default_factory=dict)
    shareable: dict[str, tuple[list[Pool], bool]] = field(default_factory=dict)
    probe: Allocator | None = None


def device_room(
    plugin: DeviceSelection,
    snap: Snapshot,
    info: NodeInfo,
    pools: list[Pool],
    demands: Sequence[DeviceDemand],
    memo: dict[Hashable, Any],
) -> tuple[int, dict[Hashable, int]]:
    """(upper bound on members by devices, free matching devices per ExactCount demand key) on ``info``, whose
    pools (DynamicResources' per-node pool list) are ``pools``. ``plugin``: the DynamicResources instance (its
    features, CEL selector cache and device inputs select the devices)."""
    if not demands:
        return UNBOUNDED, {}
    m: MatchMemo | None = memo.get(_MEMO_KEY)
    if m is None:
        m = memo[_MEMO_KEY] = MatchMemo()
    shared = m.shareable.get(info.name)
    if shared is None or shared[0] is not pools:
        shared = (pools, any(c.device.allow_multiple_allocations for p in pools for c in p.candidates))
        m.shareable[info.name] = shared
    if shared[1]:
        return UNBOUNDED, {}  # shareable devices: one device may serve many members
    ledger = snap.ledger
    cap = UNBOUNDED
    free_by_key: dict[Hashable, int] = {}
    for d in demands:
        if d.mode == EXACT:
            inp, spec, _ = d.probes[0]
            free = 0
            for dev in _matching(plugin, m, snap, info, pools, inp, spec):
                if not ledger.in_use(dev):
                    free += 1
            free_by_key[d.key] = free
            # the devices of claims shared with other members are taken once, not once per member
            each = d.per_member - d.shared
            if free < d.shared:
                cap = 0
            elif each > 0:
                cap = min(cap, (free - d.shared) // each)
        elif d.mode == ALL:
            cap = min(cap, 1)
        else:
            # each member takes at least the smallest subrequest's count, from the union of their devices
            union: set[DeviceID] = set()
            for inp, spec, _ in d.probes:
                union.update(_matching(plugin, m, snap, info, pools, inp, spec))
            free = sum(1 for dev in union if not ledger.in_use(dev))
            cap = min(cap, free // max(1, min(count for _, _, count in d.probes)))
    return cap, free_by_key


def _probe(plugin: DeviceSelection, m: MatchMemo, snap: Snapshot) -> Allocator:
    probe = m.probe
    if probe is None or probe.ledger is not snap.ledger:
        probe = m.probe = Allocator(plugin.features, snap.ledger, snap.classes, plugin.selectors, plugin.device_inputs)
    probe.classes = snap.classes
    return probe


def _matching(
    plugin: DeviceSelection,
    m: MatchMemo,
    snap: Snapshot,
    info: NodeInfo,
    pools: list[Pool],
    inp: ClaimInput,
    spec: RequestSpec,
) -> tuple[DeviceID, ...]:
    """The node's devices matching the request's device class and selectors (as the allocator selects them)."""
    key = (info.name, (spec.device_class_name, tuple(spec.selectors)))
    hit = m.matching.get(key)
    if hit is not None and hit[0] is pools and hit[1] == snap.class_generation:
        return hit[2]
    probe = _probe(plugin, m, snap)
    out = [c.id for c in probe.matching(inp, spec, pools, info.node)]
    if len(m.matching) > _MAX_MATCHES:
        m.matching.clear()
        m.shareable.clear()
    got = tuple(out)
    m.matching[key] = (pools, snap.class_generation, got)
    return got
