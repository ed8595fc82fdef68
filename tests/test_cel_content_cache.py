"""Selector results shared by content (plugins/dra/cel.py: device_reads, content_key, SelectorCache.matches).

A selector that only reads single entries of ``device`` (``device.attributes["d"].x``, ``has(...)`` of one,
``device.capacity["d"].x``, ``device.driver``, ``device.allowMultipleAllocations``) gives the same result, or
the same error, on every device that agrees on those entries; SelectorCache then evaluates it once per distinct
content instead of once per device (and builds no DeviceInput/activation for the others). These tests check the
static analysis, that results and errors are those of an evaluation per device, and that the evaluations are
actually shared (counted), for both engines.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import celgen
import pytest
from test_cel import CASES, DEVICES

import plugins.dra.cel as cel_module
from plugins.dra.allocator import Allocator, ClaimInput
from plugins.dra.cel import DeviceReads, SelectorCache, available_engines, content_key, device_reads, get_engine
from plugins.dra.cel_engine import AttributeValue, DeviceInput, Program, device_input
from plugins.dra.cel_syntax import CELError
from plugins.dra.extended import device_totals
from plugins.dra.pools import Features, gather_pools
from scheduler.api.dra import Device, claim_spec_from, class_from, device_from, slice_from
from scheduler.api.model import node_from
from scheduler.api.quantity import Quantity, parse_quantity
from scheduler.api.semver import parse as semver
from scheduler.cache.cache import build_slice_index
from scheduler.cache.ledger import DeviceLedger

ENGINES = available_engines()
D = "d.example.com"
Raw = dict[str, Any]


# --- helpers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Content:
    """Raw device data (the DeviceContent protocol) with capacity given as Quantity values."""

    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


def dev(attributes: Mapping[str, Any] | None = None, capacity: Mapping[str, str] | None = None,
        multi: bool = False) -> Device:
    """A model device from ResourceSlice JSON: ``{"x": 1}`` -> ``{"x": {"int": 1}}`` (dict values as given)."""
    attrs: Raw = {}
    for k, v in (attributes or {}).items():
        if isinstance(v, dict):
            attrs[k] = v
        elif isinstance(v, bool):
            attrs[k] = {"bool": v}
        elif isinstance(v, int):
            attrs[k] = {"int": v}
        else:
            attrs[k] = {"string": v}
    raw: Raw = {"name": "dev", "attributes": attrs, "capacity": {k: {"value": q} for k, q in (capacity or {}).items()}}
    if multi:
        raw["allowMultipleAllocations"] = True
    return device_from(raw, "device")


def to_input(driver: str, d: Device | Content) -> DeviceInput:
    caps = {k: (v if isinstance(v, Quantity) else v.value) for k, v in d.capacity.items()}
    return device_input(driver, d.attributes, caps, d.allow_multiple_allocations)


def outcome(fn: Any) -> tuple[str, object]:
    try:
        return "result", fn()
    except CELError as e:
        return type(e).__name__, str(e)


class Probe:
    """One SelectorCache with content keys, plus what an evaluation per device gives (the reference)."""

    def __init__(self, engine_name: str) -> None:
        self.engine = get_engine(engine_name)
        self.cache = SelectorCache(self.engine)
        self.built: list[Any] = []  # device keys whose DeviceInput had to be built
        self._programs: dict[str, Program | CELError] = {}
        self._n = 0

    def reference(self, expr: str, driver: str, d: Device | Content) -> tuple[str, object]:
        program = self._programs.get(expr)
        if program is None:
            try:
                program = self._programs[expr] = self.engine.compile(expr)
            except CELError as e:
                program = self._programs[expr] = e
        if isinstance(program, CELError):
            return type(program).__name__, str(program)
        p = program
        return outcome(lambda: p.matches(to_input(driver, d)))

    def cached(self, expr: str, driver: str, d: Device | Content, key: object = None) -> tuple[str, object]:
        if key is None:
            self._n += 1
            key = ("device", self._n)

        def build() -> DeviceInput:
            self.built.append(key)
            return to_input(driver, d)

        return outcome(lambda: self.cache.matches(expr, key, build, driver=driver, content=d))

    def check(self, expr: str, driver: str, d: Device | Content) -> tuple[str, object]:
        got = self.cached(expr, driver, d)
        assert got == self.reference(expr, driver, d), (expr, driver, d)
        return got


# --- the analysis ---------------------------------------------------------------------------------------------

A = f'device.attributes["{D}"]'
C = f'device.capacity["{D}"]'

CACHEABLE: list[tuple[str, DeviceReads]] = [
    ("true", DeviceReads(False, False, (), ())),
    (f'device.driver == "{D}"', DeviceReads(True, False, (), ())),
    ("device.allowMultipleAllocations", DeviceReads(False, True, (), ())),
    (f"{A}.x == 1", DeviceReads(False, False, ((D, "x"),), ())),
    (f'{A}["x"] == 1', DeviceReads(False, False, ((D, "x"),), ())),
    (f"device.attributes.`{D}`.x == 1", DeviceReads(False, False, ((D, "x"),), ())),
    ("device.attributes.gpu.x == 1", DeviceReads(False, False, (("gpu", "x"),), ())),
    (f".device.attributes['{D}'].x == 1", DeviceReads(False, False, ((D, "x"),), ())),
    (f"{A}.x.y == 1", DeviceReads(False, False, ((D, "x"),), ())),
    (f'{A}["x"]["y"] == 1', DeviceReads(False, False, ((D, "x"),), ())),
    (f"has({A}.x)", DeviceReads(False, False, ((D, "x"),), ())),
    (f"has({A}.x.y)", DeviceReads(False, False, ((D, "x"),), ())),
    (f"{A}.?x.orValue(0) == 1", DeviceReads(False, False, ((D, "x"),), ())),
    (f'{A}[?"x"].hasValue()', DeviceReads(False, False, ((D, "x"),), ())),
    (f'{C}.memory.compareTo(quantity("1Gi")) >= 0', DeviceReads(False, False, (), ((D, "memory"),))),
    (f"has({C}.memory)", DeviceReads(False, False, (), ((D, "memory"),))),
    ('device.attributes["a/b"].c == 1', DeviceReads(False, False, (("a/b", "c"),), ())),
    (f'device.attributes[r"{D}"].x == 1', DeviceReads(False, False, ((D, "x"),), ())),
    (f"[1, 2].exists(i, {A}.x == i)", DeviceReads(False, False, ((D, "x"),), ())),
    (f"cel.bind(v, {A}.x, v == 1 || v == 2)", DeviceReads(False, False, ((D, "x"),), ())),
    (f"{A}.tags.exists(t, t == 'a')", DeviceReads(False, False, ((D, "tags"),), ())),
    (
        f'device.driver == "{D}" && {A}.z == 1 && {A}.a == 2 && device.attributes["o.io"].m == "x" '
        f"&& {C}.mem.isInteger() && device.allowMultipleAllocations",
        DeviceReads(True, True, ((D, "a"), (D, "z"), ("o.io", "m")), ((D, "mem"),)),
    ),
]

NOT_CACHEABLE = [
    "device == null",
    "device.foo == 1",
    f"{A}.size() > 0",
    f"size({A}) > 0",
    f'"x" in {A}',
    f'"{D}" in device.attributes',
    f'{A}.exists(k, k == "x")',
    f'{A}.all(k, v, v == 1)',
    f'{A} == {{"x": 1}}',
    "has(device.attributes.dom)",
    "has(device.driver)",
    f"{A}[device.driver] == 1",
    "device.attributes[device.driver].x == 1",
    f'device.attributes[?"{D}"].x == 1',
    "device.attributes.?dom.x == 1",
    f"{A}[1] == 1",
    f'device.attributes[b"{D}"].x == 1',
    f'device.attributes["{D}" + ""].x == 1',
    f"cel.bind(a, {A}, a.x == 1)",
    "cel.bind(m, device.attributes, m.size() == 0)",
    "cel.bind(device, 1, device == 1)",
    "[1].exists(device, device == 1)",
    "[1].map(device, device + 1).size() == 1",
    f"[{A}].size() == 1",
    "device.capacity.exists(d, true)",
    f"{A}.x == 1 && device.capacity == {{}}",
    f"{A}.x == 1 && device.attributes.size() > 0",
    "device.driver.size() > 0 && device(1)",
    "1 +",
]


@pytest.mark.parametrize(("expression", "reads"), CACHEABLE, ids=[c[0][:60] for c in CACHEABLE])
def test_reads_of_cacheable_selectors(expression: str, reads: DeviceReads) -> None:
    assert device_reads(expression) == reads


@pytest.mark.parametrize("expression", NOT_CACHEABLE)
def test_selectors_using_device_otherwise_are_not_cacheable(expression: str) -> None:
    assert device_reads(expression) is None


def test_the_semantics_table_is_mostly_cacheable() -> None:
    """Most of test_cel.py's expressions read single entries; the rest use whole maps or domains."""
    reads = {c[1]: device_reads(c[1]) for c in CASES}
    assert sum(r is not None for r in reads.values()) >= len(reads) // 2
    assert reads['"dra.example.com" in device.attributes'] is None
    assert reads['device.attributes["dra.example.com"].cores == 42'] is not None


