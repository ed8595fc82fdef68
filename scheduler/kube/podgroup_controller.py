"""PodGroup status controller (kopf).

kopf watches ``scheduling.x-k8s.io/v1alpha1`` PodGroups and the Pods that carry the
``scheduling.x-k8s.io/pod-group`` label, and only *triggers* reconciliation: its handlers are
``@kopf.on.event`` handlers that return ``None``, with event posting, peering and cluster scanning off,
so kopf writes nothing to Pods (no annotations, no finalizers) and nothing to PodGroups either
(python-dependencies.md §2). The reconciler computes the status from the scheduler's own cache (members,
bound counts, phases) and the gang scheduler's knowledge (why a group waits, timeouts) with
:func:`scheduler.gang.status.podgroup_status` — the fields of scheduler-plugins' own PodGroupStatus only, so its CRD
(``manifests/crds/``) serves both projects — and writes ``status`` (merge patch on the status subresource)
only when it changed, plus an Event on each phase transition.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from scheduler.api.clusterapi import ApiError, ClusterAPI, NotFound
from scheduler.api.model import POD_GROUP_LABEL
from scheduler.cache.cache import Cache
from scheduler.gang.cycle import GangScheduler
from scheduler.gang.status import podgroup_reason, podgroup_status

log = structlog.get_logger("dra_scheduler.podgroups")

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
DEBOUNCE_SECONDS = 0.2


class PodGroupStatusController:
    def __init__(self, cache: Cache, api: ClusterAPI, gang: GangScheduler) -> None:
        self.cache = cache
        self.api = api
        self.gang = gang
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self.writes = 0
        self._said: dict[str, tuple[str, str]] = {}  # group -> (phase, reason) of its last Event

    def enqueue(self, key: str) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self.queue.put_nowait(key)

    async def reconcile(self, key: str) -> bool:
        """Bring one PodGroup's status up to date. True when something was written. The status holds only
        scheduler-plugins' PodGroupStatus fields; why the group is in its phase goes into an Event, posted when the
        phase or that reason changes (once per change)."""
        pg = self.cache.podgroups().get(key)
        if pg is None or not pg.api_version.startswith(GROUP + "/"):
            self._said.pop(key, None)  # deleted (or not ours to report): nothing to remember about it
            return False
        ns, name = key.split("/", 1)
        members = [p for p in self.cache.pods().values() if p.namespace == ns and p.pod_group == name]
        gs = self.gang.groups.get(key)
        status = podgroup_status(pg, members, gs)
        phase, reason, message = podgroup_reason(pg, members, gs)
        current = dict(pg.raw.get("status") or {})
        changed = not all(current.get(k) == v for k, v in status.items())
        said = self._said.get(key)
        if not changed and said == (phase, reason):
            return False
        if changed:
            try:
                await self.api.patch("PodGroup", ns, name, {"status": status}, subresource="status")
            except NotFound:
                return False
            except ApiError as e:
                log.warning("podgroup status not written", podgroup=key, error=str(e))
                return False
            self.writes += 1
        if said != (phase, reason) and (said is not None or changed or current.get("phase") != phase):
            etype = "Warning" if phase == "Failed" else "Normal"
            await self.api.event(dict(pg.raw), etype, reason, message or phase, "PodGroupStatus")
            log.info("podgroup phase", podgroup=key, phase=phase, was=current.get("phase"), reason=reason)
        self._said[key] = (phase, reason)
        return changed

    async def worker(self) -> None:
        while True:
            key = await self.queue.get()
            await asyncio.sleep(DEBOUNCE_SECONDS)  # let a burst of member events collapse into one write
            self._queued.discard(key)
            try:
                await self.reconcile(key)
            except Exception:  # a status write must never stop the controller
                log.exception("podgroup reconcile failed", podgroup=key)

    async def resync(self) -> None:
        """Periodic safety net (timeouts expire without any event)."""
        while True:
            await asyncio.sleep(10)
            for key in list(self.cache.podgroups()):
                self.enqueue(key)

    async def run(
        self,
        stop: asyncio.Event,
        kubeconfig: str | None = None,
        on_signal: Callable[[], None] | None = None,
        login: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        """Run kopf (triggers only) plus the reconcile worker until ``stop`` is set. kopf installs its own
        SIGINT/SIGTERM handlers; ``on_signal`` (the process's graceful stop) is put back in their place.
        ``login``: the scheduler's own endpoint and credentials (``kopf.ConnectionInfo`` arguments), so kopf
        talks to the same cluster and context; without it, kopf reads the kubeconfig / service account."""
        import kopf

        registry = kopf.OperatorRegistry()

        @kopf.on.login(registry=registry)
        async def login_handler(**kwargs: Any) -> Any:
            if login is not None:
                return kopf.ConnectionInfo(**await login())
            if kubeconfig:
                os.environ["KUBECONFIG"] = kubeconfig
            if kubeconfig or os.environ.get("KUBECONFIG"):
                return kopf.login_with_kubeconfig(**kwargs)
            return kopf.login_with_service_account(**kwargs)

        @kopf.on.event(GROUP, VERSION, "podgroups", registry=registry)
        def on_group(namespace: str | None, name: str | None, **_: Any) -> None:
            if namespace and name:
                self.enqueue(f"{namespace}/{name}")

        @kopf.on.event("", "v1", "pods", labels={POD_GROUP_LABEL: kopf.PRESENT}, registry=registry)
        def on_member(namespace: str | None, labels: Mapping[str, str], **_: Any) -> None:
            group = labels.get(POD_GROUP_LABEL)
            if namespace and group:
                self.enqueue(f"{namespace}/{group}")

        settings = kopf.OperatorSettings()
        settings.peering.standalone = True
        settings.posting.enabled = False
        settings.scanning.disabled = True
        tasks = [asyncio.create_task(self.worker()), asyncio.create_task(self.resync())]
        root = await kopf.spawn_tasks(
            registry=registry, settings=settings, clusterwide=True, standalone=True, stop_flag=stop
        )
        if on_signal is not None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, on_signal)
        operator = asyncio.create_task(kopf.run_tasks(root))
        try:
            await stop.wait()
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(10):  # not wait_for: 3.11 can lose a cancel
                    await operator
        finally:
            for t in [*tasks, operator]:
                t.cancel()
            for t in [*tasks, operator]:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
