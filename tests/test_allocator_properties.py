"""Property tests for the structured DRA allocator.

(a) claims allocated one by one, each result recorded in a DeviceLedger, never share a device outside
    admin access / allowMultipleAllocations, never overrun shared capacity or pool counters;
(b) every allocated device satisfies its class selectors, its request selectors and every constraint
    of its claim — checked independently in Python (selectors are attribute equalities);
(c) on random small instances ``allocate()`` finds a solution exactly when a brute-force search over
    all assignments does.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dra_fixtures import (
    ALL_FEATURES,
    CLASS_A,
    DRIVER_A,
    NODE1,
    Claim,
    cel,
    claim,
    counter_set,
    device,
    distinct,
    first_available,
    klass,
    make_ledger,
    match,
    pool,
    request,
    run_outcome,
    slice_counters,
    slice_with,
    sub,
    taint,
    toleration,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plugins.dra.cel import SelectorCache, get_engine
from scheduler.api.dra import DeviceResult
from scheduler.api.quantity import Quantity

Raw = dict[str, Any]

SELECTORS = SelectorCache(get_engine())  # results are keyed by slice serial: safe to share across examples
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

CLASS_S_NONZERO = "class-s-nonzero"
CLASSES = [klass(CLASS_A, DRIVER_A), klass(CLASS_S_NONZERO, DRIVER_A, 'device.attributes["driver-a"].s != 0')]
POOLS = ("pool-1", "pool-2")
COUNTER_SET = "cs"
A_ATTR = f"{DRIVER_A}/a"

# values of the constraint attribute "a": int, string and bool that look alike, or missing
A_VALUES: list[Any] = [None, 0, 1, "1", True]


def typed(v: Any) -> tuple[str, Any] | None:
    """What a constraint compares: type and value (True is not 1, "1" is not 1)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    return ("string", v)


@dataclass(frozen=True)
class Dev:
    name: str
    pool: str
    s: int  # always present, read by selectors
    a: Any  # constraint attribute (may be missing)
    counter: int = 0  # units of the pool's counter consumed (0 = consumes none)
    multi: bool = False
    mem: int | None = None  # consumable capacity "mem"
    tainted: bool = False  # NoSchedule taint

    @property
    def id(self) -> tuple[str, str, str]:
        return (DRIVER_A, self.pool, self.name)

    def raw(self) -> Raw:
        attrs: dict[str, Any] = {"s": self.s}
        if self.a is not None:
            attrs["a"] = self.a
        return device(
            self.name,
            {"mem": str(self.mem)} if self.mem is not None else None,
            attrs,
            counters=[(COUNTER_SET, {"c": str(self.counter)})] if self.counter else (),
            multi=self.multi,
            taints=[taint()] if self.tainted else (),
        )


@dataclass(frozen=True)
class Spec:
    """An exactly request or a subrequest: class, count, optional selector s == value."""

    cls: str
    count: int
    s: int | None
    admin: bool = False
    mem: int | None = None
    tolerates: bool = False

    def selects(self, d: Dev) -> bool:
        if d.tainted and not self.tolerates:
            return False
        if self.cls == CLASS_S_NONZERO and d.s == 0:
            return False
        return self.s is None or d.s == self.s

    def tolerations(self) -> list[Raw]:
        return [toleration()] if self.tolerates else []

    def selectors(self) -> list[Raw]:
        return [cel(f'device.attributes["driver-a"].s == {self.s}')] if self.s is not None else []


@dataclass(frozen=True)
class Req:
    name: str
    specs: tuple[Spec, ...]  # one = exactly; several = firstAvailable
    first_available: bool = False

    def raw(self) -> Raw:
        if not self.first_available:
            sp = self.specs[0]
            cap = {"mem": str(sp.mem)} if sp.mem is not None else None
            return request(
                self.name,
                sp.cls,
                sp.count,
                *sp.selectors(),
                admin=sp.admin or None,
                capacity=cap,
                tolerations=sp.tolerations(),
            )
        return first_available(
            self.name,
            *(
                sub(f"sub-{i}", sp.cls, sp.count, *sp.selectors(), tolerations=sp.tolerations())
                for i, sp in enumerate(self.specs)
            ),
        )

    def sub_name(self, i: int) -> str:
        return f"{self.name}/sub-{i}" if self.first_available else self.name


@dataclass(frozen=True)
class Con:
    kind: str  # "match" | "distinct"
    requests: tuple[str, ...]

    def raw(self) -> Raw:
        return (match if self.kind == "match" else distinct)(A_ATTR, *self.requests)

    def applies(self, request: str) -> bool:
        return not self.requests or request in self.requests or request.split("/")[0] in self.requests


