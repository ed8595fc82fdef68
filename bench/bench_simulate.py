"""Benchmark: in-process throughput of ``simulate`` on a generated fleet.

Default workload (issue: scheduling core): 1,000 nodes x 8 GPUs (DGX H100 shapes, as the NVIDIA DRA driver
publishes them), 6,000 single-GPU template-claim pods and 500 four-GPU template-claim pods, in a shuffled
order. Prints pods/s for the scheduling phase (queue -> cycle -> binder writes against the in-memory API),
the loading phase separately, peak RSS, and the top of a cProfile when ``--profile`` is given.

    python bench/bench_simulate.py [--nodes N] [--small N] [--large N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import random
import resource
import sys
import time
from typing import Any

sys.path.insert(0, ".")

from scheduler.fleet import scale_fleet
from scheduler.logging import configure_logging
from scheduler.simulate import simulate


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--small", type=int, default=6000)
    ap.add_argument("--large", type=int, default=500)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    configure_logging(verbose=False)

    t0 = time.perf_counter()
    objs = scale_fleet(args.nodes) + workload(args.small, args.large)
    gen = time.perf_counter() - t0
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    result = asyncio.run(simulate(objs))
    if prof:
        prof.disable()
    s = result.summary
    sched = result.scheduler
    assert sched is not None
    timing = getattr(result, "timing", {})
    sched_s = timing.get("scheduling", s["seconds"])
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"fleet: {args.nodes} nodes x 8 GPUs; pods: {args.small} x 1 GPU + {args.large} x 4 GPU"
        f" (generated in {gen:.2f}s)"
    )
    print(f"scheduled {s['scheduled']}/{s['pods']} pods, unschedulable {s['unschedulable']}")
    print(f"load phase (API objects, cache, claim controller): {timing.get('load', 0.0):.2f}s")
    print(f"scheduling phase: {sched_s:.2f}s -> {s['scheduled'] / sched_s:.0f} pods/s")
    print(f"total simulate: {s['seconds']:.2f}s -> {s['scheduled'] / s['seconds']:.0f} pods/s end to end")
    print(f"peak RSS: {rss_mib:.0f} MiB")
    dra = sched.profiles["dra-scheduler"].instances["DynamicResources"]
    fw = sched.profiles["dra-scheduler"]
    print(f"per-node reuse for equal pod signatures: {fw.memo_stats}")
    print(
        f"DRA filter: {dra.stats['filter_allocations']} allocator runs, {dra.stats['filter_cache_hits']} cache hits; "
        f"CEL evaluations: {dra.selectors.stats}"
    )
    if prof:
        out = io.StringIO()
        order, rows = os.environ.get("PROF_SORT", "tottime"), int(os.environ.get("PROF_N", "18"))
        pstats.Stats(prof, stream=out).sort_stats(order).print_stats(rows)
        print(out.getvalue())


if __name__ == "__main__":
    main()
