"""Benchmark: gang placement. 50 PodGroups x 8 pods x 8 GPUs on 400 nodes x 8 GPUs (DGX H100 slices), in-process
``simulate``. Prints the time to place every group and pods/s.

    python bench/bench_gang.py [--groups N] [--nodes N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from typing import Any

sys.path.insert(0, ".")

from scheduler.fleet import scale_fleet
from scheduler.logging import configure_logging
from scheduler.simulate import simulate


def workload(groups: int, size: int, gpus: int, seed: int = 11) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "all-gpus", "namespace": "bench"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": gpus}}]
                    }
                }
            },
        }
    ]
    pods = []
    for g in range(groups):
        objs.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": f"job-{g:03d}", "namespace": "bench"},
                "spec": {"minMember": size},
            }
        )
        for i in range(size):
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"job-{g:03d}-{i}",
                        "namespace": "bench",
                        "labels": {"scheduling.x-k8s.io/pod-group": f"job-{g:03d}"},
                    },
                    "spec": {
                        "schedulerName": "dra-scheduler",
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "all-gpus"}],
                        "containers": [{"name": "w", "image": "trainer", "resources": {"claims": [{"name": "gpu"}]}}],
                    },
                }
            )
    random.Random(seed).shuffle(pods)
    return objs + pods


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=400)
    args = ap.parse_args()
    configure_logging(verbose=False)
    objs = scale_fleet(args.nodes) + workload(args.groups, args.size, 8)
    t0 = time.perf_counter()
    res = asyncio.run(simulate(objs))
    total = time.perf_counter() - t0
    s = res.summary
    sched = res.scheduler
    assert sched is not None
    groups = [o for o in res.items if o["kind"] == "PodGroup"]
    whole = sum(1 for g in groups if g["status"]["scheduled"] >= g["spec"]["minMember"])
    partial = sum(1 for g in groups if 0 < g["status"]["scheduled"] < g["spec"]["minMember"])
    sched_s = res.timing["scheduling"]
    print(f"gangs: {args.groups} groups x {args.size} pods x 8 GPUs on {args.nodes} nodes x 8 GPUs")
    print(
        f"groups placed whole: {whole}/{len(groups)}, partially placed: {partial}; "
        f"pods scheduled {s['scheduled']}/{s['pods']}"
    )
    print(
        f"scheduling phase: {sched_s:.2f}s ({s['scheduled'] / sched_s:.0f} pods/s, {whole / sched_s:.1f} groups/s); "
        f"simulate total {total:.2f}s"
    )
    print(f"gang cycles: {sched.gang.stats}")


if __name__ == "__main__":
    main()