# --- content keys ---------------------------------------------------------------------------------------------


def _key(expression: str, driver: str, d: Device | Content) -> object:
    reads = device_reads(expression)
    assert reads is not None
    return content_key(reads, driver, d)


def test_content_key_tags_values_by_type() -> None:
    e = f"{A}.x == 1"
    keys = [
        _key(e, D, dev({"x": True})),
        _key(e, D, dev({"x": 1})),
        _key(e, D, dev({"x": "1"})),
        _key(e, D, dev({"x": {"ints": [1]}})),
        _key(e, D, dev({"x": {"bools": [True]}})),
        _key(e, D, dev({"x": {"version": "1.0.0"}})),
        _key(e, D, dev({})),
    ]
    assert len(set(keys)) == len(keys)
    assert _key(e, D, dev({"x": 1, "unread": 1})) == _key(e, D, dev({"x": 1, "other.io/y": "z"}))


def test_content_key_keeps_versions_and_quantities_exact() -> None:
    e = f"{A}.v == semver('1.0.0')"
    assert _key(e, D, dev({"v": {"version": "1.0.0+a"}})) != _key(e, D, dev({"v": {"version": "1.0.0+b"}}))
    assert _key(e, D, dev({"v": {"version": "1.0.0+a"}})) == _key(e, D, dev({"v": {"version": "1.0.0+a"}}))
    q = f"{C}.m.isInteger()"
    assert _key(q, D, dev(capacity={"m": "1Gi"})) != _key(q, D, dev(capacity={"m": "1024Mi"}))
    assert _key(q, D, dev(capacity={"m": "1Gi"})) == _key(q, D, dev(capacity={"m": "1Gi", "n": "5"}))


