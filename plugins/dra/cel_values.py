"""The values of Kubernetes' CEL libraries as both engines hand them to Python (engine neutral).

``net.IP``, ``net.CIDR`` and ``kubernetes.URL`` (:class:`IPValue`, :class:`CIDRValue`, :class:`URLValue`, made by
the library functions of :mod:`plugins.dra.cel_lib`), a library value that reached Python as a tagged map on
cel-expr-python (:class:`Opaque`: Quantity, Semver, ...) and a CEL type value (:class:`TypeValue`). The formatter
(:mod:`plugins.dra.cel_format`) and the library's equality read them; nothing here imports the rest.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["CIDRValue", "IPValue", "Opaque", "TypeValue", "URLValue"]


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


class Opaque:
    """A Kubernetes library value handed to Python as a tagged map on cel-expr-python (Quantity, Semver, IP,
    ...): its CEL type name and its normalised tag (equal tags: equal values). ``%s`` cannot format it."""

    __slots__ = ("key", "type_name")

    def __init__(self, type_name: str, key: object = None) -> None:
        self.type_name = type_name
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.type_name, self.key) == (other.type_name, other.key)

    def __hash__(self) -> int:
        return hash((self.type_name, self.key))


class TypeValue:
    """A CEL type value (``type(1)``): ``%s`` prints its name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
