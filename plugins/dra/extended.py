"""Extended resources backed by DRA (KEP-5004, feature DRAExtendedResource: GA and locked on in 1.37).

A pod may ask for devices through an ordinary extended resource (``resources.limits: {example.com/gpu: 2}``)
when a DeviceClass maps that name: explicitly with ``spec.extendedResourceName``, or implicitly as
``deviceclass.resource.kubernetes.io/<class name>``. Pure helpers shared by NodeResourcesFit and
DynamicResources; sources (kubernetes v1.37.2):

* ``k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache``: which class a name resolves to.
  Implicit names always map to their class; when several classes claim the same explicit name the most
  recently created one wins, ties going to the smallest class name.
* ``pkg/scheduler/framework/plugins/noderesources/fit.go`` ``shouldDelegateResourceToDRA``: a node that
  lists the resource in its allocatable with a non-zero amount serves it natively (device plugin), and the
  request is checked as an ordinary extended resource there; on every other node a mapped resource is left
  to DynamicResources.
* ``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go``: the node-specific
  special claim (``filterExtendedResources``), its device requests and the container -> request mappings
  (``createRequestsAndMappings``: one request ``container-<i>-request-<j>`` per container and resource,
  ``i`` the index in initContainers + containers, ``j`` the resource's index among the container's sorted
  request names; init containers reuse later long-lived containers' requests, the largest init request
  serves all of them), and ``findExtendedResourceClaim``.
* ``noderesources/resource_allocation.go`` ``calculateDRAResourceTotals``: devices of the class on a node
  and how many are in use, for scoring a DRA-backed resource.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plugins.dra.cel import SelectorCache
from plugins.dra.cel_engine import device_input
from plugins.dra.cel_syntax import CELError
from plugins.dra.pools import _device_on_node, _slice_relevant
from scheduler.api.dra import DeviceClass, ResourceClaim, ResourceSlice
from scheduler.api.model import Node, Pod
from scheduler.api.quantity import QuantityError, parse_quantity
from scheduler.cache.ledger import DeviceLedger

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
SPECIAL_CLAIM_NAME = "<extended-resources>"  # the in-memory claim's name until PreBind creates it
_TEMP_UID_NAMESPACE = uuid.UUID("9a3c2d57-5e0b-4b59-a1f4-7b8f3e2d4c61")


# --- resource names (pkg/apis/core/v1/helper, pkg/scheduler/util) -------------------------------------------


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: outside ``*kubernetes.io/``, not a quota ``requests.`` name."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_dra_extended_resource_name(name: str) -> bool:
    """``schedutil.IsDRAExtendedResourceName``: an extended resource or an implicit class name."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


# --- name -> DeviceClass (extendedresourcecache) -------------------------------------------------------------

_MAPPING: list[tuple[Mapping[str, DeviceClass], dict[str, DeviceClass]]] = []


def _created(c: DeviceClass) -> float:
    ts = c.meta.creation_timestamp
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() if ts else 0.0
    except ValueError:
        return 0.0


def class_mapping(classes: Mapping[str, DeviceClass]) -> Mapping[str, DeviceClass]:
    """Extended resource name -> DeviceClass, for one (immutable) snapshot of the classes."""
    if _MAPPING and _MAPPING[0][0] is classes:
        return _MAPPING[0][1]
    out: dict[str, DeviceClass] = {}
    for c in sorted(classes.values(), key=lambda c: (-_created(c), c.name)):
        if c.extended_resource_name and c.extended_resource_name not in out:
            out[c.extended_resource_name] = c  # newest first, then the smallest name
    for c in classes.values():
        out[DEVICE_CLASS_PREFIX + c.name] = c
    _MAPPING[:] = [(classes, out)]
    return out


def backing_class(classes: Mapping[str, DeviceClass], name: str) -> DeviceClass | None:
    if not is_dra_extended_resource_name(name):
        return None
    return class_mapping(classes).get(name)


def dra_backed_requests(pod: Pod, classes: Mapping[str, DeviceClass]) -> dict[str, int]:
    """The pod's non-zero requests of resources some DeviceClass maps (``hasDeviceClassMappedExtendedResource``)."""
    if not classes:
        return {}
    mapping = class_mapping(classes)
    return {r: q for r, q in sorted(pod.requests.items()) if q and is_dra_extended_resource_name(r) and r in mapping}


def should_delegate(name: str, node: Node | None, classes: Mapping[str, DeviceClass]) -> bool:
    """``shouldDelegateResourceToDRA``: the node does not serve ``name`` natively and a class maps it."""
    if node is not None and node.allocatable.get(name, 0) > 0:
        return False
    return name in class_mapping(classes) if classes else False