def test_content_key_resolves_bare_names_like_device_input() -> None:
    e = f"{A}.x == 1"
    assert _key(e, D, dev({"x": 1})) == _key(e, D, dev({f"{D}/x": 1}))
    assert _key(e, "other.io", dev({"x": 1})) != _key(e, D, dev({"x": 1}))
    # both spellings present: the later one wins in device_input, and in the key
    assert _key(e, D, dev({"x": 1, f"{D}/x": 2})) == _key(e, D, dev({f"{D}/x": 2}))
    assert _key(e, D, dev({f"{D}/x": 2, "x": 1})) == _key(e, D, dev({"x": 1}))
    # "a/b/c" is domain "a", identifier "b/c": it is not (domain "a/b", identifier "c")
    f = 'device.attributes["a/b"].c == 1'
    assert _key(f, D, dev({"a/b/c": 1})) == _key(f, D, dev({}))
    assert _key(f, "a/b", Content({"c": 1})) != _key(f, "a/b", Content({}))


def test_content_key_refuses_values_an_engine_cannot_take() -> None:
    e = f"{A}.x == 1"
    assert _key(e, D, Content({"x": 1, "big": 2**63})) is None
    assert _key(e, D, Content({"x": 1, "bigs": (1, -(2**63) - 1)})) is None
    assert _key(e, D, Content({"x": 1, "ok": 2**63 - 1})) is not None
    assert _key(f"{C}.m.isInteger()", D, Content({}, {"m": "1Gi"})) is None  # type: ignore[dict-item]


