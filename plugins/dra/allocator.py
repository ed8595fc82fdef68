"""The structured DRA device allocator (resource.k8s.io/v1), pure and synchronous.

Semantics follow the upstream "incubating" allocator of Kubernetes 1.36/1.37 with default feature gates
(``../shared/reference/dra-semantics.md`` §2): an exhaustive depth-first search returning the first
feasible assignment in a fixed order — claims (given order) → requests (spec order) → ``firstAvailable``
subrequests (list order) → devices (pools sorted by (driver, pool) with binding-condition pools last,
slices by name, devices in slice order), devices of one request taken as combinations in ascending
position. The pools of a node and their candidate devices come from :func:`plugins.dra.pools.gather_pools`.

Three outcome kinds stay distinct, as upstream:

* a list of :class:`ClaimAllocation` (one per claim, same order) — success;
* ``None`` — the claims do not fit on this node (incomplete pools are simply not used);
* :class:`FailedOnNode` — nothing fits and an invalid pool was seen on this node (per-node failure);
* :class:`AllocationError` — fatal for the pod's attempt (bad CEL, unknown class, limits, …).

Where upstream has known bugs (dra-semantics.md §2.15) this implementation does the correct thing:

1. counters are reserved only once a candidate passed the taint and constraint checks, and released on
   undo for every kind of device (upstream leaks them on rejection: kubernetes#140436);
2. admin-access picks do not consume counters (they do not consume the device either; kubernetes#140729);
3. a shareable (``allowMultipleAllocations``) device is charged its counters once, for its first share,
   whether or not earlier shares recorded ``consumedCapacity`` (kubernetes#134100);
5. ``distinctAttribute`` remembers the value of every chosen device, not only the last one per request;
7. counter availability is keyed by (driver, pool), not by pool name alone.

Items kept as upstream: 4 (a device that disappeared from its slice cannot be charged: its counters are
unknown), 8 (an ``All`` request fails if any pool on the node is incomplete or invalid).

Order of checks as in 1.37.2 (``k8s.io/dynamic-resource-allocation`` v0.37.2
``structured/internal/experimental/allocator_experimental.go``, which kube-scheduler 1.37.2 uses with its
default gates): "in use" (also for a shareable device held exclusively) before the selectors; the selectors
also on the devices of a per-device-node-selection slice that are for other nodes (``isSelectable`` checks
the node after the CEL, so a runtime error there fails the claim; such devices are never allocated:
:attr:`Candidate.on_node`); an ``All`` request lists its devices by static capacity and a device that must be
taken is checked against the claim constraints before its remaining capacity (a broken constraint is an
error). A class config of a ``firstAvailable`` request names the chosen subrequest (``r0/s1``).

Candidate order hook (``device_order``, topology-aware placement): for each ``ExactCount`` request the search
may visit the candidates in another order — ``device_order(node, free, spec, count)`` receives the candidates
that are free and match the request right now (upstream order) and returns the preferred ones first. The
search then walks that list followed by every other candidate in upstream order, so it stays exhaustive:
constraints, counters, taints, capacity and ``firstAvailable`` are checked exactly as without the hook; only
which of several feasible answers comes first changes. The list is computed when the request is entered and
kept while its devices are chosen (positions must stay stable for the combinations).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from plugins.dra.cel import SelectorCache
from plugins.dra.cel_engine import DeviceInput, device_input
from plugins.dra.cel_syntax import CELError
from plugins.dra.pools import Candidate, Features, Pool
from scheduler.api.dra import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT,
    AttributeValue,
    ClaimSpec,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceResult,
    RequestSpec,
)
from scheduler.api.model import Node, NodeSelector, SelectorRequirement, SelectorTerm
from scheduler.api.quantity import Quantity
from scheduler.cache.ledger import DeviceID, DeviceLedger, PoolID

MAX_DEVICES_PER_CLAIM = 32  # AllocationResultsMaxSize

# (node, free matching candidates in upstream order, request, device count) -> preferred order (a subset or a
# permutation of the candidates given; candidates left out keep their upstream place after the returned ones).
DeviceOrder = Callable[[Node, Sequence["Candidate"], RequestSpec, int], Sequence["Candidate"]]
SHARE_NAMESPACE = uuid.UUID("5b1c7f0e-3c52-4f0b-9a55-2f1d4c1e9d10")


class AllocationError(Exception):
    """Fatal for this scheduling attempt of the pod (upstream: a non-nil error from Allocate)."""


class FailedOnNode(AllocationError):
    """Per-node failure: no solution and an invalid pool was encountered on this node."""


@dataclass(frozen=True, slots=True)
class ClaimInput:
    """A claim to allocate: its key (namespace/name, used in messages), UID and spec."""

    key: str
    uid: str
    spec: ClaimSpec


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    results: tuple[DeviceResult, ...]
    node_selector: NodeSelector | None
    raw: dict[str, Any]  # status.allocation as the API server would store it
    devices: tuple[Device, ...] = field(default=(), compare=False)  # chosen devices, same order as results


# --- capacity (KEP-5075) -------------------------------------------------------------------------------


def _ceil_div(a: Fraction, b: Fraction) -> int:
    q = a / b
    n = q.numerator // q.denominator
    return n if n == q else n + 1


def consumed_capacity(requested: Quantity | None, cap: DeviceCapacity) -> Quantity:
    """How much of ``cap`` one allocation consumes (calculateConsumedCapacity)."""
    pol = cap.policy
    if requested is None:
        if pol is not None and pol.default is not None:
            return pol.default
        return cap.value
    if pol is None:
        return requested
    if pol.has_range and pol.range_min is not None:
        v = max(requested, pol.range_min)
        if pol.range_step is not None and pol.range_step.value > 0:
            n = _ceil_div(Fraction(v.int_value() - pol.range_min.int_value()), Fraction(pol.range_step.int_value()))
            total = pol.range_min.int_value() + n * pol.range_step.int_value()
            return Quantity(Fraction(total), v.fmt)
        return v
    if pol.valid_values:
        for vv in sorted(pol.valid_values):
            if vv >= requested:
                return vv
        return requested
    return requested


def violates_policy(consumed: Quantity, cap: DeviceCapacity) -> bool:
    pol = cap.policy
    if pol is None:
        return False
    if pol.default is not None and consumed == pol.default:
        return False
    if pol.has_range:
        if pol.range_max is not None and consumed > pol.range_max:
            return True
        if pol.range_min is not None and pol.range_step is not None and pol.range_step.value > 0:
            return (consumed.int_value() - pol.range_min.int_value()) % pol.range_step.int_value() != 0
        return False
    if pol.valid_values is not None:
        return consumed not in pol.valid_values
    return False


def capacity_shortfall(ledger: DeviceLedger, spec: RequestSpec, c: Candidate) -> tuple[str, Quantity, Quantity] | None:
    """Why ``spec`` cannot take (a share of) the device of ``c`` now for lack of capacity, as the search
    checks it with nothing else being allocated: (capacity name, what one allocation consumes, what is left
    on the device: zero when the device has no such capacity); None if it fits."""
    d = c.device
    requested = dict(spec.capacity)
    for name, q in requested.items():
        if name not in d.capacity:
            return name, q, Quantity(Fraction(0), q.fmt)
    shares = ledger.shared_consumption(c.id)
    for name, cap in d.capacity.items():
        used = consumed_capacity(requested.get(name), cap)
        left = cap.value.value
        if shares:
            for consumed in shares.values():
                share = consumed.get(name)
                if share is not None:
                    left -= share.value
        if violates_policy(used, cap) or used.value > left:
            return name, used, Quantity(max(left, Fraction(0)), cap.value.fmt)
    return None


def counter_shortfall(alloc: Allocator, pool: Pool, c: Candidate) -> tuple[str, str, Quantity, Quantity] | None:
    """Why the device of ``c`` cannot be allocated now for lack of shared counters (its pool's counters
    minus what the devices in use consume): (counter set, counter, what the device consumes, what is left);
    None if they suffice (or a share of it was charged already)."""
    d = c.device
    if not d.consumes_counters or (d.allow_multiple_allocations and alloc.ledger.has_shares(c.id)):
        return None
    avail = alloc._pool_available(pool)
    for cc in d.consumes_counters:
        for cname, q in cc.counters.items():
            left = avail.get((cc.counter_set, cname))
            if left is not None and q.value > left:
                return cc.counter_set, cname, q, Quantity(max(left, Fraction(0)), q.fmt)
    return None


# --- constraints ---------------------------------------------------------------------------------------


def _lookup_attribute(d: Device, driver: str, name: str) -> AttributeValue | None:
    v = d.attributes.get(name)
    if v is None:
        domain, _, ident = name.partition("/")
        if domain == driver and ident:
            v = d.attributes.get(ident)
    return v


def _attr_key(v: AttributeValue) -> tuple[str, Any] | None:
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, str):
        return ("string", v)
    if isinstance(v, tuple):
        return None  # list attributes never satisfy constraints without DRAListTypeAttributes
    return ("version", str(v))


class _Constraint:
    def __init__(self, c: DeviceConstraint) -> None:
        self.requests = frozenset(c.requests)
        self.attribute = c.match_attribute or c.distinct_attribute or ""
        self.match = c.match_attribute is not None
        self.value: tuple[str, Any] | None = None
        self.count = 0
        self.values: list[tuple[str, Any]] = []

    def applies(self, request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or request.partition("/")[0] in self.requests

    def add(self, request: str, driver: str, d: Device) -> bool:
        if not self.applies(request):
            return True
        raw = _lookup_attribute(d, driver, self.attribute)
        key = _attr_key(raw) if raw is not None else None
        if key is None:
            return False
        if self.match:
            if self.count and key != self.value:
                return False
            self.value = key
            self.count += 1
            return True
        if key in self.values:
            return False
        self.values.append(key)
        return True

    def remove(self, request: str, driver: str, d: Device) -> None:
        if not self.applies(request):
            return
        raw = _lookup_attribute(d, driver, self.attribute)
        key = _attr_key(raw) if raw is not None else None
        if self.match:
            self.count -= 1
            if self.count == 0:
                self.value = None
        elif key is not None:
            # remove the most recent occurrence (adds and removes are LIFO in the search)
            for i in range(len(self.values) - 1, -1, -1):
                if self.values[i] == key:
                    del self.values[i]
                    break


# --- request data --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Req:
    spec: RequestSpec
    cls: DeviceClass
    num_devices: int
    all_devices: list[Candidate]
    admin: bool
    capacity: Mapping[str, Quantity]


_OK, _FAIL, _MAXSIZE = 0, 1, 2
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class Allocator:
    """One allocator per scheduling cycle (fixed view of the ledger, slices and classes)."""

    def __init__(
        self,
        features: Features,
        ledger: DeviceLedger,
        classes: Mapping[str, DeviceClass],
        selectors: SelectorCache,
        device_inputs: dict[tuple[int, int], DeviceInput] | None = None,
        device_order: DeviceOrder | None = None,
    ) -> None:
        self.features = features
        self.device_order = device_order
        self.ledger = ledger
        self.classes = classes
        self.selectors = selectors
        self.device_inputs = device_inputs if device_inputs is not None else {}
        self._available: dict[PoolID, tuple[int, dict[tuple[str, str], Fraction]]] = {}
        self.invocations = 0  # number of search steps (allocateOne calls) in the last allocate()

    # --- CEL ---------------------------------------------------------------------------------------

    def _device_input(self, c: Candidate) -> DeviceInput:
        di = self.device_inputs.get(c.key)
        if di is None:
            d = c.device
            di = device_input(
                c.pool[0],
                d.attributes,
                {k: v.value for k, v in d.capacity.items()},
                d.allow_multiple_allocations,
            )
            self.device_inputs[c.key] = di
        return di

    def _selectable(self, claim: ClaimInput, rd: _Req, c: Candidate, node: Node) -> bool:
        d = c.device
        if d.binding_conditions and not self.features.binding_conditions:
            return False
        for owner, sels in ((f"class {rd.cls.name}", rd.cls.selectors), (None, rd.spec.selectors)):
            for i, expr in enumerate(sels):
                where = owner or f"claim {claim.key}, request {rd.spec.name}"
                if expr is None:
                    raise AllocationError(f"{where}: selector #{i}: CEL expression empty (unsupported selector type?)")
                if d.attribute_error:
                    raise AllocationError(
                        f"{where}: selector #{i} on device {c.id[0]}/{c.id[1]}/{d.name}: {d.attribute_error}"
                    )
                try:
                    ok = self.selectors.matches(
                        expr, c.key, functools.partial(self._device_input, c), driver=c.pool[0], content=d
                    )
                except CELError as e:
                    raise AllocationError(
                        f"{where}: selector #{i} on device {c.id[0]}/{c.id[1]}/{d.name}: {e}"
                    ) from None
                if not ok:
                    return False
        return True

    # --- counters ----------------------------------------------------------------------------------

    def _pool_available(self, pool: Pool) -> dict[tuple[str, str], Fraction]:
        rev = self.ledger.pool_revision(pool.id)
        cached = self._available.get(pool.id)
        if cached is not None and cached[0] == rev:
            return cached[1]
        avail: dict[tuple[str, str], Fraction] = {}
        for sname, counters in pool.counter_sets.items():
            for cname, q in counters.items():
                avail[(sname, cname)] = q.value
        for dname in self.ledger.pool_devices_in_use(pool.id):
            d = pool.all_devices.get(dname)
            if d is None:
                continue
            for cc in d.consumes_counters:
                for cname, q in cc.counters.items():
                    k = (cc.counter_set, cname)
                    if k in avail:
                        avail[k] -= q.value
        self._available[pool.id] = (rev, avail)
        return avail

    def matching(self, claim: ClaimInput, spec: RequestSpec, pools: Sequence[Pool], node: Node) -> Iterator[Candidate]:
        """The candidates of the complete, valid ``pools`` that the request's device class and selectors select,
        as the search selects them (a selector error counts as no match); none when the class is unknown."""
        cls = self.classes.get(spec.device_class_name)
        if cls is None:
            return
        rd = _Req(spec, cls, 0, [], bool(spec.admin_access), dict(spec.capacity))
        for p in pools:
            if p.incomplete or p.invalid:
                continue
            for c in p.candidates:
                try:
                    ok = self._selectable(claim, rd, c, node)
                except AllocationError:
                    ok = False
                if ok:
                    yield c

    # --- the search --------------------------------------------------------------------------------

    def allocate(
        self,
        node: Node,
        claims: Sequence[ClaimInput],
        pools: Sequence[Pool],
    ) -> list[ClaimAllocation] | None:
        """Allocate ``claims`` on ``node`` from ``pools`` (see :func:`gather_pools`)."""
        self.invocations = 0
        if not claims:
            return []
        search = _Search(self, node, claims, pools)
        return search.run()


class _Search:
    def __init__(self, alloc: Allocator, node: Node, claims: Sequence[ClaimInput], pools: Sequence[Pool]) -> None:
        self.a = alloc
        self.f = alloc.features
        self.ledger = alloc.ledger
        self.node = node
        self.claims = claims
        self.pools = {p.id: p for p in pools}
        self.pool_list = pools
        self.cands: list[Candidate] = [
            c for p in pools if not p.incomplete and not p.invalid for c in (p.walk or p.candidates)
        ]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self.allocating_shares: dict[DeviceID, int] = {}
        # non-admin shares chosen in this call: the first one charged the device's counters
        self.charged_shares: dict[DeviceID, int] = {}
        self.consumed_counters: dict[PoolID, dict[tuple[str, str], Fraction]] = {}
        self.results: list[list[tuple[DeviceResult, Candidate]]] = [[] for _ in claims]
        self.constraints: list[list[_Constraint]] = []
        self.rdata: list[list[list[_Req]]] = []
        self.is_sub: list[list[bool]] = []
        self.sel_cache: dict[tuple[int, int, int, int], bool] = {}
        # device_order: the candidate list of the request being filled, per (claim, request, subrequest)
        self.order_slot: dict[tuple[int, int, int], list[Candidate]] = {}
        self._prevalidate()

    # --- pre-validation (dra-semantics §2.3) ---------------------------------------------------------

    def _prevalidate(self) -> None:
        for ci, claim in enumerate(self.claims):
            rows: list[list[_Req]] = []
            subs: list[bool] = []
            min_devices = 0
            for req in claim.spec.requests:
                where = f"claim {claim.key}, request {req.name}"
                if req.first_available and req.exactly is None:
                    if not self.f.prioritized_list:
                        raise AllocationError(
                            f"{where}: has subrequests, but the DRAPrioritizedList feature is disabled"
                        )
                    specs = list(req.first_available)
                    subs.append(True)
                elif req.exactly is not None:
                    specs = [req.exactly]
                    subs.append(False)
                else:
                    raise AllocationError(f"{where}: unknown request type (neither exactly nor firstAvailable)")
                if not self.f.consumable_capacity:
                    for s in specs:
                        if s.capacity:
                            w = (
                                where
                                if s is req.exactly
                                else f"claim {claim.key}, subrequest {s.name.split('/', 1)[1]}"
                            )
                            raise AllocationError(
                                f"{w}: has capacity requests, but the DRAConsumableCapacity feature is disabled"
                            )
                row = [self._request_data(ci, claim, req, s) for s in specs]
                rows.append(row)
                min_devices += min(r.num_devices for r in row)
            if min_devices > MAX_DEVICES_PER_CLAIM:
                raise AllocationError(
                    f"claim {claim.key}: number of requested devices {min_devices} exceeds the claim limit of "
                    f"{MAX_DEVICES_PER_CLAIM}"
                )
            cons = []
            for i, c in enumerate(claim.spec.constraints):
                if c.match_attribute is None and c.distinct_attribute is None:
                    raise AllocationError(
                        f"claim {claim.key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
                if c.distinct_attribute is not None and not self.f.consumable_capacity:
                    raise AllocationError(
                        f"claim {claim.key}, constraint #{i}: "
                        "distinctAttribute requires the DRAConsumableCapacity feature"
                    )
                cons.append(_Constraint(c))
            self.rdata.append(rows)
            self.is_sub.append(subs)
            self.constraints.append(cons)

    def _request_data(self, ci: int, claim: ClaimInput, req: DeviceRequest, s: RequestSpec) -> _Req:
        where = f"claim {claim.key}, request {s.name}"
        for i, expr in enumerate(s.selectors):
            if expr is None:
                raise AllocationError(f"{where}: selector #{i}: CEL expression empty (unsupported selector type?)")
        if s.admin_access is not None and not self.f.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not s.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        cls = self.a.classes.get(s.device_class_name)
        if cls is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {s.device_class_name}: "
                f'deviceclass.resource.k8s.io "{s.device_class_name}" not found'
            )
        rd = _Req(s, cls, 0, [], bool(s.admin_access), dict(s.capacity))
        if s.allocation_mode == ALLOCATION_MODE_EXACT:
            rd.num_devices = s.count
        elif s.allocation_mode == ALLOCATION_MODE_ALL:
            for p in self.pool_list:
                if p.incomplete:
                    raise AllocationError(
                        f"{where}: asks for all devices, but resource pool {p.id[0]}/{p.id[1]} "
                        "is currently being updated"
                    )
                if p.invalid:
                    raise AllocationError(
                        f"{where}: asks for all devices, but resource pool {p.id[0]}/{p.id[1]} is currently invalid"
                    )
            for c in self.cands:
                if not self._selectable(ci, claim, rd, c) or not c.on_node:
                    continue
                # static capacity only, as upstream: a device whose remaining capacity is too small stays in
                # the list and makes the request fail when it is tried (validateDeviceRequest, "Static
                # capacity only" in dynamic-resource-allocation v0.37.2 allocator_experimental.go)
                if self.f.consumable_capacity and self._capacity(rd, c, static=True) is None:
                    continue
                rd.all_devices.append(c)
            rd.num_devices = len(rd.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {s.allocation_mode}")
        return rd

    def _selectable(self, ci: int, claim: ClaimInput, rd: _Req, c: Candidate) -> bool:
        k = (id(rd), c.key[0], c.key[1], ci)
        v = self.sel_cache.get(k)
        if v is None:
            v = self.a._selectable(claim, rd, c, self.node)
            self.sel_cache[k] = v
        return v

    # --- capacity ------------------------------------------------------------------------------------

    def _capacity(self, rd: _Req, c: Candidate, static: bool = False) -> dict[str, Quantity] | None:
        """Consumed capacity per device capacity if the request fits on the device now (``static``: on the
        device with nothing consumed), else None."""
        d = c.device
        for name in rd.capacity:
            if name not in d.capacity:
                return None
        out: dict[str, Quantity] = {}
        shares = None if static else self.ledger.shared_consumption(c.id)
        allocating = None if static else self.allocating_capacity.get(c.id)
        for name, cap in d.capacity.items():
            used = consumed_capacity(rd.capacity.get(name), cap)
            if violates_policy(used, cap):
                return None
            total = used.value
            if shares:
                for consumed in shares.values():
                    q = consumed.get(name)
                    if q is not None:
                        total += q.value
            if allocating:
                total += allocating.get(name, Fraction(0))
            if total > cap.value.value:
                return None
            out[name] = used
        return out

    # --- recursion -----------------------------------------------------------------------------------

    def run(self) -> list[ClaimAllocation] | None:
        r = self._one(0, 0, 0, 0, False, 0)
        if r == _OK:
            return [self._build(ci) for ci in range(len(self.claims))]
        if any(p.invalid for p in self.pool_list):
            raise FailedOnNode("invalid resource pools were encountered")
        return None

    def _one(self, ci: int, ri: int, si: int, di: int, sub_mode: bool, start: int) -> int:
        self.a.invocations += 1
        if ci == len(self.claims):
            return _OK
        rows = self.rdata[ci]
        if ri == len(rows):
            r = self._one(ci + 1, 0, 0, 0, False, 0)
            return _FAIL if r == _MAXSIZE else r
        if self.is_sub[ci][ri] and not sub_mode:
            all_exceeded = True
            for s in range(len(rows[ri])):
                r = self._one(ci, ri, s, 0, True, 0)
                if r == _MAXSIZE:
                    continue
                all_exceeded = False
                if r == _OK:
                    return _OK
            return _MAXSIZE if all_exceeded else _FAIL
        rd = rows[ri][si]
        if rd.spec.allocation_mode == ALLOCATION_MODE_ALL and not rd.all_devices:
            return _FAIL
        if di >= rd.num_devices:
            return self._one(ci, ri + 1, 0, 0, False, 0)
        if len(self.results[ci]) + rd.num_devices - di > MAX_DEVICES_PER_CLAIM:
            return _MAXSIZE
        claim = self.claims[ci]
        if rd.spec.allocation_mode == ALLOCATION_MODE_ALL:
            undo = self._try(ci, rd, rd.all_devices[di], must=True)
            if undo is None:
                return _FAIL
            r = self._one(ci, ri, si, di + 1, sub_mode, 0)
            if r != _OK:
                undo()
            return r
        cands = self.cands
        ledger = self.ledger
        if self.a.device_order is not None and not rd.admin:
            slot = (ci, ri, si)
            if di == 0:
                cands = self.order_slot[slot] = self._ordered(ci, claim, rd)
            else:
                cands = self.order_slot.get(slot, cands)
        for pos in range(start, len(cands)):
            c = cands[pos]
            dev_id = c.id
            if rd.admin:
                users = self.allocating.get(dev_id)
                if users and ci in users:
                    continue
            elif dev_id in self.allocating or ledger.is_allocated(dev_id):
                # "in use" is checked before the selectors, also for a shareable device that a claim holds
                # exclusively (deviceInUse in dynamic-resource-allocation v0.37.2 allocator_experimental.go;
                # shares being allocated are not in self.allocating)
                continue
            if not self._selectable(ci, claim, rd, c) or not c.on_node:
                continue
            undo = self._try(ci, rd, c, must=False)
            if undo is None:
                continue
            r = self._one(ci, ri, si, di + 1, sub_mode, pos + 1)
            if r == _OK:
                return _OK
            undo()
            if r == _MAXSIZE:
                return r
        return _FAIL

    def _ordered(self, ci: int, claim: ClaimInput, rd: _Req) -> list[Candidate]:
        """The candidates of an ExactCount request in the hook's preferred order, then the rest (upstream)."""
        order = self.a.device_order
        assert order is not None
        ledger = self.ledger
        free: list[Candidate] = []
        for c in self.cands:
            if c.id in self.allocating or ledger.is_allocated(c.id):
                continue
            if not c.on_node:
                continue  # (still walked by the search, where its selectors run as upstream)
            try:
                if not self._selectable(ci, claim, rd, c):
                    continue
            except AllocationError:
                continue  # left where upstream would meet it; the search raises there if it gets that far
            free.append(c)
        if len(free) < 2:
            return self.cands
        given = {id(c) for c in free}
        first: set[int] = set()
        preferred: list[Candidate] = []
        for c in order(self.node, free, rd.spec, rd.num_devices):
            if id(c) in given and id(c) not in first:  # only the candidates given, each once
                first.add(id(c))
                preferred.append(c)
        if not preferred:
            return self.cands
        return preferred + [c for c in self.cands if id(c) not in first]

    def _try(self, ci: int, rd: _Req, c: Candidate, must: bool) -> Callable[[], None] | None:
        d = c.device
        dev_id = c.id
        multi = self.f.consumable_capacity and d.allow_multiple_allocations
        # in-use
        if rd.admin:
            users = self.allocating.get(dev_id)
            if not multi and users and ci in users:
                return None
        elif multi:
            if self.ledger.is_allocated(dev_id):
                return None
        elif dev_id in self.allocating or self.ledger.is_allocated(dev_id):
            return None
        if d.consumes_counters and not self.f.partitionable_devices:
            return None
        consumed: dict[str, Quantity] | None = None
        short = False  # too little capacity left: for a device that must be taken, known after the constraints
        if self.f.consumable_capacity:
            consumed = self._capacity(rd, c)
            if consumed is None:
                if not must:
                    return None
                # upstream allocateDevice checks the remaining capacity after the claim constraints, so an
                # `All` device that also breaks a constraint is an error, not "does not fit"
                # (dynamic-resource-allocation v0.37.2 structured/internal/experimental/allocator_experimental.go)
                short = True
        # counters (checked now, committed after taints and constraints passed)
        counter_delta: list[tuple[tuple[str, str], Fraction]] = []
        charge = bool(d.consumes_counters) and not rd.admin
        if charge and multi and (self.ledger.has_shares(dev_id) or self.charged_shares.get(dev_id, 0)):
            charge = False
        if charge:
            pool = self.pools[c.pool]
            avail = self.a._pool_available(pool)
            used = self.consumed_counters.get(c.pool, {})
            for cc in d.consumes_counters:
                for cname, q in cc.counters.items():
                    counter_delta.append(((cc.counter_set, cname), q.value))
            tentative = dict(used)
            for k, v in counter_delta:
                tentative[k] = tentative.get(k, Fraction(0)) + v
            for k, v in avail.items():
                if v < tentative.get(k, 0):
                    return None
        # taints
        if self.f.device_taints and (d.taints or c.rule_taints):
            for t in d.taints + c.rule_taints if c.rule_taints else d.taints:
                if t.effect in _BLOCKING_EFFECTS and not any(tol.tolerates(t) for tol in rd.spec.tolerations):
                    return None
        # constraints
        request = rd.spec.name
        driver = c.pool[0]
        added: list[_Constraint] = []
        for con in self.constraints[ci]:
            if not con.add(request, driver, d):
                for a in added:
                    a.remove(request, driver, d)
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}, request {request}: cannot add device "
                        f"{driver}/{c.pool[1]}/{d.name} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(con)
        if short:
            for a in added:
                a.remove(request, driver, d)
            return None
        # commit
        if counter_delta:
            used = self.consumed_counters.setdefault(c.pool, {})
            for k, v in counter_delta:
                used[k] = used.get(k, Fraction(0)) + v
        if not multi:
            self.allocating.setdefault(dev_id, set()).add(ci)
        share_id = ""
        consumed_out: Mapping[str, Quantity] = {}
        if multi:
            self.allocating_shares[dev_id] = self.allocating_shares.get(dev_id, 0) + 1
            if not rd.admin:
                self.charged_shares[dev_id] = self.charged_shares.get(dev_id, 0) + 1
            acap = self.allocating_capacity.setdefault(dev_id, {})
            for name, q in (consumed or {}).items():
                acap[name] = acap.get(name, Fraction(0)) + q.value
            share_id = str(
                uuid.uuid5(
                    SHARE_NAMESPACE,
                    f"{self.claims[ci].uid}/{request}/{dev_id}/{len(self.results[ci])}",
                )
            )
            consumed_out = dict(consumed or {})
        result = DeviceResult(
            request=request,
            driver=driver,
            pool=c.pool[1],
            device=d.name,
            admin_access=rd.admin,
            share_id=share_id,
            consumed_capacity=consumed_out,
        )
        self.results[ci].append((result, c))
        n_results = len(self.results[ci])

        def undo() -> None:
            del self.results[ci][n_results - 1 :]
            for a in added:
                a.remove(request, driver, d)
            if counter_delta:
                u = self.consumed_counters[c.pool]
                for k, v in counter_delta:
                    u[k] -= v
            if not multi:
                users = self.allocating[dev_id]
                users.discard(ci)
                if not users:
                    del self.allocating[dev_id]
            else:
                acap = self.allocating_capacity[dev_id]
                for name, q in (consumed or {}).items():
                    acap[name] -= q.value
                if not rd.admin:
                    charged = self.charged_shares[dev_id] - 1
                    if charged:
                        self.charged_shares[dev_id] = charged
                    else:
                        del self.charged_shares[dev_id]
                left = self.allocating_shares[dev_id] - 1
                if left:
                    self.allocating_shares[dev_id] = left
                else:
                    del self.allocating_shares[dev_id]
                    del self.allocating_capacity[dev_id]

        return undo

    # --- result building (dra-semantics §2.12) -----------------------------------------------------------

    def _build(self, ci: int) -> ClaimAllocation:
        self.claims[ci]
        entries = self.results[ci]
        rd_by_name: dict[str, _Req] = {}
        for row in self.rdata[ci]:
            for rd in row:
                rd_by_name[rd.spec.name] = rd
        raw_results: list[dict[str, Any]] = []
        for r, c in entries:
            rd = rd_by_name[r.request]
            out: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
            if r.admin_access:
                out["adminAccess"] = True
            if self.f.device_taints and rd.spec.tolerations:
                out["tolerations"] = [t.to_raw() for t in rd.spec.tolerations]
            if self.f.binding_conditions and c.device.binding_conditions:
                out["bindingConditions"] = list(c.device.binding_conditions)
                if c.device.binding_failure_conditions:
                    out["bindingFailureConditions"] = list(c.device.binding_failure_conditions)
            if r.share_id:
                out["shareID"] = r.share_id
                if r.consumed_capacity:
                    out["consumedCapacity"] = {k: str(v) for k, v in r.consumed_capacity.items()}
            raw_results.append(out)
        # which request name (R or R/S) was chosen for each top-level request
        chosen: dict[str, str] = {}
        for r, _ in entries:
            chosen.setdefault(r.request.partition("/")[0], r.request)
        devices: dict[str, Any] = {"results": raw_results}
        config = self._config(ci, chosen, rd_by_name)
        if config:
            devices["config"] = config
        raw: dict[str, Any] = {"devices": devices}
        sel = self._node_selector([c for _, c in entries])
        if sel is not None:
            raw["nodeSelector"] = sel.to_raw()
        return ClaimAllocation(tuple(r for r, _ in entries), sel, raw, tuple(c.device for _, c in entries))

    def _config(self, ci: int, chosen: Mapping[str, str], rd_by_name: Mapping[str, _Req]) -> list[dict[str, Any]]:
        claim = self.claims[ci]
        all_requests = [req.name for req in claim.spec.requests]
        out: list[dict[str, Any]] = []
        class_entries: dict[str, list[dict[str, Any]]] = {}
        for req in claim.spec.requests:
            sel = chosen.get(req.name)
            if sel is None:
                continue
            # A class config names the request that got its devices: the subrequest ("r0/s1") of a
            # firstAvailable request, so that it applies to that alternative only (dynamic-resource-allocation
            # v0.37.2 structured/internal/experimental/allocator_experimental.go, "Populate configs":
            # requestData.requestName() of the selected subrequest).
            cls = rd_by_name[sel].cls
            if cls.name in class_entries:
                for e in class_entries[cls.name]:
                    e["requests"].append(sel)
                continue
            entries = []
            for class_cfg in cls.config:
                entry: dict[str, Any] = {"source": "FromClass", "requests": [sel]}
                entry.update({k: v for k, v in class_cfg.items() if k not in ("source", "requests")})
                entries.append(entry)
                out.append(entry)
            class_entries[cls.name] = entries
        selected = set(chosen.values())
        for cfg in claim.spec.config:
            if cfg.requests and not any(r in chosen or r in selected for r in cfg.requests):
                continue
            claim_entry: dict[str, Any] = {"source": "FromClaim"}
            claim_entry.update({k: v for k, v in cfg.raw.items() if k not in ("source", "requests")})
            if cfg.requests:
                claim_entry["requests"] = list(cfg.requests)
            out.append(claim_entry)
        for e in out:
            reqs = e.get("requests")
            if reqs and all(n in reqs or chosen.get(n, n) in reqs for n in all_requests):
                del e["requests"]
        return out

    def _node_selector(self, cands: Sequence[Candidate]) -> NodeSelector | None:
        node_term = node_name_selector(self.node.name)
        exprs: list[SelectorRequirement] = []
        fields: list[SelectorRequirement] = []
        for c in cands:
            s, d = c.slice, c.device
            if s.node_name or (s.per_device_node_selection and d.node_name):
                return node_term
            if d.binds_to_node:  # not gated upstream (incubating ``allocator.go``); the API server drops the field
                return node_term
            sel = d.node_selector if s.per_device_node_selection else s.node_selector
            if s.per_device_node_selection and d.all_nodes:
                continue
            if sel is None:
                continue
            if len(sel.terms) != 1:
                raise AllocationError(f"node selector of {c.id[0]}/{c.id[1]}/{d.name} must have exactly one term")
            t = sel.terms[0]
            for r in t.match_expressions:
                if not any(_same_req(r, x) for x in exprs):
                    exprs.append(r)
            for r in t.match_fields:
                if not any(_same_req(r, x) for x in fields):
                    fields.append(r)
        if not exprs and not fields:
            return None
        return NodeSelector((SelectorTerm(tuple(exprs), tuple(fields)),))


def _same_req(a: SelectorRequirement, b: SelectorRequirement) -> bool:
    return a.key == b.key and a.operator == b.operator and set(a.values) == set(b.values)



def node_name_selector(node: str) -> NodeSelector:
    """The allocation's node selector for devices of one node: ``metadata.name In [node]``."""
    return NodeSelector((SelectorTerm(match_fields=(SelectorRequirement("metadata.name", "In", (node,)),)),))


__all__ = [
    "AllocationError",
    "Allocator",
    "ClaimAllocation",
    "ClaimInput",
    "CounterSet",
    "FailedOnNode",
    "capacity_shortfall",
    "consumed_capacity",
    "counter_shortfall",
    "node_name_selector",
    "violates_policy",
]

