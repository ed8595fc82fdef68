"""NodeAffinity: ``spec.nodeSelector`` and node affinity, plus the scheduler-enforced ``addedAffinity``.

kube-scheduler (``pkg/scheduler/framework/plugins/nodeaffinity``):

* PreFilter: Skip when the pod has no nodeSelector, no required node affinity and no
  ``addedAffinity.requiredDuringSchedulingIgnoredDuringExecution`` is configured. When every required
  term pins ``metadata.name`` with ``matchFields`` ``In``, the union over terms (intersection inside a
  term) becomes the PreFilterResult; an empty union is UnschedulableAndUnresolvable
  ``pod affinity terms conflict``.
* Filter: the added affinity first (``node(s) didn't match scheduler-enforced node affinity``), then
  all nodeSelector labels and the required terms (ORed), UnschedulableAndUnresolvable
  ``node(s) didn't match Pod's node affinity/selector``.
* PreScore/Score: the sum of the weights of the matching preferred terms (the pod's and the added
  ones); Skip when there are none. NormalizeScore is ``DefaultNormalizeScore(MaxNodeScore, false)``.

Args: ``addedAffinity`` (a core/v1 NodeAffinity applied to every pod of the profile).

QueueingHint (``isSchedulableAfterNodeChange``): a node added that matches the added affinity and the pod's
required affinity, or updated from not matching to matching.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.api.model import (
    NodeSelector,
    PreferredTerm,
    node_selector_from,
    node_selector_matches,
    selector_term_from,
    term_matches,
)
from scheduler.config.registry import PluginSpec
from scheduler.framework.helpers import default_normalize_score, max_normalized
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    CycleState,
    NodeScore,
    PreFilterResult,
    QueueingHint,
    QueueingHintFn,
    Status,
)

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
OBJECT_NAME_FIELD = "metadata.name"

_PRE_SCORE_KEY = "PreScore" + NAME

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


# --- args ---------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def qualified_name_error(key: str) -> str | None:
    """Kubernetes' IsQualifiedName (label keys): ``[prefix/]name``; None when valid."""
    if not key:
        return "name part must be non-empty"
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "must consist of an optional DNS subdomain prefix and a name, separated by '/'"
    if key.startswith("/") or (prefix == "" and "/" in key):
        return "prefix part must be non-empty"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_RE.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        )
    return None


