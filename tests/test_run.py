"""``dra-scheduler run`` in-process against the fake API server: sync, readiness, scheduling with DRA,
metrics, configuration reload (valid / invalid), leader election, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
import yaml

from scheduler.cli import main as cli_main
from scheduler.kube.client import KubeConnection
from scheduler.kube.run import RunOptions, SchedulerApp
from tests.fake_apiserver import FakeAPIServer
from tests.fake_apiserver import eventually as poll

INFORMER = {"backoff_initial": 0.02, "backoff_max": 0.1, "watch_timeout": (30.0, 30.0)}
DRIVER = "gpu.example.com"


async def eventually(cond: Callable[[], Any], timeout: float = 10.0) -> None:
    await poll(cond, timeout, 0.02)


def cluster(server: FakeAPIServer, gpus: int = 2) -> None:
    server.add("Namespace", {"metadata": {"name": "default"}})
    server.add(
        "Node",
        {
            "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        },
    )
    server.add(
        "DeviceClass",
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
    )
    server.add(
        "ResourceSlice",
        {
            "metadata": {"name": "node-1-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "node-1",
                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(gpus)],
            },
        },
    )


def claim_and_pod(server: FakeAPIServer, name: str) -> None:
    req = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}
    server.add("ResourceClaim", {"metadata": {"name": f"{name}-gpu"}, "spec": {"devices": {"requests": [req]}}})
    server.add(
        "Pod",
        {
            "metadata": {"name": name},
            "spec": {
                "schedulerName": "dra-scheduler",
                "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
            },
            "status": {"phase": "Pending"},
        },
    )


def options(**kw: Any) -> RunOptions:
    base: dict[str, Any] = {
        "metrics_port": 0,
        "metrics_host": "127.0.0.1",
        "install_signal_handlers": False,
        "informer_options": INFORMER,
        "shutdown_timeout": 5.0,
        "lease_duration": 1.0,
        "renew_deadline": 0.5,
        "retry_period": 0.1,
    }
    base.update(kw)
    return RunOptions(**base)


@contextlib.asynccontextmanager
async def running(server: FakeAPIServer, **kw: Any) -> AsyncIterator[tuple[SchedulerApp, asyncio.Task[int]]]:
    app = SchedulerApp(options(**kw), KubeConnection(server.url, qps=0))
    task = asyncio.create_task(app.run())
    try:
        yield app, task
    finally:
        app.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}{path}") as r:
        return r.status, await r.text()


def bound(server: FakeAPIServer, name: str) -> str:
    p = server.get("Pod", "default", name)
    return "" if p is None else str((p.get("spec") or {}).get("nodeName") or "")


async def test_schedules_a_dra_pod_end_to_end(server: FakeAPIServer) -> None:
    cluster(server)
    claim_and_pod(server, "p1")
    async with running(server) as (app, task):
        await eventually(lambda: bound(server, "p1") == "node-1")
        c = server.get("ResourceClaim", "default", "p1-gpu")
        assert c is not None
        assert "resource.kubernetes.io/delete-protection" in c["metadata"]["finalizers"]
        [result] = c["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == DRIVER and result["pool"] == "node-1"
        pod = server.get("Pod", "default", "p1")
        assert pod is not None
        assert c["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": pod["metadata"]["uid"]}]
        # write order: finalizer (PUT claim), allocation (PUT claim/status), then the binding
        writes = [(m, p) for m, p, _, _ in server.requests if m in ("PUT", "POST") and "/events" not in p]
        assert [p.rsplit("/", 2)[-2:] for _, p in writes] == [
            ["resourceclaims", "p1-gpu"],
            ["p1-gpu", "status"],
            ["p1", "binding"],
        ]
        await eventually(lambda: any(e["reason"] == "Scheduled" for e in server.list("Event")))
        status, text = await get(app.opts.metrics_port, "/metrics")
        assert status == 200
        assert 'scheduler_schedule_attempts_total{profile="dra-scheduler",result="scheduled"} 1.0' in text
        assert "scheduler_framework_extension_point_duration_seconds_count" in text
        assert 'profile="dra-scheduler"' in text
        # a second pod too: devices are not handed out twice
        claim_and_pod(server, "p2")
        await eventually(lambda: bound(server, "p2") == "node-1")
        c2 = server.get("ResourceClaim", "default", "p2-gpu")
        assert c2 is not None
        assert c2["status"]["allocation"]["devices"]["results"][0]["device"] != result["device"]
        # a third one does not fit: PodScheduled=False, a FailedScheduling event
        claim_and_pod(server, "p3")
        await eventually(lambda: any(e["reason"] == "FailedScheduling" for e in server.list("Event")))
        p3 = server.get("Pod", "default", "p3")
        assert p3 is not None and not bound(server, "p3")
        [cond] = [c for c in p3["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
        app.stop()
        assert await asyncio.wait_for(task, 10) == 0


async def test_readyz_only_after_sync(server: FakeAPIServer) -> None:
    cluster(server)
    server.fail("GET", "/apis/resource.k8s.io/v1/resourceslices", 500, times=6)  # two failed list calls
    async with running(server) as (app, _task):
        await asyncio.wait_for(app.started.wait(), 5)
        port = app.opts.metrics_port
        status, text = await get(port, "/readyz")
        assert status == 503 and "resourceslices" in text
        assert (await get(port, "/healthz"))[0] == 200
        await eventually(lambda: app.ready()[0])
        assert (await get(port, "/readyz"))[0] == 200


def config_map(text: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "dra-scheduler-config", "namespace": "kube-system"},
        "data": {"scheduler-config.yaml": text},
    }


CONFIG_V1 = yaml.safe_dump(
    {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "podMaxBackoffSeconds": 20}
)
CONFIG_V2 = yaml.safe_dump(
    {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "podMaxBackoffSeconds": 30}
)
CONFIG_BAD = yaml.safe_dump(
    {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "bogusField": 1,
        "profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}],
    }
)


async def test_config_map_reload_valid_and_invalid(server: FakeAPIServer) -> None:
    cluster(server)
    server.add("ConfigMap", config_map(CONFIG_V1))
    async with running(server, config_map="kube-system/dra-scheduler-config") as (app, _task):
        await eventually(lambda: app.ready()[0])
        sched = app.sched
        assert sched is not None and sched.config.pod_max_backoff_seconds == 20
        fw_before = sched.profiles["dra-scheduler"]
        # invalid: rejected, old config kept, an ERROR log and a Warning event naming every error path
        cm = server.get("ConfigMap", "kube-system", "dra-scheduler-config")
        assert cm is not None
        cm["data"]["scheduler-config.yaml"] = CONFIG_BAD
        server.modify("ConfigMap", cm)
        await eventually(lambda: any(e["reason"] == "InvalidSchedulerConfiguration" for e in server.list("Event")))
        [ev] = [e for e in server.list("Event") if e["reason"] == "InvalidSchedulerConfiguration"]
        assert ev["type"] == "Warning" and ev["involvedObject"]["kind"] == "ConfigMap"
        assert ev["involvedObject"]["name"] == "dra-scheduler-config" and ev["metadata"]["namespace"] == "kube-system"
        assert "bogusField" in ev["message"] and "Nope" in ev["message"]
        assert sched.config.pod_max_backoff_seconds == 20 and sched.profiles["dra-scheduler"] is fw_before
        # valid: applied without a restart; the queue and the cache are the same objects
        queue, cache = sched.queue, sched.cache
        cm = server.get("ConfigMap", "kube-system", "dra-scheduler-config")
        assert cm is not None
        cm["data"]["scheduler-config.yaml"] = CONFIG_V2
        server.modify("ConfigMap", cm)
        await eventually(lambda: sched.config.pod_max_backoff_seconds == 30)
        assert sched.profiles["dra-scheduler"] is not fw_before
        assert sched.queue is queue and sched.cache is cache
        text = (await get(app.opts.metrics_port, "/metrics"))[1]
        assert 'dra_scheduler_config_reloads_total{result="rejected"} 1.0' in text
        assert 'dra_scheduler_config_reloads_total{result="applied"} 1.0' in text
        # and it still schedules
        claim_and_pod(server, "after-reload")
        await eventually(lambda: bound(server, "after-reload") == "node-1")


async def test_invalid_initial_config_exits_1(server: FakeAPIServer) -> None:
    server.add("ConfigMap", config_map(CONFIG_BAD))
    app = SchedulerApp(options(config_map="kube-system/dra-scheduler-config"), KubeConnection(server.url, qps=0))
    assert await asyncio.wait_for(app.run(), 10) == 1
    await eventually(lambda: any(e["reason"] == "InvalidSchedulerConfiguration" for e in server.list("Event")))


async def test_config_file_reload(server: FakeAPIServer, tmp_path: Any) -> None:
    cluster(server)
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG_V1)
    async with running(server, config=str(path), config_poll_interval=0.05) as (app, _task):
        await eventually(lambda: app.sched is not None)
        sched = app.sched
        assert sched is not None and sched.config.pod_max_backoff_seconds == 20
        path.write_text(CONFIG_BAD)
        await asyncio.sleep(0.3)
        assert sched.config.pod_max_backoff_seconds == 20
        path.write_text(CONFIG_V2)
        await eventually(lambda: sched.config.pod_max_backoff_seconds == 30)


async def test_leader_election_gates_scheduling_and_loss_exits_1(server: FakeAPIServer) -> None:
    cluster(server)
    claim_and_pod(server, "p1")
    async with running(server, leader_elect=True, identity="one") as (one, task_one):
        await asyncio.wait_for(one.scheduling.wait(), 10)
        await eventually(lambda: bound(server, "p1") == "node-1")
        lease = server.get("Lease", "kube-system", "dra-scheduler")
        assert lease is not None and lease["spec"]["holderIdentity"] == "one"
        async with running(server, leader_elect=True, identity="two") as (two, _task_two):
            await eventually(lambda: two.ready()[0])
            assert (await get(two.opts.metrics_port, "/readyz"))[0] == 200  # ready while standing by
            await asyncio.sleep(0.3)
            assert not two.scheduling.is_set()
            # someone takes the lease over: "one" must stop at once with a non-zero code
            lease = server.get("Lease", "kube-system", "dra-scheduler")
            assert lease is not None
            lease["spec"]["holderIdentity"] = "intruder"
            lease["spec"]["leaseDurationSeconds"] = 3600
            server.modify("Lease", lease)
            assert await asyncio.wait_for(task_one, 10) == 1
            assert not two.scheduling.is_set()


async def test_standby_takes_over_after_graceful_stop(server: FakeAPIServer) -> None:
    cluster(server)
    async with running(server, leader_elect=True, identity="one") as (one, task_one):
        await asyncio.wait_for(one.scheduling.wait(), 10)
        async with running(server, leader_elect=True, identity="two") as (two, _task_two):
            await eventually(lambda: two.ready()[0])
            one.stop()
            assert await asyncio.wait_for(task_one, 10) == 0  # graceful: releases the lease
            await asyncio.wait_for(two.scheduling.wait(), 5)
            claim_and_pod(server, "p1")
            await eventually(lambda: bound(server, "p1") == "node-1")


async def test_podgroup_informer_only_where_served(server: FakeAPIServer) -> None:
    async with running(server) as (app, _task):
        await eventually(lambda: app.ready()[0])
        names = {inf.name for inf in app.informers.informers}
        assert "podgroups.scheduling.x-k8s.io" in names and "podgroups.scheduling.k8s.io" not in names
    s = FakeAPIServer(served=[r for r in FakeAPIServer().served if r[2] != "podgroups"])
    await s.start()
    try:
        async with running(s) as (app, _task):
            await eventually(lambda: app.ready()[0])
            assert not any("podgroups" in inf.name for inf in app.informers.informers)
    finally:
        await s.stop()


def test_cli_run_fails_cleanly_without_a_cluster(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: None)  # keep pytest's log capture
    missing = tmp_path / "nope"
    assert cli_main(["run", "--kubeconfig", str(missing), "--metrics-port", "0"]) == 1
    assert cli_main(["run", "--config", "a", "--config-map", "b/c"]) == 2


async def test_a_binding_cycle_error_is_retried(server: FakeAPIServer) -> None:
    """An API error the plugins do not expect (403 on the claim write) must not leave the pod in flight."""
    cluster(server)
    server.fail("PUT", "/resourceclaims/p1-gpu", 403)
    claim_and_pod(server, "p1")
    async with running(server) as (app, _task):
        await eventually(lambda: bound(server, "p1") == "node-1")
        text = (await get(app.opts.metrics_port, "/metrics"))[1]
        assert 'scheduler_schedule_attempts_total{profile="dra-scheduler",result="error"} 1.0' in text
        assert 'scheduler_schedule_attempts_total{profile="dra-scheduler",result="scheduled"} 1.0' in text


async def test_a_standby_takes_over_with_warm_caches_without_listing_again(server: FakeAPIServer) -> None:
    """kube-scheduler's standby keeps its informers watching and starts scheduling from them when it wins the
    lease; so does ours now (it re-listed every informer on winning: seconds at 10,000 pods)."""

    def lists() -> int:
        return sum(1 for m, p, q, _ in server.requests if m == "GET" and p.endswith("/pods") and "watch" not in q)

    cluster(server)
    async with running(server, leader_elect=True, identity="one") as (one, task_one):
        await asyncio.wait_for(one.scheduling.wait(), 10)
        async with running(server, leader_elect=True, identity="two") as (two, _task_two):
            await eventually(lambda: two.ready()[0])
            before = lists()
            one.stop()
            assert await asyncio.wait_for(task_one, 10) == 0
            await asyncio.wait_for(two.scheduling.wait(), 5)
            claim_and_pod(server, "p1")  # seen by the standby's watch, scheduled by the new leader
            await eventually(lambda: bound(server, "p1") == "node-1")
            assert lists() == before


def test_memory_report_names_the_largest_allocation_sites_and_what_grew() -> None:
    """SIGUSR2 (``SchedulerApp.memory_report``): with allocations traced, the largest sites and, from the second
    report on, what grew since the previous one; without tracing, live objects by type and what grew, pymalloc's
    arenas and the RSS before and after glibc's malloc_trim (scheduler/kube/memory.py), and how to turn tracing on."""
    import io
    import json
    import logging
    import tracemalloc

    import structlog

    from scheduler.config.logging import configure_logging

    saved, root = structlog.get_config(), logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    configure_logging(level="info", fmt="json", stream=out)
    try:
        app = SchedulerApp(options())
        app.memory_report()

        class Hoarded:
            pass

        kept = [Hoarded() for _ in range(3000)]
        app.memory_report()
        assert "PYTHONTRACEMALLOC=1" in out.getvalue()
        untraced = [json.loads(line) for line in out.getvalue().splitlines() if '"memory report"' in line]
        assert len(untraced) == 2 and untraced[0]["grown_since_last_report"] == []
        assert (
            untraced[1]["grown_since_last_report"][0]
            == "test_memory_report_names_the_largest_allocation_sites_and_what_grew.<locals>.Hoarded +3000"
            and len(kept) == 3000
        )
        assert untraced[1]["rss_kib"] > 0 and untraced[1]["pymalloc"]["arenas_current"] > 0
        assert untraced[1]["pymalloc"]["used_bytes"] > 0 and untraced[1]["gc_objects"] > 3000
        out.seek(0)
        out.truncate()
        tracemalloc.start(1)
        try:
            app.memory_report()
            hoard = [bytearray(1000) for _ in range(2000)]  # ~2 MB from one line of this file
            app.memory_report()
        finally:
            tracemalloc.stop()
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)
    reports = [json.loads(line) for line in out.getvalue().splitlines() if '"memory report"' in line]
    assert len(reports) == 2 and reports[0]["grown_since_last_report"] == []
    grown = reports[1]["grown_since_last_report"]
    assert grown and "test_run.py" in grown[0] and len(hoard) == 2000


