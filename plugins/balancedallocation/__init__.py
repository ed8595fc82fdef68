"""NodeResourcesBalancedAllocation: placeholder (being implemented; no extension points yet)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from scheduler.framework.registry import PluginSpec

NAME = "NodeResourcesBalancedAllocation"


class _Placeholder:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = dict(args or {})


SPEC = PluginSpec(name=NAME, factory=_Placeholder, points=frozenset())
