"""``string.format`` and comparisons of Kubernetes library values, as Kubernetes 1.37.2 evaluates DRA selectors
(issue 25, item 4a/4b), on both CEL engines.

Upstream sources (module versions of ``e2e/gobuild/celdiff/go.mod``):

* ``k8s.io/apiserver`` v0.37.2 ``pkg/cel/environment/base.go``: ``ext.Strings(ext.StringsVersion(2))`` since
  1.29 and ``cel.HomogeneousAggregateLiterals()``;
* ``github.com/google/cel-go`` v0.29.2 ``ext/strings.go`` (below version 4 ``format`` is the formatter of
  ``ext/formatting.go``, with its ``stringFormatValidator``, which also exempts the arguments of ``format``
  from the homogeneous-literal check of ``cel/validator.go``) and ``golang.org/x/text`` v0.40.0 ``message``
  (``%f``/``%e`` in the en_US locale);
* ``k8s.io/apiserver`` v0.37.2 ``pkg/cel/semver.go``, ``quantity.go``: ``Equal`` of another type is "no such
  overload"; cel-go ``interpreter/interpretable.go`` ``evalNe`` (``!=`` never fails), ``common/types/list.go``
  ``baseList.Equal``/``Contains``, ``interpreter/decorators.go`` ``maybeOptimizeSetMembership`` (``in`` a
  constant list is a Go map lookup: a Semver cannot be hashed, the evaluation panics).

Expected values were taken from that environment (the apiserver's base environment at 1.37 evaluating each
expression); tests/test_differential.py compares random ones with the real thing.
"""

from __future__ import annotations

import pytest

from plugins.dra.cel import available_engines, get_engine
from plugins.dra.cel_engine import device_input
from plugins.dra.cel_syntax import CELCompileError, CELError, CELRuntimeError
from scheduler.api.dra import device_from

ENGINES = available_engines()
A = 'device.attributes["dra.example.com"]'


def _device() -> object:
    raw = {
        "name": "d",
        "attributes": {
            "v": {"version": "1.2.3"},
            "vs": {"versions": ["1.2.3", "2.0.0"]},
            "s": {"string": "x"},
            "i": {"int": 1},
            "tags": {"strings": ["a"]},
        },
        "capacity": {"memory": {"value": "40Gi"}},
    }
    d = device_from(raw, "device")
    return device_input("dra.example.com", d.attributes, {k: v.value for k, v in d.capacity.items()}, False)


def matches(engine: str, expr: str) -> bool:
    return get_engine(engine).compile(expr).matches(_device())  # type: ignore[arg-type]


