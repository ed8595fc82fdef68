"""SchedulingGates: keeps pods with ``spec.schedulingGates`` out of the active queue.

kube-scheduler (``pkg/scheduler/framework/plugins/schedulinggates``): PreEnqueue returns
UnschedulableAndUnresolvable with ``waiting for scheduling gates: [a b]`` (Go's ``%v`` of the gate
names) while any gate is present; a pod update that removes the gates requeues the pod
(QueueingHint ``isSchedulableAfterUpdatePodSchedulingGatesEliminated``: another pod's update never does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import Code, QueueingHint, QueueingHintFn, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import Snapshot

NAME = "SchedulingGates"


class SchedulingGates:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def pre_enqueue(self, snapshot: Snapshot, pod: Pod) -> Status:
        if not pod.scheduling_gates:
            return Status.ok()
        gates = " ".join(pod.scheduling_gates)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"waiting for scheduling gates: [{gates}]",))

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (("Pod", "Update"),)

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {("Pod", "Update"): self.hint_pod_update}

    def hint_pod_update(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterUpdatePodSchedulingGatesEliminated`` (scheduling_gates.go): queue only when
        the update is the waiting pod's own and leaves it without gates."""
        del old
        if new is None or new.uid != pod.uid or new.scheduling_gates:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


SPEC = PluginSpec(
    name=NAME,
    factory=SchedulingGates,
    points=frozenset({"preEnqueue"}),
    validate_args=no_args,
)

__all__ = ["NAME", "SPEC", "SchedulingGates"]
