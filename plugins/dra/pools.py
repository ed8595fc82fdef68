"""The device pools a node can use, as the allocator searches them (resource.k8s.io/v1 ResourceSlices).

:func:`gather_pools` collects, for one node, the pools of the slices that reach it (by node name, all nodes, a
node selector, or per device), keeps the newest generation of each pool, flags pools whose slices are not all
published yet (incomplete) or that are inconsistent (invalid: duplicate device or counter set names, unknown
counters), and lists each pool's devices in upstream order as :class:`Candidate` values, carrying the taints of
DeviceTaintRules. Pools are sorted by (driver, pool), pools with binding conditions last. The search over them
is :mod:`plugins.dra.allocator`; which DRA feature gates are on is :class:`Features`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from plugins.dra.taintrules import TaintRules
from scheduler.api.dra import Device, ResourceSlice
from scheduler.api.model import Node, Taint, node_selector_matches
from scheduler.api.quantity import Quantity
from scheduler.cache.ledger import DeviceID, PoolID

__all__ = ["Candidate", "Features", "Pool", "gather_pools"]


@dataclass(frozen=True, slots=True)
class Features:
    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_taint_rules: bool = True  # DRADeviceTaintRules: rule taints (plugins.dra.taintrules) count too
    consumable_capacity: bool = True
    binding_conditions: bool = True


@dataclass(slots=True)
class Candidate:
    pool: PoolID
    slice: ResourceSlice
    device: Device
    id: DeviceID
    key: tuple[int, int]  # (slice serial, device index): the CEL cache key of this device generation
    rule_taints: tuple[Taint, ...] = ()  # taints DeviceTaintRules add to the device's own (checked with them)
    # False: a device of a per-device-node-selection slice that is for another node. Upstream evaluates the
    # selectors on it before the device's node selection (isSelectable, so a CEL runtime error there fails
    # the claim); it is never allocated. Only in Pool.walk.
    on_node: bool = True


@dataclass(slots=True)
class Pool:
    id: PoolID
    generation: int
    incomplete: bool = False
    invalid: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    counter_sets: dict[str, Mapping[str, Quantity]] = field(default_factory=dict)
    all_devices: dict[str, Device] = field(default_factory=dict)  # every device of the pool (any node)
    has_binding_conditions: bool = False
    # the devices the search walks, in upstream order, when it differs from `candidates`: with the devices of
    # per-device-node-selection slices that are for other nodes (Candidate.on_node False); empty otherwise
    walk: list[Candidate] = field(default_factory=list)


def _device_on_node(d: Device, node: Node) -> bool:
    if d.node_name:
        return d.node_name == node.name
    if d.all_nodes:
        return True
    if d.node_selector is not None:
        return node_selector_matches(d.node_selector, node.labels, node.name)
    return False


def _slice_relevant(s: ResourceSlice, node: Node) -> bool:
    if s.node_name:
        return s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        if len(s.node_selector.terms) != 1:
            # API validation requires exactly one term; reject the node, never abort (kubernetes#141212).
            return False
        return node_selector_matches(s.node_selector, node.labels, node.name)
    if s.per_device_node_selection:
        return any(_device_on_node(d, node) for d in s.devices)
    return False


def gather_pools(
    node: Node,
    node_slices: Sequence[ResourceSlice],
    pool_slices: Mapping[PoolID, Sequence[ResourceSlice]],
    features: Features,
    rules: TaintRules | None = None,
) -> list[Pool]:
    """The pools usable from ``node``, sorted; incomplete and invalid ones included (flagged). ``rules``:
    the DeviceTaintRules whose taints the candidates carry (ignored without ``device_taint_rules``)."""
    collected: dict[PoolID, list[ResourceSlice]] = {}
    for s in node_slices:
        if not features.partitionable_devices and (s.per_device_node_selection or s.shared_counters):
            continue
        if not _slice_relevant(s, node):
            continue
        pid = (s.driver, s.pool)
        cur = collected.get(pid)
        if cur is None or s.generation > cur[0].generation:
            collected[pid] = [s]
        elif s.generation == cur[0].generation:
            cur.append(s)
    pools: list[Pool] = []
    for pid, slices in collected.items():
        gen = slices[0].generation
        targeting = {s.name for s in slices}
        if len(slices) == slices[0].slice_count:
            pool_all = slices
        else:
            everywhere = pool_slices.get(pid, ())
            if any(s.generation > gen for s in everywhere):
                continue  # obsolete: a newer generation exists elsewhere
            pool_all = [s for s in everywhere if s.generation == gen]
            if len(pool_all) != slices[0].slice_count:
                pools.append(Pool(pid, gen, incomplete=True))
                continue
        pools.append(_build_pool(pid, gen, pool_all, targeting, node, features, rules))
    pools.sort(key=lambda p: (p.has_binding_conditions, p.id))
    return pools


def _build_pool(
    pid: PoolID,
    gen: int,
    slices: Sequence[ResourceSlice],
    targeting: set[str],
    node: Node,
    features: Features,
    rules: TaintRules | None = None,
) -> Pool:
    pool = Pool(pid, gen)
    ordered = sorted(slices, key=lambda s: s.name)
    seen: set[str] = set()
    walk: list[Candidate] = []
    for s in ordered:
        if features.partitionable_devices:
            for cs in s.shared_counters:
                if cs.name in pool.counter_sets:
                    pool.invalid = pool.invalid or f"duplicate counter set name {cs.name}"
                pool.counter_sets[cs.name] = cs.counters
    for s in ordered:
        if features.partitionable_devices and s.shared_counters and not s.devices:
            continue
        on_node = s.name in targeting
        for i, d in enumerate(s.devices):
            pool.all_devices.setdefault(d.name, d)
            if features.partitionable_devices:
                for cc in d.consumes_counters:
                    cset = pool.counter_sets.get(cc.counter_set)
                    if cset is None:
                        pool.invalid = pool.invalid or (
                            f"device {d.name} references unknown counter set {cc.counter_set}"
                        )
                        continue
                    for cname in cc.counters:
                        if cname not in cset:
                            pool.invalid = pool.invalid or (
                                f"device {d.name} references unknown counter {cname} in counter set {cc.counter_set}"
                            )
            if not on_node:
                continue
            if d.name in seen:
                pool.invalid = pool.invalid or f"duplicate device name {d.name}"
            seen.add(d.name)
            if s.per_device_node_selection and not _device_on_node(d, node):
                # (dynamic-resource-allocation v0.37.2 structured/internal/experimental/allocator_experimental.go
                # isSelectable: the selectors run before the per-device node check)
                walk.append(Candidate(pid, s, d, (pid[0], pid[1], d.name), (s.serial, i), on_node=False))
                continue
            if d.binding_conditions:
                pool.has_binding_conditions = True
            cand = Candidate(pid, s, d, (pid[0], pid[1], d.name), (s.serial, i))
            if rules and features.device_taint_rules:
                cand.rule_taints = rules.taints_for(pid[0], pid[1], d.name)
            pool.candidates.append(cand)
            walk.append(cand)
    if len(walk) != len(pool.candidates):
        pool.walk = walk
    return pool