# --- the special claim --------------------------------------------------------------------------------------


def temp_uid(pod: Pod) -> str:
    """The in-memory claim's UID (upstream: a random one), deterministic per pod."""
    return str(uuid.uuid5(_TEMP_UID_NAMESPACE, f"{pod.uid}/{pod.key}"))


def special_claim_key(pod: Pod) -> str:
    return f"{pod.namespace}/{SPECIAL_CLAIM_NAME}"


_CLAIM_INDEX: list[tuple[Mapping[str, ResourceClaim], dict[str, ResourceClaim]]] = []


def find_extended_claim(claims: Mapping[str, ResourceClaim], pod: Pod) -> ResourceClaim | None:
    """``findExtendedResourceClaim``: the claim annotated as the pod's extended resource claim and
    controlled by the pod (name and UID)."""
    if not (_CLAIM_INDEX and _CLAIM_INDEX[0][0] is claims):
        index: dict[str, ResourceClaim] = {}
        for key in sorted(claims):
            c = claims[key]
            if c.meta.annotations.get(EXTENDED_CLAIM_ANNOTATION) != "true":
                continue
            for o in c.meta.owners:
                if o.controller and o.uid:
                    index.setdefault(f"{o.uid}/{c.namespace}/{o.name}", c)
        _CLAIM_INDEX[:] = [(claims, index)]
    return _CLAIM_INDEX[0][1].get(f"{pod.uid}/{pod.namespace}/{pod.name}")


@dataclass(frozen=True, slots=True)
class NodeRequests:
    """What the special claim must request on one node. ``error``: the node cannot serve the pod."""

    requests: tuple[dict[str, Any], ...] = ()  # spec.devices.requests entries (resource.k8s.io/v1)
    mappings: tuple[dict[str, str], ...] = ()  # status.extendedResourceClaimStatus.requestMappings
    resources: tuple[str, ...] = ()  # the extended resources served through DRA here
    error: str = ""


def node_requests(pod: Pod, node: Node, classes: Mapping[str, DeviceClass]) -> NodeRequests:
    """``filterExtendedResources`` for one node. It depends on the node only through its allocatable of the
    pod's extended resources, so it is memoised on the pod per (those amounts, class set)."""
    names = [r for r, q in sorted(pod.requests.items()) if q and is_dra_extended_resource_name(r)]
    key = (tuple(node.allocatable.get(r) for r in names), id(classes))
    memo: dict[Any, tuple[Mapping[str, DeviceClass], NodeRequests]] = pod.memo.setdefault("dra/extended-node", {})
    hit = memo.get(key)
    if hit is not None and hit[0] is classes:
        return hit[1]
    mapping = class_mapping(classes)
    served: dict[str, str] = {}  # resource -> class name
    out: NodeRequests | None = None
    for r in names:
        cls = mapping.get(r)
        if cls is not None and node.allocatable.get(r, 0) == 0:
            served[r] = cls.name
        elif r not in node.allocatable:
            out = NodeRequests(error=f"cannot fit resource {r}")
            break
    if out is None:
        reqs, maps = requests_and_mappings(pod.raw, served)
        out = NodeRequests(tuple(reqs), tuple(maps), tuple(sorted(served)))
    if len(memo) > 64:
        memo.clear()
    memo[key] = (classes, out)
    return out


def extended_claim_name(pod_raw: Mapping[str, Any]) -> str | None:
    """The special claim named in ``status.extendedResourceClaimStatus`` (for reports such as simulate's table)."""
    status = pod_raw.get("status")
    ext = status.get("extendedResourceClaimStatus") if isinstance(status, Mapping) else None
    name = ext.get("resourceClaimName") if isinstance(ext, Mapping) else None
    return name if isinstance(name, str) and name else None


def _container_int_requests(c: Mapping[str, Any]) -> dict[str, int | None]:
    """Container requests after API defaulting (limits fill missing requests); None = not an integer."""
    res = c.get("resources") if isinstance(c.get("resources"), Mapping) else {}
    assert isinstance(res, Mapping)
    merged: dict[str, Any] = {}
    for part in ("limits", "requests"):
        v = res.get(part)
        if isinstance(v, Mapping):
            merged.update({str(k): x for k, x in v.items()})
    out: dict[str, int | None] = {}
    for k, v in merged.items():
        try:
            q = parse_quantity(str(v))
        except QuantityError:
            out[k] = None
            continue
        out[k] = q.int_value() if q.is_integer() and q.sign() >= 0 else None
    return out


