"""``<string>.format(<list>)`` as Kubernetes 1.37 evaluates it (cel-go's strings extension at version 2).

Kubernetes' base CEL environment (``k8s.io/apiserver`` v0.37.2 ``pkg/cel/environment/base.go``) includes
``ext.Strings(ext.StringsVersion(2))``; below version 4 cel-go formats with ``ext/formatting.go`` (the
"v1" formatter, github.com/google/cel-go v0.29.2), not with the cel-spec formatter of ``formatting_v2.go``
that cel-cpp (cel-expr-python) implements natively. Both Python engines therefore call
:func:`string_format` (``__dra_format``, see :mod:`plugins.dra.cel_lib`), which reproduces the v1
formatter from its semantics:

* clauses ``%s %d %f %e %b %x %X %o`` with an optional precision ``%.N<verb>`` (parsed for every verb, used
  by ``%f`` only), ``%%`` for a percent sign; unused trailing arguments are allowed at run time;
* ``%s``: ints, doubles (Go ``%g``), bools, strings, bytes (valid UTF-8), null, timestamps, durations,
  types; lists and maps are written as CEL literals (strings quoted as Go ``%q``, doubles as ``%.6f``, map
  entries sorted by their formatted key); Quantity, Semver, IP, CIDR, URL and optional values are errors;
* ``%d`` ints; ``%b`` ints and bools; ``%x``/``%X`` ints, strings and bytes (hex of the UTF-8 bytes);
  ``%o`` ints; ``%f``/``%e`` doubles or the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
* ``%f`` and ``%e`` are printed by ``golang.org/x/text/message`` with the ``en_US`` locale: ``%f`` groups
  the integer digits (``"1,234.50"``), infinities are ``∞``/``-∞``; ``%e`` is ``2.718280×10⁰⁰`` with a
  superscript exponent, always 6 fraction digits, and the clause's precision becomes the *width*
  (cel-go builds ``"%<precision>e"``): ``"%.8e".format(["-Infinity"])`` is ``"      -∞"``. The printer
  keeps the minimum number of fraction digits in 8 bits and the maximum in 16 bits, which this module
  reproduces (``"%.1000f".format([1.0])`` has 232 zeros, as in Go).

Errors carry cel-go's wording (``error during formatting: decimal clause can only be used on integers, was
given double``, ``index 1 out of range``, ...). A constant format string applied to a list literal is also
checked when the selector is compiled (:func:`check_format_calls`, cel-go's ``stringFormatValidator``): a
clause whose argument has a statically wrong type, too few or too many arguments and malformed clauses are
compile errors there, as in Kubernetes.

Not reproduced: ``uint`` arguments are printed like ints (the values agree; cel-expr-python hands both to
Python as ``int``), and a map literal ``{0: "x"}`` inside a format argument is taken for a Semver on
cel-expr-python (which passes Semver values as such maps).
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plugins.dra.cel_syntax import Call, CELCompileError, ListLit, Lit, MapLit, _children
from plugins.dra.cel_types import _infer
from plugins.dra.cel_values import CIDRValue, IPValue, Opaque, TypeValue, URLValue

__all__ = ["FormatError", "check_format_calls", "string_format"]

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_NAN_INF = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class FormatError(ValueError):
    """A formatting failure (a CEL runtime error, or a compile error from :func:`check_format_calls`)."""


def type_name(v: object) -> str:
    """cel-go's name of a value's type, for error messages."""

    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bytes | bytearray):
        return "bytes"
    if v is None:
        return "null_type"
    if isinstance(v, list | tuple):
        return "list"
    if isinstance(v, Mapping):
        return "map"
    if isinstance(v, datetime.datetime):
        return "google.protobuf.Timestamp"
    if isinstance(v, datetime.timedelta):
        return "google.protobuf.Duration"
    if isinstance(v, TypeValue):
        return "type"
    if isinstance(v, Opaque):
        return v.type_name
    if isinstance(v, IPValue):
        return "net.IP"
    if isinstance(v, CIDRValue):
        return "net.CIDR"
    if isinstance(v, URLValue):
        return "kubernetes.URL"
    return str(getattr(v, "cel_type_name", type(v).__name__))


# -- Go number printing -----------------------------------------------------------------------------------


def _go_exp(e: int) -> str:
    return f"e{'-' if e < 0 else '+'}{abs(e):02d}"


def go_g(x: float) -> str:
    """Go ``fmt.Sprintf("%g", x)`` (cel-go's double-to-string conversion): the shortest digits, in exponent
    form when the decimal exponent is below -4 or at least 6 (``1e+06``, ``0.0001``, ``1.2e-05``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    _, digit_tuple, exp = decimal.Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exp, int)
    dp = len("".join(map(str, digit_tuple))) + exp  # position of the decimal point in `digits`
    neg = "-" if x < 0 else ""
    e = dp - 1
    if e < -4 or e >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return neg + mant + _go_exp(e)
    if dp <= 0:
        return neg + "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return neg + digits + "0" * (dp - len(digits))
    return neg + digits[:dp] + "." + digits[dp:]


def _go_fixed6(x: float) -> str:
    """Go ``fmt.Sprintf("%.6f", x)`` (doubles inside lists and maps)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return f"{x:.6f}"


def _go_int(n: int, base: int, upper: bool = False) -> str:
    digits = {2: format(abs(n), "b"), 8: format(abs(n), "o"), 16: format(abs(n), "X" if upper else "x")}[base]
    return ("-" if n < 0 else "") + digits


def go_quote(s: str) -> str:
    """Go ``strconv.Quote`` (``%q``)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}[ch])
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif 0xD800 <= o <= 0xDFFF:
            out.append("\\ufffd")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def _localized_fixed(x: float, precision: int) -> str:
    """x/text/message ``Sprintf("%.<p>f")`` for en_US: minimum fraction digits ``uint8(p)``, rounding (and
    maximum) ``int16(p)`` (exact decimal digits when negative), grouped integer digits."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    min_frac = precision % 256
    max_frac = (precision + 32768) % 65536 - 32768
    text = f"{abs(x):.{max_frac}f}" if max_frac >= 0 else format(decimal.Decimal(repr(abs(x))), "f")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    if len(frac) < min_frac:
        frac += "0" * (min_frac - len(frac))
    grouped = f"{int(whole):,}"
    return ("-" if x < 0 else "") + grouped + ("." + frac if frac else "")


def _localized_scientific(x: float, width: int | None) -> str:
    """x/text/message ``Sprintf("%<width>e")`` for en_US (cel-go passes the clause's precision as width)."""
    if math.isnan(x):
        text = "NaN"
    elif math.isinf(x):
        text = "∞" if x > 0 else "-∞"
    else:
        mant, _, exp = f"{abs(x):.6e}".partition("e")
        e = int(exp)
        text = ("-" if x < 0 else "") + mant + "×10" + f"{'-' if e < 0 else ''}{abs(e):02d}".translate(_SUPERSCRIPT)
    if width:
        w = width % 65536
        if len(text) < w:
            text = " " * (w - len(text)) + text
    return text


# -- clauses ----------------------------------------------------------------------------------------------


def _bytes_text(b: bytes | bytearray) -> str:
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(
            'could not convert argument "invalid UTF-8 in bytes, cannot convert to string" to string'
        ) from None


def _timestamp_text(t: datetime.datetime) -> str:
    if t.tzinfo is not None:
        t = t.astimezone(datetime.UTC)
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += f".{t.microsecond:06d}".rstrip("0")
    return text + "Z"


def _duration_text(d: datetime.timedelta) -> str:
    """cel-go: the seconds as Go ``strconv.FormatFloat(s, 'f', -1, 64)`` and ``s``."""
    micros = (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    text = format(decimal.Decimal(micros).scaleb(-6), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + "s"


def _string_clause(v: Any) -> str:
    """cel-go ``FormatString``."""
    if isinstance(v, list | tuple):
        return _format_list(v)
    if isinstance(v, Mapping):
        return _format_map(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_g(v)
    if isinstance(v, str):
        return v
    if isinstance(v, bytes | bytearray):
        return _bytes_text(v)
    if v is None:
        return "null"
    if isinstance(v, datetime.datetime):
        return _timestamp_text(v)
    if isinstance(v, datetime.timedelta):
        return _duration_text(v)
    if isinstance(v, TypeValue):
        return v.name
    raise FormatError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, "
        f"and timestamps, was given {type_name(v)}"
    )


def _member(v: Any) -> str:
    """A list element or map value: cel-go's ``clauseForType`` and ``quoteForCEL``."""
    if isinstance(v, bool) or v is None or isinstance(v, TypeValue):
        return _string_clause(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        text = _go_fixed6(v)
        return f'"{text}"' if math.isnan(v) or math.isinf(v) else text
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, bytes | bytearray):
        return "b" + go_quote(_bytes_text(v))
    if isinstance(v, datetime.datetime):
        return f"timestamp({go_quote(_timestamp_text(v))})"
    if isinstance(v, datetime.timedelta):
        return f"duration({go_quote(_duration_text(v))})"
    if isinstance(v, list | tuple):
        return _format_list(v)
    if isinstance(v, Mapping):
        return _format_map(v)
    raise FormatError(f"no formatting function for {type_name(v)}")


def _format_list(v: list[Any] | tuple[Any, ...]) -> str:
    return "[" + ", ".join(_member(x) for x in v) + "]"


def _format_map(v: Mapping[Any, Any]) -> str:
    pairs = []
    for k, val in v.items():
        if isinstance(k, str):
            key = go_quote(k)
        elif isinstance(k, bool):
            key = "true" if k else "false"
        elif isinstance(k, int):
            key = str(k)
        else:
            raise FormatError(f"no formatting function for map key of type {type_name(k)}")
        pairs.append((key, _member(val)))
    pairs.sort(key=lambda p: p[0].encode("utf-8"))
    return "{" + ", ".join(f"{k}:{val}" for k, val in pairs) + "}"


def _decimal_clause(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    raise FormatError(f"decimal clause can only be used on integers, was given {type_name(v)}")


def _double_arg(v: Any, clause: str) -> float:
    if isinstance(v, float):
        return v
    if isinstance(v, str) and v in _NAN_INF:
        return _NAN_INF[v]
    raise FormatError(f"{clause} clause can only be used on doubles, was given {type_name(v)}")


def _binary_clause(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return _go_int(v, 2)
    raise FormatError(f"only integers and bools can be formatted as binary, was given {type_name(v)}")


def _hex_clause(v: Any, upper: bool) -> str:
    if isinstance(v, str):
        data = v.encode("utf-8")
    elif isinstance(v, bytes | bytearray):
        data = bytes(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        return _go_int(v, 16, upper)
    else:
        raise FormatError(f"only integers, byte buffers, and strings can be formatted as hex, was given {type_name(v)}")
    return data.hex().upper() if upper else data.hex()


def _octal_clause(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return _go_int(v, 8)
    raise FormatError(f"octal clause can only be used on integers, was given {type_name(v)}")


def _parse_clause(fmt: str, i: int) -> tuple[int, int | None, str]:
    """The clause after the ``%`` at ``i - 1``: (characters read after ``%``, precision, verb)."""
    j = i
    precision: int | None = None
    if fmt[j] == ".":
        j += 1
        start = j
        while True:
            if j >= len(fmt):
                raise FormatError(
                    "could not parse formatting clause: error while parsing precision: "
                    "could not find end of precision specifier"
                )
            if not ("0" <= fmt[j] <= "9"):
                break
            j += 1
        text = fmt[start:j]
        if not text:
            raise FormatError(
                "could not parse formatting clause: error while parsing precision: error while converting precision "
                'to integer: strconv.Atoi: parsing "": invalid syntax'
            )
        if len(text.lstrip("0")) > 18 and int(text) > 2**63 - 1:
            raise FormatError(
                "could not parse formatting clause: error while parsing precision: error while converting precision "
                f'to integer: strconv.Atoi: parsing "{text}": value out of range'
            )
        precision = int(text)
    verb = fmt[j]
    if verb not in "sdfebxXo":
        shown = verb if verb.isascii() else chr(verb.encode("utf-8")[0])
        raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{shown}"')
    return j + 1 - i, precision, verb


def _format(fmt: str, n_args: int, clause: Callable[[int, int | None, str], str]) -> tuple[str, int]:
    """cel-go ``parseFormatString``: the text with each clause replaced by ``clause(index, precision, verb)``;
    also the number of clauses."""
    out: list[str] = []
    i = 0
    arg = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if i + 1 < len(fmt) and fmt[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if arg >= n_args:
            raise FormatError(f"index {arg} out of range")
        if i + 1 >= len(fmt):
            raise FormatError("unexpected end of string")
        read, precision, verb = _parse_clause(fmt, i + 1)
        try:
            out.append(clause(arg, precision, verb))
        except FormatError as e:
            raise FormatError(f"error during formatting: {e}") from None
        i += 1 + read
        arg += 1
    return "".join(out), arg


def string_format(fmt: Any, args: Any) -> str:
    """``fmt.format(args)``: see the module docstring. Raises :class:`FormatError`."""
    if not isinstance(fmt, str) or not isinstance(args, list | tuple):
        raise FormatError("no such overload: format")

    def clause(index: int, precision: int | None, verb: str) -> str:
        v = args[index]
        if verb == "s":
            return _string_clause(v)
        if verb == "d":
            return _decimal_clause(v)
        if verb == "f":
            return _localized_fixed(_double_arg(v, "fixed-point"), 6 if precision is None else precision)
        if verb == "e":
            return _localized_scientific(_double_arg(v, "scientific"), 6 if precision is None else precision)
        if verb == "b":
            return _binary_clause(v)
        if verb in "xX":
            return _hex_clause(v, verb == "X")
        return _octal_clause(v)

    return _format(fmt, len(args), clause)[0]


def format_size_bound(fmt: str) -> float:
    """Characters a clause of the literal format string ``fmt`` may add beyond its argument (precision and
    width), for the cost bound of :mod:`plugins.dra.cel_cost`; ``inf`` if it cannot be parsed."""
    extra = 0.0
    i = 0
    while i < len(fmt):
        if fmt[i] == "%" and i + 1 < len(fmt) and fmt[i + 1] == ".":
            j = i + 2
            while j < len(fmt) and fmt[j].isdigit():
                j += 1
            digits = fmt[i + 2 : j]
            p = int(digits) if digits and len(digits) < 19 else 0
            extra += max(p % 256, (p + 32768) % 65536 - 32768, 0) + 1100.0  # + exact digits of a tiny double
            i = j
        else:
            i += 1
    return extra


# -- compile-time validation --------------------------------------------------------------------------------

# static type (plugins.dra.cel_types._infer) -> the clauses that accept it
_ACCEPTS = {
    "s": {"list", "map", "capdomain", "int", "uint", "double", "bool", "string", "timestamp", "bytes", "duration",
          "type", "null_type"},
    "d": {"int", "uint"},
    "f": {"double", "string"},
    "e": {"double", "string"},
    "b": {"int", "uint", "bool"},
    "x": {"int", "uint", "string", "bytes"},
    "X": {"int", "uint", "string", "bytes"},
    "o": {"int", "uint"},
}
_CLAUSE_NAMES = {"d": "decimal", "f": "fixed-point", "e": "scientific", "o": "octal"}


def _static_error(verb: str, t: str) -> FormatError:
    if verb == "s":
        return FormatError(
            "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, "
            f"and timestamps, was given {t}"
        )
    if verb == "b":
        return FormatError(f"only integers and bools can be formatted as binary, was given {t}")
    if verb in "xX":
        return FormatError(f"only integers, byte buffers, and strings can be formatted as hex, was given {t}")
    name = _CLAUSE_NAMES[verb]
    suffix = "integers" if verb in "do" else "doubles"
    return FormatError(f"{name} clause can only be used on {suffix}, was given {t}")


def _static(e: Any) -> str:

    try:
        return _infer(e, {})
    except CELCompileError:
        return "dyn"


def _verify_string(e: Any) -> str | None:
    """cel-go ``stringFormatChecker.verifyString``: the static type that ``%s`` refuses (looking into list
    and map literals), or None."""

    t = _static(e)
    if t not in _ACCEPTS["s"] and t != "dyn":
        return t
    if isinstance(e, ListLit):
        for x in e.elems:
            bad = _verify_string(x)
            if bad is not None:
                return bad
    if isinstance(e, MapLit):
        for k, v, _ in e.entries:
            bad = _verify_string(k) or _verify_string(v)
            if bad is not None:
                return bad
    return None


def _check_clause(elems: Sequence[Any], index: int, precision: int | None, verb: str) -> str:
    e = elems[index]
    if verb == "s":
        bad = _verify_string(e)
        if bad is not None:
            raise _static_error(verb, bad)
        return ""
    t = _static(e)
    if t != "dyn" and t not in _ACCEPTS[verb]:
        raise _static_error(verb, t)
    return ""


def check_format_calls(tree: Any) -> None:
    """cel-go's ``stringFormatValidator``: every ``"<constant>".format([<list literal>])`` is checked when the
    selector compiles (clause syntax, argument count, statically known argument types). Raises
    :class:`plugins.dra.cel_syntax.CELCompileError`."""

    stack = [tree]
    while stack:
        node = stack.pop()
        stack.extend(_children(node))
        if not (
            isinstance(node, Call)
            and node.fn == "format"
            and isinstance(node.target, Lit)
            and isinstance(node.target.value, str)
            and node.target.kind == "string"
            and len(node.args) == 1
            and isinstance(node.args[0], ListLit)
        ):
            continue
        elems = node.args[0].elems
        try:
            _, used = _format(node.target.value, len(elems), functools.partial(_check_clause, elems))
        except FormatError as e:
            raise CELCompileError(str(e)) from None
        if len(elems) > used:
            raise CELCompileError(
                f"too many arguments supplied to string.format (expected {used}, got {len(elems)})"
            )
