"""DynamicResources' cycle state and the claims of a pod: what every part of the plugin reads.

The constants (plugin name, CycleState keys, limits), how a pod's claims are found (:func:`pod_claims` strictly,
for scheduling; :func:`_claims_of` leniently, for victims and nominated pods), the per-cycle data PreFilter writes
(:class:`_CycleData`, with the pod's special claim for extended resources, :class:`_Extended`, and the allocations
in flight between Reserve and PreBind, :class:`_InFlight`) and :func:`node_allocation`, through which other
plugins (GpuTopology, fragmentation, preemption) read the allocation DynamicResources chose on a node.
The plugin itself is :mod:`plugins.dra.plugin` (the scheduling cycle) over :mod:`plugins.dra.binding` (the binding
cycle); both import this module, which imports neither.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from plugins.dra.allocator import AllocationError, Allocator, ClaimAllocation, ClaimInput
from plugins.dra.extended import NodeRequests
from scheduler.api.dra import ResourceClaim
from scheduler.api.model import NodeSelector, Pod
from scheduler.api.workload_api import is_for_pod_group_by_pod
from scheduler.cache.cache import NodeInfo, Snapshot
from scheduler.cache.ledger import DeviceLedger
from scheduler.framework.interface import CycleState

NAME = "DynamicResources"
STATE_KEY = "DynamicResources"
# CycleState key: the allocator's candidate-order hook for this cycle (written by GpuTopology's PreFilter;
# see plugins.dra.allocator.DeviceOrder). Absent = upstream order.
DEVICE_ORDER_KEY = "DynamicResources/device-order"
MAX_CONSUMERS = 256  # ResourceClaimReservedForMaxSize
FIRST_AVAILABLE_MAX = 8
CONFLICT_RETRIES = 5
BINDING_TIMEOUT_DEFAULT = 600.0  # DynamicResourcesBindingTimeoutDefault
BINDING_POLL_SECONDS = 1.0  # between two looks at the claims while waiting for binding conditions


class ClaimResolutionError(Exception):
    pass


def pod_claims(snapshot: Snapshot, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims in spec order; raises :class:`ClaimResolutionError` with an actionable message."""
    out: list[ResourceClaim] = []
    for pc in pod.claims:
        if pc.claim_name:
            name = pc.claim_name
        elif pc.template_name:
            if pc.name not in pod.claim_statuses:
                raise ClaimResolutionError(
                    f"pod {pod.key}: ResourceClaim for {pc.name!r} (template {pc.template_name}) not created yet"
                )
            generated = pod.claim_statuses[pc.name]
            if generated is None:
                continue
            name = generated
        else:
            raise ClaimResolutionError(f"pod {pod.key}, claim {pc.name!r}: none of the supported fields are set")
        claim = snapshot.claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            raise ClaimResolutionError(f'resourceclaim "{name}" not found')
        if claim.meta.deleting:
            raise ClaimResolutionError(f'resourceclaim "{name}" is being deleted')
        if pc.template_name:
            owner = claim.meta.controller()
            # IsForPod with DRAWorkloadResourceClaims: the pod, or its PodGroup (a PodGroup-level claim)
            if (owner is None or owner.uid != pod.uid) and not is_for_pod_group_by_pod(pod, claim):
                raise ClaimResolutionError(
                    f"ResourceClaim {pod.namespace}/{name} was not created for pod {pod.key} (pod is not owner)"
                )
        out.append(claim)
    return out


def _claims_of(snapshot: Snapshot, pod: Pod) -> list[ResourceClaim]:
    """The claims ``pod`` uses that exist, leniently (a preemption victim or a nominated pod): its claims by
    name or generated from templates, and its claim for extended resources backed by DRA."""
    names: list[str] = []
    for pc in pod.claims:
        n = pc.claim_name or pod.claim_statuses.get(pc.name)
        if n:
            names.append(n)
    status = pod.raw.get("status")
    if isinstance(status, Mapping):
        ext = status.get("extendedResourceClaimStatus")
        if isinstance(ext, Mapping) and isinstance(ext.get("resourceClaimName"), str):
            names.append(ext["resourceClaimName"])
    out: list[ResourceClaim] = []
    for n in dict.fromkeys(names):
        c = snapshot.claims.get(f"{pod.namespace}/{n}")
        if c is not None:
            out.append(c)
    return out


EMPTY_ALLOCATION = ClaimAllocation((), None, {"devices": {"results": []}})


@dataclass(slots=True)
class _Extended:
    """The pod's special claim for extended resources backed by DRA."""

    pod: Pod
    resources: dict[str, int]  # the pod's requests of resources a DeviceClass maps
    claim: ResourceClaim  # found from an earlier attempt, or the in-memory one (SPECIAL_CLAIM_NAME)
    existing: bool
    # per node: (the Node object it was computed for, what the claim must request there, allocator input)
    nodes: dict[str, tuple[Any, NodeRequests, ClaimInput | None]] = field(default_factory=dict)
    created: ResourceClaim | None = None  # the claim PreBind created in this attempt

    @property
    def allocates(self) -> bool:
        """The allocator runs for the claim (it has no allocation yet)."""
        return self.claim.allocation is None


