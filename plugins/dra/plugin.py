"""DynamicResources: the framework adapter over the pure allocator.

PreEnqueue   every referenced claim exists (template claims: created and owned by the pod), not deleting.
PreFilter    resolve claims; allocated claims pin nodes through ``allocation.nodeSelector``; unallocated
             ones get an :class:`~plugins.dra.allocator.Allocator` over this cycle's ledger view.
Filter       run the allocator for the node (results cached per node state, see below).
Score        prefer nodes where ``firstAvailable`` could use earlier subrequests (upstream 1.35+).
add_pod /    PreFilterExtensions for preemption's dry run and nominated pods (beyond upstream 1.37.2): a removed
remove_pod   pod frees the devices of its claims no surviving pod reserves (a LedgerView, the ledger untouched);
             an added nominated pod's unallocated claims are allocated together with the pod's own on that node.
             Filter says Unschedulable (preemption may help) instead of UnschedulableAndUnresolvable when the
             node's matching devices would suffice but some are in use.
Reserve      record the chosen allocations as in-flight in the device ledger (no API write).
Unreserve    drop them.
PreBind      write finalizer, then ``status.allocation`` (with ``allocationTimestamp``) + ``status.reservedFor``
             with the claim's resourceVersion (retry on 409 with a fresh GET; never overwrite another
             allocation; refuse claims being deleted); then mark the write as assumed in the ledger; then
             wait for the devices' binding conditions (below).
rollback     undo what PreBind wrote for this attempt.

Device binding conditions (KEP-5007; gates DRADeviceBindingConditions + DRAResourceClaimDeviceStatus, beta
and on in 1.37; kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``
``PreBind``, ``bindClaim``, ``isClaimReadyForBinding``, ``isClaimTimeout``, ``isPodReadyForBinding``):

* the allocator skips devices with ``bindingConditions`` when the gates are off, searches pools holding such
  devices last, copies ``bindingConditions`` / ``bindingFailureConditions`` into the results and pins the
  allocation to the node for a ``bindsToNode`` device (:mod:`plugins.dra.allocator`);
* every allocation PreBind writes carries ``allocationTimestamp`` (RFC 3339, the scheduler's wall clock);
* after the writes, when a device of any of the pod's claims has ``bindingConditions``, PreBind records the
  Event ``BindingConditionsPending`` and polls the claims (first at once, then every
  ``BINDING_POLL_SECONDS``; upstream polls its informer every 5 s) until, for every such device, the
  ``status.devices`` entry with its driver/pool/device has every binding condition ``True``. A ``True``
  ``bindingFailureCondition`` fails at once (``device binding failed: claim=..., reason=..., message=...``);
  ``bindingTimeout`` (args, default 600 s) since the wait began, or since the claim's
  ``allocationTimestamp``, fails with ``device binding timeout: claim=...``; both messages then name the
  devices and their failed / pending conditions, as upstream logs them. The pod is sent to backoff and its
  writes are undone; a claim whose binding failed or timed out is deallocated when no other pod reserves
  it, which is what upstream's next attempt does (Filter: "resourceclaim not available on the node", then
  PostFilter deallocates). The wait only sleeps on the event loop: live, binding cycles are tasks, so other
  pods keep being scheduled. Time comes from ``binding_clock`` (a :class:`scheduler.framework.hooks.BindingClock`);
  ``simulate`` drives it with its fake clock (:func:`scheduler.framework.hooks.use_binding_clock`): no DRA driver
  runs there, so a pod waits ``bindingTimeout`` of fake time (at once), is rolled back and retried like
  upstream, and ends ``PodScheduled=False`` with the timeout message naming the pending conditions.

Deliberate differences: the wait reads the claims from the API server (upstream: its informer cache); a
failure condition on any claim fails the wait even while an earlier claim is still pending, and a claim that
is deleted, replaced or deallocated during the wait fails it at once (upstream waits for the timeout); an
allocation written by someone else without ``allocationTimestamp`` gets none from us (upstream adds one
when it reserves such a claim, which the API server refuses: ``status.allocation`` is immutable).

Extended resources backed by DRA (KEP-5004, DRAExtendedResource, GA in 1.37; upstream
``dynamicresources/extendeddynamicresources.go``, helpers in :mod:`plugins.dra.extended`): a pod whose
requests name an extended resource some DeviceClass maps gets one special claim. PreFilter finds the claim a
previous attempt created (annotation ``resource.kubernetes.io/extended-resource-claim: "true"``, controlled
by the pod) or starts an in-memory one; Filter builds, per node, the requests for the resources the node
does not serve natively (none: nothing to allocate there) and allocates them with the pod's other claims;
Reserve records the devices in flight under a temporary UID; PreBind creates the claim (generateName
``<pod>-extended-resources-``, owned by the pod), writes finalizer, then allocation + reservedFor as for
any claim, then patches ``pod.status.extendedResourceClaimStatus`` (request mappings, claim name);
rollback deletes the claim. Deliberate differences from upstream:

* a claim found from an earlier attempt is reused on the nodes whose needs it matches (its node when it is
  allocated) and rejects the other nodes ("cannot schedule extended resource claim"); upstream rejects
  every node and deletes it in PostFilter, which needs an API write this framework's PostFilter cannot
  make. Binding failures delete the claim in rollback, as upstream's Unreserve does, so a stale claim
  only survives a crash of the scheduler between the claim's creation and the pod's binding;
* on a node that serves every mapped resource natively, a pod with other claims does not create an empty
  special claim (upstream allocates a claim without requests there and then fails on the empty mappings).

Per-node result cache: the allocation found for a node depends only on the claims' specs, the node, the
slices, the classes and the use of devices the node can see. The key holds each of those as a revision
(the ledger's per-node and shared revisions), so pods from one template reuse the answer of every node
whose devices did not change since the previous pod — the common case when a fleet is being filled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar

import structlog

from plugins.dra import hints
from plugins.dra.allocator import (
    AllocationError,
    Allocator,
    ClaimAllocation,
    ClaimInput,
    FailedOnNode,
    Features,
    Pool,
    capacity_shortfall,
    counter_shortfall,
    gather_pools,
)
from plugins.dra.capacity import DeviceDemand, device_room, member_demands
from plugins.dra.cel import DeviceInput, SelectorCache, available_engines, engine_available, get_engine
from plugins.dra.extended import (
    EXTENDED_CLAIM_ANNOTATION,
    SPECIAL_CLAIM_NAME,
    NodeRequests,
    claim_requests_raw,
    dra_backed_requests,
    find_extended_claim,
    new_claim_object,
    node_requests,
    request_shape,
    temp_uid,
)
from plugins.dra.taintrules import KIND as TAINT_RULE_KIND
from plugins.dra.taintrules import TaintRules, TaintRuleTracker, describe_taint, untolerated_taint
from scheduler.api.clusterapi import ApiError, ClusterAPI, Conflict, NotFound
from scheduler.api.goduration import format_go_duration, parse_go_duration
from scheduler.api.model import (
    ALLOCATION_MODE_EXACT,
    CLAIM_FINALIZER,
    ModelError,
    NodeSelector,
    Pod,
    ResourceClaim,
    claim_from,
    claim_spec_from,
    node_selector_matches,
)
from scheduler.api.workload_api import consumer_for, is_for_pod_group_by_pod, is_reserved_for_pod, scheduling_group
from scheduler.cache.cache import NodeInfo, Snapshot
from scheduler.cache.coexistence import PARTITION_ARG, PARTITION_MESSAGE, partition_from_args, validate_partition
from scheduler.cache.ledger import DeviceLedger, LedgerView
from scheduler.config.registry import PluginSpec
from scheduler.framework.helpers import default_normalize_score, max_normalized
from scheduler.framework.hooks import REAL_CLOCK
from scheduler.framework.interface import (
    GROUP_PENDING_KEY,
    MAX_NODE_SCORE,
    UNSET,
    Code,
    CycleState,
    NodeScore,
    PreFilterResult,
    QueueingHintFn,
    Status,
)
from scheduler.framework.memo import NodeStateMemo

log = structlog.get_logger("dra_scheduler.dra")


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


_UNRESOLVED: Any = object()  # _claim_keys: not looked up yet


def _swap_claims(text: str, swap: Mapping[str, str]) -> str:
    """``text`` with every ``claim <key>`` (``resourceclaim <key>`` too) of a key in ``swap`` naming its value
    instead; a key counts only where a delimiter (``,``, ``:``, a space, the end) follows it."""
    out: list[str] = []
    i = 0
    while True:
        j = text.find("claim ", i)
        if j < 0:
            break
        k = j + 6
        end = k
        while end < len(text) and text[end] not in ",: \t\n":
            end += 1
        new = swap.get(text[k:end])
        if new is not None:
            out.append(text[i:k])
            out.append(new)
            i = end
        else:
            out.append(text[i:k])
            i = k
    out.append(text[i:])
    return "".join(out)


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


def _claim_ref(i: int) -> str:
    """A placeholder for the i-th claim's key in a cached reason: the per-node result cache is shared by
    pods with equal claim specs, whose claims have other names (see ``_render``)."""
    return f"\x00{i}\x00"


def _render(reason: str, inputs: Sequence[ClaimInput]) -> str:
    if "\x00" not in reason:
        return reason
    parts = reason.split("\x00")
    for j in range(1, len(parts), 2):
        parts[j] = inputs[int(parts[j])].key
    return "".join(parts)


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
    owner: DynamicResources | None = None
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


class DynamicResources:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any]) -> None:
        # retarget_template: its template is kept on the Status itself (Status.memo); per snapshot the claim keys of
        # the pods asked about
        # claims allocated by a pod whose PreBind has not written them yet (uid -> record), and claims PreBind wrote
        # whose watch event has not arrived yet (uid -> the claim as written): see _InFlight and _shared_view
        self._in_flight: dict[str, _InFlight] = {}
        self._written: dict[str, dict[str, Any]] = {}
        self._claim_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # claim uid -> (its lock, users)
        self._claims_snap: Snapshot | None = None
        self._claims_of: dict[str, Any] = {}
        gates = args.get("featureGates") or {}
        self.features = Features(
            admin_access=bool(gates.get("DRAAdminAccess", True)),
            prioritized_list=bool(gates.get("DRAPrioritizedList", True)),
            partitionable_devices=bool(gates.get("DRAPartitionableDevices", True)),
            device_taints=bool(gates.get("DRADeviceTaints", True)),
            consumable_capacity=bool(gates.get("DRAConsumableCapacity", True)),
            # DeviceBindingAndStatus: both gates (upstream feature.Features)
            binding_conditions=bool(gates.get("DRADeviceBindingConditions", True))
            and bool(gates.get("DRAResourceClaimDeviceStatus", True)),
            device_taint_rules=bool(gates.get("DRADeviceTaintRules", True)),
        )
        self.selectors = SelectorCache(get_engine(args.get("celEngine") or None))
        self.device_inputs: dict[tuple[int, int], DeviceInput] = {}
        self._device_inputs_gen = -1
        self._pools: dict[str, tuple[tuple[int, int, int], list[Pool]]] = {}
        # per node, for its current object and ledger revision: (claims' signature, ext shape) -> (allocations or
        # None, reason); and _eviction_may_help's answer per claims' signature
        self._results: NodeStateMemo[tuple[list[ClaimAllocation] | None, str]] = NodeStateMemo()
        self._may_help: NodeStateMemo[bool] = NodeStateMemo()
        self._taint_rules = TaintRuleTracker()  # DeviceTaintRules of the snapshots (plugins.dra.taintrules)
        self.stats = {"filter_cache_hits": 0, "filter_allocations": 0}
        bt = args.get("bindingTimeout")
        self.binding_timeout = parse_go_duration(bt) if isinstance(bt, str) else BINDING_TIMEOUT_DEFAULT
        self.binding_clock = REAL_CLOCK
        self.binding_poll = BINDING_POLL_SECONDS
        # the nodes whose devices this scheduler may allocate (running next to kube-scheduler; None: all)
        self.partition = partition_from_args(args)

    # --- registration --------------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return [
            ("ResourceSlice", "Add"),
            ("ResourceSlice", "Update"),
            ("DeviceClass", "Add"),
            ("DeviceClass", "Update"),
            ("ResourceClaim", "Add"),
            ("ResourceClaim", "Update"),
            ("ResourceClaim", "Delete"),
            ("Node", "Add"),
            ("Node", "Update"),
            ("Pod", "Update"),
            ("Pod", "Delete"),
            # a rule's taint is a device taint (upstream: the slice tracker's ResourceSlice update events)
            ("DeviceTaintRule", "Add"),
            ("DeviceTaintRule", "Update"),
            ("DeviceTaintRule", "Delete"),
        ]

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        """plugins/dra/hints.py (upstream ``isSchedulableAfterClaimChange``, ``isSchedulableAfterPodChange``);
        DeviceTaintRule events have no hint (always queue)."""
        return {
            ("ResourceClaim", "Add"): hints.claim_changed,
            ("ResourceClaim", "Update"): hints.claim_changed,
            ("ResourceClaim", "Delete"): hints.claim_deleted,
            ("Pod", "Update"): hints.pod_updated,
            ("Pod", "Delete"): hints.pod_deleted,
            ("Node", "Add"): hints.node_changed,
            ("Node", "Update"): hints.node_changed,
            ("ResourceSlice", "Add"): hints.spec_changed,
            ("ResourceSlice", "Update"): hints.spec_changed,
            ("DeviceClass", "Add"): hints.spec_changed,
            ("DeviceClass", "Update"): hints.spec_changed,
        }

    # --- PreEnqueue ------------------------------------------------------------------------------------

    def pre_enqueue(self, snapshot: Snapshot, pod: Pod) -> Status:
        if not pod.claims:
            return Status.ok()
        try:
            pod_claims(snapshot, pod)
        except ClaimResolutionError as e:
            return Status.unresolvable(str(e))
        return Status.ok()

    # --- PreFilter -------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        snap = state.snapshot
        ext_resources = dra_backed_requests(pod, snap.classes)
        if not pod.claims and not ext_resources:
            return None, Status.skip()
        claims: list[ResourceClaim] = []
        if pod.claims:
            try:
                claims = pod_claims(snap, pod)
            except ClaimResolutionError as e:
                return None, Status.unresolvable(str(e))
        if not claims and not ext_resources:
            return None, Status.skip()
        to_allocate: list[ResourceClaim] = []
        pinned: list[tuple[ResourceClaim, NodeSelector | None]] = []
        shared_in_flight: dict[str, _InFlight] = {}
        if len(self._written) > 64:  # written claims whose watch events came: a few per binding in flight
            self._sweep_written(snap)
        if self._written:
            claims = [self._shared_view(snap, c) if c.allocation is None else c for c in claims]
        for c in claims:
            if c.allocation is not None:
                reserved = is_reserved_for_pod(pod, c)
                if not reserved and len(c.reserved_for) >= MAX_CONSUMERS:
                    return None, Status.unresolvable(
                        f"resourceclaim {c.key} in use: already reserved for {MAX_CONSUMERS} consumers"
                    )
                pinned.append((c, c.allocation.node_selector))
                continue
            if snap.ledger.is_pending(c.meta.uid):
                group_alloc = (state.read(GROUP_PENDING_KEY) or {}).get(c.meta.uid)
                if group_alloc is not None:
                    # allocated in this gang cycle for another member of the group: use it like an
                    # allocated claim (pinned to its node); PreBind of that member writes it first
                    pinned.append((c, group_alloc.node_selector))
                    continue
                flight = self._in_flight.get(c.meta.uid)
                if flight is not None and flight.pod != pod.uid:
                    # allocated for another pod in a cycle whose PreBind has not written it yet: share that
                    # allocation (pinned to its node); PreBind waits for the write, then reserves the claim
                    pinned.append((c, flight.allocation.node_selector))
                    shared_in_flight[c.meta.uid] = flight
                    continue
                return None, Status.unresolvable(f"resource claim {c.key} is in the process of being allocated")
            for req in c.spec.requests:
                specs = [req.exactly] if req.exactly is not None else list(req.first_available)
                for s in specs:
                    if s is not None and s.device_class_name and s.device_class_name not in snap.classes:
                        return None, Status.unresolvable(
                            f"claim {c.key}, request {s.name}: device class {s.device_class_name} does not exist"
                        )
            to_allocate.append(c)
        ext: _Extended | None = None
        if ext_resources:
            ext, st = self._pre_filter_extended(snap, pod, ext_resources, pinned)
            if ext is None:
                return None, st
        allocator = None
        if to_allocate or (ext is not None and ext.allocates):
            if self._device_inputs_gen != snap.slices.generation:
                self.device_inputs.clear()
                self._device_inputs_gen = snap.slices.generation
            allocator = Allocator(
                self.features,
                snap.ledger,
                snap.classes,
                self.selectors,
                self.device_inputs,
                device_order=state.read(DEVICE_ORDER_KEY),
            )
        signature = (
            tuple(c.spec for c in to_allocate),
            snap.slices.generation,
            snap.class_generation,
            snap.ledger.shared_revision,
            self.taint_rules(snap).generation,  # keys _results and the equal-pod reuse memo
            None if ext is None else (tuple(ext.resources.items()), ext.claim.meta.uid if ext.existing else ""),
        )
        state.write(
            STATE_KEY,
            _CycleData(
                claims,
                to_allocate,
                [ClaimInput(c.key, c.meta.uid, c.spec) for c in to_allocate],
                pinned,
                allocator,
                signature,
                owner=self,
                ext=ext,
                shared_in_flight=shared_in_flight,
            ),
        )
        return None, Status.ok()

    def _shared_view(self, snap: Snapshot, claim: ResourceClaim) -> ResourceClaim:
        """``claim`` as this scheduler last wrote it when the watch has not brought that write yet (the claim of
        another pod's binding, shared with this pod): allocated, where the informer's copy is not. Entries the
        informer caught up with (or whose claim is gone) are dropped here."""
        written = self._written.get(claim.meta.uid)
        if written is None:
            return claim
        if _rv_newer(_rv_of(written), claim.meta.resource_version):
            try:
                return claim_from(written)
            except (ModelError, KeyError, TypeError, ValueError):
                pass
        del self._written[claim.meta.uid]
        return claim

    def _sweep_written(self, snap: Snapshot) -> None:
        """Forget the written claims the informer has caught up with (or that are gone)."""
        for uid, w in list(self._written.items()):
            meta = w.get("metadata") or {}
            cur = snap.claims.get(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
            if cur is None or cur.meta.uid != uid or not _rv_newer(_rv_of(w), cur.meta.resource_version):
                del self._written[uid]

    def _remember_written(self, uid: str, written: dict[str, Any]) -> None:
        """What the API server returned for a claim write (kept, never changed, until the informer has it)."""
        self._written[uid] = written

    def _pre_filter_extended(
        self,
        snap: Snapshot,
        pod: Pod,
        resources: dict[str, int],
        pinned: list[tuple[ResourceClaim, NodeSelector | None]],
    ) -> tuple[_Extended | None, Status]:
        """``preFilterExtendedResources``: the claim an earlier attempt created, or a new in-memory one."""
        found = find_extended_claim(snap.claims, pod)
        if found is None:
            raw = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": SPECIAL_CLAIM_NAME,
                    "namespace": pod.namespace,
                    "uid": temp_uid(pod),
                    "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                },
                "spec": {},
            }
            return _Extended(pod, resources, claim_from(raw), existing=False), Status.ok()
        if found.meta.deleting:
            return None, Status.unresolvable(f"resourceclaim {found.key} is being deleted")
        if found.allocation is not None:
            if any(r.uid != pod.uid for r in found.reserved_for):
                return None, Status.unresolvable(f"resourceclaim {found.key} in use")
            pinned.append((found, found.allocation.node_selector))
        elif snap.ledger.is_pending(found.meta.uid):
            return None, Status.unresolvable(f"resource claim {found.key} is in the process of being allocated")
        return _Extended(pod, resources, found, existing=True), Status.ok()

    def _ext_node(self, state: CycleState, ext: _Extended, node: NodeInfo) -> tuple[NodeRequests, ClaimInput | None]:
        """``filterExtendedResources``: what the special claim requests on ``node`` and its allocator input
        (None: nothing to allocate there)."""
        got = ext.nodes.get(node.name)
        if got is not None and got[0] is node.node:
            return got[1], got[2]
        nr = node_requests(ext.pod, node.node, state.snapshot.classes)
        inp: ClaimInput | None = None
        if not nr.error and nr.requests and ext.allocates:
            claim = ext.claim
            spec = claim.spec if ext.existing else claim_spec_from({"devices": {"requests": list(nr.requests)}})
            inp = ClaimInput(claim.key, claim.meta.uid, spec)
        ext.nodes[node.name] = (node.node, nr, inp)
        return nr, inp

    def _node_inputs(self, state: CycleState, data: _CycleData, node: NodeInfo) -> list[ClaimInput]:
        """The allocator's inputs on ``node``: the pod's unallocated claims, then the special claim's."""
        if data.ext is None:
            return data.inputs
        inp = self._ext_node(state, data.ext, node)[1]
        return data.inputs if inp is None else [*data.inputs, inp]

    # --- Filter ----------------------------------------------------------------------------------------

    def taint_rules(self, snap: Snapshot) -> TaintRules:
        """The snapshot's DeviceTaintRules; their generation changes when a selector or taint does."""
        return self._taint_rules.current(snap.objects_of(TAINT_RULE_KIND))

    def _node_pools(self, snap: Snapshot, info: NodeInfo) -> list[Pool]:
        rules = self.taint_rules(snap)
        key = (snap.slices.generation, id(info.node), rules.generation)
        cached = self._pools.get(info.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        pools = gather_pools(info.node, snap.slices.for_node(info.name), snap.slices.by_pool, self.features, rules)
        self._pools[info.name] = (key, pools)
        return pools

    # --- group capacity bound (scheduler.framework.capacity.DeviceCapacityPlugin; plugins.dra.capacity) ---

    def member_demands(self, state: CycleState) -> tuple[list[DeviceDemand], int]:
        return member_demands(state.read(STATE_KEY))

    def device_room(
        self, snap: Snapshot, info: NodeInfo, demands: Sequence[DeviceDemand], memo: dict[Hashable, Any]
    ) -> tuple[int, dict[Hashable, int]]:
        pools = self._node_pools(snap, info) if demands else []
        return device_room(self, snap, info, pools, demands, memo)

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return ()
        if data.ext is not None:
            return None  # as NodeResourcesFit: no reuse for pods with extended resources backed by DRA
        return (data.signature, tuple(sel for _, sel in data.pinned))

    def node_token(self, state: CycleState, node: NodeInfo) -> Hashable:
        return state.snapshot.ledger.node_revision(node.name)

    def retarget_template(self, state: CycleState, status: Status, other: Pod) -> Hashable | None:
        """``status``, which this plugin's Filter gave ``other`` on an unchanged node, with ``other``'s claims
        (in spec order) replaced by placeholders: what the status says for any pod of the same signature (equal
        claim specs and pinned selectors) once :meth:`retarget_fill` names that pod's claims. Nodes whose
        statuses came from different earlier pods but say the same thing share one template, so a hopeless pod
        names its claims once per distinct message, not once per node. None when that cannot be said for sure
        (``other``'s claims not resolvable, or its name still in the message): the framework then filters.
        Memoised per Status object (each Filter call makes its own, for one pod)."""
        got = status.memo
        if got is not UNSET:
            return got  # type: ignore[no-any-return]
        theirs = self._claim_keys(state.snapshot, other)
        tpl: Hashable | None = None
        if theirs is not None:
            swap = {key: f"\x00{i}\x00" for i, key in enumerate(theirs)}
            reasons = tuple(_swap_claims(r, swap) for r in status.reasons)
            if not any(other.meta.name in r or other.meta.uid in r for r in reasons):
                tpl = (status.code, status.plugin, len(theirs), reasons)
        object.__setattr__(status, "memo", tpl)
        return tpl

    def retarget_fill(self, state: CycleState, template: Hashable, pod: Pod) -> Status | None:
        """The status a :meth:`retarget_template` stands for, naming ``pod``'s claims; None when the pod's claims
        cannot be resolved or are not as many."""
        parts: tuple[Code, str, int, tuple[str, ...]] = template  # type: ignore[assignment]
        code, plugin, count, reasons = parts
        ours = self._claim_keys(state.snapshot, pod)
        if ours is None or len(ours) != count:
            return None
        for i, key in enumerate(ours):
            token = f"\x00{i}\x00"
            reasons = tuple(r.replace(token, key) for r in reasons)
        return Status(code, reasons, plugin)

    def _claim_keys(self, snap: Snapshot, pod: Pod) -> list[str] | None:
        """The keys of ``pod``'s claims in spec order (None: not resolvable), memoised per snapshot."""
        if self._claims_snap is not snap:
            self._claims_snap, self._claims_of = snap, {}
        got = self._claims_of.get(pod.meta.uid, _UNRESOLVED)
        if got is _UNRESOLVED:
            try:
                got = [c.key for c in pod_claims(snap, pod)]
            except ClaimResolutionError:
                got = None
            self._claims_of[pod.meta.uid] = got
        return got  # type: ignore[no-any-return]

    def token_changes(self, state: CycleState, since: Hashable | None) -> tuple[Hashable, Any]:
        """The nodes whose ``node_token`` may have changed since ``since`` (scheduler/framework/batch.py)."""
        return state.snapshot.ledger.node_changes_since(since)  # type: ignore[arg-type]

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return Status.ok()
        for claim, sel in data.pinned:
            if sel is not None and not node_selector_matches(sel, node.node.labels, node.name):
                return Status.unresolvable(f"resourceclaim {claim.key} not available on the node")
        ext = data.ext
        if ext is not None:
            nr, _ = self._ext_node(state, ext, node)
            if nr.error:
                return Status.unresolvable(nr.error)
            if ext.existing and request_shape(claim_requests_raw(ext.claim)) != request_shape(nr.requests):
                # the claim an earlier attempt created does not fit what this node needs
                return Status.unresolvable("cannot schedule extended resource claim")
        if self.partition is not None and not self.partition.matches(node.node.labels):
            ext_input = self._ext_node(state, ext, node)[1] if ext is not None else None
            if data.to_allocate or ext_input is not None:
                return Status.unresolvable(PARTITION_MESSAGE)
        if data.allocator is None:
            return Status.ok()
        try:
            result, reason = self._result_for(state, data, node)
        except AllocationError as e:
            # Fatal for this attempt of the pod (bad CEL, unknown class, limits): an Error status,
            # never cached; the pod goes to backoff and the message reaches its condition.
            return Status.error(str(e))
        if result is None:
            msg = _render(reason, self._node_inputs(state, data, node))
            if self._eviction_may_help(state, data, node):
                # Devices of this node are in use: evicting their users may help, so preemption looks at it
                # (goes beyond upstream 1.37.2, whose DynamicResources always says UnschedulableAndUnresolvable).
                return Status.unschedulable(msg)
            return Status.unresolvable(msg)
        return Status.ok()

    def _eviction_may_help(self, state: CycleState, data: _CycleData, node: NodeInfo) -> bool:
        """Devices of the node are in use and enough of them match: Unschedulable rather than Unresolvable.
        Cached like the allocation result (node object, its ledger revision, the claims' signature): a pod no
        node can take is classified once per node state, not at every attempt of every equal pod."""
        snap = state.snapshot
        if data.dry or data.ext is not None:
            return self._devices_in_use(snap, data, node) and self._enough_devices(state, data, node)
        rev = snap.ledger.node_revision(node.name)
        got = self._may_help.get(node.name, node.node, rev, data.signature)
        if got is None:
            self._may_help.retain(snap.node_names)
            got = self._devices_in_use(snap, data, node) and self._enough_devices(state, data, node)
            self._may_help.put(node.name, node.node, rev, data.signature, got)
        return got

    def _devices_in_use(self, snap: Snapshot, data: _CycleData, node: NodeInfo) -> bool:
        ledger = data.ledger or snap.ledger
        return any(ledger.pool_devices_in_use(p.id) for p in self._node_pools(snap, node))

    def _enough_devices(self, state: CycleState, data: _CycleData, node: NodeInfo) -> bool:
        """Whether every request could be met by the node's matching devices if none were in use (counts
        only; constraints and capacities are left to the dry run). False: no eviction can help."""
        snap = state.snapshot
        pools = self._node_pools(snap, node)
        probe = Allocator(self.features, data.ledger or snap.ledger, snap.classes, self.selectors, self.device_inputs)
        for inp in self._node_inputs(state, data, node):
            for req in inp.spec.requests:
                specs = [req.exactly] if req.exactly is not None else list(req.first_available)
                ok = False
                for sp in specs:
                    if sp is None:
                        continue
                    matching = _count_devices(probe, node, pools, inp, sp)[0]
                    if matching >= (sp.count if sp.allocation_mode == ALLOCATION_MODE_EXACT else 1):
                        ok = True
                        break
                if not ok:
                    return False
        return True

    def _result_for(self, state: CycleState, data: _CycleData, node: NodeInfo) -> _Cached:
        """The allocation of the cycle's claims on ``node``, from the per-node cache or computed now."""
        got = data.node_allocations.get(node.name)
        if got is not None:
            return got, ""
        snap = state.snapshot
        inputs = self._node_inputs(state, data, node)
        if data.dry:
            # a dry run: never cached (its ledger view and extra pods are its own)
            if data.allocator is not None and data.allocator.device_order is None:
                data.allocator.device_order = state.read(DEVICE_ORDER_KEY)
            result, reason = self._allocate(data, snap, node, inputs)
            if result is not None:
                data.node_allocations[node.name] = result
                if data.origin_allocations is not None and data.ledger is None and not data.removed:
                    data.origin_allocations[node.name] = result
            return result, reason
        ext_shape: Any = None
        if data.ext is not None:
            nr, _ = self._ext_node(state, data.ext, node)
            ext_shape = (request_shape(nr.requests), nr.error, len(inputs))
        rev = snap.ledger.node_revision(node.name)
        key = (data.signature, ext_shape)
        cached = self._results.get(node.name, node.node, rev, key)
        if cached is None:
            if data.allocator is not None and data.allocator.device_order is None:
                data.allocator.device_order = state.read(DEVICE_ORDER_KEY)  # GpuTopology's PreFilter ran later
            computed = self._allocate(data, snap, node, inputs)
            self._results.retain(snap.node_names)
            self._results.put(node.name, node.node, rev, key, computed)
            result, reason = computed
        else:
            self.stats["filter_cache_hits"] += 1
            result, reason = cached[0], cached[1]
        if result is not None:
            data.node_allocations[node.name] = result
        return result, reason

    def _allocate(self, data: _CycleData, snap: Snapshot, node: NodeInfo, inputs: list[ClaimInput]) -> _Cached:
        assert data.allocator is not None
        self.stats["filter_allocations"] += 1
        pools = self._node_pools(snap, node)
        extra = self._extra_inputs(data, node, inputs)
        try:
            result = data.allocator.allocate(node.node, [*extra, *inputs] if extra else inputs, pools)
        except FailedOnNode as e:
            return None, str(e)
        if result is None:
            if extra:
                fits_alone = data.allocator.allocate(node.node, inputs, pools) is not None
                if fits_alone:
                    return None, "cannot allocate all claims: devices are held for a pod nominated to this node"
            return None, self._diagnose(data, snap, node, pools, inputs)
        if extra:
            result = result[len(extra):]
        if data.ext is not None and data.ext.allocates and len(inputs) == len(data.inputs):
            result = [*result, EMPTY_ALLOCATION]  # the node serves the extended resources natively
        return result, ""

    def _diagnose(
        self, data: _CycleData, snap: Snapshot, node: NodeInfo, pools: list[Pool], inputs: list[ClaimInput]
    ) -> str:
        """Name the first request that cannot be met on this node on its own, and why."""
        assert data.allocator is not None
        probe = Allocator(self.features, data.ledger or snap.ledger, snap.classes, self.selectors, self.device_inputs)
        ext_requests: dict[str, str] = {}  # request name -> extended resource, for the special claim
        if data.ext is not None and len(inputs) > len(data.inputs):
            nr = self._ext_node_cached(data.ext, node)
            ext_requests = {m["requestName"]: m["resourceName"] for m in nr.mappings} if nr is not None else {}
        last: tuple[str, str, Any, int, int, str] | None = None  # the last request that fits on its own
        for i, inp in enumerate(inputs):
            is_ext = i >= len(data.inputs)
            for req in inp.spec.requests:
                specs = [req.exactly] if req.exactly is not None else list(req.first_available)
                best = ""
                for s in specs:
                    if s is None:
                        continue
                    matching, free, tainted = _count_devices(probe, node, pools, inp, s)
                    need = s.count if s.allocation_mode == ALLOCATION_MODE_EXACT else max(1, matching)
                    what = f"{s.count} device(s)" if s.allocation_mode == ALLOCATION_MODE_EXACT else "all devices"
                    where = (
                        f"extended resource {ext_requests.get(s.name, '?')} (request {s.name})"
                        if is_ext
                        else f"claim {_claim_ref(i)}, request {s.name}"
                    )
                    if free >= need:
                        # free, but is there enough left on them (capacity of shared devices, shared counters)?
                        usable, short = _usable_devices(probe, node, pools, inp, s)
                        if usable >= need:
                            best = ""
                            last = (where, what, s, matching, free, tainted)
                            break
                        left = f"{usable or 'none'} with enough left ({short})"
                        why = f"{matching} match(es), {free} free{tainted}, {left}"
                    elif matching == 0:
                        why = f"no device matches class {s.device_class_name} and the request's selectors"
                    else:
                        why = f"{matching} match(es), {free} free{tainted}"
                    best = best or f"{where}: needs {what} of class {s.device_class_name}: {why}"
                if best:
                    return best
        if any(p.incomplete for p in pools):
            return "cannot allocate all claims (some resource pools are being updated)"
        requests = [(inp, req) for inp in inputs for req in inp.spec.requests]
        if len(requests) == 1 and last is not None:
            # one request that fits device by device: what is left is the devices together
            where, what, s, matching, free, tainted = last
            constraints = requests[0][0].spec.constraints
            if constraints:
                attrs = ", ".join(sorted({c.match_attribute or c.distinct_attribute or "?" for c in constraints}))
                because = f"the claim's constraints on {attrs}"
            else:
                because = "shared counters or capacity"
            n = s.count if s.allocation_mode == ALLOCATION_MODE_EXACT else matching
            tail = (
                f"none of them can be allocated ({because})"
                if n == 1
                else f"no {n} of them can be allocated together ({because})"
            )
            found = f"{matching} match(es), {free} free{tainted}"
            return f"{where}: needs {what} of class {s.device_class_name}: {found}, but {tail}"
        return "cannot allocate all claims: requests fit one by one but not together (constraints or shared devices)"

    @staticmethod
    def _ext_node_cached(ext: _Extended, node: NodeInfo) -> NodeRequests | None:
        got = ext.nodes.get(node.name)
        return got[1] if got is not None and got[0] is node.node else None

    # --- PreFilterExtensions: preemption's dry run and nominated pods ---------------------------------------
    #
    # Goes beyond upstream 1.37.2 (whose DynamicResources has no PreFilterExtensions, so a preemption dry run
    # never frees devices; KEP-5690 did not land). Removing a pod frees the devices of each of its claims that
    # no surviving consumer reserves: the claim's reservedFor minus the removed pods is empty, and neither the
    # pod being scheduled nor a pod added here (a nominated pod) uses it. A shared claim whose other consumer
    # lives stays allocated, as kube-controller-manager keeps it. The freed devices are seen through a
    # :class:`~scheduler.cache.ledger.LedgerView` over the real ledger, which is never modified. Adding a pod that is
    # not running yet (a nominated pod, upstream addGENominatedPods) holds devices for its unallocated claims:
    # they are allocated together with the pod's own claims on that node, so the pod fits only if both do.

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return Status.ok()
        data.removed[pod_to_remove.uid] = pod_to_remove
        data.extra.pop(pod_to_remove.uid, None)
        data.origin_allocations = None
        self._refresh_dry_run(state, data, pod_to_schedule)
        return Status.ok()

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo) -> Status:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return Status.ok()
        snap = state.snapshot
        if data.removed.pop(pod_to_add.uid, None) is None and not pod_to_add.node_name:
            own = {c.meta.uid for c in data.claims}
            if data.ext is not None:
                own.add(data.ext.claim.meta.uid)
            claims = _claims_of(snap, pod_to_add)
            inputs = tuple(
                ClaimInput(c.key, c.meta.uid, c.spec)
                for c in claims
                if c.allocation is None and c.meta.uid not in own and not snap.ledger.is_pending(c.meta.uid)
            )
            data.extra[pod_to_add.uid] = (node.name, inputs, frozenset(c.meta.uid for c in claims))
        self._refresh_dry_run(state, data, pod_to_schedule)
        return Status.ok()

    def _refresh_dry_run(self, state: CycleState, data: _CycleData, pod: Pod) -> None:
        """Recompute which claims are free after the removals, and the allocator over that view."""
        snap = state.snapshot
        keep = {c.meta.uid for c in data.claims}
        if data.ext is not None:
            keep.add(data.ext.claim.meta.uid)
        for _, _, uids in data.extra.values():
            keep.update(uids)  # a pod added here (nominated) will reserve its allocated claims
        hidden: set[str] = set()
        gone = set(data.removed)
        for victim in data.removed.values():
            for c in _claims_of(snap, victim):
                if c.allocation is None or c.meta.uid in keep:
                    continue
                consumers = {r.uid for r in c.reserved_for}
                if victim.uid in consumers and not consumers - gone:
                    hidden.add(c.meta.uid)
        data.ledger = LedgerView(snap.ledger, hidden) if hidden else None
        data.node_allocations = {}
        if data.allocator is not None:
            data.allocator = Allocator(
                self.features,
                data.ledger or snap.ledger,
                snap.classes,
                self.selectors,
                self.device_inputs,
                device_order=state.read(DEVICE_ORDER_KEY),
            )

    @staticmethod
    def _extra_inputs(data: _CycleData, node: NodeInfo, inputs: Sequence[ClaimInput]) -> list[ClaimInput]:
        """The unallocated claims of the pods added to ``node`` in a dry run (nominated pods), once each."""
        if not data.extra:
            return []
        seen = {i.uid for i in inputs}
        out: list[ClaimInput] = []
        for name, extra, _ in data.extra.values():
            if name != node.name:
                continue
            for inp in extra:
                if inp.uid not in seen:
                    seen.add(inp.uid)
                    out.append(inp)
        return out

    # --- gangs ---------------------------------------------------------------------------------------------

    def joint_allocate(self, states: Sequence[CycleState], node: NodeInfo) -> list[list[ClaimAllocation]] | None:
        """Allocate the unallocated claims of several pods (their cycle states, after PreFilter) together
        on one node, so the allocator can backtrack across pods. The caller has unreserved those pods'
        earlier picks. Returns per-pod allocations (same order), or None. Raises AllocationError."""
        datas: list[_CycleData | None] = [st.read(STATE_KEY) for st in states]
        inputs: list[ClaimInput] = []
        spans: list[tuple[int, int]] = []
        seen: set[str] = set()
        for d, st in zip(datas, states, strict=True):
            start = len(inputs)
            if d is not None and d.allocator is not None:
                for inp in self._node_inputs(st, d, node):
                    if inp.uid in seen:
                        raise AllocationError(f"claim {inp.key} is shared by two members placed on one node")
                    seen.add(inp.uid)
                    inputs.append(inp)
            spans.append((start, len(inputs)))
        if not inputs and not any(d is not None and d.ext is not None and d.ext.allocates for d in datas):
            return [[] for _ in states]
        snap = states[-1].snapshot
        allocator = Allocator(
            self.features,
            snap.ledger,
            snap.classes,
            self.selectors,
            self.device_inputs,
            device_order=states[-1].read(DEVICE_ORDER_KEY),
        )
        result = allocator.allocate(node.node, inputs, self._node_pools(snap, node))
        if result is None:
            return None
        out = [result[a:b] for a, b in spans]
        for i, (d, r) in enumerate(zip(datas, out, strict=True)):
            if d is not None and d.ext is not None and d.ext.allocates and len(r) == len(d.inputs):
                out[i] = r = [*r, EMPTY_ALLOCATION]
            if d is not None and d.allocator is not None:
                d.node_allocations[node.name] = r
        return out

    # the group cycle's JointAllocation point (scheduler.framework.interface.JointAllocationPlugin); allocations
    # are ClaimAllocations, opaque to the engine

    def joint_resolvable(self, status: Status) -> bool:
        """A Filter rejection of this plugin may be resolved by allocating the members on the node together."""
        return status.plugin == self.name

    def allocate_jointly(self, states: Sequence[CycleState], node: NodeInfo) -> list[list[ClaimAllocation]] | None:
        """:meth:`joint_allocate`; None also when the allocator fails."""
        try:
            return self.joint_allocate(states, node)
        except AllocationError:
            return None

    def member_allocation(self, state: CycleState, node: str) -> list[ClaimAllocation]:
        return self.allocation_for(state, node)

    def reserve_member_allocation(
        self, state: CycleState, node: str, allocations: Sequence[Any], ledger: DeviceLedger
    ) -> list[tuple[str, ClaimAllocation]]:
        """Make ``allocations`` the pod's on ``node`` and reserve their devices in ``ledger`` (in flight); returns
        (claim uid, allocation) for the group's pending map (``GROUP_PENDING_KEY``)."""
        allocs: list[ClaimAllocation] = allocations if isinstance(allocations, list) else list(allocations)
        out: list[tuple[str, ClaimAllocation]] = []
        for c, a in zip(self.claims_to_allocate(state), allocs, strict=True):
            ledger.reserve(c.meta.uid, c.key, a.results)
            out.append((c.meta.uid, a))
        self.set_allocation(state, node, allocs)
        return out

    def member_claims(self, state: CycleState, node: str) -> tuple[list[str], list[tuple[str, ClaimAllocation]]]:
        """After Reserve: the uids of the claims the pod allocates, and (claim uid, allocation) on ``node``."""
        claims = self.claims_to_allocate(state)
        pairs = [(c.meta.uid, a) for c, a in zip(claims, self.allocation_for(state, node), strict=False)]
        return [c.meta.uid for c in claims], pairs

    def claims_to_allocate(self, state: CycleState) -> list[ResourceClaim]:
        """The claims the allocator allocates for the pod, in the order of its allocations."""
        data: _CycleData | None = state.read(STATE_KEY)
        return [] if data is None else data.alloc_claims()

    def set_allocation(self, state: CycleState, node: str, allocs: list[ClaimAllocation]) -> None:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is not None:
            data.node_allocations[node] = allocs

    def allocation_for(self, state: CycleState, node: str) -> list[ClaimAllocation]:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return []
        return data.node_allocations.get(node, [])

    # --- Score -----------------------------------------------------------------------------------------

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return 0
        if data.allocator is None:
            return 0
        allocs, _ = self._result_for(state, data, node)
        if not allocs:
            return 0
        total = 0
        for inp, alloc in zip(data.inputs, allocs, strict=False):  # the special claim has no firstAvailable
            firsts = {r.name: [s.name for s in r.first_available] for r in inp.spec.requests if r.first_available}
            seen: set[str] = set()
            for res in alloc.results:
                parent = res.request.partition("/")[0]
                if parent in firsts and parent not in seen:
                    seen.add(parent)
                    total += FIRST_AVAILABLE_MAX - firsts[parent].index(res.request)
        return total

    @max_normalized()
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        """``helper.DefaultNormalizeScore(MaxNodeScore, false)`` as upstream 1.37.2 (dynamicresources.go
        NormalizeScore): the node with the best-ranked firstAvailable subrequests gets 100, the others in
        proportion. With the default weight 2 (upstream's), packing and topology can outweigh the rank; an
        admin who wants the user's order to win raises the weight in the ConfigMap."""
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return Status.ok()

    # --- Reserve / Unreserve ---------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None or not data.alloc_claims():
            return Status.ok()
        info = state.snapshot.node_map.get(node)
        allocs = self._result_for(state, data, info)[0] if info is not None else None
        if allocs is None:
            return Status.error(f"no allocation was computed for node {node}")
        ledger = state.snapshot.ledger
        for claim, alloc in zip(data.alloc_claims(), allocs, strict=True):
            ledger.reserve(claim.meta.uid, claim.key, alloc.results)
            data.reserved.append(claim)
            if any(c is claim for c in data.to_allocate):  # an API object (not the in-memory extended claim)
                self._in_flight[claim.meta.uid] = _InFlight(alloc, pod.uid)
        return Status.ok()

    def _claim_lock(self, uid: str) -> asyncio.Lock:
        got = self._claim_locks.get(uid)
        if got is None:
            got = self._claim_locks[uid] = (asyncio.Lock(), [0])
        got[1][0] += 1
        return got[0]

    def _claim_unlock(self, uid: str, lock: asyncio.Lock) -> None:
        """One user of the claim's lock is done; the last one drops it (nothing kept per claim afterwards)."""
        got = self._claim_locks.get(uid)
        if got is not None and got[0] is lock:
            got[1][0] -= 1
            if got[1][0] <= 0:
                del self._claim_locks[uid]

    def _land(self, uid: str, written: dict[str, Any] | None) -> None:
        """The in-flight allocation of claim ``uid`` was written (``written``: the claim as stored, which PreBind
        already remembered) or given up."""
        flight = self._in_flight.pop(uid, None)
        if flight is None:
            return
        flight.written = written
        flight.done.set()

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return
        for claim in data.reserved:
            state.snapshot.ledger.unreserve(claim.meta.uid)
            flight = self._in_flight.get(claim.meta.uid)
            if flight is not None and flight.pod == pod.uid:
                self._land(claim.meta.uid, None)
        data.reserved.clear()

    # --- PreBind ---------------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status:
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return Status.skip()
        allocs = dict(zip((c.meta.uid for c in data.to_allocate), data.node_allocations.get(node, []), strict=False))
        ledger = state.snapshot.ledger
        for claim in data.claims:
            if is_reserved_for_pod(pod, claim):  # the pod or its PodGroup (DRAWorkloadResourceClaims)
                continue
            alloc = allocs.get(claim.meta.uid)
            copy: Mapping[str, Any] | None = None
            flight = data.shared_in_flight.get(claim.meta.uid)
            if flight is not None:
                # the pod this claim's allocation was made for writes it: wait for that, then reserve
                await flight.done.wait()
                if flight.written is None:
                    return Status.error(
                        f"claim {claim.key}: the allocation this pod was to share was given up by the pod it was made "
                        "for; retrying"
                    )
                copy = flight.written
            # One write at a time per claim from this scheduler, each from the newest copy it knows (its own last
            # write included): pods sharing a claim then add themselves to reservedFor one after the other
            # instead of racing each other into 409s from the same resourceVersion.
            lock = self._claim_lock(claim.meta.uid)
            try:
                async with lock:
                    for other in (claim.raw, self._written.get(claim.meta.uid)):
                        if other is not None and (copy is None or _rv_newer(_rv_of(other), _rv_of(copy))):
                            copy = other
                    written = await self._bind_claim(api, claim, pod, alloc, _consumer(state, pod, claim), copy)
                    self._remember_written(claim.meta.uid, written)
            except _BindError as e:
                if alloc is not None:
                    self._land(claim.meta.uid, None)
                return Status.error(str(e))
            finally:
                self._claim_unlock(claim.meta.uid, lock)
            data.written.append((claim, alloc is not None))
            data.latest[claim.meta.uid] = written
            rv = _rv_of(written)
            if alloc is not None:
                ledger.assume(claim.meta.uid, claim.key, alloc.results, rv)
                self._land(claim.meta.uid, written)
        if data.ext is not None:
            st = await self._pre_bind_extended(state, data, data.ext, pod, node, api)
            if not st.is_success:
                return st
        return await self._wait_for_binding_conditions(state, data, pod, node, api)

    # --- PreBind: device binding conditions (KEP-5007) ---------------------------------------------------

    def _bound_claims(self, data: _CycleData) -> list[tuple[ResourceClaim, Mapping[str, Any]]]:
        """The pod's claims as PreBind left them (what it wrote, else the cycle's copy), the special claim for
        extended resources included when it exists in the API server."""
        out: list[tuple[ResourceClaim, Mapping[str, Any]]] = [
            (c, data.latest.get(c.meta.uid) or c.raw) for c in data.claims
        ]
        ext = data.ext
        if ext is not None:
            target = ext.created or (ext.claim if ext.existing else None)
            if target is not None:
                out.append((target, data.latest.get(target.meta.uid) or target.raw))
        return out

    async def _wait_for_binding_conditions(
        self, state: CycleState, data: _CycleData, pod: Pod, node: str, api: ClusterAPI
    ) -> Status:
        """Upstream PreBind's last step: wait until every allocated device with ``bindingConditions`` has them
        all ``True`` in ``status.devices``; a ``True`` failure condition or ``bindingTimeout`` fails."""
        if not self.features.binding_conditions:
            return Status.ok()
        targets = [c for c, raw in self._bound_claims(data) if _binding_devices(raw)]
        if not targets:
            return Status.ok()
        await api.event(
            dict(pod.raw),
            "Normal",
            "BindingConditionsPending",
            f"waiting for binding conditions for device on node {node}",
            "Scheduling",
        )
        clock = self.binding_clock
        deadline = clock.monotonic() + self.binding_timeout
        latest: dict[str, Mapping[str, Any]] = {c.meta.uid: raw for c, raw in self._bound_claims(data)}
        while True:
            for c in targets:
                try:
                    obj = await api.get("ResourceClaim", c.namespace, c.name)
                except NotFound:
                    return await self._binding_failed(
                        state, data, pod, node, api, [], f"claim {c.key} got deleted in the meantime"
                    )
                except ApiError as e:
                    # the claim is read again at the next poll; the timeout still applies
                    log.warning("binding conditions: cannot read claim", claim=c.key, pod=pod.key, error=str(e))
                    continue
                if (obj.get("metadata") or {}).get("uid") != c.meta.uid:
                    return await self._binding_failed(
                        state, data, pod, node, api, [], f"claim {c.key} got replaced in the meantime"
                    )
                if not (obj.get("status") or {}).get("allocation"):
                    return await self._binding_failed(
                        state, data, pod, node, api, [], f"claim {c.key} got deallocated in the meantime"
                    )
                latest[c.meta.uid] = obj
            pending: list[ResourceClaim] = []
            for c in targets:
                devices = _binding_devices(latest[c.meta.uid])
                failed = next((d for d in devices if d.failed), None)
                if failed is not None:
                    reason, message = failed.first_failure
                    return await self._binding_failed(
                        state,
                        data,
                        pod,
                        node,
                        api,
                        [c],
                        f"device binding failed: claim={c.name}, reason={reason}, message={json.dumps(message)}; "
                        # as upstream logs a failure: the devices with a failure condition, only those conditions
                        f"devices: {_format_devices(replace(d, pending=()) for d in devices if d.failed)}",
                    )
                if any(d.pending for d in devices):
                    pending.append(c)
            if not pending:
                log.info("binding conditions met", pod=pod.key, node=node)
                return Status.ok()
            now = clock.monotonic()
            wall = clock.wall()
            late = next((c for c in pending if _allocated_at(latest[c.meta.uid]) + self.binding_timeout < wall), None)
            if late is not None or now >= deadline:
                first = late or pending[0]
                devices = [d for c in pending for d in _binding_devices(latest[c.meta.uid]) if d.pending]
                return await self._binding_failed(
                    state,
                    data,
                    pod,
                    node,
                    api,
                    pending,
                    f"device binding timeout: claim={first.name}: binding conditions not met within "
                    f"{format_go_duration(self.binding_timeout)}; devices: {_format_devices(devices)}",
                )
            await clock.sleep(min(self.binding_poll, deadline - now))

    async def _binding_failed(
        self,
        state: CycleState,
        data: _CycleData,
        pod: Pod,
        node: str,
        api: ClusterAPI,
        claims: Sequence[ResourceClaim],
        message: str,
    ) -> Status:
        """Undo this attempt at once (the gang commit rolls back only members whose PreBind succeeded; a
        second rollback finds nothing left to undo). ``claims`` failed or timed out: they are deallocated
        when nobody else reserves them, also when an earlier attempt wrote them."""
        log.warning("device binding conditions failed", pod=pod.key, node=node, error=message)
        written = {c.meta.uid for c, _ in data.written}
        for c in claims:
            data.binding_failed.add(c.meta.uid)
            ext = data.ext
            is_ext = ext is not None and c.meta.uid in {
                x.meta.uid for x in (ext.created, ext.claim if ext.existing else None) if x is not None
            }
            if c.meta.uid not in written and not is_ext:
                data.written.append((c, False))  # reserved by an earlier attempt: drop our reservation too
        await self.rollback(state, pod, node, api)
        return Status.error(message)

    async def _pre_bind_extended(
        self, state: CycleState, data: _CycleData, ext: _Extended, pod: Pod, node: str, api: ClusterAPI
    ) -> Status:
        """``bindClaim`` for the special claim: create it (unless an earlier attempt did), finalizer, then
        allocation + reservedFor, then ``pod.status.extendedResourceClaimStatus``."""
        try:
            return await self._bind_extended(state, data, ext, pod, node, api)
        finally:
            if not ext.existing:
                # the in-memory claim's in-flight entry (its devices are assumed under the real claim now,
                # or there were none on this node)
                state.snapshot.ledger.unreserve(ext.claim.meta.uid)

    async def _bind_extended(
        self, state: CycleState, data: _CycleData, ext: _Extended, pod: Pod, node: str, api: ClusterAPI
    ) -> Status:
        got = ext.nodes.get(node)
        info = state.snapshot.node_map.get(node)
        if got is not None:
            nr = got[1]
        elif info is not None:
            nr = node_requests(pod, info.node, state.snapshot.classes)
        else:
            return Status.error(f"extended resource claim not found for node {node}")
        alloc: ClaimAllocation | None = None
        if ext.allocates:
            allocs = data.node_allocations.get(node) or []
            if len(allocs) != len(data.alloc_claims()):
                return Status.error(f"extended resource claim not found for node {node}")
            alloc = allocs[-1]
            if not nr.requests:
                return Status.ok()  # the node serves the extended resources natively (device plugin)
        elif not nr.requests:
            return Status.ok()
        ledger = state.snapshot.ledger
        claim = ext.claim
        if not ext.existing:
            try:
                created = await api.create("ResourceClaim", new_claim_object(pod, nr.requests))
            except ApiError as e:
                return Status.error(f"create claim for extended resources of pod {pod.key}: {e}")
            claim = ext.created = claim_from(created)
        if not any(r.uid == pod.uid for r in claim.reserved_for):
            try:
                written = await self._bind_claim(api, claim, pod, alloc)
            except _BindError as e:
                return Status.error(str(e))
            data.latest[claim.meta.uid] = written
            if alloc is not None:
                rv = str((written.get("metadata") or {}).get("resourceVersion", ""))
                ledger.assume(claim.meta.uid, claim.key, alloc.results, rv)
        if not nr.mappings:
            return Status.error(
                f"nil or empty request mappings, no update of pod {pod.key} ExtendedResourceClaimStatus"
            )
        want = {"requestMappings": [dict(m) for m in nr.mappings], "resourceClaimName": claim.name}
        if (pod.raw.get("status") or {}).get("extendedResourceClaimStatus") != want:
            try:
                await api.patch(
                    "Pod",
                    pod.namespace,
                    pod.name,
                    {"metadata": {"uid": pod.uid}, "status": {"extendedResourceClaimStatus": want}},
                    subresource="status",
                )
            except ApiError as e:
                return Status.error(f"update pod {pod.key} ExtendedResourceClaimStatus: {e}")
        return Status.ok()

    async def _bind_claim(
        self,
        api: ClusterAPI,
        claim: ResourceClaim,
        pod: Pod,
        alloc: ClaimAllocation | None,
        consumer: dict[str, str] | None = None,
        copy: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        obj: dict[str, Any] = _deep_copy(copy if copy is not None else claim.raw)
        for attempt in range(CONFLICT_RETRIES):
            if attempt:
                await asyncio.sleep(0.01 * attempt)
                try:
                    obj = await api.get("ResourceClaim", claim.namespace, claim.name)
                except NotFound:
                    raise _BindError(f"claim {claim.key} got deleted in the meantime") from None
                except ApiError as e:
                    raise _BindError(f"claim {claim.key}: reading it failed: {e}") from None
            meta = obj.setdefault("metadata", {})
            if meta.get("uid") and meta.get("uid") != claim.meta.uid:
                raise _BindError(f"claim {claim.key} got replaced in the meantime")
            if meta.get("deletionTimestamp"):
                raise _BindError(f"claim {claim.key} got deleted in the meantime")
            status = obj.setdefault("status", {})
            try:
                if alloc is not None:
                    existing = status.get("allocation")
                    if existing and _without_timestamp(existing) != alloc.raw:
                        raise _BindError(f"claim {claim.key} got allocated elsewhere in the meantime")
                    if CLAIM_FINALIZER not in (meta.get("finalizers") or []):
                        meta["finalizers"] = [*(meta.get("finalizers") or []), CLAIM_FINALIZER]
                        obj = await api.update("ResourceClaim", obj)
                        status = obj.setdefault("status", {})
                    if existing:
                        status["allocation"] = existing
                    elif self.features.binding_conditions:
                        # upstream bindClaim: allocationTimestamp = now (the results are shared: copy)
                        status["allocation"] = {**alloc.raw, "allocationTimestamp": _rfc3339(self.binding_clock.wall())}
                    else:
                        status["allocation"] = alloc.raw
                elif not status.get("allocation"):
                    if attempt == 0:
                        # our copy predates the allocation (written by another member of a gang)
                        raise Conflict("stale claim copy")
                    raise _BindError(f"claim {claim.key} is no longer allocated")
                reserved = list(status.get("reservedFor") or [])
                entry = consumer or {"resource": "pods", "name": pod.name, "uid": pod.uid}
                if any(r.get("uid") == entry["uid"] for r in reserved):
                    if alloc is None or existing:
                        return obj  # reserved already (another member of the PodGroup wrote it)
                else:
                    reserved.append(entry)
                status["reservedFor"] = reserved
                return await api.update("ResourceClaim", obj, subresource="status")
            except Conflict:
                continue
            except (NotFound, ApiError) as e:
                # e.g. 403 without RBAC on resourceclaims/binding (1.36+), 422 (too many consumers), 5xx
                raise _BindError(f"claim {claim.key}: writing the allocation failed: {e}") from None
        raise _BindError(f"claim {claim.key}: giving up after {CONFLICT_RETRIES} conflicting updates")

    async def rollback(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> None:
        """Undo PreBind's writes: drop our reservedFor entry; deallocate claims we allocated for this
        attempt when nobody else uses them."""
        data: _CycleData | None = state.read(STATE_KEY)
        if data is None:
            return
        ledger = state.snapshot.ledger
        for claim, allocated_by_us in reversed(data.written):
            for attempt in range(CONFLICT_RETRIES):
                try:
                    obj = await api.get("ResourceClaim", claim.namespace, claim.name)
                except NotFound:
                    break
                except ApiError as e:
                    log.warning("rollback: cannot read claim", claim=claim.key, pod=pod.key, error=str(e))
                    break
                if (obj.get("metadata") or {}).get("uid") != claim.meta.uid:
                    break
                status = obj.setdefault("status", {})
                reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod.uid]
                status["reservedFor"] = reserved
                # a claim whose binding conditions failed or timed out is deallocated whoever allocated it
                # (upstream: the next attempt's Filter + PostFilter)
                dealloc = (allocated_by_us or claim.meta.uid in data.binding_failed) and not reserved
                if dealloc:
                    status.pop("allocation", None)
                    status.pop("devices", None)
                try:
                    written = await api.update("ResourceClaim", obj, subresource="status")
                except Conflict:
                    await asyncio.sleep(0.01 * (attempt + 1))
                    continue
                except ApiError as e:
                    # left for the resourceclaim controller (removes reservations of unbound pods) and
                    # for this pod's next attempt, which reuses the allocation
                    log.warning("rollback: cannot update claim", claim=claim.key, pod=pod.key, error=str(e))
                    break
                if dealloc:
                    rv = str((written.get("metadata") or {}).get("resourceVersion", ""))
                    ledger.assume(claim.meta.uid, claim.key, None, rv)
                break
        data.written.clear()
        data.binding_failed.clear()
        ext = data.ext
        if ext is not None:
            # unreserveExtendedResourceClaim: a special claim that exists in the API server is deleted
            target = ext.created or (ext.claim if ext.existing else None)
            ext.created = None
            if target is not None:
                await _delete_claim(api, target, pod)


class _BindError(Exception):
    pass


def _consumer(state: CycleState, pod: Pod, claim: ResourceClaim) -> dict[str, str] | None:
    """``BindTo``: the ``reservedFor`` entry of a claim that is the pod's PodGroup's (``scheduling.k8s.io``
    ``podgroups``), else None (the pod itself)."""
    group = scheduling_group(pod)
    if not group:
        return None
    pg = state.snapshot.podgroups.get(f"{pod.namespace}/{group}")
    for pc in pod.claims:
        name = pc.claim_name or pod.claim_statuses.get(pc.name)
        if name == claim.name:
            ref = consumer_for(pod, pg, pc.name)
            return ref if ref.get("resource") == "podgroups" else None
    return None


async def _delete_claim(api: ClusterAPI, claim: ResourceClaim, pod: Pod) -> None:
    """``deleteClaim``: drop the delete-protection finalizer (conflicts retried), then delete."""
    for attempt in range(CONFLICT_RETRIES):
        try:
            obj = await api.get("ResourceClaim", claim.namespace, claim.name)
        except NotFound:
            return
        except ApiError as e:
            log.warning("rollback: cannot read claim", claim=claim.key, pod=pod.key, error=str(e))
            return
        meta = obj.setdefault("metadata", {})
        if meta.get("uid") != claim.meta.uid:
            return
        finalizers = list(meta.get("finalizers") or [])
        if CLAIM_FINALIZER not in finalizers:
            break
        meta["finalizers"] = [f for f in finalizers if f != CLAIM_FINALIZER]
        try:
            await api.update("ResourceClaim", obj)
        except Conflict:
            await asyncio.sleep(0.01 * (attempt + 1))
            continue
        except ApiError as e:
            log.warning("rollback: cannot remove the claim's finalizer", claim=claim.key, pod=pod.key, error=str(e))
            return
        break
    try:
        await api.delete("ResourceClaim", claim.namespace, claim.name)
    except NotFound:
        pass
    except ApiError as e:
        log.warning("rollback: cannot delete claim", claim=claim.key, pod=pod.key, error=str(e))


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


@dataclass(frozen=True, slots=True)
class _BindingDevice:
    """One allocated device with binding conditions, as the claim's status reports it (upstream
    ``BindingConditionsStatus``)."""

    driver: str
    pool: str
    device: str
    pending: tuple[str, ...]  # binding conditions not True yet (all of them without a status entry)
    failed: tuple[str, ...]  # binding failure conditions that are True
    first_failure: tuple[str, str] = ("", "")  # (reason, message) of the first True failure condition


def _binding_devices(claim: Mapping[str, Any]) -> list[_BindingDevice]:
    """The claim's allocated devices that have ``bindingConditions``, with their state in ``status.devices``
    (the entry with the same driver, pool and device, as upstream ``getAllocatedDeviceStatus``)."""
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    entries = [d for d in status.get("devices") or [] if isinstance(d, Mapping)]
    out: list[_BindingDevice] = []
    for r in results:
        if not isinstance(r, Mapping) or not r.get("bindingConditions"):
            continue
        driver, pool, device = str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))
        entry = next(
            (e for e in entries if (e.get("driver"), e.get("pool"), e.get("device")) == (driver, pool, device)), None
        )
        wanted = tuple(str(c) for c in r.get("bindingConditions") or [])
        if entry is None:
            out.append(_BindingDevice(driver, pool, device, wanted, ()))
            continue
        conds = {str(c.get("type")): c for c in entry.get("conditions") or [] if isinstance(c, Mapping) and "type" in c}

        def true(t: str, conds: Mapping[str, Mapping[str, Any]] = conds) -> bool:
            return conds.get(t, {}).get("status") == "True"

        failed = tuple(str(c) for c in r.get("bindingFailureConditions") or [] if true(str(c)))
        first = ("", "")
        if failed:
            c = conds[failed[0]]
            first = (str(c.get("reason", "")), str(c.get("message", "")))
        out.append(_BindingDevice(driver, pool, device, tuple(c for c in wanted if not true(c)), failed, first))
    return out


