"""Recording core/v1 Events: on their own connection, aggregated into series, bounded, flushed at shutdown.

What client-go's ``tools/events`` broadcaster (``event_broadcaster.go``, the one kube-scheduler uses) does,
and where this differs:

* **Own client.** The Events go out on a :class:`~scheduler.kube.client.KubeConnection` of their own
  (``KubeConnection.sibling``: same server and credentials, same QPS/burst, its own rate limiter and
  connection pool), as kube-scheduler's ``createClients`` makes a second clientset for its event
  broadcaster. A burst of Events never delays a claim write or a Binding, and scheduling writes never hold
  an Event back.
* **Aggregation.** Identical events are one Event with a count. "Identical" is upstream's ``eventKey`` (type,
  action, reason, reporting controller and instance, the regarding object: kind, apiVersion, namespace,
  name, uid, fieldPath) **plus the message**: upstream's events.k8s.io key leaves the note out and keeps the
  first note of a series, so a FailedScheduling whose message changed ("0/200 nodes ..." → "0/201 ...")
  would be counted under the old text; the legacy ``tools/record`` correlator (``getEventKey`` in
  ``events_cache.go``) keys on the message too, which is what is matched here. The regarding object's
  resourceVersion is not part of the key (the legacy key has none either).
* **Series.** The first occurrence is POSTed (count 1). The second one is written at once as a series
  (upstream: ``Series{Count: 2, LastObservedTime}``, a strategic-merge PATCH of the posted Event; a 404 there
  POSTs it anew). Later occurrences only count up in memory; the running count is written at most every
  ``series_interval`` seconds (upstream: every 30 minutes, ``refreshTime``), when the series ends (not seen
  for ``finish_after`` = 6 minutes, upstream's ``finishTime``; then it is forgotten, and the next occurrence
  starts a new Event) and at shutdown. Occurrences that arrive while a write of their Event is still queued
  are folded into that write: N identical events recorded faster than they can be posted become one POST
  with count N. Since these are core/v1 Events (what ``kubectl describe`` reads), a write sets the legacy
  ``count`` / ``lastTimestamp`` as well as ``series``.
* **Giving way.** The API server's capacity is shared all the same: with ``yield_to`` (``LiveAPI`` passes
  "scheduling requests are queueing for a place in flight", i.e. the API server, not the QPS budget, is the
  bottleneck), a writer waits while it is true, at most ``max_defer`` seconds per Event, so that Events take
  the server's spare capacity and not the claim writes' and Bindings'. Not at shutdown.
* **Bounded.** At most ``queue_size`` (1,000: upstream's ``maxQueuedEvents``) writes wait; a new Event that
  finds the queue full is dropped (upstream ``watch.DropIfChannelFull``), counted and logged. A series update
  that finds it full stays pending for the next sweep.
* **Best effort.** A write the API server rejects (4xx) is given up and its series forgotten; one that got no
  answer or a 5xx is tried again at the next sweep (upstream retries 12 times, 10 s apart).
* **Flushed at shutdown.** ``close`` writes what is queued and the counts of running series (within a
  timeout); Events still unsent then count as dropped.

``counts`` (exposed as ``dra_scheduler_events_total{result}``): ``posted`` (Events created), ``updated``
(series counts written), ``aggregated`` (occurrences folded into an existing Event), ``dropped``, ``failed``
(writes the API server refused or did not answer).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from scheduler.api.clusterapi import ApiError, NotFound, Obj
from scheduler.kube.resources import EVENT

log = structlog.get_logger("dra_scheduler.kube.events")

QUEUE_SIZE = 1000  # client-go tools/events maxQueuedEvents
FINISH_AFTER = 6 * 60.0  # client-go tools/events finishTime
SERIES_INTERVAL = 30.0  # how often the count of a running series is written (upstream refreshTime: 30 min)
WRITERS = 8  # Events written at the same time (upstream: a goroutine per Event, bounded by the limiter only)
MAX_DEFER = 5.0  # the longest an Event waits for scheduling writes to stop queueing (``yield_to``)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class EventConnection(Protocol):
    """What the recorder uses of its :class:`~scheduler.kube.client.KubeConnection` (the client module
    imports this one to build the recorder, so the recorder sees the connection through this protocol)."""

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = ...) -> Any: ...
RESULTS = ("posted", "updated", "aggregated", "dropped", "failed")

EventKey = tuple[str, ...]


def event_key(ev: Obj) -> EventKey:
    """What makes two events the same Event (see the module docstring)."""
    inv = ev.get("involvedObject") or {}
    return (
        str(ev.get("type") or ""),
        str(ev.get("action") or ""),
        str(ev.get("reason") or ""),
        str(ev.get("reportingComponent") or ""),
        str(ev.get("reportingInstance") or ""),
        str(inv.get("apiVersion") or ""),
        str(inv.get("kind") or ""),
        str(inv.get("namespace") or ""),
        str(inv.get("name") or ""),
        str(inv.get("uid") or ""),
        str(inv.get("fieldPath") or ""),
        str(ev.get("message") or ""),
    )


def _rfc3339_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rfc3339(micro: str) -> str:
    return micro.split(".", 1)[0] + "Z" if "." in micro else micro


@dataclass(slots=True, eq=False)
class _Entry:
    key: EventKey
    body: Obj  # the Event as first recorded
    count: int = 1  # occurrences seen
    written: int = 0  # the count the API server has
    last_seen: float = 0.0  # monotonic
    last_seen_time: str = ""  # RFC 3339 with microseconds
    name: str = ""  # the Event's name once posted
    queued: bool = False  # a write of it waits in the queue
    writing: bool = False  # a writer is writing it now
    again: bool = False  # taken from the queue while being written: the writer writes it once more
    series_queued: bool = False  # a write of count >= 2 was queued: later counts wait for the sweep
    last_write: float = field(default=-1e18)


class EventRecorder:
    """Posts the Events handed to :meth:`record` from ``writers`` background tasks (see the module docstring)."""

    def __init__(
        self,
        conn: EventConnection,
        *,
        queue_size: int = QUEUE_SIZE,
        finish_after: float = FINISH_AFTER,
        series_interval: float = SERIES_INTERVAL,
        writers: int = WRITERS,
        yield_to: Callable[[], bool] | None = None,
        max_defer: float = MAX_DEFER,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], str] = _rfc3339_micro,
    ) -> None:
        self.conn = conn
        self.finish_after = finish_after
        self.series_interval = series_interval
        self._clock = clock
        self._wallclock = wallclock
        self._queue: asyncio.Queue[_Entry] = asyncio.Queue(maxsize=max(1, queue_size))
        self._cache: dict[EventKey, _Entry] = {}
        self._writers = max(1, writers)
        self._yield_to = yield_to
        self.max_defer = max_defer
        self._tasks: list[asyncio.Task[None]] = []
        self._writing: set[_Entry] = set()
        self._closed = False
        self._closing = False
        self.counts: collections.Counter[str] = collections.Counter({r: 0 for r in RESULTS})

    # --- recording ----------------------------------------------------------------------------------------

    def record(self, ev: Obj) -> None:
        """Take one occurrence of an Event (a complete core/v1 Event body); never waits, never raises."""
        now = self._clock()
        key = event_key(ev)
        e = self._cache.get(key)
        if e is not None and now - e.last_seen <= self.finish_after:
            e.count += 1
            e.last_seen = now
            e.last_seen_time = self._wallclock()
            self.counts["aggregated"] += 1
            if not e.queued and not e.series_queued:
                self._enqueue(e)  # the second occurrence starts the series at once, as upstream
            return
        if self._closed:
            self._drop(ev)
            return
        e = _Entry(key, ev, last_seen=now, last_seen_time=self._wallclock())
        if not self._enqueue(e):
            self._drop(ev)
            return
        self._cache[key] = e

    def _enqueue(self, e: _Entry) -> bool:
        if self._closed and not self._tasks:
            return False
        try:
            self._queue.put_nowait(e)
        except asyncio.QueueFull:
            return False
        e.queued = True
        if e.count >= 2:
            e.series_queued = True
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._run(i), name=f"event-writer-{i}") for i in range(self._writers)]
        return True

    def _drop(self, ev: Obj) -> None:
        self.counts["dropped"] += 1
        n = self.counts["dropped"]
        if n % 100 == 1:
            log.warning("dropping events (queue full, or recorder closed)", dropped=n, reason=ev.get("reason"))

    # --- writing ------------------------------------------------------------------------------------------

    async def _run(self, index: int) -> None:
        """One writer; writer 0 also sweeps every ``series_interval``."""
        next_sweep = self._clock() + self.series_interval
        while True:
            try:
                if index:
                    e = await self._queue.get()
                else:
                    async with asyncio.timeout(max(next_sweep - self._clock(), 0.0)):
                        e = await self._queue.get()
            except TimeoutError:
                self.sweep()
                next_sweep = self._clock() + self.series_interval
                continue
            try:
                if e.writing:
                    e.queued = False
                    e.again = True  # the writer busy with it writes the new count after its write
                else:
                    await self._give_way()
                    self._writing.add(e)
                    e.writing = True
                    try:
                        await self._write(e)
                        while e.again and e.count != e.written:
                            e.again = False
                            await self._write(e)
                    finally:
                        e.writing = e.again = False
                        self._writing.discard(e)
            except Exception as err:  # keep the recorder alive whatever happens
                log.error("event recorder failed", error=repr(err))
            finally:
                self._queue.task_done()
            if not index and self._clock() >= next_sweep:
                self.sweep()
                next_sweep = self._clock() + self.series_interval

    async def _give_way(self) -> None:
        """Wait (at most ``max_defer`` seconds) while ``yield_to()`` says scheduling writes queue for the API
        server; not once closing."""
        if self._yield_to is None:
            return
        deadline = self._clock() + self.max_defer
        while not self._closing and self._yield_to() and self._clock() < deadline:
            await asyncio.sleep(0.01)

    def sweep(self) -> None:
        """Queue the counts of running series not written for ``series_interval``; finish (write and forget)
        the series not seen for ``finish_after``."""
        now = self._clock()
        for key, e in list(self._cache.items()):
            finished = now - e.last_seen > self.finish_after
            due = finished or now - e.last_write >= self.series_interval
            if e.count != e.written and not e.queued and due and self._enqueue(e):
                continue
            if finished and not e.queued:
                del self._cache[key]

    async def _write(self, e: _Entry) -> None:
        e.queued = False
        count = e.count
        if count == e.written:
            return
        last = e.last_seen_time
        try:
            if e.name:
                try:
                    await self._patch(e, count, last)
                    self.counts["updated"] += 1
                except NotFound:  # removed meanwhile (TTL): create it again, as upstream
                    e.name = ""
            if not e.name:
                await self._post(e, count, last)
                self.counts["posted"] += 1
        except ApiError as err:
            self.counts["failed"] += 1
            inv = e.body.get("involvedObject") or {}
            log.warning(
                "could not record event",
                reason=e.body.get("reason"),
                object=f"{inv.get('namespace')}/{inv.get('name')}",
                error=str(err),
            )
            if 400 <= err.status < 500 and err.status != 429 and self._cache.get(e.key) is e:
                del self._cache[e.key]  # rejected: it would be rejected again
            return
        e.written = count
        e.last_write = self._clock()

    def _series(self, count: int, last: str) -> Obj:
        return {"count": count, "lastObservedTime": last}

    async def _post(self, e: _Entry, count: int, last: str) -> None:
        body = dict(e.body)
        body["metadata"] = {k: v for k, v in (body.get("metadata") or {}).items() if k != "resourceVersion"}
        if count > 1:
            body["count"] = count
            body["lastTimestamp"] = _rfc3339(last)
            body["series"] = self._series(count, last)
        ns = str(body["metadata"].get("namespace") or "default")
        doc = await self.conn.request("POST", EVENT.path(ns), body=body)
        e.name = str(((doc or {}).get("metadata") or {}).get("name") or body["metadata"].get("name") or "")

    async def _patch(self, e: _Entry, count: int, last: str) -> None:
        ns = str((e.body.get("metadata") or {}).get("namespace") or "default")
        patch: dict[str, Any] = {"count": count, "lastTimestamp": _rfc3339(last), "series": self._series(count, last)}
        await self.conn.request(
            "PATCH", EVENT.path(ns, e.name), body=patch, content_type=STRATEGIC_MERGE_PATCH
        )

    # --- flushing -----------------------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    async def flush(self, timeout: float = 5.0) -> None:
        """Queue the unwritten counts of every series, then wait (at most ``timeout`` seconds) until every
        queued write has been made or given up."""
        for e in list(self._cache.values()):
            if e.count != e.written and not e.queued:
                self._enqueue(e)
        if not self._tasks:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # not wait_for: 3.11 can lose a cancel
                await self._queue.join()

    async def close(self, timeout: float = 5.0) -> None:
        """Flush, then stop; Events still unsent count as dropped. Later events are dropped."""
        self._closing = True
        await self.flush(timeout)
        self._closed = True
        writing = list(self._writing)  # cut short below
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        unsent = sum(1 for e in writing if not e.name)
        while not self._queue.empty():
            e = self._queue.get_nowait()
            self._queue.task_done()
            if not e.name:
                unsent += 1
        if unsent:
            self.counts["dropped"] += unsent
            log.warning("events not sent before shutdown", dropped=unsent)
