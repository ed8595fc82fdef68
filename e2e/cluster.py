"""Drive the local e2e control plane (e2e/cluster.sh, e2e/build.sh) from Python.

Standard library only, for pytest fixtures::

    from e2e import cluster          # or `import cluster` from inside e2e/

    @pytest.fixture(scope="session")
    def kube() -> Iterator[cluster.ClusterInfo]:
        info = cluster.start()       # builds the binaries first if they are missing
        yield info
        cluster.stop()

Upstream kube-scheduler (same version and feature gates) can run beside it, for side-by-side runs::

    with cluster.kube_scheduler(info.run_dir) as ks:   # pods with schedulerName "default-scheduler"
        ...                                            # ks.log_file, ks.url (/readyz, /metrics)

Kueue (KUEUE_VERSION of versions.env) can run beside it, for the Kueue tests::

    with cluster.kueue(info.run_dir) as kq:            # Kueue(config_file, log_file, webhook_url, label)
        ...                                            # namespaces labelled kq.label=true are Kueue's

Nothing here skips: if the binaries cannot be built or the control plane cannot start, a
``ClusterError`` carrying the tail of the relevant log is raised.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent
CLUSTER_SH = E2E_DIR / "cluster.sh"
BUILD_SH = E2E_DIR / "build.sh"
DEFAULT_RUN_DIR = "/tmp/dra-scheduler-e2e"

#: components understood by :func:`stop_component` / :func:`start_component`
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "kube-scheduler", "kueue")


class ClusterError(RuntimeError):
    """The control plane could not be built, started or stopped. The message has the log tail."""


@dataclass(frozen=True)
class ClusterInfo:
    """A running control plane. ``token`` is a static bearer token in ``system:masters``;
    ``dra_scheduler_token`` one of user ``dra-scheduler`` (no roles until a test binds some)."""

    kubeconfig: str
    server: str
    token: str
    run_dir: str
    ca_file: str = ""
    bin_dir: str = ""
    k8s_version: str = ""
    dra_scheduler_token: str = ""

    @property
    def kubectl_path(self) -> str:
        return str(Path(self.bin_dir) / "kubectl")

    def log_file(self, component: str) -> Path:
        return Path(self.run_dir) / "logs" / f"{component}.log"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster; raises ClusterError on failure if ``check``."""
        cmd = [self.kubectl_path, "--kubeconfig", self.kubeconfig, *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
        return proc


def wait_established(info: ClusterInfo, *crds: str, timeout: float = 60.0) -> None:
    """Wait until the CRDs are Established. ``kubectl wait --for=condition=Established`` on a CRD created a moment
    ago can fail at once with "status.conditions accessor error: <nil>" (the API server has not written the
    status yet); that answer is retried until ``timeout``, any other failure raises ClusterError."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(1.0, deadline - time.monotonic())
        proc = info.kubectl("wait", "--for=condition=Established", f"--timeout={int(left)}s",
                            *(f"crd/{c}" for c in crds), check=False, timeout=left + 30)
        if proc.returncode == 0:
            return
        transient = "accessor error" in proc.stderr or "NotFound" in proc.stderr
        if not transient or time.monotonic() >= deadline:
            raise ClusterError(
                f"CRDs {', '.join(crds)} not Established within {timeout:g}s:\n{proc.stderr}{proc.stdout}"
            )
        time.sleep(0.5)


def versions() -> dict[str, str]:
    """The pinned versions and settings of e2e/versions.env."""
    return _parse_env_file(E2E_DIR / "versions.env")


def cache_dir() -> Path:
    if os.environ.get("E2E_CACHE"):
        return Path(os.environ["E2E_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dra-scheduler"


def bin_dir() -> Path:
    if os.environ.get("E2E_BIN_DIR"):
        return Path(os.environ["E2E_BIN_DIR"])
    return cache_dir() / "bin" / versions()["K8S_VERSION"]


def is_built() -> bool:
    return _run([str(BUILD_SH), "--check"], env={}).returncode == 0


def ensure_built(timeout: float | None = None) -> Path:
    """Build the binaries (e2e/build.sh) unless already built; return the bin dir.

    The cold build takes tens of minutes on 2 cores. Its output goes to <cache>/build.log.
    """
    if is_built():
        return bin_dir()
    cache_dir().mkdir(parents=True, exist_ok=True)
    log = cache_dir() / "build.log"
    with _locked(cache_dir() / "build.lock"):
        if is_built():  # another process built it while we waited
            return bin_dir()
        with log.open("ab") as out:
            try:
                proc = subprocess.run(
                    [str(BUILD_SH)], stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired as exc:
                raise ClusterError(f"e2e/build.sh timed out after {timeout}s:\n{_tail(log)}") from exc
        if proc.returncode != 0:
            raise ClusterError(f"e2e/build.sh failed ({proc.returncode}); log {log}:\n{_tail(log)}")
    return bin_dir()


def start(
    run_dir: str | os.PathLike[str] | None = None,
    *,
    build: bool = True,
    env: Mapping[str, str] | None = None,
    build_timeout: float | None = None,
) -> ClusterInfo:
    """Start (or reuse, if healthy) the control plane in ``run_dir`` and return how to reach it.

    ``env`` adds variables for cluster.sh (e.g. ``{"E2E_PORTS": "auto"}``, ``E2E_FEATURE_GATES_EXTRA``).
    """
    rd = _run_dir(run_dir)
    if build:
        ensure_built(build_timeout)
    elif not is_built():
        raise ClusterError(f"e2e binaries are missing in {bin_dir()}: run e2e/build.sh (or make e2e-build)")
    # With E2E_PORTS=auto the ports are picked free (and distinct) but another process can still take one
    # before a component binds it: a start that fails then is torn down and retried on new ports.
    attempts = 3 if (env or {}).get("E2E_PORTS") == "auto" else 1
    with _locked(Path(f"{rd}.lock")):
        for attempt in range(1, attempts + 1):
            try:
                _cluster_sh(rd, "up", env=env, timeout=600)
                break
            except ClusterError:
                if attempt == attempts:
                    raise
                _cluster_sh(rd, "down", timeout=120)
    return info(rd)


def stop(run_dir: str | os.PathLike[str] | None = None) -> None:
    """Stop every component and remove the run dir (a no-op when nothing runs)."""
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "down", timeout=120)


def info(run_dir: str | os.PathLike[str] | None = None) -> ClusterInfo:
    """Connection details of the cluster in ``run_dir`` (read from its cluster.env)."""
    rd = _run_dir(run_dir)
    env_file = Path(rd) / "cluster.env"
    if not env_file.is_file():
        raise ClusterError(f"no cluster in {rd} (no {env_file}); call start() first")
    e = _parse_env_file(env_file)
    return ClusterInfo(
        kubeconfig=e["KUBECONFIG"],
        server=e["E2E_SERVER"],
        token=e["E2E_TOKEN"],
        run_dir=e["E2E_RUN_DIR"],
        ca_file=e["E2E_CA_FILE"],
        bin_dir=e["E2E_BIN_DIR"],
        k8s_version=e["K8S_VERSION"],
        dra_scheduler_token=e.get("E2E_DRA_SCHEDULER_TOKEN", ""),
    )


@dataclass(frozen=True)
class KubeScheduler:
    """Upstream kube-scheduler running beside the control plane (``e2e/cluster.sh kube-scheduler-up``).

    It runs as user ``system:kube-scheduler`` (RBAC of the bootstrap roles), without leader election, with
    the feature gates of versions.env, and schedules pods whose ``spec.schedulerName`` is
    ``default-scheduler`` (or unset).
    """

    url: str  # https://127.0.0.1:<port>: /readyz, /healthz, /metrics (self-signed certificate)
    log_file: Path
    kubeconfig: str
    config_file: str
    scheduler_name: str = "default-scheduler"


def kube_scheduler_up(
    run_dir: str | os.PathLike[str] | None = None, log_v: int | None = None, env: Mapping[str, str] | None = None
) -> KubeScheduler:
    """Start upstream kube-scheduler (if not running) and wait until /readyz answers ok. ``log_v``: its klog
    verbosity (10 logs every plugin's score for every node). ``env`` adds variables for cluster.sh, e.g.
    ``{"E2E_KUBE_SCHEDULER_QPS": "200", "E2E_KUBE_SCHEDULER_BURST": "400"}`` (its clientConnection)."""
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "kube-scheduler-up",
                    env={**(env or {}), **({"E2E_LOG_V": str(log_v)} if log_v is not None else {})}, timeout=180)
    e = _parse_env_file(Path(rd) / "cluster.env")
    return KubeScheduler(
        url=f"https://127.0.0.1:{e['SCHEDULER_PORT']}",
        log_file=Path(rd) / "logs" / "kube-scheduler.log",
        kubeconfig=str(Path(rd) / "kube-scheduler.kubeconfig"),
        config_file=str(Path(rd) / "kube-scheduler.yaml"),
    )


def kube_scheduler_down(run_dir: str | os.PathLike[str] | None = None) -> None:
    """Stop upstream kube-scheduler (SIGTERM; a no-op when it is not running). Its log stays."""
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "kube-scheduler-down", timeout=60)


@contextlib.contextmanager
def kube_scheduler(
    run_dir: str | os.PathLike[str] | None = None, log_v: int | None = None, env: Mapping[str, str] | None = None
) -> Iterator[KubeScheduler]:
    """``with kube_scheduler(rd) as ks:`` upstream kube-scheduler runs inside the block only."""
    ks = kube_scheduler_up(run_dir, log_v, env)
    try:
        yield ks
    finally:
        kube_scheduler_down(run_dir)


KUEUE_LABEL = "e2e.dra-scheduler.io/kueue"  # namespaces whose pods and Jobs Kueue manages (value "true")


@dataclass(frozen=True)
class Kueue:
    """Kueue's manager running beside the control plane (``e2e/cluster.sh kueue-up``): out of cluster with the
    admin kubeconfig, no leader election, webhooks on 127.0.0.1 for namespaces labelled ``label=true``."""

    version: str
    config_file: str  # the Configuration it runs with (JSON)
    log_file: Path
    webhook_url: str  # https://127.0.0.1:<port>
    health_url: str  # http://127.0.0.1:<port>/readyz, /healthz
    label: str = KUEUE_LABEL


def kueue_up(
    run_dir: str | os.PathLike[str] | None = None, config: str | os.PathLike[str] | None = None,
    timeout: float = 300.0,
) -> Kueue:
    """Install Kueue's CRDs, start its manager (if not running) and its webhooks, and wait until they answer.
    ``config``: a JSON Configuration to start from (E2E_KUEUE_CONFIG; harness fields are always set)."""
    rd = _run_dir(run_dir)
    env = {"E2E_KUEUE_CONFIG": str(config)} if config else {}
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "kueue-up", env=env, timeout=timeout)
    e = _parse_env_file(Path(rd) / "cluster.env")
    return Kueue(
        version=versions()["KUEUE_VERSION"],
        config_file=str(Path(rd) / "kueue" / "config.yaml"),
        log_file=Path(rd) / "logs" / "kueue.log",
        webhook_url=f"https://127.0.0.1:{e['KUEUE_WEBHOOK_PORT']}",
        health_url=f"http://127.0.0.1:{e['KUEUE_HEALTH_PORT']}",
    )


def kueue_down(run_dir: str | os.PathLike[str] | None = None) -> None:
    """Delete Kueue's webhook configurations, stop it (SIGTERM) and drop its finalizer from pods still carrying
    it. Its CRDs and objects stay; a no-op when it is not running."""
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "kueue-down", timeout=120)


@contextlib.contextmanager
def kueue(
    run_dir: str | os.PathLike[str] | None = None, config: str | os.PathLike[str] | None = None
) -> Iterator[Kueue]:
    """``with kueue(rd) as kq:`` Kueue runs inside the block only."""
    kq = kueue_up(run_dir, config)
    try:
        yield kq
    finally:
        kueue_down(run_dir)


def restart_apiserver(
    run_dir: str | os.PathLike[str] | None = None,
    down_seconds: float = 0.0,
    grace_seconds: int = 5,
    env: Mapping[str, str] | None = None,
) -> ClusterInfo:
    """Stop kube-apiserver, keep it down ``down_seconds``, start it again and wait for /readyz.

    It gets SIGTERM and, after ``grace_seconds``, SIGKILL (0: killed at once, like a crash). etcd keeps
    the data, so every object survives; clients' watches break and must re-list. ``env`` adds variables for
    cluster.sh (read when kube-apiserver starts again, e.g. ``{"E2E_AUDIT_LOG": "0"}``).
    """
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "restart-apiserver", f"{down_seconds:g}", str(int(grace_seconds)), env=env,
                    timeout=300 + down_seconds)
    return info(rd)


def stop_component(name: str, run_dir: str | os.PathLike[str] | None = None) -> None:
    if name not in COMPONENTS:
        raise ValueError(f"unknown component {name!r}; one of {COMPONENTS}")
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "stop", name, timeout=60)


def start_component(name: str, run_dir: str | os.PathLike[str] | None = None) -> None:
    """Start one component (again) and wait until it is healthy; also starts the optional kube-scheduler."""
    if name not in COMPONENTS:
        raise ValueError(f"unknown component {name!r}; one of {COMPONENTS}")
    rd = _run_dir(run_dir)
    with _locked(Path(f"{rd}.lock")):
        _cluster_sh(rd, "start", name, timeout=300)


def status(run_dir: str | os.PathLike[str] | None = None) -> tuple[bool, str]:
    """(all components up and ready, the status text)."""
    proc = _run([str(CLUSTER_SH), "status"], env={"E2E_RUN_DIR": _run_dir(run_dir)})
    return proc.returncode == 0, proc.stdout + proc.stderr


@contextlib.contextmanager
def running(
    run_dir: str | os.PathLike[str] | None = None, *, build: bool = True, env: Mapping[str, str] | None = None
) -> Iterator[ClusterInfo]:
    """``with running() as info:`` start, yield, always stop."""
    try:
        yield start(run_dir, build=build, env=env)
    finally:
        stop(run_dir)


# ---- internals --------------------------------------------------------------------------------------


def _run_dir(run_dir: str | os.PathLike[str] | None) -> str:
    return str(run_dir or os.environ.get("E2E_RUN_DIR") or DEFAULT_RUN_DIR)


def _run(cmd: Sequence[str], env: Mapping[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd), env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout, check=False
    )


def _cluster_sh(rd: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300.0) -> str:
    cmd = [str(CLUSTER_SH), *args]
    try:
        proc = _run(cmd, env={**(env or {}), "E2E_RUN_DIR": rd}, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{' '.join(cmd)} timed out after {timeout}s{_component_logs(rd)}") from exc
    if proc.returncode != 0:
        raise ClusterError(
            f"e2e/cluster.sh {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}{proc.stdout[-2000:]}"
        )
    return proc.stdout


def _component_logs(rd: str) -> str:
    logs = sorted((Path(rd) / "logs").glob("*.log"))
    return "".join(f"\n---- {p} ----\n{_tail(p, 20)}" for p in logs)


def _tail(path: Path, lines: int = 60) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(data.splitlines()[-lines:])


def _parse_env_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip().strip('"').strip("'")
    return out


@contextlib.contextmanager
def _locked(path: Path, timeout: float = 3600.0) -> Iterator[None]:
    """An exclusive flock, so parallel test processes do not start/stop the same cluster at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ClusterError(f"timed out waiting for the lock {path}") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# python e2e/cluster.py up|down|restart-apiserver|kube-scheduler-up|-down|kueue-up|-down|status
if __name__ == "__main__":
    import sys

    what = sys.argv[1] if len(sys.argv) > 1 else "status"
    if what == "up":
        print(start())
    elif what == "down":
        stop()
    elif what == "kube-scheduler-up":
        print(kube_scheduler_up())
    elif what == "kube-scheduler-down":
        kube_scheduler_down()
    elif what == "kueue-up":
        print(kueue_up())
    elif what == "kueue-down":
        kueue_down()
    elif what == "restart-apiserver":
        print(restart_apiserver(down_seconds=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0))
    else:
        ok, text = status()
        print(text, end="")
        sys.exit(0 if ok else 1)
