"""Prometheus metrics (kube-scheduler names) and the /healthz, /readyz, /metrics endpoints."""

from __future__ import annotations

import aiohttp

from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.framework.interface import Code
from scheduler.kube.health import HealthServer
from scheduler.kube.metrics import SchedulerMetrics
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI


def test_names_and_labels() -> None:
    m = SchedulerMetrics()
    m.observe_attempt("scheduled", "dra-scheduler", 0.02)
    m.observe_attempt("unschedulable", "dra-scheduler", 0.01)
    m.for_profile("dra-scheduler").observe_extension_point("Filter", Code.SUCCESS, 0.001)
    m.for_profile("dra-scheduler").observe_plugin("DynamicResources", "PreFilter", Code.UNSCHEDULABLE, 0.0001)
    m.set_pending({"active": 3, "backoff": 1, "unschedulable": 2, "gated": 0})
    text = m.exposition().decode()
    for line in (
        'scheduler_schedule_attempts_total{profile="dra-scheduler",result="scheduled"} 1.0',
        'scheduler_schedule_attempts_total{profile="dra-scheduler",result="unschedulable"} 1.0',
        'scheduler_scheduling_attempt_duration_seconds_count{profile="dra-scheduler",result="scheduled"} 1.0',
        'scheduler_pending_pods{queue="active"} 3.0',
        'scheduler_pending_pods{queue="unschedulable"} 2.0',
        'scheduler_pending_pods{queue="gated"} 0.0',
        'scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",'
        'profile="dra-scheduler",status="Success"} 1.0',
        'scheduler_plugin_execution_duration_seconds_count{extension_point="PreFilter",plugin="DynamicResources",'
        'status="Unschedulable"} 1.0',
    ):
        assert line in text, line
    # kube-scheduler's buckets: attempts 1 ms x 2^k (15), extension points 0.1 ms x 2^k (12)
    assert 'scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",' in text
    assert 'scheduler_scheduling_attempt_duration_seconds_bucket{le="16.384",' in text
    assert 'extension_point="Filter",le="0.2048",' in text


def test_registries_are_isolated() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.observe_attempt("error", "p", 0.1)
    assert 'result="error"' in a.exposition().decode()
    assert 'result="error"' not in b.exposition().decode()


async def test_framework_reports_to_the_profile_metrics() -> None:
    m = SchedulerMetrics()
    sched = Scheduler(Cache(), InMemoryAPI(), default_config(), metrics=m)
    sched.reconfigure(default_config())  # frameworks rebuilt with per-profile metrics
    fw = sched.profiles["dra-scheduler"]
    fw.metrics.observe_extension_point("Score", Code.SUCCESS, 0.001)
    assert 'extension_point="Score",profile="dra-scheduler",status="Success"' in m.exposition().decode()


async def test_health_endpoints() -> None:
    m = SchedulerMetrics()
    ready = [False]
    scrapes = [0]

    def before() -> None:
        scrapes[0] += 1
        m.set_pending({"active": 7})

    hs = HealthServer(
        m,
        host="127.0.0.1",
        port=0,
        ready=lambda: (ready[0], "ok" if ready[0] else "caches not synced: pods"),
        before_scrape=before,
    )
    port = await hs.start()
    try:
        async with aiohttp.ClientSession() as s:
            base = f"http://127.0.0.1:{port}"
            async with s.get(base + "/healthz") as r:
                assert r.status == 200
            async with s.get(base + "/readyz") as r:
                assert r.status == 503 and "pods" in await r.text()
            ready[0] = True
            async with s.get(base + "/readyz") as r:
                assert r.status == 200
            async with s.get(base + "/metrics") as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                body = await r.text()
            assert 'scheduler_pending_pods{queue="active"} 7.0' in body
            assert "scheduler_schedule_attempts_total" in body or "scheduler_schedule_attempts" in body
            assert scrapes[0] == 1
    finally:
        await hs.stop()


async def test_plugin_durations_are_sampled_in_one_cycle_of_ten() -> None:
    """scheduler_plugin_execution_duration_seconds is observed in 1 scheduling cycle of 10 (upstream's
    pluginMetricsSamplePercent = 10, pkg/scheduler/schedule_one.go), the first one included; the extension
    point durations (framework_extension_point_duration_seconds) stay on every cycle."""
    import re

    from scheduler.loop.scheduler import PLUGIN_METRICS_SAMPLE
    from tests.test_binder import _drain, _prepare, _setup

    api, _cache, sched, clock = _setup(pods=25, nodes=4, gpus=8)
    m = SchedulerMetrics()
    sched.metrics = m
    sched.reconfigure(default_config())
    await _prepare(api)
    await _drain(sched, clock, rounds=60)
    assert sum(1 for p in api.list("Pod") if p["spec"].get("nodeName")) == 25
    text = m.exposition().decode()

    def count(metric: str, **labels: str) -> float:
        sel = "".join(f'(?=[^}}]*{k}="{v}")' for k, v in labels.items())
        found = re.findall(rf"^{metric}_count{{{sel}[^}}]*}} (\S+)$", text, re.M)
        assert len(found) == 1, (metric, labels, found)
        return float(found[0])

    assert PLUGIN_METRICS_SAMPLE == 10
    # cycles 0, 10 and 20 of 25
    assert count("scheduler_plugin_execution_duration_seconds", plugin="DynamicResources",
                 extension_point="PreFilter") == 3
    assert count("scheduler_framework_extension_point_duration_seconds", extension_point="PreFilter") == 25
