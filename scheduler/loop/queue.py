"""The scheduling queue: active heap, backoff heap, unschedulable and gated pools, pods in flight.

Modelled on kube-scheduler's ``PriorityQueue`` (``pkg/scheduler/backend/queue``):

* **active**: a heap ordered by the profile's QueueSort ``less`` (PrioritySort: priority, then the queue
  timestamp). The queue timestamp is set when the pod is added (``arrival(pod)`` if given, else the
  clock) and refreshed at each failed attempt, as kube-scheduler's ``AddUnschedulableIfNotPresent``
  does ("Refresh the timestamp since the pod is re-added"); a pod kept in **gated** by PreEnqueue keeps
  it. Ties (equal timestamps: a fake clock) go to the timestamp set first, so a pod gated until its
  template claims exist is tried in its arrival order, not behind every pod that was never gated.
  Every pod entering active passes PreEnqueue first (kube-scheduler's ``moveToActiveQ``); a pod
  PreEnqueue rejects goes to **gated** instead.
* **backoff**: a heap ordered by backoff expiry. Backoff is ``initial * 2**(attempts-1)`` capped at
  ``max``, measured from the last failed attempt; a pod that never failed is not backing off. The expiry
  is truncated to a whole second (``BACKOFF_WINDOW``), and pods of one window are ordered as in active
  (priority, then timestamp): kube-scheduler's ``backoffQOrderingWindowDuration`` with SchedulerPopFromBackoffQ
  (KEP-5142, on since 1.33; pkg/scheduler/backend/queue/backoff_queue.go). Without it, pods whose backoff
  ends a few ms apart leave it in expiry order, and with thousands of pods waiting for devices a low-priority
  pod took a freed GPU ahead of high-priority ones (e2e/backlog: 425 of 1,200 binds went to the lowest of
  three priorities, kube-scheduler's none).
* **catch-up** (beyond upstream): an event that sends waiting pods back to active/backoff (``on_event``,
  ``on_event_for``, or one that arrived during a rejected pod's attempt) opens a catch-up: ``pop`` then takes a
  pod it sent to backoff after a rejection (not after an error) ahead of the active queue when it ranks ahead of
  every active pod in QueueSort order, although still backing off, and the next such pod after it, until one of
  them is rejected again; from then on backoff applies as upstream until the next such event. At most one futile
  attempt per event, so backoff still bounds the retries of pods that keep failing. Why: with upstream's queue a
  pod rejected because the device freed a moment ago went to another pod backs off, while lower-priority pods
  woken by an earlier event wait in active (or in an earlier backoff window) and take the next freed device:
  the "packed cluster" priority inversion of kubernetes/kubernetes#138249. kube-scheduler rarely shows it in
  e2e/backlog because it retries pods more slowly than their backoffs expire; this scheduler gave the freed GPUs
  by priority 3000: 351, 2000: 400, 1000: 449 where kube-scheduler gave 713 / 487 / 0; with the catch-up
  968 / 232 / 0, priority respected at every bind (tests/test_queue_catch_up.py).
* **unschedulable**: pods that did not fit, with the plugins that rejected them. A cluster event
  ``(kind, action)`` with its ``old`` / ``new`` objects moves a pod when, among its rejecting plugins that
  registered that event, one has no QueueingHint for it or one's hint answers ``QUEUE`` for this pod
  (kube-scheduler's ``isPodWorthRequeuing``, pkg/scheduler/backend/queue/scheduling_queue.go; a hint that
  raises counts as ``QUEUE``, logged once per plugin and event). A plugin absent from ``events`` counts as
  registering every event, as kube-scheduler does for plugins without EnqueueExtensions; a pod with no
  recorded plugin is moved by every event; an event given without objects skips the hints (every
  registering plugin queues). ``flush`` moves pods that have waited longer than ``max_in_unschedulable``.
* **gated**: pods PreEnqueue rejected; re-checked on update, on an event the gating plugin
  registered, and by ``flush`` after ``max_in_unschedulable``.
* **in flight**: popped, attempt not finished. Events that arrive meanwhile are remembered so that a
  pod that then fails goes to backoff instead of waiting for an event that already happened
  (kube-scheduler's ``moveRequestCycle`` rule, refined as its in-flight event list: only events
  that would have moved the pod count, QueueingHints applied with the event's objects at the end of the
  attempt, as upstream's ``determineSchedulingHintForInFlightPod``).

Contract for the scheduling loop: ``pop`` → read ``scheduling_cycle`` → attempt → on failure
``add_unschedulable`` / ``add_backoff`` *then* ``done``; on success ``done`` (the pod is forgotten).
``add_unschedulable`` / ``add_backoff`` for a pod that is not in flight (deleted meanwhile, or already
requeued) do nothing, as kube-scheduler does not requeue a pod that is gone.

Single-threaded (asyncio): no locks. ``pre_enqueue`` and ``pod_filter`` must not call back into the
queue, and neither may QueueingHints. A pod is never in two pools; every operation is O(log n) except
``on_event`` (linear in the candidate pods, i.e. those whose rejecting plugins registered the event: one
hint call each at most per rejecting plugin) and ``flush`` (linear in the pods it moves).
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Protocol

import structlog

from scheduler.framework.interface import QueuedPodInfo, QueueingHint, QueueingHintFn, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod

ACTIVE: Final = "active"
BACKOFF: Final = "backoff"
UNSCHEDULABLE: Final = "unschedulable"
GATED: Final = "gated"
IN_FLIGHT: Final = "in_flight"

WILDCARD: Final = "*"
_NO_PLUGIN: Final = ""  # index bucket for pods with no recorded rejecting plugin
_MAX_INFLIGHT_EVENTS: Final = 10_000
BACKOFF_WINDOW: Final = 1.0  # seconds: backoff ordering window (upstream backoffQOrderingWindowDuration)

log = structlog.get_logger("dra_scheduler")

Hints = Mapping[str, Mapping[tuple[str, str], QueueingHintFn]]  # plugin -> registered event -> hint


class Clock(Protocol):
    def now(self) -> float: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock tests and offline simulators move by hand."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = start

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("cannot advance a clock backwards")
        self._t += seconds

    def set(self, t: float) -> None:
        self._t = t


PodFilter = Callable[["Pod"], bool]


@dataclass(slots=True, eq=False)
class _Entry:
    info: QueuedPodInfo
    pool: str = ""
    seq: int = 0  # order of entry into backoff (FIFO tie-break there)
    stamped: int = 0  # order in which info.timestamp was set (tie-break in active)
    heap_index: int = -1
    last_failure: float | None = None
    expiry: float = 0.0  # backoff expiry while in the backoff heap
    since: float = 0.0  # entry time into the unschedulable/gated pool
    indexed: tuple[str, ...] = ()  # plugin buckets this entry is filed under
    pop_cycle: int = -1
    updated_in_flight: bool = False
    rank_token: int = 0  # validity token of its item in the queue-order index of rejected backoff pods
    caught_up: int = -1  # the event epoch whose catch-up popped it (-1: popped otherwise)

    @property
    def key(self) -> str:
        return self.info.pod.key


class _Ranked:
    """An item of the lazy heap of rejected backoff pods in queue order (valid while its entry is in backoff
    with the same ``rank_token``; stale items are dropped when they reach the top or at a compaction)."""

    __slots__ = ("entry", "lt", "token")

    def __init__(self, entry: _Entry, token: int, lt: Callable[[_Entry, _Entry], bool]) -> None:
        self.entry = entry
        self.token = token
        self.lt = lt

    def __lt__(self, other: _Ranked) -> bool:
        return self.lt(self.entry, other.entry)

    @property
    def valid(self) -> bool:
        return self.entry.pool == BACKOFF and self.entry.rank_token == self.token


@dataclass(frozen=True, slots=True)
class _InFlightEvent:
    cycle: int
    kind: str
    action: str
    pod_filter: PodFilter | None
    old: Any = None
    new: Any = None


class _Heap:
    """Binary heap of entries that know their own index, so removal and re-sorting are O(log n)."""

    __slots__ = ("_items", "_lt")

    def __init__(self, lt: Callable[[_Entry, _Entry], bool]) -> None:
        self._items: list[_Entry] = []
        self._lt = lt

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[_Entry]:
        return iter(self._items)

    def peek(self) -> _Entry | None:
        return self._items[0] if self._items else None

    def push(self, e: _Entry) -> None:
        e.heap_index = len(self._items)
        self._items.append(e)
        self._up(e.heap_index)

    def pop(self) -> _Entry:
        return self.remove(self._items[0])

    def remove(self, e: _Entry) -> _Entry:
        i = e.heap_index
        last = self._items.pop()
        if last is not e:
            self._items[i] = last
            last.heap_index = i
            self.fix(last)
        e.heap_index = -1
        return e

    def fix(self, e: _Entry) -> None:
        if not self._up(e.heap_index):
            self._down(e.heap_index)

    def _up(self, i: int) -> bool:
        items, lt = self._items, self._lt
        e = items[i]
        moved = False
        while i > 0:
            parent = (i - 1) >> 1
            if not lt(e, items[parent]):
                break
            items[i] = items[parent]
            items[i].heap_index = i
            i = parent
            moved = True
        items[i] = e
        e.heap_index = i
        return moved

    def _down(self, i: int) -> None:
        items, lt = self._items, self._lt
        n = len(items)
        e = items[i]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and lt(items[child + 1], items[child]):
                child += 1
            if not lt(items[child], e):
                break
            items[i] = items[child]
            items[i].heap_index = i
            i = child
        items[i] = e
        e.heap_index = i


def _strip(pod: Pod) -> Pod:
    return replace(
        pod,
        meta=replace(pod.meta, resource_version="", generation=0, finalizers=()),
        phase="",
    )


def pod_updated(old: Pod, new: Pod) -> bool:
    """Whether an update may change schedulability: kube-scheduler's ``isPodUpdated`` (ignores
    resourceVersion, generation, finalizers and status other than the resource claim statuses)."""
    return old is not new and _strip(old) != _strip(new)


class SchedulingQueue:
    def __init__(
        self,
        less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
        clock: Clock,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        pre_enqueue: Callable[[Pod], Status] | None = None,
        events: Mapping[str, set[tuple[str, str]]] | None = None,
        arrival: Callable[[Pod], float] | None = None,
        hints: Hints | None = None,
    ) -> None:
        """``arrival``: the queue timestamp of a pod's first add, on ``clock``'s time line (default: ``clock.now()``,
        when the informer delivered the pod); ``simulate`` passes the pod's ``creationTimestamp``.
        ``events``: plugin -> the events it registered (None: every plugin registers every event); ``hints``:
        plugin -> registered event -> its QueueingHintFn (``Framework.queueing_hints``)."""
        if initial_backoff < 0 or max_backoff < initial_backoff:
            raise ValueError("need 0 <= initial_backoff <= max_backoff")
        if max_in_unschedulable < 0:
            raise ValueError("max_in_unschedulable must not be negative")
        self._less = less
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._max_in_unschedulable = max_in_unschedulable
        self._pre_enqueue = pre_enqueue
        self._arrival = arrival
        self._events: dict[str, frozenset[tuple[str, str]]] | None = (
            None if events is None else {p: frozenset(ev) for p, ev in events.items()}
        )
        self._hints: dict[str, dict[tuple[str, str], QueueingHintFn]] = {}
        self.set_hints(hints)
        self._hint_faults: set[tuple[str, str, str]] = set()  # (plugin, kind, action) whose hint raised (logged)
        self.hint_errors = 0  # hints that raised (each counted as QUEUE)

        def active_lt(a: _Entry, b: _Entry) -> bool:
            if less(a.info, b.info):
                return True
            if less(b.info, a.info):
                return False
            return a.stamped < b.stamped

        def backoff_lt(a: _Entry, b: _Entry) -> bool:
            if a.expiry != b.expiry:  # windows (whole seconds) first, then the active order inside one
                return a.expiry < b.expiry
            return active_lt(a, b)

        self._backoff_lt = backoff_lt
        self._active_lt = active_lt

        self._entries: dict[str, _Entry] = {}
        self._active = _Heap(active_lt)
        self._backoff = _Heap(backoff_lt)
        # insertion-ordered: entry time ("since") is non-decreasing from front to back
        self._unschedulable: dict[str, _Entry] = {}
        self._gated: dict[str, _Entry] = {}
        self._in_flight: dict[str, _Entry] = {}  # insertion-ordered: pop cycle increasing
        self._by_plugin: dict[str, dict[str, None]] = {}  # unschedulable + gated pods per plugin
        self._inflight_events: deque[_InFlightEvent] = deque()
        self._overflow_cycle = -1  # in-flight events up to this cycle were dropped (count as matching)
        self._seq = 0
        self._stamps = 0
        self._ranked: list[_Ranked] = []  # rejected backoff pods in queue order (lazy heap)
        self._rank_tokens = 0
        self._event_epoch = 0  # events that sent waiting pods back to active/backoff (each opens a catch-up)
        self._caught_up_epoch = 0  # catch-ups closed up to this epoch (a caught-up pod was rejected again)
        self._cycle = 0
        self._closed = False
        self._wakeup = asyncio.Event()

    # --- public API -----------------------------------------------------------------------------------

    @property
    def scheduling_cycle(self) -> int:
        return self._cycle

    def set_hints(self, hints: Hints | None) -> None:
        """Replace the QueueingHints (a reconfiguration built new plugin instances)."""
        self._hints = {} if hints is None else {p: dict(h) for p, h in hints.items()}

    def add(self, pod: Pod) -> None:
        """A new pending pod. A pod already known is updated instead; an assigned pod is dropped."""
        if pod.key in self._entries:
            self.update(pod)
            return
        if pod.node_name:
            return
        e = _Entry(QueuedPodInfo(pod=pod, timestamp=0.0))
        self._stamp(e, self._clock.now() if self._arrival is None else self._arrival(pod))
        self._entries[pod.key] = e
        self._to_active(e)

    def update(self, pod: Pod) -> None:
        key = pod.key
        e = self._entries.get(key)
        if e is None:
            self.add(pod)
            return
        old = e.info.pod
        if old.uid and pod.uid and old.uid != pod.uid:  # deleted and recreated under the same name
            self.delete(key)
            self.add(pod)
            return
        if pod.node_name:  # assigned: no longer pending
            self.delete(key)
            return
        e.info.pod = pod
        changed = pod_updated(old, pod)
        if e.pool == ACTIVE:
            self._active.fix(e)
        elif e.pool == IN_FLIGHT:
            e.updated_in_flight = e.updated_in_flight or changed
        elif e.pool == UNSCHEDULABLE:
            if changed:
                self._detach(e)
                self._requeue(e)
        elif e.pool == GATED:
            st = self._run_pre_enqueue(pod)
            self._detach(e)
            if st.is_success:
                e.info.gated = False
                self._requeue(e, checked=True)
            else:
                self._to_gated(e, st)
        elif e.pool == BACKOFF and e.info.unschedulable_plugins:
            self._rank(e)  # stored pod refreshed (its expiry does not depend on it); re-filed in queue order

    def delete(self, key: str) -> None:
        e = self._entries.pop(key, None)
        if e is not None:
            self._detach(e)

    def pop(self) -> QueuedPodInfo | None:
        """The best active pod (after moving expired backoff pods), or ``None``. Non-blocking."""
        if self._closed:
            return None
        now = self._clock.now()
        self._flush_backoff(now)
        caught_up = -1
        e_c = self._catch_up()
        if e_c is not None:  # ranks ahead of every active pod: tried first although still backing off
            self._backoff.remove(e_c)
            self._active.push(e_c)
            caught_up = self._event_epoch
        elif not self._active:
            e_b = self._early_backoff()
            if e_b is None:
                self._wakeup.clear()
                return None
            # SchedulerPopFromBackoffQ (KEP-5142, beta and on since 1.33): with nothing active, a pod backing
            # off after a rejection (not after an error) is tried at once instead of leaving the scheduler idle.
            self._backoff.remove(e_b)
            self._active.push(e_b)
        e = self._active.pop()
        e.caught_up = caught_up
        self._cycle += 1
        e.pool = IN_FLIGHT
        e.pop_cycle = self._cycle
        e.updated_in_flight = False
        self._in_flight[e.key] = e
        info = e.info
        info.attempts += 1
        if info.initial_attempt_timestamp is None:
            info.initial_attempt_timestamp = now
        info.unschedulable_plugins = set()
        if not self._active:
            self._wakeup.clear()
        return info

    def _catch_up(self) -> _Entry | None:
        """The pod the open catch-up tries next: the first rejected backoff pod in queue order, when it ranks
        ahead of every active pod (or nothing is active); None when no catch-up is open."""
        if self._event_epoch <= self._caught_up_epoch:
            return None
        best = self._first_ranked()
        if best is None:
            return None
        top = self._active.peek()
        return best if top is None or self._active_lt(best, top) else None

    def _first_ranked(self) -> _Entry | None:
        ranked = self._ranked
        while ranked:
            item = ranked[0]
            if item.valid:
                return item.entry
            heapq.heappop(ranked)
        return None

    def _rank(self, e: _Entry) -> None:
        """File a rejected pod that enters backoff in the queue-order index (a new token voids its old items)."""
        self._rank_tokens += 1
        e.rank_token = self._rank_tokens
        heapq.heappush(self._ranked, _Ranked(e, self._rank_tokens, self._active_lt))
        if len(self._ranked) > 2 * len(self._backoff) + 64:
            self._ranked = [item for item in self._ranked if item.valid]
            heapq.heapify(self._ranked)

    def _early_backoff(self) -> _Entry | None:
        """The backoff pod ``pop`` may take early: rejected by plugins (upstream's entityBackoffQ), not backing
        off after an error (entityErrorBackoffQ); the one whose backoff ends first, then by queue order."""
        top = self._backoff.peek()
        if top is None or top.info.unschedulable_plugins:
            return top
        best: _Entry | None = None  # the top backs off after an error: the best of the others (rare)
        for e in self._backoff:
            if e.info.unschedulable_plugins and (best is None or self._backoff_lt(e, best)):
                best = e
        return best

    def pop_key(self, key: str) -> QueuedPodInfo | None:
        """Take a specific queued pod (active, backoff, unschedulable; not gated or in flight) into
        flight as ``pop`` would, within the current scheduling cycle. Used by the gang cycle to schedule
        the pending members of a group together with the member that was popped."""
        e = self._entries.get(key)
        if e is None or e.pool in (IN_FLIGHT, GATED, ""):
            return None
        self._detach(e)
        e.pool = IN_FLIGHT
        e.caught_up = -1
        e.pop_cycle = self._cycle
        e.updated_in_flight = False
        self._in_flight[e.key] = e
        info = e.info
        info.attempts += 1
        if info.initial_attempt_timestamp is None:
            info.initial_attempt_timestamp = self._clock.now()
        info.unschedulable_plugins = set()
        if not self._active:
            self._wakeup.clear()
        return info

    async def pop_wait(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """Pop, waiting until a pod is active. ``None`` when closed or after ``timeout`` (real time,
        the event loop's clock). Backoff expiry does not wake a waiter: run ``flush`` periodically."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            info = self.pop()
            if info is not None or self._closed:
                return info
            self._wakeup.clear()
            if deadline is None:
                await self._wakeup.wait()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                async with asyncio.timeout(remaining):  # not wait_for: 3.11 can lose a cancel
                    await self._wakeup.wait()
            except TimeoutError:
                return None

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def done(self, key: str) -> None:
        """The pod's attempt (scheduling and binding) finished. A pod still in flight was scheduled:
        it is forgotten. A pod already requeued by ``add_unschedulable``/``add_backoff`` stays."""
        e = self._in_flight.get(key)
        if e is not None:
            self._leave_in_flight(e)
            del self._entries[key]

    def add_unschedulable(self, info: QueuedPodInfo, plugins: set[str], pod_cycle: int) -> None:
        """After a failed attempt (``info`` as returned by ``pop``): to backoff if an event that may
        have made the pod schedulable arrived since ``pod_cycle`` started, else to unschedulable."""
        e = self._in_flight_entry(info)
        if e is None:
            return
        self._leave_in_flight(e, keep_events=True)
        e.last_failure = self._clock.now()
        self._stamp(e, e.last_failure)  # upstream: "Refresh the timestamp since the pod is re-added"
        e.info.unschedulable_plugins = set(plugins)
        retry = e.updated_in_flight or self._event_since(pod_cycle, e.info.unschedulable_plugins, e.info.pod)
        self._prune_inflight_events()
        if e.caught_up >= 0:  # a catch-up pod rejected again: that event's catch-up is over
            self._caught_up_epoch = max(self._caught_up_epoch, e.caught_up)
        if retry:
            if e.info.unschedulable_plugins:
                self._event_epoch += 1  # an event during its attempt may have made room: a catch-up
            self._requeue(e)
        else:
            self._to_unschedulable(e)

    def add_backoff(self, info: QueuedPodInfo) -> None:
        """After an error (``info`` as returned by ``pop``): to backoff."""
        e = self._in_flight_entry(info)
        if e is None:
            return
        self._leave_in_flight(e)
        e.last_failure = self._clock.now()
        self._stamp(e, e.last_failure)
        self._requeue(e)

    def on_event(
        self,
        kind: str,
        action: str,
        pod_filter: PodFilter | None = None,
        *,
        old: Any = None,
        new: Any = None,
    ) -> int:
        """A cluster event: move the waiting pods it may have made schedulable; returns how many reached
        active/backoff. ``old`` / ``new``: the event's objects, handed to the QueueingHints (both None: no
        hints, every registering plugin queues). ``pod_filter``: a cheap pre-filter (e.g. the pods that use
        this claim); a pod it refuses does not move."""
        if self._in_flight:
            self._record_inflight_event(_InFlightEvent(self._cycle, kind, action, pod_filter, old, new))
        candidates: dict[str, _Entry] = {}
        for plugin, keys in self._by_plugin.items():
            if plugin == _NO_PLUGIN or self._registered(plugin, kind, action):
                for key in keys:
                    candidates[key] = self._entries[key]
        with_objects = old is not None or new is not None
        resolved: dict[str, tuple[bool, QueueingHintFn | None]] = {}  # per plugin, for this event: one lookup
        moved = 0
        for e in candidates.values():
            if pod_filter is not None and not _filter_ok(pod_filter, e.info.pod):
                continue
            if with_objects and not self._worth(
                e.info.pod, e.info.unschedulable_plugins, kind, action, old, new, resolved
            ):
                continue
            moved += self._release(e)
        if moved:
            self._event_epoch += 1
        return moved

    def on_event_for(self, key: str, kind: str, action: str) -> int:
        """An event that concerns one known pod only (e.g. the claim generated for it was created):
        O(1) instead of scanning every waiting pod. Same in-flight rule as :meth:`on_event`."""
        e = self._entries.get(key)
        if e is None:
            return 0
        if self._in_flight:
            uid = e.info.pod.uid
            self._record_inflight_event(_InFlightEvent(self._cycle, kind, action, lambda p: p.uid == uid))
        if e.pool not in (UNSCHEDULABLE, GATED):
            return 0
        moved = self._release(e)
        if moved:
            self._event_epoch += 1
        return moved

    def flush(self) -> None:
        now = self._clock.now()
        self._flush_backoff(now)
        cutoff = now - self._max_in_unschedulable
        for pool in (self._unschedulable, self._gated):
            stale: list[_Entry] = []
            for e in pool.values():
                if e.since >= cutoff:
                    break
                stale.append(e)
            for e in stale:
                self._release(e)

    def next_wakeup(self) -> float | None:
        top = self._backoff.peek()
        return None if top is None else top.expiry

    def lengths(self) -> dict[str, int]:
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unschedulable),
            GATED: len(self._gated),
        }

    def info(self, key: str) -> QueuedPodInfo | None:
        e = self._entries.get(key)
        return None if e is None else e.info

    def pool(self, key: str) -> str | None:
        """Where the pod is: ``active``, ``backoff``, ``unschedulable``, ``gated``, ``in_flight``."""
        e = self._entries.get(key)
        return None if e is None else e.pool

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def _in_flight_entry(self, info: QueuedPodInfo) -> _Entry | None:
        """The entry of this very attempt, or None if the pod was deleted (or re-added) meanwhile."""
        e = self._in_flight.get(info.pod.key)
        return e if e is not None and e.info is info else None

    # --- moves ----------------------------------------------------------------------------------------

    def _stamp(self, e: _Entry, timestamp: float) -> None:
        """Set the queue timestamp (QueueSort's key after priority) and its rank among the timestamps set."""
        e.info.timestamp = timestamp
        self._stamps += 1
        e.stamped = self._stamps

    def _backoff_duration(self, attempts: int) -> float:
        return min(self._max_backoff, self._initial_backoff * 2.0 ** min(max(attempts, 1) - 1, 64))

    def _backoff_expiry(self, e: _Entry) -> float | None:
        """When the pod's backoff ends, truncated to its ordering window (upstream ``alignToWindow``)."""
        if e.last_failure is None or e.info.attempts <= 0:
            return None
        end = e.last_failure + self._backoff_duration(e.info.attempts)
        return math.floor(end / BACKOFF_WINDOW) * BACKOFF_WINDOW

    def _requeue(self, e: _Entry, checked: bool = False) -> bool:
        """To backoff if still backing off, else to active (through PreEnqueue unless ``checked``).
        True when the pod landed in active or backoff (not gated)."""
        expiry = self._backoff_expiry(e)
        if expiry is not None and expiry > self._clock.now():
            self._seq += 1
            e.seq = self._seq
            e.expiry = expiry
            e.pool = BACKOFF
            self._backoff.push(e)
            if e.info.unschedulable_plugins:
                self._rank(e)
                self._wakeup.set()  # ``pop`` may take it early when nothing is active (SchedulerPopFromBackoffQ)
            return True
        return self._to_active(e, checked)

    def _to_active(self, e: _Entry, checked: bool = False) -> bool:
        if not checked:
            st = self._run_pre_enqueue(e.info.pod)
            if not st.is_success:
                self._to_gated(e, st)
                return False
        e.info.gated = False
        self._seq += 1
        e.seq = self._seq
        e.pool = ACTIVE
        self._active.push(e)
        self._wakeup.set()
        return True

    def _to_gated(self, e: _Entry, st: Status) -> None:
        e.info.gated = True
        e.info.unschedulable_plugins = {st.plugin} if st.plugin else set()
        self._park(e, GATED, self._gated)

    def _to_unschedulable(self, e: _Entry) -> None:
        self._park(e, UNSCHEDULABLE, self._unschedulable)

    def _park(self, e: _Entry, pool_name: str, pool: dict[str, _Entry]) -> None:
        key = e.key
        e.pool = pool_name
        e.since = self._clock.now()
        pool[key] = e
        e.indexed = tuple(e.info.unschedulable_plugins) or (_NO_PLUGIN,)
        for plugin in e.indexed:
            self._by_plugin.setdefault(plugin, {})[key] = None

    def _release(self, e: _Entry) -> int:
        """Move an unschedulable or gated pod on (event or flush). 1 if it reached active/backoff."""
        if e.pool == GATED:
            st = self._run_pre_enqueue(e.info.pod)
            self._detach(e)
            if not st.is_success:
                self._to_gated(e, st)
                return 0
            e.info.gated = False
            return int(self._requeue(e, checked=True))
        self._detach(e)
        return int(self._requeue(e))

    def _detach(self, e: _Entry) -> None:
        """Take the entry out of whatever pool holds it."""
        pool = e.pool
        if pool == ACTIVE:
            self._active.remove(e)
        elif pool == BACKOFF:
            self._backoff.remove(e)
        elif pool in (UNSCHEDULABLE, GATED):
            (self._unschedulable if pool == UNSCHEDULABLE else self._gated).pop(e.key, None)
            for plugin in e.indexed:
                bucket = self._by_plugin.get(plugin)
                if bucket is not None:
                    bucket.pop(e.key, None)
                    if not bucket:
                        del self._by_plugin[plugin]
            e.indexed = ()
        elif pool == IN_FLIGHT:
            self._leave_in_flight(e)
        e.pool = ""

    def _leave_in_flight(self, e: _Entry, keep_events: bool = False) -> None:
        self._in_flight.pop(e.key, None)
        e.pool = ""
        if not keep_events:
            self._prune_inflight_events()

    def _flush_backoff(self, now: float) -> None:
        while (top := self._backoff.peek()) is not None and top.expiry <= now:
            self._backoff.remove(top)
            top.pool = ""
            self._to_active(top)

    # --- events ---------------------------------------------------------------------------------------

    def _registered(self, plugin: str, kind: str, action: str) -> bool:
        if self._events is None:
            return True
        reg = self._events.get(plugin)
        if reg is None:  # no EnqueueExtensions: interested in everything
            return True
        return (
            (kind, action) in reg or (kind, WILDCARD) in reg or (WILDCARD, action) in reg or (WILDCARD, WILDCARD) in reg
        )

    def _matches(self, plugins: set[str], kind: str, action: str) -> bool:
        return not plugins or any(self._registered(p, kind, action) for p in plugins)

    def _hint(self, plugin: str, kind: str, action: str) -> QueueingHintFn | None:
        hints = self._hints.get(plugin)
        if not hints:
            return None
        return (
            hints.get((kind, action))
            or hints.get((kind, WILDCARD))
            or hints.get((WILDCARD, action))
            or hints.get((WILDCARD, WILDCARD))
        )

    def _worth(
        self,
        pod: Pod,
        plugins: set[str],
        kind: str,
        action: str,
        old: Any,
        new: Any,
        resolved: dict[str, tuple[bool, QueueingHintFn | None]] | None = None,
    ) -> bool:
        """upstream ``isPodWorthRequeuing``: no rejecting plugin → yes; else yes when a rejecting plugin that
        registered the event has no hint for it, or its hint answers QUEUE (or raises). ``resolved`` keeps, for
        one event, whether each plugin registered it and its hint (the same for every waiting pod)."""
        if not plugins:
            return True
        for plugin in plugins:
            got = resolved.get(plugin) if resolved is not None else None
            if got is None:
                got = (self._registered(plugin, kind, action), self._hint(plugin, kind, action))
                if resolved is not None:
                    resolved[plugin] = got
            registered, fn = got
            if not registered:
                continue
            if fn is None:
                return True
            try:
                if fn(pod, old, new) == QueueingHint.QUEUE:
                    return True
            except Exception as err:  # upstream: a hint's error is logged and the pod is queued
                self.hint_errors += 1
                fault = (plugin, kind, action)
                if fault not in self._hint_faults:
                    self._hint_faults.add(fault)
                    log.warning(
                        "queueing hint failed; the pod is queued",
                        plugin=plugin, cluster_event=f"{kind}/{action}", pod=pod.key, error=repr(err),
                    )
                return True
        return False

    def _record_inflight_event(self, ev: _InFlightEvent) -> None:
        self._inflight_events.append(ev)
        if len(self._inflight_events) > _MAX_INFLIGHT_EVENTS:
            dropped = self._inflight_events.popleft()
            self._overflow_cycle = max(self._overflow_cycle, dropped.cycle)

    def _event_since(self, pod_cycle: int, plugins: set[str], pod: Pod) -> bool:
        """Whether an event that would have moved this pod arrived since its cycle started."""
        if pod_cycle <= self._overflow_cycle:
            return True
        for ev in reversed(self._inflight_events):
            if ev.cycle < pod_cycle:
                break
            if not self._matches(plugins, ev.kind, ev.action):
                continue
            if ev.pod_filter is not None and not _filter_ok(ev.pod_filter, pod):
                continue
            if (ev.old is None and ev.new is None) or self._worth(pod, plugins, ev.kind, ev.action, ev.old, ev.new):
                return True
        return False

    def _prune_inflight_events(self) -> None:
        if not self._in_flight:
            self._inflight_events.clear()
            self._overflow_cycle = -1
            return
        oldest = next(iter(self._in_flight.values())).pop_cycle
        events = self._inflight_events
        while events and events[0].cycle < oldest:
            events.popleft()

    def _run_pre_enqueue(self, pod: Pod) -> Status:
        if self._pre_enqueue is None:
            return Status.ok()
        try:
            return self._pre_enqueue(pod)
        except Exception as err:  # a fault keeps the pod gated, as an Error status does
            return Status.error(f"PreEnqueue failed: {err}")


def _filter_ok(pod_filter: PodFilter, pod: Pod) -> bool:
    try:
        return pod_filter(pod)
    except Exception:  # fail open, like a QueueingHint returning an error
        return True
