"""A bounded soak test of two leader-elected replicas on the e2e control plane: ``make soak``.

    python -m e2e.soak [--minutes 20] [--nodes 40] [--rate 6] [--out DIR] [--seed N] [--run-dir DIR] [--keep]

What runs (all on the local 1.37.2 control plane of e2e/cluster.py, own run dir by default, started with the
API server's audit log on; a healthy cluster already there is reused and left running):

* a fleet of ``--nodes`` kwok nodes x 8 H100 (the NVIDIA driver's ResourceSlices, as e2e/fleet.py publishes
  them), the x-k8s PodGroup CRD, two PriorityClasses, one namespace;
* two ``dra-scheduler run --leader-elect`` replicas (lease 6 s, renew deadline 4 s, retry 1 s), each with its
  own log, metrics port and API identity: replica ``a`` authenticates as ``system:kube-scheduler``, replica
  ``b`` as ``dra-scheduler`` (the static tokens of e2e/cluster.sh, both bound to cluster-admin for the run),
  so the audit log names the replica behind every request. A replica that exits is restarted after 1 s, as
  a Deployment would (a replica that loses the Lease exits 1 by design);
* churn of at most ``--rate`` pods/s: template-claim pods of 1/2/4/8 GPUs, 2-3 pods sharing one
  ResourceClaim, gangs of 4 (alternately a scheduling.x-k8s.io PodGroup and a scheduling.k8s.io/v1beta1
  PodGroup), sets of 3 CPU pods with required anti-affinity, high-priority 8-GPU preemptors; every unit lives
  ``--lifetime`` s; the GPU demand follows a sine between 70% and 105% of the fleet, so utilisation swings
  between ~70% and 100% with pods pending at the top;
* maintenance every few minutes, alternately: a node cordoned, drained, deleted and re-created (with its
  slice), and one node's slice deleted and republished with the next pool generation;
* faults at 20%, 40%, 60%, 80% of the run: kill -9 of the leader, SIGSTOP of the leader for lease + 4 s
  (then SIGCONT), an etcd restart (the API server's watches to it break and are re-established), a
  kube-apiserver restart (every client's watches break; the leader cannot renew within 4 s and exits).

Checked continuously (every few seconds; each violation is printed when found and fails the run):

* no device in two allocations (a device published with ``allowMultipleAllocations`` may be shared, up to
  its capacity: :func:`e2e.soak_report.device_conflicts`);
* no claim ``reservedFor`` a pod that no longer exists for longer than ``--grace`` s (kube-controller-manager
  removes such entries);
* no gang partially bound (members bound, others existing and unbound) for longer than ``--grace`` s;
* every unbound pod of ours older than ``--grace`` s has ``PodScheduled=False`` with a message;
  (the three grace clocks are paused while a fault is in progress and restart once a leader holds the Lease
  again, so the time without any scheduler does not count against it);
* **no replica writes while it does not hold the Lease**, from the API server's audit log
  (:func:`e2e.soak_report.fence_check`): every create/update/patch/delete of a replica is judged against who
  held the Lease when the API server *received* it; the holder is the replica whose successful Lease write
  completed last before that instant, and only while that write is less than the lease duration old. The
  audit log is the one place that sees every write of every replica with the server's clock (a replica's own
  log only shows what it believes it did, and a process resumed after SIGSTOP writes before it can log
  anything); the Lease's ``holderIdentity`` is polled too, to map identities to processes for the RSS plot.
  Event writes are listed apart (reported, not failed on);
* no ``Traceback`` in either replica's log; no replica exiting other than after losing the Lease or being
  killed by the driver; exit 0 on the final SIGTERM.

Measured: RSS of each replica every 5 s from /proc/<pid>/status (``rss.csv``, ``rss.svg`` and a terminal
plot), the leader's RSS slope in MiB/h after warm-up (the first 25% of the run or 3 minutes, whichever is
smaller, and the first ``--leader-warmup`` s of each leadership stretch: 6 minutes, the longest a leader's
tables take to reach their working size - an Event series is kept 6 minutes after its last occurrence, as
client-go's ``finishTime`` - in runs of 10 minutes or more, 30 s in shorter ones) by least squares with one
intercept per stretch, so a restarted process's lower level does not read as a fall; the run fails when it
exceeds ``--max-slope`` (20 MiB/h) and at least ``--slope-min-minutes`` of leader samples back it (shorter runs
report it only). So that one leader leads long enough for that, runs of 10 minutes or more put their faults in
the first 40% of the run (``--fault-span``); shorter runs spread them over the whole run.
Per fault: the lease expiry, the takeover (next Lease write by another process) and the next Binding. Bind
latency (pod created -> spec.nodeName seen) p50/p99, overall and outside fault windows.

Exit status: 0 when no violation, no traceback and no slope breach; 1 otherwise. Output in ``--out``
(default /tmp/dra-scheduler-soak/<time>): replica-a.log, replica-b.log, rss.csv, rss.svg, utilisation.csv,
timeline.txt, audit-replicas.jsonl, summary.json.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from e2e import cluster
from e2e.fleet import (
    FLEET_LABEL,
    JSON,
    KINDS,
    SCHEDULER_NAME,
    UPSTREAM_PODGROUP,
    Kube,
    KubeError,
    SchedulerProcess,
    claim_template,
    create_objects,
    delete_fleet,
    fresh_namespace,
    gpu_pod,
    kwok_node,
    owned_slice,
    podgroup,
    priority_class,
    scale_objects,
    upstream_member,
    upstream_podgroup,
    wait_for,
)
from e2e.soak_report import (
    DeviceInfo,
    DeviceKey,
    Fault,
    FenceResult,
    RssSample,
    device_conflicts,
    device_index,
    fence_check,
    leader_segments,
    leader_spans,
    partial_gangs,
    percentile,
    pooled_slope,
    process_slopes,
    rss_svg,
    stale_reservations,
    takeovers,
    terminal_plot,
    unexplained_pending,
    violation_kinds,
)
from e2e.throughput_live import AuditTail, PodWatch
from e2e.throughput_report import AuditEntry, rfc3339_seconds

REPO = Path(__file__).resolve().parent.parent
RUN_DIR = os.environ.get("E2E_SOAK_RUN_DIR", "/tmp/dra-scheduler-e2e-soak")
FLEET = "soak"
UNIT_LABEL = "soak.dra-scheduler.io/unit"
KIND_LABEL = "soak.dra-scheduler.io/kind"
PC_LOW, PC_HIGH = "soak-low", "soak-high"
LEASE_NAMESPACE, LEASE_NAME = "kube-system", "dra-scheduler"
#: replica slot -> the API user it runs as (a static token of e2e/cluster.sh; cluster.env key)
SLOT_USERS = {"a": ("system:kube-scheduler", "E2E_SCHEDULER_TOKEN"), "b": ("dra-scheduler", "E2E_DRA_SCHEDULER_TOKEN")}
USER_SLOT = {user: slot for slot, (user, _) in SLOT_USERS.items()}
ALL_FAULTS = ("kill-9", "sigstop", "etcd-restart", "apiserver-restart")
UNIT_PREFIX = {"gpu": "gp", "shared": "sh", "gang": "ga", "cpu": "cp", "preemptor": "hi", "probe": "pb"}
MARKS = {"kill-9": "K", "sigstop": "S", "etcd-restart": "E", "apiserver-restart": "A", "node": "n", "slice": "s"}


@dataclass
class Options:
    minutes: float = 20.0
    nodes: int = 40
    gpus: int = 8
    rate: float = 6.0  # pods created per second at most
    seed: int = 1
    lease: float = 6.0
    renew: float = 4.0
    retry: float = 1.0
    grace: float = 30.0
    lifetime: tuple[float, float] = (15.0, 90.0)  # seconds a unit lives, uniform
    max_slope: float = 20.0  # MiB/h
    slope_min_minutes: float = 6.0  # leader samples needed after warm-up before the slope gates the run
    leader_warmup: float = 360.0  # s of each leadership stretch left out of the slope (runs of >= 10 min)
    fault_span: float | None = None  # faults within this share of the run (None: 0.4 from 10 min, else 1.0)
    gate_slope: bool = True
    faults: tuple[str, ...] = ALL_FAULTS
    check_interval: float = 3.0
    rss_interval: float = 5.0
    max_pending: int = 40  # no new unit while this many of our pods are unbound
    maintenance: bool = True

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0


@dataclass
class Result:
    violations: list[str]
    tracebacks: list[str]
    event_violations: list[str]
    slope: float | None
    slope_minutes: float
    slope_gated: bool
    summary: JSON
    out: Path

    @property
    def slope_failed(self) -> bool:
        return self.slope_gated and self.slope is not None and self.slope > self.summary["max_slope_mib_per_h"]

    @property
    def ok(self) -> bool:
        return not self.violations and not self.tracebacks and not self.slope_failed


# --------------------------------------------------------------------------------------------------
# replicas
# --------------------------------------------------------------------------------------------------


class LogScanner:
    """Reads a replica's log as it grows: its Lease identity per process start, tracebacks, error lines."""

    IDENTITY = re.compile(r'"identity": "([^"]+)"')

    def __init__(self, slot: str, path: Path) -> None:
        self.slot = slot
        self.path = path
        self.offset = 0
        self.start_no = 0
        self.identities: dict[str, int] = {}  # identity -> start number
        self.tracebacks: list[str] = []
        self.errors: Counter[str] = Counter()
        self.lost: set[int] = set()  # start numbers that logged "leadership lost"
        self._capture: list[str] | None = None
        self.lock = threading.Lock()

    def scan(self) -> None:
        with self.lock:
            try:
                with self.path.open("rb") as f:
                    f.seek(self.offset)
                    data = f.read()
            except OSError:
                return
            end = data.rfind(b"\n") + 1
            self.offset += end
            for line in data[:end].decode("utf-8", "replace").splitlines():
                self._line(line)

    def _line(self, line: str) -> None:
        if self._capture is not None:  # a plain (non-JSON) traceback printed by Python: keep its lines
            self._capture.append(line)
            if len(self._capture) >= 40 or (line and not line.startswith((" ", "Traceback"))):
                self.tracebacks.append(f"replica {self.slot} start #{self.start_no}:\n" + "\n".join(self._capture))
                self._capture = None
            return
        if line.startswith("===== start #"):
            self.start_no += 1
            return
        if "Traceback" in line or (line.startswith("{") and ('"exc_info": [' in line or '"exception": "' in line)):
            # a JSON record with an exception: structlog renders "exception" (with the traceback); records of
            # stdlib loggers (asyncio, kopf) carry a bare "exc_info" list whose traceback object is not rendered
            if line.startswith("{"):
                self.tracebacks.append(f"replica {self.slot} start #{self.start_no}: {line[:4000]}")
            else:
                self._capture = [line]
        m = self.IDENTITY.search(line)
        if m:
            self.identities.setdefault(m.group(1), self.start_no)
        if '"level": "error"' in line:
            try:
                ev = json.loads(line).get("event", "?")
            except ValueError:
                ev = line[:120]
            self.errors[str(ev)] += 1
            if ev == "leadership lost":
                self.lost.add(self.start_no)

    def flush(self) -> None:
        with self.lock:
            if self._capture:
                self.tracebacks.append(f"replica {self.slot} start #{self.start_no}:\n" + "\n".join(self._capture))
                self._capture = None


