"""The parts of the Kubernetes 1.37 DRA CEL environment that neither Python CEL engine provides natively: the
syntax tree translation that reaches them, and the compile-time checks that go with it.

Kubernetes compiles DRA selectors in the apiserver's base environment (``k8s.io/apiserver/pkg/cel/environment``
``base.go`` at v0.37.2, all libraries of stored expressions) plus ``cel.bind`` and the DRA ``device``
variable (``k8s.io/dynamic-resource-allocation/cel/compile.go``). Besides what the engines
(:mod:`plugins.dra.cel_cpp`, :mod:`plugins.dra.cel_celpy`) already map (quantity, semver, regex ``find``/``findAll``,
strings, optional types), that environment has:

* ``ext.TwoVarComprehensions`` (1.32): ``all(i, v, p)``, ``exists(i, v, p)``, ``existsOne(i, v, p)``,
  ``transformList(i, v, [filter,] e)``, ``transformMap(k, v, [filter,] e)`` — on lists ``i`` is the index,
  on maps the key;
* ``ext.Lists`` v3 (1.34): ``lists.range(n)``, ``l.slice(a, b)``, ``l.flatten([depth])``, ``l.sort()``,
  ``l.sortBy(e, key)``, ``l.distinct()``, ``l.reverse()``;
* Kubernetes' lists library v1 (1.37): ``isSorted()``, ``sum()``, ``min()``, ``max()``, ``indexOf(x)``,
  ``lastIndexOf(x)`` on lists;
* ``ext.Sets`` (1.29): ``sets.contains``, ``sets.equivalent``, ``sets.intersects``;
* Kubernetes' URL, IP and CIDR libraries (``library/urls.go``, ``ip.go``, ``cidr.go``);
* cel-go's constant-list membership optimisation: ``x in []`` is ``false`` even when ``x`` is an error
  (``interpreter/decorators.go`` ``maybeOptimizeSetMembership``), and ``semver in ["1.2.3"]`` (a Go map
  lookup of an unhashable value) panics: :func:`plugins.dra.cel_lib.in_constant`, :data:`plugins.dra.cel_lib.PANIC`;
* ``string.format`` of the strings extension at version 2 (:mod:`plugins.dra.cel_format`);
* the ``Equal`` of Kubernetes' library types, which refuses other types (:func:`plugins.dra.cel_lib.equal3`, and
  for cel-expr-python the rewrite :func:`opaque_equality`).

How: :func:`translate` rewrites the syntax tree (from :func:`plugins.dra.cel_syntax.parse_expression`) before it
is handed to an engine. Two-variable comprehensions become one-variable macros over ``__dra_keys(t)`` (list
indices or map keys) with ``cel.bind(v, t[i], ...)``; ``sortBy`` becomes ``__dra_sortByKeys(l, l.map(e,
key))`` (as cel-go's macro expands it); the library functions become calls of ``__dra_<name>`` functions
implemented in plain Python in :mod:`plugins.dra.cel_lib` (``FUNCTIONS``) and registered by each engine;
``x in []`` becomes ``false``. Both engines therefore run the same translated program, and the differential test
(``tests/test_differential.py``) compares them with cel-go.

Not provided: ``transformMapEntry``, ``lists.first``/``last`` (optional results), Kubernetes' ``format``
library and authorizer functions (no authorizer variable in DRA), ``string(ip)``/``string(cidr)`` on
anything but a direct ``ip(...)``/``cidr(...)`` expression.
"""


from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, cast

from plugins.dra.cel_lib import PREFIX
from plugins.dra.cel_syntax import (
    Binary,
    Call,
    CELCompileError,
    Cond,
    Ident,
    Index,
    ListLit,
    Lit,
    MapLit,
    Select,
    Unary,
    _children,
    _device_field,
    _domain_map_kind,
    _is_bind,
    _is_has,
    _macro_vars,
    _map_children,
    _quote,
)
from plugins.dra.cel_types import _infer

