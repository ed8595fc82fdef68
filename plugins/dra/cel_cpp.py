"""The cel-expr-python engine (Google's cel-cpp, type-checked; the fast default) in the DRA environment.

Quantities and semvers travel through cel-expr-python as tagged maps (Python callbacks cannot return opaque
objects there): ``Quantity`` is ``map(string, string)`` ``{"@q": "<exact rational>"}`` and ``Semver`` is
``map(int, string)`` ``{0: "<major.minor.patch[-pre]>"}``; IP, CIDR and URL values are maps of distinct key types
too. The distinct map types let the checker reject ``quantity >= quantity`` or ``quantity.compareTo(semver)`` at
compile time, like Kubernetes. Literal ``quantity("...")``/``semver("...")`` calls are folded into constants.
Unknown domains of ``device.attributes``/``device.capacity`` get their empty-map default through the rewrite of
:mod:`plugins.dra.cel_engine`. cel-cpp stops an evaluation after 9,999 comprehension iterations (that claim fails).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, cast

from plugins.dra import cel_lib, cel_values
from plugins.dra.cel_engine import (
    _COST_EXCEEDED,
    _KEY_NOT_FOUND,
    _PY,
    _XP,
    COST_LIMIT,
    DeviceInput,
    Program,
    _analyse,
    _clean_status,
    _cmp,
    _fraction,
    _includes,
    _is_quantity,
    _is_semver,
    _may_panic,
    _quantity_or_error,
    _regex_find,
    _regex_find_all,
    _semver_or_error,
    _version_from_tag,
)
from plugins.dra.cel_lib import PANIC as _PANIC
from plugins.dra.cel_syntax import Call, CELCompileError, CELRuntimeError, Lit, MapLit, Node, _map_children, _string_lit
from plugins.dra.cel_types import _Q, _V
from scheduler.api.quantity import Quantity, QuantityError, parse_quantity
from scheduler.api.semver import SemverError, Version
from scheduler.api.semver import parse as parse_semver

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
    """Declarations of :data:`plugins.dra.cel_lib.FUNCTIONS` for cel-expr-python (typed overloads; IP, CIDR and
    URL travel as tagged maps of distinct types like Quantity and Semver)."""

    T = cel.Type
    IP, CIDR, URL = T.Map(T.UINT, T.STRING), T.Map(T.BOOL, T.STRING), T.Map(T.STRING, T.BYTES)
    L, M, D, N, S, B = T.List(T.DYN), T.Map(T.DYN, T.DYN), T.DYN, T.INT, T.STRING, T.BOOL
    # One overload per runtime kind (cel-cpp dispatches on kinds: all tagged maps are "map").
    scalars = [T.INT, T.UINT, T.DOUBLE, T.STRING, T.BOOL, T.BYTES, T.NULL, M, L]

    def arg_in(t: Any, v: Any) -> Any:
        if t == M and isinstance(v, dict) and len(v) == 1:
            k = next(iter(v))
            if k is True and isinstance(v[k], str):
                return cel_values.CIDRValue(v[k])
            if isinstance(v[k], str):
                return cel_values.IPValue(v[k])
            return v
        if t == IP:
            return cel_values.IPValue(v[_XP_IP_KEY])
        if t == CIDR:
            return cel_values.CIDRValue(v[_XP_CIDR_KEY])
        if t == URL:
            return cel_values.URLValue(v[_XP_URL_KEY].decode("utf-8"))
        return v

    def out(v: Any) -> Any:
        if isinstance(v, cel_values.IPValue):
            return {_XP_IP_KEY: v.text}
        if isinstance(v, cel_values.CIDRValue):
            return {_XP_CIDR_KEY: v.text}
        if isinstance(v, cel_values.URLValue):
            return {_XP_URL_KEY: v.text.encode("utf-8")}
        return v

    def wrap(impl: Callable[..., Any], params: list[Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return out(impl(*(arg_in(t, a) for t, a in zip(params, args, strict=False))))

        return call

    def lib_value(v: Any) -> Any:
        """A dyn value as cel_format/cel_ext expect it: tagged maps are the library values they stand for
        (:class:`cel_values.Opaque`, equal tags for equal values), bytes are bytes, types are type values."""
        if isinstance(v, dict):
            if len(v) == 1:
                k, x = next(iter(v.items()))
                if k is True and isinstance(x, str):
                    return cel_values.Opaque("net.CIDR", x)
                if k == _QKEY and isinstance(x, str):
                    return cel_values.Opaque(_Q, x)
                if k == _XP_URL_KEY and isinstance(x, bytes | bytearray):
                    return cel_values.Opaque("kubernetes.URL", bytes(x))
                if k == _VKEY and not isinstance(k, bool) and isinstance(x, str):
                    return cel_values.Opaque(_V, x)  # (an IP is the same map: taken for a Semver)
            return {lib_value(k): lib_value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [lib_value(x) for x in v]
        if isinstance(v, bytearray):
            return bytes(v)
        if isinstance(v, cel.Type):
            name = str(v).split("<")[0].lower()
            return cel_values.TypeValue(
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
        impl = cel_lib.FUNCTIONS[name].impl
        decls.append(
            cel.FunctionDecl(
                cel_lib.PREFIX + name,
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
