"""TaintToleration: node taints against pod tolerations.

kube-scheduler (``pkg/scheduler/framework/plugins/tainttoleration``):

* Filter: the first taint with effect ``NoSchedule`` or ``NoExecute`` that no toleration of the pod
  tolerates rejects the node, UnschedulableAndUnresolvable
  ``node(s) had untolerated taint(s)`` (1.37.2 taint_toleration.go; older releases named the taint).
* PreScore keeps the pod's tolerations whose effect is empty or ``PreferNoSchedule``; Score counts the
  node's ``PreferNoSchedule`` taints those tolerations do not tolerate; NormalizeScore is
  ``DefaultNormalizeScore(MaxNodeScore, reverse=true)``: fewer intolerable taints score higher,
  a node with the most scores 0, and all nodes score 100 when no node has any.
* QueueingHints: a node added or updated queues the pod only when the node had an untolerated
  NoSchedule/NoExecute taint (or is new) and has none now (``isSchedulableAfterNodeChange``); a pod update only
  when it is the waiting pod's own and its tolerations changed (``isSchedulableAfterPodTolerationChange``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.api.model import Taint, Toleration
from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.helpers import default_normalize_score, max_normalized
from scheduler.framework.interface import MAX_NODE_SCORE, CycleState, NodeScore, QueueingHint, QueueingHintFn, Status

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo

NAME = "TaintToleration"
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_PRE_SCORE_KEY = "PreScore" + NAME

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def find_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint not tolerated (``FindMatchingUntoleratedTaint`` with
    ``DoNotScheduleTaintsFilterFunc``), or None."""
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(taint, tolerations):
            return taint
    return None


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """``getAllTolerationPreferNoSchedule``: tolerations with an empty or PreferNoSchedule effect."""
    return tuple(t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE))


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(t, tolerations))


class TaintToleration:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        taint = find_untolerated_taint(node.node.taints, pod.tolerations)
        if taint is None:
            return Status.ok()
        return Status.unresolvable(ERR_REASON_UNTOLERATED)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_PRE_SCORE_KEY, prefer_no_schedule_tolerations(pod.tolerations))
        return Status.ok()

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        tols = state.read(_PRE_SCORE_KEY)
        if tols is None:
            tols = prefer_no_schedule_tolerations(pod.tolerations)
        return count_intolerable_prefer_no_schedule(node.node.taints, tols)

    @max_normalized(reverse=True)
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return Status.ok()

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return pod.tolerations

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # A node added or its taints changed; the pod's tolerations changed.
        return (("Node", "Add"), ("Node", "Update"), ("Pod", "Update"))

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {
            ("Node", "Add"): self.hint_node_change,
            ("Node", "Update"): self.hint_node_change,
            ("Pod", "Update"): self.hint_pod_update,
        }

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeChange`` (taint_toleration.go): queue when the node was untolerated (or
        did not exist) and is tolerated now; skip otherwise."""
        if new is None:
            return QueueingHint.SKIP
        was_untolerated = old is None or find_untolerated_taint(old.taints, pod.tolerations) is not None
        is_untolerated = find_untolerated_taint(new.taints, pod.tolerations) is not None
        return QueueingHint.QUEUE if was_untolerated and not is_untolerated else QueueingHint.SKIP

    def hint_pod_update(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterPodTolerationChange`` (taint_toleration.go): the waiting pod's own update that
        changed its tolerations (they can only be added) → queue; any other pod's update → skip."""
        if new is None or old is None or new.uid != pod.uid:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if old.tolerations != new.tolerations else QueueingHint.SKIP


SPEC = PluginSpec(
    name=NAME,
    factory=TaintToleration,
    points=frozenset({"filter", "preScore", "score"}),
    validate_args=no_args,
)

__all__ = [
    "NAME",
    "SPEC",
    "TaintToleration",
    "count_intolerable_prefer_no_schedule",
    "default_normalize_score",
    "find_untolerated_taint",
]