__all__ = [
    "binds_to_comprehensions",
    "check_functions",
    "check_homogeneous",
    "check_reserved",
    "constant_membership",
    "escaping_optional",
    "opaque_equality",
    "strict_macros",
    "translate",
    "uses_library_calls",
]


# member function -> table name (the receiver becomes the first argument)
_MEMBER = {
    "slice": "slice",
    "flatten": "flatten",
    "sort": "sort",
    "distinct": "distinct",
    "reverse": "reverse",
    "isSorted": "isSorted",
    "sum": "sum",
    "min": "min",
    "max": "max",
    "indexOf": "indexOf",
    "lastIndexOf": "lastIndexOf",
    "family": "family",
    "isUnspecified": "isUnspecified",
    "isLoopback": "isLoopback",
    "isLinkLocalMulticast": "isLinkLocalMulticast",
    "isLinkLocalUnicast": "isLinkLocalUnicast",
    "isGlobalUnicast": "isGlobalUnicast",
    "containsIP": "containsIP",
    "containsCIDR": "containsCIDR",
    "masked": "masked",
    "prefixLength": "prefixLength",
    "getScheme": "getScheme",
    "getHost": "getHost",
    "getHostname": "getHostname",
    "getPort": "getPort",
    "getEscapedPath": "getEscapedPath",
    "getQuery": "getQuery",
}
_GLOBAL = {"ip": "ip", "isIP": "isIP", "cidr": "cidr", "isCIDR": "isCIDR", "url": "url", "isURL": "isURL"}
_NAMESPACED = {
    ("lists", "range"): "lists_range",
    ("sets", "contains"): "sets_contains",
    ("sets", "equivalent"): "sets_equivalent",
    ("sets", "intersects"): "sets_intersects",
    ("ip", "isCanonical"): "ip_isCanonical",
}


# =====================================================================================================
# Syntax tree translation
# =====================================================================================================


