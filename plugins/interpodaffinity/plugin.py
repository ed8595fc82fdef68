"""The InterPodAffinity plugin (kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/interpodaffinity``).

See :mod:`plugins.interpodaffinity.filtering` and :mod:`plugins.interpodaffinity.scoring` for the semantics.

Reuse between equal pods (upstream ``SignPod``): a pod with pod affinity or anti-affinity cannot be signed,
since its Filter and Score depend on pods on other nodes. A pod without terms depends on other nodes only
through the pods that have (anti-)affinity: its signature is its namespace, labels and namespace labels plus
a token of ``Snapshot.nodes_with_affinity_pods`` (a new token whenever any NodeInfo in that list is replaced,
i.e. whenever such a pod or its node changed), or a constant when no pod in the cluster has any
(anti-)affinity (nothing can then depend on another node).

QueueingHints (upstream ``isSchedulableAfterPodChange`` / ``isSchedulableAfterNodeChange``): an assigned pod
added that matches all of the waiting pod's affinity terms; relabelled into matching them, or out of matching all
its anti-affinity terms; deleted while matching all its anti-affinity terms; a node added or relabelled that has
one of its terms' topology keys. Deliberately wider than upstream, for the pods rejected by an *existing* pod's
required anti-affinity (which upstream's hints never queue, leaving them to the 5-minute flush that ``simulate``
does not have): the deletion or relabelling of an assigned pod with required anti-affinity terms queues, and so
does any node added or relabelled when the waiting pod has no required terms of its own.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from plugins.interpodaffinity.filtering import (
    NO_LABELS,
    FilterState,
    existing_anti_affinity_counts,
    filter_node,
    incoming_counts,
    intern,
    labels_key,
    pod_matches_all,
)
from plugins.interpodaffinity.scoring import TopologyScore, node_score, normalize, topology_score
from scheduler.api.podaffinity import AffinityTerm, WeightedAffinityTerm, namespace_labels, pod_affinity
from scheduler.framework.interface import (
    Code,
    CycleState,
    NodeScore,
    PreFilterResult,
    QueueingHint,
    QueueingHintFn,
    Status,
)

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo, Snapshot

NAME = "InterPodAffinity"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1


def _identity(pod: Pod, ns_labels: Mapping[str, str]) -> int:
    """Everything of the incoming pod that existing pods' terms read: namespace, labels, namespace labels."""
    return intern((pod.namespace, labels_key(pod.meta.labels), labels_key(ns_labels)))