def requests_and_mappings(
    pod_raw: Mapping[str, Any], served: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """``createRequestsAndMappings``: device requests (sorted by name) and container mappings for the
    resources in ``served`` (resource -> device class name)."""
    spec = pod_raw.get("spec") if isinstance(pod_raw.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    inits = [c for c in spec.get("initContainers") or () if isinstance(c, Mapping)]
    regular = [c for c in spec.get("containers") or () if isinstance(c, Mapping)]
    containers = [*inits, *regular]
    long_lived = [i for i, c in enumerate(containers) if i >= len(inits) or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(len(inits)) if i not in long_lived]
    creqs = [_container_int_requests(c) for c in containers]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []

    def one(
        i: int, res: str, cls: str, reusable: Sequence[dict[str, Any] | None]
    ) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
        name = str(containers[i].get("name", ""))
        want = creqs[i].get(res)
        if not want:  # absent, zero or not an integer (AsInt64 fails)
            return None, []
        maps: list[dict[str, str]] = []
        total = 0
        for r in reusable:
            if r is None:
                continue
            total += int(r["exactly"]["count"])
            maps.append({"containerName": name, "resourceName": res, "requestName": r["name"]})
            if total >= want:
                return None, maps
        ridx = sorted(creqs[i]).index(res)
        req_name = f"container-{i}-request-{ridx}"
        req = {
            "name": req_name,
            "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": want - total},
        }
        maps.append({"containerName": name, "resourceName": res, "requestName": req_name})
        return req, maps

    for res in sorted(served):
        cls = served[res]
        long_reqs: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            r, m = one(i, res, cls, ())
            long_reqs[i] = r
            long_maps += m
        biggest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            r, m = one(i, res, cls, long_reqs[i:])
            if r is not None:
                short_names.add(r["name"])
                if biggest is None or biggest["exactly"]["count"] < r["exactly"]["count"]:
                    biggest = r
            short_maps += m
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest["name"])
            for sm in short_maps:
                if sm["requestName"] in short_names:
                    sm["requestName"] = biggest["name"]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for r in long_reqs if r is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


def request_shape(requests: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str, int], ...]:
    """(name, class, count) of each ``exactly`` request: how a stored claim is compared with a node's needs
    (the API server may add defaults to the stored object)."""
    out = []
    for r in requests:
        ex = r.get("exactly") if isinstance(r.get("exactly"), Mapping) else {}
        assert isinstance(ex, Mapping)
        count = ex.get("count", 1)
        out.append((str(r.get("name", "")), str(ex.get("deviceClassName", "")), int(count) if count else 1))
    return tuple(out)


def claim_requests_raw(claim: ResourceClaim) -> list[Mapping[str, Any]]:
    spec = claim.raw.get("spec") if isinstance(claim.raw.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    devices = spec.get("devices") if isinstance(spec.get("devices"), Mapping) else {}
    assert isinstance(devices, Mapping)
    return [r for r in devices.get("requests") or () if isinstance(r, Mapping)]


def new_claim_object(pod: Pod, requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The claim PreBind creates (``preFilterExtendedResources`` + ``createExtendedResourceClaimInAPI``):
    generated name, controlled by the pod, annotated, the node's device requests."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
            ],
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": [dict(r) for r in requests]}},
    }


# --- scoring (calculateDRAResourceTotals) -------------------------------------------------------------------


def device_totals(
    node: Node,
    slices: Sequence[ResourceSlice],
    cls: DeviceClass,
    ledger: DeviceLedger,
    selectors: SelectorCache,
) -> tuple[int, int]:
    """(devices of ``cls`` usable from ``node``, how many of them are in use). A selector that cannot be
    evaluated makes the resource count as absent on the node (upstream logs and returns 0, 0)."""
    total = used = 0
    for s in slices:
        if not s.per_device_node_selection and not _slice_relevant(s, node):
            continue
        for i, d in enumerate(s.devices):
            if s.per_device_node_selection and not _device_on_node(d, node):
                continue
            ok = True
            attrs, caps = d.attributes, {k: v.value for k, v in d.capacity.items()}
            dev_input = functools.partial(device_input, s.driver, attrs, caps, d.allow_multiple_allocations)
            for expr in cls.selectors:
                if expr is None:
                    continue
                try:
                    ok = selectors.matches(expr, (s.serial, i), dev_input, driver=s.driver, content=d)
                except CELError:
                    return 0, 0
                if not ok:
                    break
            if not ok:
                continue
            total += 1
            if ledger.in_use((s.driver, s.pool, d.name)):
                used += 1
    return total, used
