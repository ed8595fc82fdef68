"""Live throughput, side by side with kube-scheduler 1.37.2 (issue #16, item 5): ``make throughput``.

    python -m e2e.throughput [--rounds 2] [--plan api:precreated,cpu:precreated,cpu:running]
                             [--audit-check cpu:precreated|none] [--audit-rounds 1] [--pods 1000] [--nodes 200]
                             [--keep]

One local control plane (own run dir, free ports) with the API server's audit log on (``E2E_AUDIT_LOG=1``),
200 kwok nodes x 8 H100 (the NVIDIA driver's ResourceSlices), and per round 1,000 one-GPU pods whose claims
kube-controller-manager makes from a ResourceClaimTemplate. The same pods (same names, same namespace) go
to dra-scheduler (``schedulerName: dra-scheduler``) and to upstream kube-scheduler 1.37.2 (profile
``default-scheduler``, the default of e2e/cluster.sh's kube-scheduler.yaml), alternating: ours, theirs,
ours, theirs ... for ``--rounds`` rounds each, in each (regime, mode) of ``--plan``:

* regimes: ``api`` = client QPS 200 / burst 400 for both (``--qps/--burst``; kube-scheduler's
  ``clientConnection.qps/burst``), ``cpu`` = QPS 5000 / burst 10000 for both;
* modes: ``precreated`` = pods created first and their claims made by kube-controller-manager, then the
  scheduler started; timed from the scheduler process's start. ``running`` = the scheduler started and
  ready, then every pod created at once (16 threads); timed from the first create.

Each scheduler is a fresh process per round and is stopped after it; then the pods (grace 0), claims and
Events are deleted and the next round waits until no claim holds a device. Every round is checked: every pod
bound, no device allocated twice, the invariants of ``e2e.fleet.check_state``.

Figures (defined in :mod:`e2e.throughput_report`): pods/s, first/median/p90 bind, writes and Events per
pod from the audit log (dra-scheduler runs as user ``dra-scheduler`` with a static token of its own, like
kube-scheduler as ``system:kube-scheduler``, and with kube-scheduler's RBAC path and priority level), the scheduler
process's CPU-seconds and pods per CPU-second, the cores used by each component and by other processes on
this shared machine; at the end the medians per scheduler, the ratios ours/theirs, what bounds the
created-while-running mode, and one round per scheduler without the audit log (kube-apiserver restarted
without it) to show what the log costs.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from e2e import cluster
from e2e.fleet import (
    JSON,
    Kube,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_template,
    create_scale_fleet,
    gpu_pod,
    namespace,
    wait_for,
)
from e2e.throughput_live import (
    AuditTail,
    CpuSnapshot,
    PodWatch,
    clean_namespace,
    component_pids,
    cpu_seconds,
    scheduler_identity,
    start_monotonic,
)
from e2e.throughput_report import (
    MODE_TITLES,
    OURS,
    REGIME_TITLES,
    REGIMES,
    ROUND_HEADER,
    THEIRS,
    Pipeline,
    Round,
    audit_effect,
    bind_stats,
    client_rates,
    completion_times,
    count_writes,
    explain_pipeline,
    round_line,
    running_summary,
    summary_table,
    writes_breakdown,
)

RUN_DIR = os.environ.get("E2E_THROUGHPUT_RUN_DIR", "/tmp/dra-scheduler-e2e-throughput")
MODES = ("precreated", "running")
USERS = {OURS: "dra-scheduler", THEIRS: "system:kube-scheduler"}
SCHEDULER_NAMES = {OURS: "dra-scheduler", THEIRS: "default-scheduler"}  # the pods' spec.schedulerName
NAMESPACE = "throughput"
TEMPLATE = "one-gpu"
FLEET = "tp"


def parse_plan(text: str) -> list[tuple[str, str]]:
    """``api:precreated,cpu:running`` -> [("api", "precreated"), ("cpu", "running")]."""
    out: list[tuple[str, str]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        regime, _, mode = part.partition(":")
        if regime not in REGIMES or mode not in MODES:
            raise argparse.ArgumentTypeError(f"{part!r}: want <{'|'.join(REGIMES)}>:<{'|'.join(MODES)}>")
        out.append((regime, mode))
    return out


@dataclass
class Bench:
    kube: Kube
    info: cluster.ClusterInfo
    run_dir: str
    kubeconfig: str  # dra-scheduler's own identity
    audit: AuditTail | None
    args: argparse.Namespace


@dataclass
class Launched:
    pid: int
    stop: Callable[[], object]
    ready_at: float  # monotonic
    ready_cpu: float  # its CPU-seconds then


def launch(b: Bench, sched: str, qps: float, burst: int) -> Launched:
    """Start the scheduler (a fresh process) and wait until it answers /readyz."""
    if sched == OURS:
        sp = SchedulerProcess(b.info, Path(b.run_dir) / "logs" / "dra-scheduler.log", "--qps", f"{qps:g}",
                              "--burst", str(burst), kubeconfig=b.kubeconfig)
        sp.start(timeout=180)
        ready_at = time.monotonic()
        assert sp.proc is not None
        return Launched(sp.proc.pid, sp.stop, ready_at, cpu_seconds(sp.proc.pid))
    cluster.kube_scheduler_up(b.run_dir, env={"E2E_KUBE_SCHEDULER_QPS": f"{qps:g}",
                                              "E2E_KUBE_SCHEDULER_BURST": str(burst)})
    ready_at = time.monotonic()
    pid = component_pids(b.run_dir)["kube-scheduler"]
    return Launched(pid, lambda: cluster.kube_scheduler_down(b.run_dir), ready_at, cpu_seconds(pid))


def workload(sched: str, n: int, round_tag: str = "") -> list[JSON]:
    """``n`` one-GPU template-claim pods for ``sched``. ``round_tag`` makes the names differ between rounds: pods
    named as the round before's, created while kube-controller-manager still deletes that round's claims, were
    seen to wait over 900 s for theirs (10,000 pods, twice)."""
    pods = []
    for i in range(n):
        p = gpu_pod(NAMESPACE, f"tp{round_tag}-{i:04d}", template=TEMPLATE, fleet=FLEET)
        p["spec"]["schedulerName"] = SCHEDULER_NAMES[sched]
        pods.append(p)
    return pods


def claims_ready(kube: Kube, n: int, seen: dict[str, int]) -> bool:
    """kube-controller-manager made every pod's claim and wrote it into the pod's status. The last counts are kept
    in `seen` for the timeout's message."""
    claims = kube.list("ResourceClaim", NAMESPACE)
    pods = kube.list("Pod", NAMESPACE)
    seen.update(claims=len(claims), not_being_deleted=sum(
        1 for c in claims if not (c["metadata"].get("deletionTimestamp"))), pods=len(pods),
        pods_with_claim_status=sum(1 for p in pods if (p.get("status") or {}).get("resourceClaimStatuses")))
    return len(claims) >= n and len(pods) == n and seen["pods_with_claim_status"] == n