async def test_a_standby_is_fenced_from_its_first_request(server: FakeAPIServer) -> None:
    """With --leader-elect nothing is written before the lease is held: the fence is on the connection from the
    start (the informers' first events reach handlers that write, such as a gang's PodGroup conditions, before the
    elector exists; make soak saw a restarted replica patch PodGroup status while the other held the Lease)."""
    cluster(server)
    async with running(server, leader_elect=True, identity="one") as (one, _task_one):
        await asyncio.wait_for(one.scheduling.wait(), 10)
        async with running(server, leader_elect=True, identity="two") as (two, _task_two):
            await eventually(lambda: two.conn is not None and two.conn.write_fence is not None)
            assert two.conn is not None and two.conn.write_fence is not None
            assert not two.conn.write_fence()
            await eventually(lambda: two.ready()[0])
            assert two.sched is not None and not two.sched.writes_allowed()
            assert two.events_conn is not None and two.events_conn.write_fence is not None
            assert not two.events_conn.write_fence()
            assert one.conn is not None and one.conn.write_fence is not None and one.conn.write_fence()
            assert one.sched is not None and one.sched.writes_allowed()


def test_kopfs_unclosed_watch_stream_at_exit_is_a_warning_not_a_traceback() -> None:
    """run's loop exception handler: kopf's ``infinite_watch`` generator, finalised at exit while it reconnects,
    is reported as one warning; any other unhandled error still reaches asyncio's default handler."""
    from scheduler.kube import run as run_module

    async def infinite_watch() -> Any:
        yield 1

    async def other() -> Any:
        yield 1

    seen: list[dict[str, Any]] = []

    class Loop:
        def default_exception_handler(self, context: dict[str, Any]) -> None:
            seen.append(context)

    loop: Any = Loop()
    err = RuntimeError("generator didn't stop after athrow()")
    run_module._loop_exception(loop, {"message": "closing", "exception": err, "asyncgen": infinite_watch()})
    assert seen == []
    ctx = {"message": "closing", "exception": err, "asyncgen": other()}
    run_module._loop_exception(loop, ctx)
    assert seen == [ctx]