def _rv_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _rv_newer(a: str, b: str) -> bool:
    """resourceVersion ``a`` is later than ``b`` (etcd revisions; the device ledger compares them the same way)."""
    try:
        return int(a) > int(b)
    except ValueError:
        return False


@dataclass(eq=False, slots=True)
class _InFlight:
    """A claim allocated in a cycle and not yet written (Reserve to PreBind): what a second pod of the same claim
    scheduled meanwhile reuses instead of allocating the claim again (which lost a 409 race at PreBind, the first
    pod's allocation written in between). ``done`` is set when the first pod's PreBind wrote it (``written``: the
    claim as the API server returned it) or its attempt gave it up (``written`` None)."""

    allocation: ClaimAllocation
    pod: str
    done: asyncio.Event = field(default_factory=asyncio.Event)
    written: dict[str, Any] | None = None


@dataclass(slots=True)
class _CycleData:
    claims: list[ResourceClaim]
    to_allocate: list[ResourceClaim]
    inputs: list[ClaimInput]
    pinned: list[tuple[ResourceClaim, NodeSelector | None]]
    allocator: Allocator | None
    signature: tuple[Any, ...]
    node_allocations: dict[str, list[ClaimAllocation]] = field(default_factory=dict)
    reserved: list[ResourceClaim] = field(default_factory=list)
    written: list[tuple[ResourceClaim, bool]] = field(default_factory=list)  # (claim, allocated by us)
    owner: _Owner | None = None
    ext: _Extended | None = None
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)  # claim uid -> what PreBind wrote
    binding_failed: set[str] = field(default_factory=set)  # claim uids whose binding conditions failed/timed out
    # --- dry runs (PreFilterExtensions; only ever set on a clone of the cycle's state) ---
    # pods removed from the node (preemption victims): uid -> pod
    removed: dict[str, Pod] = field(default_factory=dict)
    # the ledger with the victims' claims that no surviving pod reserves treated as free (None: the snapshot's)
    ledger: DeviceLedger | None = None
    # pods added to a node (nominated pods): uid -> (node, their unallocated claims, which are allocated with
    # the pod's own, and the uids of all their claims, which stay in use)
    extra: dict[str, tuple[str, tuple[ClaimInput, ...], frozenset[str]]] = field(default_factory=dict)
    # where an allocation found with only extra pods added may also be recorded: the cycle's own per-node
    # allocations (a node that fits with the nominated pods' devices held fits without them too)
    origin_allocations: dict[str, list[ClaimAllocation]] | None = None
    # claims this pod shares with a pod whose allocation of them is in flight: uid -> that allocation's record
    # (PreBind waits for it to be written, then only adds this pod to reservedFor)
    shared_in_flight: dict[str, _InFlight] = field(default_factory=dict)
    class_sig: int | None = None  # the signature's id in DynamicResources' node-class memo (set on first use)

    @property
    def dry(self) -> bool:
        return bool(self.removed) or self.ledger is not None or bool(self.extra)

    def clone(self) -> _CycleData:
        """For ``CycleState.clone``: per-node allocations start empty (they depend on the dry run's changes)."""
        return replace(
            self,
            node_allocations={},
            reserved=[],
            written=[],
            latest={},
            binding_failed=set(),
            removed=dict(self.removed),
            extra=dict(self.extra),
            origin_allocations=None if self.dry else self.node_allocations,
        )

    def alloc_claims(self) -> list[ResourceClaim]:
        """The claims the allocator allocates, in the order of each node's allocation list: the pod's
        unallocated claims, then the special claim (whose entry is empty on nodes that need no devices)."""
        if self.ext is not None and self.ext.allocates:
            return [*self.to_allocate, self.ext.claim]
        return list(self.to_allocate)


_Cached = tuple[list[ClaimAllocation] | None, str]  # (result, failure reason)


class _Owner(Protocol):
    """The DynamicResources instance that wrote a cycle's data (:class:`plugins.dra.plugin.DynamicResources`)."""

    def _result_for(self, state: CycleState, data: _CycleData, node: NodeInfo) -> _Cached: ...


def node_allocation(state: CycleState, node: NodeInfo) -> list[ClaimAllocation] | None:
    """The allocation of the cycle's unallocated claims on ``node`` (from DynamicResources' per-node cache, or
    computed now); None when the pod allocates nothing or the claims do not fit there. For score plugins."""
    data: _CycleData | None = state.read(STATE_KEY)
    if data is None or data.allocator is None or data.owner is None:
        return None
    try:
        result, _ = data.owner._result_for(state, data, node)
    except AllocationError:
        return None
    return result
