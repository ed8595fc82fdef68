"""Typed, frozen values for the DRA kinds of ``resource.k8s.io/v1`` the scheduler reads: ResourceSlice (its
devices, capacities, counters), DeviceClass, ResourceClaim (spec, allocation, consumers) and
ResourceClaimTemplate.

Converted once at the edge, as the core kinds in :mod:`scheduler.api.model` are (whose helpers, metadata, node
selectors and taints these values use): every value keeps the dict it came from in ``raw``; API defaulting the
allocator relies on (``allocationMode``, ``count``, toleration ``operator``) is applied during conversion, as the
apiserver would; problems raise :class:`~scheduler.api.model.ModelError` with the field path. A claim's spec is
built once per claim (and shared by claims of equal specs), not at every watch event (:func:`claim_from`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.model import (
    Meta,
    ModelError,
    NodeSelector,
    Raw,
    Taint,
    _list,
    _map,
    _str,
    _taints,
    meta_from,
    node_selector_from,
    quantity,
    toleration_tolerates,
)
from scheduler.api.quantity import Quantity
from scheduler.api.semver import SemverError, Version
from scheduler.api.semver import parse as parse_semver

# Well-known names -----------------------------------------------------------------------------------

CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
ADMIN_ACCESS_NS_LABEL = "resource.kubernetes.io/admin-access"

ALLOCATION_MODE_EXACT = "ExactCount"
ALLOCATION_MODE_ALL = "All"


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
    if raw.__class__ is dict and len(raw) == 1:  # one value field of its exact type: the common case, fast
        for f, v in raw.items():
            cls = v.__class__
            if f == "string" and cls is str:
                return v  # type: ignore[no-any-return]
            if f == "int" and cls is int:
                return v  # type: ignore[no-any-return]
            if f == "bool" and cls is bool:
                return v  # type: ignore[no-any-return]
            if f == "version" and cls is str:
                return parse_semver(v)
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


# A device with only these fields (the common shape: a GPU as the NVIDIA driver publishes it) takes the short way
_PLAIN_DEVICE_FIELDS = frozenset(("name", "attributes", "capacity"))


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
        if v.__class__ is dict and len(v) == 1 and v.get("value").__class__ is str:  # {"value": "80Gi"}
            caps[str(k)] = DeviceCapacity(quantity(v["value"], f"{path}.capacity.{k}.value"), None)
            continue
        p = f"{path}.capacity.{k}"
        if not isinstance(v, Mapping):
            raise ModelError(p, "must be an object")
        pol = v.get("requestPolicy")
        caps[str(k)] = DeviceCapacity(
            quantity(v.get("value"), f"{p}.value"),
            _capacity_policy(pol, f"{p}.requestPolicy") if isinstance(pol, Mapping) else None,
        )
    if raw.keys() <= _PLAIN_DEVICE_FIELDS:  # every other field absent: its zero value
        return Device(
            name=name,
            attributes=attrs,
            attribute_error=attr_error,
            capacity=caps,
            consumes_counters=(),
            node_name="",
            node_selector=None,
            all_nodes=False,
            taints=(),
            binds_to_node=False,
            binding_conditions=(),
            binding_failure_conditions=(),
            allow_multiple_allocations=False,
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
        return toleration_tolerates(self.key, self.operator, self.value, self.effect, t)

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


# claim uid -> (a private copy of its raw spec, the ClaimSpec built from it). A ResourceClaim's spec never changes
# after creation (the API server refuses spec updates), and each claim arrives several times (created, finalizer
# added, allocated, reserved): its spec is built once, not at every watch event. Checked against the copy by
# equality, so an object of the same uid with another spec (an in-memory test, a dict changed in place) is built
# anew. Oldest entries dropped beyond the bound.
_CLAIM_SPECS: dict[str, tuple[Any, ClaimSpec]] = {}
_CLAIM_SPECS_MAX = 20_000


# The last few distinct specs built (private copy, ClaimSpec), most recent last. Claims made from one template (a
# Deployment's, a Job's: 10,000 at a start-up) have equal specs: each new uid's spec is compared with these (a dict
# comparison, ~1 us) before it is built (~75 us with its canonical JSON and private copy), and shares the typed spec
# (immutable; equality and hash are by fingerprint anyway). Specs are compared by value, so a spec that differs in
# any field is built from its own raw.
_RECENT_SPECS: list[tuple[Any, ClaimSpec]] = []
_RECENT_SPECS_MAX = 8


def _claim_spec(uid: str, spec_raw: Raw) -> ClaimSpec:
    hit = _CLAIM_SPECS.get(uid) if uid else None
    if hit is not None and hit[0] == spec_raw:
        return hit[1]
    recent = _RECENT_SPECS
    for i in range(len(recent) - 1, -1, -1):
        if recent[i][0] == spec_raw:
            hit = recent[i]
            if i != len(recent) - 1:
                recent.append(recent.pop(i))
            break
    else:
        spec = claim_spec_from(spec_raw)
        try:
            frozen = json.loads(spec.fingerprint)  # the canonical JSON of the spec: a copy nobody else holds
        except ValueError:
            return spec
        hit = (frozen, spec)
        recent.append(hit)
        if len(recent) > _RECENT_SPECS_MAX:
            del recent[0]
    if uid:
        if len(_CLAIM_SPECS) >= _CLAIM_SPECS_MAX:
            del _CLAIM_SPECS[next(iter(_CLAIM_SPECS))]
        _CLAIM_SPECS[uid] = hit
    return hit[1]


def forget_claim_spec(uid: str) -> None:
    """The claim ``uid`` is deleted: its spec is not needed any more (the cache calls this, so a scheduler under
    churn holds the specs of the claims that exist, not of the last 20,000 ever seen)."""
    _CLAIM_SPECS.pop(uid, None)


def claim_from(raw: Raw) -> ResourceClaim:
    status = _map(raw, "status")
    alloc = status.get("allocation")
    meta = meta_from(raw)
    return ResourceClaim(
        meta=meta,
        spec=_claim_spec(meta.uid, _map(raw, "spec")),
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
