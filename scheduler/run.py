"""``dra-scheduler run``: schedule pods on a live cluster.

Start-up, in order: connect (kubeconfig / in-cluster) → discover the optional PodGroup APIs → read the
configuration (file or ConfigMap; invalid = exit 1) → serve /healthz, /readyz, /metrics → start one informer
per kind → wait until every informer applied its first list (then /readyz is 200) → with
``--leader-elect``, wait for the Lease and re-list every informer once leadership is won (a new leader may
have missed the old one's last writes, kubernetes#137308) → run the scheduling loop.

The loop: ``queue.pop_wait(timeout=1)`` → ``run_once`` (scheduling cycle inline, binding cycle as a task),
timed for ``scheduler_schedule_attempts_total`` / ``scheduler_scheduling_attempt_duration_seconds`` (a
scheduled pod is counted when its binding cycle ends) → every second ``queue.flush()`` and the
``scheduler_pending_pods`` gauge.

Shutdown: SIGTERM/SIGINT stop popping, wait for the binding cycles under way (``shutdown_timeout``), release
the Lease, exit 0. Losing the Lease exits 1 at once, without waiting: another replica is scheduling now.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.cache import Cache
from scheduler.config import ConfigError, SchedulerConfig, default_config
from scheduler.framework.interface import Code, QueuedPodInfo
from scheduler.health import HealthServer
from scheduler.kube import resources as _r
from scheduler.kube.client import DEFAULT_BURST, DEFAULT_QPS, KubeConnection, LiveAPI
from scheduler.kube.configwatch import ConfigWatcher
from scheduler.kube.informer import Informer, InformerSet, cache_lookup
from scheduler.kube.leader import LeaderElector
from scheduler.kube.resources import (
    DEVICE_CLASS,
    NAMESPACE,
    NODE,
    OPTIONAL,
    POD,
    PODGROUP_X,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    Resource,
)
from scheduler.metrics import SchedulerMetrics
from scheduler.podgroup_controller import PodGroupStatusController
from scheduler.scheduler import Scheduler

log = structlog.get_logger("dra_scheduler.run")

# a pod kept out of the queue by PreEnqueue this long gets PodScheduled=False saying why
GATED_CONDITION_AFTER = 5.0
# kube-scheduler's pod informer: finished pods hold no resources and are not scheduled
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
ALWAYS = (
    NODE,
    POD,
    NAMESPACE,
    RESOURCE_SLICE,
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    _r.DEVICE_TAINT_RULE,
    # the default profile's other inputs (volumes, spread defaults, priorities, disruption budgets)
    _r.PERSISTENT_VOLUME,
    _r.PERSISTENT_VOLUME_CLAIM,
    _r.STORAGE_CLASS,
    _r.CSI_NODE,
    _r.CSI_DRIVER,
    _r.CSI_STORAGE_CAPACITY,
    _r.SERVICE,
    _r.REPLICATION_CONTROLLER,
    _r.REPLICA_SET,
    _r.STATEFUL_SET,
    _r.PRIORITY_CLASS,
    _r.POD_DISRUPTION_BUDGET,
)


@dataclass
class RunOptions:
    kubeconfig: str | None = None
    config: str | None = None
    config_map: str | None = None
    leader_elect: bool = False
    lease_name: str = "dra-scheduler"
    lease_namespace: str = "kube-system"
    metrics_port: int = 10259
    metrics_host: str = "0.0.0.0"
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    shutdown_timeout: float = 30.0
    config_poll_interval: float = 2.0
    informer_options: dict[str, Any] = field(default_factory=dict)
    install_signal_handlers: bool = True
    identity: str | None = None
    podgroup_controller: bool = True  # write scheduling.x-k8s.io PodGroup status (kopf), leader only


class SchedulerApp:
    """One scheduler process. ``run()`` returns the exit code; ``stop()`` asks for a graceful stop."""

    def __init__(self, opts: RunOptions, conn: KubeConnection | None = None) -> None:
        self.opts = opts
        self.conn = conn
        self.api: LiveAPI | None = None
        self.cache = Cache()
        self.metrics = SchedulerMetrics()
        self.sched: Scheduler | None = None
        self.informers = InformerSet([])
        self.watcher: ConfigWatcher | None = None
        self.elector: LeaderElector | None = None
        self.health: HealthServer | None = None
        self.exit_code = 0
        self.started = asyncio.Event()  # health server up
        self.scheduling = asyncio.Event()  # the loop runs (this replica leads)
        self._stop = asyncio.Event()
        self._lost = False
        self._stopping = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._loop_task: asyncio.Task[None] | None = None
        self._served: dict[Any, bool] = {}
        self._pg_stop = asyncio.Event()
        self.podgroups: PodGroupStatusController | None = None

    def stop(self) -> None:
        self._stop.set()

    def _lease_lost(self) -> None:
        log.error("leader election lost; exiting", lease=f"{self.opts.lease_namespace}/{self.opts.lease_name}")
        self.metrics.leader.labels(name=self.opts.lease_name).set(0)
        self._lost = True
        self.exit_code = 1
        self._stop.set()

    # --- start-up -------------------------------------------------------------------------------------------

    async def run(self) -> int:
        if self.opts.install_signal_handlers:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop)
        try:
            return await self._run()
        finally:
            await self._shutdown()

    async def _run(self) -> int:
        opts = self.opts
        if self.conn is None:
            try:
                self.conn = await KubeConnection.from_kubeconfig(opts.kubeconfig, qps=opts.qps, burst=opts.burst)
            except Exception as e:
                log.error("cannot load the API server connection settings", error=f"{type(e).__name__}: {e}")
                return 1
        else:
            log.info(
                "api server connection", host=self.conn.host, qps=self.conn.limiter.qps, burst=self.conn.limiter.burst
            )
        self.api = api = LiveAPI(self.conn)
        served = await api.discover()
        self._served = dict(served)
        log.info("optional APIs", served={r.api_version + "/" + r.plural: ok for r, ok in served.items()})

        self.watcher = ConfigWatcher(
            self._reconfigure,
            file=opts.config,
            config_map=opts.config_map,
            api=api,
            conn=self.conn,
            poll_interval=opts.config_poll_interval,
            on_result=lambda r: self.metrics.config_reloads.labels(result=r).inc(),
            informer_options=opts.informer_options,
        )
        try:
            config = await self.watcher.initial() or default_config()
        except ConfigError as e:
            log.error("invalid scheduler configuration", source=self.watcher.source, errors=e.errors)
            return 1
        except ValueError as e:
            log.error("invalid arguments", error=str(e))
            return 1
        log.info(
            "configuration loaded", source=self.watcher.source, profiles=[p.scheduler_name for p in config.profiles]
        )

        self.sched = Scheduler(self.cache, api, config, metrics=self.metrics, inline_binding=False)
        for name, fw in self.sched.profiles.items():
            fw.metrics = self.metrics.for_profile(name)

        optional = [r for r in OPTIONAL if served.get(r)]
        # one upstream PodGroup version only (the newest served): the same objects under two versions
        upstream = [r for r in optional if r.group == "scheduling.k8s.io"]
        optional = [r for r in optional if r.group != "scheduling.k8s.io"] + upstream[:1]
        kinds: list[Resource] = [*ALWAYS, *optional]
        lookup = cache_lookup(self.cache)
        self.informers = InformerSet(
            Informer(
                self.conn,
                r,
                self.cache.apply,
                field_selector=POD_FIELD_SELECTOR if r == POD else "",
                cached=lookup,
                **opts.informer_options,
            )
            for r in kinds
        )
        self.health = HealthServer(
            self.metrics,
            host=opts.metrics_host,
            port=opts.metrics_port,
            ready=self.ready,
            live=self._live,
            before_scrape=self._refresh_gauges,
        )
        opts.metrics_port = await self.health.start()
        self.started.set()
        self.informers.start()
        self._tasks.append(asyncio.create_task(self.watcher.run(), name="config-watch"))

        if not await self._until(self.informers.wait_synced()):
            return self.exit_code
        log.info("caches synced", informers=len(self.informers.informers))
        for inf in self.informers.informers:
            self.metrics.informer_synced.labels(resource=inf.name).set(1)

        if opts.leader_elect:
            self.elector = LeaderElector(
                api,
                opts.lease_namespace,
                opts.lease_name,
                opts.identity,
                lease_duration=opts.lease_duration,
                renew_deadline=opts.renew_deadline,
                retry_period=opts.retry_period,
                on_lost=self._lease_lost,
            )
            self.metrics.leader.labels(name=opts.lease_name).set(0)
            self._tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
            if not await self._until(self.elector.is_leader.wait()):
                return self.exit_code
            self.metrics.leader.labels(name=opts.lease_name).set(1)
            if not await self._until(self.informers.resync()):
                return self.exit_code
            log.info("caches re-listed after winning the lease")

        self._loop_task = asyncio.create_task(self._loop(), name="scheduling-loop")
        self.scheduling.set()
        kopf_login = bool(
            opts.kubeconfig
            or os.environ.get("KUBECONFIG")
            or os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token")
        )
        if opts.podgroup_controller and self._served.get(PODGROUP_X) and kopf_login:
            self.podgroups = PodGroupStatusController(self.cache, api, self.sched.gang)
            on_signal = self.stop if opts.install_signal_handlers else None
            self._tasks.append(
                asyncio.create_task(
                    self.podgroups.run(self._pg_stop, opts.kubeconfig, on_signal), name="podgroup-status"
                )
            )
        log.info("scheduling", profiles=sorted(self.sched.profiles))
        stop_wait = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({stop_wait, self._loop_task}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        if self._loop_task in done and not self._stop.is_set():
            exc = self._loop_task.exception()
            log.error("scheduling loop died", error=repr(exc))
            return 1
        return self.exit_code

    async def _until(self, aw: Any) -> bool:
        """Await ``aw`` unless a stop comes first; True when ``aw`` finished."""
        task = asyncio.ensure_future(aw)
        stop_wait = asyncio.create_task(self._stop.wait())
        try:
            done, _ = await asyncio.wait({task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return task in done and not task.cancelled() and task.exception() is None

    def _reconfigure(self, config: SchedulerConfig) -> None:
        assert self.sched is not None
        self.sched.reconfigure(config)

    # --- probes -------------------------------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        if self.informers.informers and self.informers.synced:
            return True, "ok"
        missing = self.informers.not_synced() or ["informers not started"]
        return False, "caches not synced: " + ", ".join(missing)

    def _live(self) -> tuple[bool, str]:
        t = self._loop_task
        if t is not None and t.done() and not t.cancelled() and t.exception() is not None:
            return False, f"scheduling loop died: {t.exception()!r}"
        return True, "ok"

    def _refresh_gauges(self) -> None:
        if self.sched is not None:
            self.metrics.set_pending(self.sched.queue.lengths())

    # --- the scheduling loop -------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        assert self.sched is not None
        q = self.sched.queue
        loop = asyncio.get_running_loop()
        last_flush = loop.time()
        while not self._stopping:
            info = await q.pop_wait(timeout=1.0)
            now = loop.time()
            if now - last_flush >= 1.0:
                last_flush = now
                q.flush()
                self._refresh_gauges()
                if self.sched is not None:
                    await self.sched.write_gated_conditions(GATED_CONDITION_AFTER)
            if info is None or self._stopping:
                continue
            await self._attempt(info)

    async def _attempt(self, info: QueuedPodInfo) -> None:
        sched = self.sched
        assert sched is not None
        profile = info.pod.scheduler_name
        start = time.perf_counter()
        before = set(sched._binding_tasks)
        with structlog.contextvars.bound_contextvars(pod=info.pod.key):
            try:
                outcome = await sched.run_once(info)
            except Exception as e:
                self._recover(info)
                self.metrics.observe_attempt("error", profile, time.perf_counter() - start)
                log.exception("scheduling attempt failed", error=repr(e))
                return
        if outcome.group_results is not None:  # a gang cycle: one attempt per member
            seconds = time.perf_counter() - start
            for result, n in outcome.group_results.items():
                for _ in range(n):
                    self.metrics.observe_attempt(result, profile, seconds)
            return
        if outcome.status is not None:
            result = "error" if outcome.status.code == Code.ERROR else "unschedulable"
            self.metrics.observe_attempt(result, profile, time.perf_counter() - start)
            return
        if not outcome.node:
            return  # deleted, bound meanwhile or not ours: no attempt
        new = set(sched._binding_tasks) - before
        if not new:
            self.metrics.observe_attempt("scheduled", profile, time.perf_counter() - start)
            return
        task = new.pop()
        attempts = info.attempts

        def done(t: asyncio.Task[bool]) -> None:
            seconds = time.perf_counter() - start
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None:
                self._recover(info)
                self.metrics.observe_attempt("error", profile, seconds)
                log.error("binding cycle crashed", pod=info.pod.key, error=repr(exc))
            elif t.result():
                self.metrics.observe_attempt("scheduled", profile, seconds)
                self.metrics.pod_scheduling_attempts.observe(attempts)
            else:
                self.metrics.observe_attempt("error", profile, seconds)

        task.add_done_callback(done)

    def _recover(self, info: QueuedPodInfo) -> None:
        """A plugin raised out of a scheduling or binding cycle (an API error it did not expect, a bug):
        undo what the cycle left in memory (the assumed pod, the in-flight device reservations of its
        claims, which would otherwise block them as "being allocated") and send the pod to backoff.
        API writes already made stay; the next attempt reuses them, as after a restart."""
        sched = self.sched
        assert sched is not None
        pod = sched.cache.pod(info.pod.key) or info.pod
        sched.cache.forget_pod(pod)
        ledger = sched.cache.ledger
        names = {c.claim_name for c in pod.claims if c.claim_name} | {n for n in pod.claim_statuses.values() if n}
        for name in names:
            claim = sched.cache.claim(f"{pod.namespace}/{name}")
            if claim is not None and ledger.is_pending(claim.meta.uid):
                ledger.unreserve(claim.meta.uid)
        sched.queue.add_backoff(info)
        sched.queue.done(pod.key)

    # --- shutdown ------------------------------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self._stopping = True
        self._pg_stop.set()
        sched = self.sched
        if sched is not None:
            sched.queue.close()
        if self._loop_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                async with asyncio.timeout(self.opts.shutdown_timeout):  # not wait_for: 3.11 can lose a cancel
                    await self._loop_task
        if sched is not None:
            if self._lost:
                for t in list(sched._binding_tasks):
                    t.cancel()
            else:
                try:
                    async with asyncio.timeout(self.opts.shutdown_timeout):  # not wait_for: 3.11 can lose a cancel
                        await sched.wait_bindings()
                except TimeoutError:
                    log.warning("binding cycles still running at shutdown", count=len(sched._binding_tasks))
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.elector is not None and not self._lost:
            await self.elector.release()
        await self.informers.stop()
        if self.health is not None:
            await self.health.stop()
        if self.api is not None:
            await self.api.close(timeout=2.0)
        if self.conn is not None:
            await self.conn.close()
        log.info("stopped", exit_code=self.exit_code)


async def run_scheduler(opts: RunOptions) -> int:
    return await SchedulerApp(opts).run()