async def test_a_graceful_stop_releases_the_lease_after_its_last_write(server: FakeAPIServer) -> None:
    """Giving the lease up tells a standby it may write at once, so no write of the old leader may reach the API
    server after the release. make soak saw a PodGroup status patch land 8 ms after a release: the task that sent
    it (the status controller's) was cancelled at shutdown, but a request already on the wire is still acted on.
    Now the fence is closed first, the writes in flight are waited for (KubeConnection.writes_settled), and only
    then are the tasks cancelled and the lease released."""
    cluster(server)
    server.add("Pod", {"metadata": {"name": "p1"}, "spec": {"schedulerName": "other"}, "status": {"phase": "Pending"}})
    server.delays[("PATCH", "/pods/p1/status")] = 1.0  # a slow status write
    async with running(server, leader_elect=True, identity="one") as (one, task_one):
        await asyncio.wait_for(one.scheduling.wait(), 10)
        assert one.api is not None
        patch = {"status": {"conditions": [{"type": "Example", "status": "True"}]}}
        one._tasks.append(asyncio.create_task(one.api.patch("Pod", "default", "p1", patch, subresource="status")))
        await eventually(lambda: any(m == "PATCH" and p.endswith("/pods/p1/status") for m, p, _, _ in server.requests))
        one.stop()
        assert await asyncio.wait_for(task_one, 10) == 0
        await asyncio.sleep(1.2)  # the server has acted on everything it received
    handled = server.handled
    release = max(i for i, (m, p) in enumerate(handled) if m == "PUT" and "/leases/" in p)
    assert server.get("Lease", "kube-system", "dra-scheduler")["spec"].get("holderIdentity") is None  # type: ignore[index]
    late = [handled[i] for i, (m, p) in enumerate(handled) if i > release and m != "GET" and "/leases/" not in p]
    assert ("PATCH", "/api/v1/namespaces/default/pods/p1/status") in handled[:release] and late == []


