"""``dra-scheduler run`` start-up against the fake API server: an unreachable API server gives up after
``--connect-timeout`` with a non-zero exit and says why, /readyz says what start-up waits for, a PodGroup
API installed after start-up is watched without a restart, leader-election settings from the
configuration file's ``leaderElection`` block (flags given explicitly win, as kube-scheduler's
``ApplyLeaderElectionTo``)."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli import main as cli_main
from scheduler.kube.client import KubeConnection, Unreachable
from scheduler.kube.run import SchedulerApp
from tests.fake_apiserver import FakeAPIServer
from tests.test_run import bound, claim_and_pod, cluster, eventually, get, options, running

X_PODGROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
UPSTREAM_PODGROUPS = ("scheduling.k8s.io", "v1beta1", "podgroups")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_health(app: SchedulerApp) -> int:
    await eventually(lambda: app.health is not None and app.opts.metrics_port != 0, 5)
    return app.opts.metrics_port


# --- the API server --------------------------------------------------------------------------------------------


async def test_unreachable_api_server_gives_up_after_the_bound() -> None:
    port = closed_port()
    app = SchedulerApp(options(connect_timeout=1.0), KubeConnection(f"http://127.0.0.1:{port}", qps=0))
    task = asyncio.create_task(app.run())
    health = await wait_health(app)
    await eventually(lambda: "attempt" in app.ready()[1], 5)
    status, body = await get(health, "/readyz")
    assert status == 503
    assert body.startswith(f"waiting for the API server at http://127.0.0.1:{port} (attempt ")
    started = time.monotonic()
    assert await asyncio.wait_for(task, 10) == 1
    assert time.monotonic() - started < 3
    assert app.exit_code == 1  # what the "stopped" log line reports (it said 0 before)
    assert app.fatal is not None
    assert app.fatal.startswith(f"the API server at http://127.0.0.1:{port} ")
    assert "was not reachable within 1s" in app.fatal and "last error:" in app.fatal


async def test_wait_reachable_backs_off_and_is_bounded() -> None:
    conn = KubeConnection(f"http://127.0.0.1:{closed_port()}", qps=0)
    seen: list[str] = []
    started = time.monotonic()
    try:
        with pytest.raises(Unreachable, match=r"not reachable within 0.6s \((\d+) attempts"):
            await conn.wait_reachable(0.6, on_wait=seen.append, initial_delay=0.05, max_delay=0.2)
    finally:
        await conn.close()
    assert 0.5 < time.monotonic() - started < 2.0
    # exponential: 0.05, 0.1, 0.2, 0.2, ... => a handful of attempts, not hundreds
    assert 3 <= len(seen) <= 10
    assert all(s.startswith("waiting for the API server at http://127.0.0.1:") for s in seen)


async def test_server_errors_on_version_are_waited_out(server: FakeAPIServer) -> None:
    cluster(server)
    server.fail("GET", "/version", 503, times=2)
    app = SchedulerApp(options(connect_timeout=20.0), KubeConnection(server.url, qps=0))
    task = asyncio.create_task(app.run())
    try:
        await eventually(lambda: app.ready()[0], 15)
        assert server.count("GET", "/version") == 3
    finally:
        app.stop()
        assert await asyncio.wait_for(task, 10) == 0


async def test_connect_timeout_zero_waits_for_ever(server: FakeAPIServer) -> None:
    server.fail("GET", "/version", 503, times=3)
    conn = KubeConnection(server.url, qps=0)
    try:
        await asyncio.wait_for(conn.wait_reachable(None, initial_delay=0.01), 5)
    finally:
        await conn.close()
    assert server.count("GET", "/version") == 4


async def test_rejected_credentials_fail_at_once(server: FakeAPIServer) -> None:
    server.fail("GET", "/version", 401)
    app = SchedulerApp(options(connect_timeout=30.0), KubeConnection(server.url, qps=0))
    assert await asyncio.wait_for(app.run(), 5) == 1
    assert app.fatal is not None and "rejected the credentials" in app.fatal and "401" in app.fatal


def test_cli_unreachable_server_exits_non_zero_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: None)
    port = closed_port()
    path = tmp_path / "kc"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c"}}],
                "current-context": "c",
            }
        )
    )
    code = cli_main(["run", "--kubeconfig", str(path), "--connect-timeout", "1s", "--metrics-port", "0"])
    assert code == 1
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("dra-scheduler run:")]
    assert f"the API server at http://127.0.0.1:{port} (kubeconfig {path}) was not reachable within 1s" in line


# --- readiness ---------------------------------------------------------------------------------------------------


async def test_readyz_names_the_informers_and_the_lease(server: FakeAPIServer) -> None:
    cluster(server)
    server.fail("GET", "/apis/resource.k8s.io/v1/deviceclasses", 500, times=6)
    async with running(server, leader_elect=True, identity="one") as (one, _t1):
        await asyncio.wait_for(one.started.wait(), 5)
        status, body = await get(one.opts.metrics_port, "/readyz")
        assert status == 503 and body.startswith("caches not synced: ") and "deviceclasses" in body
        await asyncio.wait_for(one.scheduling.wait(), 10)
        assert await get(one.opts.metrics_port, "/readyz") == (200, "ok\n")
        async with running(server, leader_elect=True, identity="two") as (two, _t2):
            await eventually(lambda: two.ready()[0] and "held by one" in two.ready()[1])
            status, body = await get(two.opts.metrics_port, "/readyz")
            assert status == 200
            assert body == "ok (standby: waiting for the lease kube-system/dra-scheduler, held by one)\n"


# --- discovery ------------------------------------------------------------------------------------------------------


def podgroup(name: str, api_version: str = "scheduling.x-k8s.io/v1alpha1") -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 2},
    }


async def test_podgroup_crd_installed_after_start_is_watched_without_restart() -> None:
    server = FakeAPIServer(served=[r for r in FakeAPIServer().served if r[2] != "podgroups"])
    await server.start()
    try:
        cluster(server)
        async with running(server, discovery_interval=0.1) as (app, _task):
            await eventually(lambda: app.ready()[0])
            assert not any("podgroups" in inf.name for inf in app.informers.informers)
            # the CRD is installed and a PodGroup created: no restart
            server.served.add(X_PODGROUPS)
            server.add("PodGroup", podgroup("g1"), rid=X_PODGROUPS)
            await eventually(lambda: "default/g1" in app.cache.podgroups())
            [inf] = [i for i in app.informers.informers if i.name == "podgroups.scheduling.x-k8s.io"]
            assert inf.synced.is_set()
            await eventually(lambda: app.ready()[0])
            text = (await get(app.opts.metrics_port, "/metrics"))[1]
            assert 'resource="podgroups.scheduling.x-k8s.io"} 1.0' in text
            # watched from then on: a later PodGroup arrives by the watch
            server.add("PodGroup", podgroup("g2"), rid=X_PODGROUPS)
            await eventually(lambda: "default/g2" in app.cache.podgroups())
            # the upstream API enabled later too (scheduling.k8s.io/v1beta1): one informer for it
            server.served.add(UPSTREAM_PODGROUPS)
            await eventually(lambda: any(i.name == "podgroups.scheduling.k8s.io" for i in app.informers.informers))
            await asyncio.sleep(0.3)
            names = [i.name for i in app.informers.informers]
            assert names.count("podgroups.scheduling.x-k8s.io") == 1
            assert names.count("podgroups.scheduling.k8s.io") == 1
            # and it still schedules
            claim_and_pod(server, "p1")
            await eventually(lambda: bound(server, "p1") == "node-1")
    finally:
        await server.stop()


async def test_discovery_round_is_idempotent(server: FakeAPIServer) -> None:
    cluster(server)
    async with running(server, discovery_interval=0) as (app, _task):
        await eventually(lambda: app.ready()[0])
        before = len(app.informers.informers)
        assert await app.discover_again() == []
        assert len(app.informers.informers) == before


# --- leader election from the configuration file -----------------------------------------------------------------


def config_file(tmp_path: Path, le: dict[str, Any]) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "leaderElection": le}
        )
    )
    return str(path)


FAST_LE = {"leaseDuration": "1s", "renewDeadline": "500ms", "retryPeriod": "100ms"}


async def test_leader_election_from_the_config_file(server: FakeAPIServer, tmp_path: Path) -> None:
    cluster(server)
    claim_and_pod(server, "p1")
    path = config_file(tmp_path, {"leaderElect": True, "resourceName": "from-file", **FAST_LE})
    async with running(server, config=path) as (app, _task):  # leader_elect False, but not given as a flag
        await asyncio.wait_for(app.scheduling.wait(), 10)
        assert app.elector is not None
        assert (app.elector.name, app.elector.lease_duration, app.elector.retry_period) == ("from-file", 1.0, 0.1)
        lease = server.get("Lease", "kube-system", "from-file")
        assert lease is not None and lease["spec"]["holderIdentity"] == app.elector.identity
        await eventually(lambda: bound(server, "p1") == "node-1")


async def test_flags_given_win_over_the_config_file(server: FakeAPIServer, tmp_path: Path) -> None:
    cluster(server)
    path = config_file(tmp_path, {"leaderElect": True, "resourceName": "from-file", **FAST_LE})
    async with running(
        server, config=path, leader_elect=False, lease_name="from-flag", explicit=frozenset({"lease_name"})
    ) as (app, _task):
        await asyncio.wait_for(app.scheduling.wait(), 10)
        assert app.elector is not None and app.elector.name == "from-flag"
        assert server.get("Lease", "kube-system", "from-file") is None
    async with running(server, config=path, leader_elect=False, explicit=frozenset({"leader_elect"})) as (app, _t):
        await asyncio.wait_for(app.scheduling.wait(), 10)
        assert app.elector is None  # --leader-elect=false given: the file's leaderElect: true does not apply


async def test_invalid_merged_leader_election_exits_1(server: FakeAPIServer, tmp_path: Path) -> None:
    path = config_file(tmp_path, {"leaderElect": True, "leaseDuration": "30s", "renewDeadline": "20s"})
    app = SchedulerApp(
        options(config=path, lease_duration=5.0, explicit=frozenset({"lease_duration"})),
        KubeConnection(server.url, qps=0),
    )
    assert await asyncio.wait_for(app.run(), 10) == 1
    assert app.fatal == (
        "invalid leader election settings: --leader-elect-lease-duration: must be greater than "
        "leaderElection.renewDeadline (5s <= 20s)"
    )
