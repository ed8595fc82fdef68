"""Strict Kubernetes ``resource.Quantity`` (``k8s.io/apimachinery/pkg/api/resource``).

Values are kept exactly as :class:`fractions.Fraction`; equality, hashing and ordering use the numeric
value only (Go ``Quantity.Cmp`` / ``Equal``), the format only matters for :meth:`Quantity.__str__`.

Grammar (the documented one of ``resource.Quantity``)::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <sign>            ::= "+" | "-"
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInt> | "E" <signedInt>

Parsing follows Go's ``ParseQuantity`` scanner, including its rounding (non-zero values are rounded up,
away from zero, to a multiple of 1n), the cap of BinarySI values at 2^63-1, the BinarySI -> DecimalSI
switch for values between -1 and 1, exponents limited to +-(2^31-1) and the re-use of the input string as
``String()`` when Go keeps it (``"1E3"`` prints as ``"1E3"``, ``"1000M"`` as ``"1G"``).

Deliberate differences from Go:

* a number without any digit (``"Gi"``, ``"-"``, ``"."``, ``"+Ki"``) is rejected; Go's scanner silently
  reads it as 0 although the documented grammar (and the apiserver's OpenAPI pattern) forbid it;
* exponents are additionally limited to ``MAX_EXPONENT`` (4096), so that a hostile ``"1e2000000000"``
  cannot allocate gigabytes (Go keeps such values symbolically in an ``inf.Dec``), and so are magnitudes:
  a DecimalSI / DecimalExponent value of 10^(MAX_EXPONENT + 1) or more (``"1"`` followed by 5,000 zeros) is
  refused with :class:`QuantityRangeError` (Go keeps it in an ``inf.Dec``, whose ``MilliValue()`` is then the
  low 64 bits of a big integer; the scheduler could not use it). Any number of digits is read otherwise, as
  Go does: digits below 1n only decide the rounding up (``"0." + "0" * 5000 + "1"`` is ``1n``), a BinarySI
  value past 2^63-1 is capped whatever its length, and no input reaches Python's limit on integer string
  conversions (4,300 digits);
* :meth:`Quantity.int_value` always rounds away from zero (what Go does for the int64 representation of
  almost every parsed quantity; Go's ``inf.Dec`` slow path has a sign bug for negative fractions).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar, Literal

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "MAX_EXPONENT",
    "Format",
    "Quantity",
    "QuantityError",
    "QuantityRangeError",
    "parse_quantity",
    "shown",
]

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]
BINARY_SI: Format = "BinarySI"
DECIMAL_SI: Format = "DecimalSI"
DECIMAL_EXPONENT: Format = "DecimalExponent"
_FORMATS = frozenset((BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT))

MAX_EXPONENT = 4096
_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1
_NANO = 10**9

_DEC_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DEC_BY_EXP: dict[int, str] = {exp: suf for suf, exp in _DEC_SUFFIXES.items()}
_BIN_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BIN_BY_POW1024: dict[int, str] = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")


class QuantityError(ValueError):
    """The string is not a valid Kubernetes quantity."""


class QuantityRangeError(QuantityError):
    """A well-formed quantity outside the supported range (see the module docstring)."""


_SHOWN = 60


def shown(s: str) -> str:
    """``s`` quoted for a message, shortened past 60 characters (a hostile value may have millions)."""
    if len(s) <= _SHOWN:
        return repr(s)
    return f"{s[:_SHOWN] + '…'!r} ({len(s)} characters)"


@dataclass(frozen=True, slots=True, order=True)
class Quantity:
    """An exact Kubernetes quantity. Compared, hashed and ordered by numeric value only."""

    value: Fraction
    fmt: Format = field(default=DECIMAL_SI, compare=False)
    # Go's cached string: set by the parser when Go's ParseQuantity keeps the input as String().
    text: str = field(default="", compare=False, repr=False)

    BINARY_SI: ClassVar[Format] = BINARY_SI
    DECIMAL_SI: ClassVar[Format] = DECIMAL_SI
    DECIMAL_EXPONENT: ClassVar[Format] = DECIMAL_EXPONENT

    def __post_init__(self) -> None:
        if not isinstance(self.value, Fraction):
            if isinstance(self.value, bool) or not isinstance(self.value, int):
                raise TypeError(f"Quantity value must be a Fraction or int, not {type(self.value).__name__}")
            object.__setattr__(self, "value", Fraction(self.value))
        if self.fmt not in _FORMATS:
            raise ValueError(f"unknown quantity format {self.fmt!r}")

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def from_int(cls, n: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """Go ``resource.NewQuantity(n, fmt)``."""
        return cls(Fraction(n), fmt)

    @classmethod
    def from_milli(cls, n: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """Go ``resource.NewMilliQuantity(n, fmt)``."""
        return cls(Fraction(n, 1000), fmt)

    @classmethod
    def parse(cls, s: str) -> Quantity:
        return parse_quantity(s)

    # -- arithmetic (Go Add/Sub: a zero receiver takes the other operand's format) -----------------
    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other.fmt if self.value == 0 else self.fmt
        return Quantity(self.value + other.value, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other.fmt if self.value == 0 else self.fmt
        return Quantity(self.value - other.value, fmt)

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.fmt)

    def mul(self, n: int) -> Quantity:
        return Quantity(self.value * n, self.fmt)

    # -- conversions --------------------------------------------------------------------------------
    def cmp(self, other: Quantity) -> int:
        """Go ``Cmp``: -1, 0 or 1."""
        a, b = self.value, other.value
        return (a > b) - (a < b)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_zero(self) -> bool:
        return self.value == 0

    def int_value(self) -> int:
        """Go ``Value()``: rounded up to an integer, away from zero (``1.5`` -> 2, ``-1.5`` -> -2)."""
        return _round_away(self.value)

    def milli_value(self) -> int:
        """Go ``MilliValue()``: ``value * 1000`` rounded up, away from zero."""
        return _round_away(self.value * 1000)

    def scaled_value(self, scale: int) -> int:
        """Go ``ScaledValue(scale)``: ``value / 10**scale`` rounded up, away from zero."""
        return _round_away(self.value / Fraction(10) ** scale)

    def is_integer(self) -> bool:
        """True when the value is an integer that fits an int64 (see the CEL ``isInteger()``)."""
        return self.value.denominator == 1 and -(2**63) <= self.value.numerator <= _MAX_INT64

    def as_approximate_float(self) -> float:
        try:
            return float(self.value)
        except OverflowError:
            return float("inf") if self.value > 0 else float("-inf")

    def canonical(self) -> str:
        """Go's canonical form, ignoring a string kept from parsing."""
        return _canonical(self.value, self.fmt)

    def __str__(self) -> str:
        """Go ``String()``."""
        return self.text or _canonical(self.value, self.fmt)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, fmt={self.fmt!r})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _round_away(v: Fraction) -> int:
    n, d = v.numerator, v.denominator
    if d == 1:
        return n
    return -((-n) // d) if n > 0 else n // d


def _round_up_nano(v: Fraction) -> Fraction:
    """Round the magnitude up to a multiple of 1e-9 (Go: ``amount.Round(amount, Nano, inf.RoundUp)``)."""
    scaled = v * _NANO
    if scaled.denominator == 1:
        return v
    return Fraction(_round_away(scaled), _NANO)


def _decimal_parts(v: Fraction) -> tuple[int, int]:
    """``v == m * 10**e`` with ``m`` free of trailing zeros (v must be a non-zero finite decimal)."""
    d = v.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:  # not a finite decimal: cannot come from parsing; round up like Go's AsScale would
        v = _round_up_nano(v)
        return _decimal_parts(v)
    k = max(twos, fives)
    m = v.numerator * (2 ** (k - twos)) * (5 ** (k - fives))
    e = -k
    if m == 0:
        return 0, 0
    while m % 10 == 0:
        m //= 10
        e += 1
    return m, e


def _exponent_form(m: int, e: int) -> str:
    return f"{m}" if e == 0 else f"{m}e{e}"


def _canonical(v: Fraction, fmt: Format) -> str:
    """Go ``CanonicalizeBytes`` (+ the upstream fallbacks for values without a suffix)."""
    if v == 0:
        return "0"
    out_fmt = fmt
    if fmt == BINARY_SI and (-1024 < v < 1024 or v.denominator != 1):
        out_fmt = DECIMAL_SI
    if out_fmt == BINARY_SI:
        n = v.numerator
        k = 0
        while n % 1024 == 0:
            n //= 1024
            k += 1
        suffix = _BIN_BY_POW1024.get(k)
        if suffix is not None:
            return f"{n}{suffix}"
        out_fmt = DECIMAL_EXPONENT  # past "Ei": exact decimal fallback (upstream behaviour)
    m, e = _decimal_parts(v)
    shift = e % 3  # Python's floor modulo: e3 is the multiple of 3 at or below e
    m, e = m * 10**shift, e - shift
    if out_fmt == DECIMAL_SI:
        dec_suffix = _DEC_BY_EXP.get(e)
        if dec_suffix is not None:
            return f"{m}{dec_suffix}"
    return _exponent_form(m, e)


def _scan(s: str) -> tuple[bool, str, str, str]:
    """Go ``parseQuantityString``: returns (positive, num, denom, suffix); raises on a format error."""
    end = len(s)
    pos = 0
    positive = True
    if end and s[0] in "+-":
        positive = s[0] == "+"
        pos = 1
    digits_seen = False
    while pos < end and s[pos] == "0":
        pos += 1
        digits_seen = True
    start = pos
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    num = s[start:pos] or "0"
    digits_seen = digits_seen or pos > start
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        start = pos
        while pos < end and s[pos] in _DIGITS:
            pos += 1
        denom = s[start:pos]
        digits_seen = digits_seen or bool(denom)
    if not digits_seen:
        raise QuantityError(f"quantity {shown(s)}: the number part has no digits")
    suffix_start = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(
            f"quantity {shown(s)}: quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    return positive, num, denom, s[suffix_start:]


def _interpret(suffix: str, s: str) -> tuple[int, int, Format]:
    """Go ``suffixer.interpret``: (base, exponent, format)."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        # (past 10 significant digits the exponent is out of the int32 range: no int() of a huge string)
        if body and all(c in _DIGITS for c in body) and len(body.lstrip("0")) <= 10:
            exp = int(digits)
            if -_MAX_INT32 <= exp <= _MAX_INT32:
                if abs(exp) > MAX_EXPONENT:
                    raise QuantityError(f"quantity {shown(s)}: exponent {exp} is out of the supported range")
                return 10, exp, DECIMAL_EXPONENT
    raise QuantityError(f"quantity {shown(s)}: unable to parse quantity's suffix")


def _magnitude(num: str, denom: str, base: int, exponent: int, s: str) -> Fraction:
    """``|num.denom| * base**exponent`` rounded up to a multiple of 1n (Go: ``amount.Round(Nano, RoundUp)``),
    computed on at most ~4,100 digits whatever the length of the input.

    With ``x = num.denom``, the multiples of 1n are the values of ``x`` with ``9 + exponent`` fractional decimal
    digits (``j * 10**-9 / 10**e``, or ``j * 10**-9 / 2**e = j * 5**e * 10**-(9+e)`` for BinarySI): a digit past
    those only tells whether ``x`` lies strictly above such a multiple, so the digits past the first ``keep`` are
    replaced by a single digit, 1 when any of them is non-zero: the rounded value is exactly Go's."""
    denom = denom.rstrip("0")
    if num != "0":
        if base == 2 and len(num) > 19:  # at least 10**19 * 2**10: over 2^63-1 after rounding, capped by the caller
            return Fraction(_MAX_INT64 + 1)
        if base == 10 and len(num) - 1 + exponent > MAX_EXPONENT:
            raise QuantityRangeError(
                f"quantity {shown(s)}: out of the supported range (less than 10^{MAX_EXPONENT + 1})"
            )
    digits = num + denom
    scale = len(denom)  # x = int(digits) / 10**scale
    keep = len(num) + 9 + exponent  # the digits of `digits` down to the 1n step
    if len(digits) > keep + 1:
        sticky = "1" if digits[max(keep, 0) :].strip("0") else "0"
        digits = digits[: max(keep, 0)] + sticky
        scale = 10 + exponent  # the last digit's place, 10**-(10+e): below the 1n step
    x = Fraction(int(digits)) / Fraction(10) ** scale
    if x == 0:
        return x
    return _round_up_nano(x * 2**exponent if base == 2 else x * Fraction(10) ** exponent)


@functools.lru_cache(maxsize=16384)
def parse_quantity(s: str) -> Quantity:
    """Go ``resource.ParseQuantity`` (strict, see the module docstring). Raises :class:`QuantityError`."""
    if not isinstance(s, str):
        raise QuantityError(f"quantity must be a string, not {type(s).__name__}")
    if not s:
        raise QuantityError("quantity '': empty string")
    if s == "0":
        return Quantity(Fraction(0), DECIMAL_SI, "0")
    positive, num, denom, suffix = _scan(s)
    base, exponent, fmt = _interpret(suffix, s)

    # Go's int64 fast path decides whether the input string is kept as String().
    text = ""
    precision = -1
    if fmt == BINARY_SI:
        if exponent >= 0 and not denom:
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = 18 - (len(num) + len(denom))
    if precision >= 0:
        scale = (0 if fmt == BINARY_SI else exponent) - len(denom)
        shifted = num + denom
        unscaled = int(shifted)
        mantissa = 1 << exponent if fmt == BINARY_SI else 1
        if scale >= -9 and -(2**63) <= unscaled * mantissa <= _MAX_INT64:
            if fmt == BINARY_SI:
                if exponent % 10 == 0 and unscaled & 0x07 != 0:
                    text = s
            elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                text = s

    magnitude = _magnitude(num, denom, base, exponent, s)
    if fmt == BINARY_SI and magnitude > _MAX_INT64:
        magnitude = Fraction(_MAX_INT64)
        text = ""
    if fmt == BINARY_SI and 0 < magnitude < 1:
        fmt = DECIMAL_SI
    return Quantity(magnitude if positive else -magnitude, fmt, text)
