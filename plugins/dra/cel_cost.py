"""A sound static upper bound of the runtime cost of a DRA selector (cel-go's cost units).

Kubernetes runs selectors with ``cel.CostLimit(1_000_000)`` (``resourceapi.CELSelectorExpressionMaxCost``)
and stops an evaluation with ``operation cancelled: actual cost limit exceeded``; cel-go charges one unit
per node evaluated and, for strings and lists, 0.1 per element or character that a concatenation, a
comparison or a string function touches (``interpreter/runtimecost.go``, ``checker/cost.go``). Neither
Python engine can count or interrupt an evaluation (cel-expr-python 0.1.3 has no runtime options, celpy no
hooks), so the limit is enforced *before* evaluating: this module computes, from the syntax tree, an upper
bound of both the cost and the size of every value, and a program whose bound exceeds the limit fails every
evaluation with the cost error without running.

Sizes are exact for literals and bounded for device data by the API's limits: 63-character driver names, at
most 32 attribute/capacity domains and identifiers per device, attribute strings and lists of at most 64
characters/elements (``resourceapi.DeviceAttributeMaxValueLength``). A ``cel.bind`` variable has the size of
its initialiser, a comprehension variable the element size of its range. Sizes multiply where values do:
``a + a`` doubles, ``join``/``replace``/``flatten`` multiply, ``lists.range(n)`` of a non-constant ``n`` is
unbounded. So nested string doubling (``cel.bind(a, s + s, cel.bind(b, a + a, ...))``) reaches the limit
after the same ~10 million concatenated characters as Kubernetes, before any memory is used. The bound is
at least cel-go's *runtime* cost (it charges every branch of ``?:``/``&&``/``||`` and every iteration), so
no expression that Kubernetes stops can run here; an expression close to the limit whose worst case is not
reached may be refused where Kubernetes would finish (the apiserver refuses to store selectors whose
estimated cost exceeds the same limit, so such selectors do not reach a scheduler in practice).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plugins.dra.cel_ext import translate
from plugins.dra.cel_format import format_size_bound
from plugins.dra.cel_lib import PREFIX
from plugins.dra.cel_syntax import (
    Binary,
    Cond,
    Ident,
    Index,
    ListLit,
    Lit,
    MapLit,
    Node,
    Select,
    StructLit,
    Unary,
    _device_field,
    _is_bind,
    _is_has,
    _macro_vars,
    parse_expression,
)

__all__ = ["INF", "Size", "estimate", "estimate_cost"]

INF = math.inf
_DRIVER = 63.0
_DOMAINS = 32.0
_VALUE = 64.0


@dataclass(frozen=True, slots=True)
class Size:
    """Upper bound of a value's length (characters, elements or entries) and of its elements' sizes."""

    n: float
    elem: Size | None = None

    def element(self) -> Size:
        return self.elem if self.elem is not None else _ATTR


_ONE = Size(1.0)
_ATTR = Size(_VALUE, Size(_VALUE))  # an attribute value: a string or a list of strings/ints/...
_INNER = Size(_DOMAINS, _ATTR)  # device.attributes[domain]
_OUTER = Size(_DOMAINS, _INNER)
_UNKNOWN = Size(INF, None)


def _add(a: Size, b: Size) -> Size:
    elem = a.elem if b.elem is None else b.elem if a.elem is None else Size(max(a.elem.n, b.elem.n), a.elem.elem)
    return Size(a.n + b.n, elem)


def _touch(*sizes: Size) -> float:
    """0.1 per character/element touched (cel-go's string/list traversal factor), at least 1."""
    return 1.0 + math.ceil(0.1 * sum(s.n for s in sizes)) if all(s.n < INF for s in sizes) else INF


def _mul(a: float, b: float) -> float:
    if a == 0 or b == 0:
        return 0.0
    return a * b


def estimate(node: Any) -> float:
    """The cost bound of a syntax tree of :mod:`plugins.dra.cel_syntax` (``inf`` if unbounded)."""
    return _est(node, {})[0]


def _est(node: Any, scope: Mapping[str, Size]) -> tuple[float, Size]:

    if isinstance(node, Lit):
        if isinstance(node.value, str | bytes):
            return 0.0, Size(float(len(node.value)))
        return 0.0, _ONE
    if isinstance(node, Ident):
        if not node.leading_dot and node.name in scope:
            return 1.0, scope[node.name]
        return 1.0, _UNKNOWN if node.name != "device" else _ONE
    if isinstance(node, Select):
        vars_ = {k: "var" for k in scope}
        f = _device_field(node, vars_)
        if f is not None:
            size = {"driver": Size(_DRIVER), "attributes": _OUTER, "capacity": _OUTER}.get(f, _ONE)
            return 2.0, size
        cost, size = _est(node.operand, scope)
        return cost + 1.0, size.element()
    if isinstance(node, Index):
        c1, s1 = _est(node.operand, scope)
        c2, _ = _est(node.index, scope)
        return c1 + c2 + 1.0, s1.element()
    if isinstance(node, Unary):
        cost, size = _est(node.operand, scope)
        return cost + 1.0, size
    if isinstance(node, Binary):
        lc, ls = _est(node.left, scope)
        rc, rs = _est(node.right, scope)
        if node.op in ("&&", "||"):
            return lc + rc, _ONE
        if node.op == "+":
            return lc + rc + _touch(ls, rs), _add(ls, rs)
        if node.op == "in":
            return lc + rc + _touch(rs), _ONE
        if node.op in ("==", "!=", "<", "<=", ">", ">="):
            return lc + rc + _touch(Size(min(ls.n, rs.n))), _ONE
        return lc + rc + 1.0, _ONE
    if isinstance(node, Cond):
        cc, _ = _est(node.cond, scope)
        tc, ts = _est(node.then, scope)
        fc, fs = _est(node.other, scope)
        big = ts if ts.n >= fs.n else fs
        return cc + tc + fc, big
    if isinstance(node, ListLit):
        costs = [_est(e, scope) for e in node.elems]
        largest = max((s for _, s in costs), key=lambda s: s.n, default=None)
        return 10.0 + sum(x for x, _ in costs), Size(float(len(node.elems)), largest)
    if isinstance(node, MapLit):
        cost = 30.0
        elem: Size | None = None
        for k, v, _ in node.entries:
            kc, _ = _est(k, scope)
            vc, vs = _est(v, scope)
            cost += kc + vc
            elem = vs if elem is None or vs.n > elem.n else elem
        return cost, Size(float(len(node.entries)), elem)
    if isinstance(node, StructLit):
        return 40.0 + sum(_est(v, scope)[0] for _, v, _ in node.fields), Size(float(len(node.fields)))
    # Call
    if _is_has(node):
        sel = node.args[0]
        return _est(sel.operand, scope)[0] + 1.0, _ONE
    if _is_bind(node):
        var = node.args[0].name
        ic, isize = _est(node.args[1], scope)
        bc, bsize = _est(node.args[2], {**scope, var: isize})
        return ic + bc, bsize
    names = _macro_vars(node)
    if names is not None and node.target is not None:
        rc, rsize = _est(node.target, scope)
        loop = {**scope, **dict.fromkeys(names, rsize.element())}
        bodies = [_est(a, loop) for a in node.args[len(names) :]]
        body = sum(b for b, _ in bodies)
        cost = rc + 1.0 + _mul(rsize.n, body + 2.0)
        if node.fn in ("map", "transformList", "optMap", "transformMap", "transformMapEntry"):
            return cost, Size(rsize.n, bodies[-1][1])
        if node.fn in ("filter", "sortBy"):
            return cost, rsize
        return cost, _ONE
    args = [_est(a, scope) for a in node.args]
    tc, ts = _est(node.target, scope) if node.target is not None else (0.0, _ONE)
    cost = 1.0 + tc + sum(x for x, _ in args)
    sizes = [s for _, s in args]
    return _call(node, cost, ts, sizes)


def _call(node: Any, cost: float, ts: Size, sizes: list[Size]) -> tuple[float, Size]:

    fn = node.fn
    if fn.startswith(PREFIX):
        fn = fn[len(PREFIX) :]
        ts, sizes = (sizes[0], sizes[1:]) if sizes else (_ONE, [])
    first = sizes[0] if sizes else _ONE
    if fn in ("lowerAscii", "upperAscii", "trim", "reverse", "substring", "charAt", "distinct", "sort", "slice"):
        return cost + _touch(ts), Size(ts.n, ts.elem)
    if fn == "size":
        return cost, _ONE
    if fn in ("contains", "startsWith", "endsWith", "indexOf", "lastIndexOf", "matches", "find", "isSorted",
              "sum", "min", "max"):
        return cost + _touch(ts, *sizes) + _mul(0.1 * ts.n, 0.1 * first.n), _ATTR if fn in ("min", "max") else _ONE
    if fn == "findAll":
        return cost + _touch(ts, *sizes), Size(ts.n, ts)
    if fn == "split":
        return cost + _touch(ts, *sizes), Size(ts.n + 1.0, ts)
    if fn == "join":
        sep = first.n if sizes else 0.0
        total = _mul(ts.n, ts.element().n) + _mul(ts.n, sep)
        return cost + _touch(Size(total)), Size(total)
    if fn == "replace":
        new = sizes[1].n if len(sizes) > 1 else 0.0
        total = ts.n + _mul(ts.n + 1.0, new)
        return cost + _touch(Size(total)), Size(total)
    if fn == "format":

        # the text, plus per argument its formatted form (a double's %.6f has up to 316 characters, a quoted
        # string up to 10 per character), plus what precisions and widths add (x/text keeps at most 32767
        # fraction digits and a 16-bit width: 66,000 per clause of a format string that is not a literal)
        fmt_node = node.args[0] if node.fn.startswith(PREFIX) else node.target
        if isinstance(fmt_node, Lit) and isinstance(fmt_node.value, str):
            extra = format_size_bound(fmt_node.value)
        else:
            extra = _mul(ts.n, 33_000.0)
        total = ts.n + extra + _mul(first.n, max(_mul(first.element().n, 10.0), 330.0))
        return cost + _touch(Size(total)), Size(total)
    if fn in ("quote",):
        return cost + _touch(first), Size(_mul(first.n, 12.0) + 2.0)
    if fn == "string":
        return cost + _touch(first), Size(max(first.n, 64.0))
    if fn == "lists_range":
        arg = node.args[0] if node.args else None
        n = float(arg.value) if isinstance(arg, Lit) and isinstance(arg.value, int) else INF
        n = max(n, 0.0)
        return cost + _touch(Size(n)), Size(n, _ONE)
    if fn == "flatten":
        depth_arg = node.args[2] if len(node.args) > 2 else None
        depth = int(depth_arg.value) if isinstance(depth_arg, Lit) and isinstance(depth_arg.value, int) else 1
        if len(node.args) > 2 and not isinstance(depth_arg, Lit):
            depth = 64
        size = ts
        for _ in range(max(depth, 0)):
            size = Size(_mul(size.n, size.element().n), size.element().elem)
        return cost + _touch(size), size
    if fn in ("keys", "sortByKeys", "zip"):
        return cost + _touch(ts), Size(ts.n, sizes[0].element() if fn == "zip" and sizes else ts.elem)
    if fn in ("sets_contains", "sets_equivalent", "sets_intersects"):
        return cost + _mul(ts.n, first.n) + 1.0, _ONE
    if fn == "getQuery":
        return cost + _touch(ts), Size(ts.n, Size(ts.n, ts))
    if fn in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"):
        return cost + _touch(ts), ts
    return cost, _ATTR if fn not in ("quantity", "semver", "ip", "cidr", "url") else _ONE


def estimate_cost(expression: str | Node) -> float:
    """Static upper bound of the runtime cost of a selector; ``inf`` if unbounded."""

    node = parse_expression(expression) if isinstance(expression, str) else expression
    return estimate(translate(node, checked=True))
