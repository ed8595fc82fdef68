"""Pod (anti-)affinity terms (core/v1 ``PodAffinityTerm`` / ``WeightedPodAffinityTerm``): parsing and matching.

Semantics, read from Kubernetes v1.37.2:

* ``k8s.io/kube-scheduler/framework/types.go`` (v0.37.2): ``AffinityTerm{Namespaces, Selector, TopologyKey,
  NamespaceSelector}``; ``Matches(pod, nsLabels)`` is "the pod's namespace is listed, or the namespace
  selector matches ``nsLabels``", and then the label selector matches the pod's labels;
  ``getNamespacesFromPodAffinityTerm``: no ``namespaces`` and no ``namespaceSelector`` means the namespace of
  the pod that owns the term.
* ``k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`` ``LabelSelectorAsSelector``: a missing selector matches
  nothing, an empty one (``{}``) everything; keys and values are validated (``labels.NewRequirement``), an
  invalid one is a parse error.
* ``pkg/scheduler/framework/types.go`` ``NewPodInfo``: the four term lists are parsed separately; a list that
  fails to parse is empty and its error is reported (``requiredAffinityTerms: ...``), aggregated over lists.
* ``pkg/scheduler/framework/plugins/interpodaffinity/plugin.go`` ``mergeAffinityTermNamespacesIfNotEmpty``: for
  the incoming pod's terms, a non-empty namespace selector is unrolled into the namespace names it selects
  (from the namespace lister) and becomes "nothing"; ``{}`` stays "every namespace".
* ``pkg/registry/core/pod/strategy.go`` ``mutatePodAffinity`` (MatchLabelKeysInPodAffinity, GA and locked
  on since 1.33; KEP-3633): at pod creation the API server appends ``key In (<pod's value>)`` for every
  ``matchLabelKeys`` key and ``key NotIn (<pod's value>)`` for every ``mismatchLabelKeys`` key the pod has a
  label for, into the term's label selector (not when the selector is missing). The scheduler then reads
  only the label selector. ``simulate`` loads pods without an API server, so :func:`pod_affinity` applies the
  same merge to a term whose selector does not carry the merged requirement yet (API validation forbids a
  ``matchLabelKeys`` key in the user's own selector, so an ``In`` expression on that key means "merged").

Namespace labels come from the snapshot (``Snapshot.namespaces``); like the API server, which labels every
namespace with ``kubernetes.io/metadata.name``, :func:`namespace_labels` adds that label when it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api.labelselector import LabelSelector, Requirement
from scheduler.api.model import Pod
from scheduler.api.validation import label_value_errors, qualified_name_errors

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

_EMPTY_LABELS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A parsed ``PodAffinityTerm`` of a pod (its own namespace already resolved)."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector  # nil selector = nothing, {} = every namespace
    topology_key: str

    def matches(self, pod: Pod, ns_labels: Mapping[str, str]) -> bool:
        """``AffinityTerm.Matches``: ``ns_labels`` are the labels of ``pod``'s namespace."""
        if pod.namespace in self.namespaces or self.namespace_selector.matches(ns_labels):
            return self.selector.matches(pod.meta.labels)
        return False

    def with_namespaces(self, namespaces: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
        """``mergeAffinityTermNamespacesIfNotEmpty``: unroll a non-empty namespace selector into the names of
        the namespaces it selects (used for the incoming pod's terms, matched with no namespace labels)."""
        sel = self.namespace_selector
        if sel.is_empty or sel.match_nothing:
            return self
        names = set(self.namespaces)
        for name, labels in namespaces.items():
            if sel.matches(_with_name_label(name, labels)):
                names.add(name)
        return AffinityTerm(self.selector, frozenset(names), LabelSelector.nothing(), self.topology_key)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """The four term lists of a pod (``PodInfo.RequiredAffinityTerms`` etc.)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    # Parse errors, one per list that failed (the list is then empty), as NewPodInfo aggregates them.
    errors: tuple[str, ...] = ()

    @property
    def has_required(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity)

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)

    @property
    def error(self) -> str | None:
        """The aggregated parse error (Go's ``utilerrors.NewAggregate(...).Error()``), or None."""
        if not self.errors:
            return None
        if len(self.errors) == 1:
            return self.errors[0]
        return "[" + ", ".join(self.errors) + "]"


NO_AFFINITY = PodAffinity()
_MEMO_KEY = "podaffinity"


def pod_affinity(pod: Pod) -> PodAffinity:
    """The pod's parsed terms, parsed once per Pod object (cached in ``pod.memo``)."""
    cached: PodAffinity | None = pod.memo.get(_MEMO_KEY)
    if cached is not None:
        return cached
    value = NO_AFFINITY
    if pod.has_pod_affinity:
        spec = pod.raw.get("spec") or {}
        aff = spec.get("affinity") if isinstance(spec, Mapping) else None
        if isinstance(aff, Mapping):
            value = parse_pod_affinity(aff, pod.namespace, pod.meta.labels)
    pod.memo[_MEMO_KEY] = value
    return value


def parse_pod_affinity(affinity: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodAffinity:
    """Parse ``spec.affinity``'s ``podAffinity`` and ``podAntiAffinity`` of a pod in ``namespace`` with ``labels``."""
    pa = affinity.get("podAffinity")
    paa = affinity.get("podAntiAffinity")
    pa = pa if isinstance(pa, Mapping) else {}
    paa = paa if isinstance(paa, Mapping) else {}
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    errors: list[str] = []

    def terms(raw: Any, what: str) -> tuple[AffinityTerm, ...]:
        try:
            return tuple(_term(t, namespace, labels) for t in _items(raw))
        except _ParseError as e:
            errors.append(f"{what}: {e}")
            return ()

    def weighted(raw: Any, what: str) -> tuple[WeightedAffinityTerm, ...]:
        try:
            out = []
            for t in _items(raw):
                w = t.get("weight")
                weight = w if isinstance(w, int) and not isinstance(w, bool) else 0
                out.append(WeightedAffinityTerm(_term(t.get("podAffinityTerm") or {}, namespace, labels), weight))
            return tuple(out)
        except _ParseError as e:
            errors.append(f"{what}: {e}")
            return ()

    required = terms(pa.get(req), "requiredAffinityTerms")
    required_anti = terms(paa.get(req), "requiredAntiAffinityTerms")
    preferred = weighted(pa.get(pref), "preferredAffinityTerms")
    preferred_anti = weighted(paa.get(pref), "preferredAntiAffinityTerms")
    return PodAffinity(required, required_anti, preferred, preferred_anti, tuple(errors))


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]], namespace: str) -> Mapping[str, str]:
    """``GetNamespaceLabelsSnapshot``: the labels of ``namespace`` (empty when it does not exist)."""
    labels = namespaces.get(namespace)
    if labels is None:
        return _EMPTY_LABELS
    return _with_name_label(namespace, labels)


