"""InterPodAffinity PreFilter/Filter, pure functions over the snapshot.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/interpodaffinity/filtering.go``, with the feature gate
InterPodAffinityHostnameFastPath at its 1.37 default (alpha, off): every term, hostname-scoped or not, goes
through the cluster-wide topology counts.

PreFilter computes three maps ``(topologyKey, value) -> count``:

* existing anti-affinity: for every pod with required anti-affinity (only the nodes listed in
  ``Snapshot.nodes_with_required_anti_affinity_pods``), each of its terms that matches the incoming pod (its
  namespace labels looked up for the term's namespace selector) counts once at the topology pair of the
  existing pod's node, when that node has the term's topology key;
* affinity: every existing pod (all nodes) that matches *all* the incoming pod's required affinity terms counts
  once per term at the pair of its node;
* anti-affinity: every existing pod counts once per incoming required anti-affinity term it matches.

The incoming pod's terms have their namespace selector unrolled into namespace names first. PreFilter returns
Skip when the incoming pod has no required terms and no existing pod's anti-affinity matches it.

Filter, for one node, in this order:

1. affinity: the node must have every term's topology key (else UnschedulableAndUnresolvable "node(s) didn't
   match pod affinity rules"), and every term's pair must have a count; otherwise the node passes only when no
   existing pod matches the terms anywhere (empty affinity map) and the pod matches all its own terms (the
   first pod of a group with affinity to itself);
2. anti-affinity: a term whose pair on this node has a count: Unschedulable "node(s) didn't match pod
   anti-affinity rules";
3. existing pods' anti-affinity: any of the node's label pairs with a count: Unschedulable "node(s) didn't
   satisfy existing pods anti-affinity rules".

Per-node contributions to the maps are cached on the (immutable) NodeInfo, keyed by what they depend on, so a
cycle only re-examines nodes that changed since an equal query (e.g. replicas of one Deployment).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.api.podaffinity import AffinityTerm, pod_affinity
from scheduler.framework.interface import Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

TopologyPair = tuple[str, str]
Counts = dict[TopologyPair, int]

NO_LABELS: Mapping[str, str] = {}

_MEMO = "InterPodAffinity"
_MEMO_LIMIT = 256

# Query keys -> small ints for the per-NodeInfo caches (hashing whole terms per node would cost more than the
# lookup saves). Shared by every plugin instance: a key's meaning does not depend on the instance. Ids are never
# reused, so clearing the table cannot make a stale cache entry look valid.
_ids: dict[Hashable, int] = {}
_counter = itertools.count(1)


def intern(key: Hashable) -> int:
    qid = _ids.get(key)
    if qid is None:
        if len(_ids) > 10_000:
            _ids.clear()
        qid = _ids[key] = next(_counter)
    return qid


def node_memo(node: NodeInfo) -> dict[Any, Any]:
    memo: dict[Any, Any] | None = node.memo.get(_MEMO)
    if memo is None or len(memo) > _MEMO_LIMIT:
        memo = node.memo[_MEMO] = {}
    return memo


def labels_key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def pod_matches_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """``podMatchesAllAffinityTerms`` (incoming pod's terms, namespace selectors already unrolled)."""
    if not terms:
        return False
    return all(t.matches(pod, NO_LABELS) for t in terms)


def pod_matches_any(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """``podMatchesAnyAffinityTerms``."""
    return any(t.matches(pod, NO_LABELS) for t in terms)


# --- per-node contributions ---------------------------------------------------------------------------------


def _existing_anti_pairs(node: NodeInfo, pod: Pod, ns_labels: Mapping[str, str]) -> tuple[TopologyPair, ...]:
    labels = node.node.labels
    out: list[TopologyPair] = []
    for existing in node.pods_with_required_anti_affinity:
        for t in pod_affinity(existing).required_anti_affinity:
            if t.matches(pod, ns_labels):
                v = labels.get(t.topology_key)
                if v is not None:
                    out.append((t.topology_key, v))
    return tuple(out)


def _incoming_pairs(
    node: NodeInfo, affinity: Sequence[AffinityTerm], anti: Sequence[AffinityTerm]
) -> tuple[tuple[TopologyPair, ...], tuple[TopologyPair, ...]]:
    labels = node.node.labels
    aff: list[TopologyPair] = []
    anti_out: list[TopologyPair] = []
    for existing in node.pod_list:
        if affinity and pod_matches_all(affinity, existing):
            for t in affinity:
                v = labels.get(t.topology_key)
                if v is not None:
                    aff.append((t.topology_key, v))
        for t in anti:
            if t.matches(existing, NO_LABELS):
                v = labels.get(t.topology_key)
                if v is not None:
                    anti_out.append((t.topology_key, v))
    return tuple(aff), tuple(anti_out)


def existing_anti_affinity_counts(
    nodes: Sequence[NodeInfo], pod: Pod, ns_labels: Mapping[str, str], identity: int
) -> Counts:
    """``getExistingAntiAffinityCounts`` over the nodes with pods with required anti-affinity; ``identity``
    interns (namespace, labels, namespace labels) of ``pod``, everything the result depends on."""
    counts: Counts = {}
    key = ("xa", identity)
    for node in nodes:
        memo = node_memo(node)
        pairs = memo.get(key)
        if pairs is None:
            pairs = memo[key] = _existing_anti_pairs(node, pod, ns_labels)
        for p in pairs:
            counts[p] = counts.get(p, 0) + 1
    return counts


def incoming_counts(
    nodes: Sequence[NodeInfo], affinity: Sequence[AffinityTerm], anti: Sequence[AffinityTerm]
) -> tuple[Counts, Counts]:
    """``getIncomingAffinityAntiAffinityCounts`` over every node."""
    aff_counts: Counts = {}
    anti_counts: Counts = {}
    if not affinity and not anti:
        return aff_counts, anti_counts
    key = ("in", intern((tuple(affinity), tuple(anti))))
    for node in nodes:
        if not node.pod_list:
            continue
        memo = node_memo(node)
        pairs = memo.get(key)
        if pairs is None:
            pairs = memo[key] = _incoming_pairs(node, affinity, anti)
        for p in pairs[0]:
            aff_counts[p] = aff_counts.get(p, 0) + 1
        for p in pairs[1]:
            anti_counts[p] = anti_counts.get(p, 0) + 1
    return aff_counts, anti_counts


# --- filter -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class FilterState:
    """``preFilterState``: the incoming pod, its terms (namespace selectors unrolled) and the three maps."""

    pod: Pod
    ns_labels: Mapping[str, str]
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    affinity_counts: Counts = field(default_factory=dict)
    anti_affinity_counts: Counts = field(default_factory=dict)
    existing_anti_affinity_counts: Counts = field(default_factory=dict)
    matches_own_affinity: bool = False

    @property
    def nothing_to_check(self) -> bool:
        """PreFilter's Skip condition."""
        return not self.existing_anti_affinity_counts and not self.affinity and not self.anti_affinity

    def clone(self) -> FilterState:
        return FilterState(
            self.pod,
            self.ns_labels,
            self.affinity,
            self.anti_affinity,
            dict(self.affinity_counts),
            dict(self.anti_affinity_counts),
            dict(self.existing_anti_affinity_counts),
            self.matches_own_affinity,
        )

    def update_with_pod(self, existing: Pod, node: NodeInfo, multiplier: int) -> None:
        """``preFilterState.updateWithPod``: account for ``existing`` added to (+1) or removed from (-1)
        ``node`` (PreFilterExtensions AddPod/RemovePod, used by preemption's dry run)."""
        labels = node.node.labels

        def update(counts: Counts, key: str) -> None:
            v = labels.get(key)
            if v is None:
                return
            n = counts.get((key, v), 0) + multiplier
            if n == 0:
                counts.pop((key, v), None)
            else:
                counts[(key, v)] = n

        for t in pod_affinity(existing).required_anti_affinity:
            if t.matches(self.pod, self.ns_labels):
                update(self.existing_anti_affinity_counts, t.topology_key)
        if pod_matches_all(self.affinity, existing):
            for t in self.affinity:
                update(self.affinity_counts, t.topology_key)
        for t in self.anti_affinity:
            if t.matches(existing, NO_LABELS):
                update(self.anti_affinity_counts, t.topology_key)


def satisfies_affinity(s: FilterState, labels: Mapping[str, str]) -> bool:
    """``nodeTopologyMatchesAffinity`` + ``satisfiesSelfAffinityCheck``."""
    if not s.affinity:
        return True
    pods_exist = True
    for t in s.affinity:
        v = labels.get(t.topology_key)
        if v is None:
            return False  # every topology key must be on the node, also for self-affinity
        if s.affinity_counts.get((t.topology_key, v), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    return not s.affinity_counts and s.matches_own_affinity


def satisfies_anti_affinity(s: FilterState, labels: Mapping[str, str]) -> bool:
    """``satisfyPodAntiAffinity``."""
    if s.anti_affinity_counts:
        for t in s.anti_affinity:
            v = labels.get(t.topology_key)
            if v is not None and s.anti_affinity_counts.get((t.topology_key, v), 0) > 0:
                return False
    return True


def satisfies_existing_anti_affinity(s: FilterState, labels: Mapping[str, str]) -> bool:
    """``satisfyExistingPodsAntiAffinity``."""
    counts = s.existing_anti_affinity_counts
    if counts:
        if len(labels) <= len(counts):
            return not any(counts.get(p, 0) > 0 for p in labels.items())
        return not any(n > 0 and labels.get(k) == v for (k, v), n in counts.items())
    return True


def filter_node(s: FilterState, node: NodeInfo) -> Status:
    labels = node.node.labels
    if not satisfies_affinity(s, labels):
        return Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
    if not satisfies_anti_affinity(s, labels):
        return Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
    if not satisfies_existing_anti_affinity(s, labels):
        return Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
    return Status.ok()
