"""Builders mirroring the fixture conventions of the upstream allocator test table.

See ``dra-semantics.md`` §5.1: nodes are ``node(name, region)`` with labels ``{region, planet: earth}``;
``klass(name, driver)`` is a DeviceClass selecting ``device.driver == "<driver>"``; pools default to
``{name, generation: 1, resourceSliceCount: 1}``; ``slice_one`` holds ``device-1``, ``slice_many(n)``
holds ``device-0..n-1``; ``request(name, class, count)`` is an ``exactly`` ExactCount request.

Everything is built as raw API dicts (what the informers hand to the scheduler) and converted with the
``scheduler.api.model`` functions in :func:`run`, so API defaulting is exercised too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from plugins.dra.allocator import Allocator, ClaimAllocation, ClaimInput
from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.pools import Features, gather_pools
from scheduler.api.dra import DeviceResult, claim_spec_from, class_from, slice_from
from scheduler.api.model import node_from
from scheduler.api.quantity import Quantity
from scheduler.cache.cache import build_slice_index
from scheduler.cache.ledger import DeviceLedger

Raw = dict[str, Any]

REGION1, REGION2 = "region-1", "region-2"
NODE1, NODE2 = "node-1", "node-2"
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
REQ0, REQ1, REQ2, REQ3 = "req-0", "req-1", "req-2", "req-3"
SUB0, SUB1 = "subReq-0", "subReq-1"
CLAIM0, CLAIM1 = "claim-0", "claim-1"
SLICE1, SLICE2, SLICE3, SLICE4 = "slice-1", "slice-2", "slice-3", "slice-4"
DEV0, DEV1, DEV2, DEV3, DEV4 = "device-0", "device-1", "device-2", "device-3", "device-4"
CSET1, CSET2 = "counter-set-1", "counter-set-2"
CAP0, CAP1 = "capacity-0", "capacity-1"

# node selection for slices/devices (upstream: nodeSelectionAll / nodeSelectionPerDevice / a node name)
ALL_NODES = "<all-nodes>"
PER_DEVICE = "<per-device>"

FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"

ALL_FEATURES = Features()
NO_FEATURES = Features(
    admin_access=False,
    prioritized_list=False,
    partitionable_devices=False,
    device_taints=False,
    consumable_capacity=False,
    binding_conditions=False,
)


def features(**on: bool) -> Features:
    """Features with everything off except the named ones (upstream cases list the features they need)."""
    base = {k: False for k in Features.__dataclass_fields__}
    base.update(on)
    return Features(**base)


def without(**off: bool) -> Features:
    """All features on except the named ones."""
    base = {k: True for k in Features.__dataclass_fields__}
    base.update({k: not v for k, v in off.items()})
    return Features(**base)


# --- nodes, classes ---------------------------------------------------------------------------------------


def node(name: str = NODE1, region: str = REGION1) -> Raw:
    return {"metadata": {"name": name, "labels": {"region": region, "planet": "earth"}}}


def klass(name: str, driver: str, *extra_selectors: str, config: Sequence[Raw] = (), multi: bool | None = None) -> Raw:
    expr = f'device.driver == "{driver}"'
    if multi is not None:
        expr += f" && device.allowMultipleAllocations == {str(multi).lower()}"
    sels = [{"cel": {"expression": expr}}] + [cel(e) for e in extra_selectors]
    spec: Raw = {"selectors": sels}
    if config:
        spec["config"] = [{"opaque": c} if "opaque" not in c else c for c in config]
    return {"metadata": {"name": name}, "spec": spec}


def class_with_config(name: str, driver: str, attribute: str) -> Raw:
    return klass(name, driver, config=[opaque(driver, attribute)])


def opaque(driver: str, attribute: str) -> Raw:
    """DeviceConfiguration.opaque with parameters {attribute: attributeValue}."""
    return {"driver": driver, "parameters": {attribute: attribute + "Value"}}


def cel(expression: str) -> Raw:
    return {"cel": {"expression": expression}}


def memory_at_least(q: str, driver: str = DRIVER_A) -> Raw:
    return cel(f'device.capacity["{driver}"].memory.compareTo(quantity("{q}")) >= 0')


# --- devices and slices -------------------------------------------------------------------------------------


def attr(v: Any) -> Raw:
    if isinstance(v, dict):
        return v
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, str):
        return {"string": v}
    raise TypeError(v)


def version(v: str) -> Raw:
    return {"version": v}


def policy_range(value: str, default: str = "2", min: str = "2", step: str | None = "2", max: str | None = "4") -> Raw:
    rng: Raw = {"min": min}
    if step is not None:
        rng["step"] = step
    if max is not None:
        rng["max"] = max
    return {"value": value, "requestPolicy": {"default": default, "validRange": rng}}


def policy_values(value: str, default: str, *more: str) -> Raw:
    return {"value": value, "requestPolicy": {"default": default, "validValues": [default, *more]}}


def taint(key: str = "taint-key", value: str = "taint-value", effect: str = "NoSchedule") -> Raw:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str = "taint-key", operator: str = "Exists", value: str = "", effect: str = "") -> Raw:
    t: Raw = {"key": key, "operator": operator}
    if value:
        t["value"] = value
    if effect:
        t["effect"] = effect
    return t


def device(
    name: str,
    capacity: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
    *,
    counters: Sequence[tuple[str, Mapping[str, str]]] = (),
    from_counters: bool = False,
    taints: Sequence[Raw] = (),
    binding_conditions: Sequence[str] | None = None,
    binding_failure_conditions: Sequence[str] | None = None,
    binds_to_node: bool | None = None,
    multi: bool = False,
    node_name: str | None = None,
    node_selector: Raw | None = None,
    all_nodes: bool = False,
) -> Raw:
    d: Raw = {"name": name}
    caps: Raw = {}
    for k, v in (capacity or {}).items():
        caps[k] = v if isinstance(v, dict) else {"value": v}
    if counters:
        d["consumesCounters"] = [
            {"counterSet": cs, "counters": {n: {"value": q} for n, q in cnt.items()}} for cs, cnt in counters
        ]
        if from_counters:
            for _, cnt in counters:
                for n, q in cnt.items():
                    caps[n] = {"value": q}
    if caps:
        d["capacity"] = caps
    if attributes:
        d["attributes"] = {k: attr(v) for k, v in attributes.items()}
    if taints:
        d["taints"] = list(taints)
    if binding_conditions is not None:
        d["bindingConditions"] = list(binding_conditions)
    if binding_failure_conditions is not None:
        d["bindingFailureConditions"] = list(binding_failure_conditions)
    if binds_to_node is not None:
        d["bindsToNode"] = binds_to_node
    if multi:
        d["allowMultipleAllocations"] = True
    if node_name is not None:
        d["nodeName"] = node_name
    if node_selector is not None:
        d["nodeSelector"] = node_selector
    if all_nodes:
        d["allNodes"] = True
    return d


def pool(name: str, count: int = 1, generation: int = 1) -> Raw:
    return {"name": name, "generation": generation, "resourceSliceCount": count}


def _slice(name: str, node_selection: Any, pool_: Any, driver: str) -> Raw:
    p = pool(pool_) if isinstance(pool_, str) else dict(pool_)
    spec: Raw = {"driver": driver, "pool": p}
    if isinstance(node_selection, dict):
        spec["nodeSelector"] = node_selection
    elif node_selection == ALL_NODES:
        spec["allNodes"] = True
    elif node_selection == PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = node_selection
    return {"metadata": {"name": name}, "spec": spec}


def slice_with(name: str, node_selection: Any, pool_: Any, driver: str, *devices: Raw) -> Raw:
    s = _slice(name, node_selection, pool_, driver)
    s["spec"]["devices"] = list(devices)
    return s


def slice_one(name: str, node_selection: Any, pool_: Any, driver: str) -> Raw:
    return slice_with(name, node_selection, pool_, driver, device(DEV1))


def slice_none(name: str, node_selection: Any, pool_: Any, driver: str) -> Raw:
    return slice_with(name, node_selection, pool_, driver)


def slice_many(name: str, node_selection: Any, pool_: Any, driver: str, n: int) -> Raw:
    return slice_with(name, node_selection, pool_, driver, *(device(f"device-{i}") for i in range(n)))


def counter_set(name: str, counters: Mapping[str, str]) -> Raw:
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def slice_counters(name: str, node_selection: Any, pool_: Any, driver: str, *sets: Raw) -> Raw:
    s = _slice(name, node_selection, pool_, driver)
    s["spec"]["sharedCounters"] = list(sets)
    return s


def with_generation(s: Raw, generation: int) -> Raw:
    s = copy.deepcopy(s)
    s["spec"]["pool"]["generation"] = generation
    return s


def label_selector(key: str, *values: str) -> Raw:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}


def local_selector(node_name: str) -> Raw:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


# --- requests and claims --------------------------------------------------------------------------------------


def _spec(
    cls: str,
    count: int | None,
    selectors: Iterable[Raw],
    mode: str | None,
    tolerations: Sequence[Raw],
    capacity: Mapping[str, str] | None,
) -> Raw:
    e: Raw = {"deviceClassName": cls}
    if mode is not None:
        e["allocationMode"] = mode
    if count is not None:
        e["count"] = count
    sels = list(selectors)
    if sels:
        e["selectors"] = sels
    if tolerations:
        e["tolerations"] = list(tolerations)
    if capacity is not None:
        e["capacity"] = {"requests": dict(capacity)}
    return e


def request(
    name: str,
    cls: str,
    count: int = 1,
    *selectors: Raw,
    admin: bool | None = None,
    tolerations: Sequence[Raw] = (),
    capacity: Mapping[str, str] | None = None,
    mode: str | None = "ExactCount",
) -> Raw:
    e = _spec(cls, count, selectors, mode, tolerations, capacity)
    if admin is not None:
        e["adminAccess"] = admin
    return {"name": name, "exactly": e}


def all_request(
    name: str,
    cls: str,
    *selectors: Raw,
    admin: bool | None = None,
    tolerations: Sequence[Raw] = (),
    capacity: Mapping[str, str] | None = None,
) -> Raw:
    e = _spec(cls, None, selectors, "All", tolerations, capacity)
    if admin is not None:
        e["adminAccess"] = admin
    return {"name": name, "exactly": e}


def cap_request(q: str) -> dict[str, str]:
    """``withCapacityRequest(q)``: request ``q`` of ``capacity-0``."""
    return {CAP0: q}


def sub(
    name: str,
    cls: str,
    count: int = 1,
    *selectors: Raw,
    mode: str | None = "ExactCount",
    tolerations: Sequence[Raw] = (),
    capacity: Mapping[str, str] | None = None,
) -> Raw:
    e = _spec(cls, count if mode != "All" else None, selectors, mode, tolerations, capacity)
    e["name"] = name
    return e


def first_available(name: str, *subs: Raw) -> Raw:
    return {"name": name, "firstAvailable": list(subs)}


def match(attribute: str, *requests: str) -> Raw:
    c: Raw = {"matchAttribute": attribute}
    if requests:
        c["requests"] = list(requests)
    return c


def distinct(attribute: str, *requests: str) -> Raw:
    c: Raw = {"distinctAttribute": attribute}
    if requests:
        c["requests"] = list(requests)
    return c


def claim_config(requests: Sequence[str], cfg: Raw) -> Raw:
    c: Raw = {"opaque": cfg}
    if requests:
        c["requests"] = list(requests)
    return c


@dataclass
class Claim:
    name: str
    spec: Raw
    uid: str = ""


def claim(
    name: str,
    *requests: Raw,
    constraints: Sequence[Raw] = (),
    config: Sequence[Raw] = (),
) -> Claim:
    devices: Raw = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    return Claim(name, {"devices": devices})


def simple_claim(name: str, req: str, cls: str, *constraints: Raw) -> Claim:
    """``claimWithRequest``."""
    return claim(name, request(req, cls, 1), constraints=constraints)


# --- expected results --------------------------------------------------------------------------------------


def result(
    req: str,
    driver: str,
    pool_: str,
    dev: str,
    admin: bool = False,
    *,
    tolerations: Sequence[Raw] = (),
    binding_conditions: Sequence[str] | None = None,
    binding_failure_conditions: Sequence[str] | None = None,
    share: bool = False,
    consumed: Mapping[str, str] | None = None,
) -> Raw:
    r: Raw = {"request": req, "driver": driver, "pool": pool_, "device": dev}
    if admin:
        r["adminAccess"] = True
    if tolerations:
        r["tolerations"] = [_norm_toleration(t) for t in tolerations]
    if binding_conditions:
        r["bindingConditions"] = list(binding_conditions)
    if binding_failure_conditions:
        r["bindingFailureConditions"] = list(binding_failure_conditions)
    if share or consumed is not None:
        r["shareID"] = FIXED_SHARE_ID
    if consumed:
        r["consumedCapacity"] = dict(consumed)
    return r


def allocation(selector: Raw | None, *results: Raw, config: Sequence[Raw] | None = None) -> Raw:
    devs: Raw = {"results": list(results)}
    if config:
        devs["config"] = list(config)
    out: Raw = {"devices": devs}
    if selector is not None:
        out["nodeSelector"] = selector
    return out


def config_entry(source: str, requests: Sequence[str] | None, cfg: Raw) -> Raw:
    e: Raw = {"source": source, "opaque": cfg}
    if requests:
        e["requests"] = list(requests)
    return e


# --- normalisation (order-insensitive comparison like gomega ConsistOf) ----------------------------------


def _norm_toleration(t: Mapping[str, Any]) -> Raw:
    out = {k: v for k, v in t.items() if v not in ("", None)}
    out.setdefault("operator", "Equal")
    return out


def _qty(v: Any) -> Fraction:
    return Quantity.parse(str(v)).value


def _norm_result(r: Mapping[str, Any]) -> str:
    r = dict(r)
    if "shareID" in r:
        assert r["shareID"], "empty shareID"
        r["shareID"] = FIXED_SHARE_ID
    if "consumedCapacity" in r:
        r["consumedCapacity"] = {k: str(_qty(v)) for k, v in r["consumedCapacity"].items()}
    if "tolerations" in r:
        r["tolerations"] = [_norm_toleration(t) for t in r["tolerations"]]
    return json.dumps(r, sort_keys=True)


def _norm_selector(sel: Mapping[str, Any] | None) -> Any:
    if sel is None:
        return None
    terms = []
    for t in sel.get("nodeSelectorTerms", []):
        term = {}
        for kind in ("matchExpressions", "matchFields"):
            reqs = sorted(
                json.dumps({"key": r["key"], "operator": r["operator"], "values": sorted(r.get("values", []))})
                for r in t.get(kind, [])
            )
            term[kind] = reqs
        terms.append(json.dumps(term, sort_keys=True))
    return sorted(terms)


def normalize(alloc: Mapping[str, Any]) -> Raw:
    devs = alloc.get("devices", {})
    out: Raw = {
        "results": sorted(_norm_result(r) for r in devs.get("results", [])),
        "config": [json.dumps(c, sort_keys=True) for c in devs.get("config", []) or []],
        "nodeSelector": _norm_selector(alloc.get("nodeSelector")),
    }
    assert "allocationTimestamp" not in alloc
    return out


def assert_allocations(got: Sequence[Mapping[str, Any]] | None, expected: Sequence[Mapping[str, Any]] | None) -> None:
    if expected is None:
        assert got is None, f"expected no allocation, got {got}"
        return
    assert got is not None, "expected an allocation, got None"
    assert [normalize(g) for g in got] == [normalize(e) for e in expected]


# --- running the allocator -------------------------------------------------------------------------------


@dataclass
class Outcome:
    allocations: list[ClaimAllocation] | None
    allocator: Allocator

    @property
    def raw(self) -> list[Raw] | None:
        return None if self.allocations is None else [a.raw for a in self.allocations]


def dev_result(
    driver: str, pool_: str, dev: str, *, share_id: str = "", consumed: Mapping[str, str] | None = None
) -> DeviceResult:
    return DeviceResult(
        request="r",
        driver=driver,
        pool=pool_,
        device=dev,
        admin_access=False,
        share_id=share_id,
        consumed_capacity={k: Quantity.parse(v) for k, v in (consumed or {}).items()},
    )


@dataclass
class Share:
    """An existing share of an ``allowMultipleAllocations`` device (AllocatedSharedDeviceIDs +
    AggregatedCapacity upstream); ``consumed`` None = persisted without consumedCapacity."""

    driver: str
    pool: str
    device: str
    consumed: Mapping[str, str] | None = None
    share_id: str = "bbbbbbbb-0000-0000-0000-000000000000"


def make_ledger(allocated: Iterable[tuple[str, str, str]] = (), shares: Iterable[Share] = ()) -> DeviceLedger:
    ledger = DeviceLedger()
    for i, (drv, p, d) in enumerate(allocated):
        ledger.observe_claim(f"allocated-{i}", f"default/allocated-{i}", (dev_result(drv, p, d),), "1")
    for i, s in enumerate(shares):
        ledger.observe_claim(
            f"shared-{i}",
            f"default/shared-{i}",
            (dev_result(s.driver, s.pool, s.device, share_id=s.share_id, consumed=s.consumed),),
            "1",
        )
    return ledger


def _ledger_state(ledger: DeviceLedger) -> Any:
    return (
        ledger.revision,
        repr(sorted(ledger._exclusive.items())),
        repr(sorted(ledger._shares.items())),
        repr(sorted(ledger._pool_devices.items())),
    )


@dataclass
class Inputs:
    claims: Sequence[Claim]
    classes: Sequence[Raw] = ()
    slices: Sequence[Raw] = ()
    node: Raw = field(default_factory=node)
    allocated: Sequence[tuple[str, str, str]] = ()
    shares: Sequence[Share] = ()
    features: Features = ALL_FEATURES


def run_outcome(
    claims: Sequence[Claim],
    classes: Sequence[Raw] = (),
    slices: Sequence[Raw] = (),
    node_: Raw | None = None,
    *,
    allocated: Sequence[tuple[str, str, str]] = (),
    shares: Sequence[Share] = (),
    features: Features = ALL_FEATURES,
    ledger: DeviceLedger | None = None,
    selectors: SelectorCache | None = None,
) -> Outcome:
    """Build pools and an allocator, allocate ``claims`` on ``node_`` and check nothing was mutated."""
    node_raw = node_ if node_ is not None else node()
    raw_before = copy.deepcopy((list(classes), list(slices), node_raw, [c.spec for c in claims]))
    n = node_from(node_raw)
    typed_slices = {}
    for i, s in enumerate(slices):
        # upstream tests may reuse a slice name in different pools; keep every object
        typed_slices[f"{i:04d}/{s['metadata']['name']}"] = slice_from(s)
    index = build_slice_index(typed_slices, 1)
    cls_map = {}
    for c in classes:
        tc = class_from(c)
        cls_map[tc.name] = tc
    if ledger is None:
        ledger = make_ledger(allocated, shares)
    pools = gather_pools(n, index.for_node(n.name), index.by_pool, features)
    specs = [
        ClaimInput(f"{c.name}", c.uid or f"uid-{c.name}-{i}", claim_spec_from(c.spec)) for i, c in enumerate(claims)
    ]
    typed_before = repr((n, sorted(typed_slices.items()), sorted(cls_map.items()), specs, pools))
    ledger_before = _ledger_state(ledger)
    alloc = Allocator(features, ledger, cls_map, selectors or SelectorCache(get_engine()))
    try:
        out = alloc.allocate(n, specs, pools)
    finally:
        assert repr((n, sorted(typed_slices.items()), sorted(cls_map.items()), specs, pools)) == typed_before, (
            "allocator mutated its typed inputs"
        )
        assert _ledger_state(ledger) == ledger_before, "allocator mutated the ledger"
        assert copy.deepcopy((list(classes), list(slices), node_raw, [c.spec for c in claims])) == raw_before, (
            "allocator mutated the raw inputs"
        )
    if out is not None:
        assert len(out) == len(claims)
    return Outcome(out, alloc)


def run(
    claims: Sequence[Claim],
    classes: Sequence[Raw] = (),
    slices: Sequence[Raw] = (),
    node_: Raw | None = None,
    **kw: Any,
) -> list[Raw] | None:
    """The raw ``status.allocation`` of every claim, None when they do not fit; raises on errors."""
    return run_outcome(claims, classes, slices, node_, **kw).raw
