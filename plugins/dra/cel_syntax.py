"""CEL's syntax for the DRA environment: the errors, the syntax tree, the lexer and parser, the printer.

Every selector is parsed here first (:func:`parse_expression`, cached), whichever engine evaluates it: the tree is
what :mod:`plugins.dra.cel_ext` translates, :mod:`plugins.dra.cel_types` and :mod:`plugins.dra.cel_format` check,
:mod:`plugins.dra.cel_cost` bounds and :mod:`plugins.dra.cel_engine` rewrites before :func:`unparse` prints it
back for an engine. The scope helpers at the end (comprehension macros, ``cel.bind``, ``has()``, the ``device``
fields) are the small vocabulary all of them share. Nothing here imports another module of the CEL environment.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeAlias, cast

_NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)


# =====================================================================================================
# Errors
# =====================================================================================================


class CELError(Exception):
    """Base class of the errors the CEL environment raises (compile and runtime)."""


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
# Scopes: comprehension macros, cel.bind, has(), the device fields
# =====================================================================================================

_ONE_VAR_MACROS = frozenset(("all", "exists", "exists_one", "existsOne", "filter", "map", "sortBy", "optMap"))
_ONE_VAR_MACROS_EXTRA = frozenset(("optFlatMap",))
_TWO_VAR_MACROS = frozenset(("transformList", "transformMap", "transformMapEntry"))


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


def _string_lit(s: str) -> Lit:
    return Lit("string", _quote(s), s)


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
