"""The Kubernetes DRA CEL environment (``k8s.io/dynamic-resource-allocation/cel``) over two CEL engines.

Engines
    * ``cel-expr-python`` (Google cel-cpp, type-checked; the fast default) and
    * ``cel-python`` (module ``celpy``, pure Python, unchecked; the fallback).

    :func:`get_engine` picks one (argument, else ``$DRA_SCHEDULER_CEL_ENGINE``, else the fastest importable).

The selector ``device`` variable (see dra-semantics.md §3)
    ``device.driver`` (string), ``device.attributes[domain][id]``, ``device.capacity[domain][id]``
    (Kubernetes ``Quantity``) and ``device.allowMultipleAllocations`` (bool). Version attributes are
    ``Semver`` values, list attributes are lists. An unknown *domain* behaves as an empty map
    (``device.attributes["no.such"].x`` is a "no such key: x" error, ``has(...)``/``in`` on it are false)
    while ``"no.such" in device.attributes`` stays false; an unknown identifier is a runtime error.

How the semantics are obtained on engines that do not implement them natively
    Every expression is first parsed by a small CEL parser in this module (:func:`parse_expression`).
    The syntax tree is used to

    * give unknown domains their empty-map default on cel-expr-python (whose maps are plain CEL maps):
      each ``device.attributes[E]`` / ``device.capacity[E]`` (also ``device.attributes.x`` and aliases
      bound with ``cel.bind``) is rewritten to ``(E in M ? M[E] : {})`` and the rewritten tree is printed
      back and handed to the engine. On cel-python the two outer maps are a ``MapType`` subclass whose
      ``__missing__`` returns ``{}`` (``in`` and iteration only see the real domains);
    * write ``cel.bind`` for ``cel-python`` (which has no bindings extension) as ``[init].map(v, body)[0]``;
    * reject, on the unchecked engine, results that are statically not bool and relational or arithmetic
      operators on ``Quantity``/``Semver`` (cel-expr-python's checker does this itself);
    * estimate the cost (below).

    Quantities and semvers travel through cel-expr-python as tagged maps (Python callbacks cannot return
    opaque objects there): ``Quantity`` is ``map(string, string)`` ``{"@q": "<exact rational>"}`` and
    ``Semver`` is ``map(int, string)`` ``{0: "<major.minor.patch[-pre]>"}``. The distinct map types let the
    checker reject ``quantity >= quantity`` or ``quantity.compareTo(semver)`` at compile time, like
    Kubernetes. Tags are normalised, so ``==`` compares values (``quantity("1Ki") == quantity("1024")``).
    On cel-python they are small wrapper objects without ordering operators, so a relational operator that
    slips past the static check still fails at runtime instead of silently succeeding.

Library completions (:mod:`plugins.dra.cel_ext`)
    Two-variable comprehensions, ``ext.Lists`` v3, Kubernetes' lists library v1, ``ext.Sets``, the URL, IP
    and CIDR libraries, ``sign(quantity)`` (a global function, as in Kubernetes), ``x in []`` being
    ``false``, homogeneous aggregate literals, and cel-go's ``q == q.add(x)`` "no such overload" are
    provided by a syntax-tree translation into ``__dra_*`` functions registered on both engines. cel-python
    additionally gets CEL error semantics inside comprehensions (its macros raise instead of returning
    errors), ``cel.bind`` as a one-element comprehension, and compile-time refusal of undeclared functions
    and of non-bool operands of logical operators (what a checker does). cel-expr-python 0.1.3 evaluates a
    ``cel.bind`` after a short-circuited comprehension wrongly (stale slot): such bindings are rewritten as
    one-element comprehensions too. ``tests/test_differential.py`` compares both engines with cel-go on
    random selectors.

``format`` and comparisons with library values (:mod:`plugins.dra.cel_format`, :mod:`plugins.dra.cel_ext`)
    ``"...".format([...])`` is cel-go's v1 formatter (the strings extension at version 2 in Kubernetes'
    environment), not the engines' own: both call ``__dra_format``; constant format strings on list literals
    are checked at compile time as cel-go's validator does, and their list literals are exempt from the
    homogeneous-literal check. Kubernetes' Quantity/Semver/IP/CIDR/URL values refuse ``==`` with another
    type ("no such overload", so ``semver == "1.2.3"`` fails the claim) while ``!=`` never fails, lists and
    maps compare element-wise with failing comparisons not counting as unequal, and ``semver in ["1.2.3"]``
    (membership in a constant literal, a Go map lookup upstream) panics, which ends the evaluation whatever
    ``||``/``&&`` would make of it (:data:`plugins.dra.cel_ext.PANIC`). cel-expr-python gets this through a
    rewrite of the equalities whose left operand may hold such a value (``cel_ext.opaque_equality``: a
    ``type(x) == map`` test keeps the native ``==`` for everything else); cel-python through its ``==``,
    ``!=`` and ``in`` functions, and ``||``/``&&`` that evaluate their right operand only when cel-go does.

Runtime cost limit (:mod:`plugins.dra.cel_cost`)
    Kubernetes evaluates selectors with ``cel.CostLimit(1_000_000)`` and fails with
    ``operation cancelled: actual cost limit exceeded``. Neither engine exposes a runtime cost or can be
    interrupted (cel-expr-python 0.1.3 has no runtime options; celpy has no hooks), so the limit is enforced
    by a **sound static upper bound** of cel-go's runtime cost, computed from the syntax tree with the sizes
    of all values (string concatenation 0.1 per character as cel-go, sizes multiplied through ``cel.bind``,
    comprehensions, ``join``, ``replace``, ``flatten``; device data bounded by the API's limits). A program
    whose bound exceeds :data:`COST_LIMIT` compiles, but every :meth:`Program.matches` raises
    :class:`CELRuntimeError` ``operation cancelled: actual cost limit exceeded`` without running the engine:
    nested string doubling fails at once instead of exhausting memory. The bound is close to cel-go's
    actual cost on concatenation chains (``tests/test_cel_hardening.py``); unbounded sizes (``lists.range``
    of a device attribute) count as over the limit.

Result cache (:class:`SelectorCache`)
    Results (and errors) are kept per (expression, device generation) and, when the caller gives the raw
    device data, per (expression, content): :func:`device_reads` finds on the user's syntax tree the single
    entries a selector reads (``device.attributes["d"].x`` / ``["x"]`` / ``.?x``, ``has()`` of one,
    ``device.capacity["d"].x``, ``device.driver``, ``device.allowMultipleAllocations``) and refuses every other
    use of ``device`` (whole maps or domains as values, non-literal keys, a variable named ``device``).
    Kubernetes builds the ``device`` maps per device from the slice's qualified names
    (``DeviceMatches`` and ``parseQualifiedName`` in k8s.io/dynamic-resource-allocation v0.37.2 cel/compile.go:
    split at the first ``/``, a bare name in the driver's domain) and answers an unknown domain with an empty
    map (``mapper.Find``), so such a selector's outcome depends only on the driver and those entries (present
    or not, with their exact values): :func:`content_key`. Devices of a fleet then share one evaluation instead
    of building one activation each.

Regular expressions
    ``matches`` (cel-python; cel-cpp's own is RE2 already), ``find`` and ``findAll`` use RE2 (``google-re2``):
    linear time, Go's regexp syntax, as Kubernetes.

Engine limits (documented deviations)
    cel-expr-python stops a selector after 9,999 comprehension iterations per evaluation ("comprehension
    iteration budget exceeded": that claim fails, nothing else) and parses at most 32 nested syntax levels
    (a compile error beyond). cel-python has no optional syntax (``.?``) or ``strings.quote``.
    Not provided on either: ``transformMapEntry``, ``lists.first``/``last``, Kubernetes' ``format`` library,
    ``string(ip)``/``string(cidr)`` other than directly on ``ip(...)``/``cidr(...)``/``masked()``/``ip()``.
    The checker's unification of computed list element types (``[attr.ids, [5]].flatten()`` is refused by
    cel-go, "expected type 'dyn' but found 'list(int)'") is not emulated: the API server refuses such
    selectors, so they never reach a scheduler. Bare ``device`` (e.g. ``cel.bind(d, device, ...)``) is not
    an expression: only its four fields are. ``isInteger()``/``asInteger()`` look at the value (Go also looks
    at the internal scale, so Go says ``quantity("1000m").isInteger()`` is false).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, TypeAlias, cast

from plugins.dra.cel_ext import PANIC as _PANIC
from scheduler.api.quantity import Quantity, QuantityError, parse_quantity
from scheduler.api.semver import SemverError, Version
from scheduler.api.semver import parse as parse_semver

__all__ = [
    "COST_LIMIT",
    "ENGINE_ENV_VAR",
    "AttributeValue",
    "CELCompileError",
    "CELError",
    "CELRuntimeError",
    "CacheStats",
    "DeviceContent",
    "DeviceInput",
    "DeviceReads",
    "Engine",
    "Program",
    "SelectorCache",
    "available_engines",
    "content_key",
    "device_input",
    "device_reads",
    "engine_available",
    "estimate_cost",
    "get_engine",
    "parse_expression",
    "unparse",
]

AttributeValue: TypeAlias = (
    int | bool | str | Version | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...] | tuple[Version, ...]
)

COST_LIMIT = 1_000_000
ENGINE_ENV_VAR = "DRA_SCHEDULER_CEL_ENGINE"
INCLUDES_MAX_LIST = 48

_NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)
_COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"


# =====================================================================================================
# Errors and the device input
# =====================================================================================================


class CELError(Exception):
    """Base class of the errors raised by this module."""


class CELCompileError(CELError):
    """The expression does not compile ("CEL compile error: ...")."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"CEL compile error: {detail}")
        self.detail = detail


class CELRuntimeError(CELError):
    """The evaluation failed ("CEL runtime error: ...")."""

    def __init__(self, detail: str) -> None:
        if "no such key:" in detail and _NO_SUCH_KEY_HINT not in detail:
            detail += _NO_SUCH_KEY_HINT
        super().__init__(f"CEL runtime error: {detail}")
        self.detail = detail


@dataclass(frozen=True, slots=True)
class DeviceInput:
    """The CEL ``device`` variable, engine neutral. Build it with :func:`device_input`.

    Engine-specific activations are cached on the instance (``_activations``), so build one
    ``DeviceInput`` per device (per ResourceSlice generation) and reuse it for every selector.
    """

    driver: str
    attributes: Mapping[str, Mapping[str, AttributeValue]]
    capacity: Mapping[str, Mapping[str, Quantity]]
    allow_multiple_allocations: bool = False
    _activations: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def device_input(
    driver: str,
    attributes: Mapping[str, AttributeValue],
    capacity: Mapping[str, Quantity],
    allow_multiple_allocations: bool = False,
) -> DeviceInput:
    """Build a :class:`DeviceInput` from a ResourceSlice device's raw qualified names.

    ``"a/b"`` is split at the first ``/`` into domain ``a`` and identifier ``b``; a name without ``/``
    belongs to the driver's domain.
    """
    attrs: dict[str, dict[str, AttributeValue]] = {}
    for name, value in attributes.items():
        domain, ident = _split_name(name, driver)
        attrs.setdefault(domain, {})[ident] = value
    caps: dict[str, dict[str, Quantity]] = {}
    for name, quantity in capacity.items():
        domain, ident = _split_name(name, driver)
        caps.setdefault(domain, {})[ident] = quantity
    return DeviceInput(driver, attrs, caps, bool(allow_multiple_allocations))


class Program(Protocol):
    """A compiled selector."""

    expression: str

    def matches(self, device: DeviceInput) -> bool:
        """Evaluate against one device. Raises :class:`CELRuntimeError`."""
        ...


class Engine(Protocol):
    """A CEL engine wrapped into the Kubernetes DRA environment."""

    name: str

    def compile(self, expression: str) -> Program:
        """Compile a selector. Raises :class:`CELCompileError`."""
        ...


# =====================================================================================================
# CEL syntax: lexer, parser, printer
# =====================================================================================================


@dataclass(frozen=True, slots=True)
class Lit:
    kind: str  # int uint double string bytes bool null
    text: str  # source text (re-emitted verbatim)
    value: object


@dataclass(frozen=True, slots=True)
class Ident:
    name: str
    leading_dot: bool = False


@dataclass(frozen=True, slots=True)
class Select:
    operand: Node
    field: str
    optional: bool = False
    quoted: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    fn: str
    args: tuple[Node, ...]
    target: Node | None = None
    leading_dot: bool = False


@dataclass(frozen=True, slots=True)
class Index:
    operand: Node
    index: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "!" or "-"
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # || && == != < <= > >= in + - * / %
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Cond:
    cond: Node
    then: Node
    other: Node


@dataclass(frozen=True, slots=True)
class ListLit:
    elems: tuple[Node, ...]
    optional: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class MapLit:
    entries: tuple[tuple[Node, Node, bool], ...]


@dataclass(frozen=True, slots=True)
class StructLit:
    name: str
    fields: tuple[tuple[str, Node, bool], ...]


Node: TypeAlias = Lit | Ident | Select | Call | Index | Unary | Binary | Cond | ListLit | MapLit | StructLit


class CELSyntaxError(ValueError):
    def __init__(self, message: str, src: str, pos: int) -> None:
        line = src.count("\n", 0, pos) + 1
        line_start = src.rfind("\n", 0, pos) + 1
        col = pos - line_start + 1
        line_end = src.find("\n", pos)
        text = src[line_start : line_end if line_end != -1 else len(src)]
        super().__init__(f"ERROR: <input>:{line}:{col}: Syntax error: {message}\n | {text}\n | {'.' * (col - 1)}^")


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # int uint double string bytes bool null ident qident op eof
    text: str
    pos: int
    value: object = None