@dataclass
class Instance:
    devices: list[Dev]
    preallocated: list[Dev] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)  # pool -> counter value (pools with counters)

    def slices(self) -> list[Raw]:
        out = []
        for p in POOLS:
            devs = [d.raw() for d in self.devices if d.pool == p]
            if p in self.counters:
                out.append(slice_with(f"{p}-devices", NODE1, pool(p, 2), DRIVER_A, *devs))
                out.append(
                    slice_counters(
                        f"{p}-counters",
                        NODE1,
                        pool(p, 2),
                        DRIVER_A,
                        counter_set(COUNTER_SET, {"c": str(self.counters[p])}),
                    )
                )
            elif devs:
                out.append(slice_with(f"{p}-devices", NODE1, p, DRIVER_A, *devs))
        return out


# --- strategies ----------------------------------------------------------------------------------------


@st.composite
def devices(draw: st.DrawFn, max_devices: int = 6, counters: bool = True, sharing: bool = False) -> Instance:
    n = draw(st.integers(1, max_devices))
    with_counters = counters and draw(st.booleans())
    devs = []
    for i in range(n):
        multi = sharing and draw(st.booleans())
        devs.append(
            Dev(
                name=f"d{i}",
                pool=draw(st.sampled_from(POOLS)),
                s=draw(st.integers(0, 2)),
                a=draw(st.sampled_from(A_VALUES)),
                counter=draw(st.integers(0, 2)) if with_counters else 0,
                multi=multi,
                mem=draw(st.one_of(st.none(), st.integers(1, 4))) if multi else None,
                tainted=draw(st.integers(0, 4)) == 0,
            )
        )
    pre = [d for d in devs if draw(st.integers(0, 3)) == 0]
    cnt = {p: draw(st.integers(1, 4)) for p in POOLS} if with_counters else {}
    return Instance(devs, pre, cnt)


def specs(count_max: int = 3, admin: bool = False, mem: bool = False) -> st.SearchStrategy[Spec]:
    return st.builds(
        Spec,
        cls=st.sampled_from([CLASS_A, CLASS_A, CLASS_S_NONZERO]),
        count=st.integers(1, count_max),
        s=st.one_of(st.none(), st.integers(0, 2)),
        admin=st.booleans() if admin else st.just(False),
        mem=st.one_of(st.none(), st.integers(0, 3)) if mem else st.just(None),
        tolerates=st.booleans(),
    )


@st.composite
def requests(draw: st.DrawFn, prioritized: bool) -> list[Req]:
    n = draw(st.integers(1, 3))
    out = []
    for i in range(n):
        if prioritized and draw(st.booleans()):
            out.append(Req(f"r{i}", tuple(draw(st.lists(specs(), min_size=2, max_size=3))), True))
        else:
            out.append(Req(f"r{i}", (draw(specs()),)))
    return out


@st.composite
def constraints(draw: st.DrawFn, reqs: Sequence[Req]) -> list[Con]:
    names = [r.name for r in reqs] + [r.sub_name(0) for r in reqs if r.first_available]
    out = []
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["match", "distinct"]))
        scope = draw(st.one_of(st.just(()), st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)))
        out.append(Con(kind, tuple(scope)))
    return out


# --- independent checks ----------------------------------------------------------------------------------


def constraints_hold(cons: Sequence[Con], chosen: Sequence[tuple[str, Dev]]) -> bool:
    for c in cons:
        values = [typed(d.a) for req, d in chosen if c.applies(req)]
        if any(v is None for v in values):
            return False
        if c.kind == "match" and len(set(values)) > 1:
            return False
        if c.kind == "distinct" and len(set(values)) != len(values):
            return False
    return True


def counters_hold(inst: Instance, in_use: set[Dev], new: Sequence[Dev]) -> bool:
    """Counters of every pool from which a new counter-consuming device is taken stay within the pool's
    counter set (an overcommitted pool only blocks its own counter-consuming devices)."""
    for p, cap in inst.counters.items():
        if any(d.counter and d.pool == p for d in new) and sum(d.counter for d in in_use if d.pool == p) > cap:
            return False
    return True


