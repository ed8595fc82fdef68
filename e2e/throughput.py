"""Live scheduling throughput: 1,000 single-GPU template-claim pods on 200 fake 8-GPU nodes.

    python -m e2e.throughput [--pods 1000] [--nodes 200] [--qps 200 --burst 400] [--create-workers 16]

A fresh control plane in its own run dir (free ports), a fleet of DGX H100 nodes (kwok) with the NVIDIA
driver's ResourceSlices, ``dra-scheduler run --qps Q --burst B`` as a subprocess; then every pod is created
at once (a thread pool, no client-side limit) and a pod watch started before the first create records when
each pod is first seen bound. The figure is pods/s from the first create to the last bind, plus a histogram
of binds per 1 s bucket. Each pod needs: its claim created by kube-controller-manager from the template
(client QPS 500/burst 1000 in e2e/cluster.sh), then the scheduler's writes (claim finalizer, claim status,
Binding, Event). Afterwards the result is checked: every pod bound, no device allocated twice.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from e2e import cluster
from e2e.fleet import (
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

RUN_DIR = os.environ.get("E2E_THROUGHPUT_RUN_DIR", "/tmp/dra-scheduler-e2e-throughput")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.throughput", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--qps", type=float, default=200.0, help="dra-scheduler --qps (its default: 200)")
    ap.add_argument("--burst", type=int, default=400, help="dra-scheduler --burst (its default: 400)")
    ap.add_argument("--create-workers", type=int, default=16, help="threads creating the pods")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--precreate", action="store_true",
                    help="create the pods (and wait for their claims) before starting the scheduler, and time from "
                         "the scheduler's start instead: the scheduler alone, without the create rate")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    cluster.stop(RUN_DIR)
    info = cluster.start(RUN_DIR, env={"E2E_PORTS": "auto"})
    print(f"control plane up in {time.monotonic() - t0:.1f}s ({info.server}, Kubernetes {info.k8s_version})")
    kube = Kube.from_info(info)
    sched: SchedulerProcess | None = None
    try:
        t = time.monotonic()
        fleet = create_scale_fleet(kube, "tp", args.nodes, args.gpus_per_node, workers=16)
        print(f"fleet: {len(fleet.nodes)} nodes x {args.gpus_per_node} GPUs = {fleet.device_count()} devices, "
              f"{len(fleet.slices)} ResourceSlices, created in {time.monotonic() - t:.1f}s")
        wait_for(lambda: sum(1 for n in kube.list("Node") if any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])) ==
            args.nodes, 120, "every node Ready (kwok)", interval=0.5)
        ns = "throughput"
        kube.create(namespace(ns))
        kube.create(claim_template(ns, "one-gpu"))
        sched = SchedulerProcess(info, Path(RUN_DIR) / "logs" / "dra-scheduler.log", "--qps", str(args.qps),
                                 "--burst", str(args.burst))
        if not args.precreate:
            sched.start()
            print(f"dra-scheduler ready (--qps {args.qps:g} --burst {args.burst}); log {sched.log_path}")

        rv = kube.request("GET", f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
        bound_at: dict[str, float] = {}
        done = threading.Event()
        errors: list[str] = []

        def watch() -> None:
            nonlocal rv
            while not done.is_set():
                try:
                    for ev in kube.watch("Pod", ns, resource_version=rv, timeout=args.timeout):
                        obj = ev.get("object") or {}
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if ev.get("type") in ("ADDED", "MODIFIED") and obj.get("spec", {}).get("nodeName"):
                            bound_at.setdefault(obj["metadata"]["name"], time.monotonic())
                            if len(bound_at) >= args.pods:
                                done.set()
                                return
                except Exception as e:
                    errors.append(repr(e))
                    time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(0.5)  # the watch is established
        pods = [gpu_pod(ns, f"tp-{i:04d}", template="one-gpu", fleet="tp") for i in range(args.pods)]
        first_create = time.monotonic()
        kube.create_many(pods, workers=args.create_workers)
        create_seconds = time.monotonic() - first_create
        start_label = "first create"
        if args.precreate:
            wait_for(lambda: len(kube.list("ResourceClaim", ns)) == args.pods, 120, "every template claim created")
            first_create = time.monotonic()
            sched.start()
            start_label = "scheduler start"
            print(f"pods and claims created first; dra-scheduler started (--qps {args.qps:g} --burst {args.burst}) "
                  f"and ready in {time.monotonic() - first_create:.1f}s")
        if not done.wait(args.timeout):
            raise TimeoutError(f"only {len(bound_at)} of {args.pods} pods bound after {args.timeout:g}s "
                               f"(watch errors: {errors[-3:]})")
        last_bind = max(bound_at.values())
        span = last_bind - first_create
        print(f"\ncreated {args.pods} pods in {create_seconds:.1f}s ({args.create_workers} threads, "
              f"no client-side limit)")
        print(f"{start_label} -> last bind: {span:.1f}s = {args.pods / span:.1f} pods/s "
              f"(dra-scheduler --qps {args.qps:g} --burst {args.burst})")
        buckets: dict[int, int] = {}
        for ts in bound_at.values():
            b = int(ts - first_create)
            buckets[b] = buckets.get(b, 0) + 1
        print(f"binds per 1 s bucket (s since {start_label}: binds):")
        print("  " + "  ".join(f"{b}:{buckets.get(b, 0)}" for b in range(int(span) + 1)))
        busy = [n for n in buckets.values() if n]
        print(f"  peak {max(busy)} pods/s, median non-empty bucket {sorted(busy)[len(busy) // 2]} pods/s")

        all_pods, claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
        problems = check_state(all_pods, claims)
        devices = [d for c in claims for d in allocated_devices(c)]
        print(f"check: {sum(1 for p in all_pods if p['spec'].get('nodeName'))} pods bound, {len(devices)} devices "
              f"allocated, {len(set(devices))} distinct, {len(problems)} problems")
        for m in ("scheduler_schedule_attempts_total", "scheduler_pod_scheduling_attempts_count"):
            print(f"{m} {sched.metric(m):.0f}")
        if problems or len(set(devices)) != args.pods:
            print("\n".join(problems[:20]), file=sys.stderr)
            return 1
        return 0
    finally:
        if sched is not None:
            sched.stop()
        if not args.keep:
            cluster.stop(RUN_DIR)


if __name__ == "__main__":
    sys.exit(main())