_RESERVED = frozenset(
    (
        *("as", "break", "const", "continue", "else", "for", "function", "if", "import"),
        *("let", "loop", "package", "namespace", "return", "var", "void", "while"),
    )
)
_OPS2 = frozenset(("==", "!=", "<=", ">=", "&&", "||"))
_OPS1 = frozenset("<>+-*/%!?:.,()[]{}")
_STR_PREFIXES = frozenset(("r", "R", "b", "B", "br", "bR", "Br", "BR"))
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_IDENT_START = frozenset("_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_IDENT_CHARS = _IDENT_START | frozenset("0123456789")
_DIGIT_CHARS = frozenset("0123456789")


def _decode_string(body: str, raw: bool, is_bytes: bool, src: str, pos: int) -> str | bytes:
    if raw:
        return body.encode("utf-8") if is_bytes else body
    out: list[str] = []
    raw_bytes = bytearray()
    i = 0
    n = len(body)

    def emit(ch: str) -> None:
        if is_bytes:
            raw_bytes.extend(ch.encode("utf-8"))
        else:
            out.append(ch)

    while i < n:
        c = body[i]
        if c != "\\":
            emit(c)
            i += 1
            continue
        if i + 1 >= n:
            raise CELSyntaxError("invalid escape sequence", src, pos)
        e = body[i + 1]
        if e in _SIMPLE_ESCAPES:
            emit(_SIMPLE_ESCAPES[e])
            i += 2
        elif e in "xX":
            h = body[i + 2 : i + 4]
            if len(h) != 2 or not set(h) <= _HEX:
                raise CELSyntaxError("invalid \\x escape", src, pos)
            if is_bytes:
                raw_bytes.append(int(h, 16))
            else:
                out.append(chr(int(h, 16)))
            i += 4
        elif e in "uU":
            width = 4 if e == "u" else 8
            h = body[i + 2 : i + 2 + width]
            if len(h) != width or not set(h) <= _HEX:
                raise CELSyntaxError(f"invalid \\{e} escape", src, pos)
            cp = int(h, 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise CELSyntaxError("invalid unicode code point", src, pos)
            emit(chr(cp))
            i += 2 + width
        elif e in "0123":
            o = body[i + 1 : i + 4]
            if len(o) != 3 or not set(o) <= frozenset("01234567"):
                raise CELSyntaxError("invalid octal escape", src, pos)
            if is_bytes:
                raw_bytes.append(int(o, 8))
            else:
                out.append(chr(int(o, 8)))
            i += 4
        else:
            raise CELSyntaxError(f"invalid escape sequence '\\{e}'", src, pos)
    return bytes(raw_bytes) if is_bytes else "".join(out)


def _lex_string(src: str, start: int, body_start: int, prefix: str) -> _Tok:
    raw = "r" in prefix.lower()
    is_bytes = "b" in prefix.lower()
    q = src[body_start]
    triple = src.startswith(q * 3, body_start)
    delim = q * 3 if triple else q
    i = body_start + len(delim)
    n = len(src)
    while True:
        if i >= n:
            raise CELSyntaxError("unterminated string literal", src, start)
        c = src[i]
        if src.startswith(delim, i):
            break
        if not triple and c in "\r\n":
            raise CELSyntaxError("newline in string literal", src, start)
        if c == "\\" and not raw:
            i += 2
            continue
        i += 1
    body = src[body_start + len(delim) : i]
    end = i + len(delim)
    value = _decode_string(body, raw, is_bytes, src, start)
    return _Tok("bytes" if is_bytes else "string", src[start:end], start, value)


def _lex(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i = 0
    n = len(src)
    while i < n:
        c = src[i]
        if c in " \t\n\r\f":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j == -1 else j + 1
            continue
        start = i
        if c in _IDENT_START:
            while i < n and src[i] in _IDENT_CHARS:
                i += 1
            word = src[start:i]
            if word in _STR_PREFIXES and i < n and src[i] in "'\"":
                tok = _lex_string(src, start, i, word)
                toks.append(tok)
                i = start + len(tok.text)
                continue
            if word in ("true", "false"):
                toks.append(_Tok("bool", word, start, word == "true"))
            elif word == "null":
                toks.append(_Tok("null", word, start, None))
            elif word == "in":
                toks.append(_Tok("op", word, start))
            else:
                toks.append(_Tok("ident", word, start))
            continue
        if c in "'\"":
            tok = _lex_string(src, start, i, "")
            toks.append(tok)
            i = start + len(tok.text)
            continue
        if c == "`":
            j = src.find("`", i + 1)
            if j == -1 or j == i + 1:
                raise CELSyntaxError("invalid quoted identifier", src, start)
            toks.append(_Tok("qident", src[start : j + 1], start, src[i + 1 : j]))
            i = j + 1
            continue
        if c in _DIGIT_CHARS or (c == "." and i + 1 < n and src[i + 1] in _DIGIT_CHARS):
            i = _lex_number(src, i, toks)
            continue
        two = src[i : i + 2]
        if two in _OPS2:
            toks.append(_Tok("op", two, start))
            i += 2
            continue
        if c in _OPS1:
            toks.append(_Tok("op", c, start))
            i += 1
            continue
        raise CELSyntaxError(f"token recognition error at: '{c}'", src, start)
    toks.append(_Tok("eof", "", n))
    return toks


def _lex_number(src: str, i: int, toks: list[_Tok]) -> int:
    start = i
    n = len(src)
    if src.startswith(("0x", "0X"), i) and i + 2 < n and src[i + 2] in _HEX:
        i += 2
        while i < n and src[i] in _HEX:
            i += 1
        if i < n and src[i] in "uU":
            toks.append(_Tok("uint", src[start : i + 1], start, int(src[start + 2 : i], 16)))
            return i + 1
        toks.append(_Tok("int", src[start:i], start, int(src[start + 2 : i], 16)))
        return i
    is_float = False
    while i < n and src[i] in _DIGIT_CHARS:
        i += 1
    if i + 1 < n and src[i] == "." and src[i + 1] in _DIGIT_CHARS:
        is_float = True
        i += 1
        while i < n and src[i] in _DIGIT_CHARS:
            i += 1
    if i < n and src[i] in "eE":
        j = i + 1
        if j < n and src[j] in "+-":
            j += 1
        if j < n and src[j] in _DIGIT_CHARS:
            is_float = True
            i = j
            while i < n and src[i] in _DIGIT_CHARS:
                i += 1
    text = src[start:i]
    if is_float:
        toks.append(_Tok("double", text, start, float(text)))
        return i
    if i < n and src[i] in "uU":
        toks.append(_Tok("uint", src[start : i + 1], start, int(text)))
        return i + 1
    toks.append(_Tok("int", text, start, int(text)))
    return i


_MAX_DEPTH = 250
_RELOPS = frozenset(("<", "<=", ">", ">=", "==", "!=", "in"))


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = _lex(src)
        self.i = 0
        self.depth = 0

    # -- helpers ------------------------------------------------------------------------------------
    def peek(self, offset: int = 0) -> _Tok:
        return self.toks[min(self.i + offset, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.toks[self.i]
        return t.kind == "op" and t.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> _Tok:
        t = self.toks[self.i]
        if t.kind == "op" and t.text == text:
            self.i += 1
            return t
        raise self.error(f"expected '{text}'", t)

    def error(self, message: str, tok: _Tok | None = None) -> CELSyntaxError:
        tok = tok or self.toks[self.i]
        found = "<EOF>" if tok.kind == "eof" else tok.text
        return CELSyntaxError(f"{message}, found '{found}'", self.src, tok.pos)

    # -- grammar ------------------------------------------------------------------------------------
    def parse(self) -> Node:
        node = self.expr()
        if self.peek().kind != "eof":
            raise self.error("extraneous input")
        return node

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise CELSyntaxError("expression recursion limit exceeded", self.src, self.peek().pos)
        node = self.or_expr()
        if self.accept("?"):
            then = self.or_expr()
            self.expect(":")
            other = self.expr()
            node = Cond(node, then, other)
        self.depth -= 1
        return node

    def or_expr(self) -> Node:
        node = self.and_expr()
        while self.accept("||"):
            node = Binary("||", node, self.and_expr())
        return node

    def and_expr(self) -> Node:
        node = self.relation()
        while self.accept("&&"):
            node = Binary("&&", node, self.relation())
        return node

    def relation(self) -> Node:
        node = self.addition()
        while True:
            t = self.peek()
            if t.kind == "op" and t.text in _RELOPS:
                self.i += 1
                node = Binary(t.text, node, self.addition())
            else:
                return node

    def addition(self) -> Node:
        node = self.multiplication()
        while True:
            t = self.peek()
            if t.kind == "op" and t.text in "+-":
                self.i += 1
                node = Binary(t.text, node, self.multiplication())
            else:
                return node

    def multiplication(self) -> Node:
        node = self.unary()
        while True:
            t = self.peek()
            if t.kind == "op" and t.text in ("*", "/", "%"):
                self.i += 1
                node = Binary(t.text, node, self.unary())
            else:
                return node

    def unary(self) -> Node:
        if self.at("!"):
            count = 0
            while self.accept("!"):
                count += 1
            node = self.member()
            for _ in range(count):
                node = Unary("!", node)
            return node
        if self.at("-"):
            count = 0
            while self.at("-"):
                nxt = self.peek(1)
                if nxt.kind in ("int", "double"):
                    break  # the last '-' is the sign of a numeric literal
                self.i += 1
                count += 1
            node = self.member()
            for _ in range(count):
                node = Unary("-", node)
            return node
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.accept("."):
                optional = self.accept("?")
                t = self.peek()
                if t.kind == "ident":
                    self.i += 1
                    if not optional and self.at("("):
                        node = Call(t.text, self.call_args(), node)
                    else:
                        node = Select(node, t.text, optional)
                elif t.kind == "qident":
                    self.i += 1
                    node = Select(node, cast(str, t.value), optional, quoted=True)
                else:
                    raise self.error("expected a field name")
            elif self.accept("["):
                optional = self.accept("?")
                index = self.expr()
                self.expect("]")
                node = Index(node, index, optional)
            elif self.at("{") and _qualified_name(node) is not None:
                name = cast(str, _qualified_name(node))
                self.i += 1
                node = StructLit(name, self.field_inits())
            else:
                return node

    def call_args(self) -> tuple[Node, ...]:
        self.expect("(")
        args: list[Node] = []
        if not self.accept(")"):
            args.append(self.expr())
            while self.accept(","):
                args.append(self.expr())
            self.expect(")")
        return tuple(args)

    def field_inits(self) -> tuple[tuple[str, Node, bool], ...]:
        fields: list[tuple[str, Node, bool]] = []
        while not self.at("}"):
            optional = self.accept("?")
            t = self.peek()
            if t.kind not in ("ident", "qident"):
                raise self.error("expected a field name")
            self.i += 1
            self.expect(":")
            fields.append((t.text, self.expr(), optional))
            if not self.accept(","):
                break
        self.expect("}")
        return tuple(fields)

    def primary(self) -> Node:
        t = self.peek()
        if t.kind == "op":
            if t.text == ".":
                self.i += 1
                name = self.peek()
                if name.kind != "ident":
                    raise self.error("expected an identifier")
                self.i += 1
                if self.at("("):
                    return Call(name.text, self.call_args(), None, leading_dot=True)
                return Ident(name.text, leading_dot=True)
            if t.text == "(":
                self.i += 1
                node = self.expr()
                self.expect(")")
                return node
            if t.text == "[":
                self.i += 1
                elems: list[Node] = []
                opts: list[bool] = []
                while not self.at("]"):
                    opts.append(self.accept("?"))
                    elems.append(self.expr())
                    if not self.accept(","):
                        break
                self.expect("]")
                return ListLit(tuple(elems), tuple(opts))
            if t.text == "{":
                self.i += 1
                entries: list[tuple[Node, Node, bool]] = []
                while not self.at("}"):
                    optional = self.accept("?")
                    key = self.expr()
                    self.expect(":")
                    entries.append((key, self.expr(), optional))
                    if not self.accept(","):
                        break
                self.expect("}")
                return MapLit(tuple(entries))
            if t.text == "-":
                nxt = self.peek(1)
                if nxt.kind in ("int", "double"):
                    self.i += 2
                    return self.number(nxt, negative=True, sign_pos=t.pos)
            raise self.error("mismatched input")
        if t.kind == "ident":
            self.i += 1
            if t.text in _RESERVED:
                raise CELSyntaxError(f"reserved identifier: {t.text}", self.src, t.pos)
            if self.at("("):
                return Call(t.text, self.call_args())
            return Ident(t.text)
        if t.kind in ("int", "uint", "double"):
            self.i += 1
            return self.number(t, negative=False, sign_pos=t.pos)
        if t.kind in ("string", "bytes", "bool", "null"):
            self.i += 1
            return Lit(t.kind, t.text, t.value)
        raise self.error("mismatched input")

    def number(self, t: _Tok, negative: bool, sign_pos: int) -> Lit:
        text = ("-" if negative else "") + t.text
        if t.kind == "double":
            v = cast(float, t.value)
            return Lit("double", text, -v if negative else v)
        iv = cast(int, t.value)
        if t.kind == "uint":
            if iv > 2**64 - 1:
                raise CELSyntaxError("invalid uint literal", self.src, t.pos)
            return Lit("uint", text, iv)
        iv = -iv if negative else iv
        if not -(2**63) <= iv <= 2**63 - 1:
            raise CELSyntaxError("invalid int literal", self.src, sign_pos)
        return Lit("int", text, iv)


def _qualified_name(node: Node) -> str | None:
    if isinstance(node, Ident):
        return ("." if node.leading_dot else "") + node.name
    if isinstance(node, Select) and not node.optional and not node.quoted:
        base = _qualified_name(node.operand)
        return None if base is None else f"{base}.{node.field}"
    return None


@functools.lru_cache(maxsize=4096)
def parse_expression(src: str) -> Node:
    """Parse a CEL expression into this module's syntax tree. Raises :class:`CELCompileError`."""
    try:
        return _Parser(src).parse()
    except CELSyntaxError as e:
        raise CELCompileError(str(e)) from None
    except RecursionError:
        raise CELCompileError("ERROR: <input>: expression recursion limit exceeded") from None


_PRECEDENCE = {"||": 1, "&&": 2, "+": 4, "-": 4, "*": 5, "/": 5, "%": 5} | dict.fromkeys(_RELOPS, 3)
_MEMBER_PRECEDENCE = 7


def _precedence(node: Node) -> int:
    if isinstance(node, Cond):
        return 0
    if isinstance(node, Binary):
        return _PRECEDENCE[node.op]
    if isinstance(node, Unary) or (isinstance(node, Lit) and node.text.startswith("-")):
        return 6
    return _MEMBER_PRECEDENCE


def _paren(node: Node, minimum: int) -> str:
    s = unparse(node)
    return s if _precedence(node) >= minimum else f"({s})"


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unparse(node: Node) -> str:
    """Print a syntax tree back to CEL source (parenthesised where precedence requires)."""
    if isinstance(node, Lit):
        return node.text
    if isinstance(node, Ident):
        return ("." if node.leading_dot else "") + node.name
    if isinstance(node, Select):
        name = f"`{node.field}`" if node.quoted else node.field
        return f"{_paren(node.operand, _MEMBER_PRECEDENCE)}.{'?' if node.optional else ''}{name}"
    if isinstance(node, Call):
        args = ", ".join(unparse(a) for a in node.args)
        if node.target is not None:
            return f"{_paren(node.target, _MEMBER_PRECEDENCE)}.{node.fn}({args})"
        return f"{'.' if node.leading_dot else ''}{node.fn}({args})"
    if isinstance(node, Index):
        index = unparse(node.index)
        return f"{_paren(node.operand, _MEMBER_PRECEDENCE)}[{'?' if node.optional else ''}{index}]"
    if isinstance(node, Unary):
        return f"{node.op}{_paren(node.operand, _MEMBER_PRECEDENCE)}"
    if isinstance(node, Binary):
        p = _PRECEDENCE[node.op]
        return f"{_paren(node.left, p)} {node.op} {_paren(node.right, p + 1)}"
    if isinstance(node, Cond):
        return f"{_paren(node.cond, 1)} ? {_paren(node.then, 1)} : {unparse(node.other)}"
    if isinstance(node, ListLit):
        items = zip(node.elems, node.optional, strict=True)
        return "[" + ", ".join(("?" if o else "") + unparse(e) for e, o in items) + "]"
    if isinstance(node, MapLit):
        return "{" + ", ".join(f"{'?' if o else ''}{unparse(k)}: {unparse(v)}" for k, v, o in node.entries) + "}"
    fields = ", ".join(f"{'?' if o else ''}{n}: {unparse(v)}" for n, v, o in node.fields)
    return f"{node.name}{{{fields}}}"


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, Select):
        yield node.operand
    elif isinstance(node, Call):
        if node.target is not None:
            yield node.target
        yield from node.args
    elif isinstance(node, Index):
        yield node.operand
        yield node.index
    elif isinstance(node, Unary):
        yield node.operand
    elif isinstance(node, Binary):
        yield node.left
        yield node.right
    elif isinstance(node, Cond):
        yield node.cond
        yield node.then
        yield node.other
    elif isinstance(node, ListLit):
        yield from node.elems
    elif isinstance(node, MapLit):
        for k, v, _ in node.entries:
            yield k
            yield v
    elif isinstance(node, StructLit):
        for _, v, _ in node.fields:
            yield v


# =====================================================================================================
# Analysis: macros/scopes, device field checks, rewrites, cost estimate, light type inference
# =====================================================================================================

_DEVICE_FIELDS = frozenset(("driver", "attributes", "capacity", "allowMultipleAllocations"))
_ONE_VAR_MACROS = frozenset(("all", "exists", "exists_one", "existsOne", "filter", "map", "sortBy", "optMap"))
_ONE_VAR_MACROS_EXTRA = frozenset(("optFlatMap",))
_TWO_VAR_MACROS = frozenset(("transformList", "transformMap", "transformMapEntry"))
_TYPE_IDENTS = frozenset(
    ("int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type", "dyn")
)
_NAMESPACES = frozenset(("cel", "optional", "strings", "math", "sets", "lists", "base64", "google"))


def _macro_vars(node: Call) -> tuple[str, ...] | None:
    """Iteration variables when ``node`` is a comprehension macro call, else None."""
    if node.target is None or not node.args or not isinstance(node.args[0], Ident) or node.args[0].leading_dot:
        return None
    fn, args = node.fn, node.args
    first = cast(Ident, args[0]).name
    second_ok = len(args) > 1 and isinstance(args[1], Ident) and not args[1].leading_dot
    if fn in _TWO_VAR_MACROS and len(args) in (3, 4) and second_ok:
        return (first, cast(Ident, args[1]).name)
    if fn in ("all", "exists", "exists_one", "existsOne") and len(args) == 3 and second_ok:
        return (first, cast(Ident, args[1]).name)
    if fn in _ONE_VAR_MACROS and len(args) == 2:
        return (first,)
    if fn in _ONE_VAR_MACROS_EXTRA and len(args) == 2:
        return (first,)
    if fn == "map" and len(args) == 3:
        return (first,)
    return None


def _is_bind(node: Call) -> bool:
    return (
        node.fn == "bind"
        and isinstance(node.target, Ident)
        and node.target.name == "cel"
        and not node.target.leading_dot
        and len(node.args) == 3
        and isinstance(node.args[0], Ident)
    )


def _is_has(node: Call) -> bool:
    return node.target is None and node.fn == "has" and len(node.args) == 1 and isinstance(node.args[0], Select)


def _device_field(node: Node, scope: Mapping[str, str]) -> str | None:
    """``driver``/``attributes``/... when node is ``device.<field>`` (``device`` not shadowed)."""
    if (
        isinstance(node, Select)
        and not node.optional
        and isinstance(node.operand, Ident)
        and node.operand.name == "device"
        and (node.operand.leading_dot or "device" not in scope)
    ):
        return node.field
    return None


def _domain_map_kind(node: Node, scope: Mapping[str, str]) -> str | None:
    """ "attrs"/"caps" when node denotes device.attributes / device.capacity (or a cel.bind alias)."""
    f = _device_field(node, scope)
    if f == "attributes":
        return "attrs"
    if f == "capacity":
        return "caps"
    if isinstance(node, Ident) and not node.leading_dot:
        kind = scope.get(node.name)
        if kind in ("attrs", "caps"):
            return kind
    return None


def _check_names(node: Node, scope: Mapping[str, str], strict: bool) -> None:
    """Reject unknown ``device`` fields (all engines) and undeclared identifiers (unchecked engines)."""
    if (
        isinstance(node, Select)
        and isinstance(node.operand, Ident)
        and node.operand.name == "device"
        and (node.operand.leading_dot or "device" not in scope)
    ):
        if node.field not in _DEVICE_FIELDS:
            raise CELCompileError(f"undefined field '{node.field}'")
        return
    if isinstance(node, Ident):
        name = node.name
        if not node.leading_dot and name in scope:
            return
        if name == "device":
            raise CELCompileError(
                "undeclared reference to 'device' (only device.driver, device.attributes, device.capacity "
                "and device.allowMultipleAllocations are available)"
            )
        if strict and name not in _TYPE_IDENTS:
            raise CELCompileError(f"undeclared reference to '{name}'")
        return
    if isinstance(node, Call):
        if _is_bind(node):
            var = cast(Ident, node.args[0]).name
            _check_names(node.args[1], scope, strict)
            _check_names(node.args[2], {**scope, var: "var"}, strict)
            return
        names = _macro_vars(node)
        if names is not None:
            assert node.target is not None
            _check_names(node.target, scope, strict)
            inner = {**scope, **dict.fromkeys(names, "var")}
            for arg in node.args[len(names) :]:
                _check_names(arg, inner, strict)
            return
        if isinstance(node.target, Ident) and node.target.name in _NAMESPACES and node.target.name not in scope:
            for arg in node.args:
                _check_names(arg, scope, strict)
            return
    for child in _children(node):
        _check_names(child, scope, strict)


def _string_lit(s: str) -> Lit:
    return Lit("string", _quote(s), s)


def _empty_map() -> MapLit:
    return MapLit(())


def _rewrite(node: Node, scope: Mapping[str, str]) -> Node:
    """Give unknown domains of device.attributes / device.capacity their empty-map default."""
    if isinstance(node, Index) and not node.optional and _domain_map_kind(node.operand, scope):
        operand = _rewrite(node.operand, scope)
        index = _rewrite(node.index, scope)
        return Cond(Binary("in", index, operand), Index(operand, index), _empty_map())
    if isinstance(node, Select) and not node.optional and _domain_map_kind(node.operand, scope):
        operand = _rewrite(node.operand, scope)
        return Cond(
            Binary("in", _string_lit(node.field), operand),
            Select(operand, node.field, quoted=node.quoted),
            _empty_map(),
        )
    if isinstance(node, Call):
        if _is_has(node):
            sel = cast(Select, node.args[0])
            if _domain_map_kind(sel.operand, scope):  # has(device.attributes.dom): a presence test
                return node
            return Call(node.fn, (Select(_rewrite(sel.operand, scope), sel.field, sel.optional, sel.quoted),))
        if _is_bind(node):
            var = cast(Ident, node.args[0]).name
            init = node.args[1]
            kind = _domain_map_kind(init, scope) or "var"
            return Call(
                node.fn,
                (node.args[0], _rewrite(init, scope), _rewrite(node.args[2], {**scope, var: kind})),
                node.target,
            )
        names = _macro_vars(node)
        if names is not None:
            assert node.target is not None
            inner = {**scope, **dict.fromkeys(names, "var")}
            args = node.args[: len(names)] + tuple(_rewrite(a, inner) for a in node.args[len(names) :])
            return Call(node.fn, args, _rewrite(node.target, scope), node.leading_dot)
    return _map_children(node, lambda child: _rewrite(child, scope))


def _map_children(node: Node, fn: Callable[[Node], Node]) -> Node:
    if isinstance(node, Lit | Ident):
        return node
    if isinstance(node, Select):
        return Select(fn(node.operand), node.field, node.optional, node.quoted)
    if isinstance(node, Call):
        target = None if node.target is None else fn(node.target)
        return Call(node.fn, tuple(fn(a) for a in node.args), target, node.leading_dot)
    if isinstance(node, Index):
        return Index(fn(node.operand), fn(node.index), node.optional)
    if isinstance(node, Unary):
        return Unary(node.op, fn(node.operand))
    if isinstance(node, Binary):
        return Binary(node.op, fn(node.left), fn(node.right))
    if isinstance(node, Cond):
        return Cond(fn(node.cond), fn(node.then), fn(node.other))
    if isinstance(node, ListLit):
        return ListLit(tuple(fn(e) for e in node.elems), node.optional)
    if isinstance(node, MapLit):
        return MapLit(tuple((fn(k), fn(v), o) for k, v, o in node.entries))
    return StructLit(node.name, tuple((n, fn(v), o) for n, v, o in node.fields))


# -- cost ----------------------------------------------------------------------------------------------


def estimate_cost(expression: str | Node) -> float:
    """Static upper bound of the runtime cost of a selector (:mod:`plugins.dra.cel_cost`); ``inf`` if unbounded."""
    from plugins.dra import cel_cost, cel_ext

    node = parse_expression(expression) if isinstance(expression, str) else expression
    return cel_cost.estimate(cel_ext.translate(node, checked=True))


# -- light type inference (only for engines without a checker) ---------------------------------------

_Q = "kubernetes.Quantity"
_V = "kubernetes.Semver"
_OPAQUE = frozenset((_Q, _V))
_BOOL_FNS = frozenset(
    (
        "isQuantity",
        "isSemver",
        "isGreaterThan",
        "isLessThan",
        "isInteger",
        "matches",
        "startsWith",
        "endsWith",
        "contains",
        "includes",
        "has",
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "bool",
    )
)
_INT_FNS = frozenset(
    ("compareTo", "sign", "asInteger", "major", "minor", "patch", "size", "int", "indexOf", "lastIndexOf")
)
_STRING_RESULT_FNS = frozenset(
    ("string", "lowerAscii", "upperAscii", "trim", "replace", "substring", "charAt", "find", "join", "format")
)
_LIST_FNS = frozenset(("findAll", "split", "map", "filter", "transformList", "sortBy"))
_RELATIONAL = frozenset(("<", "<=", ">", ">="))


_NOT_BOOL = frozenset(("int", "uint", "double", "string", "bytes", "null_type", "list", "map", _Q, _V))
_NET = {"__dra_ip": "net.IP", "__dra_cidr": "net.CIDR", "__dra_url": "net.URL", "__dra_masked": "net.CIDR",
        "__dra_cidr_ip": "net.IP"}
_CONCRETE = frozenset(("int", "uint", "double", "string", "bool", "bytes", _Q, _V, *_NET.values()))
_EQ_TYPES = _CONCRETE | {"list", "map"}
_EXT_RESULT = {
    **{f"__dra_{f}": "list" for f in ("keys", "slice", "flatten", "sort", "distinct", "reverse", "sortByKeys",
                                         "lists_range")},
    **{f"__dra_{f}": "map" for f in ("zip", "getQuery")},
    **{f"__dra_{f}": "bool" for f in ("isSorted", "sets_contains", "sets_equivalent", "sets_intersects", "isIP",
                                         "isCIDR", "isURL", "ip_isCanonical", "isUnspecified", "isLoopback",
                                         "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast",
                                         "containsIP", "containsCIDR")},
    **{f"__dra_{f}": "int" for f in ("family", "prefixLength", "indexOf", "lastIndexOf")},
    **{f"__dra_{f}": "string" for f in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath",
                                           "string", "format")},
    **{f"__dra_{f}": "bool" for f in ("eq", "ne", "in_constant", "quantity_eq_ptr")},
}


def _require_bool(op: str, *types: str) -> None:
    """The checker's rule for logical operators (cel-go and cel-cpp refuse ``true || "x"`` at compile time)."""
    if any(t in _NOT_BOOL for t in types):
        raise CELCompileError(f"found no matching overload for '{op}' applied to '({', '.join(types)})'")


def _infer(node: Node, scope: Mapping[str, str]) -> str:
    """A coarse static type ("dyn" when unknown); raises CELCompileError for Quantity/Semver misuse."""
    if isinstance(node, Lit):
        return {"null": "null_type"}.get(node.kind, node.kind)
    if isinstance(node, Ident):
        t = scope.get(node.name, "dyn") if not node.leading_dot else "dyn"
        return "map" if t in ("attrs", "caps") else t
    if isinstance(node, Select | Index):
        operand = node.operand
        f = _device_field(node, scope) if isinstance(node, Select) else None
        if f is not None:
            return {"driver": "string", "allowMultipleAllocations": "bool"}.get(f, "map")
        if isinstance(node, Index):
            _infer(node.index, scope)
        kind = _domain_map_kind(operand, scope)
        if kind is not None:
            _infer(operand, scope)
            return "capdomain" if kind == "caps" else "map"
        ot = _infer(operand, scope)
        if ot == "capdomain" and not node.optional:
            return _Q
        if isinstance(node, Select) and ot in _NOT_BOOL - {"map"} | {"bool"}:
            raise CELCompileError(f"type '{ot}' does not support field selection")
        return "optional" if node.optional else "dyn"
    if isinstance(node, Unary):
        t = _infer(node.operand, scope)
        if node.op == "!":
            _require_bool("!_", t)
            return "bool"
        if t in _OPAQUE:
            raise CELCompileError(f"found no matching overload for '-_' applied to '({t})'")
        return t if t in ("int", "double") else "dyn"
    if isinstance(node, Binary):
        lt, rt = _infer(node.left, scope), _infer(node.right, scope)
        lt, rt = ("map" if lt == "capdomain" else lt), ("map" if rt == "capdomain" else rt)
        if node.op in ("&&", "||"):
            _require_bool(f"_{node.op}_", lt, rt)
            return "bool"
        if node.op in ("==", "!=") and lt in _EQ_TYPES and rt in _EQ_TYPES and lt != rt:
            # _==_ is (A, A): static types must agree (1 == 1.0 is refused; dyn(1) == 1.0 is true)
            raise CELCompileError(f"found no matching overload for '_{node.op}_' applied to '({lt}, {rt})'")
        if node.op in ("==", "!=", "in"):
            return "bool"
        if lt in _OPAQUE or rt in _OPAQUE:
            raise CELCompileError(f"found no matching overload for '_{node.op}_' applied to '({lt}, {rt})'")
        if node.op in _RELATIONAL:
            return "bool"
        return lt if lt == rt and lt != "bool" else "dyn"
    if isinstance(node, Cond):
        _require_bool("_?_:_", _infer(node.cond, scope))
        a, b = _infer(node.then, scope), _infer(node.other, scope)
        return a if a == b else "dyn"
    if isinstance(node, ListLit):
        for e in node.elems:
            _infer(e, scope)
        return "list"
    if isinstance(node, MapLit):
        for k, v, _ in node.entries:
            _infer(k, scope)
            _infer(v, scope)
        return "map"
    if isinstance(node, StructLit):
        return "dyn"
    # Call
    if _is_has(node):
        return "bool"
    if _is_bind(node):
        var = cast(Ident, node.args[0]).name
        it = _infer(node.args[1], scope)
        kind = _domain_map_kind(node.args[1], scope)
        return _infer(node.args[2], {**scope, var: kind or it})
    names = _macro_vars(node)
    if names is not None:
        assert node.target is not None
        _infer(node.target, scope)
        loop_scope = {**scope, **dict.fromkeys(names, "dyn")}
        for arg in node.args[len(names) :]:
            _infer(arg, loop_scope)
        fn = node.fn
        if fn in _BOOL_FNS:
            return "bool"
        return "map" if fn in ("transformMap", "transformMapEntry") else "list" if fn in _LIST_FNS else "dyn"
    target_type = _infer(node.target, scope) if node.target is not None else None
    arg_types = [_infer(arg, scope) for arg in node.args]
    fn = node.fn
    if fn == "sign" and node.target is not None:
        raise CELCompileError(f"found no matching overload for 'sign' applied to '{target_type}.()'")
    if fn in ("compareTo", "isGreaterThan", "isLessThan") and len(arg_types) == 1:
        other = "map" if arg_types[0] == "capdomain" else arg_types[0]
        if target_type in _OPAQUE and other != target_type and other not in ("dyn", "optional"):
            raise CELCompileError(f"found no matching overload for '{fn}' applied to '({target_type}, {other})'")
    if fn in _NET:
        return _NET[fn]
    if fn in _EXT_RESULT:
        return _EXT_RESULT[fn]
    if fn == "quantity":
        return _Q
    if fn == "semver":
        return _V
    if fn in ("add", "sub") and target_type == _Q:
        return _Q
    if fn in _BOOL_FNS:
        return "bool"
    if fn in _INT_FNS:
        return "int"
    if fn in _STRING_RESULT_FNS:
        return "string"
    if fn in ("asApproximateFloat", "double"):
        return "double"
    if fn in _LIST_FNS:
        return "list"
    if fn in ("uint", "bytes", "type", "duration", "timestamp"):
        return fn
    return "dyn"


@dataclass(frozen=True, slots=True)
class _Analysed:
    text: str  # what the engine compiles
    cost: int
    tree: Node


def _analyse(
    expression: str,
    *,
    checked: bool,
    supports_bind: bool,
    rewrite_domains: bool,
    fold: Callable[[Node], Node] | None = None,
) -> _Analysed:
    try:
        return _analyse_tree(expression, checked, supports_bind, rewrite_domains, fold)
    except RecursionError:
        raise CELCompileError("expression is too deeply nested") from None


def _analyse_tree(
    expression: str,
    checked: bool,
    supports_bind: bool,
    rewrite_domains: bool,
    fold: Callable[[Node], Node] | None,
) -> _Analysed:
    from plugins.dra import cel_cost, cel_ext, cel_format

    original = parse_expression(expression)
    cel_ext.check_reserved(original)
    cel_ext.check_homogeneous(original)
    cel_format.check_format_calls(original)
    tree = cel_ext.translate(original, checked=checked)
    if checked and cel_ext.uses_library_calls(tree) and cel_ext.escaping_optional(original):
        # cel-expr-python 0.1.3 crashes (SIGSEGV) converting a map holding an optional value for a Python
        # function; refuse the combination instead of taking the scheduler down with it
        raise CELCompileError(
            f"optional values kept in a list, a map or a variable cannot be combined with the library functions "
            f"of this environment on {_XP} (use .orValue() first)"
        )
    _check_names(tree, {}, strict=not checked)
    if not checked:
        cel_ext.check_functions(tree)
    cost = cel_cost.estimate(tree)
    if not checked:
        result = _infer(tree, {})
        if result == "capdomain":
            result = "map"
        if result not in ("bool", "dyn", "optional"):
            raise CELCompileError(f"must evaluate to bool or the unknown type, not {result}")
    work = tree
    if checked:  # cel-go's failing == and constant `in` on library values (celpy: strict_macros below)
        work = cel_ext.opaque_equality(work)
    if rewrite_domains:
        work = _rewrite(work, {})
    if fold is not None:
        work = fold(work)
    if not checked:  # celpy: no bindings at all, comprehension errors as CEL errors
        work = cel_ext.strict_macros(cel_ext.binds_to_comprehensions(work, always=True))
    else:
        work = cel_ext.binds_to_comprehensions(work)  # cel-cpp's bind-after-short-circuit bug
    # cel-python's parser is older than CEL's grammar (trailing commas): it always gets the printed tree
    text = expression if checked and work == original else unparse(work)
    return _Analysed(text, int(min(cost, 2**62)), tree)


# =====================================================================================================
# Kubernetes library helpers shared by the engines
# =====================================================================================================


@functools.lru_cache(maxsize=65536)
def _fraction(tag: str) -> Fraction:
    return Fraction(tag)


@functools.lru_cache(maxsize=8192)
def _version_from_tag(tag: str) -> Version:
    return parse_semver(tag)


def _quantity_or_error(s: str) -> Quantity:
    try:
        return parse_quantity(s)
    except QuantityError as e:
        raise ValueError(str(e)) from None


def _semver_or_error(s: str, normalize: bool) -> Version:
    try:
        return parse_semver(s, normalize)
    except SemverError as e:
        raise ValueError(str(e)) from None


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def _is_semver(s: str, normalize: bool) -> bool:
    try:
        parse_semver(s, normalize)
    except SemverError:
        return False
    return True


def _cmp(a: Fraction | Version, b: Fraction | Version) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def _regex_find(s: str, pattern: str) -> str:
    try:
        rx = _compile_regex(pattern)
    except _re2().error as e:
        raise _regex_error(pattern, e) from None
    m = rx.search(s)
    return "" if m is None else str(m.group(0))


def _regex_find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    try:
        rx = _compile_regex(pattern)
    except _re2().error as e:
        raise _regex_error(pattern, e) from None
    found = [str(m.group(0)) for m in rx.finditer(s)]
    return found if limit < 0 else found[:limit]


@functools.lru_cache(maxsize=1024)
def _compile_regex(pattern: str) -> Any:
    """RE2 (linear time, the syntax of Go's regexp), as Kubernetes; errors are ``re2.error``."""
    return _re2().compile(pattern, _re2_options())


@functools.cache
def _re2() -> Any:
    return importlib.import_module("re2")


@functools.cache
def _re2_options() -> Any:
    opts = _re2().Options()
    opts.log_errors = False  # errors are reported as CEL runtime errors, not on stderr
    return opts


def _regex_error(pattern: str, e: Exception) -> ValueError:
    detail = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
    return ValueError(f"invalid regex {pattern!r}: {detail}")


def _regex_matches(s: str, pattern: str) -> bool:
    try:
        rx = _compile_regex(pattern)
    except _re2().error as e:
        raise _regex_error(pattern, e) from None
    return rx.search(s) is not None


def _cel_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _includes(x: object, v: object) -> bool:
    if isinstance(x, list | tuple):
        if len(x) > INCLUDES_MAX_LIST:
            raise ValueError(f"'includes' function cannot be applied to lists longer than {INCLUDES_MAX_LIST} values")
        return any(_cel_equal(e, v) for e in x)
    return _cel_equal(x, v)


_STATUS_PREFIX = re.compile(r"^(?:[A-Z_]+: )+")
_KEY_NOT_FOUND = re.compile(r'Key not found in map ?: ?"?(.*?)"?$')


def _clean_status(msg: str) -> str:
    msg = _STATUS_PREFIX.sub("", msg.strip())
    return re.sub(r" \[[A-Z_]+\]$", "", msg)


# =====================================================================================================
# Engine: cel-expr-python (cel-cpp)
# =====================================================================================================

_XP = "cel-expr-python"
_QKEY = "@q"
_VKEY = 0


def _xp_tag_quantity(q: Quantity) -> dict[str, str]:
    return {_QKEY: str(q.value)}


def _xp_tag_version(v: Version) -> dict[int, str]:
    return {_VKEY: v.core()}


def _xp_value(v: object) -> object:
    if isinstance(v, Version):
        return _xp_tag_version(v)
    if isinstance(v, tuple | list):
        return [_xp_value(e) for e in v]
    if isinstance(v, bool | str) or (isinstance(v, int) and -(2**63) <= v < 2**63):
        return v
    raise TypeError(f"unsupported attribute value {v!r}")


def _xp_fold(node: Node) -> Node:
    """Replace ``quantity("<valid literal>")`` / ``semver(...)`` by their tagged-map constants.

    Saves a Python callback per evaluation; invalid literals are left alone so that they still fail at
    evaluation time, as in Kubernetes.
    """
    if isinstance(node, Call) and node.target is None and not node.leading_dot and node.args:
        first = node.args[0]
        if node.fn == "quantity" and len(node.args) == 1 and isinstance(first, Lit) and first.kind == "string":
            try:
                q = parse_quantity(cast(str, first.value))
            except QuantityError:
                return node
            return MapLit(((_string_lit(_QKEY), _string_lit(str(q.value)), False),))
        if node.fn == "semver" and isinstance(first, Lit) and first.kind == "string" and len(node.args) <= 2:
            normalize: object = False
            if len(node.args) == 2:
                second = node.args[1]
                if not (isinstance(second, Lit) and second.kind == "bool"):
                    return _map_children(node, _xp_fold)
                normalize = second.value
            try:
                v = parse_semver(cast(str, first.value), bool(normalize))
            except SemverError:
                return node
            return MapLit(((Lit("int", str(_VKEY), _VKEY), _string_lit(v.core()), False),))
    return _map_children(node, _xp_fold)


def _xp_num(d: Mapping[Any, Any]) -> Fraction | Version:
    if _QKEY in d:
        return _fraction(d[_QKEY])
    if _VKEY in d:
        return _version_from_tag(d[_VKEY])
    raise ValueError("no such overload")


def _xp_compare(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> int:
    x, y = _xp_num(a), _xp_num(b)
    if type(x) is not type(y):
        raise ValueError("no such overload")
    return _cmp(x, y)


def _xp_quantity_of(d: Mapping[Any, Any]) -> Fraction:
    if _QKEY not in d:
        raise ValueError("no such overload")
    return _fraction(d[_QKEY])


def _xp_version_of(d: Mapping[Any, Any]) -> Version:
    if _VKEY not in d:
        raise ValueError("no such overload")
    return _version_from_tag(d[_VKEY])


def _xp_add(a: Mapping[Any, Any], b: Any) -> dict[str, str]:
    y = b if isinstance(b, int) and not isinstance(b, bool) else _xp_quantity_of(b)
    return {_QKEY: str(_xp_quantity_of(a) + y)}


def _xp_sub(a: Mapping[Any, Any], b: Any) -> dict[str, str]:
    y = b if isinstance(b, int) and not isinstance(b, bool) else _xp_quantity_of(b)
    return {_QKEY: str(_xp_quantity_of(a) - y)}


def _xp_as_integer(a: Mapping[Any, Any]) -> int:
    v = _xp_quantity_of(a)
    if v.denominator != 1 or not -(2**63) <= v.numerator <= 2**63 - 1:
        raise ValueError("cannot convert value to integer")
    return v.numerator


def _xp_is_integer(a: Mapping[Any, Any]) -> bool:
    v = _xp_quantity_of(a)
    return v.denominator == 1 and -(2**63) <= v.numerator <= 2**63 - 1


def _xp_type_name(t: Any, q_type: Any = None, v_type: Any = None) -> str:
    if q_type is not None and t == q_type:
        return _Q
    if v_type is not None and t == v_type:
        return _V
    name = re.sub(r"[A-Z_]+", lambda m: m.group(0).lower(), str(t.name()))
    name = name.replace("<", "(").replace(">", ")").replace("null", "null_type")
    return name.replace("map(string, string)", _Q).replace("map(int, string)", _V)


def _xp_clean_compile(message: str) -> str:
    message = _clean_status(message)
    return message.replace("map(string, string)", _Q).replace("map(int, string)", _V)


_XP_IP_KEY = 0
_XP_CIDR_KEY = True
_XP_URL_KEY = "@u"


def _xp_ext_functions(cel: Any, Q: Any, V: Any) -> list[Any]:
    """Declarations of :data:`plugins.dra.cel_ext.FUNCTIONS` for cel-expr-python (typed overloads; IP, CIDR and
    URL travel as tagged maps of distinct types like Quantity and Semver)."""
    from plugins.dra import cel_ext, cel_format

    T = cel.Type
    IP, CIDR, URL = T.Map(T.UINT, T.STRING), T.Map(T.BOOL, T.STRING), T.Map(T.STRING, T.BYTES)
    L, M, D, N, S, B = T.List(T.DYN), T.Map(T.DYN, T.DYN), T.DYN, T.INT, T.STRING, T.BOOL
    # One overload per runtime kind (cel-cpp dispatches on kinds: all tagged maps are "map").
    scalars = [T.INT, T.UINT, T.DOUBLE, T.STRING, T.BOOL, T.BYTES, T.NULL, M, L]

    def arg_in(t: Any, v: Any) -> Any:
        if t == M and isinstance(v, dict) and len(v) == 1:
            k = next(iter(v))
            if k is True and isinstance(v[k], str):
                return cel_ext.CIDRValue(v[k])
            if isinstance(v[k], str):
                return cel_ext.IPValue(v[k])
            return v
        if t == IP:
            return cel_ext.IPValue(v[_XP_IP_KEY])
        if t == CIDR:
            return cel_ext.CIDRValue(v[_XP_CIDR_KEY])
        if t == URL:
            return cel_ext.URLValue(v[_XP_URL_KEY].decode("utf-8"))
        return v

    def out(v: Any) -> Any:
        if isinstance(v, cel_ext.IPValue):
            return {_XP_IP_KEY: v.text}
        if isinstance(v, cel_ext.CIDRValue):
            return {_XP_CIDR_KEY: v.text}
        if isinstance(v, cel_ext.URLValue):
            return {_XP_URL_KEY: v.text.encode("utf-8")}
        return v

    def wrap(impl: Callable[..., Any], params: list[Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return out(impl(*(arg_in(t, a) for t, a in zip(params, args, strict=False))))

        return call

    def lib_value(v: Any) -> Any:
        """A dyn value as cel_format/cel_ext expect it: tagged maps are the library values they stand for
        (:class:`cel_format.Opaque`, equal tags for equal values), bytes are bytes, types are type values."""
        if isinstance(v, dict):
            if len(v) == 1:
                k, x = next(iter(v.items()))
                if k is True and isinstance(x, str):
                    return cel_format.Opaque("net.CIDR", x)
                if k == _QKEY and isinstance(x, str):
                    return cel_format.Opaque(_Q, x)
                if k == _XP_URL_KEY and isinstance(x, bytes | bytearray):
                    return cel_format.Opaque("kubernetes.URL", bytes(x))
                if k == _VKEY and not isinstance(k, bool) and isinstance(x, str):
                    return cel_format.Opaque(_V, x)  # (an IP is the same map: taken for a Semver)
            return {lib_value(k): lib_value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [lib_value(x) for x in v]
        if isinstance(v, bytearray):
            return bytes(v)
        if isinstance(v, cel.Type):
            name = str(v).split("<")[0].lower()
            return cel_format.TypeValue(
                {"null": "null_type", "duration": "google.protobuf.Duration",
                 "timestamp": "google.protobuf.Timestamp"}.get(name, name)
            )
        return v

    def wrap_lib(impl: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *args: impl(*(lib_value(a) for a in args))

    # eq/ne/in_constant take the left operand only when it is a map or a list (cel_ext.opaque_equality), the
    # right one of any kind: one overload per runtime kind
    any_kind = [T.INT, T.UINT, T.DOUBLE, T.STRING, T.BOOL, T.BYTES, T.NULL, M, L, T.DURATION, T.TIMESTAMP, T.TYPE]

    sigs: dict[str, list[tuple[Any, list[Any]]]] = {
        "keys": [(L, [L]), (L, [M])],
        "quantity_eq_ptr": [(B, [Q, Q])],
        "zip": [(M, [L, L])],
        "lists_range": [(T.List(N), [N])],
        "slice": [(L, [L, N, N])],
        "flatten": [(L, [L]), (L, [L, N])],
        "sort": [(L, [L])],
        "distinct": [(L, [L])],
        "reverse": [(L, [L])],
        "sortByKeys": [(L, [L, L])],
        "isSorted": [(B, [L])],
        "sum": [(D, [L])],
        "min": [(D, [L])],
        "max": [(D, [L])],
        "indexOf": [(N, [S, S]), (N, [S, S, N]), *((N, [L, t]) for t in scalars)],
        "lastIndexOf": [(N, [S, S]), (N, [S, S, N]), *((N, [L, t]) for t in scalars)],
        "sets_contains": [(B, [L, L])],
        "sets_equivalent": [(B, [L, L])],
        "sets_intersects": [(B, [L, L])],
        "ip": [(IP, [S])],
        "isIP": [(B, [S])],
        "ip_isCanonical": [(B, [S])],
        "family": [(N, [IP])],
        "isUnspecified": [(B, [IP])],
        "isLoopback": [(B, [IP])],
        "isLinkLocalMulticast": [(B, [IP])],
        "isLinkLocalUnicast": [(B, [IP])],
        "isGlobalUnicast": [(B, [IP])],
        "cidr": [(CIDR, [S])],
        "isCIDR": [(B, [S])],
        "containsIP": [(B, [CIDR, IP]), (B, [CIDR, S])],
        "containsCIDR": [(B, [CIDR, CIDR]), (B, [CIDR, S])],
        "cidr_ip": [(IP, [CIDR])],
        "masked": [(CIDR, [CIDR])],
        "prefixLength": [(N, [CIDR])],
        "string": [(S, [M])],
        "url": [(URL, [S])],
        "isURL": [(B, [S])],
        "getScheme": [(S, [URL])],
        "getHost": [(S, [URL])],
        "getHostname": [(S, [URL])],
        "getPort": [(S, [URL])],
        "getEscapedPath": [(S, [URL])],
        "getQuery": [(T.Map(S, T.List(S)), [URL])],
        "format": [(S, [S, L])],
        "eq": [(B, [left, right]) for left in (M, L) for right in any_kind],
        "ne": [(B, [left, right]) for left in (M, L) for right in any_kind],
        "in_constant": [(B, [M, L]), (B, [M, M]), (B, [L, M])],
    }
    lib_functions = ("format", "eq", "ne", "in_constant")
    decls = []
    for name, overloads in sigs.items():
        impl = cel_ext.FUNCTIONS[name].impl
        decls.append(
            cel.FunctionDecl(
                cel_ext.PREFIX + name,
                [
                    cel.Overload(
                        f"dra_{name}_{k}",
                        ret,
                        params,
                        impl=wrap_lib(impl) if name in lib_functions else wrap(impl, params),
                    )
                    for k, (ret, params) in enumerate(overloads)
                ],
            )
        )
    return decls


class _CelExprPythonEngine:
    name = _XP

    def __init__(self) -> None:
        cel: Any = importlib.import_module("cel_expr_python.cel")
        ext_strings: Any = importlib.import_module("cel_expr_python.ext.ext_strings")
        ext_bindings: Any = importlib.import_module("cel_expr_python.ext.ext_bindings")
        ext_optional: Any = importlib.import_module("cel_expr_python.ext.ext_optional")
        self._cel = cel
        T = cel.Type
        Q = T.Map(T.STRING, T.STRING)
        V = T.Map(T.INT, T.STRING)
        self._q_type, self._v_type = Q, V
        self._bool, self._dyn, self._error = T.BOOL, T.DYN, T.ERROR
        Fn, Ov = cel.FunctionDecl, cel.Overload

        def member(oid: str, ret: Any, params: list[Any], impl: Any = None) -> Any:
            if impl is None:
                return Ov(oid, ret, params, is_member=True)
            return Ov(oid, ret, params, is_member=True, impl=impl)

        def glob(oid: str, ret: Any, params: list[Any], impl: Any) -> Any:
            return Ov(oid, ret, params, impl=impl)

        def q_bool(pred: Callable[[int], bool]) -> Callable[[Any, Any], bool]:
            return lambda a, b: pred(_xp_compare(a, b))

        functions = [
            Fn(
                "quantity",
                [glob("string_to_quantity", Q, [T.STRING], lambda s: _xp_tag_quantity(_quantity_or_error(s)))],
            ),
            Fn("isQuantity", [glob("is_quantity_string", T.BOOL, [T.STRING], _is_quantity)]),
            Fn(
                "semver",
                [
                    glob(
                        "string_to_semver",
                        V,
                        [T.STRING],
                        lambda s: _xp_tag_version(_semver_or_error(s, False)),
                    ),
                    glob(
                        "string_bool_to_semver",
                        V,
                        [T.STRING, T.BOOL],
                        lambda s, n: _xp_tag_version(_semver_or_error(s, bool(n))),
                    ),
                ],
            ),
            Fn(
                "isSemver",
                [
                    glob("is_semver_string", T.BOOL, [T.STRING], lambda s: _is_semver(s, False)),
                    glob(
                        "is_semver_string_bool",
                        T.BOOL,
                        [T.STRING, T.BOOL],
                        lambda s, n: _is_semver(s, bool(n)),
                    ),
                ],
            ),
            Fn(
                "compareTo",
                [
                    member("quantity_compare_to", T.INT, [Q, Q], _xp_compare),
                    member("semver_compare_to", T.INT, [V, V]),
                ],
            ),
            Fn(
                "isGreaterThan",
                [
                    member("quantity_is_greater_than", T.BOOL, [Q, Q], q_bool(lambda c: c == 1)),
                    member("semver_is_greater_than", T.BOOL, [V, V]),
                ],
            ),
            Fn(
                "isLessThan",
                [
                    member("quantity_is_less_than", T.BOOL, [Q, Q], q_bool(lambda c: c == -1)),
                    member("semver_is_less_than", T.BOOL, [V, V]),
                ],
            ),
            Fn(
                "add",
                [
                    member("quantity_add", Q, [Q, Q], _xp_add),
                    member("quantity_add_int", Q, [Q, T.INT], _xp_add),
                ],
            ),
            Fn(
                "sub",
                [
                    member("quantity_sub", Q, [Q, Q], _xp_sub),
                    member("quantity_sub_int", Q, [Q, T.INT], _xp_sub),
                ],
            ),
            Fn("isInteger", [member("quantity_is_integer", T.BOOL, [Q], _xp_is_integer)]),
            Fn("asInteger", [member("quantity_get_int", T.INT, [Q], _xp_as_integer)]),
            Fn(
                "asApproximateFloat",
                [member("quantity_get_float", T.DOUBLE, [Q], lambda a: float(_xp_quantity_of(a)))],
            ),
            # sign() is a global function in Kubernetes' quantity library (sign(q), not q.sign()).
            Fn("sign", [glob("quantity_sign", T.INT, [Q], lambda a: _cmp(_xp_quantity_of(a), Fraction(0)))]),
            Fn("major", [member("semver_major", T.INT, [V], lambda a: _xp_version_of(a).major)]),
            Fn("minor", [member("semver_minor", T.INT, [V], lambda a: _xp_version_of(a).minor)]),
            Fn("patch", [member("semver_patch", T.INT, [V], lambda a: _xp_version_of(a).patch)]),
            Fn("find", [member("string_find_string", T.STRING, [T.STRING, T.STRING], _regex_find)]),
            Fn(
                "findAll",
                [
                    member("string_find_all_string", T.List(T.STRING), [T.STRING, T.STRING], _regex_find_all),
                    member(
                        "string_find_all_string_int",
                        T.List(T.STRING),
                        [T.STRING, T.STRING, T.INT],
                        _regex_find_all,
                    ),
                ],
            ),
            # cel-expr-python cannot dispatch Python functions on dyn parameters: one overload per kind.
            Fn(
                "includes",
                [
                    member(f"{prefix}_includes_{kind}", T.BOOL, [T.List(t) if prefix == "list" else t, t], _includes)
                    for kind, t in (("string", T.STRING), ("int", T.INT), ("bool", T.BOOL), ("semver", V))
                    for prefix in ("list", kind)
                ],
            ),
        ]
        functions.extend(_xp_ext_functions(cel, Q, V))
        self._env = cel.NewEnv(
            variables={
                "device.driver": T.STRING,
                "device.attributes": T.Map(T.STRING, T.Map(T.STRING, T.DYN)),
                "device.capacity": T.Map(T.STRING, T.Map(T.STRING, Q)),
                "device.allowMultipleAllocations": T.BOOL,
            },
            extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), ext_optional.ExtOptional()],
            functions=functions,
        )

    def compile(self, expression: str) -> Program:
        try:
            analysed = _analyse(expression, checked=True, supports_bind=True, rewrite_domains=True, fold=_xp_fold)
        except CELCompileError as e:
            if "Syntax error" in e.detail:  # prefer the engine's own wording when it agrees
                try:
                    self._env.compile(expression)
                except RuntimeError as engine_error:
                    raise CELCompileError(_xp_clean_compile(str(engine_error))) from None
            raise
        try:
            compiled = self._env.compile(analysed.text)
        except RuntimeError as e:
            message = str(e)
            if analysed.text != expression:  # report positions in the user's text when possible
                try:
                    self._env.compile(expression)
                except RuntimeError as original_error:
                    message = str(original_error)
            raise CELCompileError(_xp_clean_compile(message)) from None
        rt = compiled.return_type()
        if not (rt == self._bool or rt == self._dyn):
            name = _xp_type_name(rt, self._q_type, self._v_type)
            raise CELCompileError(f"must evaluate to bool or the unknown type, not {name}")
        return _CelExprProgram(expression, analysed.cost, compiled, self, _may_panic(analysed.text))

    def activation(self, device: DeviceInput) -> Any:
        act = device._activations.get(_XP)
        if act is None:
            try:
                act = self._build_activation(device)
            except Exception as e:  # e.g. an attribute without a supported value
                raise CELRuntimeError(f"unsupported attribute value: {e}") from None
            device._activations[_XP] = act
        return act

    def _build_activation(self, device: DeviceInput) -> Any:
        data = {
            "device.driver": device.driver,
            "device.attributes": {
                dom: {k: _xp_value(v) for k, v in ids.items()} for dom, ids in device.attributes.items()
            },
            "device.capacity": {
                dom: {k: _xp_tag_quantity(q) for k, q in ids.items()} for dom, ids in device.capacity.items()
            },
            "device.allowMultipleAllocations": bool(device.allow_multiple_allocations),
        }
        return self._env.Activation(data)

    def result_error(self, value: Any, plain: object) -> CELRuntimeError:
        t = value.type()
        if t == self._error:
            msg = _clean_status(str(plain))
            m = _KEY_NOT_FOUND.search(msg)
            if m is not None:
                msg = f"no such key: {m.group(1)}"
            return CELRuntimeError(msg)
        if isinstance(plain, dict) and _QKEY in plain:
            name = _Q
        elif isinstance(plain, dict) and _VKEY in plain:
            name = _V
        else:
            name = _xp_type_name(t).split("(")[0]
        return CELRuntimeError(f"CEL result of type {name} could not be converted to bool")


class _CelExprProgram:
    __slots__ = ("_compiled", "_engine", "estimated_cost", "expression", "may_panic")

    def __init__(
        self, expression: str, cost: int, compiled: Any, engine: _CelExprPythonEngine, may_panic: bool = False
    ) -> None:
        self.expression = expression
        self.estimated_cost = cost
        self._compiled = compiled
        self._engine = engine
        self.may_panic = may_panic

    def matches(self, device: DeviceInput) -> bool:
        if self.estimated_cost > COST_LIMIT:
            raise CELRuntimeError(_COST_EXCEEDED)
        act = device._activations.get(_XP)
        if act is None:
            act = self._engine.activation(device)
        if self.may_panic:
            _PANIC.message = None
        try:
            value = self._compiled.eval(act)
        except RuntimeError as e:  # cel-cpp's comprehension iteration budget, internal failures
            return self._fallback(device, _clean_status(str(e)))
        if self.may_panic and _PANIC.message is not None:
            raise CELRuntimeError(_PANIC.message)
        try:
            plain = value.value()
        except (TypeError, RuntimeError, AssertionError):
            plain = None
        if plain is True:
            return True
        if plain is False:
            return False
        raise self._engine.result_error(value, plain)

    def _fallback(self, device: DeviceInput, reason: str) -> bool:
        """cel-cpp stopped the evaluation: its comprehension budget (9,999 iterations per evaluation) is
        smaller than what Kubernetes' cost limit allows. Only this evaluation fails (its claim gets an error
        status, the run goes on); evaluating it again with cel-python instead would take seconds per device
        (a selector written to slow the scheduler down), so it is not done."""
        if "budget" in reason.lower():
            reason = (
                "operation cancelled: comprehension iteration budget exceeded (cel-expr-python evaluates at most "
                f"9,999 comprehension iterations per selector; the {_PY} engine has no such budget)"
            )
        raise CELRuntimeError(reason)

    def __repr__(self) -> str:
        return f"<{_XP} program {self.expression!r}>"


# =====================================================================================================
# Engine: cel-python (celpy)
# =====================================================================================================

_PY = "cel-python"


class _PyQuantity:
    """A Quantity inside celpy: equality by value, deliberately no ordering/arithmetic operators."""

    __slots__ = ("q",)
    cel_type_name = _Q

    def __init__(self, q: Quantity) -> None:
        self.q = q

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _PyQuantity) and self.q.value == other.q.value

    def __hash__(self) -> int:
        return hash(self.q.value)

    def __repr__(self) -> str:
        return f"quantity({str(self.q)!r})"


class _PyVersion:
    """A Semver inside celpy: equality by precedence, deliberately no ordering operators."""

    __slots__ = ("v",)
    cel_type_name = _V

    def __init__(self, v: Version) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _PyVersion) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)

    def __repr__(self) -> str:
        return f"semver({str(self.v)!r})"


def _short_circuit(evaluation: Any, celtypes: Any, op: str, decides: bool) -> Callable[[Any, Any], Any]:
    """celpy's ``conditionalor``/``conditionaland`` visitor, evaluating the right operand only when the left
    one is not ``decides`` (true for ``||``, false for ``&&``)."""

    def visit(self: Any, tree: Any) -> Any:
        if len(tree.children) == 1:
            return self.visit_children(tree)[0]
        left = self.visit(tree.children[0])
        if isinstance(left, celtypes.BoolType) and bool(left) is decides:
            return left
        right = self.visit(tree.children[1])
        func = self.activation.resolve_function(op)
        try:
            return func(left, right)
        except TypeError as ex:
            value = evaluation.CELEvalError(
                f"found no matching overload for {op} applied to '({type(left)}, {type(right)})'",
                ex.__class__,
                ex.args,
                tree=tree,
            )
            value.__cause__ = ex
            return value

    return visit


class _CelPythonEngine:
    name = _PY

    def __init__(self) -> None:
        celpy: Any = importlib.import_module("celpy")
        celtypes: Any = importlib.import_module("celpy.celtypes")
        evaluation: Any = importlib.import_module("celpy.evaluation")
        self._celpy = celpy
        self._t = celtypes
        self._eval_error = evaluation.CELEvalError
        # Macro bodies return errors as values (see cel_ext.strict_macros) instead of raising them.
        evaluation.Evaluator.build_macro_eval = evaluation.Evaluator.build_ss_macro_eval
        # || and && evaluate their right operand only when the left one does not decide, as cel-go's
        # evalOr/evalAnd (celpy evaluates both): a right operand that panics upstream (cel_ext.PANIC) is then
        # evaluated exactly when cel-go evaluates it. Same values otherwise (the left one decides either way).
        evaluation.Evaluator.conditionalor = _short_circuit(evaluation, celtypes, "_||_", True)
        evaluation.Evaluator.conditionaland = _short_circuit(evaluation, celtypes, "_&&_", False)
        self._env = celpy.Environment()
        self._functions = self._build_functions()
        empty = celtypes.MapType()
        # device.attributes / device.capacity: an unknown domain reads as {} but is not "in" the map.
        self._domain_map: Any = type("DomainMap", (celtypes.MapType,), {"__missing__": lambda _self, _key: empty})
        t = celtypes
        self._type_names: list[tuple[type, str]] = [
            (t.BoolType, "bool"),
            (bool, "bool"),
            (t.UintType, "uint"),
            (t.IntType, "int"),
            (t.DoubleType, "double"),
            (t.StringType, "string"),
            (t.BytesType, "bytes"),
            (t.ListType, "list"),
            (t.MapType, "map"),
            (_PyQuantity, _Q),
            (_PyVersion, _V),
            (t.TimestampType, "google.protobuf.Timestamp"),
            (t.DurationType, "google.protobuf.Duration"),
            (type(None), "null_type"),
        ]

    # -- library ------------------------------------------------------------------------------------
    def _err(self, message: str) -> Any:
        return self._eval_error(message, ValueError, (message,))

    def _build_functions(self) -> dict[str, Callable[..., Any]]:
        t = self._t
        err = self._err
        Bool, Int, Str, Dbl, Lst = t.BoolType, t.IntType, t.StringType, t.DoubleType, t.ListType

        def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(fn)
            def wrapper(*args: Any) -> Any:
                try:
                    return fn(*args)
                except ValueError as e:
                    return err(str(e))
                except (TypeError, AttributeError, IndexError, KeyError) as e:
                    return err(f"no such overload: {fn.__name__}: {e}")

            return wrapper

        def num(x: Any) -> Fraction | Version:
            if isinstance(x, _PyQuantity):
                return x.q.value
            if isinstance(x, _PyVersion):
                return x.v
            raise ValueError("no such overload")

        def compare(a: Any, b: Any) -> int:
            x, y = num(a), num(b)
            if type(x) is not type(y):
                raise ValueError("no such overload")
            return _cmp(x, y)

        def quantity_of(a: Any) -> Quantity:
            if not isinstance(a, _PyQuantity):
                raise ValueError("no such overload")
            return a.q

        def version_of(a: Any) -> Version:
            if not isinstance(a, _PyVersion):
                raise ValueError("no such overload")
            return a.v

        def operand(b: Any) -> Quantity:
            if isinstance(b, int) and not isinstance(b, t.BoolType | bool):
                return Quantity.from_int(int(b), "DecimalExponent")
            return quantity_of(b)

        def string_of(s: Any) -> str:
            if not isinstance(s, str):
                raise ValueError("no such overload")
            return str(s)

        def as_integer(a: Any) -> Any:
            q = quantity_of(a)
            if not q.is_integer():
                raise ValueError("cannot convert value to integer")
            return Int(q.value.numerator)

        def split(s: Any, sep: Any, n: Any = -1) -> Any:
            text, separator, limit = string_of(s), string_of(sep), int(n)
            if limit == 0:
                return Lst([])
            if separator == "":
                parts = list(text)
                if limit > 0 and len(parts) > limit:
                    parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
            else:
                parts = text.split(separator, limit - 1) if limit > 0 else text.split(separator)
            return Lst([Str(p) for p in parts])

        def replace(s: Any, old: Any, new: Any, n: Any = -1) -> Any:
            return Str(string_of(s).replace(string_of(old), string_of(new), int(n)))

        def substring(s: Any, start: Any, end: Any = None) -> Any:
            text = string_of(s)
            stop = len(text) if end is None else int(end)
            if not 0 <= int(start) <= stop <= len(text):
                raise ValueError(f"index out of range: {start}..{stop}")
            return Str(text[int(start) : stop])

        def char_at(s: Any, i: Any) -> Any:
            text = string_of(s)
            if not 0 <= int(i) <= len(text):
                raise ValueError(f"index out of range: {i}")
            return Str(text[int(i) : int(i) + 1])

        def index_of(s: Any, sub: Any, start: Any = 0) -> Any:
            text = string_of(s)
            if not 0 <= int(start) <= len(text):
                raise ValueError(f"index out of range: {start}")
            return Int(text.find(string_of(sub), int(start)))

        def last_index_of(s: Any, sub: Any, end: Any = None) -> Any:
            text = string_of(s)
            stop = len(text) if end is None else int(end)
            return Int(text.rfind(string_of(sub), 0, stop + len(string_of(sub))))

        def join(items: Any, sep: Any = "") -> Any:
            return Str(string_of(sep).join(string_of(i) for i in items))

        def includes(x: Any, v: Any) -> Any:
            return Bool(_includes(list(x) if isinstance(x, list) else x, v))

        raw: dict[str, Callable[..., Any]] = {
            "quantity": lambda s: _PyQuantity(_quantity_or_error(string_of(s))),
            "isQuantity": lambda s: Bool(_is_quantity(string_of(s))),
            "semver": lambda s, n=False: _PyVersion(_semver_or_error(string_of(s), bool(n))),
            "isSemver": lambda s, n=False: Bool(_is_semver(string_of(s), bool(n))),
            "compareTo": lambda a, b: Int(compare(a, b)),
            "isGreaterThan": lambda a, b: Bool(compare(a, b) == 1),
            "isLessThan": lambda a, b: Bool(compare(a, b) == -1),
            "add": lambda a, b: _PyQuantity(quantity_of(a) + operand(b)),
            "sub": lambda a, b: _PyQuantity(quantity_of(a) - operand(b)),
            "isInteger": lambda a: Bool(quantity_of(a).is_integer()),
            "asInteger": as_integer,
            "asApproximateFloat": lambda a: Dbl(quantity_of(a).as_approximate_float()),
            "sign": lambda a: Int(quantity_of(a).sign()),
            "major": lambda a: Int(version_of(a).major),
            "minor": lambda a: Int(version_of(a).minor),
            "patch": lambda a: Int(version_of(a).patch),
            "find": lambda s, p: Str(_regex_find(string_of(s), string_of(p))),
            "findAll": lambda s, p, n=-1: Lst([Str(x) for x in _regex_find_all(string_of(s), string_of(p), int(n))]),
            "includes": includes,
            "lowerAscii": lambda s: Str("".join(c.lower() if c.isascii() else c for c in string_of(s))),
            "upperAscii": lambda s: Str("".join(c.upper() if c.isascii() else c for c in string_of(s))),
            "trim": lambda s: Str(string_of(s).strip()),
            "split": split,
            "replace": replace,
            "substring": substring,
            "charAt": char_at,
            "indexOf": index_of,
            "lastIndexOf": last_index_of,
            "join": join,
            "matches": lambda s, p: Bool(_regex_matches(string_of(s), string_of(p))),
            "contains": lambda s, sub: Bool(string_of(sub) in string_of(s)),
            "startsWith": lambda s, sub: Bool(string_of(s).startswith(string_of(sub))),
            "endsWith": lambda s, sub: Bool(string_of(s).endswith(string_of(sub))),
        }
        raw.update(self._ext_functions())
        for name, fn in raw.items():
            fn.__name__ = name
        return {name: guard(fn) for name, fn in raw.items()}

    def _plain(self, v: Any) -> Any:
        """celpy value -> plain Python (bool stays bool: celpy's BoolType is an int subclass)."""
        t = self._t
        if isinstance(v, t.BoolType | bool):
            return bool(v)
        if isinstance(v, t.IntType | t.UintType):
            return int(v)
        if isinstance(v, t.DoubleType):
            return float(v)
        if isinstance(v, t.StringType):
            return str(v)
        if isinstance(v, t.BytesType):
            return bytes(v)
        if isinstance(v, list):
            return [self._plain(x) for x in v]
        if isinstance(v, dict):
            return {self._plain(k): self._plain(x) for k, x in v.items()}
        return v

    def _to_celpy(self, v: Any) -> Any:
        t = self._t
        if isinstance(v, bool):
            return t.BoolType(v)
        if isinstance(v, int):
            return t.IntType(v)
        if isinstance(v, float):
            return t.DoubleType(v)
        if isinstance(v, str):
            return t.StringType(v)
        if isinstance(v, bytes):
            return t.BytesType(v)
        if isinstance(v, list | tuple):
            return t.ListType([self._to_celpy(x) for x in v])
        if isinstance(v, dict):
            return t.MapType({self._to_celpy(k): self._to_celpy(x) for k, x in v.items()})
        return v

    def _ext_functions(self) -> dict[str, Callable[..., Any]]:
        from plugins.dra import cel_ext

        def adapt(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                if len(args) not in cel_ext.FUNCTIONS[name].arities:
                    raise TypeError(f"wrong number of arguments ({len(args)})")
                return self._to_celpy(impl(*(self._plain(a) for a in args)))

            return call

        err_type = self._eval_error
        t = self._t

        def first_error(items: Any) -> Any:
            for x in items if isinstance(items, list) else ():
                if isinstance(x, err_type):
                    return x
            return None

        def strict(items: Any) -> Any:
            e = first_error(items)
            return e if e is not None else items

        def pick(target: Any, flags: Any) -> Any:
            e = bools(flags)
            if e is not None:
                return e
            source = list(target.keys()) if isinstance(target, dict) else list(target)
            return t.ListType([v for v, f in zip(source, flags, strict=True) if bool(f)])

        def bools(flags: Any) -> Any:
            """The error of a comprehension's body values (first error, or a non-bool), else None."""
            e = first_error(flags)
            if e is not None:
                return e
            if any(not isinstance(f, t.BoolType | bool) for f in flags):
                return self._err("no such overload: the comprehension's predicate must be a bool")
            return None

        def has(target: Any, name: Any) -> Any:
            if isinstance(target, err_type):
                return target
            if isinstance(target, dict):
                return t.BoolType(name in target)
            return self._err(f"no such overload: has() on {type(target).__name__}")

        def one(flags: Any) -> Any:
            e = bools(flags)
            if e is not None:
                return e
            return t.BoolType(sum(1 for f in flags if bool(f)) == 1)

        def all_(flags: Any) -> Any:
            if any(isinstance(f, t.BoolType | bool) and not bool(f) for f in flags):
                return t.BoolType(False)
            e = bools(flags)
            return e if e is not None else t.BoolType(True)

        def exists(flags: Any) -> Any:
            if any(isinstance(f, t.BoolType | bool) and bool(f) for f in flags):
                return t.BoolType(True)
            e = bools(flags)
            return e if e is not None else t.BoolType(False)

        def adapt_strict(fn: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                for a in args:
                    if isinstance(a, err_type):
                        return a
                    e = first_error(a)
                    if e is not None:
                        return e
                return fn(*args)

            return call

        table = {cel_ext.PREFIX + name: adapt_strict(adapt(name, f.impl)) for name, f in cel_ext.FUNCTIONS.items()}
        from plugins.dra import cel_format

        type_names = {
            t.IntType: "int", t.UintType: "uint", t.DoubleType: "double", t.StringType: "string",
            t.BoolType: "bool", t.BytesType: "bytes", t.ListType: "list", t.MapType: "map",
            type(None): "null_type", t.TimestampType: "google.protobuf.Timestamp",
            t.DurationType: "google.protobuf.Duration",
        }

        def format_arg(v: Any) -> Any:
            if isinstance(v, type):  # a type value (type(x)): %s prints its name
                return cel_format.TypeValue(type_names.get(v, getattr(v, "__name__", "type")))
            if isinstance(v, list):
                return [format_arg(x) for x in v]
            if isinstance(v, dict):
                return {k: format_arg(x) for k, x in v.items()}
            return v

        format_impl = cel_ext.FUNCTIONS["format"].impl
        table[cel_ext.PREFIX + "format"] = adapt_strict(
            lambda fmt, args: t.StringType(format_impl(self._plain(fmt), format_arg(self._plain(args))))
        )
        table.update(
            {
                cel_ext.PREFIX + "strict": strict,
                cel_ext.PREFIX + "pick": pick,
                cel_ext.PREFIX + "one": one,
                cel_ext.PREFIX + "all": all_,
                cel_ext.PREFIX + "exists": exists,
                cel_ext.PREFIX + "has": has,
            }
        )
        return table

    # -- compile / evaluate -------------------------------------------------------------------------
    def compile(self, expression: str) -> Program:
        analysed = _analyse(expression, checked=False, supports_bind=False, rewrite_domains=False)
        try:
            ast = self._env.compile(analysed.text)
            runner = self._env.program(ast, functions=self._functions)
        except Exception as e:  # celpy raises lark/its own parse errors
            raise CELCompileError(f"{type(e).__name__}: {e}") from None
        return _CelPythonProgram(expression, analysed.cost, runner, self, _may_panic(analysed.text))

    def to_cel(self, v: object) -> Any:
        t = self._t
        if isinstance(v, bool):
            return t.BoolType(v)
        if isinstance(v, int):
            return t.IntType(v)
        if isinstance(v, str):
            return t.StringType(v)
        if isinstance(v, Version):
            return _PyVersion(v)
        if isinstance(v, Quantity):
            return _PyQuantity(v)
        if isinstance(v, tuple | list):
            return t.ListType([self.to_cel(e) for e in v])
        raise TypeError(f"unsupported attribute value {v!r}")

    def activation(self, device: DeviceInput) -> Any:
        ctx = device._activations.get(_PY)
        if ctx is None:
            try:
                ctx = self._build_context(device)
            except (TypeError, ValueError) as e:
                raise CELRuntimeError(f"unsupported attribute value: {e}") from None
            device._activations[_PY] = ctx
        return ctx

    def _build_context(self, device: DeviceInput) -> dict[str, Any]:
        t = self._t
        S = t.StringType
        attributes = {
            S(dom): t.MapType({S(k): self.to_cel(v) for k, v in ids.items()}) for dom, ids in device.attributes.items()
        }
        capacity = {
            S(dom): t.MapType({S(k): _PyQuantity(q) for k, q in ids.items()}) for dom, ids in device.capacity.items()
        }
        dev = t.MapType(
            {
                S("driver"): S(device.driver),
                S("attributes"): self._domain_map(attributes),
                S("capacity"): self._domain_map(capacity),
                S("allowMultipleAllocations"): t.BoolType(bool(device.allow_multiple_allocations)),
            }
        )
        return {"device": dev}

    def translate(self, e: BaseException) -> CELRuntimeError:
        args = e.args
        msg = str(args[0]) if args else type(e).__name__
        detail = args[2] if len(args) > 2 else None
        if msg == "no such key" and detail:
            return CELRuntimeError(f"no such key: {detail[0]}")
        m = re.match(r"no such member in mapping: '(.*)'$", msg)
        if m is not None:
            return CELRuntimeError(f"no such key: {m.group(1)}")
        if not isinstance(e, self._eval_error):
            return CELRuntimeError(f"{type(e).__name__}: {e}")
        msg = re.sub(r"Token\('RULE', '(\w+?)_(\w+)'\)", lambda mm: _CELPY_OPS.get(mm.group(2), mm.group(0)), msg)
        msg = msg.replace(f"<class '{__name__}._PyQuantity'>", _Q).replace(f"<class '{__name__}._PyVersion'>", _V)
        if detail and str(detail[0]) not in msg and msg in ("return error for overflow", "no such overload"):
            msg = f"{msg}: {detail[0]}"
        return CELRuntimeError(msg)

    def type_name(self, v: object) -> str:
        for cls, name in self._type_names:
            if isinstance(v, cls):
                return name
        return type(v).__name__


_CELPY_OPS = {
    "lt": "'_<_'",
    "le": "'_<=_'",
    "gt": "'_>_'",
    "ge": "'_>=_'",
    "eq": "'_==_'",
    "ne": "'_!=_'",
    "in": "'@in'",
    "add": "'_+_'",
    "sub": "'_-_'",
    "mul": "'_*_'",
    "div": "'_/_'",
    "mod": "'_%_'",
}


class _CelPythonProgram:
    __slots__ = ("_engine", "_runner", "estimated_cost", "expression", "may_panic")

    def __init__(
        self, expression: str, cost: int, runner: Any, engine: _CelPythonEngine, may_panic: bool = False
    ) -> None:
        self.expression = expression
        self.estimated_cost = cost
        self._runner = runner
        self._engine = engine
        self.may_panic = may_panic

    def matches(self, device: DeviceInput) -> bool:
        if self.estimated_cost > COST_LIMIT:
            raise CELRuntimeError(_COST_EXCEEDED)
        ctx = device._activations.get(_PY)
        if ctx is None:
            ctx = self._engine.activation(device)
        if self.may_panic:
            _PANIC.message = None
        try:
            result = self._runner.evaluate(ctx)
        except CELError:
            raise
        except Exception as e:  # CELEvalError, CELUnsupportedError and celpy internal failures
            if self.may_panic and _PANIC.message is not None:
                raise CELRuntimeError(_PANIC.message) from None
            raise self._engine.translate(e) from None
        if self.may_panic and _PANIC.message is not None:
            raise CELRuntimeError(_PANIC.message)
        if isinstance(result, bool | self._engine._t.BoolType):
            return bool(result)
        name = self._engine.type_name(result)
        raise CELRuntimeError(f"CEL result of type {name} could not be converted to bool")

    def __repr__(self) -> str:
        return f"<{_PY} program {self.expression!r}>"


def _may_panic(text: str) -> bool:
    """Whether a translated program calls a function that can panic upstream (cel_ext.PANIC)."""
    return "__dra_in_constant" in text


# =====================================================================================================
# Engine registry
# =====================================================================================================

_FACTORIES: dict[str, tuple[str, Callable[[], Engine]]] = {
    _XP: ("cel_expr_python.cel", _CelExprPythonEngine),
    _PY: ("celpy", _CelPythonEngine),
}
_ENGINES: dict[str, Engine] = {}


@functools.cache
def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:
        return False
    return True


def available_engines() -> list[str]:
    """Names of the importable engines, fastest first (imports each one)."""
    return [name for name, (module, _) in _FACTORIES.items() if _importable(module)]


def engine_available(name: str) -> bool:
    """``name`` is a known engine and importable (imports that one only)."""
    return name in _FACTORIES and _importable(_FACTORIES[name][0])


def get_engine(name: str | None = None) -> Engine:
    """The engine ``name``; None means ``$DRA_SCHEDULER_CEL_ENGINE`` or else the fastest available one.

    Raises ValueError for an unknown or unavailable engine.
    """
    if name is None:
        name = os.environ.get(ENGINE_ENV_VAR) or None
    if name is None:
        # the first importable engine, without importing the others: cel-python's import (its lark grammar)
        # is ~0.08 s that a start with the fast engine installed does not need
        name = next((n for n, (module, _) in _FACTORIES.items() if _importable(module)), None)
        if name is None:
            raise ValueError("no CEL engine is installed (need cel-expr-python or cel-python)")
    if name not in _FACTORIES:
        raise ValueError(f"unknown CEL engine {name!r}; known engines: {', '.join(_FACTORIES)}")
    engine = _ENGINES.get(name)
    if engine is None:
        module, factory = _FACTORIES[name]
        if not _importable(module):
            raise ValueError(f"CEL engine {name!r} is not installed (cannot import {module})")
        engine = _ENGINES[name] = factory()
    return engine


# =====================================================================================================
# Content keys: what a selector reads of ``device``
# =====================================================================================================


@dataclass(frozen=True, slots=True)
class DeviceReads:
    """Everything a selector can observe of ``device`` (:func:`device_reads`).

    ``attributes`` / ``capacity``: the ``(domain, identifier)`` entries it reads, as written by the user
    (before this module's rewrites). Its result (or error) is a function of these entries (the value, or
    that the entry is absent), of ``device.driver`` (which also decides the domain of a bare attribute
    name, see :func:`device_input`) and, when ``allow_multiple_allocations`` is set, of
    ``device.allowMultipleAllocations``.
    """

    driver: bool
    allow_multiple_allocations: bool
    attributes: tuple[tuple[str, str], ...]
    capacity: tuple[tuple[str, str], ...]


class _NotCacheable(Exception):
    """``device`` is used in a way :func:`device_reads` does not reduce to single entries."""


def _domain_access(node: Node) -> tuple[str, str] | None:
    """``("attributes"|"capacity", domain)`` when node is ``device.attributes["dom"]`` or ``device.attributes.dom``
    (not optional, literal domain)."""
    if isinstance(node, Index):
        if node.optional or not (isinstance(node.index, Lit) and node.index.kind == "string"):
            return None
        base: Node = node.operand
        domain = cast(str, node.index.value)
    elif isinstance(node, Select):
        if node.optional:
            return None
        base, domain = node.operand, node.field
    else:
        return None
    if (
        isinstance(base, Select)
        and not base.optional
        and base.field in ("attributes", "capacity")
        and isinstance(base.operand, Ident)
        and base.operand.name == "device"
    ):
        return base.field, domain
    return None


def _entry_read(node: Node) -> tuple[str, str, str] | None:
    """``(map, domain, id)`` when node reads one entry of a domain: ``D.id``, ``D["id"]``, ``D.?id``, ``D[?"id"]``
    where ``D`` is a :func:`_domain_access`. Its value depends on that entry alone: an unknown domain is an empty
    map (both engines), so "no such domain" and "no such identifier in the domain" behave alike."""
    if isinstance(node, Index):
        if not (isinstance(node.index, Lit) and node.index.kind == "string"):
            return None
        ident = cast(str, node.index.value)
    elif isinstance(node, Select):
        ident = node.field
    else:
        return None
    dom = _domain_access(node.operand)
    return None if dom is None else (dom[0], dom[1], ident)


def _is_device(node: Node) -> bool:
    return isinstance(node, Ident) and node.name == "device"


def _collect_reads(node: Node, acc: dict[str, Any]) -> None:
    if isinstance(node, Ident):
        if node.name == "device":  # bare device, a variable named device (cel.bind, macros), shadowing
            raise _NotCacheable
        return
    read = _entry_read(node)
    if read is not None:
        acc[read[0]].add((read[1], read[2]))
        return  # the rest of the chain is device.<map> and string literals
    if isinstance(node, Select) and _is_device(node.operand):
        if node.optional:
            raise _NotCacheable
        if node.field == "driver":
            acc["driver"] = True
            return
        if node.field == "allowMultipleAllocations":
            acc["allowMultipleAllocations"] = True
            return
        raise _NotCacheable  # device.attributes / device.capacity as a whole value, unknown fields
    if isinstance(node, Call):
        if node.target is None and node.fn == "device":
            raise _NotCacheable
        if _is_has(node):
            sel = cast(Select, node.args[0])
            read = None if sel.optional else _entry_read(sel)
            if read is not None:  # has(D.id): presence of the entry (its value is keyed too)
                acc[read[0]].add((read[1], read[2]))
                return
            operand = sel.operand
            if _is_device(operand) or (isinstance(operand, Select) and _is_device(operand.operand)):
                raise _NotCacheable  # has(device.attributes.dom): presence of a domain; has(device.driver)
    if isinstance(node, StructLit) and node.name.lstrip(".").split(".")[0] == "device":
        raise _NotCacheable
    for child in _children(node):
        _collect_reads(child, acc)


@functools.lru_cache(maxsize=4096)
def device_reads(expression: str) -> DeviceReads | None:
    """What ``expression`` reads of ``device``, or None when its result may depend on more than single entries
    (not cacheable by content): ``device.attributes``/``device.capacity`` or one of their domains used as a
    whole value (passed to a function, iterated, compared, ``in``, ``size()``, ``has()`` of a domain),
    a non-literal domain or identifier, optional access of a domain, bare ``device``, a ``cel.bind`` or
    comprehension variable named ``device``. Analyses the user's text (this module's domain rewrite only
    adds presence tests of the domain, which do not change what an entry read yields). Expressions that
    do not parse are None too (they never evaluate)."""
    try:
        tree = parse_expression(expression)
        acc: dict[str, Any] = {"attributes": set(), "capacity": set(), "driver": False,
                               "allowMultipleAllocations": False}
        _collect_reads(tree, acc)
    except (CELError, _NotCacheable, RecursionError):
        return None
    return DeviceReads(
        driver=bool(acc["driver"]),
        allow_multiple_allocations=bool(acc["allowMultipleAllocations"]),
        attributes=tuple(sorted(acc["attributes"])),
        capacity=tuple(sorted(acc["capacity"])),
    )


class DeviceContent(Protocol):
    """A device's raw data as a ResourceSlice gives it (``scheduler.api.model.Device`` is one): qualified or bare
    attribute names, capacity values as :class:`Quantity` or objects whose ``value`` is one."""

    @property
    def attributes(self) -> Mapping[str, AttributeValue]: ...

    @property
    def capacity(self) -> Mapping[str, Any]: ...

    @property
    def allow_multiple_allocations(self) -> bool: ...


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _representable(values: Iterable[Any]) -> bool:
    """Whether both engines can build an activation holding these attribute values (cel-expr-python and celpy
    refuse ints outside int64: "unsupported attribute value", an error of every selector on the device)."""
    for v in values:
        t = type(v)
        if t is str or t is bool or t is Version:
            continue
        if t is int:
            if not _INT64_MIN <= v <= _INT64_MAX:
                return False
            continue
        if t is tuple:
            for e in v:
                te = type(e)
                if te is int:
                    if not _INT64_MIN <= e <= _INT64_MAX:
                        return False
                elif te is not str and te is not bool and te is not Version:
                    return False
            continue
        return False
    return True


def _raw_entry(m: Mapping[str, Any], driver: str, domain: str, ident: str) -> Any:
    """The value :func:`device_input` puts at ``(domain, ident)``, or None. A raw name splits at its first ``/``;
    a name without ``/`` belongs to the driver's domain; when two raw names give the same entry the later one
    wins (dict order), as in :func:`device_input`."""
    qualified = m.get(f"{domain}/{ident}") if "/" not in domain else None
    bare = m.get(ident) if domain == driver and "/" not in ident else None
    if qualified is None or bare is None:
        return bare if qualified is None else qualified
    qname = f"{domain}/{ident}"
    last = None
    for k in m:
        if k == qname:
            last = qualified
        elif k == ident:
            last = bare
    return last


def _tag(v: object) -> Hashable:
    """A hashable image of an attribute value that only equal values share (bool is not int, a version is kept
    with its exact text and build metadata, lists element by element)."""
    t = type(v)
    if t is bool:
        return ("b", v)
    if t is int:
        return ("i", v)
    if t is str:
        return ("s", v)
    if t is Version:
        ver = cast(Version, v)
        return ("v", ver.major, ver.minor, ver.patch, ver.prerelease, ver.build, ver.text)
    if t is tuple:
        return ("l", tuple(_tag(e) for e in cast(tuple[object, ...], v)))
    raise TypeError(f"unsupported attribute value {v!r}")


def _tag_quantity(v: object) -> Hashable:
    q = v if type(v) is Quantity else getattr(v, "value", None)
    if not isinstance(q, Quantity) or type(q) is not Quantity:
        raise TypeError(f"unsupported capacity value {v!r}")
    return ("q", q.value, q.fmt, q.text)  # exact: the text is what celpy may print


def content_key(reads: DeviceReads, driver: str, content: DeviceContent) -> Hashable | None:
    """The device data ``reads`` covers, as a hashable (absent entries are None); None when the device holds an
    attribute value an engine cannot take (every selector then fails on it: evaluate per device)."""
    attrs = content.attributes
    if not _representable(attrs.values()):
        return None
    caps = content.capacity
    for q in caps.values():
        if type(q) is not Quantity and type(getattr(q, "value", None)) is not Quantity:
            return None
    try:
        a = tuple(
            None if (v := _raw_entry(attrs, driver, dom, ident)) is None else _tag(v) for dom, ident in reads.attributes
        )
        c = tuple(
            None if (q := _raw_entry(caps, driver, dom, ident)) is None else _tag_quantity(q)
            for dom, ident in reads.capacity
        )
    except TypeError:
        return None
    multi = bool(content.allow_multiple_allocations) if reads.allow_multiple_allocations else None
    return (driver, multi, a, c)


# =====================================================================================================
# Selector cache
# =====================================================================================================


@dataclass(slots=True)
class CacheStats:
    hits: int = 0  # answered by the (expression, device_key) table
    misses: int = 0  # not in that table: answered by content (content_hits) or evaluated (evaluations)
    evaluations: int = 0
    compiles: int = 0
    clears: int = 0
    content_hits: int = 0  # answered by the (expression, content key) table


class SelectorCache:
    """Compiled selectors per expression; results per (expression, device_key) and per (expression, content).

    ``device_key`` must change whenever the device's data changes (e.g. include the ResourceSlice's
    name, generation/resourceVersion and the device name), so a selector is evaluated at most once per
    device generation. When the caller also gives the device's raw data (``driver`` and ``content``) and
    the selector reads nothing of ``device`` but single entries (:func:`device_reads`), results are also
    kept per (expression, :func:`content_key`): devices that agree on what the selector reads share one
    evaluation, whatever their other attributes (the DeviceInput and the engine's activation are then
    not built at all). Results and :class:`CELError` instances are both cached; the result tables are
    cleared when they hold ``max_results`` entries together.
    """

    def __init__(self, engine: Engine | None = None, max_results: int = 2_000_000) -> None:
        self.engine: Engine = engine if engine is not None else get_engine()
        self.max_results = max_results
        self.max_programs = 10_000
        self._programs: dict[str, Program | CELCompileError] = {}
        self._results: dict[tuple[str, Hashable], bool | CELError] = {}
        self._by_content: dict[tuple[str, Hashable], bool | CELError] = {}
        self.stats = CacheStats()

    def compile(self, expression: str) -> Program:
        cached = self._programs.get(expression)
        if cached is None:
            if len(self._programs) >= self.max_programs:
                self._programs.clear()
            self.stats.compiles += 1
            try:
                cached = self.engine.compile(expression)
            except CELCompileError as e:
                cached = e
            self._programs[expression] = cached
        if isinstance(cached, CELCompileError):
            raise cached.with_traceback(None)
        return cached

    def _room(self) -> None:
        if len(self._results) + len(self._by_content) >= self.max_results:
            self._results.clear()
            self._by_content.clear()
            self.stats.clears += 1

    def matches(
        self,
        expression: str,
        device_key: Hashable,
        device: DeviceInput | Callable[[], DeviceInput],
        *,
        driver: str | None = None,
        content: DeviceContent | None = None,
    ) -> bool:
        """Whether the device matches; raises the selector's :class:`CELError` (compile or runtime).

        ``device`` (or the function building it) is only used when the selector has to be evaluated.
        ``driver`` and ``content``: the same device's raw data (what ``device`` is built from), to share
        results between devices by content; both or neither."""
        key = (expression, device_key)
        cached = self._results.get(key)
        if cached is not None:
            self.stats.hits += 1
            if isinstance(cached, CELError):
                raise cached.with_traceback(None)
            return cached
        self.stats.misses += 1
        program = self.compile(expression)
        ckey: tuple[str, Hashable] | None = None
        if content is not None and driver is not None:
            reads = device_reads(expression)
            if reads is not None:
                found = content_key(reads, driver, content)
                if found is not None:
                    ckey = (expression, found)
                    cached = self._by_content.get(ckey)
                    if cached is not None:
                        self.stats.content_hits += 1
                        self._room()
                        self._results[key] = cached
                        if isinstance(cached, CELError):
                            raise cached.with_traceback(None)
                        return cached
        dev = device if isinstance(device, DeviceInput) else device()
        self._room()
        self.stats.evaluations += 1
        try:
            result = program.matches(dev)
        except CELError as e:
            self._results[key] = e
            if ckey is not None:
                self._by_content[ckey] = e
            raise
        self._results[key] = result
        if ckey is not None:
            self._by_content[ckey] = result
        return result

    def clear(self) -> None:
        self._programs.clear()
        self._results.clear()
        self._by_content.clear()

    def __len__(self) -> int:
        return len(self._results) + len(self._by_content)