def translate(tree: Any, checked: bool, bind_native: bool = True) -> Any:
    """Rewrite a :mod:`plugins.dra.cel_syntax` syntax tree as the module docstring says.

    ``checked``: wrap indexing of the comprehension range in ``dyn()`` (type-checked engines).
    ``bind_native``: whether ``cel.bind`` may be emitted; if not, a binding is written as the one-element
    comprehension ``[init].map(v, body)[0]`` (evaluates ``init`` once, linear size).
    """

    counter = itertools.count()

    def fresh() -> Any:
        return Ident(f"{PREFIX}t{next(counter)}")

    def bind(var: Any, init: Any, body: Any) -> Any:
        if bind_native:
            return Call("bind", (var, init, body), Ident("cel"))
        return Index(Call("map", (var, body), ListLit((init,), (False,))), Lit("int", "0", 0))

    def fn(name: str, *args: Any) -> Any:
        return Call(PREFIX + name, tuple(args))

    def at(t: Any, i: Any) -> Any:
        base = Call("dyn", (t,)) if checked else t
        return Index(base, i)

    def go(node: Any, scope: frozenset[str]) -> Any:
        if isinstance(node, Binary) and node.op == "in" and node.right == ListLit((), ()):
            # false whatever x is (even an error), but x is still type-checked: size([x]) == 0 && false
            probed = Call("size", (ListLit((go(node.left, scope),), (False,)),))
            return Binary("&&", Binary("==", probed, Lit("int", "0", 0)), Lit("bool", "false", False))
        if (
            isinstance(node, Binary)
            and node.op in ("==", "!=")
            and _is_quantity_arith(node.right)
            and (_is_quantity_value(node.left) or _is_quantity_arith(node.left))
        ):
            # Kubernetes' quantity add()/sub() return a *Quantity whose Equal the value type does not accept:
            # q == q.add(x) fails with "no such overload" upstream (apiserver pkg/cel/quantity.go).
            return fn("quantity_eq_ptr", go(node.left, scope), go(node.right, scope))
        if isinstance(node, Call):
            # cel.bind is handled natively or rewritten (scope of its variable)
            if _is_bind(node):
                var = cast(Any, node.args[0])
                inner = scope | {var.name}
                init, body = go(node.args[1], scope), go(node.args[2], inner)
                return bind(var, init, body) if not bind_native else Call(node.fn, (var, init, body), node.target)
            target = node.target
            n = len(node.args)
            # two-variable comprehensions
            if (
                target is not None
                and n >= 3
                and isinstance(node.args[0], Ident)
                and isinstance(node.args[1], Ident)
                and not node.args[0].leading_dot
                and not node.args[1].leading_dot
                and node.fn in ("all", "exists", "exists_one", "existsOne", "transformList", "transformMap")
                and (n == 3 or (n == 4 and node.fn in ("transformList", "transformMap")))
            ):
                i, v = cast(Any, node.args[0]), cast(Any, node.args[1])
                inner = scope | {i.name, v.name}
                t = fresh()
                tgt = go(target, scope)
                rest = [go(a, inner) for a in node.args[2:]]

                def with_v(expr: Any) -> Any:
                    return bind(v, at(t, i), expr)

                ks = fn("keys", t)
                macro = {"existsOne": "exists_one"}.get(node.fn, node.fn)
                if macro in ("all", "exists", "exists_one"):
                    body = Call(macro, (i, with_v(rest[0])), ks)
                else:
                    chosen = ks
                    if n == 4:
                        chosen = Call("filter", (i, with_v(rest[0])), ks)
                    values = Call("map", (i, with_v(rest[-1])), chosen)
                    if macro == "transformList":
                        body = values
                    else:
                        k2 = fresh()
                        body = bind(k2, chosen, fn("zip", k2, Call("map", (i, with_v(rest[-1])), k2)))
                return bind(t, tgt, body)
            if target is not None and node.fn == "sortBy" and n == 2 and isinstance(node.args[0], Ident):
                t = fresh()
                e = cast(Any, node.args[0])
                key = go(node.args[1], scope | {e.name})
                return bind(t, go(target, scope), fn("sortByKeys", t, Call("map", (e, key), t)))
            if target is not None and node.fn == "map" and n == 3 and isinstance(node.args[0], Ident) and not checked:
                x = cast(Any, node.args[0])
                inner = scope | {x.name}
                filtered = Call("filter", (x, go(node.args[1], inner)), go(target, scope))
                return Call("map", (x, go(node.args[2], inner)), filtered)
            names = _macro_vars(node)
            if names is not None and target is not None:
                inner = scope | set(names)
                args = node.args[: len(names)] + tuple(go(a, inner) for a in node.args[len(names) :])
                return Call(node.fn, args, go(target, scope), node.leading_dot)
            # namespaced functions: lists.range, sets.*, ip.isCanonical
            if isinstance(target, Ident) and not target.leading_dot and target.name not in scope:
                key = (target.name, node.fn)
                if key in _NAMESPACED:
                    return fn(_NAMESPACED[key], *(go(a, scope) for a in node.args))
            if target is not None and node.fn in _MEMBER:
                return fn(_MEMBER[node.fn], go(target, scope), *(go(a, scope) for a in node.args))
            if target is not None and node.fn == "format" and n == 1:
                # cel-go's v1 formatter (strings extension version 2), not the engines' own: plugins.dra.cel_format
                return fn("format", go(target, scope), go(node.args[0], scope))
            if target is not None and node.fn == "ip" and n == 0:
                return fn("cidr_ip", go(target, scope))
            if target is None and node.leading_dot:  # .f(x): the root container is the only one here
                return go(Call(node.fn, node.args), scope)
            if target is None and not node.leading_dot and node.fn in _GLOBAL and n == 1:
                return fn(_GLOBAL[node.fn], go(node.args[0], scope))
            if target is None and node.fn == "string" and n == 1 and _is_net(node.args[0]):
                return fn("string", go(node.args[0], scope))
        return _map_children(node, lambda ch: go(ch, scope))

    return go(tree, frozenset())


_QUANTITY_T = "kubernetes.Quantity"


