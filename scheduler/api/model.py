"""Typed, frozen values for the core Kubernetes objects the scheduler reads: Node, Pod (with its resource
requests, as kube-scheduler computes them) and PodGroup, and the pieces they and the other kinds share (metadata,
node selectors, taints and tolerations, quantities). The DRA kinds are :mod:`scheduler.api.dra`.

Raw API JSON (dicts) is converted here, once, at the edge. Every value keeps the dict it came from in
``raw`` so that writes can be built as patches without erasing fields this version does not know.
API defaulting (toleration ``operator``) is applied during conversion, as the apiserver would.

Conversion problems raise :class:`ModelError` with the field path of the offending value.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.quantity import Quantity, QuantityError, parse_quantity, shown

Raw = Mapping[str, Any]

# Well-known names -----------------------------------------------------------------------------------

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


class ModelError(ValueError):
    """An object could not be converted; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# Helpers ----------------------------------------------------------------------------------------------


def _map(obj: Raw | None, key: str) -> Raw:
    if obj is None:
        return {}
    v = obj.get(key)
    if v.__class__ is dict:  # the common cases, without the slower ABC check
        return v
    if v is None:
        return {}
    return v if isinstance(v, Mapping) else {}


def _list(obj: Raw | None, key: str) -> Sequence[Any]:
    if obj is None:
        return ()
    v = obj.get(key)
    return v if isinstance(v, list | tuple) else ()


def _str(obj: Raw | None, key: str, default: str = "") -> str:
    if obj is None:
        return default
    v = obj.get(key)
    return v if isinstance(v, str) else default


def _strmap(obj: Raw | None, key: str) -> Mapping[str, str]:
    """A ``map[string]string``; a null value is "" as Go's JSON decoding reads it (the zero value, kept under
    its key: ``nodeSelector: {zone: null}`` requires ``zone=""``)."""
    return {str(k): "" if v is None else str(v) for k, v in _map(obj, key).items()}


_ZERO = parse_quantity("0")


def quantity(value: Any, path: str) -> Quantity:
    if isinstance(value, bool):
        raise ModelError(path, f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        raise ModelError(path, f"invalid quantity {shown(str(value))}")
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise ModelError(path, f"invalid quantity {shown(value)}: {e}") from None


# Metadata ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True)
class Meta:
    name: str
    namespace: str
    uid: str
    resource_version: str
    generation: int
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    deleting: bool
    finalizers: tuple[str, ...]
    owners: tuple[OwnerRef, ...]
    creation_timestamp: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def controller(self) -> OwnerRef | None:
        for o in self.owners:
            if o.controller:
                return o
        return None


def meta_from(raw: Raw, path: str = "metadata") -> Meta:
    m = _map(raw, "metadata")
    name = _str(m, "name")
    if not name:
        raise ModelError(f"{path}.name", "required")
    owners = tuple(
        OwnerRef(_str(o, "apiVersion"), _str(o, "kind"), _str(o, "name"), _str(o, "uid"), bool(o.get("controller")))
        for o in _list(m, "ownerReferences")
        if isinstance(o, Mapping)
    )
    gen = m.get("generation")
    return Meta(
        name=name,
        namespace=_str(m, "namespace"),
        uid=_str(m, "uid"),
        resource_version=_str(m, "resourceVersion"),
        generation=gen if isinstance(gen, int) else 0,
        labels=_strmap(m, "labels"),
        annotations=_strmap(m, "annotations"),
        deleting=bool(m.get("deletionTimestamp")),
        finalizers=tuple(str(f) for f in _list(m, "finalizers")),
        owners=owners,
        creation_timestamp=_str(m, "creationTimestamp"),
    )


# Node selectors, taints, tolerations (core/v1) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[SelectorTerm, ...]

    def to_raw(self) -> dict[str, Any]:
        out_terms: list[dict[str, Any]] = []
        for t in self.terms:
            term: dict[str, Any] = {}
            if t.match_expressions:
                term["matchExpressions"] = [_req_raw(r) for r in t.match_expressions]
            if t.match_fields:
                term["matchFields"] = [_req_raw(r) for r in t.match_fields]
            out_terms.append(term)
        return {"nodeSelectorTerms": out_terms}


def _req_raw(r: SelectorRequirement) -> dict[str, Any]:
    d: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        d["values"] = list(r.values)
    return d


_SELECTOR_OPS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}