def _lit(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- format ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_format_takes_arguments_of_mixed_types(engine: str) -> None:
    """The issue's example: a compile error here before, "a-1" in Kubernetes (the list literal of a format
    call is exempt from HomogeneousAggregateLiterals)."""
    assert matches(engine, '"%s-%d".format(["a", 1]) == "a-1"')
    assert matches(engine, f'"gpu-%s-%d".format([{A}.s, {A}.i]) == "gpu-x-1"')
    with pytest.raises(CELCompileError, match="expected type"):
        get_engine(engine).compile('["a", 1].size() == 2')  # outside format the literal check stays


FORMATTED = [
    ('"%s".format([1.5])', "1.5"),
    ('"%s".format([1e6])', "1e+06"),
    ('"%s".format([123456.0])', "123456"),
    ('"%s".format([0.000012])', "1.2e-05"),
    ('"%s".format([-0.0])', "-0"),
    ('"%s".format([true])', "true"),
    ('"%s".format([null])', "null"),
    ('"%s".format([b"xy"])', "xy"),
    ('"%s".format([[1, "a", 2.5, true, null, b"xy", [1u], {"b": 1, "a": "x"}]])',
     '[1, "a", 2.500000, true, null, b"xy", [1], {"a":"x", "b":1}]'),
    ('"%s".format([{2: 1, 10: 2}])', "{10:2, 2:1}"),
    ('"%s".format([["a\\"b\\n"]])', '["a\\"b\\n"]'),
    ('"%d".format([-1234567])', "-1234567"),
    ('"%.2f".format([1234.5])', "1,234.50"),
    ('"%f".format([-0.5])', "-0.500000"),
    ('"%f".format([-0.0])', "0.000000"),
    ('"%.0f".format([2.5])', "2"),
    ('"%.2f".format([0.125])', "0.12"),
    ('"%.30f".format([0.1])', "0.100000000000000005551115123126"),
    ('"%f".format(["-Infinity"])', "-∞"),
    ('"%f".format(["NaN"])', "NaN"),
    ('"%e".format([2.71828])', "2.718280×10⁰⁰"),
    ('"%e".format([-1.5e-10])', "-1.500000×10⁻¹⁰"),
    ('"%.2e".format([123456.789])', "1.234568×10⁰⁵"),  # the precision is a width in cel-go v1
    ('"%.8e".format(["-Infinity"])', "      -∞"),
    ('"%x".format(["hello"])', "68656c6c6f"),
    ('"%X".format([b"\\xff\\x01"])', "FF01"),
    ('"%x".format([-26])', "-1a"),
    ('"%o".format([-8])', "-10"),
    ('"%b".format([-5])', "-101"),
    ('"%b".format([true])', "1"),
    ('"100%%".format([])', "100%"),
    ('"%s".format(dyn([1, "a"]))', "1"),  # unused arguments are fine at run time
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expr", "want"), FORMATTED)
def test_format_clauses_as_cel_go_v1_formats_them(engine: str, expr: str, want: str) -> None:
    assert matches(engine, f"{expr} == {_lit(want)}")


@pytest.mark.parametrize("engine", ENGINES)
def test_format_precision_keeps_x_text_limits(engine: str) -> None:
    """x/text keeps the minimum fraction digits in 8 bits (1000 % 256 = 232 zeros) and rounds to int16(p)."""
    assert matches(engine, '"%.1000f".format([1.0]).size() == 234')
    assert matches(engine, '"%.1075f".format([5e-324]).size() == 1076')


COMPILE_ERRORS = [
    ('"%d".format([1.5]) == ""', "decimal clause can only be used on integers, was given double"),
    ('"%d".format(["a"]) == ""', "decimal clause can only be used on integers, was given string"),
    ('"%d %d".format([1]) == ""', "index 1 out of range"),
    ('"%d".format([1, 2]) == ""', "too many arguments supplied to string.format"),
    ('"%".format([1]) == ""', "unexpected end of string"),
    ('"%.f".format([1.5]) == ""', "error while converting precision to integer"),
    ('"%z".format([1]) == ""', 'unrecognized formatting clause "z"'),
    ('"%s".format([quantity("1Gi")]) == ""', "was given kubernetes.Quantity"),
    ('false && "%f".format([1]) == ""', "fixed-point clause can only be used on doubles, was given int"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expr", "message"), COMPILE_ERRORS)
def test_format_literal_calls_are_checked_when_compiled(engine: str, expr: str, message: str) -> None:
    """stringFormatValidator: a constant format string applied to a list literal is checked at compile time
    (so also in a branch that never runs)."""
    with pytest.raises(CELCompileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        get_engine(engine).compile(expr)


RUNTIME_ERRORS = [
    ('"%d".format(dyn(["a"])) == ""', "decimal clause can only be used on integers, was given string"),
    (f'"%s".format([{A}.v]) == ""', "was given kubernetes.Semver"),
    ('"%f".format(["1.5"]) == ""', "fixed-point clause can only be used on doubles, was given string"),
    ('"%s".format([b"\\xff"]) == ""', "invalid UTF-8"),
    ('"%s %s".format(dyn(["a"])) == ""', "index 1 out of range"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expr", "message"), RUNTIME_ERRORS)
def test_format_errors_at_run_time(engine: str, expr: str, message: str) -> None:
    with pytest.raises(CELRuntimeError, match=message):
        matches(engine, expr)


# --- Semver (and Quantity) compared with other types ------------------------------------------------------


RESULTS = [
    (f'{A}.v != "1.2.3"', True),  # evalNe: not (Equal is true)
    (f'"1.2.3" == {A}.v', False),  # a string's Equal answers false
    (f"{A}.v == null", False),
    (f'{A}.v == semver("1.2.3")', True),
    (f'{A}.v in dyn(["1.2.3"])', False),  # not a constant list: Contains, failing comparisons count as false
    (f'{A}.v in [semver("1.2.3")]', True),
    (f'[{A}.v] == ["1.2.3"]', True),  # baseList.Equal stops only on false
    (f'{A}.v == "1.2.3" || true', True),  # an error value, absorbed
    (f'false && {A}.v in ["1.2.3"]', False),  # never evaluated
    (f'{A}.s == "x" ? true : {A}.v in ["1.2.3"]', True),
    (f'{A}.vs == ["1.2.3"]', False),
    (f'{A}.tags in {{"a": 1}}', False),
    ('dyn(quantity("1")) in ["1"]', False),  # a Quantity holds a pointer: hashable
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expr", "want"), RESULTS)
def test_library_values_compared_with_other_types(engine: str, expr: str, want: bool) -> None:
    assert matches(engine, expr) is want


ERRORS = [
    (f'{A}.v == "1.2.3"', "no such overload"),
    (f"{A}.v == {A}.s", "no such overload"),
    (f"{A}.v == 1", "no such overload"),
    ('dyn(quantity("1")) == "1"', "no such overload"),
    (f'[{A}.v].exists(x, x == "1.2.3")', "no such overload"),
    (f'{A}.v in ["1.2.3"]', "hash of unhashable type cel.Semver"),
    (f"{A}.v in [1, 2]", "hash of unhashable type cel.Semver"),
    (f'{A}.v in {{"1.2.3": 1}}', "hash of unhashable type cel.Semver"),
    # a Go panic ends the evaluation: neither || nor && absorbs it
    (f'{A}.v in ["a"] || true', "hash of unhashable type cel.Semver"),
    (f'{A}.v in ["1.2.3"] && false', "hash of unhashable type cel.Semver"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("expr", "message"), ERRORS)
def test_semver_compared_with_a_string_is_an_error(engine: str, expr: str, message: str) -> None:
    """The issue's case: ``false`` here before, a runtime error in Kubernetes (which fails the claim)."""
    with pytest.raises(CELError, match=message):
        matches(engine, expr)


@pytest.mark.parametrize("engine", ENGINES)
def test_static_types_still_checked_around_the_rewrite(engine: str) -> None:
    """The equality rewrite keeps the operands' static types: a statically wrong ``==`` still does not
    compile (on the type-checked engine), a list element's ``==`` stays native."""
    if engine == "cel-expr-python":
        with pytest.raises(CELCompileError):
            get_engine(engine).compile('[1][0] == "a"')
    assert matches(engine, "[1, 2][0] == 1")
    assert matches(engine, f'{A}.s == "x" && {A}.i == 1')