def _static_type(node: Any) -> str | None:
    """cel-go's static type of a literal element where it is certain (None: unknown, not compared)."""

    if isinstance(node, Lit):
        return {"null": "null_type"}.get(node.kind, node.kind)
    f = _device_field(node, {}) if isinstance(node, Select) else None
    if f is not None:
        return {"driver": "string", "allowMultipleAllocations": "bool"}.get(f)
    if isinstance(node, Select | Index) and not getattr(node, "optional", False):
        inner = node.operand
        if isinstance(inner, Select | Index) and _domain_map_kind(inner.operand, {}) == "attrs":
            return "dyn"
        if isinstance(inner, Select | Index) and _domain_map_kind(inner.operand, {}) == "caps":
            return _QUANTITY_T
        return None
    if isinstance(node, ListLit):
        types = [_static_type(e) for e in node.elems]
        if not types or None in types or len(set(types)) != 1:
            return None
        return f"list({types[0]})"
    if isinstance(node, Unary):
        t = _static_type(node.operand)
        return "bool" if node.op == "!" else t if t in ("int", "double") else None
    if isinstance(node, Binary):
        if node.op in ("&&", "||", "==", "!=", "<", "<=", ">", ">=", "in"):
            return "bool"
        lt, rt = _static_type(node.left), _static_type(node.right)
        return lt if lt == rt and lt in ("int", "uint", "double", "string") else None
    if isinstance(node, Call) and node.target is None:
        return {"quantity": _QUANTITY_T, "semver": "kubernetes.Semver", "size": "int", "string": "string",
                "int": "int", "double": "double", "isQuantity": "bool", "isSemver": "bool"}.get(node.fn)
    return None


def check_homogeneous(tree: Any) -> None:
    """cel.HomogeneousAggregateLiterals (Kubernetes' base environment): the elements of a list literal, and
    the keys and the values of a map literal, must have one type (``[1, 2.0]``, ``[1,
    device.attributes["d"].i]`` do not compile: "expected type 'int' but found 'dyn'").

    Literals anywhere inside a call of a function named ``format`` are exempt: the strings extension adds
    ``format`` to the validator's exempt functions (cel-go v0.29.2 ``ext/formatting.go``
    ``stringFormatValidator.Configure``, ``cel/validator.go`` ``inExemptFunction``), so
    ``"%s-%d".format(["a", 1])`` compiles."""

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Call) and node.fn == "format":
            continue
        groups: list[list[Any]] = []
        if isinstance(node, ListLit):
            groups = [list(node.elems)]
        elif isinstance(node, MapLit):
            groups = [[k for k, _, _ in node.entries], [v for _, v, _ in node.entries]]
        for group in groups:
            first = None
            for e in group:
                t = _static_type(e)
                if t is None:
                    continue
                if first is None:
                    first = t
                elif t != first:
                    raise CELCompileError(f"expected type '{first}' but found '{t}'")
        stack.extend(_children(node))


def _is_quantity_value(node: Any) -> bool:
    """An expression whose value is a Kubernetes Quantity *value* (not the pointer add/sub return)."""

    if isinstance(node, Call):
        return node.target is None and node.fn == "quantity"
    return _static_type(node) == _QUANTITY_T


def _is_quantity_arith(node: Any) -> bool:

    return isinstance(node, Call) and node.target is not None and node.fn in ("add", "sub") and len(node.args) == 1


_KNOWN_GLOBAL = frozenset(
    (
        *("size", "int", "uint", "double", "string", "bytes", "bool", "type", "dyn", "duration", "timestamp"),
        *("matches", "quantity", "isQuantity", "semver", "isSemver", "sign"),  # has(): only has(e.f), translated
    )
)
_KNOWN_NAMESPACED = frozenset(
    (("cel", "bind"), ("optional", "of"), ("optional", "none"), ("optional", "ofNonZeroValue"), ("strings", "quote"))
)
_KNOWN_MEMBER = frozenset(
    (
        *("contains", "startsWith", "endsWith", "matches", "size", "charAt", "indexOf", "lastIndexOf"),
        *("lowerAscii", "upperAscii", "replace", "split", "substring", "trim", "join", "format"),
        *("compareTo", "isGreaterThan", "isLessThan", "add", "sub", "isInteger", "asInteger"),
        *("asApproximateFloat", "major", "minor", "patch", "find", "findAll", "includes"),
        *("orValue", "hasValue", "value", "or", "optMap", "optFlatMap"),
        *("all", "exists", "exists_one", "map", "filter"),  # existsOne: only the two-variable form (translated)
        *("getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours"),
        *("getMilliseconds", "getMinutes", "getMonth", "getSeconds"),
    )
)


