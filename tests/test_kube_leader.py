"""Lease leader election against the fake API server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.kube.client import Fenced, KubeConnection, LiveAPI
from scheduler.kube.leader import LeaderElector
from tests.fake_apiserver import FakeAPIServer, eventually

FAST = {"lease_duration": 1.0, "renew_deadline": 0.5, "retry_period": 0.1}


@pytest.fixture
async def api(server: FakeAPIServer) -> AsyncIterator[LiveAPI]:
    conn = KubeConnection(server.url, qps=0)
    yield LiveAPI(conn)
    await conn.close()


async def cancel(*tasks: asyncio.Task[Any]) -> None:
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t


def lease(server: FakeAPIServer) -> dict[str, Any]:
    got = server.get("Lease", "kube-system", "dra-scheduler")
    assert got is not None
    return got


async def test_acquires_and_renews(server: FakeAPIServer, api: LiveAPI) -> None:
    started: list[str] = []
    el = LeaderElector(api, identity="a", on_started=lambda: started.append("a"), **FAST)
    task = asyncio.create_task(el.run())
    await asyncio.wait_for(el.is_leader.wait(), 5)
    assert started == ["a"]
    spec = lease(server)["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 1 and spec["leaseTransitions"] == 0
    first = spec["renewTime"]
    await eventually(lambda: lease(server)["spec"]["renewTime"] != first)
    assert lease(server)["spec"]["acquireTime"] == spec["acquireTime"]  # renewing keeps the acquire time
    assert not task.done()
    await cancel(task)
    await el.release()
    assert not lease(server)["spec"].get("holderIdentity")


async def test_a_second_candidate_waits_then_takes_over_a_released_lease(server: FakeAPIServer, api: LiveAPI) -> None:
    a = LeaderElector(api, identity="a", **FAST)
    b = LeaderElector(api, identity="b", **FAST)
    ta = asyncio.create_task(a.run())
    await asyncio.wait_for(a.is_leader.wait(), 5)
    tb = asyncio.create_task(b.run())
    await asyncio.sleep(0.5)
    assert not b.is_leader.is_set() and b.observed_holder == "a"
    await cancel(ta)
    await a.release()
    await asyncio.wait_for(b.is_leader.wait(), 5)
    spec = lease(server)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    await cancel(tb)


async def test_an_expired_lease_is_taken(server: FakeAPIServer, api: LiveAPI) -> None:
    server.add(
        "Lease",
        {
            "metadata": {"name": "dra-scheduler", "namespace": "kube-system"},
            "spec": {"holderIdentity": "dead", "leaseDurationSeconds": 1, "renewTime": "2026-01-01T00:00:00.000000Z"},
        },
    )
    el = LeaderElector(api, identity="a", **FAST)
    task = asyncio.create_task(el.run())
    await asyncio.wait_for(el.is_leader.wait(), 5)  # after one lease duration without a renewal
    assert lease(server)["spec"]["holderIdentity"] == "a"
    await cancel(task)


async def test_lost_callback_when_the_lease_is_taken_over(server: FakeAPIServer, api: LiveAPI) -> None:
    lost: list[bool] = []
    el = LeaderElector(api, identity="a", on_lost=lambda: lost.append(True), **FAST)
    task = asyncio.create_task(el.run())
    await asyncio.wait_for(el.is_leader.wait(), 5)
    stolen = lease(server)
    stolen["spec"]["holderIdentity"] = "intruder"
    server.modify("Lease", stolen)
    await asyncio.wait_for(task, 5)
    assert lost == [True] and el.lost.is_set() and not el.is_leader.is_set()


async def test_lost_callback_when_renewal_fails_past_the_deadline(server: FakeAPIServer, api: LiveAPI) -> None:
    lost: list[float] = []
    loop = asyncio.get_running_loop()
    el = LeaderElector(api, identity="a", on_lost=lambda: lost.append(loop.time()), **FAST)
    task = asyncio.create_task(el.run())
    await asyncio.wait_for(el.is_leader.wait(), 5)
    failing_since = loop.time()
    server.fail("GET", "/leases/dra-scheduler", 500, times=1000)
    await asyncio.wait_for(task, 5)
    assert lost and lost[0] - failing_since >= 0.4  # not before the renew deadline


def test_durations_must_be_ordered() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, lease_duration=10, renew_deadline=10, retry_period=2)  # type: ignore[arg-type]


async def test_a_frozen_leader_is_fenced_before_its_renew_loop_notices(server: FakeAPIServer, api: LiveAPI) -> None:
    """A leader stopped past its lease (SIGSTOP, a long pause) wakes up with its renew loop not yet run: its
    connection must refuse to send a write at once, by the monotonic clock (which runs while a process is
    stopped), while Lease requests still go out (that is how it finds out)."""
    now = [0.0]
    el = LeaderElector(api, identity="a", clock=lambda: now[0], **FAST)
    api.conn.write_fence = el.holds
    assert not el.holds()  # a standby never writes
    task = asyncio.create_task(el.run())
    await asyncio.wait_for(el.is_leader.wait(), 5)
    assert el.holds()
    server.add("Pod", {"metadata": {"name": "p", "namespace": "default"}, "spec": {}})
    await api.bind("default", "p", server.get("Pod", "default", "p")["metadata"]["uid"], "node-1")  # sent
    task.cancel()  # the renew loop stops (the process is frozen)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    now[0] += FAST["renew_deadline"]  # ... for as long as the renew deadline: the lease may be someone else's
    assert not el.holds()
    sent = server.count("POST", "binding")
    with pytest.raises(Fenced):
        await api.bind("default", "p", "uid", "node-2")
    with pytest.raises(Fenced):
        await api.patch("Pod", "default", "p", {"metadata": {"labels": {"a": "b"}}})
    assert server.count("POST", "binding") == sent  # nothing reached the API server
    assert await api.get("Lease", "kube-system", "dra-scheduler")  # reads are not fenced
    assert api.conn.requests[("create", "pods/binding", "fenced")] == 1


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def held(holder: str, rv: int, renew: str, duration: int = 6) -> dict[str, Any]:
    return {
        "metadata": {"name": "dra-scheduler", "namespace": "kube-system", "resourceVersion": str(rv)},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renew},
    }


def test_a_standby_fed_by_the_watch_tries_at_the_moment_the_lease_expires() -> None:
    """client-go polls every retry period and so takes a dead leader's lease up to two periods after expiry (the
    renewal seen one period late, the attempt on the next tick). A standby fed the Lease's watch events notes the
    renewal when it happens and wakes at expiry + EXPIRY_MARGIN; the expiry rule is unchanged (lease duration
    after the record last changed, on our clock)."""
    from scheduler.kube.leader import EXPIRY_MARGIN

    clock = Clock()
    el = LeaderElector(None, identity="b", lease_duration=6.0, renew_deadline=4.0, retry_period=2.0, clock=clock)  # type: ignore[arg-type]
    el.observe(held("a", 10, "t1"))
    assert el.observed_holder == "a"
    clock.t = 100.5  # far from expiry: the normal jittered tick
    assert 2.0 <= el._acquire_wait() <= 2.4
    clock.t = 105.0  # one second before expiry: wake at expiry, not a tick later
    assert el._acquire_wait() == pytest.approx(1.0 + EXPIRY_MARGIN)
    clock.t = 105.5
    el.observe(held("a", 11, "t2"))  # a renewal arrives: the lease is fresh again, by our clock
    assert 2.0 <= el._acquire_wait() <= 2.4
    clock.t = 111.4
    assert el._acquire_wait() == pytest.approx(0.1 + EXPIRY_MARGIN)
    clock.t = 120.0  # expired already: at once
    assert el._acquire_wait() == 0.0


def test_a_free_or_own_lease_waits_a_normal_tick() -> None:
    clock = Clock()
    el = LeaderElector(None, identity="b", lease_duration=6.0, renew_deadline=4.0, retry_period=2.0, clock=clock)  # type: ignore[arg-type]
    assert 2.0 <= el._acquire_wait() <= 2.4  # nothing seen yet
    el.observe(held("", 3, "t0"))
    clock.t = 105.9
    assert 2.0 <= el._acquire_wait() <= 2.4


def test_an_older_or_repeated_watch_event_does_not_refresh_the_lease() -> None:
    """A watch that replays an older state (a re-list answered from a lagging cache) must not make an expired
    lease look renewed: only a newer resourceVersion is a new observation."""
    clock = Clock()
    el = LeaderElector(None, identity="b", lease_duration=6.0, renew_deadline=4.0, retry_period=2.0, clock=clock)  # type: ignore[arg-type]
    el.observe(held("a", 10, "t1"))
    clock.t = 104.0
    el.observe(held("a", 9, "t0"))  # older
    el.observe(held("a", 10, "t1"))  # the same again
    el.observe({**held("a", 12, "t5"), "metadata": {"name": "other-lease", "resourceVersion": "12"}})  # not ours
    assert el._observed_time == 100.0
    el.observe(held("a", 12, "t2"))
    assert el._observed_time == 104.0
