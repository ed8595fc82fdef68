"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take only pods that tolerate it.

kube-scheduler (``pkg/scheduler/framework/plugins/nodeunschedulable``): Filter rejects a node with
``spec.unschedulable: true`` unless the pod tolerates the taint
``node.kubernetes.io/unschedulable:NoSchedule``; the status is UnschedulableAndUnresolvable
``node(s) were unschedulable``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.framework.interface import CycleState, Status
from scheduler.framework.registry import PluginSpec, no_args
from scheduler.model import Taint

if TYPE_CHECKING:
    from scheduler.cache import NodeInfo
    from scheduler.model import Pod

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


class NodeUnschedulable:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not node.node.unschedulable:
            return Status.ok()
        if any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return Status.ok()
        return Status.unresolvable(ERR_REASON_UNSCHEDULABLE)

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return pod.tolerations

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # Node uncordoned or added; the pod's tolerations updated.
        return (("Node", "Add"), ("Node", "Update"), ("Pod", "Update"))


SPEC = PluginSpec(
    name=NAME,
    factory=NodeUnschedulable,
    points=frozenset({"filter"}),
    validate_args=no_args,
)

__all__ = ["ERR_REASON_UNSCHEDULABLE", "NAME", "SPEC", "TAINT_NODE_UNSCHEDULABLE", "NodeUnschedulable"]
