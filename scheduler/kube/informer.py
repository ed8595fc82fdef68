"""List-then-watch informers feeding the scheduler's cache with raw dicts.

One asyncio task per kind:

1. list, page by page (``limit`` + ``continue``), and apply every object (ADDED); then ``synced`` is set;
2. watch from the list's resourceVersion with ``allowWatchBookmarks=true``, reading the JSON lines of the
   stream ourselves (this also avoids kubernetes-asyncio's ResourceClaim watch bug: it looks for a
   ``V1ResourceClaim`` model that does not exist);
3. when the watch ends (server timeout, disconnect, error) watch again from the last resourceVersion seen
   (bookmarks included), after a capped, jittered exponential backoff if it failed;
4. on 410 Gone / "Expired" re-list and reconcile: DELETED for objects that disappeared, MODIFIED for changed
   ones, ADDED for new ones.

An event older than, or as old as, what the cache holds for the object (resourceVersion as an int) is
dropped, so an object we wrote ourselves is never rolled back by a late event or a stale re-list.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from scheduler.api.clusterapi import ApiError, Obj
from scheduler.kube.client import KubeConnection, iter_lines
from scheduler.kube.http import Stream, TransportError
from scheduler.kube.resources import Resource, loads, object_key, resource_version, trim

log = structlog.get_logger("dra_scheduler.informer")

Sink = Callable[[str, str, Obj], None]  # (kind, ADDED|MODIFIED|DELETED, raw object)
CurrentVersion = Callable[[str, str], Any]  # (kind, key) -> the raw object the cache holds, or None


class Gone(Exception):
    """410: the resourceVersion is too old (compacted); a re-list is needed."""


class Informer:
    def __init__(
        self,
        conn: KubeConnection,
        resource: Resource,
        sink: Sink,
        *,
        namespace: str = "",
        field_selector: str = "",
        label_selector: str = "",
        page_size: int = 500,
        watch_timeout: tuple[float, float] = (300.0, 600.0),
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        cached: CurrentVersion | None = None,
        name: str = "",
    ) -> None:
        self.conn = conn
        self.resource = resource
        self.kind = resource.kind
        self.sink = sink
        self.namespace = namespace
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.cached = cached
        self.name = name or f"{resource.plural}.{resource.group or 'core'}"
        self.store: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.stats: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._resp: Stream | None = None
        self._failures = 0
        self._relist_waiters: list[asyncio.Future[None]] = []
        self._wake = asyncio.Event()
        self._log = log.bind(informer=self.name)
        # informers whose first list must be applied before this one's (set by InformerSet): listed at once,
        # applied after them
        self.apply_after: tuple[Informer, ...] = ()

    # --- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def resync(self) -> None:
        """Re-list now (a consistent read) and reconcile; returns once done. Used when this replica
        becomes leader, so that it does not schedule on a cache that missed the old leader's last writes."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._relist_waiters.append(fut)
        self._wake.set()
        if self._resp is not None:
            self._resp.close()
        await fut

    async def run(self) -> None:
        first = True
        while True:
            waiters: list[asyncio.Future[None]] = []
            try:
                if first or self._relist_waiters:
                    # a re-list answers the requests made before it started, not those made during it
                    waiters, self._relist_waiters = self._relist_waiters, []
                    await self._list_and_reconcile(initial=first)
                    first = False
                    self.synced.set()
                    _resolve(waiters)
                    waiters = []
                await self._watch()
            except asyncio.CancelledError:
                for f in [*waiters, *self._relist_waiters]:
                    f.cancel()
                self._relist_waiters = []
                raise
            except Gone:
                self._relist_waiters[:0] = waiters
                self.stats["gone"] += 1
                self._log.info("resourceVersion expired; re-listing", resource_version=self.resource_version)
                self._relist_waiters.append(asyncio.get_running_loop().create_future())
            except (ApiError, TransportError, TimeoutError, ValueError) as e:
                self._relist_waiters[:0] = waiters
                self.stats["errors"] += 1
                self._failures += 1
                delay = self._backoff()
                self._log.warning(
                    "list/watch failed; retrying",
                    error=f"{type(e).__name__}: {e}",
                    retry_in=round(delay, 3),
                    synced=self.synced.is_set(),
                )
                await self._sleep(delay)
            except Exception as e:  # a bug: keep the cache alive, start again from a fresh list
                self._relist_waiters[:0] = waiters
                self.stats["errors"] += 1
                self._failures += 1
                self._log.exception("informer failed unexpectedly; re-listing", error=repr(e))
                if not first:
                    self._relist_waiters.append(asyncio.get_running_loop().create_future())
                await self._sleep(self._backoff())

    def _backoff(self) -> float:
        base = min(self.backoff_max, self.backoff_initial * 2.0 ** max(0, self._failures - 1))
        return float(base * random.uniform(0.5, 1.5))

    async def _sleep(self, delay: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):  # not wait_for: 3.11 can lose a cancel
                await self._wake.wait()

    # --- list ---------------------------------------------------------------------------------------------

    def _params(self) -> dict[str, str]:
        q: dict[str, str] = {}
        if self.field_selector:
            q["fieldSelector"] = self.field_selector
        if self.label_selector:
            q["labelSelector"] = self.label_selector
        return q

    async def list_all(self, on_page: Callable[[list[Obj]], None] | None = None) -> tuple[list[Obj], str]:
        """Every object (paginated) and the list's resourceVersion. An expired continue token restarts.
        ``on_page`` is handed each page's objects (prepared: apiVersion, kind, trimmed) as it arrives; after a
        restart it is handed the new list's pages again, so it sees some objects twice."""
        path = self.resource.path(self.namespace)
        while True:
            items: list[Obj] = []
            cont = ""
            rv = ""
            try:
                while True:
                    q = {**self._params(), "limit": str(self.page_size)}
                    if cont:
                        q["continue"] = cont
                    doc = await self.conn.request("GET", path, params=q, timeout=120)
                    meta = doc.get("metadata") or {}
                    rv = rv or str(meta.get("resourceVersion") or "")
                    page = doc.get("items") or []
                    self._prepare(page)
                    items.extend(page)
                    if on_page is not None:
                        on_page(page)
                    cont = str(meta.get("continue") or "")
                    if not cont:
                        break
            except ApiError as e:
                if e.status == 410 and cont:
                    self._log.info("list continue token expired; listing again")
                    self.stats["list_restarts"] += 1
                    continue
                raise
            self.stats["lists"] += 1
            return items, rv

    def _prepare(self, page: list[Obj]) -> None:
        api_version, kind = self.resource.api_version, self.resource.kind
        for o in page:
            o.setdefault("apiVersion", api_version)
            o.setdefault("kind", kind)
            trim(o)

    async def _list_and_reconcile(self, initial: bool) -> None:
        if initial:
            rv, n = await self._initial_list()
            self._log.info("initial list applied", objects=n, resource_version=rv)
        else:
            items, rv = await self.list_all()
            self.reconcile(items)
            self.stats["relists"] += 1
            self._log.info("re-listed", objects=len(items), resource_version=rv)
        self.resource_version = rv
        self._failures = 0

    async def _initial_list(self) -> tuple[str, int]:
        """The first list, applied page by page as the pages arrive: the decoding and applying of one page
        overlap the API server's work on the next (10,000 pods are 20 pages of 500), instead of all of it
        waiting for the last page. ``synced`` is still set only once every page is applied, so nothing is
        scheduled on a partial cache. Pages that arrive before the informers of ``apply_after`` are synced are
        held and applied once they are (APPLY_LAST). When the list restarted (expired continue token) or the
        store was not empty (an earlier attempt failed after some pages), the complete list is reconciled at
        the end, as a re-list is: what disappeared meanwhile is deleted."""
        after = self.apply_after
        gate = asyncio.ensure_future(asyncio.gather(*(inf.synced.wait() for inf in after))) if after else None
        held: list[list[Obj]] = []
        streaming = not self.store
        restarts = self.stats["list_restarts"]

        def on_page(page: list[Obj]) -> None:
            if self.stats["list_restarts"] != restarts:
                return  # listing again: the complete list is reconciled at the end
            if gate is not None and not gate.done():
                held.append(page)
                return
            for p in [*held, page]:
                for o in p:
                    self._upsert(o)
            held.clear()

        try:
            items, rv = await self.list_all(on_page if streaming else None)
            if gate is not None:
                await gate
        finally:
            if gate is not None and not gate.done():
                gate.cancel()
        if streaming and self.stats["list_restarts"] == restarts:
            for p in held:
                for o in p:
                    self._upsert(o)
        else:
            self.reconcile(items)
        return rv, len(items)

    def reconcile(self, items: Iterable[Obj]) -> None:
        """Make the store (and the cache) equal to ``items``: DELETED, then MODIFIED/ADDED."""
        fresh = {object_key(o): o for o in items}
        for key in [k for k in self.store if k not in fresh]:
            old = self.store.pop(key)
            self._emit("DELETED", old)
        for o in fresh.values():
            self._upsert(o)

    # --- watch --------------------------------------------------------------------------------------------

    async def _watch(self) -> None:
        lo, hi = self.watch_timeout
        server_timeout = int(random.uniform(lo, hi))
        q = {
            **self._params(),
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(server_timeout),
        }
        started = time.monotonic()
        events = 0
        try:
            async with self.conn.stream(self.resource.path(self.namespace), q, timeout=server_timeout + 60) as resp:
                self._resp = resp
                self.stats["watches"] += 1
                async for line in iter_lines(resp):
                    self._handle(loads(line))
                    events += 1
                    self._failures = 0
        except ApiError as e:
            if e.status == 410:
                raise Gone(str(e)) from e
            raise
        except (TransportError, ValueError):
            if self._relist_waiters:  # we closed the stream to re-list
                return
            raise
        finally:
            self._resp = None
        if events == 0 and time.monotonic() - started < 1.0 and not self._relist_waiters:
            # closed at once without a word: do not spin
            self._failures += 1
            await self._sleep(self._backoff())

    def _handle(self, ev: dict[str, Any]) -> None:
        typ = ev.get("type")
        obj = ev.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event without object: {str(ev)[:200]}")
        if typ == "ERROR":
            code = obj.get("code")
            if code == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise Gone(str(obj.get("message") or "resourceVersion expired"))
            raise ApiError(f"watch error: {obj.get('message') or obj}", int(code) if isinstance(code, int) else 500)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        trim(obj)
        if typ == "BOOKMARK":
            self.stats["bookmarks"] += 1
        elif typ in ("ADDED", "MODIFIED"):
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
            self._upsert(obj)
        elif typ == "DELETED":
            key = object_key(obj)
            if self.store.pop(key, None) is not None:
                self._emit("DELETED", obj)
        else:
            self._log.warning("unknown watch event type", type=typ)
        if rv:
            self.resource_version = rv

    # --- delivery -----------------------------------------------------------------------------------------

    def _upsert(self, obj: Obj) -> None:
        key = object_key(obj)
        new = resource_version(obj)
        if new is not None:
            held = [resource_version(self.store.get(key))]
            if self.cached is not None:
                held.append(resource_version(self.cached(self.kind, key)))
            known = [h for h in held if h is not None]
            if known and new <= max(known):
                self.stats["stale"] += 1
                return
        existed = key in self.store
        self.store[key] = obj
        self._emit("MODIFIED" if existed else "ADDED", obj)

    def _emit(self, event: str, obj: Obj) -> None:
        self.stats[event] += 1
        try:
            self.sink(self.kind, event, obj)
        except Exception as e:  # a bad object or handler must not stop the informer
            self.stats["sink_errors"] += 1
            self._log.error("applying event failed", event_type=event, object=object_key(obj), error=repr(e))


