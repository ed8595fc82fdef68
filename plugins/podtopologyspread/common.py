"""PodTopologySpread: constraints, default constraints and the counting shared by Filter and Score.

Semantics of kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/podtopologyspread/common.go`` and
``helper.DefaultSelector`` (``pkg/scheduler/framework/plugins/helper/spread.go``), with the feature gates
of 1.37 (NodeInclusionPolicyInPodTopologySpread GA, MatchLabelKeysInPodTopologySpread beta on,
TaintTolerationComparisonOperators alpha off):

* a constraint's ``labelSelector`` is converted with ``LabelSelectorAsSelector``: a missing selector
  matches no pod, ``{}`` matches every pod;
* ``matchLabelKeys``: the pod's values of those keys are ANDed into the selector (only keys the pod has;
  nothing is added to a missing selector, which keeps matching nothing). The API server also merges them
  into ``labelSelector`` at pod creation since 1.34 (MatchLabelKeysInPodTopologySpreadSelectorMerge); the
  scheduler still merges itself, and a requirement merged twice matches the same pods;
* ``minDomains`` defaults to 1, ``nodeAffinityPolicy`` to Honor, ``nodeTaintsPolicy`` to Ignore;
* a node counts for a constraint only when it has every topology key of the pod's constraints (of the
  same kind, hard or soft), matches the pod's nodeSelector and required node affinity when the policy
  is Honor, and has no NoSchedule/NoExecute taint the pod does not tolerate when the taints policy is
  Honor;
* matching pods are counted in the pod's own namespace, skipping pods being deleted
  (``deletionTimestamp``); a selector without requirements (``{}``) counts no existing pod;
* default constraints (``PodTopologySpreadArgs``) apply only to pods without any
  ``topologySpreadConstraints``; their selector is built from the Services selecting the pod (merged
  label sets) and the ReplicationController / ReplicaSet / StatefulSet controlling it; an empty selector
  means no constraint.

Pods that are terminal (Succeeded/Failed) are not in ``NodeInfo.pod_list`` (the cache drops them as
kube-scheduler's does); pods assumed onto a node are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plugins.nodeaffinity import required_matches
from plugins.tainttoleration import find_untolerated_taint
from scheduler.api.labelselector import LabelSelector, Requirement, selector_from, selector_from_map
from scheduler.api.model import ModelError

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

NAME = "PodTopologySpread"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
ACTIONS = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
HONOR = "Honor"
IGNORE = "Ignore"

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

CONSTRAINT_FIELDS = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "labelSelector",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "matchLabelKeys",
)


@dataclass(frozen=True, slots=True)
class SpreadSpec:
    """A ``core/v1.TopologySpreadConstraint`` as written (pod spec or plugin args), selector parsed."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector  # LabelSelector.nothing() when labelSelector is missing
    min_domains: int = 1
    node_affinity_honor: bool = True
    node_taints_honor: bool = False
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    """upstream ``topologySpreadConstraint``: what Filter and Score evaluate."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_honor: bool = True
    node_taints_honor: bool = False


# The system default constraints (plugin.go ``systemDefaultConstraints``).
SYSTEM_DEFAULT_CONSTRAINTS = (
    SpreadSpec(3, LABEL_HOSTNAME, SCHEDULE_ANYWAY, LabelSelector.nothing()),
    SpreadSpec(5, LABEL_TOPOLOGY_ZONE, SCHEDULE_ANYWAY, LabelSelector.nothing()),
)


# --- parsing ------------------------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def spec_from(raw: Any, path: str, strict_min_domains: bool = True) -> SpreadSpec:
    """Parse one TopologySpreadConstraint. Raises :class:`ModelError` on what the API server rejects
    (``minDomains`` of the plugin args is not range-checked: ``ValidatePodTopologySpreadArgs`` does not)."""
    if not isinstance(raw, Mapping):
        raise ModelError(path, "must be an object")
    skew = raw.get("maxSkew")
    if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
        raise ModelError(f"{path}.maxSkew", f"invalid value {skew!r}: must be greater than zero")
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise ModelError(f"{path}.topologyKey", "required")
    when = raw.get("whenUnsatisfiable")
    if when not in ACTIONS:
        raise ModelError(
            f"{path}.whenUnsatisfiable",
            f'unsupported value {when!r}: supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"',
        )
    md = raw.get("minDomains")
    if md is not None and (not _is_int(md) or (strict_min_domains and md <= 0)):
        raise ModelError(f"{path}.minDomains", f"invalid value {md!r}: must be greater than zero")
    keys = raw.get("matchLabelKeys") or []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ModelError(f"{path}.matchLabelKeys", "must be a list of label keys")
    nap = raw.get("nodeAffinityPolicy")
    ntp = raw.get("nodeTaintsPolicy")
    return SpreadSpec(
        max_skew=skew,
        topology_key=key,
        when_unsatisfiable=str(when),
        selector=selector_from(raw.get("labelSelector"), f"{path}.labelSelector"),
        min_domains=md if md is not None else 1,
        # Unset: Honor for node affinity, Ignore for taints; set: only the literal "Honor" honours.
        node_affinity_honor=nap is None or nap == HONOR,
        node_taints_honor=ntp == HONOR,
        match_label_keys=tuple(keys),
    )


def specs_from(raw: Any, path: str, strict_min_domains: bool = True) -> tuple[SpreadSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ModelError(path, "must be a list")
    return tuple(spec_from(c, f"{path}[{i}]", strict_min_domains) for i, c in enumerate(raw))


@dataclass(frozen=True, slots=True)
class PodSpreadSpecs:
    """The pod's own constraints, parsed once per pod object (``pod.memo``)."""

    specs: tuple[SpreadSpec, ...]
    hard: tuple[Constraint, ...]
    soft: tuple[Constraint, ...]
    error: str = ""