def _requirements(raw: Sequence[Any], path: str, fields: bool) -> tuple[SelectorRequirement, ...]:
    out = []
    for i, r in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(r, Mapping):
            raise ModelError(p, "must be an object")
        op = _str(r, "operator")
        if op not in _SELECTOR_OPS or (fields and op not in ("In", "NotIn")):
            raise ModelError(f"{p}.operator", f"unsupported operator {op!r}")
        values = tuple(str(v) for v in _list(r, "values"))
        if op in ("In", "NotIn") and not values:
            raise ModelError(f"{p}.values", f"must be non-empty for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise ModelError(f"{p}.values", f"must be empty for operator {op}")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise ModelError(f"{p}.values", f"must have exactly one value for operator {op}")
            try:
                int(values[0])
            except ValueError:
                raise ModelError(f"{p}.values", f"must be an integer for operator {op}") from None
        out.append(SelectorRequirement(_str(r, "key"), op, values))
    return tuple(out)


def selector_term_from(raw: Raw, path: str) -> SelectorTerm:
    return SelectorTerm(
        _requirements(_list(raw, "matchExpressions"), f"{path}.matchExpressions", False),
        _requirements(_list(raw, "matchFields"), f"{path}.matchFields", True),
    )


def node_selector_from(raw: Raw | None, path: str) -> NodeSelector | None:
    if raw is None:
        return None
    terms = tuple(
        selector_term_from(t, f"{path}.nodeSelectorTerms[{i}]")
        for i, t in enumerate(_list(raw, "nodeSelectorTerms"))
        if isinstance(t, Mapping)
    )
    return NodeSelector(terms)


def requirement_matches(r: SelectorRequirement, value: str | None) -> bool:
    op = r.operator
    if op == "In":
        return value is not None and value in r.values
    if op == "NotIn":
        return value is None or value not in r.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None:
            return False
        try:
            v = int(value)
        except ValueError:
            return False
        bound = int(r.values[0])
        return v > bound if op == "Gt" else v < bound
    return False


def term_matches(term: SelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """A term with no requirements matches nothing (as in kube-scheduler's nodeaffinity)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for r in term.match_expressions:
        if not requirement_matches(r, labels.get(r.key)):
            return False
    for r in term.match_fields:
        value = node_name if r.key == "metadata.name" else None
        if not requirement_matches(r, value):
            return False
    return True


def node_selector_matches(sel: NodeSelector, labels: Mapping[str, str], node_name: str) -> bool:
    """Terms are ORed; requirements inside a term are ANDed."""
    return any(term_matches(t, labels, node_name) for t in sel.terms)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Exists | Equal
    value: str
    effect: str  # "" = all effects

    def tolerates(self, t: Taint) -> bool:
        return toleration_tolerates(self.key, self.operator, self.value, self.effect, t)


def toleration_tolerates(key: str, operator: str, value: str, effect: str, t: Taint) -> bool:
    """The matching rule shared by pod tolerations (core/v1 Toleration.ToleratesTaint) and device tolerations
    (resource/v1 DeviceToleration, KEP-5055, same rule): an empty effect matches every effect, an empty key with
    `Exists` matches every taint, `Equal` compares the value; any other operator tolerates nothing."""
    if effect and effect != t.effect:
        return False
    if key and key != t.key:
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return value == t.value
    return False


def _taints(raw: Sequence[Any]) -> tuple[Taint, ...]:
    return tuple(Taint(_str(t, "key"), _str(t, "value"), _str(t, "effect")) for t in raw if isinstance(t, Mapping))


def _tolerations(raw: Sequence[Any]) -> tuple[Toleration, ...]:
    out = []
    for t in raw:
        if not isinstance(t, Mapping):
            continue
        op = _str(t, "operator") or "Equal"
        key = _str(t, "key")
        # core/v1: an empty key with operator Exists matches all keys.
        out.append(Toleration(key, op, _str(t, "value"), _str(t, "effect")))
    return tuple(out)


# Resources -------------------------------------------------------------------------------------------

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"


def resource_amount(name: str, q: Quantity) -> int:
    """kube-scheduler's units: cpu in millicores, everything else as the integer Value()."""
    return q.milli_value() if name == CPU else q.int_value()


def resource_list(raw: Raw, path: str) -> dict[str, int]:
    """A ResourceList in scheduler units; a null value is 0 (``Quantity.UnmarshalJSON`` reads null as zero)."""
    return {
        str(k): 0 if v is None else resource_amount(str(k), quantity(v, f"{path}.{k}")) for k, v in raw.items()
    }


# Node -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    meta: Meta
    unschedulable: bool
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]
    raw: Raw = field(repr=False, compare=False)
    # Per-object scratch space for plugins' parsed views of ``raw`` (e.g. images), filled lazily.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels


def node_from(raw: Raw) -> Node:
    spec, status = _map(raw, "spec"), _map(raw, "status")
    alloc = _map(status, "allocatable") or _map(status, "capacity")
    return Node(
        meta=meta_from(raw),
        unschedulable=bool(spec.get("unschedulable")),
        taints=_taints(_list(spec, "taints")),
        allocatable=resource_list(alloc, "status.allocatable"),
        raw=raw,
    )


# Pod --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    name: str
    claim_name: str | None
    template_name: str | None


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: SelectorTerm


@dataclass(frozen=True, slots=True)
class Pod:
    meta: Meta
    scheduler_name: str
    node_name: str
    priority: int
    phase: str
    node_selector: Mapping[str, str]
    required_affinity: NodeSelector | None
    preferred_affinity: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    claims: tuple[PodClaimRef, ...]
    claim_statuses: Mapping[str, str | None]  # pod claim name -> generated claim name (None: none needed)
    requests: Mapping[str, int]  # effective requests incl. init containers and overhead
    scheduling_gates: tuple[str, ...]
    pod_group: str  # name of the PodGroup this pod belongs to ("" = none)
    raw: Raw = field(repr=False, compare=False)
    # spec.affinity.podAffinity / podAntiAffinity present (any term), and required anti-affinity terms
    # present: the cache lists such pods per node (upstream NodeInfo.PodsWithAffinity /
    # PodsWithRequiredAntiAffinity) so InterPodAffinity does not scan every pod.
    has_pod_affinity: bool = False
    has_required_anti_affinity: bool = False
    # Per-object scratch space for plugins' parsed views of ``raw`` (affinity terms, ports, volumes),
    # filled lazily by the plugin that needs it; never part of equality.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def uid(self) -> str:
        return self.meta.uid

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(spec: Raw, status: Raw | None = None) -> dict[str, int]:
    """Effective pod requests the way kube-scheduler counts them (KEP-753 sidecars included).

    sum(containers) + sum(restartable init containers), compared per resource with the largest
    regular init container plus the restartable init containers started before it; plus overhead.

    As ``k8s.io/component-helpers/resource.PodRequests`` (v0.37.2) with the gates on by default in 1.37:
    container limits default missing requests (API defaulting, ``SetDefaults_Pod``); pod-level
    ``spec.resources.requests`` (PodLevelResources) replace cpu, memory and hugepages-*; with
    ``status`` (InPlacePodVerticalScaling, InPlacePodLevelResourcesVerticalScaling) each resource is
    max(spec, allocated, actuated), or max(allocated, actuated) while a resize is Infeasible. Quantities
    the API server would refuse (negative, unparsable) count as absent here; :func:`pod_resource_errors`
    names them.
    """
    return _pod_requests(spec, status or {}, None)


def pod_from(raw: Raw) -> Pod:
    spec, status = _map(raw, "spec"), _map(raw, "status")
    meta = meta_from(raw)
    na = _map(_map(spec, "affinity"), "nodeAffinity")
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = (
        node_selector_from(req, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(req, Mapping)
        else None
    )
    preferred = []
    for i, p in enumerate(_list(na, "preferredDuringSchedulingIgnoredDuringExecution")):
        if isinstance(p, Mapping):
            w = p.get("weight")
            preferred.append(
                PreferredTerm(
                    w if isinstance(w, int) else 0,
                    selector_term_from(
                        _map(p, "preference"),
                        f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                    ),
                )
            )
    claims = []
    for c in _list(spec, "resourceClaims"):
        if isinstance(c, Mapping):
            claims.append(
                PodClaimRef(
                    _str(c, "name"),
                    c.get("resourceClaimName") if isinstance(c.get("resourceClaimName"), str) else None,
                    c.get("resourceClaimTemplateName") if isinstance(c.get("resourceClaimTemplateName"), str) else None,
                )
            )
    statuses: dict[str, str | None] = {}
    for s in _list(status, "resourceClaimStatuses"):
        if isinstance(s, Mapping):
            n = s.get("resourceClaimName")
            statuses[_str(s, "name")] = n if isinstance(n, str) else None
    prio = spec.get("priority")
    aff = _map(spec, "affinity")
    pa, paa = _map(aff, "podAffinity"), _map(aff, "podAntiAffinity")
    group = meta.labels.get(POD_GROUP_LABEL, "")
    if not group:
        sg = _map(spec, "schedulingGroup")
        group = _str(sg, "podGroupName")
    return Pod(
        meta=meta,
        scheduler_name=_str(spec, "schedulerName", DEFAULT_SCHEDULER_NAME),
        node_name=_str(spec, "nodeName"),
        priority=prio if isinstance(prio, int) else 0,
        phase=_str(status, "phase", "Pending"),
        node_selector=_strmap(spec, "nodeSelector"),
        required_affinity=required,
        preferred_affinity=tuple(preferred),
        tolerations=_tolerations(_list(spec, "tolerations")),
        claims=tuple(claims),
        claim_statuses=statuses,
        requests=pod_requests(spec, status),
        scheduling_gates=tuple(_str(g, "name") for g in _list(spec, "schedulingGates") if isinstance(g, Mapping)),
        pod_group=group,
        raw=raw,
        has_pod_affinity=bool(pa or paa),
        has_required_anti_affinity=bool(_list(paa, "requiredDuringSchedulingIgnoredDuringExecution")),
    )


# PodGroup ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroupClaim:
    """A ``scheduling.k8s.io/v1beta1`` ``PodGroupSpec.resourceClaims`` entry (exactly one of the names set)."""

    name: str
    claim_name: str | None
    template_name: str | None


@dataclass(frozen=True, slots=True)
class PodGroup:
    meta: Meta
    api_version: str
    min_member: int
    min_resources: Mapping[str, int]
    schedule_timeout_seconds: int | None
    raw: Raw = field(repr=False, compare=False)
    # scheduling.k8s.io/v1beta1 only (k8s.io/api v0.37.2 PodGroupSpec): "gang" or "basic" (spec.schedulingPolicy),
    # spec.schedulingConstraints.topology[0].key, spec.parentCompositePodGroupName, spec.resourceClaims and
    # spec.disruptionMode.all. Empty for scheduling.x-k8s.io/v1alpha1 groups.
    policy: str = ""
    topology_key: str = ""
    parent: str = ""
    claims: tuple[PodGroupClaim, ...] = ()
    disruption_all: bool = False

    @property
    def is_upstream(self) -> bool:
        """A Kubernetes 1.37 ``scheduling.k8s.io`` PodGroup (not the scheduler-plugins CRD)."""
        return self.api_version.startswith("scheduling.k8s.io/")


def _opt_str(obj: Raw, key: str) -> str | None:
    v = obj.get(key)
    return v if isinstance(v, str) else None


def podgroup_from(raw: Raw) -> PodGroup:
    api = _str(raw, "apiVersion")
    spec = _map(raw, "spec")
    if api.startswith("scheduling.k8s.io/"):
        policy = _map(spec, "schedulingPolicy")
        gang = policy.get("gang")
        mc = gang.get("minCount") if isinstance(gang, Mapping) else None
        topology = [t for t in _list(_map(spec, "schedulingConstraints"), "topology") if isinstance(t, Mapping)]
        return PodGroup(
            meta_from(raw),
            api,
            mc if isinstance(mc, int) and not isinstance(mc, bool) else 1,
            {},
            None,
            raw,
            policy="gang" if isinstance(gang, Mapping) else "basic",
            topology_key=_str(topology[0], "key") if topology else "",
            parent=_str(spec, "parentCompositePodGroupName"),
            claims=tuple(
                PodGroupClaim(
                    _str(c, "name"), _opt_str(c, "resourceClaimName"), _opt_str(c, "resourceClaimTemplateName")
                )
                for c in _list(spec, "resourceClaims")
                if isinstance(c, Mapping)
            ),
            disruption_all=isinstance(_map(spec, "disruptionMode").get("all"), Mapping),
        )
    mm = spec.get("minMember")
    to = spec.get("scheduleTimeoutSeconds")
    return PodGroup(
        meta_from(raw),
        api,
        mm if isinstance(mm, int) else 1,
        resource_list(_map(spec, "minResources"), "spec.minResources"),
        to if isinstance(to, int) else None,
        raw,
    )


# Pod resource requests (component-helpers resource.PodRequests, 1.37 default gates) --------------------
# Used by pod_requests above, by NodeResourcesFit (scoring requests) and the cache (non-zero requests).

DEFAULT_MILLI_CPU_REQUEST = 100  # kube-scheduler util.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # util.DefaultMemoryRequest
HUGEPAGES_PREFIX = "hugepages-"
_POD_LEVEL_RESOURCES = (CPU, MEMORY)  # IsSupportedPodLevelResource: these and hugepages-*
_RESIZE_PENDING = "PodResizePending"


def is_supported_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def _lenient_quantity(name: str, value: Any) -> int | None:
    """A request value in scheduler units, or None when the API server would refuse it (null: 0, as
    ``Quantity.UnmarshalJSON`` reads it)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    return _lenient_amount(name, str(value))


@functools.lru_cache(maxsize=16384)
def _lenient_amount(name: str, text: str) -> int | None:
    """``_lenient_quantity`` of a quantity's text (pods repeat the same few: "1", "2Gi"; each conversion of a
    pod parses them again)."""
    try:
        q = parse_quantity(text)
    except QuantityError:
        return None
    if q.sign() < 0:
        return None
    return resource_amount(name, q)


def _lenient_list(raw: Any) -> dict[str, int]:
    if raw is None or not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for k, v in raw.items():
        n = _lenient_quantity(str(k), v)
        if n is not None:
            out[str(k)] = n
    return out


def container_requests(c: Raw) -> dict[str, int]:
    """A container's requests after API defaulting: a resource with a limit and no request requests its
    limit (``SetDefaults_Pod``)."""
    res = _map(c, "resources")
    out = _lenient_list(res.get("limits"))
    out.update(_lenient_list(res.get("requests")))
    return out


def _statuses_by_name(status: Raw) -> dict[str, Raw]:
    """``findContainerStatus``: containerStatuses first, then initContainerStatuses."""
    out: dict[str, Raw] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in _list(status, key):
            if isinstance(cs, Mapping):
                out.setdefault(_str(cs, "name"), cs)
    return out


def _resize_infeasible(status: Raw) -> bool:
    for c in _list(status, "conditions"):
        if isinstance(c, Mapping) and _str(c, "type") == _RESIZE_PENDING:
            return _str(c, "reason") == "Infeasible"
    return False


def _aggregate(
    spec: Raw,
    status_of: Mapping[str, Raw],
    kind: str,
    infeasible: bool,
    non_missing: Mapping[str, int] | None,
) -> dict[str, int]:
    """``aggregateContainerResourcesByFn``: kind "spec", "allocated" or "actuated" requests per container."""

    def requests_of(c: Raw) -> dict[str, int] | None:
        spec_reqs = container_requests(c)
        if kind == "spec":
            return spec_reqs
        cs = status_of.get(_str(c, "name"))
        if kind == "actuated" and cs is not None:
            actual = _map(_map(cs, "resources"), "requests")
            if actual:
                return _lenient_list(actual)
        if cs is not None and isinstance(cs.get("allocatedResources"), Mapping):
            return _lenient_list(cs.get("allocatedResources"))
        return None if infeasible else spec_reqs

    def with_defaults(reqs: dict[str, int] | None) -> dict[str, int]:
        out = dict(reqs or {})
        for k, v in (non_missing or {}).items():
            if reqs is None or k not in reqs:
                out[k] = out.get(k, 0) + v
        return out

    total: dict[str, int] = {}
    for c in _list(spec, "containers"):
        if isinstance(c, Mapping):
            _add(total, with_defaults(requests_of(c)))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in _list(spec, "initContainers"):
        if not isinstance(c, Mapping):
            continue
        req = with_defaults(requests_of(c))
        if _str(c, "restartPolicy") == "Always":
            _add(sidecars, req)
            _add(total, req)
            _max(init_peak, sidecars)
        else:
            tmp = dict(sidecars)
            _add(tmp, req)
            _max(init_peak, tmp)
    _max(total, init_peak)
    return total


def _max_of(first: Mapping[str, int] | None, *others: Mapping[str, int] | None) -> dict[str, int]:
    out = dict(first or {})
    for o in others:
        _max(out, o or {})
    return out


def pod_level_requests(spec: Raw) -> dict[str, int]:
    """``spec.resources.requests`` after API defaulting (``defaultPodRequests``): a supported resource with
    a pod-level limit and no pod-level request requests the aggregated container requests when containers
    request it (cpu, memory) and else its pod-level limit."""
    res = _map(spec, "resources")
    reqs = _lenient_list(res.get("requests"))
    limits = _lenient_list(res.get("limits"))
    if limits:
        containers: dict[str, int] | None = None
        for k, v in limits.items():
            if k in reqs or not is_supported_pod_level_resource(k):
                continue
            if k in _POD_LEVEL_RESOURCES:
                if containers is None:
                    containers = _aggregate(spec, {}, "spec", False, None)
                if k in containers:
                    reqs[k] = containers[k]
                    continue
            reqs[k] = v
    return {k: v for k, v in reqs.items() if is_supported_pod_level_resource(k)}


def _pod_requests(spec: Raw, status: Raw, non_missing: Mapping[str, int] | None) -> dict[str, int]:
    infeasible = _resize_infeasible(status)
    status_of = _statuses_by_name(status)
    reqs = _aggregate(spec, status_of, "spec", infeasible, non_missing)
    if status_of or _map(status, "resources"):
        pod_status_res = status.get("resources")
        pod_alloc = status.get("allocatedResources")
        if (
            isinstance(pod_alloc, Mapping)
            and isinstance(pod_status_res, Mapping)
            and isinstance(pod_status_res.get("requests"), Mapping)
        ):
            allocated = _lenient_list(pod_alloc)
            actuated = _lenient_list(pod_status_res.get("requests"))
        else:
            allocated = _aggregate(spec, status_of, "allocated", infeasible, non_missing)
            actuated = _aggregate(spec, status_of, "actuated", infeasible, non_missing)
        reqs = _max_of(actuated, allocated) if infeasible else _max_of(reqs, actuated, allocated)
    pod_level = pod_level_requests(spec)
    if pod_level:
        effective = pod_level
        pod_status_res = status.get("resources")
        if isinstance(pod_status_res, Mapping):
            effective = _max_of(
                None if infeasible else pod_level,
                _lenient_list(pod_status_res.get("requests")),
                _lenient_list(status.get("allocatedResources")),
            )
        for k, v in effective.items():
            if is_supported_pod_level_resource(k):
                reqs[k] = v
    _add(reqs, _lenient_list(spec.get("overhead")))
    return reqs


def pod_non_zero_requests(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, memory) a pod counts for on its node's ``NonZeroRequested`` (``PodInfo.CalculateResource``):
    containers without a cpu / memory request count 100m / 200Mi; with pod-level requests only a resource
    nobody requests gets the default."""
    got = pod.memo.get("model/non-zero")
    if got is None:
        spec, status = _map(pod.raw, "spec"), _map(pod.raw, "status")
        reqs = pod.requests
        if pod_level_requests(spec):
            defaults = {
                k: v
                for k, v in ((CPU, DEFAULT_MILLI_CPU_REQUEST), (MEMORY, DEFAULT_MEMORY_REQUEST))
                if k not in reqs
            }
        else:
            defaults = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
        non0 = _pod_requests(spec, status, defaults) if defaults else reqs
        got = (non0.get(CPU, 0), non0.get(MEMORY, 0))
        pod.memo["model/non-zero"] = got
    return got


def pod_score_requests(pod: Pod) -> Mapping[str, int]:
    """The pod's requests as NodeResourcesFit's scorers count them (``calculatePodResourceRequest``):
    every container without a cpu / memory request counts 100m / 200Mi."""
    got = pod.memo.get("model/score-requests")
    if got is None:
        got = _pod_requests(
            _map(pod.raw, "spec"),
            _map(pod.raw, "status"),
            {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST},
        )
        pod.memo["model/score-requests"] = got
    return got


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _overcommit_allowed(name: str) -> bool:
    """``helper.IsOvercommitAllowed``: native resources except hugepages."""
    return _is_native_resource(name) and not name.startswith(HUGEPAGES_PREFIX)


def _quantity_errors(name: str, value: Any, path: str) -> tuple[Quantity | None, list[str]]:
    if value is None:  # null: the zero quantity (Quantity.UnmarshalJSON)
        return _ZERO, []
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None, [f"{path}: Invalid value: {json.dumps(value, default=str)[:80]}: must be a quantity"]
    try:
        q = parse_quantity(str(value))
    except QuantityError as e:
        text = str(value)
        return None, [f"{path}: Invalid value: {json.dumps(text if len(text) <= 60 else text[:60] + '…')}: {e}"]
    errs: list[str] = []
    if q.sign() < 0:
        errs.append(f'{path}: Invalid value: "{q}": must be greater than or equal to 0')
    elif not _is_native_resource(name) and not name.startswith("requests.") and not q.is_integer():
        errs.append(f'{path}: Invalid value: "{q}": must be an integer')
    return q, errs


def _requirements_errors(res: Raw, path: str) -> list[str]:
    """``validateResourceRequirements`` (quantities, request vs limit)."""
    errs: list[str] = []
    limits: dict[str, Quantity] = {}
    for k, v in _map(res, "limits").items():
        q, e = _quantity_errors(str(k), v, f"{path}.limits[{k}]")
        errs += e
        if q is not None:
            limits[str(k)] = q
    for k, v in _map(res, "requests").items():
        q, e = _quantity_errors(str(k), v, f"{path}.requests[{k}]")
        errs += e
        lim = limits.get(str(k))
        if q is None or lim is None or e:
            continue
        if q.cmp(lim) != 0 and not _overcommit_allowed(str(k)):
            errs.append(f'{path}.requests: Invalid value: "{q}": must be equal to {k} limit of {lim}')
        elif q.cmp(lim) > 0:
            errs.append(f'{path}.requests: Invalid value: "{q}": must be less than or equal to {k} limit of {lim}')
    return errs


def pod_resource_errors(pod: Pod) -> tuple[str, ...]:
    """What the API server's pod validation says about the pod's resource quantities (negative or
    unparsable values, non-integer extended resources, requests above limits), with field paths."""
    got = pod.memo.get("model/resource-errors")
    if got is None:
        spec = _map(pod.raw, "spec")
        errs: list[str] = []
        for key in ("initContainers", "containers"):
            for i, c in enumerate(_list(spec, key)):
                if isinstance(c, Mapping):
                    errs += _requirements_errors(_map(c, "resources"), f"spec.{key}[{i}].resources")
        if isinstance(spec.get("resources"), Mapping):
            errs += _requirements_errors(_map(spec, "resources"), "spec.resources")
        for k, v in _map(spec, "overhead").items():
            errs += _quantity_errors(str(k), v, f"spec.overhead[{k}]")[1]
        got = tuple(errs)
        pod.memo["model/resource-errors"] = got
    return got
