"""Live deep-backlog benchmark, side by side with kube-scheduler 1.37.2 (issue #24, item 6): ``make backlog``.

    python -m e2e.backlog [--nodes 200] [--gpus-per-node 8] [--pods|--backlog 5000] [--rate 20] [--window 60]
                          [--after 30] [--idle 30] [--rounds 1] [--only ours|theirs] [--seed 24]
                          [--json FILE] [--keep]

One local control plane (own run dir, free ports; no audit log), ``--nodes`` kwok nodes x ``--gpus-per-node``
H100 (the NVIDIA driver's ResourceSlices, as ``make throughput``). Per round, for dra-scheduler (a fresh
``dra-scheduler run`` process, ``schedulerName: dra-scheduler``, own token) and upstream kube-scheduler 1.37.2
(``e2e/cluster.sh kube-scheduler-up``, default profile, ``default-scheduler``), alternating, in the same namespace
with the same pod names, client QPS 5000 / burst 10000 for both:

1. **fill**: one one-GPU pod per GPU (``fill-NNNN``, priority 0, claim from a ResourceClaimTemplate), bound by
   the scheduler under test (not pre-bound): the fleet is full.
2. **backlog**: ``--pods`` one-GPU pods (``wait-NNNN``) created in index order (16 threads), each with one of
   three PriorityClasses (``backlog-high`` 3000 / ``-mid`` 2000 / ``-low`` 1000, shares 20/30/50 %, drawn with
   ``--seed``; ``preemptionPolicy: Never``, so the backlog waits for devices and does not evict the fill). A
   pod's *creation order* is the resourceVersion its create returned (the order every watcher sees them).
   Then the harness waits until every backlog pod has ``PodScheduled=False`` (the scheduler tried it), and
   until the scheduler is quiet (under 0.05 cores over 3 s; at most 180 s).
3. **idle**: the scheduler process's CPU-seconds (``/proc/<pid>/stat``) over ``--idle`` s with nothing changing
   ("CPU while the backlog just waits"), and its RSS.
4. **churn**: fill pods (a seeded shuffle; then backlog pods bound earliest, if the window needs more) deleted
   with grace 0 at ``--rate``/s for ``--window`` s. kube-controller-manager's resourceclaim controller then
   deallocates and deletes their claims. A claim watch records, per device, every **release**: the moment the
   watch saw its claim lose ``status.allocation`` (or be deleted while allocated); a pod watch records when each
   backlog pod was first seen with ``spec.nodeName`` (**bind**). After the window the harness waits until every
   released device is allocated again, at most ``--after`` s.
5. **figures**: for each backlog pod bound from the window's start on: its device (its claim's allocation) and
   **release→bind** = bind - the device's latest release before the claim's allocation was seen (p50/p99/max;
   release→allocation too); binds in the window and in the ``--after`` s after it; devices released vs reused;
   the scheduler's CPU-seconds in the window; and **order fidelity** (:func:`order_fidelity`) against the
   queue order kube-scheduler's PrioritySort uses (priority desc, then creation asc).
6. **checks** every round: no device allocated to two claims in any state the claim watch saw, and
   ``e2e.fleet.check_state`` over the final pods and claims; then the scheduler is stopped and the namespace
   cleaned (``e2e.throughput_live.clean_namespace``).

Output: per round a block, then a table per scheduler (medians over rounds) with ratios ours/theirs, machine
and date, on stdout and as JSON (``--json``, default ``<run dir>.json``).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2e import cluster
from e2e.fleet import (
    JSON,
    Kube,
    KubeError,
    allocated_devices,
    check_state,
    claim_template,
    create_scale_fleet,
    gpu_pod,
    namespace,
    pod_scheduled_condition,
    priority_class,
    wait_for,
)
from e2e.throughput import SCHEDULER_NAMES, USERS, Bench, Launched, compile_bytecode, launch
from e2e.throughput_live import (
    CpuSnapshot,
    PodWatch,
    clean_namespace,
    component_pids,
    cpu_seconds,
    scheduler_identity,
)
from e2e.throughput_report import OURS, REGIMES, THEIRS, percentile

RUN_DIR = os.environ.get("E2E_BACKLOG_RUN_DIR", "/tmp/dra-scheduler-e2e-backlog")
NAMESPACE = "backlog"
TEMPLATE = "one-gpu"
FLEET = "bl"
#: the backlog's PriorityClasses: (name, value, share of the backlog)
PRIORITIES: tuple[tuple[str, int, float], ...] = (
    ("backlog-high", 3000, 0.2), ("backlog-mid", 2000, 0.3), ("backlog-low", 1000, 0.5))
QUIET_CORES = 0.05  # the scheduler counts as quiet below this over QUIET_SAMPLE seconds
QUIET_SAMPLE = 3.0
Device = tuple[str, str, str]


# --------------------------------------------------------------------------------------------------
# watches
# --------------------------------------------------------------------------------------------------


@dataclass
class BacklogPods(PodWatch):
    """:class:`PodWatch` that also records when each pod was first seen ``PodScheduled=False`` while unbound
    (``tried``) and the name of its (template) claim (``claim``)."""

    tried: dict[str, float] = field(default_factory=dict)
    claim: dict[str, str] = field(default_factory=dict)

    def _see(self, obj: JSON, now: float) -> None:
        super()._see(obj, now)
        name = obj["metadata"]["name"]
        if name not in self.claim:
            for s in (obj.get("status") or {}).get("resourceClaimStatuses") or []:
                if s.get("resourceClaimName"):
                    self.claim[name] = s["resourceClaimName"]
        if name not in self.tried and not obj["spec"].get("nodeName"):
            c = pod_scheduled_condition(obj)
            if c is not None and c.get("status") == "False":
                self.tried[name] = now


@dataclass
class ClaimWatch(PodWatch):
    """:class:`PodWatch` on ResourceClaims: per claim when its allocation was first seen (``allocated``) and
    its devices (``devices``); per device every release (``releases``: allocation gone, or the claim deleted
    while allocated); and ``violations``: a device seen allocated to two claims at once."""

    kind: str = "ResourceClaim"
    allocated: dict[str, float] = field(default_factory=dict)
    devices: dict[str, list[Device]] = field(default_factory=dict)
    releases: dict[Device, list[float]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    _held: dict[str, list[Device]] = field(default_factory=dict)
    _owner: dict[Device, str] = field(default_factory=dict)

    def _see(self, obj: JSON, now: float) -> None:
        name = obj["metadata"]["name"]
        self.created.setdefault(name, now)
        devs, held = allocated_devices(obj), self._held.get(name)
        if held and devs != held:
            self._release(name, now)
        if devs and devs != held:
            self.allocated.setdefault(name, now)
            self.devices[name] = devs
            self._held[name] = devs
            for d in devs:
                other = self._owner.get(d)
                if other is not None and other != name:
                    self.violations.append(f"device {'/'.join(d)} allocated to {other} and {name}")
                self._owner[d] = name

    def _gone(self, obj: JSON, now: float) -> None:
        self._release(obj["metadata"]["name"], now)

    def _release(self, name: str, now: float) -> None:
        for d in self._held.pop(name, None) or []:
            self.releases.setdefault(d, []).append(now)
            if self._owner.get(d) == name:
                del self._owner[d]


# --------------------------------------------------------------------------------------------------
# the pure figures
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delays:
    count: int
    p50: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Delays:
        if not values:
            return cls(0, None, None, None)
        return cls(len(values), percentile(values, 0.5), percentile(values, 0.99), max(values))


def latest_before(times: Sequence[float], t: float) -> float | None:
    """The latest of the sorted ``times`` at or before ``t`` (None when none is)."""
    i = bisect.bisect_right(times, t)
    return times[i - 1] if i else None


def order_fidelity(keys: Mapping[str, tuple[int, int]], binds: Sequence[str]) -> dict[str, Any]:
    """How closely ``binds`` (pod names in bind order) follow the queue order of ``keys`` (pod -> (priority,
    creation order); every pod of ``keys`` was pending when the first of ``binds`` bound; the smallest
    (-priority, creation) first, as kube-scheduler's PrioritySort).

    * ``in_order``: binds for which no pod earlier in the queue order was still pending (unbound) at that
      bind; ``in_order_share`` = that / binds (1.0 = a strict FIFO by priority then creation);
    * ``priority_respected``: binds for which no pod of a higher priority was still pending;
    * ``overtaken_mean`` / ``overtaken_max``: pods earlier in the queue order still pending at a bind
      (averaged over binds);
    * ``inversions``: pairs of bound pods bound in the opposite of their queue order, and
      ``inversion_share`` = that / all pairs of bound pods (0 = same order, 0.5 = random);
    * ``binds_by_priority``: binds per priority value.
    """
    order = sorted(keys, key=lambda n: (-keys[n][0], keys[n][1]))
    rank = {n: i for i, n in enumerate(order)}
    size = len(order)
    tree = [0] * (size + 1)  # Fenwick tree of bound ranks

    def add(i: int) -> None:
        i += 1
        while i <= size:
            tree[i] += 1
            i += i & -i

    def below(i: int) -> int:  # bound pods of rank < i
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    pending_by_prio = Counter(k[0] for k in keys.values())
    in_order = respected = inversions = 0
    overtaken: list[int] = []
    by_prio: Counter[int] = Counter()
    for seen, name in enumerate(binds):
        r = rank[name]
        prio = keys[name][0]
        ahead = r - below(r)
        overtaken.append(ahead)
        in_order += ahead == 0
        pending_by_prio[prio] -= 1
        respected += not any(c > 0 for p, c in pending_by_prio.items() if p > prio)
        inversions += seen - below(r + 1)  # bound earlier but later in the queue order
        add(r)
        by_prio[prio] += 1
    n = len(binds)
    pairs = n * (n - 1) // 2
    return {
        "binds": n,
        "in_order": in_order,
        "in_order_share": in_order / n if n else None,
        "priority_respected": respected,
        "priority_respected_share": respected / n if n else None,
        "overtaken_mean": statistics.fmean(overtaken) if overtaken else None,
        "overtaken_max": max(overtaken) if overtaken else None,
        "inversions": inversions,
        "inversion_share": inversions / pairs if pairs else None,
        "binds_by_priority": {str(p): c for p, c in sorted(by_prio.items(), reverse=True)},
    }


# --------------------------------------------------------------------------------------------------
# one round
# --------------------------------------------------------------------------------------------------


@dataclass
class Config:
    nodes: int = 200
    gpus_per_node: int = 8
    backlog: int = 5000
    rate: float = 20.0
    window: float = 60.0
    after: float = 30.0
    idle: float = 30.0
    seed: int = 24
    namespace: str = NAMESPACE
    fleet: str = FLEET
    template: str = TEMPLATE
    create_workers: int = 16
    quiet_timeout: float = 180.0
    timeout: float = 900.0  # for the fill to bind / the backlog to be tried

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass
class Result:
    scheduler: str
    index: int
    fill: int = 0
    fill_seconds: float = 0.0  # first fill create -> last fill bound
    backlog: int = 0
    tried_seconds: float = 0.0  # first backlog create -> every backlog pod PodScheduled=False
    quiet_seconds: float | None = None  # then until the scheduler was quiet (None: not within quiet_timeout)
    idle_seconds: float = 0.0
    idle_cpu: float = 0.0  # scheduler CPU-seconds over idle_seconds
    idle_cores: dict[str, float] = field(default_factory=dict)  # every component, over the idle period
    idle_binds: int = 0
    rss_mib: float | None = None  # the scheduler's VmRSS after the idle period
    deletes: int = 0
    delete_span: float = 0.0  # first to last delete issued
    released: int = 0  # distinct devices released from the window's start to the end
    reused: int = 0  # of those, allocated again to a backlog pod's claim by the end
    reuse_all_seconds: float | None = None  # window end -> every released device allocated again
    binds_window: int = 0
    binds_after: int = 0
    after_seconds: float = 0.0
    window_cpu: float = 0.0  # scheduler CPU-seconds over the window
    window_cores: dict[str, float] = field(default_factory=dict)
    after_cpu: float = 0.0  # scheduler CPU-seconds from the window's end to the end
    release_to_bind: Delays = field(default_factory=lambda: Delays.of([]))
    release_to_allocation: Delays = field(default_factory=lambda: Delays.of([]))
    unmatched: int = 0  # bound pods whose device had no release seen before its allocation
    order: dict[str, Any] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)


@dataclass
class Env:
    """What every round shares: the cluster and the bench state :func:`e2e.throughput.launch` needs."""

    kube: Kube
    bench: Bench
    run_dir: str


def setup(kube: Kube, info: cluster.ClusterInfo, run_dir: str, cfg: Config, own_identity: bool = True) -> Env:
    """The fleet (waits until every node is Ready), the namespace, the claim template, the PriorityClasses; a
    kubeconfig of dra-scheduler's own (``own_identity``; else it runs with the cluster's admin kubeconfig)."""
    t = time.monotonic()
    fleet = create_scale_fleet(kube, cfg.fleet, cfg.nodes, cfg.gpus_per_node, workers=16)
    wait_for(lambda: sum(1 for n in kube.list("Node", labelSelector=f"e2e.dra-scheduler.io/fleet={cfg.fleet}")
                         if any(c["type"] == "Ready" and c["status"] == "True"
                                for c in n["status"].get("conditions") or [])) == cfg.nodes,
             120, "every node Ready (kwok)", interval=0.5)
    print(f"fleet: {len(fleet.nodes)} nodes x {cfg.gpus_per_node} GPUs = {fleet.device_count()} devices, "
          f"{len(fleet.slices)} ResourceSlices, Ready in {time.monotonic() - t:.1f}s", flush=True)
    kube.create(namespace(cfg.namespace), exist_ok=True)
    kube.create(claim_template(cfg.namespace, cfg.template), exist_ok=True)
    for name, value, _ in PRIORITIES:
        kube.create(priority_class(name, value, "Never"), exist_ok=True)
    kc = scheduler_identity(kube, run_dir, info.server, USERS[OURS]) if own_identity else ""
    args = argparse.Namespace()
    return Env(kube, Bench(kube, info, run_dir, kc, None, args), run_dir)


def backlog_pods(cfg: Config, sched: str) -> tuple[list[JSON], list[JSON]]:
    """(fill pods, backlog pods) for ``sched``; the backlog's priorities drawn with ``cfg.seed``."""
    def pod(name: str) -> JSON:
        p = gpu_pod(cfg.namespace, name, template=cfg.template, fleet=cfg.fleet)
        p["spec"]["schedulerName"] = SCHEDULER_NAMES[sched]
        return p

    width = max(4, len(str(max(cfg.gpus, cfg.backlog))))
    fill = [pod(f"fill-{i:0{width}d}") for i in range(cfg.gpus)]
    rng = random.Random(cfg.seed)
    names, shares = [p[0] for p in PRIORITIES], [p[2] for p in PRIORITIES]
    waiting = []
    for i in range(cfg.backlog):
        p = pod(f"wait-{i:0{width}d}")
        p["spec"]["priorityClassName"] = rng.choices(names, shares)[0]
        waiting.append(p)
    return fill, waiting