async def test_the_running_process_trims_the_c_heap_periodically(
    server: FakeAPIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memory_trim_interval``: glibc's malloc_trim every so often (SchedulerApp._trim_loop), so pages of freed
    chunks inside the C library's heaps go back to the kernel (issue 24: a soak leader's RSS climbed while its live
    objects were flat); ``<= 0`` turns it off."""
    import gc

    from scheduler.kube import memory

    calls: list[float] = []
    monkeypatch.setattr(memory, "malloc_trim", lambda: calls.append(time.monotonic()) or True)
    # the test process's heap is not frozen: a real full pass would stretch the next interval (200x its time)
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    cluster(server)
    async with running(server, memory_trim_interval=0.05) as (app, _task):
        await asyncio.wait_for(app.scheduling.wait(), 10)
        await eventually(lambda: len(calls) >= 3)
    calls.clear()
    async with running(server, memory_trim_interval=0) as (app, _task):
        await asyncio.wait_for(app.scheduling.wait(), 10)
        await asyncio.sleep(0.2)
    assert calls == []


class _Cyclic:
    """An object that refers to itself: garbage only a cyclic collection frees."""

    def __init__(self) -> None:
        self.me = self


async def test_the_running_process_frees_old_cyclic_garbage_periodically(server: FakeAPIServer) -> None:
    """Cyclic garbage in the oldest generation (objects that lived through young collections, then were dropped
    inside a reference cycle: a pod cached for minutes, kopf's Body/Spec views of a PodGroup) is freed only by a
    full collection; the live process's high thresholds and frozen start-up heap make those rare, and a soak leader
    held up to 44,000 such objects between two reports (issue 24). The upkeep loop (SchedulerApp._trim_loop)
    runs a full collection every ``memory_trim_interval`` s. The automatic collector is held off here so only the
    upkeep can free the object."""
    import gc
    import weakref

    cluster(server)
    saved = gc.get_threshold()
    try:
        for interval, freed_expected in ((0, False), (0.05, True)):
            async with running(server, memory_trim_interval=interval) as (app, _task):
                await asyncio.wait_for(app.scheduling.wait(), 10)
                gc.set_threshold(1_000_000_000, 1_000_000, 1_000_000)  # after start-up: nothing automatic
                obj = _Cyclic()
                gc.collect(1)
                gc.collect(1)  # promoted to the oldest generation, as a long-lived object would be
                gone = weakref.ref(obj)
                del obj
                if freed_expected:
                    await eventually(lambda ref=gone: ref() is None)
                else:
                    await asyncio.sleep(0.3)
                    assert gone() is not None, "freed without the upkeep: the test proves nothing"
                gc.set_threshold(*saved)
            gc.collect()
    finally:
        gc.set_threshold(*saved)
