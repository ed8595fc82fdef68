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
             wait for the devices' binding conditions (:mod:`plugins.dra.binding`).
rollback     undo what PreBind wrote for this attempt.

The binding cycle (PreBind's writes, device binding conditions, rollback) is :mod:`plugins.dra.binding`, the base
class of :class:`DynamicResources`; the cycle state and the pod's claims are :mod:`plugins.dra.state`; the group
capacity bound is :mod:`plugins.dra.capacity`; the Filter's failure messages are :mod:`plugins.dra.diagnose`.

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
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

from plugins.dra import hints
from plugins.dra.allocator import AllocationError, Allocator, ClaimAllocation, ClaimInput, FailedOnNode
from plugins.dra.binding import ClaimBinding
from plugins.dra.capacity import DeviceDemand, device_room, member_demands
from plugins.dra.cel import SelectorCache, available_engines, engine_available, get_engine
from plugins.dra.cel_engine import DeviceInput
from plugins.dra.diagnose import _count_devices, _render, diagnose
from plugins.dra.extended import (
    EXTENDED_CLAIM_ANNOTATION,
    SPECIAL_CLAIM_NAME,
    NodeRequests,
    claim_requests_raw,
    dra_backed_requests,
    find_extended_claim,
    node_requests,
    request_shape,
    temp_uid,
)
from plugins.dra.inputvalidation import selector_compile_errors
from plugins.dra.nodeclass import NodeClasses
from plugins.dra.pools import Features, Pool, gather_pools
from plugins.dra.state import (
    BINDING_POLL_SECONDS,
    BINDING_TIMEOUT_DEFAULT,
    DEVICE_ORDER_KEY,
    EMPTY_ALLOCATION,
    FIRST_AVAILABLE_MAX,
    MAX_CONSUMERS,
    NAME,
    STATE_KEY,
    ClaimResolutionError,
    _Cached,
    _claims_of,
    _CycleData,
    _Extended,
    _InFlight,
    _rv_newer,
    _rv_of,
    pod_claims,
)
from plugins.dra.taintrules import KIND as TAINT_RULE_KIND
from plugins.dra.taintrules import TaintRules, TaintRuleTracker
from scheduler.api.dra import ALLOCATION_MODE_EXACT, ResourceClaim, claim_from, claim_spec_from
from scheduler.api.goduration import parse_go_duration
from scheduler.api.model import ModelError, NodeSelector, Pod, node_selector_matches
from scheduler.api.workload_api import is_reserved_for_pod
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


class DynamicResources(ClaimBinding):
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
        self._classes = NodeClasses()  # allocations that serve every node of a class (plugins/dra/nodeclass.py)
        self._may_help: NodeStateMemo[bool] = NodeStateMemo()
        self._taint_rules = TaintRuleTracker()  # DeviceTaintRules of the snapshots (plugins.dra.taintrules)
        self.stats = {"filter_cache_hits": 0, "filter_allocations": 0, "class_hits": 0}
        bt = args.get("bindingTimeout")
        self.binding_timeout = parse_go_duration(bt) if isinstance(bt, str) else BINDING_TIMEOUT_DEFAULT
        self.binding_clock = REAL_CLOCK
        self.binding_poll = BINDING_POLL_SECONDS
        # the nodes whose devices this scheduler may allocate (running next to kube-scheduler; None: all)
        self.partition = partition_from_args(args)

    # --- registration --------------------------------------------------------------------------------


    def validate_input(self, obj: Mapping[str, Any]) -> list[str]:
        """:class:`~scheduler.framework.hooks.InputValidator`: CEL selectors that do not compile, refused as the
        API server refuses them at creation (:func:`plugins.dra.inputvalidation.selector_compile_errors`)."""
        return selector_compile_errors(obj, self.selectors)

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
            ckey = self._class_key(data, snap, node, inputs, key)
            moved_here = self._classes.get(ckey, inputs, self._node_pools(snap, node), node.name) if ckey else None
            computed: _Cached
            if moved_here is not None:
                self.stats["class_hits"] += 1
                computed = moved_here, ""
            else:
                computed = self._allocate(data, snap, node, inputs)
                if ckey is not None and computed[0] is not None:
                    self._classes.put(ckey, computed[0])
            self._results.retain(snap.node_names)
            self._results.put(node.name, node.node, rev, key, computed)
            result, reason = computed
        else:
            self.stats["filter_cache_hits"] += 1
            result, reason = cached[0], cached[1]
        if result is not None:
            data.node_allocations[node.name] = result
        return result, reason

    def _class_key(
        self, data: _CycleData, snap: Snapshot, node: NodeInfo, inputs: list[ClaimInput], key: Hashable
    ) -> Hashable | None:
        """The key under which this allocation is the same on every node of ``node``'s class
        (plugins/dra/nodeclass.py), or None when the node is computed on its own: a pod with extended resources
        backed by DRA, claims of nominated pods held on the node, a candidate order that does not say what it
        depends on, or pools the class cannot stand for."""
        if data.ext is not None or data.allocator is None or self._extra_inputs(data, node, inputs):
            return None
        order = data.allocator.device_order
        okey: Hashable = ()
        if order is not None:
            fn = getattr(order, "class_key", None)
            okey = fn(node) if fn is not None else None
            if okey is None:
                return None
        cid = self._classes.class_id(self._node_pools(snap, node), snap.ledger, node.name, snap.node_names)
        if cid is None:
            return None
        if data.class_sig is None:
            data.class_sig = self._classes.signature_id(key)
        return data.class_sig, cid, okey

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
        assert data.allocator is not None
        probe = Allocator(self.features, data.ledger or snap.ledger, snap.classes, self.selectors, self.device_inputs)
        return diagnose(probe, data, node, pools, inputs)

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
