"""PodTopologySpread PreFilter/Filter: the hard (``DoNotSchedule``) constraints.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/podtopologyspread/filtering.go``:

* PreFilter counts, per constraint and topology domain (value of the topology key), the pods matching the
  constraint's selector on every node of the snapshot that has all the constraints' topology keys and
  passes the constraint's node inclusion policies. No hard constraint: Skip.
* Filter, per constraint: a node without the topology key is UnschedulableAndUnresolvable
  ``node(s) didn't match pod topology spread constraints (missing required label)``; otherwise
  ``matching pods in the node's domain + 1 if the pod matches its own selector - global minimum`` must not
  exceed ``maxSkew``, else Unschedulable ``node(s) didn't match pod topology spread constraints``. The
  global minimum is the smallest count over the eligible domains, or 0 when there are fewer eligible
  domains than ``minDomains``.
* AddPod/RemovePod (the preemption dry run) adjust the counts for a pod added to / removed from a node.

Upstream keeps only the two smallest domains ("critical paths") so AddPod/RemovePod stay O(1); here the
minimum is recomputed from the counts when they change, which gives the same global minimum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plugins.podtopologyspread.common import (
    Constraint,
    NodeInclusion,
    count_matching,
    node_has_keys,
)
from scheduler.framework.interface import Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"


@dataclass(slots=True)
class PreFilterState:
    constraints: tuple[Constraint, ...]
    # Per constraint: topology value -> number of matching pods in that domain (eligible domains only).
    counts: list[dict[str, int]] = field(default_factory=list)
    _mins: list[int] | None = None

    def min_match(self, i: int) -> int:
        """The global minimum of constraint ``i``, taking minDomains into account."""
        if self._mins is None:
            mins = []
            for c, d in zip(self.constraints, self.counts, strict=True):
                mins.append(0 if len(d) < c.min_domains or not d else min(d.values()))
            self._mins = mins
        return self._mins[i]

    def clone(self) -> PreFilterState:
        return PreFilterState(self.constraints, [dict(d) for d in self.counts], None)

    def update_with_pod(self, updated: Pod, preemptor: Pod, node: NodeInfo, delta: int) -> None:
        """upstream ``updateWithPod``: ``updated`` is added to (+1) or removed from (-1) ``node``."""
        if updated.namespace != preemptor.namespace:
            return
        labels = node.node.labels
        if not node_has_keys(labels, self.constraints):
            return
        inclusion = NodeInclusion(preemptor)
        for i, c in enumerate(self.constraints):
            if not c.selector.matches(updated.meta.labels) or not inclusion.matches(c, node):
                continue
            v = labels[c.topology_key]
            self.counts[i][v] = self.counts[i].get(v, 0) + delta
        self._mins = None


def compute_pre_filter_state(
    pod: Pod, constraints: tuple[Constraint, ...], nodes: Sequence[NodeInfo]
) -> PreFilterState:
    """upstream ``calPreFilterState`` over all the snapshot's nodes."""
    s = PreFilterState(constraints, [{} for _ in constraints])
    if not constraints:
        return s
    inclusion = NodeInclusion(pod)
    ns = pod.namespace
    for node in nodes:
        labels = node.node.labels
        if not node_has_keys(labels, constraints):
            continue
        for i, c in enumerate(constraints):
            if not inclusion.matches(c, node):
                continue
            v = labels[c.topology_key]
            d = s.counts[i]
            d[v] = d.get(v, 0) + count_matching(node, c.selector, ns)
    return s


def filter_node(s: PreFilterState, pod: Pod, node: NodeInfo) -> Status:
    labels = node.node.labels
    pod_labels = pod.meta.labels
    for i, c in enumerate(s.constraints):
        v = labels.get(c.topology_key)
        if v is None:
            return Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
        self_match = 1 if c.selector.matches(pod_labels) else 0
        skew = s.counts[i].get(v, 0) + self_match - s.min_match(i)
        if skew > c.max_skew:
            return Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
    return Status.ok()
