"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node.

kube-scheduler (``pkg/scheduler/framework/plugins/nodename``): Filter returns
UnschedulableAndUnresolvable ``node(s) didn't match the requested node name`` when ``spec.nodeName``
is set and differs from the node. Pending pods normally have no ``nodeName``; the check is kept for
fidelity.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.framework.interface import CycleState, Status
from scheduler.framework.registry import PluginSpec, no_args

if TYPE_CHECKING:
    from scheduler.cache import NodeInfo
    from scheduler.model import Pod

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Pod, node_name: str) -> bool:
    return not pod.node_name or pod.node_name == node_name


class NodeName:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if fits(pod, node.name):
            return Status.ok()
        return Status.unresolvable(ERR_REASON)

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return str((pod.raw.get("spec") or {}).get("nodeName") or "")

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (("Node", "Add"), ("Node", "Update"))


SPEC = PluginSpec(
    name=NAME,
    factory=NodeName,
    points=frozenset({"filter"}),
    validate_args=no_args,
)

__all__ = ["ERR_REASON", "NAME", "SPEC", "NodeName", "fits"]
