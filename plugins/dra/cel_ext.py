"""The parts of the Kubernetes 1.37 DRA CEL environment that neither Python CEL engine provides natively.

Kubernetes compiles DRA selectors in the apiserver's base environment (``k8s.io/apiserver/pkg/cel/environment``
``base.go`` at v0.37.2, all libraries of stored expressions) plus ``cel.bind`` and the DRA ``device``
variable (``k8s.io/dynamic-resource-allocation/cel/compile.go``). Besides what :mod:`plugins.dra.cel`
already maps (quantity, semver, regex ``find``/``findAll``, strings, optional types), that environment has:

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
  lookup of an unhashable value) panics: :func:`in_constant`, :data:`PANIC`;
* ``string.format`` of the strings extension at version 2 (:mod:`plugins.dra.cel_format`);
* the ``Equal`` of Kubernetes' library types, which refuses other types (:func:`equal3`, and for
  cel-expr-python the rewrite :func:`opaque_equality`).

How: :func:`translate` rewrites the syntax tree (from :func:`plugins.dra.cel.parse_expression`) before it
is handed to an engine. Two-variable comprehensions become one-variable macros over ``__dra_keys(t)`` (list
indices or map keys) with ``cel.bind(v, t[i], ...)``; ``sortBy`` becomes ``__dra_sortByKeys(l, l.map(e,
key))`` (as cel-go's macro expands it); the library functions become calls of ``__dra_<name>`` functions
implemented here in plain Python (:data:`FUNCTIONS`) and registered by each engine; ``x in []`` becomes
``false``. Both engines therefore run the same translated program, and the differential test
(``tests/test_differential.py``) compares them with cel-go.

Not provided: ``transformMapEntry``, ``lists.first``/``last`` (optional results), Kubernetes' ``format``
library and authorizer functions (no authorizer variable in DRA), ``string(ip)``/``string(cidr)`` on
anything but a direct ``ip(...)``/``cidr(...)`` expression.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from plugins.dra.cel_format import Opaque

__all__ = [
    "FUNCTIONS",
    "PREFIX",
    "CIDRValue",
    "IPValue",
    "URLValue",
    "cel_equal",
    "translate",
]

PREFIX = "__dra_"


# =====================================================================================================
# Opaque values of the Kubernetes libraries (engine neutral)
# =====================================================================================================


@dataclass(frozen=True, slots=True)
class IPValue:
    """``net.IP`` of the CEL IP library: canonical text (netip ``Addr.String()``)."""

    text: str

    @property
    def addr(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        return ipaddress.ip_address(self.text)


@dataclass(frozen=True, slots=True)
class CIDRValue:
    """``net.CIDR``: address as written (canonical) and prefix length."""

    text: str  # "<addr>/<bits>"

    @property
    def iface(self) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
        return ipaddress.ip_interface(self.text)


@dataclass(frozen=True, slots=True)
class URLValue:
    text: str


class CELValueError(ValueError):
    """A library function failed (becomes a CEL runtime error)."""


# =====================================================================================================
# Equality and ordering as CEL defines them
# =====================================================================================================


def _is_num(v: object) -> bool:
    return isinstance(v, int | float | Fraction) and not isinstance(v, bool)


def cel_equal(a: object, b: object) -> bool:
    """CEL ``==`` with heterogeneous numeric equality (``1 == 1.0 == 1u``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_num(a) and _is_num(b):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if len(a) != len(b):
            return False
        for k, v in a.items():
            match = [bv for bk, bv in b.items() if cel_equal(k, bk)]
            if not match or not cel_equal(v, match[0]):
                return False
        return True
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        if isinstance(a, bytes) and isinstance(b, bytes):
            return a == b
        return False
    return a == b


def _kind(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bytes):
        return "bytes"
    if isinstance(v, list | tuple):
        return "list"
    if isinstance(v, Mapping):
        return "map"
    return type(v).__name__


def _comparable(items: Sequence[Any], fn: str) -> None:
    kinds = {_kind(x) for x in items}
    if len(kinds) > 1:
        raise CELValueError(f"{fn}: list elements must have the same type")
    if kinds and not kinds <= {"bool", "int", "double", "string", "bytes"}:
        raise CELValueError(f"no such overload: {fn}")


# =====================================================================================================
# Library implementations (plain Python values in and out; lists are Python lists)
# =====================================================================================================


def _as_list(v: Any, fn: str) -> list[Any]:
    if isinstance(v, list | tuple):
        return list(v)
    raise CELValueError(f"no such overload: {fn}")


def _int(v: Any, fn: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CELValueError(f"no such overload: {fn}")
    return int(v)


MAX_LIST = 1_000_000


def lists_range(n: Any) -> list[int]:
    k = _int(n, "lists.range")
    if k > MAX_LIST:
        raise CELValueError("operation cancelled: actual cost limit exceeded")
    return list(range(max(k, 0)))


def list_slice(v: Any, start: Any, end: Any) -> list[Any]:
    items = _as_list(v, "slice")
    a, b = _int(start, "slice"), _int(end, "slice")
    if a < 0 or b < 0:
        raise CELValueError(f"cannot slice({a}, {b}), negative indexes not supported")
    if a > b:
        raise CELValueError(f"cannot slice({a}, {b}), start index must be less than or equal to end index")
    if len(items) < b:
        raise CELValueError(f"cannot slice({a}, {b}), list is length {len(items)}")
    return items[a:b]


def list_flatten(v: Any, depth: Any = 1) -> list[Any]:
    items = _as_list(v, "flatten")
    d = _int(depth, "flatten")
    if d < 0:
        raise CELValueError("level must be non-negative")
    out: list[Any] = []
    for x in items:
        if isinstance(x, list | tuple) and d > 0:
            out.extend(list_flatten(list(x), d - 1))
        else:
            out.append(x)
    return out


def list_sort(v: Any) -> list[Any]:
    items = _as_list(v, "sort")
    _comparable(items, "sort")
    return sorted(items)


def list_sort_by_keys(v: Any, keys: Any) -> list[Any]:
    items, ks = _as_list(v, "sortBy"), _as_list(keys, "sortBy")
    if len(items) != len(ks):
        raise CELValueError("@sortByAssociatedKeys expects the same number of elements and keys")
    _comparable(ks, "sortBy")
    order = sorted(range(len(items)), key=lambda i: ks[i])  # stable, as Go's sort.SliceStable
    return [items[i] for i in order]


def list_distinct(v: Any) -> list[Any]:
    out: list[Any] = []
    for x in _as_list(v, "distinct"):
        if not any(cel_equal(x, y) for y in out):
            out.append(x)
    return out


def list_reverse(v: Any) -> list[Any]:
    return list(reversed(_as_list(v, "reverse")))


def list_is_sorted(v: Any) -> bool:
    items = _as_list(v, "isSorted")
    _comparable(items, "isSorted")
    return all(not (items[i + 1] < items[i]) for i in range(len(items) - 1))


_INT64 = (-(2**63), 2**63 - 1)


def list_sum(v: Any) -> Any:
    items = _as_list(v, "sum")
    if not items:
        return 0
    kinds = {_kind(x) for x in items}
    if len(kinds) != 1 or not kinds <= {"int", "double"}:
        raise CELValueError("no such overload: sum")
    total = sum(items)
    if isinstance(total, int) and not _INT64[0] <= total <= _INT64[1]:
        raise CELValueError("integer overflow")
    return total


def _extreme(v: Any, fn: str, pick: Callable[[Any, Any], bool]) -> Any:
    items = _as_list(v, fn)
    if not items:
        raise CELValueError(f"{fn} called on empty list")
    _comparable(items, fn)
    best = items[0]
    for x in items[1:]:
        if pick(x, best):
            best = x
    return best


def list_min(v: Any) -> Any:
    return _extreme(v, "min", lambda x, best: x < best)


def list_max(v: Any) -> Any:
    return _extreme(v, "max", lambda x, best: x > best)


def _code_points(s: str) -> str:
    return s


def index_of(target: Any, x: Any, start: Any = None) -> int:
    if isinstance(target, str):
        if not isinstance(x, str):
            raise CELValueError("no such overload: indexOf")
        st = 0 if start is None else _int(start, "indexOf")
        if not 0 <= st <= len(target):
            raise CELValueError(f"index out of range: {st}")
        return target.find(x, st)
    if start is not None:
        raise CELValueError("no such overload: indexOf")
    for i, e in enumerate(_as_list(target, "indexOf")):
        if cel_equal(e, x):
            return i
    return -1


def last_index_of(target: Any, x: Any, end: Any = None) -> int:
    if isinstance(target, str):
        if not isinstance(x, str):
            raise CELValueError("no such overload: lastIndexOf")
        if end is None:
            return target.rfind(x)
        e = _int(end, "lastIndexOf")
        if not 0 <= e < max(len(target), 1) and not (e == 0 and not target):
            raise CELValueError(f"index out of range: {e}")
        return target.rfind(x, 0, e + len(x))
    if end is not None:
        raise CELValueError("no such overload: lastIndexOf")
    items = _as_list(target, "lastIndexOf")
    for i in range(len(items) - 1, -1, -1):
        if cel_equal(items[i], x):
            return i
    return -1


def sets_contains(a: Any, b: Any) -> bool:
    la, lb = _as_list(a, "sets.contains"), _as_list(b, "sets.contains")
    return all(any(cel_equal(x, y) for y in la) for x in lb)


def sets_equivalent(a: Any, b: Any) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: Any, b: Any) -> bool:
    la, lb = _as_list(a, "sets.intersects"), _as_list(b, "sets.intersects")
    return any(cel_equal(x, y) for x in la for y in lb)


def keys(v: Any) -> list[Any]:
    if isinstance(v, list | tuple):
        return list(range(len(v)))
    if isinstance(v, Mapping):
        return list(v.keys())
    raise CELValueError("no such overload: comprehension range must be a list or a map")


def zip_map(ks: Any, vs: Any) -> dict[Any, Any]:
    kl, vl = _as_list(ks, "transformMap"), _as_list(vs, "transformMap")
    return dict(zip(kl, vl, strict=True))


# -- IP / CIDR ----------------------------------------------------------------------------------------


def _parse_ip(raw: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if not isinstance(raw, str):
        raise CELValueError("no such overload: ip")
    if "%" in raw:
        try:
            ipaddress.ip_address(raw)
        except ValueError:
            raise CELValueError(
                f'IP Address "{raw}" parse error during conversion from string: ParseAddr("{raw}"): '
                "invalid IP address"
            ) from None
        raise CELValueError(f'IP address "{raw}" with zone value is not allowed')
    try:
        addr = ipaddress.ip_address(raw)
    except ValueError:
        raise CELValueError(
            f'IP Address "{raw}" parse error during conversion from string: ParseAddr("{raw}"): invalid IP address'
        ) from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CELValueError(f'IPv4-mapped IPv6 address "{raw}" is not allowed')
    return addr


def _canonical(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return str(addr)


def ip(raw: Any) -> IPValue:
    return IPValue(_canonical(_parse_ip(raw)))


def is_ip(raw: Any) -> bool:
    try:
        _parse_ip(raw)
    except CELValueError:
        return False
    return True


def ip_is_canonical(raw: Any) -> bool:
    return bool(_canonical(_parse_ip(raw)) == raw)


def _ipv(v: Any, fn: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if not isinstance(v, IPValue):
        raise CELValueError(f"no such overload: {fn}")
    return v.addr


def ip_family(v: Any) -> int:
    return _ipv(v, "family").version


def ip_is_unspecified(v: Any) -> bool:
    return _ipv(v, "isUnspecified").is_unspecified


def ip_is_loopback(v: Any) -> bool:
    return _ipv(v, "isLoopback").is_loopback


def ip_is_link_local_multicast(v: Any) -> bool:
    a = _ipv(v, "isLinkLocalMulticast")
    if a.version == 4:
        return a in ipaddress.ip_network("224.0.0.0/24")
    return (int(a) >> 112) & 0xFF0F == 0xFF02


def ip_is_link_local_unicast(v: Any) -> bool:
    a = _ipv(v, "isLinkLocalUnicast")
    if a.version == 4:
        return a in ipaddress.ip_network("169.254.0.0/16")
    return (int(a) >> 118) == (0xFE80 >> 6)


def ip_is_global_unicast(v: Any) -> bool:
    a = _ipv(v, "isGlobalUnicast")
    if a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (
        a.is_unspecified
        or a.is_loopback
        or a.is_multicast
        or ip_is_link_local_unicast(v)
    )


def _parse_cidr(raw: Any) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if not isinstance(raw, str):
        raise CELValueError("no such overload: cidr")
    addr, sep, bits = raw.partition("/")
    err = CELValueError(
        f'network address parse error during conversion from string: network address parse error during '
        f'conversion from string: netip.ParsePrefix("{raw}"): invalid prefix'
    )
    if not sep or "%" in addr or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        raise err
    try:
        iface = ipaddress.ip_interface(raw)
        a = ipaddress.ip_address(addr)
    except ValueError:
        raise err from None
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        raise CELValueError(
            f'network address parse error during conversion from string: IPv4-mapped IPv6 address "{raw}" is not '
            "allowed"
        )
    return iface


def cidr(raw: Any) -> CIDRValue:
    iface = _parse_cidr(raw)
    return CIDRValue(f"{iface.ip}/{iface.network.prefixlen}")


def is_cidr(raw: Any) -> bool:
    try:
        _parse_cidr(raw)
    except CELValueError:
        return False
    return True


def _cidr(v: Any, fn: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if not isinstance(v, CIDRValue):
        raise CELValueError(f"no such overload: {fn}")
    return v.iface


def cidr_contains_ip(v: Any, other: Any) -> bool:
    c = _cidr(v, "containsIP")
    a = ip(other).addr if isinstance(other, str) else _ipv(other, "containsIP")
    return a.version == c.version and a in c.network


def cidr_contains_cidr(v: Any, other: Any) -> bool:
    c = _cidr(v, "containsCIDR")
    o = cidr(other).iface if isinstance(other, str) else _cidr(other, "containsCIDR")
    if o.version != c.version:
        return False
    return c.network.overlaps(o.network) and c.network.prefixlen <= o.network.prefixlen


def cidr_ip(v: Any) -> IPValue:
    return IPValue(str(_cidr(v, "ip").ip))


def cidr_masked(v: Any) -> CIDRValue:
    c = _cidr(v, "masked")
    return CIDRValue(str(c.network))


def cidr_prefix_length(v: Any) -> int:
    return _cidr(v, "prefixLength").network.prefixlen


def to_string(v: Any) -> str:
    if isinstance(v, IPValue | CIDRValue):
        return v.text
    raise CELValueError("no such overload: string")


# -- URL ----------------------------------------------------------------------------------------------


def _parse_request_uri(raw: Any) -> urllib.parse.SplitResult:
    """Go ``url.ParseRequestURI``: an absolute URI or an absolute path, no fragment interpretation."""
    if not isinstance(raw, str):
        raise CELValueError("no such overload: url")
    err = CELValueError(f'URL parse error during conversion from string: parse "{raw}": invalid URI for request')
    if not raw or any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw) or " " in raw.split("?", 1)[0]:
        raise err
    if raw.startswith("/"):
        return urllib.parse.urlsplit(raw)
    scheme, sep, _ = raw.partition(":")
    if not sep or not scheme or not scheme[0].isalpha() or not all(c.isalnum() or c in "+-." for c in scheme):
        raise err
    try:
        parts = urllib.parse.urlsplit(raw)
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError:
        raise err from None
    return parts


def url(raw: Any) -> URLValue:
    _parse_request_uri(raw)
    return URLValue(str(raw))


def is_url(raw: Any) -> bool:
    try:
        _parse_request_uri(raw)
    except CELValueError:
        return False
    return True


def _url(v: Any, fn: str) -> urllib.parse.SplitResult:
    if not isinstance(v, URLValue):
        raise CELValueError(f"no such overload: {fn}")
    return urllib.parse.urlsplit(v.text)


def url_scheme(v: Any) -> str:
    return _url(v, "getScheme").scheme


def url_host(v: Any) -> str:
    return _url(v, "getHost").netloc.rpartition("@")[2]


def url_hostname(v: Any) -> str:
    host = url_host(v)
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    return host.rpartition(":")[0] if ":" in host else host


def url_port(v: Any) -> str:
    host = url_host(v)
    if host.startswith("["):
        rest = host[host.find("]") + 1 :] if "]" in host else ""
        return rest[1:] if rest.startswith(":") else ""
    return host.rpartition(":")[2] if ":" in host else ""


def url_escaped_path(v: Any) -> str:
    return _url(v, "getEscapedPath").path


def url_query(v: Any) -> dict[str, list[str]]:
    q = _url(v, "getQuery").query
    out: dict[str, list[str]] = {}
    for k, val in urllib.parse.parse_qsl(q, keep_blank_values=True):
        out.setdefault(k, []).append(val)
    return out


# =====================================================================================================
# The function table: name -> (implementation, argument counts)
# =====================================================================================================


@dataclass(frozen=True, slots=True)
class Fn:
    impl: Callable[..., Any]
    arities: tuple[int, ...]  # number of arguments (the receiver of a member call counts)
    kind: str  # "list", "str_or_list", "scalar", "ip", "cidr", "url", "any"


_SEMVER_T = "kubernetes.Semver"


def _strict_type(v: object) -> str | None:
    """The type name of a Kubernetes library value whose ``Equal`` refuses other types: Quantity, Semver, IP,
    CIDR and URL (k8s.io/apiserver v0.37.2 ``pkg/cel/quantity.go``, ``semver.go``, ``ip.go``, ``cidr.go``,
    ``url.go``: ``MaybeNoSuchOverloadErr``/``ValOrErr(other, "no such overload")``)."""
    if isinstance(v, IPValue):
        return "net.IP"
    if isinstance(v, CIDRValue):
        return "net.CIDR"
    if isinstance(v, URLValue):
        return "kubernetes.URL"
    if isinstance(v, Opaque):
        return v.type_name
    name = getattr(v, "cel_type_name", None)  # cel-python's Quantity and Semver wrappers
    return name if isinstance(name, str) else None


def equal3(a: object, b: object) -> bool | None:
    """cel-go's ``types.Equal`` with errors as ``None``: null equals only null; a Quantity/Semver/IP/CIDR/URL
    compared with a value of another type is "no such overload" (``semver == "1.2.3"`` fails, while
    ``"1.2.3" == semver`` is false: a string's ``Equal`` answers false); lists and maps compare element-wise
    and an element comparison that fails does not make them unequal (``baseList.Equal``/``baseMap.Equal``
    only stop on ``False``: ``[semver] == ["1.2.3"]`` is true in cel-go v0.29.2)."""
    if a is None or b is None:
        return a is None and b is None
    st = _strict_type(a)
    if st is not None:
        if _strict_type(b) != st:
            return None
        return a == b
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(equal3(x, y) is not False for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        for k, v in a.items():
            match = [bv for bk, bv in b.items() if cel_equal(k, bk)]
            if not match or equal3(v, match[0]) is False:
                return False
        return True
    return cel_equal(a, b)


def eq(a: Any, b: Any) -> bool:
    r = equal3(a, b)
    if r is None:
        raise CELValueError("no such overload")
    return r


def ne(a: Any, b: Any) -> bool:
    """``!=``: not (equal is true), so never an error (cel-go ``evalNe``)."""
    return equal3(a, b) is not True


class _Panic(threading.local):
    """A Go panic inside cel-go's evaluation (recovered by cel-go as "internal error: ..."): unlike an error
    value it ends the whole evaluation, whatever ``||``/``&&`` would make of it. A function that panics
    upstream records it here; the engines' programs that may panic (``may_panic``) clear it before and check
    it after each evaluation."""

    message: str | None = None


PANIC = _Panic()


def in_constant(x: Any, container: Any) -> bool:
    """``x in <literal>``: cel-go's planner (``OptOptimize``, Kubernetes' base environment) turns membership in
    a constant list of primitive literals into a Go map lookup (``interpreter/decorators.go``
    ``maybeOptimizeSetMembership``), and ``in`` on a map literal looks the key up in a Go map: a Semver
    (a struct holding slices) cannot be hashed, so ``semver in ["1.2.3"]`` fails ("hash of unhashable type
    cel.Semver") where a non-constant list answers false. Other values: CEL membership."""
    if _strict_type(x) == _SEMVER_T:
        PANIC.message = "internal error: runtime error: hash of unhashable type cel.Semver"
        raise CELValueError(PANIC.message)
    return member(x, container)


def member(x: Any, container: Any) -> bool:
    """CEL ``in``: a list contains ``x`` if an element's comparison with it is true (a failing comparison
    counts as false: ``baseList.Contains``), a map if it has the key."""
    if isinstance(container, Mapping):
        return any(cel_equal(x, k) for k in container)
    return any(equal3(x, e) is True for e in _as_list(container, "in"))


def string_format(fmt: Any, args: Any) -> str:
    from plugins.dra import cel_format

    try:
        return cel_format.string_format(fmt, args)
    except cel_format.FormatError as e:
        raise CELValueError(str(e)) from None


def quantity_eq_ptr(a: Any, b: Any) -> bool:
    raise CELValueError("no such overload")


FUNCTIONS: dict[str, Fn] = {
    "keys": Fn(keys, (1,), "any"),
    "quantity_eq_ptr": Fn(quantity_eq_ptr, (2,), "any"),
    "eq": Fn(eq, (2,), "any"),
    "ne": Fn(ne, (2,), "any"),
    "in_constant": Fn(in_constant, (2,), "any"),
    "member": Fn(member, (2,), "any"),
    "zip": Fn(zip_map, (2,), "list"),
    "lists_range": Fn(lists_range, (1,), "scalar"),
    "slice": Fn(list_slice, (3,), "list"),
    "flatten": Fn(list_flatten, (1, 2), "list"),
    "sort": Fn(list_sort, (1,), "list"),
    "sortByKeys": Fn(list_sort_by_keys, (2,), "list"),
    "distinct": Fn(list_distinct, (1,), "list"),
    "reverse": Fn(list_reverse, (1,), "list"),
    "isSorted": Fn(list_is_sorted, (1,), "list"),
    "sum": Fn(list_sum, (1,), "list"),
    "min": Fn(list_min, (1,), "list"),
    "max": Fn(list_max, (1,), "list"),
    "indexOf": Fn(index_of, (2, 3), "str_or_list"),
    "lastIndexOf": Fn(last_index_of, (2, 3), "str_or_list"),
    "sets_contains": Fn(sets_contains, (2,), "list"),
    "sets_equivalent": Fn(sets_equivalent, (2,), "list"),
    "sets_intersects": Fn(sets_intersects, (2,), "list"),
    "ip": Fn(ip, (1,), "scalar"),
    "isIP": Fn(is_ip, (1,), "scalar"),
    "ip_isCanonical": Fn(ip_is_canonical, (1,), "scalar"),
    "family": Fn(ip_family, (1,), "ip"),
    "isUnspecified": Fn(ip_is_unspecified, (1,), "ip"),
    "isLoopback": Fn(ip_is_loopback, (1,), "ip"),
    "isLinkLocalMulticast": Fn(ip_is_link_local_multicast, (1,), "ip"),
    "isLinkLocalUnicast": Fn(ip_is_link_local_unicast, (1,), "ip"),
    "isGlobalUnicast": Fn(ip_is_global_unicast, (1,), "ip"),
    "cidr": Fn(cidr, (1,), "scalar"),
    "isCIDR": Fn(is_cidr, (1,), "scalar"),
    "containsIP": Fn(cidr_contains_ip, (2,), "cidr"),
    "containsCIDR": Fn(cidr_contains_cidr, (2,), "cidr"),
    "cidr_ip": Fn(cidr_ip, (1,), "cidr"),
    "masked": Fn(cidr_masked, (1,), "cidr"),
    "prefixLength": Fn(cidr_prefix_length, (1,), "cidr"),
    "string": Fn(to_string, (1,), "any"),
    "url": Fn(url, (1,), "scalar"),
    "isURL": Fn(is_url, (1,), "scalar"),
    "getScheme": Fn(url_scheme, (1,), "url"),
    "getHost": Fn(url_host, (1,), "url"),
    "getHostname": Fn(url_hostname, (1,), "url"),
    "getPort": Fn(url_port, (1,), "url"),
    "getEscapedPath": Fn(url_escaped_path, (1,), "url"),
    "getQuery": Fn(url_query, (1,), "url"),
    "format": Fn(string_format, (2,), "any"),
}

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
    """Rewrite a :mod:`plugins.dra.cel` syntax tree as the module docstring says.

    ``checked``: wrap indexing of the comprehension range in ``dyn()`` (type-checked engines).
    ``bind_native``: whether ``cel.bind`` may be emitted; if not, a binding is written as the one-element
    comprehension ``[init].map(v, body)[0]`` (evaluates ``init`` once, linear size).
    """
    from plugins.dra import cel as c

    counter = itertools.count()

    def fresh() -> Any:
        return c.Ident(f"{PREFIX}t{next(counter)}")

    def bind(var: Any, init: Any, body: Any) -> Any:
        if bind_native:
            return c.Call("bind", (var, init, body), c.Ident("cel"))
        return c.Index(c.Call("map", (var, body), c.ListLit((init,), (False,))), c.Lit("int", "0", 0))

    def fn(name: str, *args: Any) -> Any:
        return c.Call(PREFIX + name, tuple(args))

    def at(t: Any, i: Any) -> Any:
        base = c.Call("dyn", (t,)) if checked else t
        return c.Index(base, i)

    def go(node: Any, scope: frozenset[str]) -> Any:
        if isinstance(node, c.Binary) and node.op == "in" and node.right == c.ListLit((), ()):
            # false whatever x is (even an error), but x is still type-checked: size([x]) == 0 && false
            probed = c.Call("size", (c.ListLit((go(node.left, scope),), (False,)),))
            return c.Binary("&&", c.Binary("==", probed, c.Lit("int", "0", 0)), c.Lit("bool", "false", False))
        if (
            isinstance(node, c.Binary)
            and node.op in ("==", "!=")
            and _is_quantity_arith(node.right)
            and (_is_quantity_value(node.left) or _is_quantity_arith(node.left))
        ):
            # Kubernetes' quantity add()/sub() return a *Quantity whose Equal the value type does not accept:
            # q == q.add(x) fails with "no such overload" upstream (apiserver pkg/cel/quantity.go).
            return fn("quantity_eq_ptr", go(node.left, scope), go(node.right, scope))
        if isinstance(node, c.Call):
            # cel.bind is handled natively or rewritten (scope of its variable)
            if c._is_bind(node):
                var = cast(Any, node.args[0])
                inner = scope | {var.name}
                init, body = go(node.args[1], scope), go(node.args[2], inner)
                return bind(var, init, body) if not bind_native else c.Call(node.fn, (var, init, body), node.target)
            target = node.target
            n = len(node.args)
            # two-variable comprehensions
            if (
                target is not None
                and n >= 3
                and isinstance(node.args[0], c.Ident)
                and isinstance(node.args[1], c.Ident)
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
                    body = c.Call(macro, (i, with_v(rest[0])), ks)
                else:
                    chosen = ks
                    if n == 4:
                        chosen = c.Call("filter", (i, with_v(rest[0])), ks)
                    values = c.Call("map", (i, with_v(rest[-1])), chosen)
                    if macro == "transformList":
                        body = values
                    else:
                        k2 = fresh()
                        body = bind(k2, chosen, fn("zip", k2, c.Call("map", (i, with_v(rest[-1])), k2)))
                return bind(t, tgt, body)
            if target is not None and node.fn == "sortBy" and n == 2 and isinstance(node.args[0], c.Ident):
                t = fresh()
                e = cast(Any, node.args[0])
                key = go(node.args[1], scope | {e.name})
                return bind(t, go(target, scope), fn("sortByKeys", t, c.Call("map", (e, key), t)))
            if target is not None and node.fn == "map" and n == 3 and isinstance(node.args[0], c.Ident) and not checked:
                x = cast(Any, node.args[0])
                inner = scope | {x.name}
                filtered = c.Call("filter", (x, go(node.args[1], inner)), go(target, scope))
                return c.Call("map", (x, go(node.args[2], inner)), filtered)
            names = c._macro_vars(node)
            if names is not None and target is not None:
                inner = scope | set(names)
                args = node.args[: len(names)] + tuple(go(a, inner) for a in node.args[len(names) :])
                return c.Call(node.fn, args, go(target, scope), node.leading_dot)
            # namespaced functions: lists.range, sets.*, ip.isCanonical
            if isinstance(target, c.Ident) and not target.leading_dot and target.name not in scope:
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
                return go(c.Call(node.fn, node.args), scope)
            if target is None and not node.leading_dot and node.fn in _GLOBAL and n == 1:
                return fn(_GLOBAL[node.fn], go(node.args[0], scope))
            if target is None and node.fn == "string" and n == 1 and _is_net(node.args[0]):
                return fn("string", go(node.args[0], scope))
        return c._map_children(node, lambda ch: go(ch, scope))

    return go(tree, frozenset())


_QUANTITY_T = "kubernetes.Quantity"


def _static_type(node: Any) -> str | None:
    """cel-go's static type of a literal element where it is certain (None: unknown, not compared)."""
    from plugins.dra import cel as c

    if isinstance(node, c.Lit):
        return {"null": "null_type"}.get(node.kind, node.kind)
    f = c._device_field(node, {}) if isinstance(node, c.Select) else None
    if f is not None:
        return {"driver": "string", "allowMultipleAllocations": "bool"}.get(f)
    if isinstance(node, c.Select | c.Index) and not getattr(node, "optional", False):
        inner = node.operand
        if isinstance(inner, c.Select | c.Index) and c._domain_map_kind(inner.operand, {}) == "attrs":
            return "dyn"
        if isinstance(inner, c.Select | c.Index) and c._domain_map_kind(inner.operand, {}) == "caps":
            return _QUANTITY_T
        return None
    if isinstance(node, c.ListLit):
        types = [_static_type(e) for e in node.elems]
        if not types or None in types or len(set(types)) != 1:
            return None
        return f"list({types[0]})"
    if isinstance(node, c.Unary):
        t = _static_type(node.operand)
        return "bool" if node.op == "!" else t if t in ("int", "double") else None
    if isinstance(node, c.Binary):
        if node.op in ("&&", "||", "==", "!=", "<", "<=", ">", ">=", "in"):
            return "bool"
        lt, rt = _static_type(node.left), _static_type(node.right)
        return lt if lt == rt and lt in ("int", "uint", "double", "string") else None
    if isinstance(node, c.Call) and node.target is None:
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
    from plugins.dra import cel as c

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, c.Call) and node.fn == "format":
            continue
        groups: list[list[Any]] = []
        if isinstance(node, c.ListLit):
            groups = [list(node.elems)]
        elif isinstance(node, c.MapLit):
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
                    raise c.CELCompileError(f"expected type '{first}' but found '{t}'")
        stack.extend(c._children(node))


def _is_quantity_value(node: Any) -> bool:
    """An expression whose value is a Kubernetes Quantity *value* (not the pointer add/sub return)."""
    from plugins.dra import cel as c

    if isinstance(node, c.Call):
        return node.target is None and node.fn == "quantity"
    return _static_type(node) == _QUANTITY_T


def _is_quantity_arith(node: Any) -> bool:
    from plugins.dra import cel as c

    return isinstance(node, c.Call) and node.target is not None and node.fn in ("add", "sub") and len(node.args) == 1


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
    from plugins.dra import cel as c

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, c.Call):
            t = node.target
            if t is None:
                ok = node.fn.startswith(PREFIX) or (node.fn in _KNOWN_GLOBAL and bool(node.args)) or c._is_has(node)
            elif isinstance(t, c.Ident) and not t.leading_dot and (t.name, node.fn) in _KNOWN_NAMESPACED:
                ok = True
            else:
                ok = node.fn in _KNOWN_MEMBER
            if not ok:
                raise c.CELCompileError(f"undeclared reference to '{node.fn}' (in container '')")
        stack.extend(c._children(node))


_OPTIONAL_CONSUMERS = frozenset(("orValue", "hasValue", "value", "or", "optMap", "optFlatMap"))


def check_reserved(tree: Any) -> None:
    """Names starting with ``__dra_`` belong to this translation: a selector may not call or name them."""
    from plugins.dra import cel as c

    stack = [tree]
    while stack:
        node = stack.pop()
        name = node.fn if isinstance(node, c.Call) else node.name if isinstance(node, c.Ident) else ""
        if name.startswith(PREFIX):
            raise c.CELCompileError(f"undeclared reference to '{name}' (in container '')")
        stack.extend(c._children(node))


def escaping_optional(tree: Any) -> bool:
    """Whether an optional value can end up inside a list, a map or a variable (anything but the direct
    receiver of ``orValue``/``value``/``hasValue``/``or``/``optMap``/``optFlatMap`` or of a further ``.?``)."""
    from plugins.dra import cel as c

    def produces(n: Any) -> bool:
        return (
            (isinstance(n, c.Select | c.Index) and n.optional)
            or (isinstance(n, c.Call) and isinstance(n.target, c.Ident) and n.target.name == "optional")
            or (isinstance(n, c.ListLit) and any(n.optional))
            or (isinstance(n, c.MapLit) and any(o for _, _, o in n.entries))
        )

    consumed: set[int] = set()
    stack = [tree]
    found = False
    while stack:
        node = stack.pop()
        if isinstance(node, c.Call) and node.fn in _OPTIONAL_CONSUMERS and node.target is not None:
            consumed.add(id(node.target))
        if isinstance(node, c.Select | c.Index) and node.optional:
            consumed.add(id(node.operand))
        if produces(node) and id(node) not in consumed:
            found = True
        stack.extend(c._children(node))
    return found


def uses_library_calls(tree: Any) -> bool:
    from plugins.dra import cel as c

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, c.Call) and node.fn.startswith(PREFIX):
            return True
        stack.extend(c._children(node))
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
    from plugins.dra import cel as c

    def has_short_circuit(node: Any) -> bool:
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, c.Call) and n.target is not None and n.fn in ("all", "exists", "exists_one", "existsOne"):
                return True
            stack.extend(c._children(n))
        return False

    def go(node: Any) -> Any:
        if isinstance(node, c.Call) and c._is_bind(node):
            var, init, body = node.args[0], go(node.args[1]), go(node.args[2])
            return c.Index(c.Call("map", (var, body), c.ListLit((init,), (False,))), c.Lit("int", "0", 0))
        return c._map_children(node, go)

    return go(tree) if always or has_short_circuit(tree) else tree


_HASHED_KINDS = frozenset(("int", "uint", "double", "string", "bool"))


def constant_membership(node: Any) -> bool:
    """``x in C`` where cel-go looks ``x`` up in a Go map (see :func:`in_constant`): ``C`` a non-empty list
    literal of bool/int/uint/double/string literals, or a map literal."""
    from plugins.dra import cel as c

    if not (isinstance(node, c.Binary) and node.op == "in"):
        return False
    right = node.right
    if isinstance(right, c.MapLit):
        return True
    return (
        isinstance(right, c.ListLit)
        and bool(right.elems)
        and not any(right.optional)
        and all(isinstance(e, c.Lit) and e.kind in _HASHED_KINDS for e in right.elems)
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
    from plugins.dra import cel as c

    counter = itertools.count()

    def static(node: Any, scope: Mapping[str, str]) -> str:
        try:
            return c._infer(node, scope)
        except c.CELCompileError:
            return "dyn"

    def is_kind(var: Any, kind: str) -> Any:
        return c.Binary("==", c.Call("type", (var,)), c.Ident(kind))

    def go(node: Any, scope: Mapping[str, str]) -> Any:
        if isinstance(node, c.Binary) and node.op in ("==", "!=") and static(node.left, scope) in _MAYBE_STRICT:
            a = c.Ident(f"{PREFIX}e{next(counter)}")
            b = node.right if isinstance(node.right, c.Lit) else c.Ident(f"{PREFIX}e{next(counter)}")
            native = c.Binary(node.op, a, b)
            # (dyn(): the checker may know a static type where _infer does not, e.g. `[1][0]`; the native
            # branch keeps the operands' types, so its compile errors stay)
            slow = c.Call(PREFIX + ("eq" if node.op == "==" else "ne"), (c.Call("dyn", (a,)), c.Call("dyn", (b,))))
            inner: Any = c.Cond(c.Binary("||", is_kind(a, "map"), is_kind(a, "list")), slow, native)
            if b is not node.right:
                inner = c.Call("bind", (b, go(node.right, scope), inner), c.Ident("cel"))
            return c.Call("bind", (a, go(node.left, scope), inner), c.Ident("cel"))
        if constant_membership(node) and static(node.left, scope) in ("dyn", "kubernetes.Semver"):
            a = c.Ident(f"{PREFIX}e{next(counter)}")
            right = go(node.right, scope)
            slow = c.Call(PREFIX + "in_constant", (c.Call("dyn", (a,)), right))
            test = is_kind(a, "map")
            if isinstance(node.right, c.MapLit):  # (cel-cpp has no `in` of a list in a map: false upstream)
                test = c.Binary("||", test, is_kind(a, "list"))
            choice = c.Cond(test, slow, c.Binary("in", a, right))
            return c.Call("bind", (a, go(node.left, scope), choice), c.Ident("cel"))
        if isinstance(node, c.Call) and c._is_bind(node):
            var = cast(Any, node.args[0])
            init = node.args[1]
            kind = c._domain_map_kind(init, scope) or static(init, scope)
            return c.Call(node.fn, (var, go(init, scope), go(node.args[2], {**scope, var.name: kind})), node.target)
        names = c._macro_vars(node) if isinstance(node, c.Call) else None
        if names is not None and node.target is not None:
            inner = {**scope, **dict.fromkeys(names, "dyn")}
            args = node.args[: len(names)] + tuple(go(x, inner) for x in node.args[len(names) :])
            return c.Call(node.fn, args, go(node.target, scope), node.leading_dot)
        return c._map_children(node, lambda ch: go(ch, scope))

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
    from plugins.dra import cel as c

    def go(node: Any) -> Any:
        if isinstance(node, c.Binary) and node.op in ("==", "!="):
            # CEL's heterogeneous equality (1 == 1.0, and false across types): celpy raises instead; cel-go's
            # library values fail against other types, != never fails (equal3)
            return c.Call(PREFIX + ("eq" if node.op == "==" else "ne"), (go(node.left), go(node.right)))
        if isinstance(node, c.Binary) and node.op == "in":
            # celpy's `in` compares with its own == (which raises across types)
            fn = "in_constant" if constant_membership(node) else "member"
            return c.Call(PREFIX + fn, (go(node.left), go(node.right)))
        if isinstance(node, c.Call) and c._is_has(node):
            sel = cast(Any, node.args[0])
            # celpy's has() is false when the operand itself fails; CEL propagates that error
            return c.Call(PREFIX + "has", (go(sel.operand), c.Lit("string", c._quote(sel.field), sel.field)))
        if isinstance(node, c.Call) and node.target is not None and len(node.args) == 2 and isinstance(
            node.args[0], c.Ident
        ):
            target, x, body = go(node.target), node.args[0], go(node.args[1])
            if node.fn == "map":
                return c.Call(PREFIX + "strict", (c.Call("map", (x, body), target),))
            if node.fn == "filter":
                return c.Call(PREFIX + "pick", (target, c.Call("map", (x, body), target)))
            if node.fn in ("exists_one", "existsOne"):
                return c.Call(PREFIX + "one", (c.Call("map", (x, body), target),))
            if node.fn in ("all", "exists"):
                return c.Call(PREFIX + node.fn, (c.Call("map", (x, body), target),))
        return c._map_children(node, go)

    return go(tree)


def _is_net(node: Any) -> bool:
    """``ip(...)``, ``cidr(...)``, ``x.masked()``, ``x.ip()`` (what ``string()`` may convert here)."""
    from plugins.dra import cel as c

    return isinstance(node, c.Call) and (
        (node.target is None and node.fn in ("ip", "cidr"))
        or (node.target is not None and node.fn in ("masked", "ip") and not node.args)
    )
