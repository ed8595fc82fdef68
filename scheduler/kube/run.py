"""``dra-scheduler run``: schedule pods on a live cluster.

Start-up, in order: connection settings (kubectl's rules: ``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``,
in-cluster; ``--context``; none = a one-line error naming what was tried, exit 1) → serve /healthz, /readyz,
/metrics → wait for the API server (``/version``, backoff, at most ``--connect-timeout``; then exit 1) →
discover the optional PodGroup APIs → read the configuration (file or ConfigMap; invalid = exit 1; its
``leaderElection`` block fills the leader-election settings not given as flags) → start one informer per
kind → wait until every informer applied its first list (then /readyz is 200) → with ``--leader-elect``,
wait for the Lease, the informers watching all along (a warm standby: no re-list on winning, see ``_run``), no
write sent unless the lease is surely held (``LeaderElector.holds``) → run the scheduling loop.

/readyz answers 503 with what start-up waits for (the API server and its last error, the configuration,
the informers not synced yet) and, once ready, 200 with ``ok`` (a standby replica adds the Lease and its
holder). Discovery is repeated every ``discovery_interval``: a PodGroup API (the x-k8s CRD or
scheduling.k8s.io) installed after start-up gets its informer then, without a restart.

The loop: ``queue.pop_wait(timeout=1)`` → ``run_once`` (scheduling cycle inline, binding cycle as a task),
timed for ``scheduler_schedule_attempts_total`` / ``scheduler_scheduling_attempt_duration_seconds`` (a
scheduled pod is counted when its binding cycle ends) → a yield to the event loop, so that the binding cycles
progress between scheduling cycles, and a pause while more binding writes wait for the API than the QPS budget
sends in ``write_backlog`` seconds (``_write_backpressure``) → every second ``queue.flush()`` and the
``scheduler_pending_pods`` gauge.

Events go out on a second connection (own rate limiter and connection pool, the same ``--qps``/``--burst``:
kube-scheduler's separate events clientset), aggregated into series (scheduler/kube/events.py).

Shutdown: SIGTERM/SIGINT stop popping, wait for the binding cycles under way (``shutdown_timeout``), release
the Lease, flush the Events, exit 0. Losing the Lease exits 1 at once (well within a second), without waiting
for binding cycles or Events: another replica is scheduling now, and this one's writes are fenced already.
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

from scheduler.api.clusterapi import ApiError
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import (
    ConfigError,
    LeaderElectionConfig,
    SchedulerConfig,
    default_config,
    validate_timing,
)
from scheduler.framework.interface import Code, QueuedPodInfo
from scheduler.kube import memory
from scheduler.kube import resources as _r
from scheduler.kube.client import DEFAULT_BURST, DEFAULT_MAX_INFLIGHT, DEFAULT_QPS, KubeConnection, LiveAPI
from scheduler.kube.configwatch import ConfigWatcher
from scheduler.kube.health import HealthServer
from scheduler.kube.informer import Informer, InformerSet, cache_lookup
from scheduler.kube.kubeconfig import KubeconfigError
from scheduler.kube.leader import LeaderElector
from scheduler.kube.metrics import SchedulerMetrics
from scheduler.kube.podgroup_controller import PodGroupStatusController
from scheduler.kube.resources import (
    DEVICE_CLASS,
    GATED,
    LEASE,
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
from scheduler.loop.scheduler import Scheduler

log = structlog.get_logger("dra_scheduler.run")


async def discover_gated(api: LiveAPI) -> dict[Resource, bool]:
    """Whether the cluster serves the 1.37 workload APIs the group cycle reads (``scheduling.k8s.io/v1beta1``
    Workload, ``v1alpha3`` CompositePodGroup: feature gates and runtime-config): watched only when served."""
    found = await asyncio.gather(*(api.serves(r) for r in GATED))
    return dict(zip(GATED, found, strict=True))


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
    max_inflight: int = DEFAULT_MAX_INFLIGHT  # requests in flight at once (<= 0: no limit)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    shutdown_timeout: float = 30.0
    config_poll_interval: float = 2.0
    informer_options: dict[str, Any] = field(default_factory=dict)
    install_signal_handlers: bool = True
    identity: str | None = None
    podgroup_controller: bool = True  # write scheduling.x-k8s.io PodGroup status (kopf), leader only
    context: str | None = None  # kubeconfig context (--context)
    connect_timeout: float = 60.0  # wait this long for the API server at start-up (<= 0: for ever)
    discovery_interval: float = 30.0  # re-discover the optional (PodGroup) APIs this often
    resource_lock: str = "leases"
    # the scheduling loop pauses while binding-cycle writes worth more than this many seconds of the client's
    # QPS wait (for the rate limiter or a place in flight; <= 0: never pauses): SchedulerApp._write_backpressure
    write_backlog: float = 0.5
    # a full cyclic collection, then the C library's free heap pages given back to the kernel (glibc
    # malloc_trim, where the C library is glibc), this often (<= 0: never): SchedulerApp._trim_loop
    memory_trim_interval: float = 60.0
    # RunOptions fields given explicitly (command-line flags): a config file's leaderElection block sets the
    # leader-election fields not named here (kube-scheduler: flags that were set win over the file)
    explicit: frozenset[str] = frozenset()


# RunOptions field -> (flag, leaderElection field of the configuration file)
LEADER_ELECTION_OPTIONS = {
    "leader_elect": ("--leader-elect", "leaderElect"),
    "lease_duration": ("--leader-elect-lease-duration", "leaseDuration"),
    "renew_deadline": ("--leader-elect-renew-deadline", "renewDeadline"),
    "retry_period": ("--leader-elect-retry-period", "retryPeriod"),
    "resource_lock": ("--leader-elect-resource-lock", "resourceLock"),
    "lease_name": ("--leader-elect-resource-name", "resourceName"),
    "lease_namespace": ("--leader-elect-resource-namespace", "resourceNamespace"),
}
_CONFIG_ATTR = {"lease_name": "resource_name", "lease_namespace": "resource_namespace"}


def apply_leader_election(opts: RunOptions, le: LeaderElectionConfig | None) -> list[str]:
    """Fill ``opts``' leader-election settings from the configuration file's block (the fields it names,
    unless given as flags), then check the result as client-go does; returns the errors (field names as
    flags or as ``leaderElection.*``, wherever each value came from)."""
    from_file: set[str] = set()
    if le is not None:
        for attr in LEADER_ELECTION_OPTIONS:
            cattr = _CONFIG_ATTR.get(attr, attr)
            if cattr in le.named and attr not in opts.explicit:
                setattr(opts, attr, getattr(le, cattr))
                from_file.add(attr)
    if not opts.leader_elect:
        return []

    def name(attr: str) -> str:
        flag, key = LEADER_ELECTION_OPTIONS[attr]
        return f"leaderElection.{key}" if attr in from_file else flag

    errs = validate_timing(
        opts.lease_duration,
        opts.renew_deadline,
        opts.retry_period,
        (name("lease_duration"), name("renew_deadline"), name("retry_period")),
    )
    if opts.resource_lock != "leases":
        errs.append(f'{name("resource_lock")}: unsupported value {opts.resource_lock!r}, supported: "leases"')
    for attr in ("lease_name", "lease_namespace"):
        if not getattr(opts, attr):
            errs.append(f"{name(attr)}: required")
    return errs


class SchedulerApp:
    """One scheduler process. ``run()`` returns the exit code; ``stop()`` asks for a graceful stop."""

    def __init__(self, opts: RunOptions, conn: KubeConnection | None = None) -> None:
        self.opts = opts
        self.conn = conn
        self.events_conn: KubeConnection | None = None  # Events' own client (limiter, pool): kube/events.py
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
        self.fatal: str | None = None  # why start-up gave up (one line), for the command line
        self._phase = "starting"  # what start-up waits for (the /readyz answer until the informers exist)
        self._leader_election: LeaderElectionConfig | None = None
        self._last_snapshot: Any = None  # memory_report's previous tracemalloc snapshot
        self._last_counts: Any = None  # the untraced memory report's previous object counts by type

    def stop(self) -> None:
        self._stop.set()

    def _holds_lease(self) -> bool:
        """With --leader-elect, whether a write may leave this process now (scheduler/kube/leader.py ``holds``)."""
        return self.elector is not None and self.elector.holds()

    def memory_report(self) -> None:
        """SIGUSR2: log where the Python heap's memory is (the 20 largest allocation sites) and what grew most
        since the previous report, when the process traces allocations (started with ``PYTHONTRACEMALLOC=1`` or
        more frames); otherwise one line saying how to turn it on. For an operator who sees the RSS climb."""
        import tracemalloc

        if not tracemalloc.is_tracing():
            self._object_report()
            return
        snap = tracemalloc.take_snapshot().filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
        traced, peak = tracemalloc.get_traced_memory()

        def lines(stats: list[Any]) -> list[str]:
            out = []
            for st in stats[:20]:
                frame = st.traceback[0]
                size = getattr(st, "size_diff", st.size)
                count = getattr(st, "count_diff", st.count)
                out.append(f"{frame.filename}:{frame.lineno} {size / 1024:+.1f} KiB {count:+d}")
            return out

        grown = lines(snap.compare_to(self._last_snapshot, "lineno")) if self._last_snapshot is not None else []
        log.info(
            "memory report",
            traced_mib=round(traced / 2**20, 2),
            peak_mib=round(peak / 2**20, 2),
            largest=lines(snap.statistics("lineno")),
            grown_since_last_report=grown,
        )
        self._last_snapshot = snap

    def _object_report(self) -> None:
        """The untraced memory report: live objects by type (gc's view, no tracing needed, ~0.3 s per million
        objects), the 20 most numerous and the 20 that grew most since the previous report; pymalloc's arenas and
        block bytes; the RSS before and after glibc's ``malloc_trim`` (scheduler/kube/memory.py); the collector's
        generations, the frozen count and what a full collection found unreachable (cyclic garbage waiting for the
        collector's rare full passes, GC_THRESHOLDS in cli.py). Objects and blocks
        flat while the RSS climbs points outside Python's objects; a large drop at the trim means freed memory
        the C library had kept."""
        import gc
        from collections import Counter

        rss_before_gc = memory.rss_kib()
        generations = [len(gc.get_objects(g)) for g in range(3)]
        frozen = gc.get_freeze_count()
        with memory.saving_garbage() as saved:  # what the full collection finds unreachable, kept to count
            unreachable = gc.collect()
            garbage = Counter(type(o).__qualname__ for o in saved)
            describe = os.environ.get("DRA_SCHEDULER_DESCRIBE_CYCLES", "")  # how many types (1: 8)
            cycles = memory.describe_cycles(saved, types=max(8, int(describe))) if describe.isdigit() else []
        counts = Counter(type(o).__qualname__ for o in gc.get_objects())
        prev: Counter[str] = self._last_counts if self._last_counts is not None else Counter()
        grown = Counter({k: v - prev.get(k, 0) for k, v in counts.items()})
        arenas = memory.pymalloc_stats()
        trim = memory.collect_and_trim(full_collection=False)  # collected above already
        log.info(
            "memory report",
            traced="no (PYTHONTRACEMALLOC=1 gives allocation sites)",
            rss_before_gc_kib=rss_before_gc,
            gc_generations=generations,
            gc_frozen=frozen,
            gc_unreachable_collected=unreachable,
            gc_unreachable_types=[f"{k} {v}" for k, v in garbage.most_common(20)],
            gc_unreachable_cycles=cycles,
            rss_kib=trim["rss_before_kib"],
            rss_after_malloc_trim_kib=trim["rss_kib"] if trim["trimmed"] is not None else None,
            pymalloc=arenas,
            gc_objects=sum(counts.values()),
            most=[f"{k} {v}" for k, v in counts.most_common(20)],
            grown_since_last_report=[f"{k} {v:+d}" for k, v in grown.most_common(20) if v > 0]
            if self._last_counts is not None
            else [],
        )
        self._last_counts = counts

    def _lease_lost(self) -> None:
        log.error("leader election lost; exiting", lease=f"{self.opts.lease_namespace}/{self.opts.lease_name}")
        self.metrics.leader.labels(name=self.opts.lease_name).set(0)
        self._lost = True
        self.exit_code = 1
        self._stop.set()

    # --- start-up -------------------------------------------------------------------------------------------

    async def run(self) -> int:
        asyncio.get_running_loop().set_exception_handler(_loop_exception)
        if self.opts.install_signal_handlers:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop)
            with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
                loop.add_signal_handler(signal.SIGUSR2, self.memory_report)
        try:
            code = await self._run()
            if code and not self.exit_code:
                self.exit_code = code
            return code
        finally:
            await self._shutdown()

    def _fail(self, message: str, event: str, **kw: Any) -> int:
        """Start-up gives up: an ERROR log line, the one-line reason kept for the command line, exit 1."""
        log.error(event, error=message, **kw)
        self.fatal = message
        return 1

    async def _run(self) -> int:
        opts = self.opts
        if self.conn is None:
            self._phase = "loading the API server connection settings"
            try:
                self.conn = await KubeConnection.from_kubeconfig(
                    opts.kubeconfig,
                    context=opts.context,
                    qps=opts.qps,
                    burst=opts.burst,
                    max_inflight=opts.max_inflight,
                )
            except KubeconfigError as e:
                return self._fail(str(e), "no API server connection settings")
            except Exception as e:
                return self._fail(f"{type(e).__name__}: {e}", "cannot load the API server connection settings")
        else:
            log.info(
                "api server connection", host=self.conn.host, qps=self.conn.limiter.qps, burst=self.conn.limiter.burst
            )
        self.health = HealthServer(
            self.metrics,
            host=opts.metrics_host,
            port=opts.metrics_port,
            ready=self.ready,
            live=self._live,
            before_scrape=self._refresh_gauges,
        )
        try:
            opts.metrics_port = await self.health.start()
        except OSError as e:
            self.health = None
            where = f"{opts.metrics_host}:{opts.metrics_port}"
            return self._fail(f"cannot serve /healthz, /readyz, /metrics on {where}: {e}", "cannot listen")
        self._phase = f"waiting for the API server at {self.conn.host}"
        bound = opts.connect_timeout if opts.connect_timeout > 0 else None
        try:
            if not await self._until(self.conn.wait_reachable(bound, on_wait=self._set_phase), reraise=True):
                return self.exit_code
        except ApiError as e:  # Unreachable after --connect-timeout, 401, TLS verification
            return self._fail(str(e), "API server not usable", host=self.conn.host)
        if opts.leader_elect:
            # fenced from the start: nothing is written before this replica holds the lease (the informers' first
            # events reach handlers that write, e.g. a gang's conditions, before the elector exists)
            self.conn.write_fence = self._holds_lease
        self.events_conn = self.conn.sibling()
        self.api = api = LiveAPI(self.conn, events_conn=self.events_conn)
        self._watch_api(self.conn, self.events_conn, api)
        self._phase = "discovering the API server's optional APIs"
        served = {**await api.discover(), **await discover_gated(api)}
        self._served = dict(served)
        log.info("optional APIs", served={r.api_version + "/" + r.plural: ok for r, ok in served.items()})
        self._phase = "loading the scheduler configuration"

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
            self.fatal = f"invalid scheduler configuration ({self.watcher.source}): " + "; ".join(e.errors)
            return 1
        except ValueError as e:
            return self._fail(str(e), "invalid arguments")
        log.info(
            "configuration loaded", source=self.watcher.source, profiles=[p.scheduler_name for p in config.profiles]
        )
        self._leader_election = config.leader_election
        le_errors = apply_leader_election(opts, config.leader_election)
        if le_errors:
            return self._fail("invalid leader election settings: " + "; ".join(le_errors), "invalid leader election")

        self.sched = Scheduler(self.cache, api, config, metrics=self.metrics, inline_binding=False)
        if opts.leader_elect:
            self.sched.writes_allowed = self._holds_lease
        for name, fw in self.sched.profiles.items():
            fw.metrics = self.metrics.for_profile(name)

        kinds: list[Resource] = [*ALWAYS, *self._optional_to_watch(served, set())]
        self.informers = InformerSet(self._informer(r) for r in kinds)
        self._phase = ""
        self.informers.start()
        self.started.set()
        self._tasks.append(asyncio.create_task(self.watcher.run(), name="config-watch"))
        if opts.discovery_interval > 0:
            self._tasks.append(asyncio.create_task(self._discovery_loop(), name="api-discovery"))
        if opts.memory_trim_interval > 0:
            self._tasks.append(asyncio.create_task(self._trim_loop(), name="memory-trim"))

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
            # the write fence set on the connection at start-up (_holds_lease) asks this elector from now on
            self.metrics.leader.labels(name=opts.lease_name).set(0)
            # the standby watches the Lease (RBAC: list/watch on that lease name): it sees each renewal as it
            # happens and takes a dead leader's lease at expiry, not up to two retry periods later
            lease_watch = Informer(
                self.conn,
                LEASE,
                lambda _kind, _event, obj: self.elector.observe(obj) if self.elector is not None else None,
                namespace=opts.lease_namespace,
                field_selector=f"metadata.name={opts.lease_name}",
                name="lease",
            )
            lease_watch.start()
            self._tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
            try:
                if not await self._until(self.elector.is_leader.wait()):
                    return self.exit_code
            finally:
                await lease_watch.stop()  # the leader renews; its own answers are enough
            self.metrics.leader.labels(name=opts.lease_name).set(1)
            # Warm takeover, as kube-scheduler: the standby's informers have been watching all along, so it starts
            # from its caches without re-listing (a re-list of 10,000 pods cost seconds of every failover). The
            # old leader's last writes came before its renew deadline, at least lease - deadline before this win
            # (its writes are fenced the same way), and a healthy watch delivers in milliseconds; an informer whose
            # watch broke re-lists on its own before it applies anything newer (kubernetes#137308 discusses the
            # residual race; claim writes stay guarded by their resourceVersion).
            log.info("took over the lease with warm caches", informers=len(self.informers.informers))

        self._loop_task = asyncio.create_task(self._loop(), name="scheduling-loop")
        self.scheduling.set()
        self._start_podgroup_controller()
        log.info("scheduling", profiles=sorted(self.sched.profiles))
        stop_wait = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({stop_wait, self._loop_task}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        if self._loop_task in done and not self._stop.is_set():
            exc = self._loop_task.exception()
            log.error("scheduling loop died", error=repr(exc))
            return 1
        return self.exit_code

    async def _until(self, aw: Any, reraise: bool = False) -> bool:
        """Await ``aw`` unless a stop comes first; True when ``aw`` finished (``reraise``: its exception is
        raised here)."""
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
        if reraise and task in done and not task.cancelled():
            exc = task.exception()
            if exc is not None:
                raise exc
        return task in done and not task.cancelled() and task.exception() is None

    def _watch_api(self, conn: KubeConnection, events_conn: KubeConnection, api: LiveAPI) -> None:
        """``dra_scheduler_api_requests_total`` and ``dra_scheduler_events_total`` (scheduler/kube/metrics.py)."""
        clients = (("scheduling", conn), ("events", events_conn))
        self.metrics.watch_api(
            lambda: [(name, *k, n) for name, c in clients for k, n in list(c.requests.items())],
            lambda: dict(api.recorder.counts),
            lambda: {name: c.limiter.throttled_seconds for name, c in clients},
        )

    def _set_phase(self, phase: str) -> None:
        self._phase = phase

    def _reconfigure(self, config: SchedulerConfig) -> None:
        assert self.sched is not None
        if config.leader_election != self._leader_election:
            log.warning("leaderElection changed in the configuration: it takes effect at the next start")
        self.sched.reconfigure(config)

    # --- informers of APIs found later -------------------------------------------------------------------------

    def _informer(self, r: Resource) -> Informer:
        assert self.conn is not None
        return Informer(
            self.conn,
            r,
            self.cache.apply,
            field_selector=POD_FIELD_SELECTOR if r == POD else "",
            cached=cache_lookup(self.cache),
            **self.opts.informer_options,
        )

    @staticmethod
    def _optional_to_watch(served: dict[Resource, bool], watched: set[Resource]) -> list[Resource]:
        """The optional APIs to watch, given what is served and what is watched already: the PodGroup CRD,
        and one upstream PodGroup version only (the newest served): the same objects under two versions."""
        out = [r for r in OPTIONAL if served.get(r) and r.group != "scheduling.k8s.io" and r not in watched]
        if not any(r in OPTIONAL and r.group == "scheduling.k8s.io" for r in watched):
            out += [r for r in OPTIONAL if served.get(r) and r.group == "scheduling.k8s.io"][:1]
        out += [r for r in GATED if served.get(r) and r not in watched]  # Workload, CompositePodGroup (1.37)
        return out

    async def _trim_loop(self) -> None:
        """The memory upkeep, every ``memory_trim_interval`` s: a full cyclic collection, then glibc's
        ``malloc_trim(0)`` (:func:`scheduler.kube.memory.collect_and_trim`).

        The collection: objects that lived through a few young collections (a pod cached for minutes, the
        PodGroup status controller's kopf views, a closed connection's SSL objects) and then became garbage
        inside a reference cycle are freed only by a full pass, and with :data:`scheduler.cli.GC_THRESHOLDS`
        and a frozen start-up heap those come seldom: a soak leader held 7,000-44,000 such objects per 4
        minutes (kopf's Body/Spec/Status views refer to each other by design), and its RSS climbed 50-90 MiB/h
        where, collected every 4 minutes, it rose 8.6 MiB/h (issue 24). A pass walks only the objects not
        frozen at start-up; should one take long (a cluster grown far beyond its start), the next waits at
        least 200 times that long, so upkeep stays under 0.5 % of the loop's time.

        The trim: objects over 512 bytes (API answers' bytes, decoded strings, dict and list tables) come from
        the C library's heap, which keeps the pages of freed chunks in the middle of its heaps: the resident
        set of a long-running process climbs while its live objects do not (a soak leader's RSS rose 4-5 MiB
        between two memory reports whose live Python objects were flat, and each report's trim gave that back).
        Both run on the event loop, between scheduling cycles."""
        interval = self.opts.memory_trim_interval
        while True:
            await asyncio.sleep(interval)
            done = memory.collect_and_trim(full_collection=True)
            before, after = done["rss_before_kib"], done["rss_kib"]
            log.debug(
                "memory upkeep",
                rss_kib=after,
                unreachable=done["unreachable"],
                collect_ms=done["collect_ms"],
                trimmed_kib=(before - after) if before is not None and after is not None else None,
            )
            interval = max(self.opts.memory_trim_interval, done["collect_ms"] / 1000 * 200)

    async def _discovery_loop(self) -> None:
        """Discovery again every ``discovery_interval``: an optional API served now and not watched gets
        its informer (and the PodGroup status controller, for the x-k8s CRD) without a restart."""
        assert self.api is not None
        while True:
            await asyncio.sleep(self.opts.discovery_interval)
            try:
                await self.discover_again()
            except Exception as e:  # keep discovering; the next round may work
                log.warning("API discovery failed", error=repr(e))

    async def discover_again(self) -> list[Resource]:
        """One discovery round; returns the resources whose informers it started."""
        assert self.api is not None
        served = {**await self.api.discover(), **await discover_gated(self.api)}
        self._served.update(served)
        watched = {inf.resource for inf in self.informers.informers}
        new = self._optional_to_watch(served, watched)
        for r in new:
            inf = self._informer(r)
            self.informers.informers.append(inf)
            inf.start()
            log.info("API served now: watching it", api=f"{r.api_version}/{r.plural}")
            self._tasks.append(asyncio.create_task(self._mark_synced(inf), name=f"synced-{inf.name}"))
        if new:
            self._start_podgroup_controller()
        return new

    async def _mark_synced(self, inf: Informer) -> None:
        await inf.synced.wait()
        self.metrics.informer_synced.labels(resource=inf.name).set(1)
        log.info("cache synced", informer=inf.name)

    def _start_podgroup_controller(self) -> None:
        """The kopf PodGroup status controller (x-k8s CRD), once this replica schedules, if the CRD is
        served and the connection came from a kubeconfig or the service account (kopf logs in with the
        same endpoint and credentials)."""
        opts, conn = self.opts, self.conn
        if (
            self.podgroups is not None
            or self.sched is None
            or self.api is None
            or not self.scheduling.is_set()
            or not opts.podgroup_controller
            or not self._served.get(PODGROUP_X)
            or conn is None
            or conn.login is None
        ):
            return
        self.podgroups = PodGroupStatusController(self.cache, self.api, self.sched.gang)
        on_signal = self.stop if opts.install_signal_handlers else None
        self._tasks.append(
            asyncio.create_task(
                self.podgroups.run(self._pg_stop, opts.kubeconfig, on_signal, login=conn.login), name="podgroup-status"
            )
        )

    # --- probes -------------------------------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        """(ready, what it waits for): 503 until every informer applied its first list; a standby replica
        is ready (as kube-scheduler's) and says which Lease it waits for."""
        if self._phase:
            return False, self._phase
        if not (self.informers.informers and self.informers.synced):
            missing = self.informers.not_synced() or ["informers not started"]
            return False, "caches not synced: " + ", ".join(missing)
        if self.opts.leader_elect and not self.scheduling.is_set():
            lease = f"{self.opts.lease_namespace}/{self.opts.lease_name}"
            holder = self.elector.observed_holder if self.elector is not None else ""
            return True, f"ok (standby: waiting for the lease {lease}, held by {holder or 'nobody yet'})"
        return True, "ok"

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
            # Let the binding cycles (and the informers) run between two scheduling cycles: with pods queued,
            # nothing above suspends, and without this the first binding cycle would send its first write
            # only once the whole queue had been through its scheduling cycle (pods bound all at the end).
            await asyncio.sleep(0)
            await self._write_backpressure()

    async def _write_backpressure(self) -> None:
        """Pause the scheduling loop while more binding-cycle writes wait (for the client-side rate limiter or
        for a place among the requests in flight) than the QPS budget sends in ``write_backlog`` seconds.
        When the writes are the bottleneck, cycles run further ahead would only take the CPU (one event loop)
        from the binding cycles already under way, whose writes go first anyway; paused, the loop leaves the
        event loop to them, and the pods not scheduled yet wait in the queue, to be scheduled against a
        fresher cluster state. When the CPU is the bottleneck nothing waits and the loop never pauses."""
        conn = self.conn
        backlog = self.opts.write_backlog
        if conn is None or backlog <= 0:
            return
        qps = conn.limiter.qps if conn.limiter.qps > 0 else 1000.0
        most = max(1, int(qps * backlog))
        while conn.limiter.pods_waiting + conn.inflight.pods_waiting > most and not self._stopping:
            await asyncio.sleep(1.0 / qps)

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
                if isinstance(exc, ApiError):  # e.g. the API server restarting: expected, retried from backoff
                    log.warning(
                        "binding cycle failed on an API error; retried after backoff", pod=info.pod.key, error=str(exc)
                    )
                else:
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
            if self._lost:  # another replica schedules now: nothing of ours is worth waiting for
                self._loop_task.cancel()
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
        # The kopf PodGroup controller stops on _pg_stop (set above): let it close its watch streams itself. Cancelled
        # while a watch generator is suspended at a yield, kopf leaves that generator to the interpreter's
        # finalizer, which logs "error occurred during closing of asynchronous generator infinite_watch" at exit
        # (seen by make soak after a lost lease).
        pg = next((t for t in self._tasks if t.get_name() == "podgroup-status" and not t.done()), None)
        if pg is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):  # not wait_for: 3.11 can lose a cancel
                    await asyncio.shield(pg)
        if self.api is not None:
            # flush the Events while the lease is still ours; after a lost lease they would be fenced anyway:
            # dropped, so the exit is at once
            await self.api.close(timeout=0.0 if self._lost else min(5.0, max(self.opts.shutdown_timeout, 0.1)))
        releasing = self.elector is not None and not self._lost and self.elector.is_leader.is_set()
        if releasing:
            assert self.elector is not None
            # Nothing of ours may reach the API server after the release: close the fence, then let the writes
            # already sent finish (cancelling a task does not recall a request on the wire; make soak saw a PodGroup
            # status patch land 8 ms after a release), and only then cancel the tasks and give the lease up.
            self.elector.stop_writes()
            for c in (self.conn, self.events_conn):
                if c is not None and not await c.writes_settled(timeout=2.0):
                    log.warning("writes still in flight at the lease release", count=c.writes_in_flight)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if releasing:
            assert self.elector is not None
            await self.elector.release()
        await self.informers.stop()
        if self.health is not None:
            await self.health.stop()
        if self.events_conn is not None:
            await self.events_conn.close()
        if self.conn is not None:
            await self.conn.close()
        log.info("stopped", exit_code=self.exit_code)


def _loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's handler of errors nobody awaited. One is known and not ours: kopf's watch generator
    (``infinite_watch``), left suspended while it reconnects to an API server that is down when the process exits
    (after a lost lease, ``make soak`` saw it), swallows the GeneratorExit the interpreter's finalizer throws in and
    yields again; that is logged as a warning naming it. Everything else goes to the default handler."""
    gen = context.get("asyncgen")
    if gen is not None and getattr(gen, "__name__", "") == "infinite_watch":
        log.warning(
            "kopf's watch stream was still reconnecting at exit and did not close cleanly",
            error=repr(context.get("exception")),
        )
        return
    loop.default_exception_handler(context)


async def run_scheduler(opts: RunOptions) -> int:
    return await SchedulerApp(opts).run()