@dataclass
class Exit:
    slot: str
    at: float  # epoch
    pid: int
    code: int | None
    start_no: int
    expected: bool
    why: str


class Replica:
    def __init__(self, slot: str, info: cluster.ClusterInfo, kubeconfig: str, log_path: Path, extra: list[str]) -> None:
        self.slot = slot
        self.sp = SchedulerProcess(info, log_path, *extra, kubeconfig=kubeconfig)
        self.log = LogScanner(slot, log_path)
        self.paused = False  # a fault owns the process: the supervisor leaves it alone
        self.stopping = False
        self.killed_pids: set[int] = set()  # pids the driver SIGKILLed
        self.starts: list[tuple[float, int]] = []  # (epoch, pid)
        self.exits: list[Exit] = []
        self.start_failures: list[str] = []
        self._reaped: set[int] = set()

    @property
    def pid(self) -> int | None:
        return self.sp.proc.pid if self.sp.proc is not None and self.sp.alive else None

    def start(self, timeout: float = 180.0) -> None:
        self.sp.start(timeout=timeout)
        assert self.sp.proc is not None
        self.starts.append((time.time(), self.sp.proc.pid))

    def reap(self) -> Exit | None:
        """Record the exit of the current process (once)."""
        p = self.sp.proc
        if p is None or p.poll() is None or p.pid in self._reaped:
            return None
        self._reaped.add(p.pid)
        self.log.scan()
        n = self.sp.starts
        code = p.returncode
        if p.pid in self.killed_pids:
            expected, why = True, "killed by the driver"
        elif self.stopping:
            expected, why = code == 0, "final SIGTERM" + ("" if code == 0 else f": exit {code}, expected 0")
        elif n in self.log.lost:
            expected, why = True, "lost the Lease"
        else:
            expected, why = False, f"exit {code} without losing the Lease"
        e = Exit(self.slot, time.time(), p.pid, code, n, expected, why)
        self.exits.append(e)
        return e


@dataclass
class SoakPodWatch(PodWatch):
    """:class:`e2e.throughput_live.PodWatch` also recording the pods ever seen with ``PodScheduled=False`` (they
    waited for room, their gang, a claim: their bind latency is not the scheduler's alone)."""

    refused: set[str] = field(default_factory=set)

    def _see(self, obj: JSON, now: float) -> None:
        super()._see(obj, now)
        if not obj.get("spec", {}).get("nodeName") and any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (obj.get("status") or {}).get("conditions") or []
        ):
            self.refused.add(obj.get("metadata", {}).get("name", ""))