def brute_force(inst: Instance, reqs: Sequence[Req], cons: Sequence[Con]) -> bool:
    """Is there any assignment of free, selectable devices to the requests (one subrequest per
    firstAvailable request) that satisfies every constraint and the pool counters? Devices are distinct
    within a request; across requests only shareable devices without capacity may repeat (a shareable
    device with a capacity is consumed in full by one share, as no request asks for less)."""
    free = [d for d in inst.devices if d not in inst.preallocated]
    pre = set(inst.preallocated)

    def reusable(d: Dev) -> bool:
        return d.multi and d.mem is None

    def rec(i: int, used: set[Dev], chosen: list[tuple[str, Dev]]) -> bool:
        if i == len(reqs):
            return True
        r = reqs[i]
        for si, sp in enumerate(r.specs):
            name = r.sub_name(si)
            cands = [d for d in free if (reusable(d) or d not in used) and sp.selects(d)]
            for combo in itertools.combinations(cands, sp.count):
                new = chosen + [(name, d) for d in combo]
                if not constraints_hold(cons, new):
                    continue
                if not counters_hold(inst, pre | used | set(combo), combo):
                    continue
                if rec(i + 1, used | set(combo), new):
                    return True
        return False

    return rec(0, set(), [])


def by_id(inst: Instance) -> dict[tuple[str, str, str], Dev]:
    return {d.id: d for d in inst.devices}


def check_solution(inst: Instance, reqs: Sequence[Req], cons: Sequence[Con], results: Sequence[DeviceResult]) -> None:
    """(b): every result is a free, selectable device, counts match, constraints and counters hold."""
    devs = by_id(inst)
    chosen: list[tuple[str, Dev]] = []
    for res in results:
        d = devs[(res.driver, res.pool, res.device)]
        chosen.append((res.request, d))
    ids = [d.id for _, d in chosen if not (d.multi and d.mem is None)]
    assert len(ids) == len(set(ids)), "device allocated twice within a claim"
    for r in reqs:
        in_request = [(n, d.id) for n, d in chosen if n.split("/")[0] == r.name]
        assert len(in_request) == len(set(in_request)), "device twice in one request"
    for res in results:
        assert bool(res.share_id) == devs[(res.driver, res.pool, res.device)].multi
    assert not {d for _, d in chosen} & set(inst.preallocated), "already allocated device reused"
    for r in reqs:
        mine = [(n, d) for n, d in chosen if n.split("/")[0] == r.name]
        names = {n for n, _ in mine}
        assert len(names) == 1, f"request {r.name} results {names}"
        (name,) = names
        si = int(name.rsplit("-", 1)[1]) if r.first_available else 0
        sp = r.specs[si]
        assert len(mine) == sp.count
        for _, d in mine:
            assert sp.selects(d), f"{d} does not match {sp}"
    assert constraints_hold(cons, chosen), "constraint violated"
    in_use = set(inst.preallocated) | {d for _, d in chosen}
    assert counters_hold(inst, in_use, [d for _, d in chosen]), "counters exceeded"


def allocate(inst: Instance, claims: Sequence[Claim], ledger: Any = None) -> Any:
    return run_outcome(
        list(claims),
        CLASSES,
        inst.slices(),
        allocated=[d.id for d in inst.preallocated],
        features=ALL_FEATURES,
        ledger=ledger,
        selectors=SELECTORS,
    )


# --- (c) + (b): allocate() agrees with brute force ------------------------------------------------------


@st.composite
def problems(draw: st.DrawFn, prioritized: bool, sharing: bool = False) -> tuple[Instance, list[Req], list[Con]]:
    inst = draw(devices(sharing=sharing))
    reqs = draw(requests(prioritized))
    cons = draw(constraints(reqs))
    return inst, reqs, cons


def _check_problem(inst: Instance, reqs: list[Req], cons: list[Con]) -> None:
    c = claim("claim-0", *(r.raw() for r in reqs), constraints=[x.raw() for x in cons])
    out = allocate(inst, [c])
    expected = brute_force(inst, reqs, cons)
    if out.allocations is None:
        assert not expected, "allocator found no solution, brute force did"
        return
    assert expected, "allocator found a solution the brute force says is impossible"
    check_solution(inst, reqs, cons, out.allocations[0].results)


@SETTINGS
@given(problems(prioritized=False))
def test_allocate_finds_solution_iff_brute_force(p: tuple[Instance, list[Req], list[Con]]) -> None:
    _check_problem(*p)


@SETTINGS
@given(problems(prioritized=True))
def test_allocate_finds_solution_iff_brute_force_with_first_available(
    p: tuple[Instance, list[Req], list[Con]],
) -> None:
    _check_problem(*p)


@SETTINGS
@given(problems(prioritized=True, sharing=True))
def test_allocate_finds_solution_iff_brute_force_with_shareable_devices(
    p: tuple[Instance, list[Req], list[Con]],
) -> None:
    _check_problem(*p)


