"""The Kubernetes DRA CEL environment: one semantics table run against every available engine."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from plugins.dra.cel import SelectorCache, available_engines, get_engine
from plugins.dra.cel_cost import estimate_cost
from plugins.dra.cel_engine import COST_LIMIT, DeviceInput, device_input
from plugins.dra.cel_syntax import CELCompileError, CELError, CELRuntimeError, parse_expression, unparse
from scheduler.api.quantity import parse_quantity
from scheduler.api.semver import parse as semver

ENGINES = available_engines()
DRIVER = "dra.example.com"

DEVICES: dict[str, DeviceInput] = {
    "empty": device_input("", {}, {}),
    "driver-only": device_input(DRIVER, {}, {}),
    "worker": device_input(
        DRIVER,
        {
            "name": "worker",
            "other.example.com/name": "other",
            "dra.example.com/path": "a/b/c",
            "enabled": True,
            "cores": 42,
            "version": semver("1.0.0"),
        },
        {"name": parse_quantity("1Mi"), "memory": parse_quantity("80Gi")},
    ),
    "bind": device_input(DRIVER, {"name": True}, {}),
    "seven-cores": device_input(DRIVER, {"cores": 7}, {}),
    "multi": device_input(DRIVER, {}, {}, allow_multiple_allocations=True),
    "single": device_input(DRIVER, {}, {}, allow_multiple_allocations=False),
    "a100": device_input(
        "gpu.nvidia.com",
        {"productName": "NVIDIA A100-SXM4-80GB", "driverVersion": semver("550.54.15"), "index": 3},
        {"memory": parse_quantity("80Gi")},
    ),
}

_L10 = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
EXPENSIVE = (
    f"{_L10}.all(x, {_L10}.all(y, {_L10}.all(z, {_L10}.all(z2, {_L10}.all(z3, {_L10}.all(z4, "
    f"{_L10}.all(z5, int('1'.find('[0-9]*')) < 100)))))))"
)


@dataclass(frozen=True)
class Err:
    kind: type[CELError]
    contains: str = ""


Expect = bool | Err
NO_SUCH_KEY = "consider using CEL optional chaining (.? followed by orValue())"

# (id, expression, device, expectation or {engine: expectation})
CASES: list[tuple[str, str, str, Expect | dict[str, Expect]]] = [
    # --- dra-semantics.md §3.4 (compile_test.go), scalar attributes -------------------------------
    ("true", "true", "empty", True),
    ("false", "false", "empty", False),
    ("syntax-error", "?!", "empty", Err(CELCompileError, "Syntax error")),
    ("type-error", "1", "empty", Err(CELCompileError, "must evaluate to bool or the unknown type, not int")),
    (
        "runtime-error-lookup-identifier",
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        "empty",
        Err(CELRuntimeError, "no such key: noSuchAttr"),
    ),
    (
        "runtime-error-lookup-map",
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        "empty",
        Err(CELRuntimeError, "no such key: noSuchAttr. " + NO_SUCH_KEY),
    ),
    ("domain-check-negative", '"no-such-domain" in device.attributes', "worker", False),
    ("domain-check-positive", '"dra.example.com" in device.attributes', "worker", True),
    ("empty-driver-name", 'device.driver == ""', "empty", True),
    ("real-driver-name", 'device.driver == "dra.example.com"', "driver-only", True),
    ("driver-name-qualifier", 'device.attributes["dra.example.com"].name == "worker"', "worker", True),
    (
        "driver-name-qualifier-map-lookup",
        'device.attributes["dra.example.com"]["name"] == "worker"',
        "worker",
        True,
    ),
    ("bind", 'cel.bind(dra, device.attributes["dra.example.com"], dra.name)', "bind", True),
    (
        "bind-nested",
        'cel.bind(a, device.attributes["dra.example.com"], cel.bind(b, a.cores, b > 40 && a.enabled))',
        "worker",
        True,
    ),
    ("qualified-attribute-name", 'device.attributes["other.example.com"].name == "other"', "worker", True),
    ("bool", 'device.attributes["dra.example.com"].enabled', "worker", True),
    ("int", 'device.attributes["dra.example.com"].cores == 42', "worker", True),
    ("string", 'device.attributes["dra.example.com"].name == "worker"', "worker", True),
    (
        "version",
        'device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1"))',
        "worker",
        True,
    ),
    (
        "version_v",
        'device.attributes["dra.example.com"].version == semver("v1.0", true) && isSemver("v1.0.0", true)',
        "worker",
        True,
    ),
    ("quantity", 'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', "worker", True),
    (
        "check-positive",
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        "worker",
        True,
    ),
    (
        "check-negative",
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        "driver-only",
        True,
    ),
    (
        "all",
        'device.driver == "dra.example.com" && device.attributes["dra.example.com"].name == "worker" && '
        'device.attributes["dra.example.com"]["cores"] == 42 && '
        'device.capacity["dra.example.com"]["memory"].compareTo(quantity("40Gi")) > 0',
        "worker",
        True,
    ),
    ("check_attribute_domains", 'device.attributes.exists_one(x, x == "dra.example.com")', "worker", True),
    (
        "check_attribute_ids",
        'device.attributes["dra.example.com"].exists_one(x, x == "cores")',
        "worker",
        True,
    ),
    ("check_capacity_domains", 'device.capacity.exists_one(x, x == "dra.example.com")', "worker", True),
    (
        "check_capacity_ids",
        'device.capacity["dra.example.com"].all(x, x == "name" || x == "memory")',
        "worker",
        True,
    ),
    (
        "split_attribute",
        'device.attributes["dra.example.com"].path.split("/").size() == 3',
        "worker",
        True,
    ),
    ("regexp_attribute", 'device.attributes["dra.example.com"].name.matches("^w.*r$")', "worker", True),
    ("expensive", EXPENSIVE, "empty", Err(CELRuntimeError, "actual cost limit exceeded")),
    ("allow_multiple_allocations_default", "device.allowMultipleAllocations == false", "driver-only", True),
    ("allow_multiple_allocations", "device.allowMultipleAllocations == true", "multi", True),
    ("allow_multiple_allocations_false", "device.allowMultipleAllocations == false", "single", True),
    (
        "non-bool-result",
        'device.attributes["dra.example.com"].cores',
        "worker",
        Err(CELRuntimeError, "CEL result of type int could not be converted to bool"),
    ),
    (
        "non-bool-result-string",
        'device.attributes["dra.example.com"].name',
        "worker",
        Err(CELRuntimeError, "CEL result of type string could not be converted to bool"),
    ),
    # --- unknown domains / identifiers --------------------------------------------------------------
    ("unknown-domain-in", '"x" in device.attributes["no.such"]', "worker", False),
    ("unknown-domain-has", 'has(device.attributes["no.such"].x)', "worker", False),
    ("unknown-domain-size", 'size(device.attributes["no.such"]) == 0', "worker", True),
    (
        "unknown-domain-guarded",
        '"no.such" in device.attributes && device.attributes["no.such"].x == 1',
        "worker",
        False,
    ),
    (
        "unknown-capacity-domain",
        'device.capacity["no.such"].memory.isGreaterThan(quantity("1"))',
        "worker",
        Err(CELRuntimeError, "no such key: memory"),
    ),
    (
        "unknown-identifier",
        'device.attributes["dra.example.com"].missing == "x"',
        "worker",
        Err(CELRuntimeError, "no such key: missing"),
    ),
    ("has-known", 'has(device.attributes["dra.example.com"].name)', "worker", True),
    ("has-missing", 'has(device.attributes["dra.example.com"].missing)', "worker", False),
    ("bind-domain-map-alias", 'cel.bind(m, device.attributes, "x" in m["no.such"])', "worker", False),
    ("error-absorbed-by-and", 'device.driver == "x" && device.attributes["x"].missing', "worker", False),
    ("error-absorbed-by-and-left", 'device.attributes["x"].missing && device.driver == "x"', "worker", False),
    ("error-absorbed-by-or", 'device.attributes["x"].missing || device.driver == "dra.example.com"', "worker", True),
    (
        "error-not-absorbed",
        'device.attributes["x"].missing || device.driver == "x"',
        "worker",
        Err(CELRuntimeError, "no such key: missing"),
    ),
    # --- quantity library ---------------------------------------------------------------------------
    (
        "quantity-ge-rejected",
        'device.capacity["dra.example.com"].memory >= quantity("40Gi")',
        "worker",
        Err(CELCompileError, "no matching overload"),
    ),
    ("quantity-lt-literal-rejected", 'quantity("1") < quantity("2")', "empty", Err(CELCompileError, "_<_")),
    ("quantity-1G-lt-1Gi", 'quantity("1G").isLessThan(quantity("1Gi"))', "empty", True),
    ("quantity-compare", 'quantity("200M").compareTo(quantity("0.2G")) == 0', "empty", True),
    ("quantity-compare-less", 'quantity("50M").compareTo(quantity("50Mi")) == -1', "empty", True),
    ("quantity-equal", 'quantity("1Ki") == quantity("1024")', "empty", True),
    ("quantity-not-equal", 'quantity("1Ki") != quantity("1k")', "empty", True),
    (
        "quantity-arith",
        'quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")',
        "empty",
        True,
    ),
    ("quantity-add", 'quantity("50k").add(quantity("20k")) == quantity("70k")', "empty", True),
    ("quantity-is-integer", 'quantity("50k").isInteger() && !quantity("1.5").isInteger()', "empty", True),
    ("quantity-as-integer", 'quantity("50k").asInteger() == 50000', "empty", True),
    (
        "quantity-as-integer-error",
        'quantity("1.5").asInteger() == 1',
        "empty",
        Err(CELRuntimeError, "cannot convert value to integer"),
    ),
    ("quantity-float", 'quantity("50k").sub(20000).asApproximateFloat() == 30000.0', "empty", True),
    ("quantity-sign", 'sign(quantity("-5")) == -1 && sign(quantity("0")) == 0', "empty", True),
    ("is-quantity", 'isQuantity("1.3Gi") && !isQuantity("200K") && !isQuantity("Mi")', "empty", True),
    ("quantity-invalid", 'sign(quantity("200K")) == 1', "empty", Err(CELRuntimeError, "")),
    (
        "quantity-vs-semver",
        'quantity("1").compareTo(semver("1.0.0")) == 0',
        "empty",
        Err(CELCompileError, "no matching overload"),
    ),
    # --- semver library -----------------------------------------------------------------------------
    ("semver-compare", 'semver("1.2.3").compareTo(semver("1.10.0")) == -1', "empty", True),
    ("semver-prerelease", 'semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', "empty", True),
    (
        "semver-parts",
        'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3',
        "empty",
        True,
    ),
    ("semver-normalize", 'semver("01.01", true) == semver("1.1.0")', "empty", True),
    ("is-semver", '!isSemver("v1.0") && isSemver("v1.0", true) && isSemver("1.0.0-rc.1+b")', "empty", True),
    ("semver-lt-rejected", 'semver("1.0.0") < semver("2.0.0")', "empty", Err(CELCompileError, "_<_")),
    ("semver-invalid", 'semver("v1.0.0").major() == 1', "empty", Err(CELRuntimeError, "")),
    (
        "version-attribute",
        'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("535.0.0"))',
        "a100",
        True,
    ),
    # --- the benchmark selector ---------------------------------------------------------------------
    (
        "typical-3-clause",
        'device.driver == "gpu.nvidia.com" && '
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB" && '
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
        "a100",
        True,
    ),
    # --- strings / regex / misc ---------------------------------------------------------------------
    (
        "lower-ascii",
        'device.attributes["gpu.nvidia.com"].productName.lowerAscii().startsWith("nvidia a100")',
        "a100",
        True,
    ),
    ("regex-find", 'device.attributes["dra.example.com"].name.find("[a-z]+") == "worker"', "worker", True),
    ("regex-find-all", '"a1b22c333".findAll("[0-9]+").size() == 3', "empty", True),
    ("undefined-device-field", "device.foo == 1", "empty", Err(CELCompileError, "undefined field 'foo'")),
    ("undeclared-variable", "nope == 1", "empty", Err(CELCompileError, "undeclared reference")),
    ("int-overflow", "9223372036854775807 + 1 > 0", "empty", Err(CELRuntimeError, "overflow")),
    ("divide-by-zero", "1 / 0 == 1", "empty", Err(CELRuntimeError, "by zero")),
    ("comprehension", "[1, 2, 3].exists(x, x == 2) && [1, 2].all(x, x > 0)", "empty", True),
    (
        "optional-chaining",
        'device.attributes["dra.example.com"].?missing.orValue("x") == "x"',
        "worker",
        # cel-python has no optional syntax: an explicit per-engine expectation, not a skip.
        {"cel-expr-python": True, "cel-python": Err(CELCompileError)},
    ),
]


def _expected(expect: Expect | dict[str, Expect], engine: str) -> Expect:
    if isinstance(expect, dict):
        return expect[engine]
    return expect


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize(("expression", "device", "expect"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_semantics(engine_name: str, expression: str, device: str, expect: Expect | dict[str, Expect]) -> None:
    engine = get_engine(engine_name)
    want = _expected(expect, engine_name)
    dev = DEVICES[device]
    if isinstance(want, bool):
        assert engine.compile(expression).matches(dev) is want
        return
    with pytest.raises(want.kind) as info:
        engine.compile(expression).matches(dev)
    assert want.contains in str(info.value)
    prefix = "CEL compile error: " if want.kind is CELCompileError else "CEL runtime error: "
    assert str(info.value).startswith(prefix)


def test_case_ids_unique() -> None:
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


def test_both_engines_available() -> None:
    # The fallback must always be installed: fail rather than silently testing one engine only.
    assert "cel-python" in ENGINES
    assert [e for e in ("cel-expr-python", "cel-python") if e in ENGINES] == ENGINES


def test_get_engine_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRA_SCHEDULER_CEL_ENGINE", raising=False)
    assert get_engine().name == ENGINES[0]
    monkeypatch.setenv("DRA_SCHEDULER_CEL_ENGINE", "cel-python")
    assert get_engine().name == "cel-python"
    assert get_engine("cel-python") is get_engine("cel-python")
    with pytest.raises(ValueError):
        get_engine("no-such-engine")
    monkeypatch.setenv("DRA_SCHEDULER_CEL_ENGINE", "bogus")
    with pytest.raises(ValueError):
        get_engine()


def test_device_input_splits_qualified_names() -> None:
    d = device_input(
        "gpu.example.com",
        {"model": "a", "gpu.example.com/index": 1, "resource.kubernetes.io/pcieRoot": "pci0", "a/b/c": "x"},
        {"memory": parse_quantity("1Gi"), "other.io/slots": parse_quantity("4")},
        allow_multiple_allocations=True,
    )
    assert d.attributes == {
        "gpu.example.com": {"model": "a", "index": 1},
        "resource.kubernetes.io": {"pcieRoot": "pci0"},
        "a": {"b/c": "x"},
    }
    assert d.capacity == {
        "gpu.example.com": {"memory": parse_quantity("1Gi")},
        "other.io": {"slots": parse_quantity("4")},
    }
    assert d.allow_multiple_allocations is True


@pytest.mark.parametrize("engine_name", ENGINES)
def test_list_attributes_and_includes(engine_name: str) -> None:
    engine = get_engine(engine_name)
    dev = device_input(DRIVER, {"ids": (1, 2, 3), "names": ("a", "b")}, {})
    assert engine.compile('device.attributes["dra.example.com"].ids.size() == 3').matches(dev)
    assert engine.compile('2 in device.attributes["dra.example.com"].ids').matches(dev)
    assert engine.compile('device.attributes["dra.example.com"].names.includes("b")').matches(dev)
    assert engine.compile('device.attributes["dra.example.com"].names.exists(n, n == "a")').matches(dev)
    with pytest.raises(CELRuntimeError, match="type list could not be converted to bool"):
        engine.compile('device.attributes["dra.example.com"].ids').matches(dev)


def test_cost_estimate() -> None:
    assert estimate_cost('device.driver == "dra.example.com"') < 10
    assert estimate_cost('device.attributes.exists_one(x, x == "dra.example.com")') < 1000
    assert estimate_cost(EXPENSIVE) > COST_LIMIT
    six_levels = f"{_L10}.all(a, " * 6 + "true" + ")" * 6
    assert estimate_cost(six_levels) > COST_LIMIT
    assert estimate_cost(f"{_L10}.all(a, " * 4 + "true" + ")" * 4) < COST_LIMIT
    assert estimate_cost(f"{_L10}.all(x, {_L10}.all(y, x < y || true))") < COST_LIMIT


@pytest.mark.parametrize(
    "expression",
    [
        'a.b["c"].d(1, -2, 3u, 4.5, "s", b"x", r"\\d", null, true) && !x || -y < 3 ? [1, ?z] : {"k": v}',
        "(1 + 2) * 3 - 4 / (5 % 6) == -7 && (a ? b : c) in [a] && !(a || b)",
        "m.all(k, v, k == v) && .x.y == x.?y && x[?0] == 1 && google.protobuf.Int64Value{value: 1} == 1",
        "'''multi\nline''' == \"\\u00e9\\x41\\101\\n\" && -9223372036854775808 < 0",
    ],
)
def test_parse_unparse_round_trip(expression: str) -> None:
    tree = parse_expression(expression)
    assert parse_expression(unparse(tree)) == tree


@pytest.mark.parametrize(
    "expression",
    ["", "a +", "(a", "a ? b", "9223372036854775808 == x", "'unterminated", "a.", "if == 1", "a = b", "1 ~ 2"],
)
def test_parse_errors(expression: str) -> None:
    with pytest.raises(CELCompileError, match="Syntax error"):
        parse_expression(expression)


# --- SelectorCache --------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine_name", ENGINES)
def test_selector_cache_evaluates_once_per_device_generation(engine_name: str) -> None:
    cache = SelectorCache(get_engine(engine_name))
    expr = 'device.attributes["dra.example.com"].cores == 42'
    calls = []

    def factory() -> DeviceInput:
        calls.append(1)
        return DEVICES["worker"]

    assert cache.matches(expr, ("slice-a", 1, "dev-0"), factory) is True
    assert cache.matches(expr, ("slice-a", 1, "dev-0"), factory) is True
    assert cache.matches(expr, ("slice-a", 1, "dev-0"), DEVICES["worker"]) is True
    assert len(calls) == 1
    assert (cache.stats.hits, cache.stats.misses, cache.stats.evaluations, cache.stats.compiles) == (2, 1, 1, 1)
    # a new slice generation is a new key: evaluated again (and this device does not match)
    assert cache.matches(expr, ("slice-a", 2, "dev-0"), DEVICES["seven-cores"]) is False
    assert cache.stats.evaluations == 2
    # a second expression on the same device is compiled and evaluated separately
    assert cache.matches("device.driver == 'dra.example.com'", ("slice-a", 2, "dev-0"), DEVICES["seven-cores"])
    assert (cache.stats.evaluations, cache.stats.compiles) == (3, 2)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_selector_cache_caches_errors(engine_name: str) -> None:
    cache = SelectorCache(get_engine(engine_name))
    bad = 'device.attributes["dra.example.com"].missing == 1'
    for _ in range(3):
        with pytest.raises(CELRuntimeError, match="no such key: missing"):
            cache.matches(bad, "dev-0", DEVICES["worker"])
    assert (cache.stats.evaluations, cache.stats.misses, cache.stats.hits) == (1, 1, 2)
    for _ in range(2):
        with pytest.raises(CELCompileError):
            cache.compile("1 +")
        with pytest.raises(CELCompileError):
            cache.matches("1 +", "dev-0", DEVICES["worker"])
    assert cache.stats.compiles == 2  # the bad expression above + "1 +", each compiled once
    assert cache.stats.evaluations == 1


def test_selector_cache_is_bounded() -> None:
    cache = SelectorCache(get_engine(ENGINES[0]), max_results=2)
    for i in range(5):
        assert cache.matches("true", i, DEVICES["empty"])
    assert len(cache) <= 2
    assert cache.stats.clears >= 1
    assert cache.stats.evaluations == 5


@pytest.mark.parametrize("engine_name", ENGINES)
def test_unsupported_attribute_value_is_a_runtime_error(engine_name: str) -> None:
    dev = device_input(DRIVER, {"bad": None}, {})  # type: ignore[dict-item]
    with pytest.raises(CELRuntimeError, match="unsupported attribute value"):
        get_engine(engine_name).compile("true").matches(dev)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_deep_expressions_fail_cleanly(engine_name: str) -> None:
    engine = get_engine(engine_name)
    with pytest.raises(CELCompileError):
        engine.compile("true" + " && true" * 5000)
    with pytest.raises(CELCompileError):
        engine.compile("(" * 400 + "true" + ")" * 400)