def rss_of(pid: int) -> tuple[float, str] | None:
    """(VmRSS in MiB, State letter) of a process; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    rss = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    st = re.search(r"^State:\s+(\S)", text, re.M)
    if not rss or not st:
        return None
    return int(rss.group(1)) / 1024.0, st.group(1)


# --------------------------------------------------------------------------------------------------
# the workload
# --------------------------------------------------------------------------------------------------


@dataclass
class Unit:
    uid: str
    kind: str  # gpu | shared | gang | cpu | preemptor
    pods: dict[str, int]  # live pod name -> GPUs it asks for (its share, for shared claims)
    created: float  # driver clock (s since start)
    expires: float
    claim: str | None = None  # a shared ResourceClaim
    group: tuple[str, str] | None = None  # (KINDS key, name) of its PodGroup
    deleted: bool = False


@dataclass
class Stats:
    units: Counter[str] = field(default_factory=Counter)
    pods_created: int = 0
    pods_deleted: int = 0  # by the churn (lifetime, demand, given up)
    pods_drained: int = 0  # by node maintenance
    pods_vanished: int = 0  # gone without the driver deleting them (preemption victims)
    units_given_up: int = 0  # never bound within 4 x grace: deleted
    create_errors: int = 0


class Soak:
    def __init__(self, info: cluster.ClusterInfo, opts: Options, out: Path) -> None:
        self.info = info
        self.opts = opts
        self.out = out
        self.rd = info.run_dir
        self.kube = Kube.from_info(info)
        self.rng = random.Random(opts.seed)
        self.t0 = time.time()
        self.m0 = time.monotonic()
        self.stop_event = threading.Event()
        self.churn_stop = threading.Event()
        self.lock = threading.RLock()
        self.ns = ""
        self.replicas: dict[str, Replica] = {}
        self.units: dict[str, Unit] = {}
        self.created_at: dict[str, float] = {}  # pod name -> driver clock at its create request
        self.deleted_by_us: set[str] = set()
        self.drained: set[str] = set()
        self.stats = Stats()
        self.snapshot: tuple[float, dict[str, JSON]] = (0.0, {})
        self.devices: dict[DeviceKey, DeviceInfo] = {}
        self.capacity = opts.nodes * opts.gpus
        self.devices_at = -1e9
        self.violations: list[str] = []
        self._reported: set[str] = set()
        self.first_seen: dict[str, float] = {}
        self.fault_active = False
        self.quiet_since = 0.0  # driver clock: the grace clocks start no earlier than this
        self.faults: list[Fault] = []
        self.marks: list[tuple[float, str, str]] = []  # (t, mark char, label)
        self.rss: list[RssSample] = []
        self.util: list[tuple[float, float, int, int, int]] = []  # t, utilisation, live pods, bound, pending
        self.holder = ""
        self.audit: AuditTail | None = None
        self.audit_entries: list[AuditEntry] = []
        self.fence: FenceResult | None = None
        self.fence_reported: set[str] = set()
        self.terminated: dict[str, float] = {}
        self.created_objects: dict[str, list[str]] = {"DeviceClass": [], "ClusterRoleBinding": [], "FlowSchema": []}
        self.node_objs: dict[str, JSON] = {}
        self.slice_objs: dict[str, list[JSON]] = {}
        self.podwatch: SoakPodWatch | None = None
        self.threads: list[threading.Thread] = []
        self.timeline = (out / "timeline.txt").open("a")
        self.notes: list[str] = []
        self.unit_no = 0
        self.probe_since: float | None = None  # driver clock: probing for the next Binding since this fault
        self.last_probe = -1e9
        self.last_pods: list[JSON] = []
        self.misled: set[str] = set()  # gang units told their PodGroup does not exist

    # --- clock and output -----------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.m0

    def epoch(self, t: float) -> float:
        return self.t0 + t

    def at(self, epoch: float) -> float:
        return epoch - self.t0

    def say(self, msg: str) -> None:
        line = f"[{self.now():7.1f}s] {msg}"
        with self.lock:
            print(line, flush=True)
            self.timeline.write(line + "\n")
            self.timeline.flush()

    def violation(self, key: str, msg: str) -> None:
        with self.lock:
            if key in self._reported:
                return
            self._reported.add(key)
            self.violations.append(f"[{self.now():.1f}s] {msg}")
        self.say(f"VIOLATION {msg}")

    # --- setup ----------------------------------------------------------------------------------------------

    def setup(self) -> None:
        k, o = self.kube, self.opts
        self.info.kubectl("apply", "-f", str(REPO / "manifests" / "crds"))
        cluster.wait_established(self.info, "podgroups.scheduling.x-k8s.io")
        for pc in (priority_class(PC_LOW, 100), priority_class(PC_HIGH, 100000)):
            k.create(pc, exist_ok=True)
        self.ns = fresh_namespace(k, "soak")
        for n in (1, 2, 4, 8):
            k.create(claim_template(self.ns, f"gpu-{n}", count=n))
        if self._lease() is not None:  # left by an earlier run: its holder is gone
            k.request(
                "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}", retry_for=10
            )
        existing = {d["metadata"]["name"] for d in k.list("DeviceClass")}
        objs = scale_objects(FLEET, o.nodes, o.gpus)
        self.created_objects["DeviceClass"] = [
            d["metadata"]["name"] for d in objs if d["kind"] == "DeviceClass" and d["metadata"]["name"] not in existing
        ]
        for obj in objs:
            if obj["kind"] == "Node":
                self.node_objs[obj["metadata"]["name"]] = obj
            elif obj["kind"] == "ResourceSlice":
                self.slice_objs.setdefault(obj["spec"]["nodeName"], []).append(obj)
        t = time.monotonic()
        fleet = create_objects(k, objs, FLEET)
        wait_for(
            lambda: sum(1 for n in k.list("Node", labelSelector=f"{FLEET_LABEL}={FLEET}") if _ready(n)) == o.nodes,
            120,
            "every soak node Ready (kwok)",
            interval=0.5,
        )
        self.say(
            f"fleet: {len(fleet.nodes)} kwok nodes x {o.gpus} GPUs = {fleet.device_count()} devices "
            f"({len(fleet.slices)} ResourceSlices) in {time.monotonic() - t:.1f}s; namespace {self.ns}"
        )
        self.capacity = fleet.device_count()

    def identities(self) -> dict[str, str]:
        """A kubeconfig per replica slot (its own static token), cluster-admin for each user, and for
        ``dra-scheduler`` kube-scheduler's API priority level (``system:kube-scheduler`` has it built in)."""
        env = _env_file(Path(self.rd) / "cluster.env")
        ca = base64.b64encode((Path(self.rd) / "pki" / "ca.crt").read_bytes()).decode()
        d = Path(self.rd) / "soak"
        d.mkdir(parents=True, exist_ok=True)
        out: dict[str, str] = {}
        for slot, (user, key) in SLOT_USERS.items():
            token = env.get(key)
            if not token:
                raise RuntimeError(
                    f"no {key} in {self.rd}/cluster.env: the cluster predates per-user tokens; "
                    "restart it (e2e/cluster.sh down && up)"
                )
            kc = d / f"replica-{slot}.kubeconfig"
            kc.write_text(_kubeconfig(self.info.server, ca, user, token))
            kc.chmod(0o600)
            out[slot] = str(kc)
            name = f"soak-{user.replace(':', '-')}"
            binding = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }
            if _post(self.kube, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding):
                self.created_objects["ClusterRoleBinding"].append(name)
        flow = {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": "soak-dra-scheduler"},
            "spec": {
                "priorityLevelConfiguration": {"name": "workload-high"},
                "matchingPrecedence": 800,
                "distinguisherMethod": {"type": "ByNamespace"},
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": "dra-scheduler"}}],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "namespaces": ["*"],
                                "clusterScope": True,
                            }
                        ],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        }
        if _post(self.kube, "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", flow):
            self.created_objects["FlowSchema"].append("soak-dra-scheduler")
        return out

    def start_replicas(self) -> None:
        o = self.opts
        extra = [
            "--leader-elect",
            "--leader-elect-lease-duration",
            f"{o.lease:g}s",
            "--leader-elect-renew-deadline",
            f"{o.renew:g}s",
            "--leader-elect-retry-period",
            f"{o.retry:g}s",
        ]
        kcs = self.identities()
        for slot in SLOT_USERS:
            log = self.out / f"replica-{slot}.log"
            log.unlink(missing_ok=True)
            self.replicas[slot] = Replica(slot, self.info, kcs[slot], log, extra)
        for r in self.replicas.values():
            r.start()
            self.say(
                f"replica {r.slot} started (pid {r.pid}, user {SLOT_USERS[r.slot][0]}, metrics "
                f"127.0.0.1:{r.sp.port}, log {r.sp.log_path})"
            )
        self.poll_lease()
        wait_for(lambda: self.poll_lease() and self.leader() is not None, 60, "a replica holding the Lease", 0.2)
        self.say(f"replica {self.leader()} holds the Lease ({self.holder})")

    # --- the Lease --------------------------------------------------------------------------------------------

    def _lease(self) -> JSON | None:
        try:
            return self.kube.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}", retry_for=2
            )
        except KubeError:
            return None

    def poll_lease(self) -> bool:
        lease = self._lease()
        if lease is None:
            return False
        self.holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return True

    def leader(self) -> str | None:
        """The slot whose *current, running* process holds the Lease (by the identity it logged)."""
        h = self.holder
        if not h:
            return None
        for r in self.replicas.values():
            r.log.scan()
            n = r.log.identities.get(h)
            if n is not None and n == r.sp.starts and r.sp.alive:
                return r.slot
        return None

    # --- threads --------------------------------------------------------------------------------------------

    def spawn(self, target: Callable[[], None], name: str) -> None:
        def run() -> None:
            try:
                target()
            except Exception as e:  # a driver bug must not pass for a green run
                self.violation(f"driver-{name}", f"driver thread {name} crashed: {e!r}")
                raise

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def supervise(self, r: Replica) -> None:
        while not self.stop_event.is_set():
            time.sleep(0.2)
            if r.paused or r.stopping or r.sp.alive:
                continue
            e = r.reap()
            if e is not None:
                self.say(f"replica {r.slot} (pid {e.pid}) exited {e.code}: {e.why}")
                if not e.expected:
                    self.violation(
                        f"exit-{e.pid}",
                        f"replica {r.slot} (pid {e.pid}) exited {e.code} without losing "
                        f"the Lease or being killed:\n{_indent(r.sp.tail(25))}",
                    )
            time.sleep(1.0)
            if self.stop_event.is_set() or r.paused or r.stopping:
                continue
            try:
                r.start()
                self.say(f"replica {r.slot} restarted (pid {r.pid})")
            except RuntimeError as err:
                r.start_failures.append(str(err))
                self.say(f"replica {r.slot} failed to start: {str(err).splitlines()[0]}")
                time.sleep(2.0)

    def sampler(self) -> None:
        """The Lease holder every second; RSS of both replicas every ``rss_interval``."""
        next_rss = 0.0
        with (self.out / "rss.csv").open("w") as f:
            f.write("t_s,epoch,slot,pid,rss_mib,leader,state\n")
            while not self.stop_event.is_set():
                self.poll_lease()
                t = self.now()
                if t >= next_rss:
                    next_rss = t + self.opts.rss_interval
                    lead = self.leader()
                    for r in self.replicas.values():
                        pid = r.pid
                        got = rss_of(pid) if pid else None
                        if pid is None or got is None:
                            continue
                        s = RssSample(t, r.slot, pid, got[0], lead == r.slot, got[1])
                        self.rss.append(s)
                        f.write(
                            f"{t:.1f},{self.epoch(t):.3f},{r.slot},{pid},{s.rss_mib:.2f},{int(s.leader)},{s.state}\n"
                        )
                    f.flush()
                self.stop_event.wait(1.0)

    def checker(self) -> None:
        last_fence = 0.0
        with (self.out / "utilisation.csv").open("w") as f:
            f.write("t_s,utilisation,pods,bound,pending,capacity\n")
            while not self.stop_event.is_set():
                try:
                    self.check_once(f)
                except KubeError as e:
                    self.say(f"check skipped: {e}")
                if self.now() - last_fence >= 15:
                    last_fence = self.now()
                    self.check_fence()
                self.stop_event.wait(self.opts.check_interval)

    def check_once(self, f: Any = None) -> None:
        k, ns = self.kube, self.ns
        t = self.now()
        if t - self.devices_at > 10:
            slices = k.list("ResourceSlice", labelSelector=f"{FLEET_LABEL}={FLEET}")
            self.devices = device_index(slices)
            self.capacity = len(self.devices)
            self.devices_at = t
        pods = k.list("Pod", ns)
        claims = k.list("ResourceClaim", ns)
        by_name = {p["metadata"]["name"]: p for p in pods}
        self.snapshot = (t, by_name)
        self.last_pods = pods
        for msg in device_conflicts(claims, self.devices):
            self.violation(f"dev:{msg}", msg)
        ages: dict[str, str] = {}
        for (claim, uid), msg in stale_reservations(claims, pods).items():
            ages[f"resv:{claim}:{uid}"] = msg
        for unit, msg in partial_gangs(pods, UNIT_LABEL, KIND_LABEL).items():
            ages[f"gang:{unit}"] = msg
        for key, msg in unexplained_pending(pods).items():
            ages[f"pend:{key}"] = msg
        for p in pods:  # a gang member told its PodGroup does not exist, though we created it first
            labels = p["metadata"].get("labels") or {}
            unit = self.units.get(labels.get(UNIT_LABEL, ""))
            cond = next(
                (c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {}
            )
            if (
                unit is not None
                and unit.group
                and not p["spec"].get("nodeName")
                and "does not exist" in (cond.get("message") or "")
                and t - unit.created > self.opts.grace
                and unit.uid not in self.misled
            ):
                self.misled.add(unit.uid)
                self.notes.append(
                    f'[{t:.0f}s] gang {unit.uid}: pending with "{cond.get("message")}" '
                    f"{t - unit.created:.0f}s after its {unit.group[0]} {unit.group[1]} was created"
                )
                self.say(f"note: {self.notes[-1]}")
        now_e = time.time()
        for key in list(self.first_seen):
            if key not in ages:
                del self.first_seen[key]
        for key, msg in ages.items():
            first = self.first_seen.setdefault(key, now_e)
            if key.startswith("pend:"):  # a pending pod's age counts from its creation
                p = by_name.get(key.split("/", 1)[1])
                if p is not None:
                    first = min(first, rfc3339_seconds(p["metadata"]["creationTimestamp"]))
            start = max(first, self.epoch(self.quiet_since))
            if not self.fault_active and now_e - start > self.opts.grace:
                self.violation(key, f"{msg} for {now_e - first:.0f}s (grace {self.opts.grace:g}s)")
        used = sum(
            len(((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])
            for c in claims
        )
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        pending = len(pods) - bound
        util = used / self.capacity if self.capacity else 0.0
        self.util.append((t, util, len(pods), bound, pending))
        if f is not None:
            f.write(f"{t:.1f},{util:.4f},{len(pods)},{bound},{pending},{self.capacity}\n")
            f.flush()
        for r in self.replicas.values():
            r.log.scan()
            for tb in r.log.tracebacks:
                key = f"tb:{hash(tb)}"
                if key not in self._reported:
                    self._reported.add(key)
                    self.say(f"TRACEBACK in replica {r.slot}'s log:\n{_indent(tb[:3000])}")

    def check_fence(self) -> None:
        if self.audit is None:
            return
        for e in self.audit.read():
            if e.user in USER_SLOT:
                self.audit_entries.append(e)
        self.fence = fence_check(
            self.audit_entries,
            lambda e: USER_SLOT.get(e.user),
            LEASE_NAMESPACE,
            LEASE_NAME,
            self.opts.lease,
            self.terminated,
        )
        for msg in self.fence.violations:
            self.violation(f"fence:{msg}", f"write without the Lease: {msg}")
        for msg in self.fence.event_violations:
            if msg not in self.fence_reported:
                self.fence_reported.add(msg)
                self.say(f"note: Event written without the Lease: {msg}")

    # --- churn ------------------------------------------------------------------------------------------------

    def demand(self) -> tuple[int, int]:
        """(GPUs asked for by our live pods, our unbound pods) using the last list and what was created since."""
        t_snap, pods = self.snapshot
        gpus = pending = 0
        for u in list(self.units.values()):
            if u.deleted:
                continue
            for name, g in list(u.pods.items()):
                p = pods.get(name)
                if p is None and self.created_at.get(name, 0) < t_snap - 5:
                    del u.pods[name]  # gone without us: a preemption victim or drained
                    if name not in self.drained and name not in self.deleted_by_us:
                        self.stats.pods_vanished += 1
                    continue
                gpus += g
                if p is None or not p["spec"].get("nodeName"):
                    pending += 1
        return gpus, pending

    def target(self, t: float) -> float:
        period = min(300.0, max(60.0, self.opts.seconds / 2))
        return self.capacity * (0.875 + 0.175 * math.sin(2 * math.pi * t / period))

    def churn(self) -> None:
        o = self.opts
        tokens, last = 0.0, self.now()
        while not self.churn_stop.is_set():
            self.churn_stop.wait(0.25)
            t = self.now()
            tokens = min(o.rate * 2, tokens + (t - last) * o.rate)
            last = t
            gpus, pending = self.demand()
            for u in [u for u in self.units.values() if not u.deleted and u.expires <= t][:3]:
                self.delete_unit(u, "expired")
            _, pods = self.snapshot
            for u in list(self.units.values()):
                if (
                    not u.deleted
                    and t - u.created > 4 * o.grace
                    and u.pods
                    and not any((pods.get(n) or {}).get("spec", {}).get("nodeName") for n in u.pods)
                ):
                    self.stats.units_given_up += 1
                    self.delete_unit(u, "never bound")
            for u in list(self.units.values()):
                if not u.deleted and not u.pods:
                    self.delete_unit(u, "empty")
            if self.probe_since is not None and tokens >= 1 and t - self.last_probe >= 1.0:
                tokens -= 1
                self.last_probe = t
                self.create_unit("probe", t)
                if (
                    not self.fault_active
                    and self.podwatch is not None
                    and any(
                        n in self.podwatch.bound
                        for n, c in list(self.created_at.items())
                        if n.startswith(UNIT_PREFIX["probe"]) and c >= self.probe_since
                    )
                ):
                    self.probe_since = None  # a probe created since the fault is bound: the takeover is measured
            goal = self.target(t)
            if gpus > goal + 16:
                bound_units = [
                    u
                    for u in self.units.values()
                    if not u.deleted and any((pods.get(n) or {}).get("spec", {}).get("nodeName") for n in u.pods)
                ]
                if bound_units:
                    self.delete_unit(self.rng.choice(bound_units), "demand fell")
            elif gpus < goal and pending < o.max_pending:
                kind = self.pick_kind(gpus)
                need = {"gang": 4, "cpu": 3, "shared": 3}.get(kind, 1)
                if tokens >= need:
                    tokens -= need
                    self.create_unit(kind, t)

    def pick_kind(self, gpus: int) -> str:
        weights = {"gpu": 62, "shared": 8, "gang": 10, "cpu": 10, "preemptor": 0}
        if gpus >= 0.9 * self.capacity:
            weights["preemptor"] = 5
        live_cpu = sum(1 for u in self.units.values() if u.kind == "cpu" and not u.deleted)
        if live_cpu >= 8:
            weights["cpu"] = 0
        kinds = list(weights)
        return self.rng.choices(kinds, [weights[k] for k in kinds])[0]

    def create_unit(self, kind: str, t: float) -> None:
        o, ns = self.opts, self.ns
        self.unit_no += 1
        uid = f"{UNIT_PREFIX[kind]}{self.unit_no:05d}"
        life = self.rng.uniform(*o.lifetime)
        u = Unit(uid, kind, {}, t, t + life)
        pods: list[JSON] = []
        pre: list[JSON] = []
        if kind == "gpu":
            n = self.rng.choices((1, 2, 4, 8), (45, 28, 17, 10))[0]
            pods = [gpu_pod(ns, f"{uid}-g{n}", template=f"gpu-{n}", fleet=FLEET)]
            u.pods = {pods[0]["metadata"]["name"]: n}
        elif kind == "preemptor":
            pods = [gpu_pod(ns, f"{uid}-hi8", template="gpu-8", fleet=FLEET)]
            pods[0]["spec"]["priorityClassName"] = PC_HIGH
            u.pods = {pods[0]["metadata"]["name"]: 8}
        elif kind == "shared":
            u.claim = f"{uid}-claim"
            pre = [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": u.claim, "namespace": ns, "labels": {UNIT_LABEL: uid}},
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {
                                        "deviceClassName": "gpu.nvidia.com",
                                        "allocationMode": "ExactCount",
                                        "count": 1,
                                    },
                                }
                            ]
                        }
                    },
                }
            ]
            m = self.rng.choice((2, 3))
            pods = [gpu_pod(ns, f"{uid}-s{i}", claim=u.claim, fleet=FLEET) for i in range(m)]
            u.pods = {p["metadata"]["name"]: 0 for p in pods}
            u.pods[pods[0]["metadata"]["name"]] = 1
        elif kind == "gang":
            n = self.rng.choice((1, 2, 2, 4))
            name = f"{uid}-pg"
            if self.unit_no % 2:
                pre = [podgroup(ns, name, 4)]
                u.group = ("PodGroup", name)
                pods = [gpu_pod(ns, f"{uid}-m{i}", template=f"gpu-{n}", fleet=FLEET, group=name) for i in range(4)]
            else:
                pre = [upstream_podgroup(ns, name, 4)]
                u.group = (UPSTREAM_PODGROUP, name)
                pods = [
                    upstream_member(gpu_pod(ns, f"{uid}-m{i}", template=f"gpu-{n}", fleet=FLEET, group=name), name)
                    for i in range(4)
                ]
            u.pods = {p["metadata"]["name"]: n for p in pods}
        elif kind == "probe":  # one small CPU pod a second during a fault: the next Binding shows the takeover
            u.expires = t + 10
            pods = [cpu_pod(ns, f"{uid}-p", "", cpu="10m")]
            u.pods = {pods[0]["metadata"]["name"]: 0}
        else:  # cpu: 3 pods that may not share a node
            pods = [cpu_pod(ns, f"{uid}-c{i}", uid) for i in range(3)]
            u.pods = {p["metadata"]["name"]: 0 for p in pods}
        for p in pods:
            labels = p["metadata"].setdefault("labels", {})
            labels[UNIT_LABEL] = uid
            labels[KIND_LABEL] = kind
            p["spec"].setdefault("priorityClassName", PC_LOW)
        with self.lock:
            self.units[uid] = u
        try:
            for obj in pre:
                self.kube.create(obj)
            for p in pods:
                self.created_at[p["metadata"]["name"]] = self.now()
                self.kube.create(p)
                self.stats.pods_created += 1
        except KubeError as e:
            self.stats.create_errors += 1
            self.say(f"creating {uid} failed: {e}; deleting it")
            self.delete_unit(u, "create failed")
            return
        self.stats.units[kind] += 1

    def delete_unit(self, u: Unit, why: str) -> None:
        u.deleted = True
        for name in list(u.pods):
            self.deleted_by_us.add(name)
            try:
                self.kube.delete("Pod", name, self.ns, grace=0)
                self.stats.pods_deleted += 1
            except KubeError as e:
                self.say(f"deleting pod {name} failed: {e}")
        u.pods.clear()
        with contextlib.suppress(KubeError):
            if u.claim:
                self.kube.delete("ResourceClaim", u.claim, self.ns)
            if u.group:
                self.kube.delete(u.group[0], u.group[1], self.ns)
                if u.group[0] == UPSTREAM_PODGROUP:
                    release_podgroup(self.kube, u.group[1], self.ns)

    # --- maintenance ----------------------------------------------------------------------------------------

    def node_cycle(self) -> None:
        k = self.kube
        name = self.rng.choice(sorted(self.node_objs))
        t = time.monotonic()
        k.patch("Node", name, {"spec": {"unschedulable": True}})
        on_node = k.list("Pod", self.ns, fieldSelector=f"spec.nodeName={name}")
        for p in on_node:
            self.drained.add(p["metadata"]["name"])
            k.delete("Pod", p["metadata"]["name"], self.ns, grace=0)
            self.stats.pods_drained += 1
        wait_for(
            lambda: not k.list("Pod", self.ns, fieldSelector=f"spec.nodeName={name}"), 30, f"the pods of {name} deleted"
        )
        k.delete_collection("ResourceSlice", fieldSelector=f"spec.nodeName={name}")
        k.delete("Node", name)
        wait_for(lambda: k.try_get("Node", name) is None, 30, f"node {name} deleted")
        self.devices_at = -1e9
        time.sleep(3)
        node = k.create(kwok_node(self.node_objs[name], FLEET))
        for s in self.slice_objs[name]:
            s2 = owned_slice(s, node, FLEET)
            s2["spec"]["pool"]["generation"] = int(s2["spec"]["pool"].get("generation", 1)) + 1
            k.create(s2)
        self.devices_at = -1e9
        self.say(
            f"maintenance: node {name} cordoned, {len(on_node)} pod(s) drained, deleted and re-created with its "
            f"slice in {time.monotonic() - t:.1f}s"
        )

    def slice_republish(self) -> None:
        k = self.kube
        name = self.rng.choice(sorted(self.node_objs))
        slices = k.list("ResourceSlice", fieldSelector=f"spec.nodeName={name}")
        for s in slices:
            k.delete("ResourceSlice", s["metadata"]["name"])
        self.devices_at = -1e9
        time.sleep(2)
        for s in slices:
            meta = s["metadata"]
            new = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": meta["name"],
                    "labels": meta.get("labels") or {},
                    "ownerReferences": meta.get("ownerReferences") or [],
                },
                "spec": json.loads(json.dumps(s["spec"])),
            }
            new["spec"]["pool"]["generation"] = int(new["spec"]["pool"].get("generation", 1)) + 1
            k.create(new)
        self.devices_at = -1e9
        gens = [s["spec"]["pool"]["generation"] + 1 for s in slices]
        self.say(f"maintenance: the slice(s) of {name} deleted and republished (pool generation {gens})")

    # --- faults -----------------------------------------------------------------------------------------------

    def wait_leader(self, not_identity: str = "", timeout: float = 90.0) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_lease()
            lead = self.leader()
            if lead is not None and self.holder != not_identity and not self.replicas[lead].paused:
                return lead
            time.sleep(0.2)
        return None

    def current_leader(self) -> Replica | None:
        lead = self.wait_leader(timeout=30)
        return self.replicas[lead] if lead else None

    def fault(self, kind: str) -> None:
        self.fault_active = True
        try:
            getattr(self, "fault_" + kind.replace("-", "_"))()
        finally:
            self.fault_active = False
            self.quiet_since = self.now()

    def _begin(self, kind: str, r: Replica | None) -> Fault:
        self.probe_since = self.now()
        f = Fault(kind, time.time(), r.slot if r else None, r.pid if r else None)
        self.faults.append(f)
        self.marks.append((self.now(), MARKS[kind], kind))
        return f

    def _end(self, f: Fault, old_identity: str) -> None:
        lead = self.wait_leader(not_identity=old_identity if f.kind in ("kill-9", "sigstop") else "")
        f.recovered = time.time()
        if f.slot is not None:
            starts = [e for e, _ in self.replicas[f.slot].starts if e > f.at]
            f.old_restarted = starts[0] if starts else None
        self.say(
            f"{f.kind}: replica {lead} holds the Lease {f.recovered - f.at:.1f}s after the fault"
            if lead
            else f"{f.kind}: no leader {f.recovered - f.at:.0f}s after the fault"
        )

    def fault_kill_9(self) -> None:
        r = self.current_leader()
        if r is None or r.pid is None:
            self.say("kill -9: no leader to kill")
            return
        old = self.holder
        r.paused = True
        f = self._begin("kill-9", r)
        assert r.pid is not None
        r.killed_pids.add(r.pid)
        r.sp.kill()
        self.say(f"FAULT kill -9 of the leader, replica {r.slot} (pid {f.pid})")
        r.paused = False
        self._end(f, old)

    def fault_sigstop(self) -> None:
        r = self.current_leader()
        if r is None or r.pid is None:
            self.say("SIGSTOP: no leader to stop")
            return
        old = self.holder
        r.paused = True
        f = self._begin("sigstop", r)
        pid = r.pid
        hold = self.opts.lease + 4
        os.kill(pid, signal.SIGSTOP)
        self.say(f"FAULT SIGSTOP of the leader, replica {r.slot} (pid {pid}) for {hold:g}s")
        try:
            time.sleep(hold)
        finally:
            os.kill(pid, signal.SIGCONT)
        self.say(f"SIGCONT replica {r.slot} (pid {pid})")
        try:
            assert r.sp.proc is not None
            code = r.sp.proc.wait(20)
            f.note = f"the resumed process exited {code}"
        except Exception:
            f.note = "the resumed process was still running 20s after SIGCONT"
            self.say(f"note: replica {r.slot} (pid {pid}) still runs 20s after SIGCONT (deposed leader)")
        r.paused = False
        self._end(f, old)

    def fault_etcd_restart(self) -> None:
        r = self.current_leader()
        f = self._begin("etcd-restart", r)
        t = time.monotonic()
        cluster.stop_component("etcd", self.rd)
        self.say(f"FAULT etcd stopped (leader: replica {f.slot})")
        time.sleep(2)
        cluster.start_component("etcd", self.rd)
        f.back = time.time()
        self.say(f"etcd started again ({time.monotonic() - t:.1f}s down)")
        self._end(f, "")

    def fault_apiserver_restart(self) -> None:
        r = self.current_leader()
        f = self._begin("apiserver-restart", r)
        t = time.monotonic()
        self.say(f"FAULT kube-apiserver restart (SIGTERM, SIGKILL after 5s, 2s down; leader: replica {f.slot})")
        tries = restart_apiserver(self.rd, down_seconds=2, grace_seconds=5, audit=True)
        f.back = time.time()
        if tries > 1:
            f.note = f"kube-apiserver needed {tries} starts (see the output)"
        self.say(f"kube-apiserver ready again ({time.monotonic() - t:.1f}s)")
        self._end(f, "")

    # --- the run ----------------------------------------------------------------------------------------------

    def schedule(self) -> list[tuple[float, str]]:
        total = self.opts.seconds
        ev: list[tuple[float, str]] = []
        faults = list(self.opts.faults)
        if total < 120:
            faults = [f for f in faults if f in ("kill-9", "sigstop")]
        span = self.opts.fault_span if self.opts.fault_span is not None else (0.4 if total >= 600 else 1.0)
        for i, kind in enumerate(faults):
            ev.append((total * span * (i + 1) / (len(faults) + 1), kind))
        if self.opts.maintenance:
            period = min(180.0, total / 5)
            k = 0
            while (k + 0.5) * period < total - 15:
                ev.append(((k + 0.5) * period, "node" if k % 2 == 0 else "slice"))
                k += 1
        return sorted(ev)

    def run(self) -> None:
        o = self.opts
        self.audit = AuditTail(Path(self.rd) / "audit.log")
        self.setup()
        self.podwatch = SoakPodWatch(self.kube, self.ns, 10**9).start()
        self.t0, self.m0 = time.time(), time.monotonic()
        self.start_replicas()
        for r in self.replicas.values():
            self.spawn(lambda r=r: self.supervise(r), f"supervise-{r.slot}")
        self.spawn(self.sampler, "sampler")
        self.spawn(self.checker, "checker")
        run_start = self.now()
        churn = threading.Thread(target=self.churn, name="churn", daemon=True)
        churn.start()
        events = self.schedule()
        self.say(
            f"soak for {o.minutes:g} min: churn <= {o.rate:g} pods/s, lifetime {o.lifetime[0]:g}-"
            f"{o.lifetime[1]:g}s, events: " + ", ".join(f"{k}@{t:.0f}s" for t, k in events)
        )
        skipped = [f for f in o.faults if f not in {k for _, k in events}]
        if skipped:
            self.say(f"faults left out in a run this short: {', '.join(skipped)}")
        end = run_start + o.seconds
        next_status = self.now() + 30
        for t_ev, kind in [*events, (o.seconds, "end")]:
            while self.now() < run_start + t_ev and self.now() < end:
                time.sleep(min(1.0, max(0.05, run_start + t_ev - self.now())))
                if self.now() >= next_status:
                    next_status = self.now() + 30
                    self.status()
            if kind == "end" or self.now() >= end:
                break
            try:
                if kind == "node":
                    self.marks.append((self.now(), "n", "node re-created"))
                    self.node_cycle()
                elif kind == "slice":
                    self.marks.append((self.now(), "s", "slice republished"))
                    self.slice_republish()
                else:
                    self.fault(kind)
            except (KubeError, TimeoutError, cluster.ClusterError) as e:
                self.violation(f"event-{kind}-{t_ev}", f"{kind} at {t_ev:.0f}s could not be carried out: {e}")
        self.churn_stop.set()
        churn.join(30)
        self.say("churn stopped; final checks")
        time.sleep(max(self.opts.check_interval, 2))
        self.status()

    def status(self) -> None:
        u = self.util[-1] if self.util else (0, 0.0, 0, 0, 0)
        rss = {s.slot: s.rss_mib for s in self.rss[-4:]}
        binds = len(self.fence.binds) if self.fence else 0
        self.say(
            f"status: GPUs in use {u[1] * 100:5.1f}%, pods {u[2]} ({u[3]} bound, {u[4]} pending), leader "
            f"{self.leader() or '-'}, RSS "
            + ", ".join(f"{k} {v:.0f} MiB" for k, v in sorted(rss.items()))
            + f", Bindings {binds}, violations {len(self.violations)}"
        )

    def stop_replicas(self) -> None:
        for r in self.replicas.values():
            r.stopping = True
        for r in self.replicas.values():
            if r.sp.proc is not None and r.sp.alive:
                self.terminated[r.slot] = time.time()
                with contextlib.suppress(OSError):
                    os.kill(r.sp.proc.pid, signal.SIGCONT)
                r.sp.stop()
                e = r.reap()
                if e is not None:
                    self.say(f"replica {r.slot} (pid {e.pid}) stopped: exit {e.code}")
                    if not e.expected:
                        self.violation(f"exit-{e.pid}", f"replica {r.slot} (pid {e.pid}) exited {e.code} on SIGTERM")
        self.stop_event.set()
        for t in self.threads:
            t.join(15)
        if self.podwatch is not None:
            self.podwatch.stop()

    # --- the report ---------------------------------------------------------------------------------------------

    def report(self) -> Result:
        o = self.opts
        time.sleep(1.0)
        self.check_fence()
        fence = self.fence or FenceResult()
        tracebacks: list[str] = []
        for r in self.replicas.values():
            r.log.scan()
            r.log.flush()
            tracebacks += r.log.tracebacks
        t_end = max(self.now(), 1.0)
        lines: list[str] = [
            "",
            "=" * 100,
            f"soak summary ({o.minutes:g} min, {o.nodes} nodes x {o.gpus} GPUs, seed {o.seed}, out {self.out})",
            "=" * 100,
        ]
        with (self.out / "audit-replicas.jsonl").open("w") as f:
            for e in self.audit_entries:
                f.write(json.dumps(dataclasses.asdict(e)) + "\n")

        # workload
        s = self.stats
        pw = self.podwatch
        lat_all: list[float] = []
        lat_quiet: list[float] = []  # outside fault windows
        lat_placeable: list[float] = []  # ... and never refused (no PodScheduled=False seen): placeable at once
        by_kind: dict[str, list[float]] = {}
        kind_of = {v: k for k, v in UNIT_PREFIX.items()}
        windows = [(f.at - self.t0, (f.recovered or f.at) - self.t0 + 5) for f in self.faults]
        if pw is not None:
            for name, bound in pw.bound.items():
                c = self.created_at.get(name)
                if c is None:
                    continue
                b = bound - self.m0
                lat_all.append(b - c)
                kind = kind_of.get(name[:2], "?")
                if kind == "gpu":
                    kind += name.rsplit("-g", 1)[-1]
                by_kind.setdefault(kind, []).append(b - c)
                if not any(a <= b and c <= z for a, z in windows):
                    lat_quiet.append(b - c)
                    if name not in pw.refused:
                        lat_placeable.append(b - c)
        utils = [u[1] for u in self.util if u[0] > 30]
        lines.append(
            f"duration {t_end / 60:.1f} min; units created {dict(s.units)}; pods created {s.pods_created}, "
            f"bound {len(pw.bound) if pw else '?'}, deleted by the churn {s.pods_deleted}, drained "
            f"{s.pods_drained}, gone otherwise (preempted) {s.pods_vanished}; units never bound and given up "
            f"{s.units_given_up}; create errors {s.create_errors}"
        )
        binds_by = Counter(b[1] for b in fence.binds)
        lines.append(
            f"Bindings (audit log) {len(fence.binds)}: "
            + ", ".join(f"replica {k} {v}" for k, v in sorted(binds_by.items()))
        )
        if utils:
            lines.append(
                f"GPU utilisation after the first 30 s: min {min(utils) * 100:.0f}%, mean "
                f"{sum(utils) / len(utils) * 100:.0f}%, max {max(utils) * 100:.0f}%"
            )

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}s"

        lines.append(
            f"bind latency (created -> nodeName seen), {len(lat_all)} pods: p50 "
            f"{ms(percentile(lat_all, 50))}, p99 {ms(percentile(lat_all, 99))}, max "
            f"{ms(max(lat_all, default=None))}; outside "
            f"fault windows ({len(lat_quiet)} pods): p50 {ms(percentile(lat_quiet, 50))}, p99 "
            f"{ms(percentile(lat_quiet, 99))}; outside fault windows and never refused (placeable at once, "
            f"{len(lat_placeable)} pods): p50 {ms(percentile(lat_placeable, 50))}, p99 "
            f"{ms(percentile(lat_placeable, 99))}"
        )
        lines.append(
            "  by kind (all pods): "
            + "; ".join(
                f"{k} {len(v)} p50 {ms(percentile(v, 50))} p99 {ms(percentile(v, 99))}"
                for k, v in sorted(by_kind.items())
            )
        )

        pending = [p for p in self.last_pods if not p["spec"].get("nodeName")]
        if pending:
            why: Counter[str] = Counter()
            for p in pending:
                cond = next(
                    (c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {}
                )
                msg = re.sub(r"\b(soak-[0-9a-f]{6}/)?[a-z]{2}\d{5}-[a-z0-9-]+", "<name>", cond.get("message") or "-")
                why[f"{(p['metadata'].get('labels') or {}).get(KIND_LABEL, '?')}: {msg[:150]}"] += 1
            lines.append(f"pending at the end: {len(pending)} pod(s); their PodScheduled messages:")
            lines += [f"  {n:3d} x {m}" for m, n in why.most_common(6)]

        # takeovers
        lines.append("")
        lines.append(
            f"faults (lease {o.lease:g}s, renew deadline {o.renew:g}s, retry {o.retry:g}s; times relative "
            f"to the fault):"
        )
        tks = takeovers(self.faults, fence, {r.slot: [e for e, _ in r.starts] for r in self.replicas.values()})
        for tk in tks:
            lines.append("  " + tk.line(o.lease, self.t0) + (f"; {tk.fault.note}" if tk.fault.note else ""))
        if not tks:
            lines.append("  (none ran)")
        left_out = [k for k in o.faults if k not in {f.kind for f in self.faults}]
        if left_out:
            lines.append(f"  not run: {', '.join(left_out)}")

        # replicas
        lines.append("")
        lines.append("replicas:")
        for r in self.replicas.values():
            ex = ", ".join(f"pid {e.pid} exit {e.code} at {self.at(e.at):.0f}s ({e.why})" for e in r.exits)
            lines.append(f"  {r.slot} ({SLOT_USERS[r.slot][0]}): {len(r.starts)} process(es); exits: {ex or 'none'}")
            if r.log.errors:
                lines.append(f"     error lines: {dict(r.log.errors)}")
            writes = fence.writes.get(r.slot, {})
            top = sorted(writes.items(), key=lambda kv: -kv[1])[:8]
            lines.append("     writes: " + ", ".join(f"{k} {v}" for k, v in top))

        # RSS
        warm = min(0.25 * o.seconds, 180.0)
        seg_warm = o.leader_warmup if o.seconds >= 600 else 30.0
        segs = leader_segments(self.rss, warm, seg_warm, 3 * o.rss_interval)
        slope = pooled_slope(segs)
        covered = sum(g[-1][0] - g[0][0] for g in segs) / 60
        gated = o.gate_slope and covered >= o.slope_min_minutes
        lines.append("")
        lines.append(
            f"RSS (MiB) every {o.rss_interval:g}s; warm-up {warm:.0f}s of the run and {seg_warm:.0f}s of "
            "each leadership stretch:"
        )
        for (slot, pid), (sl, mins) in sorted(process_slopes(self.rss, warm).items()):
            ss = [x for x in self.rss if x.slot == slot and x.pid == pid]
            led = sum(1 for x in ss if x.leader) * o.rss_interval / 60
            lines.append(
                f"  {slot} pid {pid}: {ss[0].rss_mib:.1f} at {ss[0].t:.0f}s -> {ss[-1].rss_mib:.1f} at "
                f"{ss[-1].t:.0f}s (max {max(x.rss_mib for x in ss):.1f}); led {led:.1f} min; slope after "
                f"warm-up {'-' if sl is None else f'{sl:+.1f} MiB/h'} over {mins:.1f} min"
            )
        verdict = (
            "no leader samples after warm-up"
            if slope is None
            else f"{slope:+.1f} MiB/h over {covered:.1f} min in {len(segs)} leadership stretch(es)"
        )
        if slope is None or not gated:
            why = (
                "not gated: "
                + (f"only {covered:.1f} min of leader samples after warm-up, the gate needs {o.slope_min_minutes:g}")
                if o.gate_slope
                else "not gated (report only)"
            )
        else:
            why = f"FAIL: above {o.max_slope:g} MiB/h" if slope > o.max_slope else f"ok (<= {o.max_slope:g} MiB/h)"
        lines.append(f"  leader RSS slope: {verdict}; {why}")
        marks = [(t, c) for t, c, _ in self.marks]
        lines += terminal_plot(self.rss, marks, t_end)
        lines.append(
            "  (events: K kill -9, S SIGSTOP, E etcd restart, A apiserver restart, n node re-created, "
            "s slice republished)"
        )
        spans = [(sl, a - self.t0, b - self.t0) for sl, a, b in leader_spans(fence.lease_writes, o.lease, time.time())]
        title = f"dra-scheduler soak: RSS of two leader-elected replicas ({o.minutes:g} min); leader slope " + (
            "-" if slope is None else f"{slope:+.1f} MiB/h"
        )
        (self.out / "rss.svg").write_text(
            rss_svg(self.rss, spans, [(t, lab) for t, _, lab in self.marks], t_end, title)
        )
        lines.append(f"  plot: {self.out / 'rss.svg'}; samples: {self.out / 'rss.csv'}")

        # violations
        lines.append("")
        lines.append(f"violations: {len(self.violations)}")
        if len(self.violations) > 1:
            lines += [f"  {n:4d} x {what}" for what, n in violation_kinds(self.violations).most_common()]
            lines.append("  each:")
        lines += ["  " + v.replace("\n", "\n  ") for v in self.violations]
        lines.append(f"tracebacks: {len(tracebacks)}")
        lines += ["  " + t[:3000].replace("\n", "\n  ") for t in tracebacks]
        if fence.event_violations:
            lines.append(f"Events written without the Lease (not failed on): {len(fence.event_violations)}")
            lines += ["  " + v for v in fence.event_violations[:20]]
        if self.notes:
            lines.append("notes:")
            lines += ["  " + n for n in self.notes]
        result = Result(
            list(self.violations), tracebacks, list(fence.event_violations), slope, covered, gated, {}, self.out
        )
        result.summary = {
            "minutes": o.minutes,
            "nodes": o.nodes,
            "gpus_per_node": o.gpus,
            "rate": o.rate,
            "seed": o.seed,
            "duration_s": t_end,
            "units": dict(s.units),
            "pods_created": s.pods_created,
            "pods_bound": len(pw.bound) if pw else None,
            "pods_deleted": s.pods_deleted,
            "pods_drained": s.pods_drained,
            "pods_preempted_or_gone": s.pods_vanished,
            "bindings": len(fence.binds),
            "bindings_by_replica": binds_by,
            "bind_latency_s": {
                "p50": percentile(lat_all, 50),
                "p99": percentile(lat_all, 99),
                "p50_outside_faults": percentile(lat_quiet, 50),
                "p99_outside_faults": percentile(lat_quiet, 99),
                "p50_placeable_at_once": percentile(lat_placeable, 50),
                "p99_placeable_at_once": percentile(lat_placeable, 99),
                "by_kind": {
                    k: {"pods": len(v), "p50": percentile(v, 50), "p99": percentile(v, 99)} for k, v in by_kind.items()
                },
            },
            "utilisation": {"min": min(utils, default=None), "max": max(utils, default=None)},
            "takeovers": [
                {
                    "fault": tk.fault.kind,
                    "at_s": tk.fault.at - self.t0,
                    "leader": tk.fault.slot,
                    "lease_expiry_s": None if tk.last_renewal is None else tk.last_renewal + o.lease - tk.fault.at,
                    "acquired_s": None if tk.acquired is None else tk.acquired - tk.fault.at,
                    "acquired_by": tk.acquired_by,
                    "first_binding_s": None if tk.first_bind is None else tk.first_bind - tk.fault.at,
                    "note": tk.fault.note,
                }
                for tk in tks
            ],
            "rss": {
                f"{slot}/{pid}": {"slope_mib_per_h": sl, "minutes": m}
                for (slot, pid), (sl, m) in process_slopes(self.rss, warm).items()
            },
            "leader_slope_mib_per_h": slope,
            "leader_slope_minutes": covered,
            "slope_gated": gated,
            "max_slope_mib_per_h": o.max_slope,
            "violations": self.violations,
            "tracebacks": tracebacks,
            "event_writes_without_lease": fence.event_violations,
        }
        ok = result.ok
        lines.append("")
        lines.append(
            "RESULT: "
            + ("PASS" if ok else "FAIL")
            + (
                ""
                if ok
                else f" ({len(self.violations)} violation(s), {len(tracebacks)} traceback(s)"
                + (", leader RSS slope above the gate" if result.slope_failed else "")
                + ")"
            )
        )
        text = "\n".join(lines)
        print(text, flush=True)
        self.timeline.write(text + "\n")
        (self.out / "summary.json").write_text(json.dumps(result.summary, indent=2, default=str) + "\n")
        return result

    # --- clean-up ---------------------------------------------------------------------------------------------

    def cleanup(self) -> None:
        """Delete everything the run created (pods first: the claim controller then frees their claims)."""
        k = self.kube
        steps: list[tuple[str, Callable[[], Any]]] = []
        if self.ns:
            ns = self.ns
            steps += [
                (
                    "pods",
                    lambda: k.request(
                        "DELETE",
                        KINDS["Pod"].path(ns),
                        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                    ),
                ),
                ("pods gone", lambda: wait_for(lambda: not k.list("Pod", ns), 60, "soak pods deleted", 0.5)),
                (
                    "PodGroup finalizers",
                    lambda: [release_podgroup(k, pg["metadata"]["name"], ns) for pg in k.list(UPSTREAM_PODGROUP, ns)],
                ),
                ("namespace", lambda: k.delete("Namespace", ns)),
            ]
        steps += [
            ("fleet", lambda: delete_fleet(k, FLEET)),
            (
                "lease",
                lambda: k.request(
                    "DELETE",
                    f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}",
                    retry_for=10,
                ),
            ),
        ]
        for name in (PC_LOW, PC_HIGH):
            steps.append((f"PriorityClass {name}", lambda name=name: k.delete("PriorityClass", name)))
        for name in self.created_objects["DeviceClass"]:
            steps.append((f"DeviceClass {name}", lambda name=name: k.delete("DeviceClass", name)))
        for name in self.created_objects["ClusterRoleBinding"]:
            steps.append(
                (
                    f"ClusterRoleBinding {name}",
                    lambda name=name: k.request(
                        "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}", retry_for=10
                    ),
                )
            )
        for name in self.created_objects["FlowSchema"]:
            steps.append(
                (
                    f"FlowSchema {name}",
                    lambda name=name: k.request(
                        "DELETE", f"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{name}", retry_for=10
                    ),
                )
            )
        if self.ns:
            ns = self.ns
            steps.append(
                (
                    "namespace gone",
                    lambda: wait_for(lambda: k.try_get("Namespace", ns) is None, 90, f"namespace {ns} deleted", 1.0),
                )
            )
        for what, fn in steps:
            try:
                fn()
            except (KubeError, TimeoutError) as e:
                if not (isinstance(e, KubeError) and e.status == 404):
                    self.say(f"clean-up: {what}: {e}")
                if what == "namespace gone":
                    self.namespace_diagnostics()

    def namespace_diagnostics(self) -> None:
        """What keeps the namespace from going: its conditions and the objects left with finalizers."""
        k, ns = self.kube, self.ns
        with contextlib.suppress(KubeError):
            obj = k.try_get("Namespace", ns) or {}
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c.get("status") == "True":
                    self.say(f"  namespace {ns}: {c.get('type')}: {c.get('message')}")
            for kind in ("Pod", "ResourceClaim", "PodGroup", UPSTREAM_PODGROUP):
                for o in k.list(kind, ns)[:10]:
                    st = o.get("status") or {}
                    self.say(
                        f"  left: {kind} {o['metadata']['name']} finalizers {o['metadata'].get('finalizers')} "
                        f"deleting {bool(o['metadata'].get('deletionTimestamp'))} allocated "
                        f"{bool(st.get('allocation'))} reservedFor {st.get('reservedFor')}"
                    )
        self.timeline.close()


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def cpu_pod(ns: str, name: str, anti: str, cpu: str = "2") -> JSON:
    """A CPU-only pod that may not share a node with the other pods of ``anti`` (required anti-affinity; none
    when ``anti`` is empty)."""
    spec: JSON = {
        "schedulerName": SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {FLEET_LABEL: FLEET},
        "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
    }
    if anti:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"soak-anti": anti}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"soak-anti": anti} if anti else {}},
        "spec": spec,
    }