class InterPodAffinity:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        w = args.get("hardPodAffinityWeight")
        self.hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT if w is None else int(w)
        self.ignore_preferred_terms_of_existing_pods = bool(args.get("ignorePreferredTermsOfExistingPods", False))
        self._world: tuple[NodeInfo, ...] = ()
        self._world_token = 0

    # --- filtering ---------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        info = pod_affinity(pod)
        if info.error is not None:
            return None, Status.unresolvable(f"parsing pod: {info.error}")
        snap = state.snapshot
        namespaces = snap.namespaces
        affinity = tuple(t.with_namespaces(namespaces) for t in info.required_affinity)
        anti = tuple(t.with_namespaces(namespaces) for t in info.required_anti_affinity)
        ns_labels = namespace_labels(namespaces, pod.namespace)
        s = FilterState(pod, ns_labels, affinity, anti)
        anti_nodes = snap.nodes_with_required_anti_affinity_pods
        if anti_nodes:
            s.existing_anti_affinity_counts = existing_anti_affinity_counts(
                anti_nodes, pod, ns_labels, _identity(pod, ns_labels)
            )
        if s.nothing_to_check:
            return None, Status.skip()
        s.affinity_counts, s.anti_affinity_counts = incoming_counts(snap.nodes, affinity, anti)
        s.matches_own_affinity = pod_matches_all(affinity, pod)
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s: FilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            # PreFilter did not run for this state (upstream: an error); compute it now.
            _, st = self.pre_filter(state, pod)
            if st.code == Code.SKIP:
                return Status.ok()
            if not st.is_success:
                return st
            s = state.read(PRE_FILTER_STATE_KEY)
            assert s is not None
        return filter_node(s, node)

    # --- PreFilterExtensions (preemption's dry run, on a copy of the state) ------------------------------

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo) -> Status:
        s: FilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_add, node, 1)
        return Status.ok()

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status:
        s: FilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_remove, node, -1)
        return Status.ok()

    # --- scoring -----------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        info = pod_affinity(pod)
        if info.error is not None:
            return Status.error(f"failed to parse pod: {info.error}")
        has_constraints = info.has_preferred
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()
        snap = state.snapshot
        namespaces = snap.namespaces
        ns_labels = namespace_labels(namespaces, pod.namespace)
        preferred = tuple(
            WeightedAffinityTerm(w.term.with_namespaces(namespaces), w.weight) for w in info.preferred_affinity
        )
        preferred_anti = tuple(
            WeightedAffinityTerm(w.term.with_namespaces(namespaces), w.weight) for w in info.preferred_anti_affinity
        )
        scores = topology_score(
            snap.nodes if has_constraints else snap.nodes_with_affinity_pods,
            pod,
            ns_labels,
            _identity(pod, ns_labels),
            preferred,
            preferred_anti,
            self.hard_pod_affinity_weight,
        )
        if scores is None:
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, scores)
        return Status.ok()

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        scores: TopologyScore | None = state.read(PRE_SCORE_STATE_KEY)
        if not scores:
            return 0
        return node_score(scores, node.node.labels)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        topo: TopologyScore | None = state.read(PRE_SCORE_STATE_KEY)
        if topo:
            normalize(scores)
        return Status.ok()

    # --- reuse between equal pods ------------------------------------------------------------------------

    def _token(self, world: tuple[NodeInfo, ...]) -> int:
        last = self._world
        if world is not last:
            if len(world) != len(last) or any(a is not b for a, b in zip(world, last, strict=True)):
                self._world_token += 1
            self._world = world
        return self._world_token

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        if pod.has_pod_affinity:
            return None
        snap: Snapshot = state.snapshot
        world = snap.nodes_with_affinity_pods
        if not world:
            return ()
        ns_labels = namespace_labels(snap.namespaces, pod.namespace)
        return (self._token(world), _identity(pod, ns_labels))

    # --- queueing ----------------------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # Assigned pods added (affinity may now be met), relabelled or deleted (anti-affinity may be lifted);
        # nodes added or relabelled (topology keys); namespaces added or relabelled (namespace selectors).
        return (
            ("Pod", "Add"),
            ("Pod", "Update"),
            ("Pod", "Delete"),
            ("Node", "Add"),
            ("Node", "Update"),
            ("Namespace", "Add"),
            ("Namespace", "Update"),
        )

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        """Namespace events have no hint (always queue)."""
        return {
            ("Pod", "Add"): self.hint_pod_change,
            ("Pod", "Update"): self.hint_pod_change,
            ("Pod", "Delete"): self.hint_pod_change,
            ("Node", "Add"): self.hint_node_change,
            ("Node", "Update"): self.hint_node_change,
        }

    def hint_pod_change(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterPodChange`` (interpodaffinity/plugin.go): an unassigned pod → skip; updated:
        now matching all affinity terms (not before) → queue, matching all anti-affinity terms before and not now →
        queue; added: matching all affinity terms → queue; deleted: matching all anti-affinity terms → queue; else
        skip. The waiting pod's terms are matched as upstream does, namespace selectors against no labels. Wider
        than upstream: an assigned pod with required anti-affinity updated or deleted → queue (module docstring)."""
        if (new is not None and not new.node_name) or (old is not None and not old.node_name):
            return QueueingHint.SKIP
        info = pod_affinity(pod)
        if info.error is not None:
            return QueueingHint.QUEUE
        terms, anti = info.required_affinity, info.required_anti_affinity
        if old is not None and old.has_required_anti_affinity:
            return QueueingHint.QUEUE
        if new is not None and old is not None:
            if not pod_matches_all_raw(terms, old) and pod_matches_all_raw(terms, new):
                return QueueingHint.QUEUE
            if pod_matches_all_raw(anti, old) and not pod_matches_all_raw(anti, new):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if new is not None:
            return QueueingHint.QUEUE if pod_matches_all_raw(terms, new) else QueueingHint.SKIP
        assert old is not None
        return QueueingHint.QUEUE if pod_matches_all_raw(anti, old) else QueueingHint.SKIP

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeChange`` (interpodaffinity/plugin.go): queue when the added or updated
        node has the topology key of one of the waiting pod's required affinity or anti-affinity terms, else skip.
        Wider than upstream: a waiting pod without required terms (rejected by existing pods' anti-affinity) →
        queue."""
        del old
        if new is None:
            return QueueingHint.SKIP
        info = pod_affinity(pod)
        if info.error is not None or not info.has_required:
            return QueueingHint.QUEUE
        labels = new.labels
        for t in (*info.required_affinity, *info.required_anti_affinity):
            if t.topology_key in labels:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


def pod_matches_all_raw(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """upstream ``podMatchesAllAffinityTerms`` as the hints call it: false for no terms, namespace selectors
    matched against no labels (the terms are not unrolled against the namespaces)."""
    if not terms:
        return False
    return all(t.matches(pod, NO_LABELS) for t in terms)
