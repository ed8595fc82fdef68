"""Fixtures of the end-to-end tests: a real control plane (e2e/cluster.py) and ``dra-scheduler run`` as a
real subprocess.

* ``cluster_info`` (session): starts etcd,
  kube-apiserver, kube-controller-manager and kwok (built at session start if missing, before any test and
  its timeout: cold ~16 min with Kueue) in their own run dir (``E2E_TEST_RUN_DIR``, default
  /tmp/dra-scheduler-e2e-pytest) on free ports, so a cluster of ``make cluster-up`` / ``make demo`` is left
  alone; installs the PodGroup CRD (before any scheduler starts: it discovers the optional APIs once).
  A control plane that cannot be built or started FAILS every test with the reason; nothing skips.
  ``E2E_KEEP_CLUSTER=1`` leaves it running afterwards.
* ``kueue`` (session, on first use): Kueue's manager (e2e/cluster.sh kueue-up: CRDs, webhooks on 127.0.0.1 for
  namespaces labelled ``e2e.dra-scheduler.io/kueue=true``) beside the control plane until the session ends; its log
  tail is attached to a failed test's report.
* ``scheduler`` (module): a clean cluster (no fleet, pod or test namespace of an earlier module left), then
  ``dra-scheduler run`` started and ready (/readyz). Its log goes to ``E2E_LOG_DIR`` (default
  /tmp/dra-scheduler-e2e-logs/<module>.log); the tail of every scheduler log of the test is attached to a
  failed test's report.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import cluster
from e2e.fleet import Kube, KubeError, SchedulerProcess, delete_fleet, wait_for

REPO = Path(__file__).resolve().parent.parent
RUN_DIR = os.environ.get("E2E_TEST_RUN_DIR", "/tmp/dra-scheduler-e2e-pytest")
LOG_DIR = Path(os.environ.get("E2E_LOG_DIR", "/tmp/dra-scheduler-e2e-logs"))
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}

_live: list[SchedulerProcess] = []  # scheduler processes of the running test (for failure reports)
_kueue_log: list[Path] = []  # Kueue's log while the kueue fixture runs (for failure reports)


# --- the control plane -----------------------------------------------------------------------------------

_build_error: str | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Build the binaries before any test runs, outside the per-test timeout (a cold build takes ~16 min);
    a failure is reported by every test that needs the cluster."""
    global _build_error
    try:
        if not cluster.is_built():
            print(f"\nbuilding the e2e control plane (cold: ~16 min; log {cluster.cache_dir() / 'build.log'})",
                  flush=True)
        cluster.ensure_built()
    except (cluster.ClusterError, OSError) as e:
        _build_error = str(e)



@pytest.fixture(scope="session")
def cluster_info() -> Iterator[cluster.ClusterInfo]:
    if _build_error is not None:
        pytest.fail(f"the e2e control plane could not be built:\n{_build_error}", pytrace=False)
    t0 = time.monotonic()
    try:
        cluster.stop(RUN_DIR)  # whatever an interrupted run left behind
        info = cluster.start(RUN_DIR, env={"E2E_PORTS": "auto"})
    except cluster.ClusterError as e:
        pytest.fail(f"the e2e control plane could not be built or started:\n{e}", pytrace=False)
    try:
        info.kubectl("apply", "-f", str(REPO / "manifests" / "crds"))
        cluster.wait_established(info, "podgroups.scheduling.x-k8s.io")
    except cluster.ClusterError as e:
        pytest.fail(f"cannot install the PodGroup CRD:\n{e}", pytrace=False)
    print(f"\ncontrol plane ready in {time.monotonic() - t0:.1f}s ({info.server}, run dir {info.run_dir})")
    yield info
    if os.environ.get("E2E_KEEP_CLUSTER") != "1":
        cluster.stop(RUN_DIR)


@pytest.fixture(scope="session")
def kube(cluster_info: cluster.ClusterInfo) -> Kube:
    return Kube.from_info(cluster_info)


