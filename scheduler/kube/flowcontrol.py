"""Client-side flow control of the API requests: the QPS budget (:class:`TokenBucket`) and the cap on requests in
flight (:class:`InFlight`), both serving their waiters in one order (:class:`WaitQueue`): Leases first, then the
writes of binding cycles oldest first, alternating with everything else first come, first served.
:class:`scheduler.kube.client.KubeConnection` passes every request through both (watches take no place in
flight); why this order and not client-go's first come, first served is :class:`TokenBucket`'s docstring.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger("dra_scheduler.kube")


class TokenBucket:
    """Client-side rate limit: ``qps`` tokens a second, at most ``burst`` saved up (client-go's token bucket,
    ``k8s.io/client-go/util/flowcontrol/throttle.go``); ``qps <= 0`` disables it. Unlike client-go's, which
    serves its waiters first come, first served, a request that has to wait is granted its token in this
    order:

    1. **Leases** (leader election), first come, first served: a renewal never waits behind scheduling
       writes, so a busy scheduler does not lose its Lease (``acquire(critical=True)``).
    2. **Binding cycles, oldest first**: a request made inside :func:`scheduler.api.clusterapi.pod_writes` carries the
       number of its binding cycle; the waiting request of the oldest cycle goes first, ties in arrival
       order. A pod's next write (allocation after finalizer, Binding after allocation) therefore overtakes
       the first writes of every pod scheduled after it, and pods are bound one after another from the
       start instead of all at the end.
    3. **Everything else** (informer lists and watches, discovery, failure status writes, preemption,
       claim creation), first come, first served. When requests of both 2 and 3 wait, the tokens alternate
       between them: neither starves, and each gets at least half of the budget while it wants it.

    Why order by pod: at the client QPS budget the tokens are the bottleneck and every pod needs a fixed
    number of them (finalizer, allocation, Binding); a pod is only done (bound) once it has all of them.
    Served FIFO, the many binding cycles started by a fast scheduling loop interleave, each pod's last write
    queued behind every other pod's first: nearly all claim writes go out before the first Binding (the
    measurement in issue #16), and the median pod is bound near the end. Serving the oldest cycle first
    finishes what was started (the shortest remaining work), which minimises the mean time to bind for the
    same total time: the throughput is the token rate either way. kube-scheduler binds each pod in its own
    goroutine through client-go's FIFO limiter and has the same interleaving; the API server's API Priority
    and Fairness does not help either, because it fair-queues between flows (users, namespaces) and keeps
    the order within one flow, and all of a scheduler's requests are one flow.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()
        self._queue = WaitQueue()
        self._dispatcher: asyncio.Task[None] | None = None
        self.throttled_seconds = 0.0
        self.throttled_requests = 0
        self.granted: collections.Counter[str] = collections.Counter()  # flow (critical/pods/other) -> tokens
        self._last_warning = -1e9

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    @property
    def waiting(self) -> int:
        """Requests waiting for a token now."""
        return self._queue.waiting

    @property
    def pods_waiting(self) -> int:
        """Requests of binding cycles (:func:`scheduler.api.clusterapi.pod_writes`) waiting for a token now."""
        return self._queue.pods_waiting

    async def acquire(self, priority: int | None = None, *, critical: bool = False) -> None:
        """Wait for a token. ``priority``: the binding cycle (older = smaller = first); ``critical``: a Lease."""
        if self.qps <= 0:
            return
        flow = flow_of(priority, critical)
        self._refill()
        if self._tokens >= 1.0 - _EPS and not self._queue.waiting:
            self._tokens -= 1.0
            self.granted[flow] += 1
            return
        fut = self._queue.push(priority, critical)
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch(), name="rate-limiter")
        start = self._clock()
        if not await self._queue.wait(fut, priority, critical):  # granted, then cancelled: give the token back
            self._tokens = min(float(self.burst), self._tokens + 1.0)
            raise asyncio.CancelledError
        self.granted[flow] += 1
        waited = self._clock() - start
        self.throttled_seconds += waited
        self.throttled_requests += 1
        now = self._clock()
        if waited >= 1.0 and now - self._last_warning > 30:
            self._last_warning = now
            log.warning(
                "client-side throttling", wait_seconds=round(waited, 3), qps=self.qps, burst=self.burst,
                waiting=self.waiting,
            )

    async def _dispatch(self) -> None:
        """Hand out tokens to the waiters as they come in, then sleep until the next one."""
        while True:
            self._refill()
            while self._tokens >= 1.0 - _EPS:
                fut = self._queue.pop()
                if fut is None:
                    return  # nobody waits (a waiter cancelled meanwhile is still counted, for a moment)
                self._tokens -= 1.0
                fut.set_result(None)
            if self._queue.waiting <= 0:
                return
            await self._sleep(max((1.0 - self._tokens) / self.qps, _EPS))

    async def close(self) -> None:
        """Stop handing out tokens: the waiters are cancelled."""
        self._queue.cancel_all()
        t, self._dispatcher = self._dispatcher, None
        if t is not None and not t.done():
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t


