"""PodTopologySpread PreScore/Score/NormalizeScore: the soft (``ScheduleAnyway``) constraints.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/podtopologyspread/scoring.go``:

* PreScore: Skip when the snapshot has no node or the pod has no soft constraint (its own, or the default
  ones when it has no constraint at all). Among the nodes that passed Filter, those missing a topology key
  are ignored (score 0) — except with the system default constraints, where a node without a zone label
  still takes part (its zone is the empty value). The domains of the remaining candidates are counted over
  all the snapshot's nodes that pass the node inclusion policies (hostname domains are counted per node in
  Score). Each constraint gets the weight ``log(number of candidate domains + 2)`` (for the hostname key:
  the number of candidate nodes).
* Score: sum over constraints of ``matching pods in the node's domain * weight + maxSkew - 1``, rounded
  half away from zero.
* NormalizeScore: ignored nodes 0; otherwise ``100 * (max + min - score) / max`` (integer division),
  100 for every node when the highest raw score is 0. Fewer matching pods score higher.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plugins.podtopologyspread.common import (
    LABEL_HOSTNAME,
    Constraint,
    NodeInclusion,
    count_matching,
    node_has_keys,
)
from scheduler.framework.interface import MAX_NODE_SCORE, NodeScore

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo


@dataclass(slots=True)
class PreScoreState:
    constraints: tuple[Constraint, ...]
    ignored_nodes: set[str] = field(default_factory=set)
    # Per constraint: topology value -> matching pods (hostname constraints: empty, counted in Score).
    counts: list[dict[str, int]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)


def topology_normalizing_weight(size: int) -> float:
    return math.log(size + 2)


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    return count * weight + (max_skew - 1)


def go_round(x: float) -> int:
    """Go ``math.Round``: half away from zero."""
    r = math.floor(abs(x))
    if abs(x) - r >= 0.5:
        r += 1
    return int(r) if x >= 0 else -int(r)


def compute_pre_score_state(
    pod: Pod,
    constraints: tuple[Constraint, ...],
    filtered: Sequence[NodeInfo],
    all_nodes: Sequence[NodeInfo],
    require_all_topologies: bool,
) -> PreScoreState:
    s = PreScoreState(constraints, set(), [{} for _ in constraints], [])
    topo_size = [0] * len(constraints)
    for node in filtered:
        labels = node.node.labels
        if require_all_topologies and not node_has_keys(labels, constraints):
            s.ignored_nodes.add(node.name)
            continue
        for i, c in enumerate(constraints):
            if c.topology_key == LABEL_HOSTNAME:
                continue
            v = labels.get(c.topology_key, "")
            if v not in s.counts[i]:
                s.counts[i][v] = 0
                topo_size[i] += 1
    for i, c in enumerate(constraints):
        size = topo_size[i]
        if c.topology_key == LABEL_HOSTNAME:
            size = len(filtered) - len(s.ignored_nodes)
        s.weights.append(topology_normalizing_weight(size))

    inclusion = NodeInclusion(pod)
    ns = pod.namespace
    for node in all_nodes:
        labels = node.node.labels
        if require_all_topologies and not node_has_keys(labels, constraints):
            continue
        for i, c in enumerate(constraints):
            if not inclusion.matches(c, node):
                continue
            d = s.counts[i]
            v = labels.get(c.topology_key, "")
            if v not in d:  # not a candidate domain (hostname domains are counted in Score)
                continue
            d[v] += count_matching(node, c.selector, ns)
    return s


def score_node(s: PreScoreState, pod: Pod, node: NodeInfo) -> int:
    if node.name in s.ignored_nodes:
        return 0
    labels = node.node.labels
    total = 0.0
    for i, c in enumerate(s.constraints):
        v = labels.get(c.topology_key)
        if v is None:
            continue
        if c.topology_key == LABEL_HOSTNAME:
            cnt = count_matching(node, c.selector, pod.namespace)
        else:
            cnt = s.counts[i].get(v, 0)
        total += score_for_count(cnt, c.max_skew, s.weights[i])
    return go_round(total)


def normalize(s: PreScoreState, scores: list[NodeScore]) -> None:
    lo: int | None = None
    hi = 0
    for ns in scores:
        if ns.name in s.ignored_nodes:
            continue
        lo = ns.score if lo is None else min(lo, ns.score)
        hi = max(hi, ns.score)
    lo = lo or 0
    for ns in scores:
        if ns.name in s.ignored_nodes:
            ns.score = 0
        elif hi == 0:
            ns.score = MAX_NODE_SCORE
        else:
            ns.score = MAX_NODE_SCORE * (hi + lo - ns.score) // hi
