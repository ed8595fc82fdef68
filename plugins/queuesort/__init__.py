"""PrioritySort: the default QueueSort plugin.

kube-scheduler (``pkg/scheduler/framework/plugins/queuesort/priority_sort.go``): a pod with a higher
``spec.priority`` goes first; among equal priorities, the one added to the queue earlier goes first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)


SPEC = PluginSpec(
    name=NAME,
    factory=PrioritySort,
    points=frozenset({"queueSort"}),
    validate_args=no_args,
)

__all__ = ["NAME", "SPEC", "PrioritySort"]