def test_brute_force_sanity() -> None:
    """The oracle itself: match on differently typed values fails, distinct on them succeeds."""
    inst = Instance([Dev("d0", "pool-1", 0, 1), Dev("d1", "pool-1", 0, "1"), Dev("d2", "pool-1", 0, True)])
    two = [Req("r0", (Spec(CLASS_A, 2, None),))]
    assert not brute_force(inst, two, [Con("match", ())])
    assert brute_force(inst, two, [Con("distinct", ())])
    three = [Req("r0", (Spec(CLASS_A, 3, None),))]
    assert brute_force(inst, three, [Con("distinct", ())])
    _check_problem(inst, three, [Con("distinct", ())])
    _check_problem(inst, two, [Con("match", ())])


# --- (a) + (b): sequential claims never double-book devices ---------------------------------------------


@st.composite
def sequences(draw: st.DrawFn) -> tuple[Instance, list[tuple[list[Req], list[Con]]]]:
    inst = draw(devices(sharing=True))
    claims = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 2))
        reqs = [Req(f"r{i}", (draw(specs(count_max=2, admin=True, mem=True)),)) for i in range(n)]
        claims.append((reqs, draw(constraints(reqs))))
    return inst, claims


@SETTINGS
@given(sequences())
def test_sequential_claims_never_share_devices(p: tuple[Instance, list[tuple[list[Req], list[Con]]]]) -> None:
    inst, claims = p
    devs = by_id(inst)
    ledger = make_ledger(allocated=[d.id for d in inst.preallocated])
    exclusive: set[tuple[str, str, str]] = {d.id for d in inst.preallocated}
    shared_mem: dict[tuple[str, str, str], Fraction] = {}
    in_use: set[Dev] = set(inst.preallocated)
    pre_counters = {p: sum(d.counter for d in inst.preallocated if d.pool == p) for p in inst.counters}
    for i, (reqs, cons) in enumerate(claims):
        c = claim(f"claim-{i}", *(r.raw() for r in reqs), constraints=[x.raw() for x in cons])
        c.uid = f"uid-{i}"
        out = allocate(inst, [c], ledger=ledger)
        if out.allocations is None:
            continue
        results = out.allocations[0].results
        seen_in_claim: set[tuple[str, str, str]] = set()
        for res in results:
            dev_id = (res.driver, res.pool, res.device)
            d = devs[dev_id]
            spec = next(r for r in reqs if r.name == res.request).specs[0]
            assert spec.selects(d), "(b) selector violated"
            assert res.admin_access == spec.admin
            if d.multi:
                assert res.share_id, "a shareable device is always allocated as a share"
                assert res.admin_access or dev_id not in exclusive, "share of an exclusively allocated device"
                if d.mem is not None:
                    consumed = res.consumed_capacity["mem"].value
                    if spec.mem is not None:
                        assert consumed >= spec.mem
                    if not res.admin_access:
                        shared_mem[dev_id] = shared_mem.get(dev_id, Fraction(0)) + consumed
                        assert shared_mem[dev_id] <= d.mem, "shared capacity overrun"
            else:
                assert not res.share_id
                assert dev_id not in seen_in_claim, "device twice in one claim"
                seen_in_claim.add(dev_id)
                if not res.admin_access:
                    assert dev_id not in exclusive, "device in two non-admin, non-shared allocations"
                    exclusive.add(dev_id)
            if not res.admin_access:
                in_use.add(d)
                if d.counter and d.pool in inst.counters:
                    used = sum(x.counter for x in in_use if x.pool == d.pool)
                    assert used <= inst.counters[d.pool], "pool counters overrun"
        chosen = [(res.request, devs[(res.driver, res.pool, res.device)]) for res in results]
        assert constraints_hold(cons, chosen), "(b) constraint violated"
        # record like the scheduler does once the claim is allocated
        ledger.observe_claim(c.uid, c.name, results, "1")
    for p_, before in pre_counters.items():
        assert before <= inst.counters[p_] or not any(
            d.counter for d in in_use - set(inst.preallocated) if d.pool == p_
        ), "allocated counters from an overcommitted pool"


def test_ledger_records_shares_with_quantities() -> None:
    """The ledger keeps consumed capacity of shares (used by the sequential property)."""
    ledger = make_ledger()
    r = DeviceResult("r", DRIVER_A, "pool-1", "d0", False, "share", {"mem": Quantity.parse("2")})
    ledger.observe_claim("u", "k", (r,), "1")
    assert ledger.has_shares((DRIVER_A, "pool-1", "d0"))
    assert not ledger.is_allocated((DRIVER_A, "pool-1", "d0"))
