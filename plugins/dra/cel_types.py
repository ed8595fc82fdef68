"""A coarse static typing of CEL syntax trees, for the engine without a checker (cel-python).

cel-expr-python type-checks selectors itself; on cel-python :func:`_infer` does what Kubernetes' checker would
refuse at compile time: results that are statically not bool, relational and arithmetic operators on
``Quantity``/``Semver``, ``==`` between different concrete types, non-bool operands of logical operators. It also
answers the static type questions of :mod:`plugins.dra.cel_format` (the ``format`` validator) and
:mod:`plugins.dra.cel_ext` (homogeneous literals). ``"dyn"`` is the unknown type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from plugins.dra.cel_syntax import (
    Binary,
    CELCompileError,
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
    _domain_map_kind,
    _is_bind,
    _is_has,
    _macro_vars,
)

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
