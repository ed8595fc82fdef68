"""Live helpers of ``make throughput`` (``python -m e2e.throughput``): the processes' CPU time and start time
from ``/proc``, a client identity of its own for dra-scheduler (so the audit log tells its requests apart),
the audit log read round by round, a pod watch recording creates and binds, and the clean-up between
rounds. The pure parts (statistics, counting, tables) are in :mod:`e2e.throughput_report`.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from e2e import cluster
from e2e.fleet import JSON, KINDS, Kube, KubeError, allocated_devices, wait_for, watch_events
from e2e.throughput_report import (
    AuditEntry,
    cores_between,
    machine_ticks,
    parse_audit_line,
    proc_cpu_ticks,
    proc_start_ticks,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
#: the control-plane components whose CPU is reported (pid files of e2e/cluster.sh)
COMPONENTS = ("kube-apiserver", "etcd", "kube-controller-manager", "kwok")


# --------------------------------------------------------------------------------------------------
# /proc
# --------------------------------------------------------------------------------------------------


def _stat(pid: int | str) -> str:
    return Path(f"/proc/{pid}/stat").read_text()


def cpu_seconds(pid: int | str) -> float:
    """utime + stime + cutime + cstime of a process (``self`` for this one), in seconds."""
    return proc_cpu_ticks(_stat(pid)) / CLK_TCK


def start_monotonic(pid: int) -> float:
    """When ``pid`` started, on ``time.monotonic()``'s clock (to 1/CLK_TCK s): its starttime counts from boot
    on CLOCK_BOOTTIME."""
    started = proc_start_ticks(_stat(pid)) / CLK_TCK
    boot_now, mono_now = time.clock_gettime(time.CLOCK_BOOTTIME), time.monotonic()
    return mono_now - (boot_now - started)


def component_pids(run_dir: str) -> dict[str, int]:
    """pid of each running component of e2e/cluster.sh (its pid file: ``<pid> <binary>``)."""
    out: dict[str, int] = {}
    for c in (*COMPONENTS, "kube-scheduler"):
        f = Path(run_dir) / "pids" / f"{c}.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[c] = int(f.read_text().split()[0])
    return out


@dataclass
class CpuSnapshot:
    """CPU seconds of the named processes and of the whole machine, at one instant."""

    at: float
    procs: dict[str, float]
    machine_busy: float  # seconds, all CPUs
    machine_total: float

    @classmethod
    def take(cls, pids: Mapping[str, int]) -> CpuSnapshot:
        procs: dict[str, float] = {}
        for name, pid in pids.items():
            with contextlib.suppress(OSError, ValueError, IndexError):
                procs[name] = cpu_seconds(pid)
        procs["harness"] = cpu_seconds("self")
        busy, total = machine_ticks(Path("/proc/stat").read_text())
        return cls(time.monotonic(), procs, busy / CLK_TCK, total / CLK_TCK)

    def cores_since(self, before: CpuSnapshot) -> dict[str, float]:
        """Cores used between ``before`` and this snapshot (:func:`e2e.throughput_report.cores_between`)."""
        return cores_between(before.procs, self.procs, self.at - before.at, self.machine_busy - before.machine_busy,
                             self.machine_total - before.machine_total, os.cpu_count() or 1)


# --------------------------------------------------------------------------------------------------
# dra-scheduler's own identity
# --------------------------------------------------------------------------------------------------


def scheduler_identity(kube: Kube, run_dir: str, server: str, user: str = "dra-scheduler") -> str:
    """A kubeconfig for ``user`` (the static bearer token e2e/cluster.sh wrote for it in tokens.csv), the
    ClusterRoleBinding of ``cluster-admin`` to it, and a FlowSchema putting it on kube-scheduler's priority
    level (``workload-high``, matching precedence 800, as the built-in FlowSchema ``kube-scheduler``): both
    schedulers then authenticate, pass RBAC authorization and API Priority and Fairness the same way, and the
    audit log names each one's requests. Returns the kubeconfig's path.

    A token, not a client certificate, as kube-scheduler's own kubeconfig: kube-apiserver verifies a client
    certificate's chain on every request (k8s.io/apiserver v0.37.2 pkg/authentication/request/x509/x509.go,
    ``PeerCertificates[0].Verify`` per request, no cache), and with an ECDSA CA that was 12% of its CPU in a
    profile of our round (0.75 of 6.15 s) -- a cost kube-scheduler's token never paid. In a cluster both run
    on ServiceAccount tokens, which the token authenticator caches."""
    token = cluster.info(run_dir).dra_scheduler_token
    if user != "dra-scheduler" or not token:
        raise RuntimeError(f"no static token for {user} in {run_dir}/cluster.env: start the cluster again")
    d = Path(run_dir) / "throughput"
    d.mkdir(parents=True, exist_ok=True)
    ca = base64.b64encode((Path(run_dir) / "pki" / "ca.crt").read_bytes()).decode()
    kc = d / f"{user}.kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: {user}
  context:
    cluster: e2e
    user: {user}
current-context: {user}
""")
    kc.chmod(0o600)
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": f"throughput-{user}"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}
    flow = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": f"throughput-{user}"},
            "spec": {"priorityLevelConfiguration": {"name": "workload-high"}, "matchingPrecedence": 800,
                     "distinguisherMethod": {"type": "ByNamespace"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "namespaces": ["*"], "clusterScope": True}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
    for path, obj in (("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
                      ("/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", flow)):
        try:
            kube.request("POST", path, obj)
        except KubeError as e:
            if e.status != 409:
                raise
    return str(kc)


# --------------------------------------------------------------------------------------------------
# the audit log
# --------------------------------------------------------------------------------------------------


class AuditTail:
    """Reads the audit log from where the last read stopped (whole lines only)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def skip(self) -> None:
        """Forget everything written so far."""
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def read(self) -> list[AuditEntry]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being written stays for the next read
        self.offset += end
        out: list[AuditEntry] = []
        for line in data[:end].decode("utf-8", "replace").splitlines():
            e = parse_audit_line(line)
            if e is not None:
                out.append(e)
        return out


# --------------------------------------------------------------------------------------------------
# pods: a watch recording creates and binds
# --------------------------------------------------------------------------------------------------


@dataclass
class PodWatch:
    """A watch on one namespace's pods (from a list's resourceVersion), recording on ``time.monotonic()``
    when each pod was first seen (``created``) and first seen with ``spec.nodeName`` (``bound``), until
    ``expect`` pods are bound (``done``) or it is stopped. Re-opened from the last resourceVersion when the
    server ends the stream. Subclasses may watch another ``kind`` and override ``_see`` (ADDED, MODIFIED and
    listed objects) and ``_gone`` (DELETED; nothing here)."""

    kube: Kube
    namespace: str
    expect: int
    kind: str = "Pod"
    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)
    _rv: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _conn: http.client.HTTPSConnection | None = None
    _thread: threading.Thread | None = None

    def start(self) -> PodWatch:
        listed = self.kube.request("GET", KINDS[self.kind].path(self.namespace))
        now = time.monotonic()
        for p in listed.get("items", []):
            self._see(p, now)
        self._rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, name=f"{self.kind.lower()}-watch", daemon=True)
        self._thread.start()
        return self

    def _see(self, obj: JSON, now: float) -> None:
        name = obj.get("metadata", {}).get("name", "")
        self.created.setdefault(name, now)
        if obj.get("spec", {}).get("nodeName"):
            self.bound.setdefault(name, now)
            if len(self.bound) >= self.expect:
                self.done.set()

    def _gone(self, obj: JSON, now: float) -> None:
        """A DELETED event (subclasses)."""

    def _run(self) -> None:
        k = self.kube
        while not self._stop.is_set():
            q = urlencode({"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": 600,
                           "resourceVersion": self._rv})
            conn = http.client.HTTPSConnection(k.host, k.port, context=k.ctx, timeout=630)
            self._conn = conn
            try:
                conn.request("GET", KINDS[self.kind].path(self.namespace) + "?" + q,
                             headers={"Authorization": f"Bearer {k.token}"})
                resp = conn.getresponse()
                if resp.status != 200:
                    self.errors.append(f"HTTP {resp.status}: {resp.read()[:200]!r}")
                    time.sleep(0.2)
                    continue
                for ev in watch_events(resp, self._stop):
                    now = time.monotonic()
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":  # e.g. 410 Gone: relist
                        self.errors.append(str(obj.get("message")))
                        listed = k.request("GET", KINDS[self.kind].path(self.namespace))
                        for p in listed.get("items", []):
                            self._see(p, time.monotonic())
                        self._rv = listed["metadata"]["resourceVersion"]
                        break
                    self._rv = obj.get("metadata", {}).get("resourceVersion") or self._rv
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self._see(obj, now)
                    elif ev.get("type") == "DELETED":
                        self._gone(obj, now)
            except (OSError, http.client.HTTPException, ValueError) as e:
                if not self._stop.is_set():
                    self.errors.append(repr(e))
                    time.sleep(0.1)
            finally:
                conn.close()

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(10)


# --------------------------------------------------------------------------------------------------
# between rounds
# --------------------------------------------------------------------------------------------------


def clean_namespace(kube: Kube, ns: str, timeout: float = 240.0) -> float:
    """Delete the round's pods (grace 0), claims and Events and wait until none is left and no claim anywhere
    holds a device; returns the seconds it took. The claims' finalizers are removed by
    kube-controller-manager once their pods are gone (it deallocates them); a claim still there after half
    the timeout has its finalizers dropped here."""
    t0 = time.monotonic()

    def delete_pods() -> bool:
        # One DELETE per pod from 16 threads: a deletecollection of 10,000 pods is deleted one by one by the API
        # server, which answers at the end; the client gave up first, the server stopped with it, and on a busy
        # machine repeated collections did not finish within the timeout (a 10,000-pod round's clean-up failed).
        names = [p["metadata"]["name"] for p in kube.list("Pod", ns)]
        if names:
            with ThreadPoolExecutor(max_workers=16) as pool:
                list(pool.map(lambda n: kube.delete("Pod", n, ns, grace=0), names))
        return not kube.list("Pod", ns)

    wait_for(delete_pods, timeout / 2, f"the pods of {ns} deleted", interval=0.5)
    kube.delete_collection("ResourceClaim", ns)
    kube.delete_collection("Event", ns)

    def gone() -> bool:
        return not kube.list("ResourceClaim", ns)

    try:
        wait_for(gone, timeout / 2, f"the claims of {ns} deleted", interval=0.5)
    except TimeoutError:
        for c in kube.list("ResourceClaim", ns):
            with contextlib.suppress(KubeError):
                kube.patch("ResourceClaim", c["metadata"]["name"], {"metadata": {"finalizers": None}}, ns)
        wait_for(gone, 30, f"the claims of {ns} deleted (finalizers dropped)", interval=0.5)
    held = [c["metadata"]["name"] for c in kube.list("ResourceClaim") if allocated_devices(c)]
    if held:
        raise RuntimeError(f"devices still allocated after the clean-up: {held[:5]}")
    return time.monotonic() - t0