def run_round(b: Bench, sched: str, regime: str, mode: str, index: int) -> Round:
    args = b.args
    qps, burst = REGIMES[regime]
    n = args.pods
    pods = workload(sched, n, f"-{'o' if sched == OURS else 'k'}{index}")
    pids = {k: v for k, v in component_pids(b.run_dir).items() if k != "kube-scheduler"}
    watch = PodWatch(b.kube, NAMESPACE, n).start()
    if b.audit is not None:
        b.audit.skip()
    epoch_minus_mono = time.time() - time.monotonic()
    launched: Launched | None = None
    ready: float | None = None
    ready_cpu: float | None = None
    try:
        if mode == "precreated":
            b.kube.create_many(pods, workers=args.create_workers)
            # kube-controller-manager makes the claims at its own client QPS, after the previous round's deletions
            # (10,000 pods: more than 300 s once on a busy 2-core machine)
            seen: dict[str, int] = {}
            try:
                wait_for(lambda: claims_ready(b.kube, n, seen), max(300.0, 0.09 * n),
                         "every claim made and in its pod's status", interval=2.0)
            except TimeoutError as e:
                raise TimeoutError(f"{e}; last seen: {seen}") from None
            time.sleep(args.settle)
            snap0 = CpuSnapshot.take(pids)
            launched = launch(b, sched, qps, burst)
            start, cpu0 = start_monotonic(launched.pid), 0.0
            ready, ready_cpu = launched.ready_at - start, launched.ready_cpu
        else:
            launched = launch(b, sched, qps, burst)
            time.sleep(args.settle)
            cpu0 = cpu_seconds(launched.pid)
            snap0 = CpuSnapshot.take({**pids, "scheduler": launched.pid})
            start = time.monotonic()
            b.kube.create_many(pods, workers=args.create_workers)
        if not watch.done.wait(args.timeout):
            raise TimeoutError(f"{sched}: only {len(watch.bound)} of {n} pods bound after {args.timeout:g}s "
                               f"(watch errors: {watch.errors[-3:]})")
        cpu1 = cpu_seconds(launched.pid)
        snap1 = CpuSnapshot.take({**pids, "scheduler": launched.pid})
    finally:
        watch.stop()
        if launched is not None:
            launched.stop()
    entries = b.audit.read() if b.audit is not None else None
    writes = count_writes(entries, USERS[sched]) if entries is not None else None
    r = Round(sched, regime, mode, index, bind_stats(watch.bound.values(), start), cpu1 - cpu0,
              writes=writes, audit=b.audit is not None, cores=snap1.cores_since(snap0), window=snap1.at - snap0.at,
              ready=ready, ready_cpu=ready_cpu)
    if entries is not None and mode == "running":
        def mono(ts: list[float]) -> list[float]:
            return [t - epoch_minus_mono for t in ts]

        r.pipeline = Pipeline(
            start=start,
            created=mono(completion_times(entries, verb="create", resource="pods", namespace=NAMESPACE)),
            claim=mono(completion_times(entries, verb="create", resource="resourceclaims", namespace=NAMESPACE)),
            ready=mono(completion_times(entries, verb="patch", resource="pods", subresource="status",
                                        namespace=NAMESPACE, user_agent_contains="resource-claim-controller")),
            bound=mono(completion_times(entries, verb="create", resource="pods", subresource="binding",
                                        namespace=NAMESPACE, user=USERS[sched])))
    check(b.kube, n)
    return r


