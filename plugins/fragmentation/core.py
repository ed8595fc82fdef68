"""The pure core of DeviceFragmentation: how much of a node's free device capacity the cluster's request mix
cannot use, and how a placement changes it. No I/O, no framework types.

The measure follows the idea of Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23, §4): for a workload
``M`` of request shapes ``m`` with popularity ``p_m``, a node's fragmentation is the expected amount of its
free accelerator capacity that an arriving request could not use,

    F_n(M) = sum_m p_m * frag_n(m)

where ``frag_n(m)`` is all of the node's free capacity when ``m`` does not fit on the node at all (cpu, memory,
no matching device, too few devices with enough capacity left), and otherwise the free capacity of the units
``m`` cannot use (a device that does not match ``m``'s selectors, a shared device with less capacity left than
``m`` asks of one device, a partly used device for a request of whole devices). A placement is scored by how
much it lowers ``F`` (the "gradient"); among the devices of a node, the one that lowers it most is used.

Generalised here to what DRA expresses (the paper models only GPU milli-shares on one GPU model per node):

* a **unit** is what capacity is counted in: a device (its consumable capacities when it allows multiple
  allocations, else the device as a whole), or a shared counter set of partitionable devices (a physical GPU
  whose MIG devices draw on its counters);
* a request **matches** a device by its class and selectors (evaluated by DynamicResources' CEL engine in the
  adapter); several device classes, models and drivers on one node are just units some shapes cannot use;
* a shape has a cpu and memory request and any number of device requests (count and per-device capacity).

The amount counted for a unit is its free fraction in thousandths (a free GPU = 1000), so units of different
sizes weigh alike, as GPUs do in the paper. cpu and memory enter only through "does the shape fit" (as in the
paper); which is what keeps CPU-heavy pods off the nodes whose GPUs need that CPU.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

FULL = 1000  # a whole free unit, in thousandths


@dataclass(frozen=True, slots=True)
class ReqShape:
    """One device request of a shape: which devices match (``key``: class and selectors), how many, and what
    each device must have left (``need``: capacity name -> amount, in the unit's integer scale); ``need`` empty
    means the device as a whole."""

    key: Hashable
    count: int
    need: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Shape:
    cpu: int  # milli-cpu
    mem: int  # bytes
    reqs: tuple[ReqShape, ...]


@dataclass(frozen=True, slots=True)
class DeviceModel:
    """A device as fragmentation sees it: the request keys it matches, its unit, and what using it takes from
    the unit: ``counters`` (aligned with the unit's dims) for a partitionable device, else nothing (it is the
    unit)."""

    keys: frozenset[Hashable]
    unit: int
    shareable: bool
    counters: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class UnitModel:
    dims: tuple[str, ...]
    cap: tuple[int, ...]  # > 0 each


@dataclass(frozen=True, slots=True, eq=False)
class NodeModel:
    """The devices of a node that some shape of the mix matches, grouped in units. Static while the node's
    slices and the mix's request keys are unchanged."""

    units: tuple[UnitModel, ...]
    devices: tuple[DeviceModel, ...]
    ids: tuple[Hashable, ...] = ()  # the devices' ids (opaque here), aligned with ``devices``
    index: Mapping[Hashable, int] = field(default_factory=dict)  # id -> position
    by_key: dict[Hashable, tuple[int, ...]] = field(default_factory=dict)  # request key -> matching devices
    # Nodes whose units and devices are alike (same SKU, same matches) share one ``kind`` (the adapter interns
    # it), so the memo of ``F`` serves all of them; None: the model is its own kind.
    kind: object | None = None
    # Every device is its own unit (device i is unit i), and all devices and all units are alike: the node's
    # state is then a multiset of (what is left, free) pairs, and ``F`` and the effect of taking one device do
    # not depend on which device is which (see :func:`canonical`).
    uniform: bool = False

    @property
    def memo_key(self) -> object:
        return self if self.kind is None else self.kind

    def matching(self, key: Hashable) -> tuple[int, ...]:
        got = self.by_key.get(key)
        if got is None:
            got = self.by_key[key] = tuple(d for d, dev in enumerate(self.devices) if key in dev.keys)
        return got


# A node's device state: per unit, what is left per dim; per device, whether it is free (not allocated to
# anyone, no share on it).
State = tuple[tuple[tuple[int, ...], ...], tuple[bool, ...]]


def is_uniform(units: Sequence[UnitModel], devices: Sequence[DeviceModel]) -> bool:
    """Whether device i is unit i for every i and all devices and units are equal (:attr:`NodeModel.uniform`)."""
    if not devices or len(units) != len(devices):
        return False
    d0, u0 = devices[0], units[0]
    for i, (dev, unit) in enumerate(zip(devices, units, strict=True)):
        if dev.unit != i or dev.counters is not None or dev.keys != d0.keys or dev.shareable != d0.shareable:
            return False
        if unit != u0:
            return False
    return True


def canonical(model: NodeModel, state: State) -> Hashable:
    """A key equal for every state of a :attr:`~NodeModel.uniform` model that is a permutation of ``state``
    (its units' (left, free) pairs sorted): everything this module computes of such a state is the same for all
    of them, since each request counts the devices it can use and sums the free amount of the others, over
    devices that are all alike. For other models, the state itself."""
    if not model.uniform:
        return state
    return tuple(sorted(zip(state[0], state[1], strict=True)))


def free_amount(unit: UnitModel, left: Sequence[int]) -> int:
    """The unit's free fraction in thousandths (the scarcest dim decides)."""
    f = FULL
    for c, v in zip(unit.cap, left, strict=True):
        x = FULL * max(v, 0) // c
        if x < f:
            f = x
    return f


def usable(model: NodeModel, state: State, d: int, req: ReqShape) -> bool:
    """Whether device ``d`` could take one device of ``req`` in ``state``."""
    dev = model.devices[d]
    if req.key not in dev.keys:
        return False
    unit = model.units[dev.unit]
    left = state[0][dev.unit]
    if dev.counters is not None:  # partitionable: the device itself unused and the counters it needs left
        return state[1][d] and all(v >= n for v, n in zip(left, dev.counters, strict=True))
    if not dev.shareable or not req.need:
        return state[1][d]  # the whole device
    for name, amount in req.need:
        try:
            i = unit.dims.index(name)
        except ValueError:
            return False
        if left[i] < amount:
            return False
    return True


def device_fragment(model: NodeModel, state: State, reqs: tuple[ReqShape, ...], free: Sequence[int], total: int) -> int:
    """The device part of ``frag_n(m)`` for a shape with requests ``reqs`` (cpu and memory aside): ``total`` when
    some request cannot get its devices, else the free amount of the units none of the requests can use."""
    used_units = 0
    devices = model.devices
    for req in reqs:
        n = 0
        for d in model.matching(req.key):
            if usable(model, state, d, req):
                n += 1
                used_units |= 1 << devices[d].unit
        if n < req.count:
            return total
    return sum(f for i, f in enumerate(free) if not used_units >> i & 1)


def fragment(model: NodeModel, state: State, shape: Shape, cpu_left: int, mem_left: int) -> int:
    """``frag_n(m)``: free capacity (thousandths of units) that ``shape`` cannot use on the node."""
    lefts = state[0]
    free = [free_amount(u, lefts[i]) for i, u in enumerate(model.units)]
    total = sum(free)
    if not total:
        return 0
    if cpu_left < shape.cpu or mem_left < shape.mem:
        return total
    return device_fragment(model, state, shape.reqs, free, total)


def demand(model: NodeModel, shape: Shape) -> int:
    """What ``shape`` takes of this node's units, in thousandths (0 when some request matches no device)."""
    total = 0
    for req in shape.reqs:
        dev = next((d for d in model.devices if req.key in d.keys), None)
        if dev is None:
            return 0
        unit = model.units[dev.unit]
        frac = FULL
        if dev.counters is not None:
            frac = max((FULL * n // c for n, c in zip(dev.counters, unit.cap, strict=True)), default=FULL)
        elif dev.shareable and req.need and unit.dims != ("",):
            frac = 0
            for name, amount in req.need:
                if name in unit.dims:
                    frac = max(frac, FULL * amount // unit.cap[unit.dims.index(name)])
        total += req.count * min(frac, FULL)
    return total


class Mix:
    """A request mix: shapes with probabilities (summing to 1), and memoised ``F`` of node states under it.

    ``strand``: weight of a second term beside the paper's measure, the free device capacity that the node's
    unrequested cpu (or memory) could not serve at the mix's ratio of device capacity to cpu (memory): a node
    whose cpu is nearly gone strands its free GPUs for every shape, not only for the ones it no longer fits.
    Measured on the openb trace (bench/trace): FGD's measure alone 94.95% of GPU capacity allocated at 130%
    arrival, with this term at 0.5 95.98% (default workload, seed 42, research simulator).
    """

    def __init__(self, shapes: Sequence[tuple[Shape, float]], version: int = 0, strand: float = 0.5) -> None:
        kept = [(s, p) for s, p in shapes if s.reqs]
        norm = sum(p for _, p in kept) or 1.0
        self.shapes = tuple((s, p / norm) for s, p in kept)
        self.version = version
        self.strand = strand
        self.keys: frozenset[Hashable] = frozenset(r.key for s, _ in self.shapes for r in s.reqs)
        self._cpus = sorted({s.cpu for s, _ in self.shapes})
        self._mems = sorted({s.mem for s, _ in self.shapes})
        groups: dict[tuple[ReqShape, ...], list[tuple[int, int, float]]] = {}
        for shape, p in self.shapes:
            # a shape's cpu (memory) fits what is left iff its index among the sorted requests is below the rank
            ci, mi = bisect_left(self._cpus, shape.cpu), bisect_left(self._mems, shape.mem)
            groups.setdefault(shape.reqs, []).append((ci, mi, p))
        # shapes by device requests: the device part is evaluated once per group, cpu/memory per shape
        self._groups = tuple((reqs, tuple(members)) for reqs, members in groups.items())
        self._memo: dict[tuple[object, Hashable, int, int], tuple[float, int]] = {}
        self._canon: dict[tuple[object, Hashable, int, int], tuple[float, int]] = {}  # uniform models, by canonical
        self._rates: dict[object, tuple[float, float]] = {}

    def __bool__(self) -> bool:
        return bool(self.shapes)

    def rates(self, model: NodeModel) -> tuple[float, float]:
        """Device thousandths per milli-cpu and per byte that the shapes able to use this node ask on average."""
        got = self._rates.get(model.memo_key)
        if got is None:
            dev = cpu = mem = 0.0
            for shape, p in self.shapes:
                a = demand(model, shape)
                if a:
                    dev += p * a
                    cpu += p * shape.cpu
                    mem += p * shape.mem
            got = (dev / cpu if cpu else 0.0, dev / mem if mem else 0.0)
            if len(self._rates) > 50_000:
                self._rates.clear()
            self._rates[model.memo_key] = got
        return got

    def value(self, model: NodeModel, state: State, cpu_left: int, mem_left: int) -> float:
        """``F_n(M)`` of a node in ``state`` with ``cpu_left`` / ``mem_left`` unrequested, plus the stranding
        term. Memoised per state: cpu and memory only matter to the paper's measure through which shapes they
        admit, so they are keyed by rank."""
        v, total = self.expected(model, state, self.ranks(cpu_left, mem_left))
        return self.with_strand(model, v, total, cpu_left, mem_left)

    def ranks(self, cpu_left: int, mem_left: int) -> tuple[int, int]:
        """Which shapes' cpu and memory requests fit in what is left (all the paper's measure needs of them)."""
        return bisect_right(self._cpus, cpu_left), bisect_right(self._mems, mem_left)

    def expected(self, model: NodeModel, state: State, ranks: tuple[int, int]) -> tuple[float, int]:
        """``F_n(M)`` (the paper's measure, memoised per state and cpu/memory ranks) and the free device total."""
        cr, mr = ranks
        key = (model.memo_key, state, cr, mr)
        got = self._memo.get(key)
        ckey: tuple[object, Hashable, int, int] | None = None
        if got is None and model.uniform:
            # the same multiset of unit states met in another order (another node of this kind, other devices)
            ckey = (model.memo_key, canonical(model, state), cr, mr)
            got = self._canon.get(ckey)
            if got is not None:
                self._memo[key] = got
        if got is None:
            v = 0.0
            lefts = state[0]
            free = [free_amount(u, lefts[i]) for i, u in enumerate(model.units)]
            total = sum(free)
            if total:
                for reqs, members in self._groups:
                    dev = device_fragment(model, state, reqs, free, total)
                    for ci, mi, p in members:
                        v += p * (total if cr <= ci or mr <= mi else dev)
            if len(self._memo) > 200_000:
                self._memo.clear()
                self._canon.clear()
            got = self._memo[key] = (v, total)
            if ckey is not None:
                self._canon[ckey] = got
        return got

    def strand_key(self, model: NodeModel, cpu_left: int, mem_left: int) -> Hashable:
        """What :meth:`with_strand` reads of ``cpu_left`` and ``mem_left`` on this node: nothing (None) when the
        term is 0 for every free total the node can have (no strand weight, or cpu and memory left enough for all
        of its units), else both values."""
        if not self.strand:
            return None
        rc, rm = self.rates(model)
        most = FULL * len(model.units)
        if (not rc or cpu_left * rc >= most) and (not rm or mem_left * rm >= most):
            return None
        return cpu_left, mem_left

    def with_strand(self, model: NodeModel, v: float, total: int, cpu_left: int, mem_left: int) -> float:
        """``v`` plus the stranding term for a node with ``total`` free and ``cpu_left`` / ``mem_left``."""
        if self.strand and total:
            rc, rm = self.rates(model)
            short = max(total - cpu_left * rc if rc else 0.0, total - mem_left * rm if rm else 0.0)
            if short > 0:
                v += self.strand * min(short, total)
        return v


# --- scarcity: which devices the backlog cannot do without -------------------------------------------------------


def unit_keys(model: NodeModel) -> tuple[frozenset[Hashable], ...]:
    """Per unit, the request keys that some device of the unit matches."""
    got = _UNIT_KEYS.get(model.memo_key)
    if got is None:
        acc: list[set[Hashable]] = [set() for _ in model.units]
        for dev in model.devices:
            acc[dev.unit] |= dev.keys
        got = tuple(frozenset(a) for a in acc)
        if len(_UNIT_KEYS) > 100_000:
            _UNIT_KEYS.clear()
        _UNIT_KEYS[model.memo_key] = got
    return got


_UNIT_KEYS: dict[object, tuple[frozenset[Hashable], ...]] = {}


def sorted_repr(keys: frozenset[Hashable]) -> str:
    """A stable order for sets of keys (keys need not be comparable with one another)."""
    return repr(sorted(map(repr, keys)))


def supply(model: NodeModel, state: State) -> dict[Hashable, int]:
    """The node's free device capacity (thousandths of units) per request key that can use it."""
    out: dict[Hashable, int] = {}
    lefts = state[0]
    for i, keys in enumerate(unit_keys(model)):
        f = free_amount(model.units[i], lefts[i])
        if f:
            for k in keys:
                out[k] = out.get(k, 0) + f
    return out


def request_amount(req: ReqShape, unit: UnitModel) -> int:
    """What one device of ``req`` takes of a unit like ``unit``, in thousandths (a whole device: all of it)."""
    if not req.need or unit.dims == ("",):
        return FULL
    frac = 0
    for name, amount in req.need:
        if name in unit.dims:
            frac = max(frac, FULL * amount // unit.cap[unit.dims.index(name)])
    return min(frac, FULL) if frac else FULL


class Scarcity:
    """How much the pending pods need the devices a placement would take (beside FGD's expectation, which knows
    the popularity of shapes but not how much of each kind of device the backlog still needs).

    For a request key ``k`` (class and selectors): ``D_k``, the device capacity the pending pods ask with that key,
    and ``S_k``, the free capacity of the devices it matches, cluster-wide (both in thousandths of a unit). A free
    unit that keys with ``D_k >= S_k`` can use is one those pods cannot do without: taking it for a pod that could
    have gone elsewhere leaves one of them pending. ``pressure`` of a unit for a pod: the largest ``min(1, D_k /
    S_k) ** 2`` over the keys that can use the unit, other than the pod's own and other than keys that match every
    free unit of the cluster (their pressure is the same wherever the pod goes). Squared, so that a key with far
    more supply than demand hardly counts (a pending pod must not pull every other pod off the devices it
    matches), one that needs all of its supply fully. The adapter leaves out the demand of pods no node can hold.

    Measured on the openb trace's ``gpuspec33`` workload (a third of the tasks restricted to GPU models; seed 42,
    bench/trace_replay.py): without it, unrestricted tasks filled the scarce models (P100, G3, V100) first and the
    tasks restricted to them were refused from 13% arrived (85.84% of GPU capacity allocated at 100% arrived, FGD
    87.87); with it the first refusal comes at 42.6% and 94.43% is allocated at 100% (95.40% at 130%, FGD 94.39).
    """

    def __init__(
        self,
        demand: Mapping[Hashable, int],
        free: Mapping[Hashable, int],
        total: int,
        kinds: frozenset[frozenset[Hashable]] = frozenset(),
    ) -> None:
        self.kinds = kinds  # the key sets of the cluster's units (what view() reports pressures for)
        self._views: dict[frozenset[Hashable], tuple[tuple[frozenset[Hashable], float], ...]] = {}
        ratios: dict[Hashable, float] = {}
        for k, d in demand.items():
            s = free.get(k, 0)
            if d <= 0 or (s >= total and total > 0):
                continue
            # squared: a key whose free supply is many times its demand barely counts (1/4 of the supply: 1/16),
            # one that needs it all counts fully; in steps of 1/20 of the ratio, so that the table (and with it the
            # scores the framework memoises) changes only when a ratio does
            r = 1.0 if s <= 0 else min(1.0, round(10 * d / s) / 10)
            ratios[k] = r * r
        self.ratios = {k: r for k, r in ratios.items() if r > 0}

    def __bool__(self) -> bool:
        return bool(self.ratios)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scarcity) and self.ratios == other.ratios and self.kinds == other.kinds

    __hash__ = None  # type: ignore[assignment]

    def view(self, own: frozenset[Hashable]) -> tuple[tuple[frozenset[Hashable], float], ...]:
        """What a pod with request keys ``own`` sees of the table: the pressure of every kind of unit (for its
        signature: a new table that leaves these unchanged leaves its scores unchanged)."""
        got = self._views.get(own)
        if got is None:  # only the kinds of unit the pod can use: it takes nothing of the others
            got = self._views[own] = tuple(
                (k, p)
                for k in sorted(self.kinds, key=sorted_repr)
                if not own.isdisjoint(k) and (p := self.pressure(k, own))
            )
        return got

    def pressure(self, keys: frozenset[Hashable], own: frozenset[Hashable]) -> float:
        best = 0.0
        for k in keys:
            r = self.ratios.get(k)
            if r is not None and r > best and k not in own:
                best = r
        return best

    def cost(self, model: NodeModel, before: State, after: State, own: frozenset[Hashable]) -> float:
        """Thousandths of units taken by going from ``before`` to ``after``, each weighed by its pressure."""
        if not self.ratios:
            return 0.0
        total = 0.0
        ukeys = unit_keys(model)
        b, a = before[0], after[0]
        for i, u in enumerate(model.units):
            if b[i] != a[i]:
                used = free_amount(u, b[i]) - free_amount(u, a[i])
                if used > 0:
                    p = self.pressure(ukeys[i], own)
                    if p:
                        total += used * p
        return total