def _format_devices(devices: Iterable[_BindingDevice]) -> str:
    """Upstream ``formatBCStatusOneLine``: ``<driver=D, pool=P> device failed=[..] pending=[..]; ...``."""
    parts = []
    for d in devices:
        part = f"<driver={d.driver}, pool={d.pool}> {d.device}"
        if d.failed:
            part += f" failed=[{','.join(d.failed)}]"
        if d.pending:
            part += f" pending=[{','.join(d.pending)}]"
        parts.append(part)
    return "; ".join(parts)


def _allocated_at(claim: Mapping[str, Any]) -> float:
    """``status.allocation.allocationTimestamp`` in seconds since the epoch; +inf when unset or unreadable (no
    timeout from it, as upstream ``isClaimTimeout``)."""
    ts = ((claim.get("status") or {}).get("allocation") or {}).get("allocationTimestamp")
    if not isinstance(ts, str):
        return float("inf")
    try:
        t = datetime.fromisoformat(ts)
    except ValueError:
        return float("inf")
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _rfc3339(epoch: float) -> str:
    """metav1.Time's JSON form (RFC 3339, seconds, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _without_timestamp(allocation: Mapping[str, Any]) -> Mapping[str, Any]:
    if "allocationTimestamp" not in allocation:
        return allocation
    return {k: v for k, v in allocation.items() if k != "allocationTimestamp"}


def _deep_copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    import copy
    import marshal

    try:  # JSON data: marshal's C round trip is about 4x copy.deepcopy
        out: dict[str, Any] = marshal.loads(marshal.dumps(dict(raw)))
        return out
    except ValueError:
        return copy.deepcopy(dict(raw))


def _count_devices(
    probe: Allocator, node: NodeInfo, pools: list[Pool], inp: ClaimInput, spec: Any
) -> tuple[int, int, str]:
    """(devices on the node matching the request's class and selectors, how many of them are free, a note on
    the unallocated ones a device taint the request does not tolerate keeps from being free)."""
    matching = free = tainted = 0
    first_taint = None
    for c in probe.matching(inp, spec, pools, node.node):
        matching += 1
        if not probe.ledger.is_allocated(c.id) and (
            c.device.allow_multiple_allocations or not probe.ledger.has_shares(c.id)
        ):
            t = (
                untolerated_taint((*c.device.taints, *c.rule_taints), spec.tolerations)
                if probe.features.device_taints
                else None
            )
            if t is not None:
                tainted += 1
                first_taint = first_taint or t
                continue
            free += 1
    note = f", {tainted} tainted ({describe_taint(first_taint)} not tolerated)" if first_taint is not None else ""
    return matching, free, note


def _usable_devices(probe: Allocator, node: NodeInfo, pools: list[Pool], inp: ClaimInput, spec: Any) -> tuple[int, str]:
    """(how many of the free matching devices ``spec`` could take right now, what is short on the others):
    the remaining capacity of a shareable device (or a dedicated device's capacity) against what the request
    consumes, and the shared counters left in a device's pool against what the device consumes."""
    by_id = {p.id: p for p in pools}
    usable = 0
    capacity: dict[str, tuple[Any, Any]] = {}  # capacity name -> (consumed by the request, most left)
    counters: dict[tuple[str, str], tuple[Any, Any]] = {}  # (counter set, counter) -> (consumed, most left)
    f = probe.features
    for c in probe.matching(inp, spec, pools, node.node):
        if probe.ledger.is_allocated(c.id) or (
            not c.device.allow_multiple_allocations and probe.ledger.has_shares(c.id)
        ):
            continue
        if f.device_taints and untolerated_taint((*c.device.taints, *c.rule_taints), spec.tolerations) is not None:
            continue
        cap = capacity_shortfall(probe.ledger, spec, c) if f.consumable_capacity else None
        if cap is not None:
            name, used, left = cap
            prev = capacity.get(name)
            capacity[name] = (used, left if prev is None or left > prev[1] else prev[1])
            continue
        cnt = counter_shortfall(probe, by_id[c.pool], c) if f.partitionable_devices else None
        if cnt is not None:
            set_name, cname, used, left = cnt
            prev = counters.get((set_name, cname))
            counters[(set_name, cname)] = (used, left if prev is None or left > prev[1] else prev[1])
            continue
        usable += 1
    notes = [
        f"capacity {name}: takes {used}, at most {left} left on a matching device"
        for name, (used, left) in capacity.items()
    ]
    notes += [
        f"counter {cname} of counter set {set_name}: a device takes {used}, at most {left} left"
        for (set_name, cname), (used, left) in counters.items()
    ]
    return usable, "; ".join(notes) or "no shortfall found"


def _validate(args: Mapping[str, Any], path: str) -> list[str]:
    errors = []
    for k, v in args.items():
        if k == "celEngine":
            if not isinstance(v, str) or not engine_available(v):
                errors.append(
                    f"{path}.celEngine: unknown or unavailable CEL engine {v!r} (available: "
                    f"{', '.join(available_engines())})"
                )
        elif k == "featureGates":
            if not isinstance(v, Mapping):
                errors.append(f"{path}.featureGates: must be a map of gate name to bool")
                continue
            for g, on in v.items():
                if g not in _GATES:
                    errors.append(f"{path}.featureGates.{g}: unknown feature gate")
                elif not isinstance(on, bool):
                    errors.append(f"{path}.featureGates.{g}: must be true or false")
        elif k == "filterTimeout":
            if not isinstance(v, str):
                errors.append(f"{path}.filterTimeout: must be a duration string such as 10s")
                continue
            try:
                if parse_go_duration(v) < 0:
                    errors.append(f"{path}.filterTimeout: Invalid value: {json.dumps(v)}: must be zero or positive")
            except ValueError as e:
                errors.append(f"{path}.filterTimeout: {e}")
        elif k == "bindingTimeout":
            errors.extend(_validate_binding_timeout(args, v, path))
        elif k == PARTITION_ARG:
            errors.extend(validate_partition(v, path))
        else:
            errors.append(f"{path}.{k}: unknown field")
    return errors


def _validate_binding_timeout(args: Mapping[str, Any], v: Any, path: str) -> list[str]:
    """``ValidateDynamicResourcesArgs`` (v1.37.2 ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``):
    with DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on, at least one second; with either
    off, not allowed at all."""
    if not isinstance(v, str):
        return [f"{path}.bindingTimeout: must be a duration string such as 600s or 10m"]
    try:
        seconds = parse_go_duration(v)
    except ValueError as e:
        return [f"{path}.bindingTimeout: {e}"]
    gates = args.get("featureGates")
    gates = gates if isinstance(gates, Mapping) else {}
    if any(gates.get(g, True) is False for g in ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus")):
        return [
            f"{path}.bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus "
            "feature gate is disabled"
        ]
    if seconds < 1:
        return [f"{path}.bindingTimeout: Invalid value: {json.dumps(v)}: must be at least 1 second"]
    return []


_GATES = {
    "DRAAdminAccess",
    "DRAPrioritizedList",
    "DRAPartitionableDevices",
    "DRADeviceTaints",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRADeviceTaintRules",
}

SPEC = PluginSpec(
    name=NAME,
    factory=DynamicResources,
    points=frozenset({"preEnqueue", "preFilter", "filter", "score", "reserve", "preBind"}),
    validate_args=_validate,
)