# --- results through SelectorCache (both engines) -----------------------------------------------------------

FLEET_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


@pytest.mark.parametrize("engine_name", ENGINES)
def test_devices_differing_only_in_unread_attributes_share_one_evaluation(engine_name: str) -> None:
    p = Probe(engine_name)
    devices = [
        dev({"type": "gpu", "uuid": f"GPU-{i}", "resource.kubernetes.io/pciBusID": f"0000:{i:02x}:00.0",
             "index": i}, {"memory": "80Gi"})
        for i in range(40)
    ]
    for d in devices:
        assert p.check(FLEET_SELECTOR, "gpu.nvidia.com", d) == ("result", True)
    assert p.cache.stats.evaluations == 1
    assert p.cache.stats.content_hits == 39
    assert len(p.built) == 1  # one DeviceInput (and activation) for 40 devices
    # the same devices again: answered by their device keys
    for i, d in enumerate(devices):
        assert p.cached(FLEET_SELECTOR, "gpu.nvidia.com", d, key=("device", i + 1)) == ("result", True)
    assert (p.cache.stats.evaluations, p.cache.stats.hits) == (1, 40)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_devices_differing_in_a_read_attribute_are_evaluated_apart(engine_name: str) -> None:
    p = Probe(engine_name)
    results = [p.check(FLEET_SELECTOR, "gpu.nvidia.com", dev({"type": t, "uuid": f"u{i}"}))
               for i, t in enumerate(["gpu", "mig", "gpu", "mig", "vfio"])]
    assert results == [("result", True), ("result", False), ("result", True), ("result", False), ("result", False)]
    assert p.cache.stats.evaluations == 3
    assert p.check(FLEET_SELECTOR, "compute-domain.nvidia.com", dev({"type": "gpu"})) == ("result", False)
    assert p.cache.stats.evaluations == 4  # another driver: another content


@pytest.mark.parametrize("engine_name", ENGINES)
def test_bool_and_int_do_not_share(engine_name: str) -> None:
    p = Probe(engine_name)
    for e in (f"{A}.x == 1", f"{A}.x == true", f"string({A}.x) == '1'", f"{A}.x == [1]", f"{A}.x == [true]"):
        for d in (dev({"x": True}), dev({"x": 1}), dev({"x": {"bools": [True]}}), dev({"x": {"ints": [1]}})):
            p.check(e, D, d)
    assert p.cache.stats.content_hits == 0
    assert p.check(f"{A}.x == 1", D, dev({"x": True})) == ("result", False)
    assert p.check(f"{A}.x == 1", D, dev({"x": 1})) == ("result", True)
    assert p.cache.stats.content_hits == 2


@pytest.mark.parametrize("engine_name", ENGINES)
def test_absent_and_present_do_not_share(engine_name: str) -> None:
    p = Probe(engine_name)
    e = f"has({A}.x)"
    assert p.check(e, D, dev({"y": 1})) == ("result", False)
    assert p.check(e, D, dev({"x": 0})) == ("result", True)
    assert p.check(e, D, dev({"other.io/x": 0})) == ("result", False)  # another domain: still absent
    assert p.check(e, D, dev({})) == ("result", False)  # no attribute at all in the domain: the same content
    assert (p.cache.stats.evaluations, p.cache.stats.content_hits) == (2, 2)
    if engine_name == "cel-expr-python":  # optional syntax (cel-python has none)
        o = f"{A}.?x.orValue(0) == 0"
        assert [p.check(o, D, d)[1] for d in (dev({}), dev({"x": 0}), dev({"x": 1}), dev({"y": 1}))] == [
            True, True, False, True,
        ]


