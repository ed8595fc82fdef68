"""InterPodAffinity PreScore/Score/NormalizeScore, pure functions over the snapshot.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/interpodaffinity/scoring.go``:

* PreScore builds ``topologyKey -> value -> score`` from every existing pod (every pod of every node when the
  incoming pod has preferred terms; otherwise only the pods with (anti-)affinity, on the nodes listed in
  ``Snapshot.nodes_with_affinity_pods``). For an existing pod on a node with labels:

  - each preferred affinity term of the incoming pod that matches it adds the term's weight at its node's
    value of the topology key, each preferred anti-affinity term subtracts it (incoming terms: namespace
    selectors unrolled);
  - each *required* affinity term of the existing pod that matches the incoming pod adds
    ``hardPodAffinityWeight`` (when > 0);
  - each preferred affinity / anti-affinity term of the existing pod that matches the incoming pod adds /
    subtracts its weight (existing terms: the incoming pod's namespace labels are matched).

  Contributions only count where the existing pod's node has the topology key. Skip when the incoming pod
  has no preferred terms and ``ignorePreferredTermsOfExistingPods`` is set, or when nothing contributed.
* Score of a node: the sum, over the map's topology keys the node has, of the value at the node's label.
  Raw scores may be negative.
* NormalizeScore: min-max over the scored nodes to 0..100 (``int64(100 * (s - min) / (max - min))``), all 0
  when max == min.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from plugins.interpodaffinity.filtering import NO_LABELS, intern, node_memo
from scheduler.api.podaffinity import WeightedAffinityTerm, pod_affinity
from scheduler.framework.interface import MAX_NODE_SCORE, NodeScore

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

TopologyScore = dict[str, dict[str, int]]
Contribution = tuple[str, str, int]


def _contributions(
    node: NodeInfo,
    pod: Pod,
    ns_labels: Mapping[str, str],
    preferred: Sequence[WeightedAffinityTerm],
    preferred_anti: Sequence[WeightedAffinityTerm],
    all_pods: bool,
    hard_weight: int,
) -> tuple[Contribution, ...]:
    """``processExistingPod`` for every pod to process on ``node``."""
    labels = node.node.labels
    if not labels:
        return ()
    out: list[Contribution] = []

    def add(key: str, weight: int) -> None:
        v = labels.get(key)
        if v is not None:
            out.append((key, v, weight))

    for existing in node.pod_list if all_pods else node.pods_with_affinity:
        for w in preferred:
            if w.term.matches(existing, NO_LABELS):
                add(w.term.topology_key, w.weight)
        for w in preferred_anti:
            if w.term.matches(existing, NO_LABELS):
                add(w.term.topology_key, -w.weight)
        info = pod_affinity(existing)
        if hard_weight > 0:
            for t in info.required_affinity:
                if t.matches(pod, ns_labels):
                    add(t.topology_key, hard_weight)
        for w in info.preferred_affinity:
            if w.term.matches(pod, ns_labels):
                add(w.term.topology_key, w.weight)
        for w in info.preferred_anti_affinity:
            if w.term.matches(pod, ns_labels):
                add(w.term.topology_key, -w.weight)
    return tuple(out)


def topology_score(
    nodes: Sequence[NodeInfo],
    pod: Pod,
    ns_labels: Mapping[str, str],
    identity: int,
    preferred: Sequence[WeightedAffinityTerm],
    preferred_anti: Sequence[WeightedAffinityTerm],
    hard_weight: int,
) -> TopologyScore | None:
    """PreScore's map, or None when no term contributed anywhere (PreScore then returns Skip).

    ``identity`` interns (namespace, labels, namespace labels) of ``pod``; ``preferred`` / ``preferred_anti``
    are the incoming pod's terms with namespace selectors unrolled. With preferred terms every pod of
    every node in ``nodes`` is processed, otherwise only the pods with (anti-)affinity."""
    all_pods = bool(preferred or preferred_anti)
    key = ("sc", intern((tuple(preferred), tuple(preferred_anti), identity, hard_weight)))
    scores: TopologyScore = {}
    touched = False
    for node in nodes:
        if not node.pod_list:
            continue
        memo = node_memo(node)
        contrib = memo.get(key)
        if contrib is None:
            contrib = memo[key] = _contributions(node, pod, ns_labels, preferred, preferred_anti, all_pods, hard_weight)
        for k, v, w in contrib:
            touched = True
            by_value = scores.get(k)
            if by_value is None:
                by_value = scores[k] = {}
            by_value[v] = by_value.get(v, 0) + w
    return scores if touched else None


def node_score(scores: TopologyScore, labels: Mapping[str, str]) -> int:
    total = 0
    for key, by_value in scores.items():
        v = labels.get(key)
        if v is not None:
            total += by_value.get(v, 0)
    return total


def normalize(scores: list[NodeScore]) -> None:
    """InterPodAffinity's NormalizeScore (min-max, in place)."""
    if not scores:
        return
    lo = min(s.score for s in scores)
    hi = max(s.score for s in scores)
    diff = hi - lo
    for s in scores:
        s.score = int(float(MAX_NODE_SCORE) * ((s.score - lo) / diff)) if diff > 0 else 0