_EPS = 1e-9  # a token short by a rounding error is a token (else the dispatcher sleeps for ~0 s, for ever)


def flow_of(priority: int | None, critical: bool) -> str:
    return "critical" if critical else ("other" if priority is None else "pods")


class WaitQueue:
    """Waiters for a resource (a token, a slot), served in :class:`TokenBucket`'s order: Leases first, then
    binding cycles oldest first alternating with everything else first come, first served."""

    def __init__(self) -> None:
        self._critical: collections.deque[asyncio.Future[None]] = collections.deque()
        self._others: collections.deque[asyncio.Future[None]] = collections.deque()
        self._pods: list[tuple[int, int, asyncio.Future[None]]] = []  # (binding cycle, arrival, waiter)
        self._arrivals = itertools.count()
        self._others_turn = False
        self.waiting = 0
        self.pods_waiting = 0  # of which binding-cycle requests

    def push(self, priority: int | None, critical: bool) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if critical:
            self._critical.append(fut)
        elif priority is None:
            self._others.append(fut)
        else:
            heapq.heappush(self._pods, (priority, next(self._arrivals), fut))
            self.pods_waiting += 1
        self.waiting += 1
        return fut

    async def wait(self, fut: asyncio.Future[None], priority: int | None, critical: bool) -> bool:
        """Await ``fut`` (pushed by :meth:`push`). Cancelled while waiting: taken off the count, re-raised;
        cancelled once granted: False (the caller gives back what it was granted and raises)."""
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                return False
            self.waiting -= 1
            if not critical and priority is not None:
                self.pods_waiting -= 1
            raise
        return True

    def pop(self) -> asyncio.Future[None] | None:
        """The waiter served next, or None. Cancelled waiters are skipped (``wait`` took them off the count)."""
        while self._critical:
            f = self._critical.popleft()
            if not f.done():
                self.waiting -= 1
                return f
        while self._others and self._others[0].done():
            self._others.popleft()
        while self._pods and self._pods[0][2].done():
            heapq.heappop(self._pods)
        if self._others and (self._others_turn or not self._pods):
            self._others_turn = False
            self.waiting -= 1
            return self._others.popleft()
        if self._pods:
            self._others_turn = True
            self.waiting -= 1
            self.pods_waiting -= 1
            return heapq.heappop(self._pods)[2]
        return None

    def cancel_all(self) -> None:
        for f in [*self._critical, *self._others, *(f for _, _, f in self._pods)]:
            f.cancel()
        self._critical.clear()
        self._others.clear()
        self._pods.clear()


class InFlight:
    """At most ``limit`` requests in flight at once (``limit <= 0``: no limit), the free places handed out in
    :class:`TokenBucket`'s order. When the API server, not the QPS budget, is the bottleneck (a slow or busy
    server), requests queue here rather than in the HTTP connection pool, whose queue is first come, first
    served: the writes of older binding cycles still go first. Watches do not take a place."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.busy = 0
        self._queue = WaitQueue()

    @contextlib.asynccontextmanager
    async def place(self, priority: int | None = None, critical: bool = False) -> AsyncIterator[None]:
        if self.limit > 0:
            if self.busy >= self.limit or self._queue.waiting:
                fut = self._queue.push(priority, critical)
                if not await self._queue.wait(fut, priority, critical):
                    self._release()
                    raise asyncio.CancelledError
            else:
                self.busy += 1
        try:
            yield
        finally:
            if self.limit > 0:
                self._release()

    def _release(self) -> None:
        fut = self._queue.pop()
        if fut is not None:
            fut.set_result(None)  # the place goes to the next waiter
        else:
            self.busy -= 1

    @property
    def waiting(self) -> int:
        """Requests waiting for a place now."""
        return self._queue.waiting

    @property
    def pods_waiting(self) -> int:
        """Requests of binding cycles waiting for a place now."""
        return self._queue.pods_waiting

    def close(self) -> None:
        self._queue.cancel_all()