def _resolve(waiters: Iterable[asyncio.Future[None]]) -> None:
    for f in waiters:
        if not f.done():
            f.set_result(None)


def cache_lookup(cache: Any) -> CurrentVersion:
    """What the scheduler's cache holds for (kind, key), as a raw object (kinds it keeps raw)."""

    def lookup(kind: str, key: str) -> Any:
        if kind == "Pod":
            o = cache.pod(key)
        elif kind == "ResourceClaim":
            o = cache.claim(key)
        elif kind == "Node":
            o = cache.nodes().get(key)
        elif kind == "PodGroup":
            o = cache.podgroups().get(key)
        else:
            return None
        return None if o is None else o.raw

    return lookup


# Kinds whose first list is applied after every other informer of the set has applied its own. A pod applied
# before its ResourceClaims, its namespace or the nodes and slices is gated (PreEnqueue: claim not found) or
# parked, and each object of the other kinds applied after it is then a cluster event that re-runs PreEnqueue
# or the queueing hints for every such pod: 200 ResourceSlices x 1,000 gated pods = 200,000 PreEnqueue runs
# before /readyz. Applied last, each pod finds what it refers to and goes straight to the active queue, and
# the other kinds' events find an empty queue. The order of the informers' handlers is not a contract (client-go
# starts them concurrently); the cache after the first lists is the same.
APPLY_LAST = frozenset({"Pod"})


class InformerSet:
    """The informers of one process; ``synced`` once every one has applied its first list. The first lists
    are fetched concurrently; those of the kinds in :data:`APPLY_LAST` are applied after the others'."""

    def __init__(self, informers: Iterable[Informer]) -> None:
        self.informers = list(informers)
        first = tuple(inf for inf in self.informers if inf.kind not in APPLY_LAST)
        for inf in self.informers:
            if inf.kind in APPLY_LAST:
                inf.apply_after = first

    def start(self) -> None:
        for inf in self.informers:
            inf.start()

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self.informers), return_exceptions=True)

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers)

    def not_synced(self) -> list[str]:
        return [inf.name for inf in self.informers if not inf.synced.is_set()]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers))

    async def resync(self) -> None:
        await asyncio.gather(*(inf.resync() for inf in self.informers))
