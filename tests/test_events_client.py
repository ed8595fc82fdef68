"""Events on their own client and limiter, aggregated into series, bounded, flushed at shutdown
(scheduler/kube/events.py; issue #16)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.kube.client import KubeConnection, LiveAPI
from scheduler.kube.events import EventRecorder
from scheduler.kube.flowcontrol import TokenBucket
from scheduler.kube.metrics import SchedulerMetrics
from tests.fake_apiserver import FakeAPIServer, eventually


def pod(name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"schedulerName": "dra-scheduler"}}


@pytest.fixture
async def api(server: FakeAPIServer) -> AsyncIterator[LiveAPI]:
    conn = KubeConnection(server.url, qps=0)
    a = LiveAPI(conn)
    yield a
    await a.close()
    await conn.close()


def _saturated(conn: KubeConnection) -> None:
    """A limiter with no token left and (practically) none to come."""
    conn.limiter = TokenBucket(qps=1e-9, burst=1)
    conn.limiter._tokens = 0.0


async def test_events_have_their_own_connection_and_limiter(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=200, burst=400)
    api = LiveAPI(conn)
    try:
        assert api.events_conn is not conn and api.events_conn.limiter is not conn.limiter
        assert (api.events_conn.limiter.qps, api.events_conn.limiter.burst) == (200, 400)  # upstream: same QPS/burst
        p = server.add("Pod", pod("a"))
        await api.event(p, "Normal", "Scheduled", "Successfully assigned default/a to n1", "Binding")
        await api.flush_events()
        assert [e["reason"] for e in server.list("Event")] == ["Scheduled"]
        assert ("create", "events", "201") in api.events_conn.requests
        assert not any(r == "events" for _, r, _ in conn.requests)  # nothing of it on the scheduling client
    finally:
        await api.close()
        await conn.close()


async def test_a_saturated_scheduling_limiter_does_not_delay_an_event(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=200, burst=400)
    api = LiveAPI(conn)
    try:
        _saturated(conn)
        p = server.add("Pod", pod("a"))
        blocked = asyncio.create_task(api.get("Pod", "default", "a"))  # waits for a token that does not come
        await api.event(p, "Warning", "FailedScheduling", "0/1 nodes are available", "Scheduling")
        await eventually(lambda: server.list("Event"))
        assert not blocked.done() and conn.limiter.waiting == 1
        blocked.cancel()
    finally:
        await api.close()
        await conn.close()


async def test_a_saturated_events_limiter_does_not_delay_a_scheduling_write(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=200, burst=400)
    api = LiveAPI(conn)
    try:
        _saturated(api.events_conn)
        p = server.add("Pod", pod("a"))
        for i in range(20):
            await api.event(p, "Warning", "FailedScheduling", f"attempt {i}", "Scheduling")
        await eventually(lambda: api.events_conn.limiter.waiting > 0)
        await api.bind("default", "a", p["metadata"]["uid"], "n1")  # goes through at once
        assert server.get("Pod", "default", "a")["spec"]["nodeName"] == "n1"  # type: ignore[index]
        assert not server.list("Event")
    finally:
        await api.close(timeout=0.01)
        await conn.close()


async def test_identical_events_are_one_event_with_a_count(server: FakeAPIServer, api: LiveAPI) -> None:
    p = server.add("Pod", pod("a"))
    for _ in range(5):  # recorded faster than posted: folded into the one queued write
        await api.event(p, "Warning", "FailedScheduling", "0/2 nodes are available", "Scheduling")
    await api.flush_events()
    [ev] = server.list("Event")
    assert ev["count"] == 5 and ev["series"]["count"] == 5
    assert (server.count("POST", "/events"), server.count("PATCH", "/events")) == (1, 0)
    await api.event(p, "Warning", "FailedScheduling", "0/2 nodes are available", "Scheduling")
    await api.event(p, "Warning", "FailedScheduling", "0/2 nodes are available", "Scheduling")
    await api.flush_events()
    [ev] = server.list("Event")
    assert ev["count"] == 7 and ev["series"]["count"] == 7 and ev["series"]["lastObservedTime"]
    assert (server.count("POST", "/events"), server.count("PATCH", "/events")) == (1, 1)  # a series update
    assert api.recorder.counts["posted"] == 1 and api.recorder.counts["updated"] == 1
    assert api.recorder.counts["aggregated"] == 6


async def test_events_that_differ_are_not_merged(server: FakeAPIServer, api: LiveAPI) -> None:
    a, b = server.add("Pod", pod("a")), server.add("Pod", pod("b"))
    await api.event(a, "Warning", "FailedScheduling", "0/2 nodes are available: 2 Insufficient cpu", "Scheduling")
    await api.event(a, "Warning", "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu", "Scheduling")
    await api.event(b, "Warning", "FailedScheduling", "0/2 nodes are available: 2 Insufficient cpu", "Scheduling")
    await api.event(a, "Normal", "Scheduled", "0/2 nodes are available: 2 Insufficient cpu", "Binding")
    await api.flush_events()
    events = server.list("Event")
    assert len(events) == 4 and all(e.get("count", 1) == 1 for e in events)
    assert api.recorder.counts["aggregated"] == 0


async def test_a_running_series_is_written_at_the_sweep_and_a_finished_one_starts_anew(server: FakeAPIServer) -> None:
    now = [0.0]
    conn = KubeConnection(server.url, qps=0)
    rec = EventRecorder(conn, clock=lambda: now[0], series_interval=30, finish_after=360)
    api = LiveAPI(conn, events_conn=conn)
    api.recorder = rec
    try:
        p = server.add("Pod", pod("a"))

        async def occur() -> None:
            await api.event(p, "Warning", "FailedScheduling", "no fit", "Scheduling")
            await asyncio.sleep(0)

        await occur()
        await eventually(lambda: rec.counts["posted"] == 1 and rec.queued == 0)
        await occur()  # the second occurrence starts the series at once
        await eventually(lambda: rec.counts["updated"] == 1)
        for _ in range(3):
            await occur()  # counted in memory only
        await asyncio.sleep(0.05)
        assert rec.counts["updated"] == 1 and server.list("Event")[0]["count"] == 2
        now[0] = 31.0
        rec.sweep()
        await eventually(lambda: rec.counts["updated"] == 2)
        assert server.list("Event")[0]["count"] == 5
        now[0] = 31.0 + 361
        rec.sweep()  # not seen for 6 minutes: finished and forgotten
        await occur()
        await eventually(lambda: rec.counts["posted"] == 2)
        assert sorted(e["count"] for e in server.list("Event")) == [1, 5]
    finally:
        await rec.close()
        await conn.close()


async def test_close_posts_what_is_queued(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=0)
    api = LiveAPI(conn)
    p = server.add("Pod", pod("a"))
    for i in range(30):
        await api.event(p, "Normal", "Scheduled", f"event {i}", "Binding")
    assert api.recorder.queued > 0  # nothing awaited yet: all queued
    await api.close()  # as SchedulerApp's shutdown
    assert len(server.list("Event")) == 30
    assert api.recorder.counts["posted"] == 30 and api.recorder.counts["dropped"] == 0
    await conn.close()


async def test_close_writes_the_count_of_a_running_series(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=0)
    api = LiveAPI(conn)
    p = server.add("Pod", pod("a"))
    await api.event(p, "Warning", "FailedScheduling", "no fit", "Scheduling")
    await api.event(p, "Warning", "FailedScheduling", "no fit", "Scheduling")
    await api.flush_events()
    for _ in range(3):
        await api.event(p, "Warning", "FailedScheduling", "no fit", "Scheduling")  # waits for the sweep
    await api.close()
    assert server.list("Event")[0]["count"] == 5
    await conn.close()


async def test_a_full_queue_drops_events_and_the_metric_counts_them(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=0)
    api = LiveAPI(conn, event_queue_size=3)
    m = SchedulerMetrics()
    m.watch_api(lambda: [], lambda: dict(api.recorder.counts))
    try:
        p = server.add("Pod", pod("a"))
        for i in range(8):  # nothing awaited in between: the writers have not taken any yet
            await api.event(p, "Normal", "Scheduled", f"event {i}", "Binding")
        assert api.events_dropped == 5
        await api.flush_events()
        assert len(server.list("Event")) == 3
        text = m.exposition().decode()
        assert 'dra_scheduler_events_total{result="dropped"} 5.0' in text
        assert 'dra_scheduler_events_total{result="posted"} 3.0' in text
    finally:
        await api.close()
        await conn.close()


async def test_events_unsent_at_shutdown_count_as_dropped(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=0)
    api = LiveAPI(conn)
    _saturated(api.events_conn)
    p = server.add("Pod", pod("a"))
    for i in range(4):
        await api.event(p, "Normal", "Scheduled", f"event {i}", "Binding")
    await api.close(timeout=0.05)
    assert api.events_dropped == 4 and not server.list("Event")
    await api.event(p, "Normal", "Scheduled", "after close", "Binding")  # dropped, never raises
    assert api.events_dropped == 5
    await conn.close()


async def test_a_series_whose_event_is_gone_is_posted_again(server: FakeAPIServer, api: LiveAPI) -> None:
    p = server.add("Pod", pod("a"))
    await api.event(p, "Warning", "FailedScheduling", "no fit", "Scheduling")
    await api.flush_events()
    [ev] = server.list("Event")
    server.remove("Event", "default", ev["metadata"]["name"], silent=True)  # e.g. its TTL ran out
    await api.event(p, "Warning", "FailedScheduling", "no fit", "Scheduling")
    await api.flush_events()
    [ev] = server.list("Event")  # upstream recordEvent: a 404 on the series patch creates the Event anew
    assert ev["count"] == 2 and ev["series"]["count"] == 2
    assert api.recorder.counts["posted"] == 2


async def test_events_give_way_while_scheduling_writes_queue(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=0)
    busy = [True]
    rec = EventRecorder(conn, yield_to=lambda: busy[0], max_defer=1e9)
    api = LiveAPI(conn, events_conn=conn)
    api.recorder = rec
    try:
        p = server.add("Pod", pod("a"))
        await api.event(p, "Normal", "Scheduled", "first", "Binding")
        for _ in range(20):
            await asyncio.sleep(0.001)
        assert not server.list("Event")  # the API server is busy with scheduling writes: the Event waits
        busy[0] = False
        await eventually(lambda: server.list("Event"))
        busy[0] = True
        await api.event(p, "Normal", "Scheduled", "second", "Binding")
        await rec.close()  # not at shutdown: flushed all the same
        assert sorted(e["message"] for e in server.list("Event")) == ["first", "second"]
    finally:
        await conn.close()


async def test_live_api_events_give_way_to_queued_scheduling_requests(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=0)
    api = LiveAPI(conn)
    try:
        assert api.recorder._yield_to is not None and not api.recorder._yield_to()
        conn.inflight._queue.waiting = 1  # a scheduling request waits for a place in flight
        assert api.recorder._yield_to()
        conn.inflight._queue.waiting = 0
    finally:
        await api.close()
        await conn.close()
