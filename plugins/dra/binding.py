"""DynamicResources' binding cycle: PreBind writes the claims, waits for the devices' binding conditions,
and rollback undoes what it wrote.

PreBind writes, per claim, the finalizer, then ``status.allocation`` (with ``allocationTimestamp``) +
``status.reservedFor`` with the claim's resourceVersion (retry on 409 with a fresh GET; never overwrite another
allocation; refuse claims being deleted), then marks the write as assumed in the ledger. One write at a time per
claim from this scheduler (pods sharing a claim add themselves to ``reservedFor`` one after the other). For a
pod with extended resources backed by DRA it creates the special claim, writes it like any claim and patches
``pod.status.extendedResourceClaimStatus``; rollback deletes that claim.

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
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog

from plugins.dra.allocator import ClaimAllocation
from plugins.dra.extended import new_claim_object, node_requests
from plugins.dra.pools import Features
from plugins.dra.state import CONFLICT_RETRIES, STATE_KEY, _CycleData, _Extended, _InFlight, _rv_newer, _rv_of
from scheduler.api.clusterapi import ApiError, ClusterAPI, Conflict, NotFound
from scheduler.api.dra import CLAIM_FINALIZER, ResourceClaim, claim_from
from scheduler.api.goduration import format_go_duration
from scheduler.api.model import Pod
from scheduler.api.workload_api import consumer_for, is_reserved_for_pod, scheduling_group
from scheduler.framework.hooks import BindingClock
from scheduler.framework.interface import CycleState, Status

log = structlog.get_logger("dra_scheduler.dra")


class ClaimBinding:
    """The binding-cycle half of :class:`plugins.dra.plugin.DynamicResources` (its base class): PreBind, the wait
    for binding conditions, rollback, and the bookkeeping of claim writes they share with the scheduling cycle
    (allocations in flight between Reserve and PreBind, claims written whose watch event has not come yet)."""

    features: Features
    binding_clock: BindingClock
    binding_timeout: float
    binding_poll: float
    _in_flight: dict[str, _InFlight]
    _written: dict[str, dict[str, Any]]
    _claim_locks: dict[str, tuple[asyncio.Lock, list[int]]]  # claim uid -> (its lock, users)

    def _remember_written(self, uid: str, written: dict[str, Any]) -> None:
        """What the API server returned for a claim write (kept, never changed, until the informer has it)."""
        self._written[uid] = written

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
