"""Running next to kube-scheduler: the double-allocation detector and the device partition (issue #13, item 4).

Why it is needed. Two schedulers that both allocate DRA devices (kube-scheduler 1.37 for pods of
``default-scheduler``, dra-scheduler for its own) each keep an in-memory view of the devices in use (upstream:
``pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go`` plus its in-flight claims). Neither
sees what the other has reserved but not yet written, and the API server protects one *claim* (its
``resourceVersion``), not one *device*: nothing in ``resource.k8s.io/v1`` refuses a ResourceClaim allocation
naming a device already allocated to another claim. So two pods scheduled at the same moment by the two
schedulers can be given the same free GPU (KEP-4381 "Dynamic Resource Allocation with Structured Parameters",
section "Risks and Mitigations": only one scheduler may allocate a given pool at a time). e2e/coexistence.py
measures how often this happens on a live control plane.

The mitigations shipped here:

* **Partitioning** (enforced in config): the DynamicResources plugin arg ``nodeSelector`` (a
  metav1.LabelSelector on node labels) restricts the nodes whose devices this scheduler allocates for a pod
  (claims it must allocate, and the special claim of extended resources backed by DRA). A pod whose claims
  are already allocated is not restricted (it only uses what someone else allocated). Give kube-scheduler the
  other nodes (e.g. a ``nodeSelector`` on its pods, or its own profile's NodeAffinity ``addedAffinity``), and
  the two never compete for a node-local device. Devices of slices that are not node-local (``allNodes`` or a
  slice ``nodeSelector``: network-attached devices) reachable from both partitions are not separated by it.
* **Detection**: :class:`DoubleAllocationDetector` indexes the allocated devices of every ResourceClaim in the
  scheduler's cache (ResourceClaim watch events, whoever wrote the allocation) and finds each device
  ``(driver, pool, device)`` held by two or more claims where at least one of them holds it exclusively. Not a
  conflict: results with ``adminAccess: true`` (KEP-5018: admin access does not consume the device) and two
  results that are both consumable-capacity shares (``shareID`` set, KEP-5075: a device with
  ``allowMultipleAllocations``). Each conflict (the device and the set of claims) is reported once: a Warning
  Event ``DeviceAllocatedTwice`` on each claim, a warning log line, the gauge
  ``dra_scheduler_double_allocated_devices`` (devices currently held twice) and the counter
  ``dra_scheduler_double_allocations_detected_total`` (conflicts seen).

Pure bookkeeping: no API call happens inside :meth:`DoubleAllocationDetector.observe`; the Events are sent by
a task on the running event loop (or by :meth:`DoubleAllocationDetector.flush`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.api.dra import ResourceClaim
from scheduler.api.labelselector import LabelSelector, selector_from
from scheduler.api.model import ModelError

log = structlog.get_logger("dra_scheduler.coexistence")

EVENT_REASON = "DeviceAllocatedTwice"
EVENT_ACTION = "Allocation"
PARTITION_ARG = "nodeSelector"

Device = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True, slots=True)
class Holding:
    """One claim's hold on one device."""

    claim_key: str  # namespace/name
    claim_uid: str
    exclusive: bool  # neither adminAccess nor a consumable-capacity share
    admin: bool


@dataclass(frozen=True, slots=True)
class Conflict:
    device: Device
    claims: tuple[str, ...]  # claim keys, sorted

    @property
    def device_name(self) -> str:
        return "/".join(self.device)

    def message(self) -> str:
        return (
            f"device {self.device_name} is allocated to {len(self.claims)} claims ({', '.join(self.claims)}); "
            "another scheduler allocated it at the same time (partition the devices between the schedulers: "
            "DynamicResources args nodeSelector)"
        )


def holdings(claim: ResourceClaim) -> dict[Device, Holding]:
    """The devices ``claim``'s allocation holds. A device listed twice in one claim (two shares, or a share
    and an admin result) counts once, exclusive if any result is exclusive."""
    out: dict[Device, Holding] = {}
    if claim.allocation is None:
        return out
    for r in claim.allocation.results:
        dev = (r.driver, r.pool, r.device)
        admin = r.admin_access
        exclusive = not admin and not r.share_id
        prev = out.get(dev)
        if prev is not None:
            exclusive = exclusive or prev.exclusive
            admin = admin and prev.admin
        out[dev] = Holding(claim.key, claim.meta.uid, exclusive, admin)
    return out


def conflicting(holders: Iterable[Holding]) -> bool:
    """Two or more claims hold the device and it is not legitimately shared: admin-access holds never count;
    among the others, one exclusive hold beside any other hold is a conflict (shares among themselves are
    not)."""
    users = [h for h in holders if not h.admin]
    return len(users) >= 2 and any(h.exclusive for h in users)


def find_double_allocations(claims: Iterable[ResourceClaim]) -> list[Conflict]:
    """Every device allocated to two claims that may not share it (a full scan; the detector is incremental)."""
    by_device: dict[Device, dict[str, Holding]] = {}
    for c in claims:
        for dev, h in holdings(c).items():
            by_device.setdefault(dev, {})[c.meta.uid or c.key] = h
    return sorted(
        (Conflict(dev, tuple(sorted(h.claim_key for h in hs.values() if not h.admin)))
         for dev, hs in by_device.items() if conflicting(hs.values())),
        key=lambda c: c.device,
    )


EventSink = Callable[[dict[str, Any], str, str, str, str], Awaitable[None]]