@pytest.fixture(scope="session")
def kueue(cluster_info: cluster.ClusterInfo) -> Iterator[cluster.Kueue]:
    """Kueue (KUEUE_VERSION of versions.env) beside the shared control plane: started by the first test that asks
    for it, stopped (webhooks deleted first) when the session ends."""
    t0 = time.monotonic()
    try:
        kq = cluster.kueue_up(cluster_info.run_dir)
    except cluster.ClusterError as e:
        pytest.fail(f"Kueue could not be started:\n{e}", pytrace=False)
    print(f"\nKueue {kq.version} ready in {time.monotonic() - t0:.1f}s (webhooks {kq.webhook_url}, log {kq.log_file})")
    _kueue_log.append(kq.log_file)
    yield kq
    _kueue_log.clear()
    cluster.kueue_down(cluster_info.run_dir)


def wipe(kube: Kube) -> None:
    """Remove what earlier tests created: pods (at once), test namespaces (not awaited: names are unique),
    PodGroups, DeviceClasses and every e2e fleet (awaited)."""
    for ns in kube.list("Namespace"):
        name = ns["metadata"]["name"]
        if name in SYSTEM_NAMESPACES or name == "dra-scheduler":
            continue
        with contextlib.suppress(KubeError):
            kube.request("DELETE", f"/api/v1/namespaces/{name}/pods",
                         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        if ns["metadata"].get("deletionTimestamp") is None:
            kube.delete("Namespace", name)
    kube.request("DELETE", "/api/v1/namespaces/default/pods",
                 {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    kube.delete_collection("DeviceClass")
    delete_fleet(kube, None)
    wait_for(lambda: not [p for p in kube.list("Pod") if p["metadata"]["namespace"] != "kube-system"], 60,
             "test pods deleted")


@pytest.fixture(scope="module")
def clean_cluster(kube: Kube) -> Kube:
    wipe(kube)
    return kube


def log_path(request: pytest.FixtureRequest, suffix: str = "") -> Path:
    mod = Path(str(request.node.path)).stem if hasattr(request.node, "path") else "e2e"
    return LOG_DIR / f"{mod}{suffix}.log"


@pytest.fixture(scope="module")
def scheduler(
    cluster_info: cluster.ClusterInfo, clean_cluster: Kube, request: pytest.FixtureRequest
) -> Iterator[SchedulerProcess]:
    """``dra-scheduler run`` for the tests of one module (a fresh process and log per module)."""
    path = log_path(request)
    path.unlink(missing_ok=True)
    proc = SchedulerProcess(cluster_info, path)
    _live.append(proc)
    try:
        proc.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield proc
    code = proc.stop()
    with contextlib.suppress(ValueError):
        _live.remove(proc)
    assert code == 0, f"dra-scheduler did not stop cleanly on SIGTERM (exit {code}):\n{proc.tail()}"


@pytest.fixture
def spawn_scheduler(
    cluster_info: cluster.ClusterInfo, clean_cluster: Kube, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """Factory for tests that start, kill and restart schedulers themselves; stops them afterwards."""
    made: list[SchedulerProcess] = []

    def make(*extra: str, kubeconfig: str | None = None, name: str = "") -> SchedulerProcess:
        path = LOG_DIR / f"{request.node.name}{'-' + name if name else ''}.log"
        if not any(p.log_path == path for p in made):
            path.unlink(missing_ok=True)
        p = SchedulerProcess(cluster_info, path, *extra, kubeconfig=kubeconfig)
        made.append(p)
        _live.append(p)
        return p

    yield make
    for p in made:
        p.stop()
        with contextlib.suppress(ValueError):
            _live.remove(p)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    if rep.failed:
        for p in _live:
            rep.sections.append((f"dra-scheduler log tail ({p.log_path})", p.tail()))
        for path in _kueue_log:
            rep.sections.append((f"Kueue log tail ({path})", cluster._tail(path, 40)))
    return rep
