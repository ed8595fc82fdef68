"""Typed, frozen values for the Kubernetes objects the scheduler reads.

Raw API JSON (dicts) is converted here, once, at the edge. Every value keeps the dict it came from in
``raw`` so that writes can be built as patches without erasing fields this version does not know.
API defaulting that the allocator relies on (``allocationMode``, ``count``, toleration ``operator``)
is applied during conversion, as the apiserver would.

Conversion problems raise :class:`ModelError` with the field path of the offending value.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plugins.dra.quantity import Quantity, QuantityError, parse_quantity
from plugins.dra.semver import SemverError, Version
from plugins.dra.semver import parse as parse_semver

Raw = Mapping[str, Any]

# Well-known names -----------------------------------------------------------------------------------

CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
ADMIN_ACCESS_NS_LABEL = "resource.kubernetes.io/admin-access"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

ALLOCATION_MODE_EXACT = "ExactCount"
ALLOCATION_MODE_ALL = "All"


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
    return {str(k): str(v) for k, v in _map(obj, key).items()}


def quantity(value: Any, path: str) -> Quantity:
    if isinstance(value, bool):
        raise ModelError(path, f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        raise ModelError(path, f"invalid quantity {value!r}")
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise ModelError(path, f"invalid quantity {value!r}: {e}") from None


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
        if self.effect and self.effect != t.effect:
            return False
        if self.key and self.key != t.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == t.value
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
    return {str(k): resource_amount(str(k), quantity(v, f"{path}.{k}")) for k, v in raw.items()}


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


def pod_requests(spec: Raw) -> dict[str, int]:
    """Effective pod requests the way kube-scheduler counts them (KEP-753 sidecars included).

    sum(containers) + sum(restartable init containers), compared per resource with the largest
    regular init container plus the restartable init containers started before it; plus overhead.
    """
    total: dict[str, int] = {}
    for i, c in enumerate(_list(spec, "containers")):
        _add(total, resource_list(_map(_map(c, "resources"), "requests"), f"spec.containers[{i}].resources.requests"))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(_list(spec, "initContainers")):
        req = resource_list(_map(_map(c, "resources"), "requests"), f"spec.initContainers[{i}].resources.requests")
        if _str(c, "restartPolicy") == "Always":
            _add(sidecars, req)
            _add(total, req)
        else:
            tmp = dict(sidecars)
            _add(tmp, req)
            _max(init_peak, tmp)
    _max(total, init_peak)
    _add(total, resource_list(_map(spec, "overhead"), "spec.overhead"))
    return total


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
        requests=pod_requests(spec),
        scheduling_gates=tuple(_str(g, "name") for g in _list(spec, "schedulingGates") if isinstance(g, Mapping)),
        pod_group=group,
        raw=raw,
        has_pod_affinity=bool(pa or paa),
        has_required_anti_affinity=bool(_list(paa, "requiredDuringSchedulingIgnoredDuringExecution")),
    )


# DRA: ResourceSlice ---------------------------------------------------------------------------------

AttributeValue = int | bool | str | Version | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...] | tuple[Version, ...]


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    default: Quantity | None
    valid_values: tuple[Quantity, ...] | None
    range_min: Quantity | None
    range_max: Quantity | None
    range_step: Quantity | None
    has_range: bool


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Quantity
    policy: CapacityPolicy | None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    """One device of a slice. Identity-compared: a new slice object means new devices."""

    name: str
    attributes: Mapping[str, AttributeValue]
    attribute_error: str | None  # "attribute X: unsupported attribute value" — fails every selector
    capacity: Mapping[str, DeviceCapacity]
    consumes_counters: tuple[CounterConsumption, ...]
    node_name: str
    node_selector: NodeSelector | None
    all_nodes: bool
    taints: tuple[Taint, ...]
    binds_to_node: bool
    binding_conditions: tuple[str, ...]
    binding_failure_conditions: tuple[str, ...]
    allow_multiple_allocations: bool


_slice_serial = itertools.count(1)


@dataclass(frozen=True, slots=True, eq=False)
class ResourceSlice:
    """``serial`` is unique per converted object: caches keyed by it (CEL results per device) are
    invalidated by any change of the slice, whatever its resourceVersion says."""

    meta: Meta
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str
    node_selector: NodeSelector | None
    all_nodes: bool
    per_device_node_selection: bool
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...]
    raw: Raw = field(repr=False, compare=False)
    serial: int = field(default_factory=lambda: next(_slice_serial))

    @property
    def name(self) -> str:
        return self.meta.name


def _attribute(raw: Any) -> AttributeValue | None:
    if not isinstance(raw, Mapping):
        return None
    if "int" in raw and isinstance(raw["int"], int) and not isinstance(raw["int"], bool):
        return int(raw["int"])
    if "bool" in raw and isinstance(raw["bool"], bool):
        return bool(raw["bool"])
    if "string" in raw and isinstance(raw["string"], str):
        return str(raw["string"])
    if "version" in raw and isinstance(raw["version"], str):
        return parse_semver(raw["version"])
    if isinstance(raw.get("ints"), list) and raw["ints"]:
        return tuple(int(x) for x in raw["ints"])
    if isinstance(raw.get("bools"), list) and raw["bools"]:
        return tuple(bool(x) for x in raw["bools"])
    if isinstance(raw.get("strings"), list) and raw["strings"]:
        return tuple(str(x) for x in raw["strings"])
    if isinstance(raw.get("versions"), list) and raw["versions"]:
        return tuple(parse_semver(str(x)) for x in raw["versions"])
    return None


def _capacity_policy(raw: Raw, path: str) -> CapacityPolicy:
    d = raw.get("default")
    vv = raw.get("validValues")
    vr = raw.get("validRange")
    rng = vr if isinstance(vr, Mapping) else None
    return CapacityPolicy(
        default=quantity(d, f"{path}.default") if d is not None else None,
        valid_values=(
            tuple(quantity(v, f"{path}.validValues[{i}]") for i, v in enumerate(vv)) if isinstance(vv, list) else None
        ),
        range_min=quantity(rng["min"], f"{path}.validRange.min") if rng and rng.get("min") is not None else None,
        range_max=quantity(rng["max"], f"{path}.validRange.max") if rng and rng.get("max") is not None else None,
        range_step=quantity(rng["step"], f"{path}.validRange.step") if rng and rng.get("step") is not None else None,
        has_range=rng is not None,
    )


def _counter_map(raw: Raw, path: str) -> dict[str, Quantity]:
    return {str(k): quantity(_map(raw, k).get("value"), f"{path}.{k}.value") for k in raw}


def device_from(raw: Raw, path: str) -> Device:
    name = _str(raw, "name")
    if not name:
        raise ModelError(f"{path}.name", "required")
    attrs: dict[str, AttributeValue] = {}
    attr_error = None
    for k, v in _map(raw, "attributes").items():
        try:
            val = _attribute(v)
        except (SemverError, ValueError, TypeError) as e:
            val, attr_error = None, f"attribute {k}: {e}"
        if val is None:
            attr_error = attr_error or f"attribute {k}: unsupported attribute value"
            continue
        attrs[str(k)] = val
    caps: dict[str, DeviceCapacity] = {}
    for k, v in _map(raw, "capacity").items():
        p = f"{path}.capacity.{k}"
        if not isinstance(v, Mapping):
            raise ModelError(p, "must be an object")
        pol = v.get("requestPolicy")
        caps[str(k)] = DeviceCapacity(
            quantity(v.get("value"), f"{p}.value"),
            _capacity_policy(pol, f"{p}.requestPolicy") if isinstance(pol, Mapping) else None,
        )
    consumes = tuple(
        CounterConsumption(_str(c, "counterSet"), _counter_map(_map(c, "counters"), f"{path}.consumesCounters[{i}]"))
        for i, c in enumerate(_list(raw, "consumesCounters"))
        if isinstance(c, Mapping)
    )
    ns = raw.get("nodeSelector")
    return Device(
        name=name,
        attributes=attrs,
        attribute_error=attr_error,
        capacity=caps,
        consumes_counters=consumes,
        node_name=_str(raw, "nodeName"),
        node_selector=node_selector_from(ns, f"{path}.nodeSelector") if isinstance(ns, Mapping) else None,
        all_nodes=bool(raw.get("allNodes")),
        taints=_taints(_list(raw, "taints")),
        binds_to_node=bool(raw.get("bindsToNode")),
        binding_conditions=tuple(str(x) for x in _list(raw, "bindingConditions")),
        binding_failure_conditions=tuple(str(x) for x in _list(raw, "bindingFailureConditions")),
        allow_multiple_allocations=bool(raw.get("allowMultipleAllocations")),
    )


def slice_from(raw: Raw) -> ResourceSlice:
    spec = _map(raw, "spec")
    pool = _map(spec, "pool")
    gen = pool.get("generation")
    count = pool.get("resourceSliceCount")
    ns = spec.get("nodeSelector")
    return ResourceSlice(
        meta=meta_from(raw),
        driver=_str(spec, "driver"),
        pool=_str(pool, "name"),
        generation=gen if isinstance(gen, int) else 0,
        slice_count=count if isinstance(count, int) and count > 0 else 1,
        node_name=_str(spec, "nodeName"),
        node_selector=node_selector_from(ns, "spec.nodeSelector") if isinstance(ns, Mapping) else None,
        all_nodes=bool(spec.get("allNodes")),
        per_device_node_selection=bool(spec.get("perDeviceNodeSelection")),
        devices=tuple(
            device_from(d, f"spec.devices[{i}]") for i, d in enumerate(_list(spec, "devices")) if isinstance(d, Mapping)
        ),
        shared_counters=tuple(
            CounterSet(_str(c, "name"), _counter_map(_map(c, "counters"), f"spec.sharedCounters[{i}].counters"))
            for i, c in enumerate(_list(spec, "sharedCounters"))
            if isinstance(c, Mapping)
        ),
        raw=raw,
    )


# DRA: DeviceClass, claims, templates -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClass:
    meta: Meta
    selectors: tuple[str | None, ...]  # CEL expressions; None = a selector type this version does not know
    config: tuple[Raw, ...]  # DeviceClassConfiguration entries (raw, copied into results)
    extended_resource_name: str
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


def _selectors(raw: Sequence[Any]) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for s in raw:
        cel = _map(s, "cel") if isinstance(s, Mapping) else {}
        expr = cel.get("expression")
        out.append(expr if isinstance(expr, str) and expr else None)
    return tuple(out)


def class_from(raw: Raw) -> DeviceClass:
    spec = _map(raw, "spec")
    return DeviceClass(
        meta=meta_from(raw),
        selectors=_selectors(_list(spec, "selectors")),
        config=tuple(c for c in _list(spec, "config") if isinstance(c, Mapping)),
        extended_resource_name=_str(spec, "extendedResourceName"),
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str
    operator: str
    value: str
    effect: str
    toleration_seconds: int | None

    def tolerates(self, t: Taint) -> bool:
        if self.effect and self.effect != t.effect:
            return False
        if self.key and self.key != t.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == t.value
        return False

    def to_raw(self) -> dict[str, Any]:
        d: dict[str, Any] = {"operator": self.operator}
        if self.key:
            d["key"] = self.key
        if self.value:
            d["value"] = self.value
        if self.effect:
            d["effect"] = self.effect
        if self.toleration_seconds is not None:
            d["tolerationSeconds"] = self.toleration_seconds
        return d


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """An ``exactly`` request or a ``firstAvailable`` subrequest (defaulted)."""

    name: str
    device_class_name: str
    selectors: tuple[str | None, ...]
    allocation_mode: str
    count: int
    admin_access: bool | None  # None = field not set
    tolerations: tuple[DeviceToleration, ...]
    capacity: tuple[tuple[str, Quantity], ...]  # capacity.requests


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: RequestSpec | None
    first_available: tuple[RequestSpec, ...]


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    requests: tuple[str, ...]
    raw: Raw = field(compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """Equality and hash use only the canonical JSON of the raw spec: identical specs (e.g. claims
    generated from one template) compare equal cheaply, which the per-node result cache relies on."""

    requests: tuple[DeviceRequest, ...] = field(compare=False)
    constraints: tuple[DeviceConstraint, ...] = field(compare=False)
    config: tuple[ClaimConfig, ...] = field(compare=False)
    fingerprint: str = ""


def _device_tolerations(raw: Sequence[Any]) -> tuple[DeviceToleration, ...]:
    out = []
    for t in raw:
        if isinstance(t, Mapping):
            ts = t.get("tolerationSeconds")
            out.append(
                DeviceToleration(
                    _str(t, "key"),
                    _str(t, "operator") or "Equal",
                    _str(t, "value"),
                    _str(t, "effect"),
                    ts if isinstance(ts, int) else None,
                )
            )
    return tuple(out)


def _request_spec(raw: Raw, name: str, path: str, exact: bool) -> RequestSpec:
    mode = _str(raw, "allocationMode") or ALLOCATION_MODE_EXACT
    count_raw = raw.get("count")
    count = count_raw if isinstance(count_raw, int) and not isinstance(count_raw, bool) else 0
    if mode == ALLOCATION_MODE_EXACT and count == 0:
        count = 1
    if count < 0:
        raise ModelError(f"{path}.count", "must be greater than zero")
    admin = raw.get("adminAccess") if exact else None
    caps = _map(_map(raw, "capacity"), "requests")
    return RequestSpec(
        name=name,
        device_class_name=_str(raw, "deviceClassName"),
        selectors=_selectors(_list(raw, "selectors")),
        allocation_mode=mode,
        count=count,
        admin_access=bool(admin) if isinstance(admin, bool) else None,
        tolerations=_device_tolerations(_list(raw, "tolerations")),
        capacity=tuple(sorted((str(k), quantity(v, f"{path}.capacity.requests.{k}")) for k, v in caps.items())),
    )


def claim_spec_from(raw: Raw, path: str = "spec") -> ClaimSpec:
    devices = _map(raw, "devices")
    requests = []
    for i, r in enumerate(_list(devices, "requests")):
        p = f"{path}.devices.requests[{i}]"
        if not isinstance(r, Mapping):
            raise ModelError(p, "must be an object")
        name = _str(r, "name")
        ex = r.get("exactly")
        fa = _list(r, "firstAvailable")
        requests.append(
            DeviceRequest(
                name=name,
                exactly=_request_spec(ex, name, f"{p}.exactly", True) if isinstance(ex, Mapping) else None,
                first_available=tuple(
                    _request_spec(s, f"{name}/{_str(s, 'name')}", f"{p}.firstAvailable[{j}]", False)
                    for j, s in enumerate(fa)
                    if isinstance(s, Mapping)
                ),
            )
        )
    constraints = tuple(
        DeviceConstraint(
            tuple(str(x) for x in _list(c, "requests")),
            c.get("matchAttribute") if isinstance(c.get("matchAttribute"), str) else None,
            c.get("distinctAttribute") if isinstance(c.get("distinctAttribute"), str) else None,
        )
        for c in _list(devices, "constraints")
        if isinstance(c, Mapping)
    )
    config = tuple(
        ClaimConfig(tuple(str(x) for x in _list(c, "requests")), c)
        for c in _list(devices, "config")
        if isinstance(c, Mapping)
    )
    return ClaimSpec(tuple(requests), constraints, config, json.dumps(raw, sort_keys=True, default=str))


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool
    share_id: str
    consumed_capacity: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class Allocation:
    results: tuple[DeviceResult, ...]
    node_selector: NodeSelector | None
    raw: Raw = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    api_group: str
    resource: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    meta: Meta
    spec: ClaimSpec
    allocation: Allocation | None
    reserved_for: tuple[ConsumerRef, ...]
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def key(self) -> str:
        return self.meta.key


def allocation_from(raw: Raw, path: str) -> Allocation:
    results = []
    for i, r in enumerate(_list(_map(raw, "devices"), "results")):
        if isinstance(r, Mapping):
            results.append(
                DeviceResult(
                    request=_str(r, "request"),
                    driver=_str(r, "driver"),
                    pool=_str(r, "pool"),
                    device=_str(r, "device"),
                    admin_access=bool(r.get("adminAccess")),
                    share_id=_str(r, "shareID"),
                    consumed_capacity={
                        str(k): quantity(v, f"{path}.devices.results[{i}].consumedCapacity.{k}")
                        for k, v in _map(r, "consumedCapacity").items()
                    },
                )
            )
    ns = raw.get("nodeSelector")
    return Allocation(
        tuple(results),
        node_selector_from(ns, f"{path}.nodeSelector") if isinstance(ns, Mapping) else None,
        raw,
    )


def claim_from(raw: Raw) -> ResourceClaim:
    status = _map(raw, "status")
    alloc = status.get("allocation")
    return ResourceClaim(
        meta=meta_from(raw),
        spec=claim_spec_from(_map(raw, "spec")),
        allocation=allocation_from(alloc, "status.allocation") if isinstance(alloc, Mapping) else None,
        reserved_for=tuple(
            ConsumerRef(_str(r, "apiGroup"), _str(r, "resource"), _str(r, "name"), _str(r, "uid"))
            for r in _list(status, "reservedFor")
            if isinstance(r, Mapping)
        ),
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    meta: Meta
    spec: ClaimSpec
    raw: Raw = field(repr=False, compare=False)


def template_from(raw: Raw) -> ResourceClaimTemplate:
    spec = _map(_map(raw, "spec"), "spec")
    return ResourceClaimTemplate(meta_from(raw), claim_spec_from(spec, "spec.spec"), raw)


# PodGroup ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroup:
    meta: Meta
    api_version: str
    min_member: int
    min_resources: Mapping[str, int]
    schedule_timeout_seconds: int | None
    raw: Raw = field(repr=False, compare=False)


def podgroup_from(raw: Raw) -> PodGroup:
    api = _str(raw, "apiVersion")
    spec = _map(raw, "spec")
    if api.startswith("scheduling.k8s.io/"):
        gang = _map(_map(spec, "schedulingPolicy"), "gang")
        mc = gang.get("minCount")
        return PodGroup(meta_from(raw), api, mc if isinstance(mc, int) else 1, {}, None, raw)
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