PODGROUP_PROTECTION = "scheduling.k8s.io/podgroup-protection"


def release_podgroup(kube: Kube, name: str, ns: str) -> None:
    """Drop the ``scheduling.k8s.io/podgroup-protection`` finalizer of a scheduling.k8s.io PodGroup whose pods
    are gone, as kube-controller-manager's podgroup-protection-controller does. The e2e control plane does not
    run that controller (e2e/cluster.sh --controllers), so without this every deleted v1beta1 PodGroup stays
    Terminating and its namespace can never be deleted."""
    with contextlib.suppress(KubeError):
        pg = kube.try_get(UPSTREAM_PODGROUP, name, ns)
        fins = (pg or {}).get("metadata", {}).get("finalizers") or []
        if PODGROUP_PROTECTION in fins:
            kube.request(
                "PATCH",
                KINDS[UPSTREAM_PODGROUP].path(ns, name),
                [
                    {
                        "op": "replace",
                        "path": "/metadata/finalizers",
                        "value": [f for f in fins if f != PODGROUP_PROTECTION],
                    }
                ],
                content_type="application/json-patch+json",
                retry_for=10,
            )


def _ready(node: JSON) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _post(kube: Kube, path: str, obj: JSON) -> bool:
    """Create; False when it already exists (then it is not ours to delete)."""
    try:
        kube.request("POST", path, obj)
        return True
    except KubeError as e:
        if e.status == 409:
            return False
        raise