def check(kube: Kube, n: int) -> None:
    """Every pod bound, each with its own device, the §3.2 invariants; raises otherwise."""
    pods, claims = kube.list("Pod", NAMESPACE), kube.list("ResourceClaim", NAMESPACE)
    problems = check_state(pods, claims)
    bound = sum(1 for p in pods if p["spec"].get("nodeName"))
    devices = [d for c in claims for d in allocated_devices(c)]
    if bound != n:
        problems.append(f"{bound} of {n} pods bound")
    if len(set(devices)) != n or len(devices) != n:
        problems.append(f"{len(devices)} devices allocated, {len(set(devices))} distinct, for {n} pods")
    if problems:
        raise RuntimeError("check failed:\n" + "\n".join(problems[:20]))


def print_round(r: Round) -> None:
    print(ROUND_HEADER)
    print(round_line(r))
    extra = ""
    if r.ready is not None:
        extra = f"ready (/readyz) at {r.ready:.2f}s, {r.ready_cpu or 0.0:.2f} CPU-s by then; "
    cores = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.cores.items(), key=lambda kv: -kv[1]))
    print(f"  {extra}cores over {r.window:.1f}s: {cores}")
    print(f"  {writes_breakdown(r)}")
    print(f"  {client_rates(r)}")
    if r.pipeline is not None:
        print("\n".join(explain_pipeline(r.pipeline)))
    sys.stdout.flush()


def rounds_of(b: Bench, regime: str, mode: str, rounds: int, audit: bool, results: list[Round]) -> None:
    for i in range(1, rounds + 1):
        for sched in b.args.schedulers:
            label = f"{sched} {regime}/{mode} #{i}" + ("" if audit else " (no audit log)")
            print(f"\n--- {label}: {REGIME_TITLES[regime]}; {MODE_TITLES[mode]}", flush=True)
            r = run_round(b, sched, regime, mode, i)
            results.append(r)
            print_round(r)
            # the API server deletes 10,000 pods and kube-controller-manager their claims at ~50-100/s here
            took = clean_namespace(b.kube, NAMESPACE, timeout=max(240.0, 0.06 * r.pods))
            print(f"  checked: {r.pods} pods bound, {r.pods} distinct devices; cleaned up in {took:.1f}s", flush=True)