def check_functions(tree: Any) -> None:
    """Undeclared functions are compile errors (what a type-checked engine reports), also on cel-python
    (which otherwise fails only if the call is evaluated: ``true || nosuch(1)`` would be ``true``)."""

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Call):
            t = node.target
            if t is None:
                ok = node.fn.startswith(PREFIX) or (node.fn in _KNOWN_GLOBAL and bool(node.args)) or _is_has(node)
            elif isinstance(t, Ident) and not t.leading_dot and (t.name, node.fn) in _KNOWN_NAMESPACED:
                ok = True
            else:
                ok = node.fn in _KNOWN_MEMBER
            if not ok:
                raise CELCompileError(f"undeclared reference to '{node.fn}' (in container '')")
        stack.extend(_children(node))


_OPTIONAL_CONSUMERS = frozenset(("orValue", "hasValue", "value", "or", "optMap", "optFlatMap"))


def check_reserved(tree: Any) -> None:
    """Names starting with ``__dra_`` belong to this translation: a selector may not call or name them."""

    stack = [tree]
    while stack:
        node = stack.pop()
        name = node.fn if isinstance(node, Call) else node.name if isinstance(node, Ident) else ""
        if name.startswith(PREFIX):
            raise CELCompileError(f"undeclared reference to '{name}' (in container '')")
        stack.extend(_children(node))


def escaping_optional(tree: Any) -> bool:
    """Whether an optional value can end up inside a list, a map or a variable (anything but the direct
    receiver of ``orValue``/``value``/``hasValue``/``or``/``optMap``/``optFlatMap`` or of a further ``.?``)."""

    def produces(n: Any) -> bool:
        return (
            (isinstance(n, Select | Index) and n.optional)
            or (isinstance(n, Call) and isinstance(n.target, Ident) and n.target.name == "optional")
            or (isinstance(n, ListLit) and any(n.optional))
            or (isinstance(n, MapLit) and any(o for _, _, o in n.entries))
        )

    consumed: set[int] = set()
    stack = [tree]
    found = False
    while stack:
        node = stack.pop()
        if isinstance(node, Call) and node.fn in _OPTIONAL_CONSUMERS and node.target is not None:
            consumed.add(id(node.target))
        if isinstance(node, Select | Index) and node.optional:
            consumed.add(id(node.operand))
        if produces(node) and id(node) not in consumed:
            found = True
        stack.extend(_children(node))
    return found


def uses_library_calls(tree: Any) -> bool:

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Call) and node.fn.startswith(PREFIX):
            return True
        stack.extend(_children(node))
    return False


def binds_to_comprehensions(tree: Any, always: bool = False) -> Any:
    """``cel.bind(v, init, body)`` → ``[init].map(v, body)[0]`` (same value and errors, ``init`` evaluated once).

    cel-expr-python 0.1.3 (cel-cpp) evaluates a ``cel.bind`` wrongly after a comprehension that stopped early:
    ``[1, 2].all(x, x > 9) || cel.bind(t, "ab", t == "ab")`` is ``false`` there (the binding reads a stale
    slot), ``true`` in cel-go. A one-element comprehension has no such problem; cel-python has no bindings
    at all. Applied after the domain-default rewrite, which still sees the bindings.

    Only when the expression has a short-circuiting comprehension (``all``/``exists``/``exists_one``, the
    condition of that bug): the rewritten form is three syntax levels deep per binding and cel-cpp parses
    at most 32 levels, so plain nested bindings stay native."""

    def has_short_circuit(node: Any) -> bool:
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, Call) and n.target is not None and n.fn in ("all", "exists", "exists_one", "existsOne"):
                return True
            stack.extend(_children(n))
        return False

    def go(node: Any) -> Any:
        if isinstance(node, Call) and _is_bind(node):
            var, init, body = node.args[0], go(node.args[1]), go(node.args[2])
            return Index(Call("map", (var, body), ListLit((init,), (False,))), Lit("int", "0", 0))
        return _map_children(node, go)

    return go(tree) if always or has_short_circuit(tree) else tree