def _env_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        key, sep, value = raw.strip().partition("=")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def _kubeconfig(server: str, ca_b64: str, user: str, token: str) -> str:
    return f"""apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: {server}
    certificate-authority-data: {ca_b64}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: soak
  context:
    cluster: e2e
    user: {user}
current-context: soak
"""


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def audit_enabled(run_dir: str) -> bool:
    """Whether the running kube-apiserver writes the audit log (its command line has --audit-log-path)."""
    try:
        pid = int((Path(run_dir) / "pids" / "kube-apiserver.pid").read_text().split()[0])
        return b"--audit-log-path" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return False


def restart_apiserver(run_dir: str, down_seconds: float, grace_seconds: int, audit: bool, attempts: int = 3) -> int:
    """``cluster.restart_apiserver`` with the audit log on or off, tried again when the new kube-apiserver exits
    during start-up (seen once: "bind: address already in use" on its port right after a SIGKILL; the e2e ports
    are in the ephemeral range, so a client reconnecting meanwhile can hold it). Returns the attempts used."""
    for attempt in range(1, attempts + 1):
        try:
            cluster.restart_apiserver(
                run_dir,
                down_seconds=down_seconds,
                grace_seconds=grace_seconds,
                env={"E2E_AUDIT_LOG": "1" if audit else "0"},
            )
            return attempt
        except cluster.ClusterError as e:
            if attempt == attempts:
                raise
            why = next((ln for ln in str(e).splitlines() if "command failed" in ln or "error:" in ln), "")
            print(f"kube-apiserver restart failed ({why.strip()[:300]}); trying again in 2s", flush=True)
            time.sleep(2)
    return attempts


