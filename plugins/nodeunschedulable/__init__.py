"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take only pods that tolerate it.

kube-scheduler (``pkg/scheduler/framework/plugins/nodeunschedulable``): Filter rejects a node with
``spec.unschedulable: true`` unless the pod tolerates the taint
``node.kubernetes.io/unschedulable:NoSchedule``; the status is UnschedulableAndUnresolvable
``node(s) were unschedulable``.

QueueingHints: a node added schedulable, or updated from unschedulable to schedulable
(``isSchedulableAfterNodeChange``); the waiting pod's own update that makes it tolerate the
``node.kubernetes.io/unschedulable`` taint (``isSchedulableAfterPodTolerationChange``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.api.model import Taint
from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, QueueingHint, QueueingHintFn, Status

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo

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

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {
            ("Node", "Add"): self.hint_node_change,
            ("Node", "Update"): self.hint_node_change,
            ("Pod", "Update"): self.hint_pod_update,
        }

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeChange`` (node_unschedulable.go): queue for a node added schedulable or
        updated from unschedulable to schedulable; skip otherwise."""
        del pod
        if new is None or new.unschedulable:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if old is None or old.unschedulable else QueueingHint.SKIP

    def hint_pod_update(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterPodTolerationChange`` (node_unschedulable.go): the waiting pod's own update
        that tolerates the unschedulable taint → queue; anything else → skip."""
        del old
        if new is None or new.uid != pod.uid:
            return QueueingHint.SKIP
        if any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in new.tolerations):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


SPEC = PluginSpec(
    name=NAME,
    factory=NodeUnschedulable,
    points=frozenset({"filter"}),
    validate_args=no_args,
)

__all__ = ["ERR_REASON_UNSCHEDULABLE", "NAME", "SPEC", "TAINT_NODE_UNSCHEDULABLE", "NodeUnschedulable"]
