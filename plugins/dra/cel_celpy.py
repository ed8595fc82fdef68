"""The cel-python engine (module ``celpy``, pure Python, unchecked; the portable fallback) in the DRA environment.

Quantities and semvers are small wrapper objects without ordering operators, so a relational operator that slips
past the static check (:mod:`plugins.dra.cel_types`) still fails at run time instead of silently succeeding. The
two outer ``device`` maps are a ``MapType`` subclass whose ``__missing__`` returns ``{}`` (``in`` and iteration only
see the real domains). celpy gets CEL error semantics inside comprehensions (its macros raise instead of returning
errors, see ``cel_ext.strict_macros``), ``cel.bind`` as a one-element comprehension, and ``||``/``&&`` that
evaluate their right operand only when cel-go does.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from plugins.dra import cel_lib, cel_values
from plugins.dra.cel_engine import (
    _COST_EXCEEDED,
    _PY,
    COST_LIMIT,
    DeviceInput,
    Program,
    _analyse,
    _cmp,
    _includes,
    _is_quantity,
    _is_semver,
    _may_panic,
    _quantity_or_error,
    _regex_find,
    _regex_find_all,
    _regex_matches,
    _semver_or_error,
)
from plugins.dra.cel_lib import PANIC as _PANIC
from plugins.dra.cel_syntax import CELCompileError, CELError, CELRuntimeError
from plugins.dra.cel_types import _Q, _V
from scheduler.api.quantity import Quantity
from scheduler.api.semver import Version


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
        # evalOr/evalAnd (celpy evaluates both): a right operand that panics upstream (cel_lib.PANIC) is then
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

        def adapt(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                if len(args) not in cel_lib.FUNCTIONS[name].arities:
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

        table = {cel_lib.PREFIX + name: adapt_strict(adapt(name, f.impl)) for name, f in cel_lib.FUNCTIONS.items()}

        type_names = {
            t.IntType: "int", t.UintType: "uint", t.DoubleType: "double", t.StringType: "string",
            t.BoolType: "bool", t.BytesType: "bytes", t.ListType: "list", t.MapType: "map",
            type(None): "null_type", t.TimestampType: "google.protobuf.Timestamp",
            t.DurationType: "google.protobuf.Duration",
        }

        def format_arg(v: Any) -> Any:
            if isinstance(v, type):  # a type value (type(x)): %s prints its name
                return cel_values.TypeValue(type_names.get(v, getattr(v, "__name__", "type")))
            if isinstance(v, list):
                return [format_arg(x) for x in v]
            if isinstance(v, dict):
                return {k: format_arg(x) for k, x in v.items()}
            return v

        format_impl = cel_lib.FUNCTIONS["format"].impl
        table[cel_lib.PREFIX + "format"] = adapt_strict(
            lambda fmt, args: t.StringType(format_impl(self._plain(fmt), format_arg(self._plain(args))))
        )
        table.update(
            {
                cel_lib.PREFIX + "strict": strict,
                cel_lib.PREFIX + "pick": pick,
                cel_lib.PREFIX + "one": one,
                cel_lib.PREFIX + "all": all_,
                cel_lib.PREFIX + "exists": exists,
                cel_lib.PREFIX + "has": has,
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
