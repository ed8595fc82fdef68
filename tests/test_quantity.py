"""Strict Kubernetes resource.Quantity: parsing, canonical strings, rounding, ordering."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.quantity import Quantity, QuantityError, parse_quantity

GI = 2**30

# (input, exact value, format, Go String())
VALID: list[tuple[str, Fraction | int, str, str]] = [
    ("0", 0, "DecimalSI", "0"),
    ("0Gi", 0, "BinarySI", "0"),
    ("-0", 0, "DecimalSI", "0"),
    ("1", 1, "DecimalSI", "1"),
    ("+1", 1, "DecimalSI", "+1"),  # Go keeps the input string when it is already "canonical enough"
    ("-1", -1, "DecimalSI", "-1"),
    ("1Ki", 1024, "BinarySI", "1Ki"),
    ("8Ki", 8192, "BinarySI", "8Ki"),
    ("1024Mi", GI, "BinarySI", "1Gi"),
    ("0.5Gi", GI // 2, "BinarySI", "512Mi"),
    ("0.5Mi", 512 * 1024, "BinarySI", "512Ki"),
    ("1.5Gi", 3 * GI // 2, "BinarySI", "1536Mi"),
    ("1000M", 10**9, "DecimalSI", "1G"),
    ("1000000k", 10**9, "DecimalSI", "1G"),
    ("1.5", Fraction(3, 2), "DecimalSI", "1500m"),
    ("-1.5", Fraction(-3, 2), "DecimalSI", "-1500m"),
    ("100m", Fraction(1, 10), "DecimalSI", "100m"),
    ("1080m", Fraction(108, 100), "DecimalSI", "1080m"),
    ("1.08", Fraction(108, 100), "DecimalSI", "1080m"),
    (".5", Fraction(1, 2), "DecimalSI", "500m"),
    ("5.", 5, "DecimalSI", "5."),
    ("1.G", 10**9, "DecimalSI", "1.G"),
    ("5n", Fraction(5, 10**9), "DecimalSI", "5n"),
    ("4u", Fraction(4, 10**6), "DecimalSI", "4u"),
    ("50k", 50_000, "DecimalSI", "50k"),
    ("12E", 12 * 10**18, "DecimalSI", "12E"),
    ("1000E", 10**21, "DecimalSI", "1e21"),  # no suffix beyond E: exponent fallback
    ("1e3", 1000, "DecimalExponent", "1e3"),
    ("1E3", 1000, "DecimalExponent", "1E3"),
    ("1E-3", Fraction(1, 1000), "DecimalExponent", "1E-3"),
    ("1e+3", 1000, "DecimalExponent", "1e+3"),
    ("1e1", 10, "DecimalExponent", "10"),
    ("1.5e3", 1500, "DecimalExponent", "1500"),
    ("1.2e3", 1200, "DecimalExponent", "1200"),
    ("0.5e-1", Fraction(5, 100), "DecimalExponent", "50e-3"),
    ("100.035k", 100035, "DecimalSI", "100.035k"),
    # rounding up to 1n (away from zero) and format switches
    ("3.001n", Fraction(4, 10**9), "DecimalSI", "4n"),
    ("0.9n", Fraction(1, 10**9), "DecimalSI", "1n"),
    ("-0.9n", Fraction(-1, 10**9), "DecimalSI", "-1n"),
    ("1.1E-9", Fraction(2, 10**9), "DecimalExponent", "2e-9"),
    ("0.000000000001Ki", Fraction(2, 10**9), "DecimalSI", "2n"),
    (".001Ki", Fraction(1024, 1000), "BinarySI", "1024m"),
    # BinarySI is capped at 2^63-1
    ("9Ei", 2**63 - 1, "BinarySI", "9223372036854775807"),
    ("9223372036854775807Ki", 2**63 - 1, "BinarySI", "9223372036854775807"),
]

INVALID = [
    "",
    " 1",
    "1 ",
    "10 Gi",
    "1K",
    "1KiB",
    "Gi",
    "-",
    "+",
    ".",
    "e3",
    "1.2.3",
    "1.1.M",
    "+-1",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    "1e",
    "1ee3",
    "1e4294967297",
    "1E2147483648",
    "1e3.5",
    "1,5",
]


@pytest.mark.parametrize(("text", "value", "fmt", "canonical"), VALID, ids=[v[0] or "empty" for v in VALID])
def test_parse_valid(text: str, value: Fraction | int, fmt: str, canonical: str) -> None:
    q = parse_quantity(text)
    assert q.value == Fraction(value)
    assert q.fmt == fmt
    assert str(q) == canonical
    assert parse_quantity(str(q)) == q


@pytest.mark.parametrize("text", INVALID, ids=[repr(s) for s in INVALID])
def test_parse_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_quantity_error_is_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1.5", 2, 1500),
        ("100m", 1, 100),
        ("1", 1, 1000),
        ("0", 0, 0),
        ("1n", 1, 1),
        ("1Gi", GI, GI * 1000),
        # Go rounds the int64 representation away from zero ("rounded up ... away from 0")
        ("-1.5", -2, -1500),
        ("-100m", -1, -100),
        ("-1n", -1, -1),
    ],
)
def test_int_and_milli_value(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.int_value() == value
    assert q.milli_value() == milli


def test_ordering_and_equality_by_value() -> None:
    assert parse_quantity("1G") < parse_quantity("1Gi")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("1Ki") == parse_quantity("1024")
    assert hash(parse_quantity("1Ki")) == hash(parse_quantity("1024"))
    assert parse_quantity("1e3") == parse_quantity("1k")
    assert parse_quantity("100m") <= parse_quantity("0.1")
    assert parse_quantity("10000T").cmp(parse_quantity("100Gi")) == 1
    assert parse_quantity("50m").cmp(parse_quantity("100m")) == -1
    values = ["1Gi", "1G", "100m", "-1", "0", "512Mi", "1e9"]
    ordered = sorted(parse_quantity(v) for v in values)
    assert [str(q) for q in ordered] == ["-1", "0", "100m", "512Mi", "1G", "1e9", "1Gi"]


def test_add_sub_keep_left_format_and_zero_takes_right() -> None:
    two = parse_quantity("1Gi") + parse_quantity("1Gi")
    assert str(two) == "2Gi" and two.fmt == "BinarySI"
    assert str(parse_quantity("1Gi") - parse_quantity("512Mi")) == "512Mi"
    assert str(parse_quantity("1G") + parse_quantity("1Gi")) == "2073741824"
    zero = parse_quantity("0")
    assert str(zero + parse_quantity("1Gi")) == "1Gi"
    assert str(parse_quantity("100m") + zero) == "100m"
    assert str(zero - parse_quantity("1Gi")) == "-1Gi"
    assert str(parse_quantity("1Gi") - parse_quantity("1Gi")) == "0"


def test_construction_helpers() -> None:
    assert Quantity.from_int(5) == parse_quantity("5")
    assert str(Quantity.from_int(2048, "BinarySI")) == "2Ki"
    assert str(Quantity.from_int(1000)) == "1k"
    assert str(Quantity.from_milli(1500)) == "1500m"
    assert str(Quantity(Fraction(1, 10**12))) == "1e-12"  # below nano: exponent fallback
    assert str(Quantity(Fraction(2**70), "BinarySI")) == "1180591620717411303424"
    assert str(Quantity(Fraction(10**70), "BinarySI")) == "10e69"
    assert parse_quantity("1Gi").is_integer() and not parse_quantity("1.5").is_integer()
    assert parse_quantity("-5").sign() == -1 and parse_quantity("0").sign() == 0
    assert parse_quantity("50k").as_approximate_float() == 50000.0
    with pytest.raises(ValueError):
        Quantity(Fraction(1), "Decimal")  # type: ignore[arg-type]


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text("0123456789", min_size=0, max_size=12))
    frac = draw(st.text("0123456789", min_size=0, max_size=10))
    if not whole and not frac:
        whole = "0"
    dot = draw(st.booleans()) or bool(frac)
    number = whole + ("." + frac if dot else "")
    if draw(st.booleans()):
        suffix = draw(st.sampled_from(_SUFFIXES))
    else:
        suffix = draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "+", "-"]))
        suffix += str(draw(st.integers(0, 30)))
    return sign + number + suffix


@settings(max_examples=400, deadline=None)
@given(quantity_strings())
def test_canonical_string_round_trips(text: str) -> None:
    q = parse_quantity(text)
    assert parse_quantity(str(q)) == q
    canonical = q.canonical()
    again = parse_quantity(canonical)
    assert again == q
    assert again.canonical() == canonical  # canonical form is a fixed point
    assert q.int_value() >= q.value if q.value >= 0 else q.int_value() <= q.value


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**62), 2**62),
    st.integers(0, 9),
    st.sampled_from(["BinarySI", "DecimalSI", "DecimalExponent"]),
)
def test_constructed_values_round_trip(n: int, k: int, fmt: str) -> None:
    q = Quantity(Fraction(n, 10**k), fmt)  # type: ignore[arg-type]
    assert parse_quantity(str(q)) == q
