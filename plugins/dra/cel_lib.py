"""The library functions of Kubernetes' DRA CEL environment that neither engine provides, in plain Python.

Plain Python values in and out (lists are lists, maps dicts; IP, CIDR and URL values are those of
:mod:`plugins.dra.cel_values`): ``ext.Lists`` v3 and Kubernetes' lists library, ``ext.Sets``, the IP, CIDR and URL
libraries, CEL's equality and membership with the library types' ``Equal`` (:func:`equal3`), the constant-literal
membership that panics upstream (:func:`in_constant`, :data:`PANIC`) and ``string.format``
(:mod:`plugins.dra.cel_format`). :data:`FUNCTIONS` is the table both engines register under ``__dra_<name>``
(:data:`PREFIX`); :mod:`plugins.dra.cel_ext` rewrites the syntax tree to call them. A failure raises
:class:`CELValueError`, which becomes a CEL runtime error.
"""

from __future__ import annotations

import ipaddress
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from plugins.dra.cel_format import FormatError, type_name
from plugins.dra.cel_format import string_format as string_format_v1
from plugins.dra.cel_values import CIDRValue, IPValue, Opaque, URLValue

__all__ = ["FUNCTIONS", "PANIC", "PREFIX", "CELValueError", "Fn", "cel_equal", "equal3"]

PREFIX = "__dra_"


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


def _comparable(items: Sequence[Any], fn: str) -> None:
    kinds = {type_name(x) for x in items}
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
    kinds = {type_name(x) for x in items}
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

    try:
        return string_format_v1(fmt, args)
    except FormatError as e:
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
