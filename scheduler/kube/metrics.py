"""Prometheus metrics under kube-scheduler's names and labels, so existing dashboards work.

All metrics live in one :class:`SchedulerMetrics` registry (not prometheus-client's global one), so that
tests and several schedulers in one process do not share counters. ``for_profile(name)`` gives the object
a profile's framework reports to (the framework ``Metrics`` protocol has no profile argument).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.utils import INF

from scheduler.framework.interface import Code

__all__ = ["CONTENT_TYPE_LATEST", "ProfileMetrics", "SchedulerMetrics"]

# framework status codes as kube-scheduler prints them (fwk.Code.String())
STATUS_LABELS: Mapping[int, str] = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}
QUEUES = ("active", "backoff", "unschedulable", "gated")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    return (*(start * factor**i for i in range(count)), INF)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods; "
            "'gated' is the number of pods blocked by a PreEnqueue plugin.",
            ["queue"],
            registry=r,
        )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=r,
        )
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=r,
        )
        self.config_reloads = Counter(
            "dra_scheduler_config_reloads",
            "Configuration changes seen, by the result (applied / rejected).",
            ["result"],
            registry=r,
        )
        self.informer_synced = Gauge(
            "dra_scheduler_informer_synced", "1 once the informer applied its first list.", ["resource"], registry=r
        )
        self._coexistence_metrics(r)
        for q in QUEUES:
            self.pending_pods.labels(queue=q).set(0)
        self._ep: dict[tuple[str, int, str], Histogram] = {}
        self._plugin: dict[tuple[str, str, int], Histogram] = {}
        self._api_collector: Collector | None = None

    # --- the framework Metrics protocol (profile-less: profile label "") -------------------------------------

    def observe_extension_point(self, point: str, status: Code, seconds: float, profile: str = "") -> None:
        key = (point, int(status), profile)
        h = self._ep.get(key)
        if h is None:
            h = self._ep[key] = self.extension_point_duration.labels(
                extension_point=point, status=STATUS_LABELS.get(int(status), str(status)), profile=profile
            )
        h.observe(seconds)

    def observe_plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        key = (plugin, point, int(status))
        h = self._plugin.get(key)
        if h is None:
            h = self._plugin[key] = self.plugin_execution_duration.labels(
                plugin=plugin, extension_point=point, status=STATUS_LABELS.get(int(status), str(status))
            )
        h.observe(seconds)

    def for_profile(self, profile: str) -> ProfileMetrics:
        return ProfileMetrics(self, profile)

    # --- the run loop ------------------------------------------------------------------------------------------

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """``result``: scheduled / unschedulable / error."""
        self.schedule_attempts.labels(result=result, profile=profile).inc()
        self.scheduling_attempt_duration.labels(result=result, profile=profile).observe(seconds)

    def set_pending(self, lengths: Mapping[str, int]) -> None:
        for q in QUEUES:
            self.pending_pods.labels(queue=q).set(lengths.get(q, 0))

    # --- running next to kube-scheduler (scheduler/cache/coexistence.py) -------------------------------------------

    def _coexistence_metrics(self, r: CollectorRegistry) -> None:
        self.double_allocated_devices = Gauge(
            "dra_scheduler_double_allocated_devices",
            "DRA devices currently allocated to two or more ResourceClaims that may not share them (another "
            "scheduler allocated the same device at the same time).",
            registry=r,
        )
        self.double_allocations = Counter(
            "dra_scheduler_double_allocations_detected",
            "Double allocations detected: a device and the set of claims holding it, each counted once.",
            registry=r,
        )

    def set_double_allocated(self, devices: int, new_conflicts: int) -> None:
        self.double_allocated_devices.set(devices)
        if new_conflicts:
            self.double_allocations.inc(new_conflicts)

    # --- the API clients (scheduler/kube/client.py, scheduler/kube/events.py) ----------------------------------

    def watch_api(
        self,
        requests: Callable[[], Iterable[tuple[str, str, str, str, int]]],
        events: Callable[[], Mapping[str, int]],
        throttled: Callable[[], Mapping[str, float]] | None = None,
    ) -> None:
        """Expose the live clients' counters, read at each scrape:

        * ``dra_scheduler_api_requests_total{client,verb,resource,code}`` from ``requests()``: (client, verb,
          resource, code, count) rows; ``client`` is ``scheduling`` (everything but Events) or ``events``;
          verb and resource as the API server names them (``create`` ``pods/binding``, ``update``
          ``resourceclaims/status``, ``watch`` ``pods``); ``code`` the HTTP status, ``error`` for no answer;
        * ``dra_scheduler_events_total{result}`` from ``events()``: posted / updated (a series count written)
          / aggregated (folded into an existing Event) / dropped / failed;
        * ``dra_scheduler_api_throttled_seconds_total{client}``: time requests waited for the client-side
          rate limiter."""
        if self._api_collector is not None:
            self.registry.unregister(self._api_collector)
        self._api_collector = _ApiCollector(requests, events, throttled)
        self.registry.register(self._api_collector)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class ProfileMetrics:
    """The framework ``Metrics`` of one profile (fills in the ``profile`` label)."""

    def __init__(self, parent: SchedulerMetrics, profile: str) -> None:
        self.parent = parent
        self.profile = profile

    def observe_extension_point(self, point: str, status: Code, seconds: float) -> None:
        self.parent.observe_extension_point(point, status, seconds, self.profile)

    def observe_plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        self.parent.observe_plugin(plugin, point, status, seconds)


class _ApiCollector(Collector):
    def __init__(
        self,
        requests: Callable[[], Iterable[tuple[str, str, str, str, int]]],
        events: Callable[[], Mapping[str, int]],
        throttled: Callable[[], Mapping[str, float]] | None,
    ) -> None:
        self._requests = requests
        self._events = events
        self._throttled = throttled

    def describe(self) -> Iterator[Metric]:
        return iter(())  # collected only at scrape time (the sources may not exist yet)

    def collect(self) -> Iterator[Metric]:
        req = CounterMetricFamily(
            "dra_scheduler_api_requests",
            "API requests sent (each try of a retried request), by client (scheduling / events), verb, resource "
            "and HTTP status ('error': no answer).",
            labels=["client", "verb", "resource", "code"],
        )
        for client, verb, resource, code, n in sorted(self._requests()):
            req.add_metric([client, verb, resource, code], n)
        yield req
        ev = CounterMetricFamily(
            "dra_scheduler_events",
            "Events recorded, by result: posted (created), updated (a series count written), aggregated (an "
            "occurrence folded into an existing Event), dropped (queue full or unsent at shutdown), failed.",
            labels=["result"],
        )
        for result, n in sorted(self._events().items()):
            ev.add_metric([result], n)
        yield ev
        if self._throttled is not None:
            th = CounterMetricFamily(
                "dra_scheduler_api_throttled_seconds",
                "Seconds API requests waited for the client-side rate limiter (--qps / --burst), by client.",
                labels=["client"],
            )
            for client, seconds in sorted(self._throttled().items()):
                th.add_metric([client], seconds)
            yield th