def compile_bytecode() -> bool:
    """Write the scheduler's bytecode (``__pycache__``, git-ignored) before the rounds, as the container image's
    ``pip install`` does: the editable install run with ``PYTHONDONTWRITEBYTECODE=1`` (this machine's default)
    would otherwise compile every module again at each scheduler start (~0.15 CPU-s of its start-up)."""
    root = Path(__file__).resolve().parent.parent
    return all(compileall.compile_dir(str(root / pkg), quiet=1) for pkg in ("scheduler", "plugins"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.throughput", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds per scheduler in each (regime, mode)")
    ap.add_argument("--plan", type=parse_plan, default=parse_plan("api:precreated,cpu:precreated,cpu:running"),
                    help="(regime, mode) pairs in order: api|cpu : precreated|running")
    ap.add_argument("--audit-check", default="cpu:precreated",
                    help="after the main rounds, restart kube-apiserver without the audit log and run --audit-rounds "
                         "rounds per scheduler in this (regime, mode); 'none' skips it")
    ap.add_argument("--audit-rounds", type=int, default=1,
                    help="rounds per scheduler in the --audit-check (regime, mode) without the audit log")
    ap.add_argument("--schedulers", type=lambda v: [x.strip() for x in v.split(",")], default=[OURS, THEIRS],
                    help=f"which schedulers, in this order, in each round (default {OURS},{THEIRS})")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--create-workers", type=int, default=16, help="threads creating the pods")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds of quiet before the measured part (claims made / scheduler ready)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--run-dir", default=RUN_DIR)
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = ap.parse_args(argv)
    audit_check = None if args.audit_check == "none" else parse_plan(args.audit_check)[0]
    if not args.schedulers or any(x not in (OURS, THEIRS) for x in args.schedulers):
        ap.error(f"--schedulers: a comma-separated list of {OURS} and {THEIRS}")
    if args.pods > args.nodes * args.gpus_per_node:
        ap.error("more pods than GPUs")

    rd = args.run_dir
    t0 = time.monotonic()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')} on {platform.node()} ({os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}); run dir {rd}")
    if not compile_bytecode():
        print("compiling the scheduler's bytecode failed", file=sys.stderr)
        return 1
    cluster.stop(rd)
    info = cluster.start(rd, env={"E2E_PORTS": "auto", "E2E_AUDIT_LOG": "1"})
    print(f"control plane up in {time.monotonic() - t0:.1f}s ({info.server}, Kubernetes {info.k8s_version}, "
          f"audit log {rd}/audit.log)")
    kube = Kube.from_info(info)
    results: list[Round] = []
    try:
        t = time.monotonic()
        fleet = create_scale_fleet(kube, FLEET, args.nodes, args.gpus_per_node, workers=16)
        print(f"fleet: {len(fleet.nodes)} nodes x {args.gpus_per_node} GPUs = {fleet.device_count()} devices, "
              f"{len(fleet.slices)} ResourceSlices, created in {time.monotonic() - t:.1f}s")
        wait_for(lambda: sum(1 for n in kube.list("Node") if any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])) ==
            args.nodes, 120, "every node Ready (kwok)", interval=0.5)
        kube.create(namespace(NAMESPACE))
        kube.create(claim_template(NAMESPACE, TEMPLATE))
        kubeconfig = scheduler_identity(kube, rd, info.server, USERS[OURS])
        b = Bench(kube, info, rd, kubeconfig, AuditTail(Path(rd) / "audit.log"), args)
        for regime, mode in args.plan:
            rounds_of(b, regime, mode, args.rounds, True, results)
        if audit_check is not None:
            print("\n--- kube-apiserver restarted without the audit log", flush=True)
            cluster.restart_apiserver(rd, env={"E2E_AUDIT_LOG": "0"})
            b.audit = None
            wait_for(lambda: cluster.status(rd)[0], 120, "every component ready again")
            rounds_of(b, *audit_check, args.audit_rounds, False, results)

        print("\n=== every round (times in seconds after start; machine/others: cores in use)")
        print(ROUND_HEADER)
        for r in results:
            print(round_line(r))
        print("\n=== medians per scheduler and ratios ours/theirs")
        print(summary_table(results))
        lines = running_summary(results)
        if lines:
            print("\n=== what bounds the created-while-running mode")
            print("\n".join(lines))
        lines = audit_effect(results)
        if lines:
            print("\n=== the audit log's cost (rounds without it vs the audited rounds)")
            print("\n".join(lines))
        print(f"\ntotal {time.monotonic() - t0:.0f}s")
        return 0
    finally:
        if not args.keep:
            with contextlib.suppress(cluster.ClusterError):
                cluster.stop(rd)


if __name__ == "__main__":
    sys.exit(main())