@pytest.mark.parametrize("engine_name", ENGINES)
def test_driver_qualified_and_bare_names(engine_name: str) -> None:
    p = Probe(engine_name)
    e = f"{A}.x == 1"
    assert p.check(e, D, dev({"x": 1})) == ("result", True)
    assert p.check(e, D, dev({f"{D}/x": 1, "y": 2})) == ("result", True)
    assert p.cache.stats.evaluations == 1  # same entry, spelled two ways
    assert p.check(e, "other.io", dev({"x": 1}))[0] == "CELRuntimeError"  # bare x is other.io's
    assert p.check(e, D, dev({"x": 1, f"{D}/x": 2})) == ("result", False)
    assert p.check(e, D, dev({f"{D}/x": 2, "x": 1})) == ("result", True)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_versions_differing_in_build_metadata(engine_name: str) -> None:
    p = Probe(engine_name)
    for e in (f"{A}.v == semver('1.0.0')", f"{A}.v.isGreaterThan(semver('0.9.0'))", f"{A}.v.major() == 1"):
        for v in ("1.0.0+a", "1.0.0+b", "1.0.0", "1.0.0-rc.1"):
            p.check(e, D, dev({"v": {"version": v}, "other": v}))
    assert p.cache.stats.evaluations == 12 and p.cache.stats.content_hits == 0


@pytest.mark.parametrize("engine_name", ENGINES)
def test_errors_are_shared_like_results(engine_name: str) -> None:
    p = Probe(engine_name)
    e = f"{A}.x > 1"
    errors = {p.check(e, D, dev({"y": i})) for i in range(5)}
    assert len(errors) == 1 and next(iter(errors))[0] == "CELRuntimeError"
    assert "no such key: x" in str(next(iter(errors))[1])
    assert p.check(e, D, dev({"x": 2, "y": 0})) == ("result", True)
    assert p.check(e, D, dev({"x": "two"}))[0] == "CELRuntimeError"  # no such overload
    assert p.cache.stats.evaluations == 3
    assert len(p.built) == 3


@pytest.mark.parametrize("engine_name", ENGINES)
def test_a_device_the_engine_cannot_take_still_fails(engine_name: str) -> None:
    """An unread int beyond int64 makes the activation, hence every selector on that device, fail: never
    answered from an equal-content device."""
    p = Probe(engine_name)
    e = f"{A}.x == 1"
    assert p.check(e, D, Content({"x": 1})) == ("result", True)
    got = p.check(e, D, Content({"x": 1, "huge": 2**63}))
    assert got[0] == "CELRuntimeError" and "unsupported attribute value" in str(got[1])


@pytest.mark.parametrize("engine_name", ENGINES)
def test_quantities_and_allow_multiple_allocations(engine_name: str) -> None:
    p = Probe(engine_name)
    e = f'{C}.m.compareTo(quantity("1Gi")) == 0'
    assert [p.check(e, D, dev(capacity={"m": m}))[1] for m in ("1Gi", "1024Mi", "1Gi", "2Gi")] == [
        True, True, True, False,
    ]
    assert (p.cache.stats.evaluations, p.cache.stats.content_hits) == (3, 1)
    m = "device.allowMultipleAllocations"
    assert [p.check(m, D, dev(multi=x))[1] for x in (True, False, True)] == [True, False, True]
    unread = f'device.driver == "{D}"'
    assert [p.check(unread, D, dev(multi=x))[1] for x in (True, False)] == [True, True]
    assert p.cache.stats.evaluations == 6


@pytest.mark.parametrize("engine_name", ENGINES)
def test_uncacheable_selectors_keep_the_per_device_path(engine_name: str) -> None:
    p = Probe(engine_name)
    e = f'"x" in {A}'
    for i in range(4):
        p.check(e, D, dev({"x": 1, "y": i}))
    assert (p.cache.stats.evaluations, p.cache.stats.content_hits, len(p.built)) == (4, 0, 4)