def rss_mib(pid: int) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def wait_quiet(pid: int, timeout: float) -> float | None:
    """Seconds until the process used under :data:`QUIET_CORES` over :data:`QUIET_SAMPLE` s; None: not within
    ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        c0 = cpu_seconds(pid)
        time.sleep(QUIET_SAMPLE)
        if (cpu_seconds(pid) - c0) / QUIET_SAMPLE < QUIET_CORES:
            return time.monotonic() - t0
    return None


def check_round(kube: Kube, ns: str, tries: int = 3) -> list[str]:
    """``check_state`` over the namespace's pods and claims; a binding in flight can look like a violation
    for an instant, so a problem must persist over ``tries`` reads 1 s apart."""
    problems: list[str] = []
    for i in range(tries):
        problems = check_state(kube.list("Pod", ns), kube.list("ResourceClaim", ns))
        if not problems:
            return []
        if i + 1 < tries:
            time.sleep(1.0)
    return problems


def run_round(env: Env, sched: str, cfg: Config, index: int = 1, log: Any = print) -> Result:
    kube, ns = env.kube, cfg.namespace
    res = Result(sched, index, fill=cfg.gpus, backlog=cfg.backlog)
    fill, waiting = backlog_pods(cfg, sched)
    fill_names = [p["metadata"]["name"] for p in fill]
    wait_names = [p["metadata"]["name"] for p in waiting]
    prio_of = {name: value for name, value, _ in PRIORITIES}
    pods = BacklogPods(kube, ns, expect=10**9).start()
    claims = ClaimWatch(kube, ns, expect=10**9).start()
    pids = {k: v for k, v in component_pids(env.run_dir).items() if k != "kube-scheduler"}
    launched: Launched | None = None
    try:
        qps, burst = REGIMES["cpu"]
        launched = launch(env.bench, sched, qps, burst)
        pid = launched.pid
        allp = {**pids, "scheduler": pid}

        # 1. fill the fleet
        t = time.monotonic()
        kube.create_many(fill, workers=cfg.create_workers)
        wait_for(lambda: all(n in pods.bound for n in fill_names), cfg.timeout,
                 f"{sched}: every fill pod bound", interval=0.5)
        res.fill_seconds = max(pods.bound[n] for n in fill_names) - t
        log(f"  fill: {len(fill)} pods bound in {res.fill_seconds:.1f}s")

        # 2. the backlog
        t = time.monotonic()
        made = kube.create_many(waiting, workers=cfg.create_workers)
        created = {o["metadata"]["name"]: int(o["metadata"]["resourceVersion"]) for o in made}
        keys = {o["metadata"]["name"]: (int(o["spec"].get("priority") or prio_of[o["spec"]["priorityClassName"]]),
                                        created[o["metadata"]["name"]]) for o in made}
        log(f"  backlog: {len(made)} pods created in {time.monotonic() - t:.1f}s")
        wait_for(lambda: all(n in pods.tried or n in pods.bound for n in wait_names) and
                 len(claims.created) >= cfg.gpus + cfg.backlog, cfg.timeout,
                 f"{sched}: every backlog pod tried (PodScheduled=False)", interval=0.5)
        early = [n for n in wait_names if n in pods.bound]
        if early:
            raise RuntimeError(f"{sched}: {len(early)} backlog pods bound on a full fleet, e.g. {early[:3]}")
        res.tried_seconds = max(pods.tried[n] for n in wait_names) - t
        res.quiet_seconds = wait_quiet(pid, cfg.quiet_timeout)
        quiet = "not quiet" if res.quiet_seconds is None else f"quiet {res.quiet_seconds:.1f}s later"
        log(f"  backlog: every pod tried {res.tried_seconds:.1f}s after the first create; scheduler {quiet}")

        # 3. the backlog just waits
        bound_before = len(pods.bound)
        s0 = CpuSnapshot.take(allp)
        time.sleep(cfg.idle)
        s1 = CpuSnapshot.take(allp)
        res.idle_seconds = s1.at - s0.at
        res.idle_cpu = s1.procs["scheduler"] - s0.procs["scheduler"]
        res.idle_cores = s1.cores_since(s0)
        res.idle_binds = len(pods.bound) - bound_before
        res.rss_mib = rss_mib(pid)
        log(f"  idle: {res.idle_cpu:.2f} CPU-s over {res.idle_seconds:.1f}s, RSS {res.rss_mib or 0:.0f} MiB")

        # 4. churn
        victims = list(fill_names)
        random.Random(cfg.seed + 1).shuffle(victims)
        n_del = round(cfg.rate * cfg.window)
        deleted: set[str] = set()
        issued: list[float] = []

        def victim() -> str | None:
            while victims:
                v = victims.pop()
                if v not in deleted:
                    return v
            later = sorted((t, n) for n, t in dict(pods.bound).items() if n.startswith("wait-") and n not in deleted)
            return later[0][1] if later else None

        def delete(name: str) -> None:
            with contextlib.suppress(KubeError):
                kube.delete("Pod", name, ns, grace=0)

        t0 = time.monotonic()
        w0 = CpuSnapshot.take(allp)
        with ThreadPoolExecutor(max_workers=4) as pool:
            for i in range(n_del):
                delay = t0 + i / cfg.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                v = victim()
                if v is None:
                    break
                deleted.add(v)
                issued.append(time.monotonic())
                pool.submit(delete, v)
            rest = t0 + cfg.window - time.monotonic()
            if rest > 0:
                time.sleep(rest)
        w1 = CpuSnapshot.take(allp)
        t_end_window = w1.at
        res.deletes = len(deleted)
        res.delete_span = issued[-1] - issued[0] if issued else 0.0
        res.window_cpu = w1.procs["scheduler"] - w0.procs["scheduler"]
        res.window_cores = w1.cores_since(w0)

        awaited = set(wait_names)

        def settled() -> bool:
            """Every deleted pod's device released, every device released since the window's start allocated
            again, and as many waiting pods bound since then as pods were deleted (a scheduler writes the
            allocation before the Binding: the pod watch sees the bind later; kube-scheduler's lag there had
            ended the wait with 8 of 100 binds not yet seen)."""
            rel = {d: list(ts) for d, ts in dict(claims.releases).items()}
            if sum(1 for ts in rel.values() for x in ts if x >= t0) < len(deleted):
                return False
            if sum(1 for n, t in dict(pods.bound).items() if n in awaited and t >= t0) < len(deleted):
                return False
            last_alloc = {d: t for c, t in dict(claims.allocated).items() for d in claims.devices.get(c, [])}
            return all(last_alloc.get(d, -1.0) > ts[-1] for d, ts in rel.items() if ts and ts[-1] >= t0)

        deadline = t_end_window + cfg.after
        while time.monotonic() < deadline and not settled():
            time.sleep(0.25)
        t_end = time.monotonic()
        if settled():
            res.reuse_all_seconds = t_end - t_end_window
        res.after_seconds = t_end - t_end_window
        res.after_cpu = cpu_seconds(pid) - w1.procs["scheduler"]
        res.checks = check_round(kube, ns) + list(claims.violations) + [f"pod watch: {e}" for e in pods.errors] + [
            f"claim watch: {e}" for e in claims.errors]
    finally:
        if launched is not None:
            launched.stop()
        pods.stop()
        claims.stop()

    # 5. figures
    wait_set = set(wait_names)
    binds = sorted((t, n) for n, t in pods.bound.items() if n in wait_set and t >= t0)
    res.binds_window = sum(1 for t, _ in binds if t <= t_end_window)
    res.binds_after = sum(1 for t, _ in binds if t_end_window < t <= t_end)
    releases = {d: sorted(ts) for d, ts in claims.releases.items()}
    to_bind, to_alloc = [], []
    for t, n in binds:
        c = pods.claim.get(n)
        devs = claims.devices.get(c or "", [])
        at = claims.allocated.get(c or "")
        rel = latest_before(releases.get(devs[0], []), at) if devs and at is not None else None
        if rel is None or at is None:
            res.unmatched += 1
            continue
        to_bind.append(t - rel)
        to_alloc.append(at - rel)
    res.release_to_bind = Delays.of(to_bind)
    res.release_to_allocation = Delays.of(to_alloc)
    released = {d for d, ts in releases.items() if ts and ts[-1] >= t0}
    alloc_at: dict[Device, list[float]] = {}
    for c, at in claims.allocated.items():
        for d in claims.devices.get(c, []):
            alloc_at.setdefault(d, []).append(at)
    res.released = len(released)
    res.reused = sum(1 for d in released if any(a > releases[d][-1] for a in alloc_at.get(d, [])))
    res.order = order_fidelity(keys, [n for _, n in binds])
    return res


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * v


#: (label, figure of a round, more is better); None = not applicable
ROWS: tuple[tuple[str, Any, bool], ...] = (
    ("fill bound (s)", lambda r: r.fill_seconds, False),
    ("backlog all tried (s)", lambda r: r.tried_seconds, False),
    ("idle CPU-s (backlog waits)", lambda r: r.idle_cpu, False),
    ("idle kube-apiserver cores", lambda r: r.idle_cores.get("kube-apiserver"), False),
    ("RSS after idle (MiB)", lambda r: r.rss_mib, False),
    ("pods deleted", lambda r: r.deletes, True),
    ("devices released", lambda r: r.released, True),
    ("devices reused", lambda r: r.reused, True),
    ("binds in window", lambda r: r.binds_window, True),
    ("binds after window", lambda r: r.binds_after, True),
    ("all reused after window end (s)", lambda r: r.reuse_all_seconds, False),
    ("release->bind p50 (s)", lambda r: r.release_to_bind.p50, False),
    ("release->bind p99 (s)", lambda r: r.release_to_bind.p99, False),
    ("release->bind max (s)", lambda r: r.release_to_bind.max, False),
    ("release->allocation p50 (s)", lambda r: r.release_to_allocation.p50, False),
    ("window CPU-s (scheduler)", lambda r: r.window_cpu, False),
    ("window kube-apiserver cores", lambda r: r.window_cores.get("kube-apiserver"), False),
    ("window others cores", lambda r: r.window_cores.get("others"), False),
    ("binds in queue order (%)", lambda r: _pct(r.order.get("in_order_share")), True),
    ("binds respecting priority (%)", lambda r: _pct(r.order.get("priority_respected_share")), True),
    ("inverted bound pairs (%)", lambda r: _pct(r.order.get("inversion_share")), False),
    ("pods overtaken per bind (mean)", lambda r: r.order.get("overtaken_mean"), False),
)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, int) or (float(v).is_integer() and abs(v) >= 10):
        return f"{v:,.0f}"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:,.1f}"


def median_of(results: Iterable[Result], fig: Any) -> float | None:
    vals = [v for v in (fig(r) for r in results) if v is not None]
    return statistics.median(vals) if vals else None


def round_block(r: Result, cfg: Config) -> list[str]:
    o = r.order
    by_prio = ", ".join(f"{p}: {c}" for p, c in (o.get("binds_by_priority") or {}).items())
    d, a = r.release_to_bind, r.release_to_allocation
    return [
        f"  fill {r.fill} pods bound in {r.fill_seconds:.1f}s; backlog {r.backlog} tried in {r.tried_seconds:.1f}s",
        f"  idle {r.idle_seconds:.1f}s: scheduler {r.idle_cpu:.2f} CPU-s ({r.idle_binds} binds), "
        + ", ".join(f"{k} {v:.3f}" for k, v in sorted(r.idle_cores.items(), key=lambda kv: -kv[1])) + " cores",
        f"  churn: {r.deletes} pods deleted over {r.delete_span:.1f}s (target {cfg.rate:g}/s for {cfg.window:g}s); "
        f"{r.released} devices released, {r.reused} reused"
        + ("" if r.reuse_all_seconds is None else f" (all {r.reuse_all_seconds:.1f}s after the window)"),
        f"  binds: {r.binds_window} in the window, {r.binds_after} in the {r.after_seconds:.1f}s after; "
        f"by priority {by_prio}",
        f"  release->bind: p50 {_fmt(d.p50)}s p99 {_fmt(d.p99)}s max {_fmt(d.max)}s over {d.count} pods "
        f"({r.unmatched} unmatched); release->allocation p50 {_fmt(a.p50)}s p99 {_fmt(a.p99)}s",
        f"  CPU: window {r.window_cpu:.2f} CPU-s, after {r.after_cpu:.2f}; "
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.window_cores.items(), key=lambda kv: -kv[1])) + " cores",
        f"  order: {o.get('in_order', 0)} of {o.get('binds', 0)} binds in queue order "
        f"({_fmt(_pct(o.get('in_order_share')))}%), priority respected {_fmt(_pct(o.get('priority_respected_share')))}%"
        f", {o.get('inversions', 0):,} inverted pairs ({_fmt(_pct(o.get('inversion_share')))}%), "
        f"{_fmt(o.get('overtaken_mean'))} pods overtaken per bind (max {o.get('overtaken_max')})",
        "  checks: " + ("ok (no device twice in any state seen, check_state clean)" if not r.checks
                        else f"{len(r.checks)} PROBLEMS: " + "; ".join(r.checks[:5])),
    ]


def summary_table(results: Sequence[Result]) -> list[str]:
    ours = [r for r in results if r.scheduler == OURS]
    theirs = [r for r in results if r.scheduler == THEIRS]
    head = f"{'':<34} {OURS:>14} {THEIRS:>14} {'ours/theirs':>12}"
    lines = [head]
    for label, fig, _ in ROWS:
        a, b = median_of(ours, fig), median_of(theirs, fig)
        ratio = f"{a / b:.2f}x" if a is not None and b is not None and abs(b) >= 0.01 else "-"
        lines.append(f"{label:<34} {_fmt(a):>14} {_fmt(b):>14} {ratio:>12}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.backlog", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--pods", "--backlog", dest="backlog", type=int, default=5000,
                    help="pending one-GPU pods (the backlog)")
    ap.add_argument("--rate", type=float, default=20.0, help="running pods deleted per second")
    ap.add_argument("--window", type=float, default=60.0, help="seconds of deletions")
    ap.add_argument("--after", type=float, default=30.0,
                    help="after the window, wait at most this long for every released device to be reused")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of the quiet backlog's CPU measurement")
    ap.add_argument("--rounds", type=int, default=1, help="rounds per scheduler (alternating ours, theirs)")
    ap.add_argument("--only", choices=("ours", "theirs"), help="run one scheduler only")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--run-dir", default=RUN_DIR)
    ap.add_argument("--json", help="where to write the figures (default <run dir>.json)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = ap.parse_args(argv)
    cfg = Config(nodes=args.nodes, gpus_per_node=args.gpus_per_node, backlog=args.backlog, rate=args.rate,
                 window=args.window, after=args.after, idle=args.idle, seed=args.seed)
    scheds = {"ours": [OURS], "theirs": [THEIRS], None: [OURS, THEIRS]}[args.only]
    rd = args.run_dir
    out = Path(args.json or f"{rd}.json")
    t0 = time.monotonic()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    machine = (f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
               f"Python {platform.python_version()})")
    print(f"{stamp} on {machine}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; run dir {rd}")
    print(f"{cfg.nodes} nodes x {cfg.gpus_per_node} GPUs full of one-GPU pods (bound by the scheduler under test), "
          f"{cfg.backlog} pending one-GPU pods ({', '.join(f'{n} {v} {s:.0%}' for n, v, s in PRIORITIES)}; "
          f"preemptionPolicy Never), running pods deleted at {cfg.rate:g}/s for {cfg.window:g}s", flush=True)
    if not compile_bytecode():
        print("compiling the scheduler's bytecode failed", file=sys.stderr)
        return 1
    cluster.stop(rd)
    info = cluster.start(rd, env={"E2E_PORTS": "auto"})
    print(f"control plane up in {time.monotonic() - t0:.1f}s ({info.server}, Kubernetes {info.k8s_version})",
          flush=True)
    kube = Kube.from_info(info)
    results: list[Result] = []
    try:
        env = setup(kube, info, rd, cfg)
        for i in range(1, args.rounds + 1):
            for sched in scheds:
                print(f"\n--- {sched} #{i}", flush=True)
                r = run_round(env, sched, cfg, i, log=lambda s: print(s, flush=True))
                results.append(r)
                print("\n".join(round_block(r, cfg)), flush=True)
                took = clean_namespace(kube, cfg.namespace, timeout=600)
                print(f"  cleaned up in {took:.1f}s", flush=True)
                if r.checks:
                    raise RuntimeError(f"{sched} #{i}: checks failed:\n" + "\n".join(r.checks[:20]))
        print(f"\n=== medians per scheduler ({args.rounds} round(s) each), ratios ours/theirs; {stamp}, {machine}")
        table = summary_table(results)
        print("\n".join(table))
        print(f"\ntotal {time.monotonic() - t0:.0f}s; figures in {out}")
        out.write_text(json.dumps({
            "date": stamp, "machine": machine, "config": asdict(cfg), "rounds": [asdict(r) for r in results],
            "summary": {label: {OURS: median_of([r for r in results if r.scheduler == OURS], fig),
                                THEIRS: median_of([r for r in results if r.scheduler == THEIRS], fig)}
                        for label, fig, _ in ROWS},
            "table": table}, indent=1, default=str) + "\n")
        return 0
    finally:
        if not args.keep:
            with contextlib.suppress(cluster.ClusterError):
                cluster.stop(rd)


if __name__ == "__main__":
    sys.exit(main())
