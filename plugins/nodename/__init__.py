"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node.

kube-scheduler (``pkg/scheduler/framework/plugins/nodename``): Filter returns
UnschedulableAndUnresolvable ``node(s) didn't match the requested node name`` when ``spec.nodeName``
is set and differs from the node. Pending pods normally have no ``nodeName``; the check is kept for
fidelity. QueueingHint (``isSchedulableAfterNodeAdd``): an added node the pod may go to; with queueing hints
upstream registers Node/Add only, so a node update never queues.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, QueueingHint, QueueingHintFn, Status

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo

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

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {("Node", "Add"): self.hint_node_change, ("Node", "Update"): self.hint_node_change}

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeAdd`` (node_name.go): an added node that ``fits`` the pod → queue; an
        update (not registered upstream with hints on) → skip."""
        if old is not None or new is None:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if fits(pod, new.name) else QueueingHint.SKIP


SPEC = PluginSpec(
    name=NAME,
    factory=NodeName,
    points=frozenset({"filter"}),
    validate_args=no_args,
)

__all__ = ["ERR_REASON", "NAME", "SPEC", "NodeName", "fits"]