def test_without_content_the_cache_is_per_device() -> None:
    cache = SelectorCache(get_engine(ENGINES[0]))
    for i in range(3):
        assert cache.matches(FLEET_SELECTOR, i, to_input("gpu.nvidia.com", dev({"type": "gpu"})))
    assert (cache.stats.evaluations, cache.stats.content_hits) == (3, 0)


def test_bounded_tables_count_content_entries() -> None:
    cache = SelectorCache(get_engine(ENGINES[0]), max_results=4)
    for i in range(10):
        d = dev({"type": "gpu", "i": i % 3})
        assert cache.matches("device.attributes['gpu.nvidia.com'].i == 1" if i % 2 else FLEET_SELECTOR, i,
                             lambda d=d: to_input("gpu.nvidia.com", d), driver="gpu.nvidia.com", content=d) in (
            True, False,
        )
    assert len(cache) <= 4 and cache.stats.clears >= 1


def test_sabotage_an_untyped_key_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above detect a lossy key: with values keyed untyped (True == 1), a device answers with
    another's result."""
    monkeypatch.setattr(cel_module, "_tag", lambda v: v)
    p = Probe(ENGINES[0])
    e = f"{A}.x == 1"
    assert p.cached(e, D, dev({"x": True})) == ("result", False)
    assert p.cached(e, D, dev({"x": 1})) != p.reference(e, D, dev({"x": 1}))


# --- through the allocator and the extended-resource totals -------------------------------------------------


def test_allocator_evaluates_once_per_distinct_content() -> None:
    driver = "driver-a"
    selectors = SelectorCache(get_engine())
    classes = {"class-a": class_from({"metadata": {"name": "class-a"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{driver}" && device.attributes["{driver}"].type == "gpu"'}}]}})}
    slices = {}
    for n in range(3):
        devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"{n}-{i}"},
                                                      "index": {"int": i}}} for i in range(8)]
        slices[f"s{n}"] = slice_from({"metadata": {"name": f"s{n}"}, "spec": {
            "driver": driver, "nodeName": f"node-{n}", "pool": {"name": f"p{n}", "generation": 1,
                                                                "resourceSliceCount": 1}, "devices": devices}})
    idx = build_slice_index(slices, 1)
    alloc = Allocator(Features(), DeviceLedger(), classes, selectors)
    spec = claim_spec_from({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "class-a", "count": 8,
        "selectors": [{"cel": {"expression": f'device.attributes["{driver}"].index >= 0'}}]}}]}})
    for n in range(3):
        node = node_from({"metadata": {"name": f"node-{n}"}})
        got = alloc.allocate(node, [ClaimInput("c", "uid", spec)], gather_pools(node, idx.for_node(node.name),
                                                                               idx.by_pool, Features()))
        assert got is not None and len(got[0].results) == 8
    # the class selector: one content for 24 devices; the request selector: 8 contents (index 0..7)
    assert selectors.stats.evaluations == 1 + 8
    assert selectors.stats.content_hits == 23 + 16
    assert len(alloc.device_inputs) == 8