def filter_constraints(
    specs: Sequence[SpreadSpec], pod_labels: Mapping[str, str], action: str
) -> tuple[Constraint, ...]:
    """upstream ``filterTopologySpreadConstraints``: the constraints of one action, matchLabelKeys merged."""
    out: list[Constraint] = []
    for s in specs:
        if s.when_unsatisfiable != action:
            continue
        sel = s.selector
        if s.match_label_keys:
            extra = tuple(
                Requirement(k, "In", frozenset((pod_labels[k],))) for k in s.match_label_keys if k in pod_labels
            )
            sel = sel.with_requirements(extra)  # a missing selector stays "nothing"
        out.append(
            Constraint(s.max_skew, s.topology_key, sel, s.min_domains, s.node_affinity_honor, s.node_taints_honor)
        )
    return tuple(out)


_POD_MEMO = NAME


def pod_specs(pod: Pod) -> PodSpreadSpecs:
    cached: PodSpreadSpecs | None = pod.memo.get(_POD_MEMO)
    if cached is None:
        spec = pod.raw.get("spec") or {}
        try:
            specs = specs_from(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")
        except ModelError as e:
            cached = PodSpreadSpecs((), (), (), str(e))
        else:
            labels = pod.meta.labels
            cached = PodSpreadSpecs(
                specs,
                filter_constraints(specs, labels, DO_NOT_SCHEDULE),
                filter_constraints(specs, labels, SCHEDULE_ANYWAY),
            )
        pod.memo[_POD_MEMO] = cached
    return cached


# --- default selector (helper.DefaultSelector) --------------------------------------------------------------

_RC = ("v1", "ReplicationController")
_RS = ("apps/v1", "ReplicaSet")
_SS = ("apps/v1", "StatefulSet")


def _set_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def default_selector(pod: Pod, services: Sequence[Any], objects_of: Any) -> LabelSelector:
    """The selector of the default constraints for ``pod``.

    ``services``: the Services of the pod's namespace (scheduler/api/workloads.py ``Service``);
    ``objects_of(kind)``: the snapshot's objects of a kind, keyed ``namespace/name``."""
    label_set: dict[str, str] = {}
    labels = pod.meta.labels
    for svc in services:
        sel = getattr(svc, "selector", None)
        if sel is None:  # a nil selector selects nothing, not everything
            continue
        if _set_matches(sel, labels):
            label_set.update(sel)
    selector = selector_from_map(label_set)
    owner = pod.meta.controller()
    if owner is None:
        return selector
    gvk = (owner.api_version, owner.kind)
    key = f"{pod.namespace}/{owner.name}"
    if gvk == _RC:
        rc = objects_of("ReplicationController").get(key)
        if rc is not None:
            label_set.update(getattr(rc, "selector", None) or {})
            selector = selector_from_map(label_set)
    elif gvk in (_RS, _SS):
        obj = objects_of(gvk[1]).get(key)
        other = getattr(obj, "selector", None) if obj is not None else None
        if isinstance(other, LabelSelector) and not other.match_nothing:
            selector = LabelSelector(selector.requirements + other.requirements)
    return selector


# --- nodes and counting -------------------------------------------------------------------------------------


def node_has_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    """upstream ``nodeLabelsMatchSpreadConstraints``: every topology key is a label of the node."""
    return all(c.topology_key in labels for c in constraints)


class NodeInclusion:
    """``matchNodeInclusionPolicies`` for one pod, evaluated lazily per node (each check at most once)."""

    __slots__ = ("_affinity", "_pod", "_taints")

    def __init__(self, pod: Pod) -> None:
        self._pod = pod
        self._affinity: dict[str, bool] = {}
        self._taints: dict[str, bool] = {}

    def matches(self, c: Constraint, node: NodeInfo) -> bool:
        if c.node_affinity_honor:
            ok = self._affinity.get(node.name)
            if ok is None:
                ok = self._affinity[node.name] = required_matches(self._pod, node.node.labels, node.name)
            if not ok:
                return False
        if c.node_taints_honor:
            ok = self._taints.get(node.name)
            if ok is None:
                ok = self._taints[node.name] = find_untolerated_taint(node.node.taints, self._pod.tolerations) is None
            if not ok:
                return False
        return True


def count_matching(node: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    """upstream ``countPodsMatchSelector`` over the node's pods (assumed ones included), memoised on the
    immutable NodeInfo."""
    if selector.is_empty:
        return 0
    memo: dict[tuple[str, LabelSelector], int] | None = node.memo.get(NAME)
    if memo is None:
        memo = node.memo[NAME] = {}
    key = (namespace, selector)
    n = memo.get(key)
    if n is None:
        n = 0
        for p in node.pod_list:
            if p.meta.deleting or p.namespace != namespace:
                continue
            if selector.matches(p.meta.labels):
                n += 1
        memo[key] = n
    return n


def pod_matches_any(constraints: Sequence[Constraint], labels: Mapping[str, str]) -> bool:
    """upstream ``podLabelsMatchSpreadConstraints``."""
    return any(c.selector.matches(labels) for c in constraints)