def _with_name_label(name: str, labels: Mapping[str, str]) -> Mapping[str, str]:
    if labels.get(NAMESPACE_NAME_LABEL) == name:
        return labels
    return {**labels, NAMESPACE_NAME_LABEL: name}


# --- parsing ---------------------------------------------------------------------------------------------


class _ParseError(ValueError):
    pass


def _items(raw: Any) -> Sequence[Mapping[str, Any]]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _ParseError("must be a list")
    for t in raw:
        if not isinstance(t, Mapping):
            raise _ParseError("each term must be an object")
    return raw


def _term(raw: Mapping[str, Any], namespace: str, pod_labels: Mapping[str, str]) -> AffinityTerm:
    selector = _selector(merge_label_keys(raw, pod_labels))
    ns_list = raw.get("namespaces") or []
    if not isinstance(ns_list, list) or not all(isinstance(n, str) for n in ns_list):
        raise _ParseError("namespaces: must be a list of strings")
    ns_raw = raw.get("namespaceSelector")
    ns_selector = _selector(ns_raw)
    if not ns_list and ns_raw is None:
        names = frozenset((namespace,))
    else:
        names = frozenset(ns_list)
    tk = raw.get("topologyKey")
    return AffinityTerm(selector, names, ns_selector, tk if isinstance(tk, str) else "")