def test_extended_resource_totals_share_evaluations() -> None:
    node = node_from({"metadata": {"name": "n1"}})
    s = slice_from({"metadata": {"name": "s"}, "spec": {
        "driver": D, "nodeName": "n1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"uuid": {"string": str(i)}}} for i in range(6)]}})
    cls = class_from({"metadata": {"name": "c"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{D}"'}}]}})
    cache = SelectorCache(get_engine())
    assert device_totals(node, [s], cls, DeviceLedger(), cache) == (6, 0)
    assert (cache.stats.evaluations, cache.stats.content_hits) == (1, 5)


# --- property check: cached == evaluated per device ---------------------------------------------------------


def _model_device(raw: Raw) -> tuple[str, Device]:
    d = device_from({"name": "d", "attributes": raw["attributes"], "capacity": raw["capacity"],
                     "allowMultipleAllocations": raw["allowMultipleAllocations"]}, "device")
    return raw["driver"], d


def _variants(rng: random.Random, raw: Raw) -> list[Raw]:
    """The device, and copies that differ in what most selectors do not read (extra attributes and capacity,
    bare names spelled qualified, another driver now and then)."""
    out = [raw]
    for _ in range(3):
        v = {**raw, "attributes": dict(raw["attributes"]), "capacity": dict(raw["capacity"])}
        v["attributes"][f"unread{rng.randint(0, 9)}"] = {"int": rng.randint(0, 3)}
        v["attributes"]["x.example.com/serial"] = {"string": str(rng.random())}
        if rng.random() < 0.5:
            for k in [k for k in v["attributes"] if "/" not in k and not k.startswith("unread")]:
                v["attributes"][f"{celgen.DRIVER}/{k}"] = v["attributes"].pop(k)
        if rng.random() < 0.3:
            v["capacity"]["spare"] = {"value": str(rng.randint(1, 9))}
        if rng.random() < 0.1:
            v["driver"] = celgen.OTHER
        out.append(v)
    return out


@pytest.mark.parametrize("engine_name", ENGINES)
def test_cached_results_equal_per_device_evaluation(engine_name: str) -> None:
    rng = random.Random(20261125)
    n_expr = 600 if engine_name == "cel-expr-python" else 250
    expressions = [celgen.expression(rng, rng.randint(1, 4)) for _ in range(n_expr)]
    expressions += [c[1] for c in CASES]
    raws = [r for _ in range(6) for r in _variants(rng, celgen.device(rng))]
    devices = [_model_device(r) for r in raws]
    p = Probe(engine_name)
    compared = 0
    for expr in expressions:
        for driver, d in devices:
            p.check(expr, driver, d)
            compared += 1
    assert compared == len(expressions) * len(devices)
    assert p.cache.stats.content_hits > compared // 4  # sharing happened, and matched the reference
    assert sum(device_reads(e) is not None for e in expressions) > len(expressions) // 2


@pytest.mark.parametrize("engine_name", ENGINES)
def test_semantics_table_devices_cached_equal_per_device(engine_name: str) -> None:
    """test_cel.py's expressions on its devices, given as raw data (qualified names, and bare names for the
    driver's domain), each device twice under different device keys."""
    p = Probe(engine_name)
    contents: list[tuple[str, Content]] = []
    for di in DEVICES.values():
        qualified = {f"{dom}/{k}": v for dom, ids in di.attributes.items() for k, v in ids.items()}
        bare = {(k if dom == di.driver else f"{dom}/{k}"): v for dom, ids in di.attributes.items()
                for k, v in ids.items()}
        caps = {f"{dom}/{k}": q for dom, ids in di.capacity.items() for k, q in ids.items()}
        contents.append((di.driver, Content(qualified, caps, di.allow_multiple_allocations)))
        contents.append((di.driver, Content({**bare, "zz.io/unread": 1}, caps, di.allow_multiple_allocations)))
    for _, expr, _, _ in CASES:
        for driver, c in contents:
            p.check(expr, driver, c)
    assert p.cache.stats.content_hits > 0


def test_content_matches_the_device_input_it_stands_for() -> None:
    """The raw lookup agrees with device_input on every (domain, id) of every device above."""
    d = dev({"x": 1, f"{D}/y": "s", "o.io/z": True, "a/b/c": 2}, {"m": "1Gi", "o.io/n": "2"})
    di = to_input(D, d)
    for dom, ids in di.attributes.items():
        for k, v in ids.items():
            assert cel_module._raw_entry(d.attributes, D, dom, k) == v
    for dom, ids in di.capacity.items():
        for k, q in ids.items():
            assert cel_module._raw_entry(d.capacity, D, dom, k).value == q
    assert semver("1.0.0") == semver("1.0.0+x")  # why versions are keyed by their text, not by ==
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")  # and quantities by value, format and text