class DoubleAllocationDetector:
    """Incremental index device → holding claims over ResourceClaim events; reports each new conflict once.

    ``event``: the ClusterAPI's ``event`` coroutine (None: no Events); ``metrics``: an object with
    ``set_double_allocated(devices: int, new_conflicts: int)`` (scheduler.kube.metrics.SchedulerMetrics) or None.
    """

    def __init__(self, event: EventSink | None = None, metrics: Any = None) -> None:
        self._event = event
        self._metrics = metrics
        self._by_device: dict[Device, dict[str, Holding]] = {}  # device -> claim uid -> holding
        self._of_claim: dict[str, tuple[Mapping[str, Any], dict[Device, Holding]]] = {}  # uid -> (raw, holdings)
        self._reported: set[tuple[Device, frozenset[str]]] = set()
        self._conflicting: set[Device] = set()  # devices held twice now
        self._pending: list[tuple[Mapping[str, Any], str]] = []  # (claim raw, message) not sent yet
        self._tasks: set[asyncio.Task[None]] = set()
        self.detected: list[Conflict] = []  # every conflict reported, in order (tests, e2e)

    # --- the index -------------------------------------------------------------------------------------------

    def seed(self, claims: Iterable[ResourceClaim]) -> list[Conflict]:
        """Index claims the cache held before the detector was attached."""
        new: list[Conflict] = []
        for c in claims:
            new.extend(self._apply(None, c))
        self._after(new)
        return new

    def observe(self, event: str, old: Any, new: Any) -> list[Conflict]:
        """A ResourceClaim cache event (``ADDED`` / ``MODIFIED`` / ``DELETED``); returns the new conflicts."""
        o = old if isinstance(old, ResourceClaim) else None
        n = new if isinstance(new, ResourceClaim) and event != "DELETED" else None
        found = self._apply(o, n)
        self._after(found)
        return found

    def _apply(self, old: ResourceClaim | None, new: ResourceClaim | None) -> list[Conflict]:
        touched: set[Device] = set()
        for uid in {c.meta.uid or c.key for c in (old, new) if c is not None}:
            _, prev = self._of_claim.pop(uid, ({}, {}))
            for dev in prev:
                hs = self._by_device.get(dev)
                if hs is not None:
                    hs.pop(uid, None)
                    if not hs:
                        del self._by_device[dev]
                touched.add(dev)
        if new is not None:
            now = holdings(new)
            if now:
                uid = new.meta.uid or new.key
                self._of_claim[uid] = (new.raw, now)
                for dev, h in now.items():
                    self._by_device.setdefault(dev, {})[uid] = h
                    touched.add(dev)
        found: list[Conflict] = []
        for dev in sorted(touched):
            hs = self._by_device.get(dev, {})
            if not conflicting(hs.values()):
                self._conflicting.discard(dev)
                continue
            self._conflicting.add(dev)
            users = {uid: h for uid, h in hs.items() if not h.admin}
            mark = (dev, frozenset(users))
            if mark in self._reported:
                continue
            self._reported.add(mark)
            conflict = Conflict(dev, tuple(sorted(h.claim_key for h in users.values())))
            found.append(conflict)
            msg = conflict.message()
            for uid in sorted(users):
                raw = self._of_claim[uid][0]
                self._pending.append((raw, msg))
        return found

    def current(self) -> list[Conflict]:
        """The devices held twice now."""
        return sorted(
            (Conflict(dev, tuple(sorted(h.claim_key for h in hs.values() if not h.admin)))
             for dev, hs in self._by_device.items() if conflicting(hs.values())),
            key=lambda c: c.device,
        )

    # --- reporting -------------------------------------------------------------------------------------------

    def _after(self, found: list[Conflict]) -> None:
        for c in found:
            self.detected.append(c)
            log.warning("device allocated to two claims", device=c.device_name, claims=list(c.claims))
        set_fn = getattr(self._metrics, "set_double_allocated", None)
        if set_fn is not None:
            set_fn(len(self._conflicting), len(found))
        if self._pending and self._event is not None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # sent by flush() or the next event on a running loop
            task = loop.create_task(self.flush(), name="double-allocation-events")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Send the Events not sent yet (best effort: the ClusterAPI's ``event`` never raises)."""
        pending, self._pending = self._pending, []
        if self._event is None:
            return
        for raw, msg in pending:
            obj = dict(raw)
            obj.setdefault("kind", "ResourceClaim")
            obj.setdefault("apiVersion", "resource.k8s.io/v1")
            await self._event(obj, "Warning", EVENT_REASON, msg, EVENT_ACTION)


# --- the partition (DynamicResources args nodeSelector) ------------------------------------------------------


def partition_from_args(args: Mapping[str, Any]) -> LabelSelector | None:
    """The node selector of the device partition, None when the arg is absent (every node)."""
    raw = args.get(PARTITION_ARG)
    if raw is None:
        return None
    return selector_from(raw, PARTITION_ARG, nil_matches_nothing=False)


def validate_partition(value: Any, path: str) -> list[str]:
    """Field-path errors of the ``nodeSelector`` arg (a metav1.LabelSelector)."""
    if value is None:
        return []
    try:
        selector_from(value, f"{path}.{PARTITION_ARG}", nil_matches_nothing=False)
    except ModelError as e:
        return [str(e)]
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"matchLabels", "matchExpressions"})
        return [f"{path}.{PARTITION_ARG}.{k}: unknown field" for k in unknown]
    return []


#: the Filter reason on a node outside the partition (node-independent: fit_error counts equal reasons)
PARTITION_MESSAGE = "node(s) outside this scheduler's device partition (DynamicResources args nodeSelector)"