def merge_label_keys(term: Mapping[str, Any], pod_labels: Mapping[str, str]) -> Any:
    """The term's ``labelSelector`` with ``matchLabelKeys`` / ``mismatchLabelKeys`` merged in, as the API
    server's ``applyMatchLabelKeysAndMismatchLabelKeys`` does at pod creation (idempotent: requirements the
    API server already merged are not added again)."""
    sel = term.get("labelSelector")
    match_keys = term.get("matchLabelKeys") or []
    mismatch_keys = term.get("mismatchLabelKeys") or []
    if (not match_keys and not mismatch_keys) or not isinstance(sel, Mapping):
        return sel
    exprs = sel.get("matchExpressions") or []
    if not isinstance(exprs, list):
        return sel
    merged = list(exprs)

    def has(key: str, op: str, value: str | None) -> bool:
        return any(
            isinstance(e, Mapping)
            and e.get("key") == key
            and e.get("operator") == op
            and (value is None or e.get("values") == [value])
            for e in merged
        )

    for key in match_keys if isinstance(match_keys, list) else ():
        if isinstance(key, str) and key in pod_labels and not has(key, "In", None):
            merged.append({"key": key, "operator": "In", "values": [pod_labels[key]]})
    for key in mismatch_keys if isinstance(mismatch_keys, list) else ():
        if isinstance(key, str) and key in pod_labels and not has(key, "NotIn", pod_labels[key]):
            merged.append({"key": key, "operator": "NotIn", "values": [pod_labels[key]]})
    if len(merged) == len(exprs):
        return sel
    return {**sel, "matchExpressions": merged}


_OPS = {"In": "In", "NotIn": "NotIn", "Exists": "Exists", "DoesNotExist": "DoesNotExist"}
def _requirement(key: Any, op: str, values: Any, equals: bool = False) -> Requirement:
    """``labels.NewRequirement`` with its validation and error texts."""
    if not isinstance(key, str):
        raise _ParseError(f"key: Invalid value: {key!r}: must be a string")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _ParseError(f"values[{key}]: Invalid value: must be a list of strings")
    errs: list[str] = []
    kerr = qualified_name_errors(key)
    if kerr:
        errs.append(f'key: Invalid value: "{key}": {"; ".join(kerr)}')
    if op in ("In", "NotIn") and not values and not equals:
        errs.append("values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        errs.append("values: Invalid value: values set must be empty for exists and does not exist")
    for i, v in enumerate(values):
        verr = label_value_errors(v)
        if verr:
            errs.append(f'values[{i}][{key}]: Invalid value: "{v}": {"; ".join(verr)}')
    if errs:
        raise _ParseError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return Requirement(key, op, frozenset(values))


def _selector(raw: Any) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector``: nil matches nothing, empty matches everything."""
    if raw is None:
        return LabelSelector.nothing()
    if not isinstance(raw, Mapping):
        raise _ParseError("label selector must be an object")
    ml = raw.get("matchLabels") or {}
    me = raw.get("matchExpressions") or []
    if not isinstance(ml, Mapping) or not isinstance(me, list):
        raise _ParseError("label selector: matchLabels must be an object and matchExpressions a list")
    if not ml and not me:
        return LabelSelector.everything()
    reqs: list[Requirement] = []
    for k in sorted(ml, key=str):
        v = ml[k]
        if v is None:  # Go's JSON decoding: a null map[string]string value is ""
            v = ""
        if not isinstance(v, str):
            raise _ParseError(f"values[0][{k}]: Invalid value: must be a string")
        reqs.append(_requirement(k, "In", [v], equals=True))
    for e in me:
        if not isinstance(e, Mapping):
            raise _ParseError("matchExpressions: each requirement must be an object")
        op = e.get("operator")
        if op not in _OPS:
            raise _ParseError(f'"{op}" is not a valid label selector operator')
        values = e.get("values")
        reqs.append(_requirement(e.get("key"), _OPS[op], [] if values is None else values))
    return LabelSelector(tuple(reqs))


__all__ = [
    "NAMESPACE_NAME_LABEL",
    "NO_AFFINITY",
    "AffinityTerm",
    "PodAffinity",
    "WeightedAffinityTerm",
    "merge_label_keys",
    "namespace_labels",
    "parse_pod_affinity",
    "pod_affinity",
]