def run(info: cluster.ClusterInfo, opts: Options, out: Path, restore_audit: bool = True) -> Result:
    """The soak on a running control plane; cleans up what it created. When the API server runs without the
    audit log it is restarted with it first (and, with ``restore_audit``, without it again at the end)."""
    out.mkdir(parents=True, exist_ok=True)
    turned_on = False
    if not audit_enabled(info.run_dir):
        print("kube-apiserver runs without the audit log: restarting it with E2E_AUDIT_LOG=1", flush=True)
        restart_apiserver(info.run_dir, down_seconds=0, grace_seconds=0, audit=True)
        turned_on = True
    soak = Soak(info, opts, out)
    try:
        soak.run()
    except BaseException as e:
        first = str(e).splitlines()[0] if str(e) else ""
        soak.violation("driver", f"the soak driver failed ({type(e).__name__}: {first}); stopping the replicas")
        raise
    finally:
        soak.churn_stop.set()
        soak.stop_replicas()
        try:
            result = soak.report()
        finally:
            soak.cleanup()
            if turned_on and restore_audit:
                print("restarting kube-apiserver without the audit log again", flush=True)
                restart_apiserver(info.run_dir, down_seconds=0, grace_seconds=0, audit=False)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.soak", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--rate", type=float, default=6.0, help="pods created per second at most")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="output dir (default /tmp/dra-scheduler-soak/<time>)")
    ap.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds a stale reservation, partial gang or pending pod without a reason is tolerated",
    )
    ap.add_argument(
        "--lifetime",
        type=float,
        nargs=2,
        default=(15.0, 90.0),
        metavar=("MIN", "MAX"),
        help="seconds a unit of pods lives (uniform)",
    )
    ap.add_argument("--max-slope", type=float, default=20.0, help="leader RSS slope gate, MiB/h")
    ap.add_argument(
        "--slope-min-minutes",
        type=float,
        default=6.0,
        help="minutes of leader samples after warm-up needed before the slope gates the run",
    )
    ap.add_argument(
        "--leader-warmup",
        type=float,
        default=360.0,
        help="seconds of each leadership stretch left out of the slope (runs of 10 min or more)",
    )
    ap.add_argument(
        "--fault-span",
        type=float,
        default=None,
        help="share of the run the faults fall in (default 0.4 from 10 min, 1.0 in shorter runs)",
    )
    ap.add_argument("--faults", default=",".join(ALL_FAULTS), help=f"comma-separated subset of {','.join(ALL_FAULTS)}")
    ap.add_argument("--no-maintenance", action="store_true", help="no node re-creation / slice republishing")
    ap.add_argument("--run-dir", default=RUN_DIR, help="control plane run dir (reused when healthy)")
    ap.add_argument("--keep", action="store_true", help="leave the control plane running")
    args = ap.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    bad = [f for f in faults if f not in ALL_FAULTS]
    if bad:
        ap.error(f"unknown fault(s) {bad}; choose from {ALL_FAULTS}")
    opts = Options(
        minutes=args.minutes,
        nodes=args.nodes,
        gpus=args.gpus,
        rate=args.rate,
        seed=args.seed,
        grace=args.grace,
        lifetime=tuple(args.lifetime),
        max_slope=args.max_slope,
        slope_min_minutes=args.slope_min_minutes,
        leader_warmup=args.leader_warmup,
        fault_span=args.fault_span,
        faults=faults,
        maintenance=not args.no_maintenance,
    )
    out = args.out or Path("/tmp/dra-scheduler-soak") / datetime.now().strftime("%Y%m%d-%H%M%S")
    rd = args.run_dir
    was_up = cluster.status(rd)[0]
    t = time.monotonic()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}: control plane in {rd} "
        f"({'reused' if was_up else 'starting'}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})",
        flush=True,
    )
    info = cluster.start(rd, env={"E2E_PORTS": "auto", "E2E_AUDIT_LOG": "1"})
    print(
        f"control plane ready in {time.monotonic() - t:.1f}s ({info.server}, Kubernetes {info.k8s_version}); "
        f"output in {out}",
        flush=True,
    )
    try:
        result = run(info, opts, out, restore_audit=True)
    finally:
        if not was_up and not args.keep:
            with contextlib.suppress(cluster.ClusterError):
                cluster.stop(rd)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