def _unknown(obj: Mapping[str, Any], allowed: Sequence[str], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field" for k in obj if k not in allowed]


def _validate_requirements(raw: Any, path: str, fields: bool) -> list[str]:
    if not isinstance(raw, list):
        return [f"{path}: must be a list"]
    errs: list[str] = []
    for i, r in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(r, Mapping):
            errs.append(f"{p}: must be an object")
            continue
        errs += _unknown(r, ("key", "operator", "values"), p)
        key = r.get("key")
        op = r.get("operator")
        values = r.get("values", [])
        if not isinstance(key, str) or not key:
            errs.append(f"{p}.key: required")
        elif fields:
            if key != OBJECT_NAME_FIELD:
                errs.append(f"{p}.key: {key!r} is not a valid field selector key (only {OBJECT_NAME_FIELD})")
        else:
            e = qualified_name_error(key)
            if e:
                errs.append(f"{p}.key: invalid label key {key!r}: {e}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            errs.append(f"{p}.values: must be a list of strings")
            continue
        allowed_ops = ("In", "NotIn") if fields else _OPERATORS
        if op not in allowed_ops:
            errs.append(f"{p}.operator: unsupported value {op!r}: supported values: {', '.join(allowed_ops)}")
            continue
        if fields:
            if len(values) != 1:
                errs.append(f"{p}.values: must have one element")
        elif op in ("In", "NotIn"):
            if not values:
                errs.append(f"{p}.values: must be specified when operator is {op}")
            for j, v in enumerate(values):
                if len(v) > 63 or not _LABEL_VALUE_RE.match(v):
                    errs.append(f"{p}.values[{j}]: invalid label value {v!r}")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(f"{p}.values: may not be specified when operator is {op}")
        else:
            if len(values) != 1:
                errs.append(f"{p}.values: must have exactly one value when operator is {op}")
            else:
                try:
                    int(values[0])
                except ValueError:
                    errs.append(f"{p}.values[0]: must be an integer when operator is {op}")
    return errs


def _validate_term(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, Mapping):
        return [f"{path}: must be an object"]
    errs = _unknown(raw, ("matchExpressions", "matchFields"), path)
    if "matchExpressions" in raw:
        errs += _validate_requirements(raw["matchExpressions"], f"{path}.matchExpressions", False)
    if "matchFields" in raw:
        errs += _validate_requirements(raw["matchFields"], f"{path}.matchFields", True)
    return errs


def validate_node_selector(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, Mapping):
        return [f"{path}: must be an object"]
    errs = _unknown(raw, ("nodeSelectorTerms",), path)
    terms = raw.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return [*errs, f"{path}.nodeSelectorTerms: must have at least one node selector term"]
    for i, t in enumerate(terms):
        errs += _validate_term(t, f"{path}.nodeSelectorTerms[{i}]")
    return errs


def validate_preferred_terms(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, list):
        return [f"{path}: must be a list"]
    errs: list[str] = []
    for i, p in enumerate(raw):
        pp = f"{path}[{i}]"
        if not isinstance(p, Mapping):
            errs.append(f"{pp}: must be an object")
            continue
        errs += _unknown(p, ("weight", "preference"), pp)
        w = p.get("weight")
        if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 100:
            errs.append(f"{pp}.weight: must be in the range 1-100")
        if "preference" not in p:
            errs.append(f"{pp}.preference: required")
        else:
            errs += _validate_term(p["preference"], f"{pp}.preference")
    return errs


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateNodeAffinityArgs``: paths under ``<path>.addedAffinity``."""
    errs = _unknown(args, ("addedAffinity",), path)
    added = args.get("addedAffinity")
    if added is None:
        return errs
    ap = f"{path}.addedAffinity"
    if not isinstance(added, Mapping):
        return [*errs, f"{ap}: must be an object"]
    errs += _unknown(added, (_REQUIRED, _PREFERRED), ap)
    if added.get(_REQUIRED) is not None:
        errs += validate_node_selector(added[_REQUIRED], f"{ap}.{_REQUIRED}")
    if added.get(_PREFERRED) is not None:
        errs += validate_preferred_terms(added[_PREFERRED], f"{ap}.{_PREFERRED}")
    return errs


# --- plugin -------------------------------------------------------------------------------------------


def required_matches(pod: Pod, labels: Mapping[str, str], node_name: str) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: every nodeSelector label, and the required terms."""
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    return pod.required_affinity is None or node_selector_matches(pod.required_affinity, labels, node_name)


def preferred_score(terms: Sequence[PreferredTerm], labels: Mapping[str, str], node_name: str) -> int:
    return sum(t.weight for t in terms if t.weight != 0 and term_matches(t.term, labels, node_name))


def pinned_node_names(sel: NodeSelector) -> frozenset[str] | None:
    """Node names the required terms are limited to by ``matchFields`` ``metadata.name In``; None when
    some term does not pin names (all nodes stay eligible, the terms being ORed)."""
    names: set[str] = set()
    for term in sel.terms:
        term_names: set[str] | None = None
        for r in term.match_fields:
            if r.key == OBJECT_NAME_FIELD and r.operator == "In":
                s = set(r.values)
                term_names = s if term_names is None else term_names & s
        if term_names is None:
            return None
        names |= term_names
    return frozenset(names)


class NodeAffinity:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        added = args.get("addedAffinity") or {}
        req = added.get(_REQUIRED)
        self.added_required: NodeSelector | None = (
            node_selector_from(req, f"addedAffinity.{_REQUIRED}") if isinstance(req, Mapping) else None
        )
        prefs: list[PreferredTerm] = []
        for i, p in enumerate(added.get(_PREFERRED) or ()):
            w = p.get("weight", 0)
            path = f"addedAffinity.{_PREFERRED}[{i}].preference"
            term = selector_term_from(p.get("preference") or {}, path)
            prefs.append(PreferredTerm(w if isinstance(w, int) else 0, term))
        self.added_preferred: tuple[PreferredTerm, ...] = tuple(prefs)

    # --- filtering ---------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        sel = pod.required_affinity
        if sel is None and self.added_required is None and not pod.node_selector:
            return None, Status.skip()
        if sel is None or not sel.terms:
            return None, Status.ok()
        names = pinned_node_names(sel)
        if names is None:
            return None, Status.ok()
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(names), Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        labels, name = node.node.labels, node.name
        if self.added_required is not None and not node_selector_matches(self.added_required, labels, name):
            return Status.unresolvable(ERR_REASON_ENFORCED)
        if not required_matches(pod, labels, name):
            return Status.unresolvable(ERR_REASON_POD)
        return Status.ok()

    # --- scoring -----------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        terms = self.added_preferred + pod.preferred_affinity
        if not terms:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, terms)
        return Status.ok()

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        terms = state.read(_PRE_SCORE_KEY)
        if terms is None:
            terms = self.added_preferred + pod.preferred_affinity
        return preferred_score(terms, node.node.labels, node.name)

    @max_normalized()
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return Status.ok()

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return (tuple(sorted(pod.node_selector.items())), pod.required_affinity, pod.preferred_affinity)

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # A node added or its labels changed.
        return (("Node", "Add"), ("Node", "Update"))

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {("Node", "Add"): self.hint_node_change, ("Node", "Update"): self.hint_node_change}

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeChange`` (node_affinity.go): skip when the node does not match the
        scheduler-enforced affinity or the pod's required affinity/selector; queue when it is new or did not match
        before; skip when it matched already (the update changed nothing for this pod)."""
        if new is None:
            return QueueingHint.SKIP
        if self.added_required is not None and not node_selector_matches(self.added_required, new.labels, new.name):
            return QueueingHint.SKIP
        if not required_matches(pod, new.labels, new.name):
            return QueueingHint.SKIP
        if old is None or not required_matches(pod, old.labels, old.name):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


SPEC = PluginSpec(
    name=NAME,
    factory=NodeAffinity,
    points=frozenset({"preFilter", "filter", "preScore", "score"}),
    validate_args=validate_args,
)

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_ENFORCED",
    "ERR_REASON_POD",
    "NAME",
    "SPEC",
    "NodeAffinity",
    "validate_args",
]
