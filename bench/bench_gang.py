"""Benchmark: gang placement, in-process ``simulate`` on DGX H100 nodes (8 GPUs, racks of 8 nodes, blocks of 8
racks, zones of 4 blocks).

1. 50 PodGroups x 8 pods x 8 GPUs on 400 nodes: the time to place every group and pods/s.
2. Thousand-member gangs (issue #14): one gang of 1,000 one-GPU members on 400 nodes; three such gangs on the same
   400 nodes (3,000 of 3,200 GPUs); 1,000 eight-GPU members on 1,000 nodes; and 1,025 members on 1,024 GPUs
   (rejected by the capacity bound). For each gang: its group cycle's seconds (search + claim writes + Bindings),
   nodes used, racks and blocks spanned.

    python bench/bench_gang.py [--groups N] [--size N] [--nodes N] [--no-big]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from typing import Any

sys.path.insert(0, ".")

from bench.fleet import BLOCK_LABEL, RACK_LABEL, scale_fleet
from scheduler.config.logging import configure_logging
from scheduler.simulate.simulation import simulate


def workload(groups: int, size: int, gpus: int, seed: int = 11) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "all-gpus" if gpus == 8 else f"gpus-{gpus}", "namespace": "bench"},
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
                        "resourceClaims": [
                            {"name": "gpu", "resourceClaimTemplateName": "all-gpus" if gpus == 8 else f"gpus-{gpus}"}
                        ],
                        "containers": [{"name": "w", "image": "trainer", "resources": {"claims": [{"name": "gpu"}]}}],
                    },
                }
            )
    random.Random(seed).shuffle(pods)
    return objs + pods


def big_gangs(nodes: int, groups: int, size: int, gpus: int) -> None:
    """Thousand-member gangs: per gang, its cycle's seconds, nodes used, racks and blocks spanned."""
    fleet = scale_fleet(nodes)
    labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in fleet if o["kind"] == "Node"}
    objs = fleet + workload(groups, size, gpus)
    t0 = time.perf_counter()
    res = asyncio.run(simulate(objs))
    total = time.perf_counter() - t0
    sched = res.scheduler
    assert sched is not None
    placed: dict[str, list[str]] = {}
    for o in res.items:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            group = o["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
            placed.setdefault(group, []).append(o["spec"]["nodeName"])
    free = nodes * 8
    print(
        f"{groups} gang{'s' if groups > 1 else ''} x {size:,} pods x {gpus} GPU{'s' if gpus > 1 else ''} on {nodes:,} "
        f"nodes ({free:,} GPUs): scheduling phase {res.timing['scheduling']:.2f}s, simulate total {total:.2f}s"
    )
    for g in sorted(o["metadata"]["name"] for o in res.items if o["kind"] == "PodGroup"):
        ns = placed.get(g, [])
        secs = sched.gang.cycle_seconds.get(f"bench/{g}", 0.0)
        search = sched.gang.search_seconds.get(f"bench/{g}", 0.0)
        if not ns:
            pod = next(o for o in res.items if o["kind"] == "Pod" and o["metadata"]["name"].startswith(g + "-"))
            why = [c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
            print(
                f"  {g}: rejected after {search * 1000:.0f} ms of search ({secs:.2f}s with the {size:,} PodScheduled "
                f"conditions written): {why[0] if why else ''}"
            )
            continue
        used = set(ns)
        racks = {labels[n][RACK_LABEL] for n in used}
        blocks = {labels[n][BLOCK_LABEL] for n in used}
        print(
            f"  {g}: {len(ns):,} bound in {secs:.2f}s ({search:.2f}s search, then claim writes and Bindings); "
            f"{len(used)} nodes (fewest possible {-(-len(ns) * gpus // 8)}), {len(racks)} racks, {len(blocks)} blocks"
        )
    print(f"  gang stats: {sched.gang.stats}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--no-big", action="store_true", help="skip the thousand-member gangs")
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
    # members bound per group (the PodGroup status holds scheduler-plugins' fields only: no bound count)
    bound: dict[str, int] = {}
    for o in res.items:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            g = (o["metadata"].get("labels") or {}).get("scheduling.x-k8s.io/pod-group")
            if g:
                bound[g] = bound.get(g, 0) + 1
    whole = sum(1 for g in groups if bound.get(g["metadata"]["name"], 0) >= g["spec"]["minMember"])
    partial = sum(1 for g in groups if 0 < bound.get(g["metadata"]["name"], 0) < g["spec"]["minMember"])
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
    if args.no_big:
        return
    print()
    big_gangs(400, 1, 1000, 1)
    big_gangs(400, 3, 1000, 1)
    big_gangs(1000, 1, 1000, 8)
    big_gangs(128, 1, 1025, 1)


if __name__ == "__main__":
    main()