_HASHED_KINDS = frozenset(("int", "uint", "double", "string", "bool"))


def constant_membership(node: Any) -> bool:
    """``x in C`` where cel-go looks ``x`` up in a Go map (see :func:`in_constant`): ``C`` a non-empty list
    literal of bool/int/uint/double/string literals, or a map literal."""

    if not (isinstance(node, Binary) and node.op == "in"):
        return False
    right = node.right
    if isinstance(right, MapLit):
        return True
    return (
        isinstance(right, ListLit)
        and bool(right.elems)
        and not any(right.optional)
        and all(isinstance(e, Lit) and e.kind in _HASHED_KINDS for e in right.elems)
    )


_MAYBE_STRICT = frozenset(("dyn", "list", "map", "kubernetes.Quantity", "kubernetes.Semver", "net.IP", "net.CIDR",
                           "kubernetes.URL"))


def opaque_equality(tree: Any) -> Any:
    """For cel-expr-python (whose ``==`` answers false across types and whose ``in`` never fails): give
    ``==``, ``!=`` and constant membership cel-go's results where a Kubernetes library value may be involved
    (see :func:`equal3`, :func:`in_constant`). Only where the left operand's static type allows such a value
    (dyn, a list, a map or a library type); the value is bound once and only a map or a list at run time
    (what those values are on that engine) goes through Python::

        L == R  ->  cel.bind(a, L, cel.bind(b, R,
                        type(a) == map || type(a) == list ? __dra_eq(dyn(a), dyn(b)) : a == b))
        L in C  ->  cel.bind(a, L, type(a) == map ? __dra_in_constant(dyn(a), C) : a in C)
    """

    counter = itertools.count()

    def static(node: Any, scope: Mapping[str, str]) -> str:
        try:
            return _infer(node, scope)
        except CELCompileError:
            return "dyn"

    def is_kind(var: Any, kind: str) -> Any:
        return Binary("==", Call("type", (var,)), Ident(kind))

    def go(node: Any, scope: Mapping[str, str]) -> Any:
        if isinstance(node, Binary) and node.op in ("==", "!=") and static(node.left, scope) in _MAYBE_STRICT:
            a = Ident(f"{PREFIX}e{next(counter)}")
            b = node.right if isinstance(node.right, Lit) else Ident(f"{PREFIX}e{next(counter)}")
            native = Binary(node.op, a, b)
            # (dyn(): the checker may know a static type where _infer does not, e.g. `[1][0]`; the native
            # branch keeps the operands' types, so its compile errors stay)
            slow = Call(PREFIX + ("eq" if node.op == "==" else "ne"), (Call("dyn", (a,)), Call("dyn", (b,))))
            inner: Any = Cond(Binary("||", is_kind(a, "map"), is_kind(a, "list")), slow, native)
            if b is not node.right:
                inner = Call("bind", (b, go(node.right, scope), inner), Ident("cel"))
            return Call("bind", (a, go(node.left, scope), inner), Ident("cel"))
        if constant_membership(node) and static(node.left, scope) in ("dyn", "kubernetes.Semver"):
            a = Ident(f"{PREFIX}e{next(counter)}")
            right = go(node.right, scope)
            slow = Call(PREFIX + "in_constant", (Call("dyn", (a,)), right))
            test = is_kind(a, "map")
            if isinstance(node.right, MapLit):  # (cel-cpp has no `in` of a list in a map: false upstream)
                test = Binary("||", test, is_kind(a, "list"))
            choice = Cond(test, slow, Binary("in", a, right))
            return Call("bind", (a, go(node.left, scope), choice), Ident("cel"))
        if isinstance(node, Call) and _is_bind(node):
            var = cast(Any, node.args[0])
            init = node.args[1]
            kind = _domain_map_kind(init, scope) or static(init, scope)
            return Call(node.fn, (var, go(init, scope), go(node.args[2], {**scope, var.name: kind})), node.target)
        names = _macro_vars(node) if isinstance(node, Call) else None
        if names is not None and node.target is not None:
            inner = {**scope, **dict.fromkeys(names, "dyn")}
            args = node.args[: len(names)] + tuple(go(x, inner) for x in node.args[len(names) :])
            return Call(node.fn, args, go(node.target, scope), node.leading_dot)
        return _map_children(node, lambda ch: go(ch, scope))

    return go(tree, {})


