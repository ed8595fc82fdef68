"""The Kubernetes DRA CEL environment (``k8s.io/dynamic-resource-allocation/cel``) over two CEL engines.

Engines
    * ``cel-expr-python`` (Google cel-cpp, type-checked; the fast default) and
    * ``cel-python`` (module ``celpy``, pure Python, unchecked; the fallback).

    :func:`get_engine` picks one (argument, else ``$DRA_SCHEDULER_CEL_ENGINE``, else the fastest importable).

Modules (each imports only the ones above it)
    ``cel_syntax`` (errors, syntax tree, parser, printer) < ``cel_types`` (static types for the unchecked engine)
    < ``cel_values`` (library values) < ``cel_format`` (``string.format``) < ``cel_lib`` (library functions)
    < ``cel_ext`` (the translation that calls them) < ``cel_cost`` (the cost bound) < ``cel_engine`` (device
    input, protocols, the analysis before compiling) < ``cel_cpp``, ``cel_celpy`` (the engines) < this module
    (the engine registry, content keys and the :class:`SelectorCache` the allocator uses).

The selector ``device`` variable (see dra-semantics.md §3)
    ``device.driver`` (string), ``device.attributes[domain][id]``, ``device.capacity[domain][id]``
    (Kubernetes ``Quantity``) and ``device.allowMultipleAllocations`` (bool). Version attributes are
    ``Semver`` values, list attributes are lists. An unknown *domain* behaves as an empty map
    (``device.attributes["no.such"].x`` is a "no such key: x" error, ``has(...)``/``in`` on it are false)
    while ``"no.such" in device.attributes`` stays false; an unknown identifier is a runtime error.

How the semantics are obtained on engines that do not implement them natively
    Every expression is first parsed by a small CEL parser (:func:`plugins.dra.cel_syntax.parse_expression`).
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
    ``||``/``&&`` would make of it (:data:`plugins.dra.cel_lib.PANIC`). cel-expr-python gets this through a
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
    whose bound exceeds :data:`~plugins.dra.cel_engine.COST_LIMIT` compiles, but every ``Program.matches`` raises
    ``CELRuntimeError`` ``operation cancelled: actual cost limit exceeded`` without running the engine:
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
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from plugins.dra.cel_celpy import _CelPythonEngine
from plugins.dra.cel_cpp import _CelExprPythonEngine
from plugins.dra.cel_engine import _PY, _XP, AttributeValue, DeviceInput, Engine, Program
from plugins.dra.cel_syntax import (
    Call,
    CELCompileError,
    CELError,
    Ident,
    Index,
    Lit,
    Node,
    Select,
    StructLit,
    _children,
    _is_has,
    parse_expression,
)
from scheduler.api.quantity import Quantity
from scheduler.api.semver import Version

__all__ = [
    "ENGINE_ENV_VAR",
    "CacheStats",
    "DeviceContent",
    "DeviceReads",
    "SelectorCache",
    "available_engines",
    "content_key",
    "device_reads",
    "engine_available",
    "get_engine",
]

ENGINE_ENV_VAR = "DRA_SCHEDULER_CEL_ENGINE"


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
    (before the domain rewrite of :mod:`plugins.dra.cel_engine`). Its result (or error) is a function of these
    entries (the value, or that the entry is absent), of ``device.driver`` (which also decides the domain of a bare
    attribute name, see :func:`plugins.dra.cel_engine.device_input`) and, when ``allow_multiple_allocations`` is
    set, of ``device.allowMultipleAllocations``.
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
    comprehension variable named ``device``. Analyses the user's text (the domain rewrite of
    :mod:`plugins.dra.cel_engine` only adds presence tests of the domain, which do not change what an entry read
    yields). Expressions that do not parse are None too (they never evaluate)."""
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
    """A device's raw data as a ResourceSlice gives it (``scheduler.api.dra.Device`` is one): qualified or bare
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
    """The value :func:`~plugins.dra.cel_engine.device_input` puts at ``(domain, ident)``, or None. A raw name
    splits at its first ``/``; a name without ``/`` belongs to the driver's domain; when two raw names give the
    same entry the later one wins (dict order), as in ``device_input``."""
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
