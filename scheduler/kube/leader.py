"""Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection does it.

* Acquire: every ``retry_period`` (jittered), read the Lease; take it when it does not exist, is ours, is
  free (empty holder) or has not been renewed for ``lease_duration`` as observed on *our* clock (the time we
  last saw the record change, so clock skew between replicas does not matter). Writes are conditional on the
  resourceVersion, so two candidates cannot both win.
* Renew: every ``retry_period``; when no renewal succeeded for ``renew_deadline``, or the Lease names another
  holder, leadership is lost: ``on_lost`` is called (the process then exits non-zero: a scheduler that
  lost its lease must not keep writing with a cache it can no longer trust, kubernetes#81306).
* ``release`` (graceful shutdown) empties the holder so a standby takes over at once.
* Faster than client-go, with the same safety rule: a standby fed the Lease's watch events (``observe``, wired
  by scheduler/kube/run.py) sees each renewal when it happens instead of at its next poll (up to a retry period
  late), and it tries again at the moment the lease expires by its clock instead of at its next tick. So it
  takes a dead leader's lease at expiry + one request (issue 24: takeover = expiry + < 1 s), where polling
  alone takes expiry + up to two retry periods. The expiry test itself is client-go's: ``lease_duration``
  after the record was last seen to change, on our clock.

Defaults are kube-scheduler's: lease 15 s, renew deadline 10 s, retry 2 s; ``validate_timing`` applies
client-go's constraints (lease > renew deadline > 1.2 × retry period > 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.api.clusterapi import ApiError, ClusterAPI, Conflict, NotFound, Obj
from scheduler.config.schedulerconfig import JITTER_FACTOR, validate_timing

log = structlog.get_logger("dra_scheduler.leader")


EXPIRY_MARGIN = 0.01  # a standby's attempt this long after the lease it watches expires


def _rv(obj: Obj) -> int | None:
    """An object's resourceVersion as a number (etcd's revision; opaque by contract, numeric in practice), None
    when it is missing or not a number (then records are compared by content only)."""
    try:
        return int(obj.get("metadata", {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        api: ClusterAPI,
        namespace: str = "kube-system",
        name: str = "dra-scheduler",
        identity: str | None = None,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started: Callable[[], None] | None = None,
        on_lost: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        errors = validate_timing(lease_duration, renew_deadline, retry_period)
        if errors:
            raise ValueError("; ".join(errors))
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started = on_started
        self.on_lost = on_lost
        self.clock = clock
        self.is_leader = asyncio.Event()
        self.lost = asyncio.Event()
        # our clock's time before which the lease is surely ours: the start of the last successful acquire/renew
        # request plus the renew deadline (the API server stamped the record after that start, and the others
        # count the lease duration, longer than the deadline, from when they see it)
        self._valid_until = 0.0
        self.observed_holder = ""
        self._observed_record: Any = None
        self._observed_time = 0.0
        self._observed_duration = lease_duration
        self._observed_rv: int | None = None
        self._lease: Obj | None = None
        self._log = log.bind(lease=f"{namespace}/{name}", identity=self.identity)

    # --- the loop -----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, then renew until leadership is lost (``on_lost`` called) or the task is cancelled."""
        await self._acquire()
        self.is_leader.set()
        self._log.info("became leader")
        if self.on_started is not None:
            self.on_started()
        await self._renew_loop()
        self.is_leader.clear()
        self.lost.set()
        self._log.error("leadership lost", holder=self.observed_holder)
        if self.on_lost is not None:
            self.on_lost()

    async def _acquire(self) -> None:
        announced = ""
        while True:
            if await self._try(deadline=self.retry_period * 5):
                return
            if self.observed_holder and self.observed_holder != announced:
                announced = self.observed_holder
                self._log.info("waiting for the lease", holder=self.observed_holder)
            await asyncio.sleep(self._acquire_wait())

    def _acquire_wait(self) -> float:
        """Until the next attempt: the jittered retry period, or less when the observed lease expires sooner
        (then a few ms after that moment, so the expiry test passes)."""
        tick = self.retry_period * random.uniform(1.0, JITTER_FACTOR)
        if not self.observed_holder or self.observed_holder == self.identity:
            return tick
        expires_in = self._observed_time + self._observed_duration - self.clock()
        return max(0.0, min(tick, expires_in + EXPIRY_MARGIN))

    async def _renew_loop(self) -> None:
        last_renew = self.clock()
        while True:
            await asyncio.sleep(self.retry_period)
            remaining = self.renew_deadline - (self.clock() - last_renew)
            ok = remaining > 0 and await self._try(deadline=remaining)
            if ok:
                last_renew = self.clock()
                continue
            if self.observed_holder and self.observed_holder != self.identity:
                return  # taken over
            if self.clock() - last_renew >= self.renew_deadline:
                return  # could not renew in time

    def holds(self) -> bool:
        """Whether writing now is safe: the lease is ours, renewed less than the renew deadline ago (by our
        monotonic clock, which also runs while the process is stopped). The scheduler's connections ask this
        before every write (``KubeConnection.write_fence``): a leader frozen past its lease (SIGSTOP, a long GC
        pause, a suspended VM) that wakes up cannot send one more Binding before its renew loop notices."""
        return self.is_leader.is_set() and not self.lost.is_set() and self.clock() < self._valid_until

    def stop_writes(self) -> None:
        """Close the fence now (graceful shutdown, before ``release``): ``holds`` answers False from here on."""
        self._valid_until = 0.0

    async def _try(self, deadline: float) -> bool:
        try:
            async with asyncio.timeout(max(deadline, 0.01)):  # not wait_for: 3.11 can lose a cancel
                start = self.clock()
                ok = await self._try_acquire_or_renew()
                if ok:
                    self._valid_until = start + self.renew_deadline
                return ok
        except TimeoutError:
            self._log.warning("lease request timed out")
        except ApiError as e:
            self._log.warning("lease request failed", error=str(e), status=e.status)
        return False

    # --- one attempt (client-go tryAcquireOrRenew) ----------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        now_t = self.clock()
        now = _micro_time()
        try:
            lease = await self.api.get("Lease", self.namespace, self.name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, now, 0),
            }
            try:
                self._lease = await self.api.create("Lease", body)
            except Conflict:
                return False
            self._observe(self._lease, now_t)
            return True
        self._observe(lease, now_t)
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        duration = self._observed_duration
        mine = holder == self.identity
        if holder and not mine and self._observed_time + duration > now_t:
            return False  # held by another candidate, and not expired
        transitions = int(spec.get("leaseTransitions") or 0)
        if mine:
            acquire_time = str(spec.get("acquireTime") or now)
        else:
            acquire_time = now
            transitions += 1
        new = {**lease, "spec": {**spec, **self._spec(acquire_time, now, transitions)}}
        try:
            self._lease = await self.api.update("Lease", new)
        except Conflict:
            return False
        self._observe(self._lease, self.clock())
        return True

    def _spec(self, acquire_time: str, renew_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }

    def observe(self, lease: Obj) -> None:
        """The Lease as a watch event delivered it (scheduler/kube/run.py's Lease informer): note a new record at
        the moment it arrives. Only a newer resourceVersion than the last seen counts (a watch replaying an
        old state must not make an expired lease look fresh)."""
        if lease.get("metadata", {}).get("name") != self.name:
            return
        rv = _rv(lease)
        if rv is not None and self._observed_rv is not None and rv <= self._observed_rv:
            return
        self._observe(lease, self.clock())

    def _observe(self, lease: Obj, now_t: float) -> None:
        spec = lease.get("spec") or {}
        rv = _rv(lease)
        if rv is not None:
            if self._observed_rv is not None and rv < self._observed_rv:
                return  # older than what the watch already showed
            self._observed_rv = rv
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"))
        if record != self._observed_record:
            self._observed_record = record
            self._observed_time = now_t
        self._observed_duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        self.observed_holder = str(spec.get("holderIdentity") or "")

    async def release(self) -> None:
        """Give the lease up (graceful shutdown): empty holder, so another replica takes it at once."""
        if not self.is_leader.is_set() or self._lease is None:
            return
        self.is_leader.clear()
        spec = {
            **(self._lease.get("spec") or {}),
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "renewTime": _micro_time(),
        }
        with contextlib.suppress(ApiError, TimeoutError):
            async with asyncio.timeout(self.retry_period):  # not wait_for: 3.11 can lose a cancel
                await self.api.update("Lease", {**self._lease, "spec": spec})
            self._log.info("lease released")
