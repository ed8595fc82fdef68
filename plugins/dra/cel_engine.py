"""What both CEL engines share: the ``device`` input, the Program and Engine protocols, the analysis every
selector goes through before an engine compiles it, and the helpers of Kubernetes' quantity, semver and regex
libraries.

:func:`_analyse` parses the selector (:mod:`plugins.dra.cel_syntax`), refuses what Kubernetes refuses at compile
time (reserved names, heterogeneous literals, ``format`` calls that cannot work, undeclared names and unknown
``device`` fields, and on the unchecked engine the type errors of :mod:`plugins.dra.cel_types`), translates the
library calls (:mod:`plugins.dra.cel_ext`), bounds the cost (:mod:`plugins.dra.cel_cost`), gives unknown domains
of ``device.attributes``/``device.capacity`` their empty-map default where the engine needs a rewrite, and prints
the tree back for the engine. The engines themselves are :mod:`plugins.dra.cel_cpp` (cel-expr-python) and
:mod:`plugins.dra.cel_celpy` (cel-python); :mod:`plugins.dra.cel` picks one.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, TypeAlias, cast

from plugins.dra import cel_cost, cel_ext, cel_format
from plugins.dra.cel_syntax import (
    Binary,
    Call,
    CELCompileError,
    Cond,
    Ident,
    Index,
    MapLit,
    Node,
    Select,
    _children,
    _domain_map_kind,
    _is_bind,
    _is_has,
    _macro_vars,
    _map_children,
    _string_lit,
    parse_expression,
    unparse,
)
from plugins.dra.cel_types import _infer
from scheduler.api.quantity import Quantity, QuantityError, parse_quantity
from scheduler.api.semver import SemverError, Version
from scheduler.api.semver import parse as parse_semver

AttributeValue: TypeAlias = (
    int | bool | str | Version | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...] | tuple[Version, ...]
)

COST_LIMIT = 1_000_000
INCLUDES_MAX_LIST = 48
_COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"

_XP = "cel-expr-python"
_PY = "cel-python"


# =====================================================================================================
# The device input, programs and engines
# =====================================================================================================


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
# Analysis: device field checks, the domain rewrite, the pipeline before an engine compiles
# =====================================================================================================

_DEVICE_FIELDS = frozenset(("driver", "attributes", "capacity", "allowMultipleAllocations"))
_TYPE_IDENTS = frozenset(
    ("int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type", "dyn")
)
_NAMESPACES = frozenset(("cel", "optional", "strings", "math", "sets", "lists", "base64", "google"))


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


def _may_panic(text: str) -> bool:
    """Whether a translated program calls a function that can panic upstream (cel_lib.PANIC)."""
    return "__dra_in_constant" in text
