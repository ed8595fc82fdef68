"""What the group cycle uses of the scheduling loop that runs it: :class:`GroupHost`.

The loop (:class:`scheduler.loop.scheduler.Scheduler`) builds a :class:`~scheduler.gang.cycle.GangScheduler`
with itself as the host and hands it every pod of a PodGroup; the group cycle reads the host's cache, queue,
frameworks and clocks and reports failures and writes back through it. The loop sits above this room, so the
group cycle sees it through this protocol only (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from scheduler.api.clusterapi import ClusterAPI
from scheduler.api.model import Pod
from scheduler.cache.cache import Cache
from scheduler.framework.interface import QueuedPodInfo, Status
from scheduler.framework.nominator import Nominator
from scheduler.framework.runtime import Framework

# A preemption the group cycle leaves to the loop: (group key, the writes to run with the API and a wall clock).
PendingPreemption = tuple[str, Callable[[ClusterAPI, Callable[[], str]], Awaitable[bool]]]


class HostClock(Protocol):
    def now(self) -> float: ...


class HostQueue(Protocol):
    """The scheduling queue calls of the group cycle (:class:`scheduler.loop.queue.SchedulingQueue`)."""

    @property
    def scheduling_cycle(self) -> int: ...

    def pop_key(self, key: str) -> QueuedPodInfo | None: ...

    def done(self, key: str) -> None: ...

    def add_unschedulable(self, info: QueuedPodInfo, plugins: set[str], pod_cycle: int) -> None: ...

    def add_backoff(self, info: QueuedPodInfo) -> None: ...


class GroupHost(Protocol):
    """The scheduling loop as the group cycle sees it."""

    @property
    def api(self) -> ClusterAPI: ...

    @property
    def cache(self) -> Cache: ...

    @property
    def clock(self) -> HostClock: ...

    @property
    def queue(self) -> HostQueue: ...

    @property
    def profiles(self) -> Mapping[str, Framework]: ...

    @property
    def nominator(self) -> Nominator: ...

    @property
    def attempts(self) -> Counter[str]: ...

    @property
    def inline_binding(self) -> bool: ...

    @property
    def wallclock(self) -> Callable[[], str]: ...

    @property
    def writes_allowed(self) -> Callable[[], bool]: ...

    @property
    def _binding_tasks(self) -> set[asyncio.Task[bool]]: ...

    @property
    def _pending_preemptions(self) -> list[PendingPreemption]: ...

    def responsible(self, pod: Pod) -> bool: ...

    def fail(
        self,
        info: QueuedPodInfo,
        pod: Pod,
        status: Status,
        rejectors: set[str],
        cycle: int,
        nominated: str | None = None,
    ) -> None: ...

    async def write_failure(
        self, pod: Pod, reason: str, message: str, event: bool = True, nominated: str | None = None
    ) -> None: ...

    async def flush_writes(self) -> None: ...

    async def run_preemptions(self) -> None: ...
