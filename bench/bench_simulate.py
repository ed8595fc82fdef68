"""Benchmark: ``dra-scheduler simulate`` as a user runs it, and how its cost per pod grows with the node count.

Workload (issue 16 item 1): N nodes x 8 GPUs (DGX H100 shapes, as the NVIDIA DRA driver publishes them),
6,000 single-GPU and 500 four-GPU template-claim pods, shuffled; every default plugin on.

It prints, for 1,000 nodes:

* the **whole command** -- ``python -m scheduler simulate FILE -o json > /dev/null`` run as a subprocess on a
  generated YAML file and on the same objects as one JSON ``List`` (``kubectl get -o json``'s shape): wall time,
  pods/s, CPU seconds and peak RSS of that process;
* its **phases**, measured in this process with the functions the command runs: read (parse and check the
  file), load (objects into the in-memory API server, cache, template claims), schedule, write (the JSON);
* the **curve** 1,000 -> 5,000 -> 10,000 nodes (same pods; in-process, JSON input): milliseconds of schedule
  phase per pod, its ratio to the 1,000-node figure, and the whole command's peak RSS and pods/s per size
  (kube-scheduler's cost per pod is roughly flat in the node count: it samples, ``percentageOfNodesToScore``).

    python bench/bench_simulate.py [--nodes N] [--curve 1000,5000,10000] [--no-10k] [--small N] [--large N]
                                   [--runs N] [--profile] [--reuse batch|memo|off]

``--profile`` prints the top of a cProfile of the in-process JSON run (``PROF_SORT``, ``PROF_N``); ``--reuse``
chooses how work is reused between equal pods (``DRA_SCHEDULER_REUSE``; the placements are the same) to compare.
The machine is shared: CPU seconds are printed beside wall seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, ".")

import yaml

from bench.fleet import scale_fleet
from bench.procstat import peak_rss_mib
from scheduler.config.logging import configure_logging
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.simulation import load_objects, simulate, to_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def workload(small: int, large: int, seed: int = 7) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for name, count in (("one-gpu", 1), ("four-gpu", 4)):
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": "bench"},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
                            ]
                        }
                    }
                },
            }
        )
    pods = []
    for kind, n in (("one-gpu", small), ("four-gpu", large)):
        for i in range(n):
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{kind}-{i:05d}", "namespace": "bench"},
                    "spec": {
                        "schedulerName": "dra-scheduler",
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": kind}],
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "claims": [{"name": "gpu"}]},
                            }
                        ],
                    },
                }
            )
    random.Random(seed).shuffle(pods)
    return objs + pods


def write_inputs(nodes: int, small: int, large: int, where: str) -> tuple[str, str]:
    """The workload as a multi-document YAML file and as one JSON List; returns (yaml path, json path)."""
    objs = scale_fleet(nodes) + workload(small, large)
    ypath = os.path.join(where, f"fleet-{nodes}.yaml")
    jpath = os.path.join(where, f"fleet-{nodes}.json")
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with open(ypath, "w") as fh:
        yaml.dump_all(objs, fh, Dumper=dumper, sort_keys=False)
    with open(jpath, "w") as fh:
        json.dump({"apiVersion": "v1", "kind": "List", "items": objs}, fh)
    return ypath, jpath


@dataclass
class Command:
    wall: float
    cpu: float
    rss_mib: float
    code: int



def run_command(path: str, env: dict[str, str] | None = None) -> Command:
    """The real CLI in a subprocess, output to /dev/null; wall time, CPU time and peak RSS of that process."""
    argv = [sys.executable, "-m", "scheduler", "simulate", path, "-o", "json", "--no-progress"]
    start = time.perf_counter()
    peak: float | None = None
    with open(os.devnull, "w") as null:
        proc = subprocess.Popen(argv, stdout=null, cwd=ROOT, env={**os.environ, **(env or {})})
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = peak_rss_mib(proc.pid) or peak
            time.sleep(0.05)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss = peak if peak is not None else usage.ru_maxrss / 1024
    return Command(wall, usage.ru_utime + usage.ru_stime, rss, proc.returncode)


@dataclass
class Phases:
    read: tuple[float, float]  # (wall, CPU) seconds
    load: tuple[float, float]
    schedule: tuple[float, float]
    write: tuple[float, float]
    scheduled: int
    pods: int
    memo: str = ""
    late_ms: float = 0.0  # CPU ms per scheduling attempt over the second half of the attempts


def run_phases(path: str, profile: cProfile.Profile | None = None) -> Phases:
    """What the command does, phase by phase, in this process (``scheduler.cli`` runs the same functions)."""
    t0, c0 = time.perf_counter(), time.process_time()
    objs = load_objects([path])
    t1, c1 = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    stamps: list[float] = []
    run_once = Scheduler.run_once

    async def timed(self: Scheduler, info: Any) -> Any:  # CPU time at each attempt (second half: steady state)
        stamps.append(time.process_time())
        return await run_once(self, info)

    Scheduler.run_once = timed  # type: ignore[method-assign]
    try:
        result = asyncio.run(simulate(objs))
    finally:
        Scheduler.run_once = run_once  # type: ignore[method-assign]
    if profile is not None:
        profile.disable()
    t2, c2 = time.perf_counter(), time.process_time()
    half = len(stamps) // 2
    late_ms = 1000 * (stamps[-1] - stamps[half]) / max(len(stamps) - 1 - half, 1) if len(stamps) > 2 else 0.0
    with open(os.devnull, "w") as null:
        null.write(to_json(result))
        null.write("\n")
    t3, c3 = time.perf_counter(), time.process_time()
    timing = result.timing
    s = result.summary
    memo = ""
    if result.scheduler is not None:
        fw = next(iter(result.scheduler.profiles.values()))
        memo = str(fw.memo_stats)
    load = (timing.get("load", 0.0), timing.get("load_cpu", 0.0))
    return Phases(
        (t1 - t0, c1 - c0),
        load,
        ((t2 - t1) - load[0], (c2 - c1) - load[1]),
        (t3 - t2, c3 - c2),
        s["scheduled"],
        s["pods"],
        memo,
        late_ms,
    )


def rate(pods: int, seconds: float) -> str:
    return f"{pods / seconds:,.0f} pods/s" if seconds > 0 else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--curve", default="1000,5000,10000", help="node counts of the curve ('' for none)")
    ap.add_argument("--no-10k", action="store_true", help="leave 10,000 nodes out of the curve")
    ap.add_argument("--small", type=int, default=6000)
    ap.add_argument("--large", type=int, default=500)
    ap.add_argument("--runs", type=int, default=2, help="runs of the whole command per input (figures are noisy)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument(
        "--reuse", choices=("batch", "memo", "off"), default="batch",
        help="reuse of work between equal pods (DRA_SCHEDULER_REUSE): results are the same, only the cost differs",
    )
    args = ap.parse_args()
    os.environ["DRA_SCHEDULER_REUSE"] = args.reuse
    configure_logging(verbose=False)
    pods = args.small + args.large
    curve = [int(x) for x in args.curve.split(",") if x.strip()]
    if args.no_10k:
        curve = [n for n in curve if n < 10_000]
    print(
        f"workload: {args.small:,} x 1 GPU + {args.large:,} x 4 GPU template-claim pods (shuffled), "
        f"N x 8-GPU DGX H100 nodes, every default plugin on; {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as where:
        t = time.perf_counter()
        ypath, jpath = write_inputs(args.nodes, args.small, args.large, where)
        print(
            f"inputs: {os.path.getsize(ypath) / 2**20:.1f} MiB YAML, {os.path.getsize(jpath) / 2**20:.1f} MiB JSON "
            f"({args.nodes:,} nodes, generated in {time.perf_counter() - t:.1f}s)"
        )
        print(f"\nwhole command (python -m scheduler simulate FILE -o json > /dev/null), {args.nodes:,} nodes:")
        for label, path in (("YAML", ypath), ("JSON", jpath)):
            for i in range(args.runs):
                c = run_command(path)
                status = "" if c.code == 0 else f"  EXIT {c.code}"
                print(
                    f"  {label} run {i + 1}: {c.wall:6.2f}s -> {rate(pods, c.wall):>13}   cpu {c.cpu:6.2f}s "
                    f"({rate(pods, c.cpu)} per CPU-second)   peak RSS {c.rss_mib:,.0f} MiB{status}"
                )
        prof = cProfile.Profile() if args.profile else None
        print(f"\nphases (in process, same functions as the command), {args.nodes:,} nodes; wall seconds (CPU):")
        for label, path in (("YAML", ypath), ("JSON", jpath)):
            p = run_phases(path, prof if label == "JSON" else None)
            wall = p.read[0] + p.load[0] + p.schedule[0] + p.write[0]
            cpu = p.read[1] + p.load[1] + p.schedule[1] + p.write[1]
            per_pod = 1000 * p.schedule[1] / max(p.scheduled, 1)
            print(
                f"  {label}: read {p.read[0]:5.2f} ({p.read[1]:5.2f})  load {p.load[0]:5.2f} ({p.load[1]:5.2f})  "
                f"schedule {p.schedule[0]:5.2f} ({p.schedule[1]:5.2f}) = {per_pod:.3f} CPU ms/pod "
                f"(steady {p.late_ms:.3f})  "
                f"write {p.write[0]:5.2f} ({p.write[1]:5.2f})  total {wall:5.2f} ({cpu:5.2f}) -> "
                f"{rate(p.scheduled, wall)} ({rate(p.scheduled, cpu)} per CPU-second); "
                f"scheduled {p.scheduled:,}/{p.pods:,}"
            )
        print(f"  reuse between equal pods: {p.memo}")
        if prof is not None:
            out = io.StringIO()
            order, rows = os.environ.get("PROF_SORT", "tottime"), int(os.environ.get("PROF_N", "25"))
            pstats.Stats(prof, stream=out).sort_stats(order).print_stats(rows)
            print(out.getvalue())
    if curve:
        print(
            "\ncurve (same pods, JSON input), CPU milliseconds per pod: the schedule phase (in process), its steady"
            " state (the second half of the attempts, once every node was looked at), the whole command (subprocess)"
        )
        print(
            f"  {'nodes':>6}  {'schedule':>8}  {'x 1,000':>7}  {'steady':>6}  {'x 1,000':>7}  {'command':>7}  "
            f"{'x 1,000':>7}  {'wall':>7}  {'pods/s':>7}  {'peak RSS':>9}"
        )
        base: tuple[float, float, float] | None = None
        for n in curve:
            with tempfile.TemporaryDirectory(prefix="bench-simulate-") as where:
                _, jpath = write_inputs(n, args.small, args.large, where)
                p = run_phases(jpath)
                c = run_command(jpath)
            per_pod = 1000 * p.schedule[1] / max(p.scheduled, 1)
            cmd_per_pod = 1000 * c.cpu / pods
            if base is None:
                base = (per_pod, p.late_ms or 1.0, cmd_per_pod)
            print(
                f"  {n:>6,}  {per_pod:8.3f}  {per_pod / base[0]:7.2f}  {p.late_ms:6.3f}  {p.late_ms / base[1]:7.2f}  "
                f"{cmd_per_pod:7.3f}  {cmd_per_pod / base[2]:7.2f}  {c.wall:6.1f}s  {pods / c.wall:7,.0f}  "
                f"{c.rss_mib:6,.0f} MiB   (scheduled {p.scheduled:,}/{p.pods:,})"
            )
    print(f"\nthis process's peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