def strict_macros(tree: Any) -> Any:
    """For cel-python: make comprehension errors CEL errors (values), not Python exceptions.

    celpy evaluates ``map``/``filter``/``exists_one`` bodies so that an error escapes as an exception and
    defeats CEL's commutative ``&&``/``||`` (``[1].map(x, m["missing"])[0] || true`` must be ``true``). Its
    short-circuit body evaluation (used for ``all``/``exists``) returns errors as values instead; the engine
    uses it for every macro, and this rewrite gives the value-returning forms CEL's semantics:
    ``L.map(x, e)`` → ``__dra_strict(L.map(x, e))`` (an element error is the result), ``L.filter(x, p)`` →
    ``__dra_pick(L, L.map(x, p))``, ``L.exists_one(x, p)`` → ``__dra_one(L.map(x, p))``, ``L.all(x, p)`` /
    ``L.exists(x, p)`` → ``__dra_all``/``__dra_exists`` of the mapped values (CEL's commutative logic: a false
    (true) result wins over errors; a non-bool body is an error); ``has(e.f)`` → ``__dra_has(e, "f")``
    (an error of ``e`` is the result, as in CEL, not ``false``).
    """

    def go(node: Any) -> Any:
        if isinstance(node, Binary) and node.op in ("==", "!="):
            # CEL's heterogeneous equality (1 == 1.0, and false across types): celpy raises instead; cel-go's
            # library values fail against other types, != never fails (equal3)
            return Call(PREFIX + ("eq" if node.op == "==" else "ne"), (go(node.left), go(node.right)))
        if isinstance(node, Binary) and node.op == "in":
            # celpy's `in` compares with its own == (which raises across types)
            fn = "in_constant" if constant_membership(node) else "member"
            return Call(PREFIX + fn, (go(node.left), go(node.right)))
        if isinstance(node, Call) and _is_has(node):
            sel = cast(Any, node.args[0])
            # celpy's has() is false when the operand itself fails; CEL propagates that error
            return Call(PREFIX + "has", (go(sel.operand), Lit("string", _quote(sel.field), sel.field)))
        if isinstance(node, Call) and node.target is not None and len(node.args) == 2 and isinstance(
            node.args[0], Ident
        ):
            target, x, body = go(node.target), node.args[0], go(node.args[1])
            if node.fn == "map":
                return Call(PREFIX + "strict", (Call("map", (x, body), target),))
            if node.fn == "filter":
                return Call(PREFIX + "pick", (target, Call("map", (x, body), target)))
            if node.fn in ("exists_one", "existsOne"):
                return Call(PREFIX + "one", (Call("map", (x, body), target),))
            if node.fn in ("all", "exists"):
                return Call(PREFIX + node.fn, (Call("map", (x, body), target),))
        return _map_children(node, go)

    return go(tree)


def _is_net(node: Any) -> bool:
    """``ip(...)``, ``cidr(...)``, ``x.masked()``, ``x.ip()`` (what ``string()`` may convert here)."""

    return isinstance(node, Call) and (
        (node.target is None and node.fn in ("ip", "cidr"))
        or (node.target is not None and node.fn in ("masked", "ip") and not node.args)
    )
