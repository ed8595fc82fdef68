"""Benchmark: quality of topology-aware placement against first fit (the upstream behaviour), same run.

A mixed fleet (DGX H100 NV18, HGX A100 NV12, HGX B200 with one GPU's NVLink down, A100 PCIe with NVLink
bridges on non-adjacent indices, 8x L40S PCIe boxes) is filled by a realistic mix of 1-, 2-, 4- and 8-GPU claims
arriving in random order, twice: with GpuTopology (default profile) and with GpuTopology disabled (upstream
device order, LeastAllocated node spread). Printed, with ours/first-fit ratios:

* mean bottleneck bandwidth of the multi-GPU allocations (slowest pair, nominal GB/s, same model for both);
* share of multi-GPU claims placed entirely on NVLink-connected GPUs;
* share of multi-GPU claims inside one NUMA node;
* 8-GPU pods still placeable after the fill (whole free 8-GPU nodes), and pods that did not fit.

Then gangs on a fragmented fleet (400 DGX H100 in racks of 8, 40% of the nodes with one GPU in use; 40 groups of
6 pods x 8 GPUs): groups placed inside one rack, and racks spanned, ours against first fit.

``--core`` also runs the core throughput bench (bench_simulate's workload) with topology on and off.

    python bench/bench_topology.py [--nodes N] [--fill 0.75] [--seed S] [--core]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import replace
from typing import Any

sys.path.insert(0, ".")

from bench.fleet import (
    DGX_H100,
    HGX_A100_80GB,
    L40S_PCIE_8,
    TOPOLOGY_ANNOTATION,
    GpuModel,
    device_classes,
    gpu_node_objects,
    topology_matrix,
)
from plugins.topology.plugin import GpuTopology
from scheduler.config.logging import configure_logging
from scheduler.config.schedulerconfig import SchedulerConfig, default_config, load_config_text
from scheduler.simulate.simulation import SimulationResult, simulate

FIRST_FIT = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  plugins:
    multiPoint:
      disabled: [{name: GpuTopology}]
"""

A100_PCIE = GpuModel(
    product_name="NVIDIA A100 80GB PCIe", architecture="Ampere", cuda_compute_capability="8.0.0", memory="80Gi",
    family="ampere",
)
A100_PCIE_BRIDGED = replace(L40S_PCIE_8, name="a100-pcie-bridged", gpu=A100_PCIE)
B200 = GpuModel(
    product_name="NVIDIA B200", architecture="Blackwell", cuda_compute_capability="10.0.0", memory="183359Mi",
    nvlink="NV18", family="blackwell",
)
B200_SKU = replace(DGX_H100, name="hgx-b200", gpu=B200)


def _with_matrix(objs: list[dict[str, Any]], matrix: list[list[str]]) -> list[dict[str, Any]]:
    for o in objs:
        if o["kind"] == "Node":
            doc = json.loads(o["metadata"]["annotations"][TOPOLOGY_ANNOTATION])
            doc["matrix"] = matrix
            o["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = json.dumps(doc)
    return objs


def bridged_matrix() -> list[list[str]]:
    """NVLink bridges on (0,2), (1,3), (4,5), (6,7) (k8s-device-plugin#546); PCIe codes otherwise."""
    base = topology_matrix(A100_PCIE_BRIDGED)
    for a, b in ((0, 2), (1, 3), (4, 5), (6, 7)):
        base[a][b] = base[b][a] = "NV12"
    return base


def degraded_b200_matrix() -> list[list[str]]:
    """GPU 2 lost its NVLink (vllm#16336): NODE to its NUMA peers, SYS to the rest."""
    base = topology_matrix(B200_SKU)
    for j in range(8):
        if j != 2:
            base[2][j] = base[j][2] = "NODE" if j < 4 else "SYS"
    return base


def fleet(nodes: int) -> list[dict[str, Any]]:
    """Mixed fleet: 40% DGX H100, 20% HGX A100, 10% HGX B200 (one degraded per 4), 15% bridged A100 PCIe, 15%
    L40S; 8 nodes per rack."""
    objs = device_classes()
    mix = [("h100", 0.40), ("a100", 0.20), ("b200", 0.10), ("bridged", 0.15), ("l40s", 0.15)]
    counts = {k: int(nodes * share) for k, share in mix}
    counts["h100"] += nodes - sum(counts.values())
    i = 0
    for kind, n in counts.items():
        for j in range(n):
            name = f"{kind}-{j:03d}"
            labels = {
                "topology.kubernetes.io/zone": "zone-0",
                "cloud.provider.com/topology-block": f"block-{i // 32}",
                "cloud.provider.com/topology-rack": f"rack-{i // 8}",
            }
            i += 1
            if kind == "h100":
                objs += gpu_node_objects(name, DGX_H100, labels)
            elif kind == "a100":
                objs += gpu_node_objects(name, HGX_A100_80GB, labels)
            elif kind == "b200":
                node = gpu_node_objects(name, B200_SKU, labels)
                objs += _with_matrix(node, degraded_b200_matrix()) if j % 4 == 0 else node
            elif kind == "bridged":
                objs += _with_matrix(gpu_node_objects(name, A100_PCIE_BRIDGED, labels), bridged_matrix())
            else:
                objs += gpu_node_objects(name, L40S_PCIE_8, labels)
    return objs


def workload(total_gpus: int, fill: float, seed: int) -> list[dict[str, Any]]:
    """Claims of 1/2/4/8 GPUs (weights 45/25/20/10 by count) until ``fill`` of the fleet's GPUs is asked for."""
    rnd = random.Random(seed)
    objs: list[dict[str, Any]] = []
    for k in (1, 2, 4, 8):
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"gpu-{k}", "namespace": "bench"},
                "spec": {
                    "spec": {"devices": {"requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": k}}
                    ]}}
                },
            }
        )
    pods: list[dict[str, Any]] = []
    asked = 0
    while asked < fill * total_gpus:
        k = rnd.choices((1, 2, 4, 8), weights=(45, 25, 20, 10))[0]
        asked += k
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{len(pods):05d}-{k}gpu", "namespace": "bench"},
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{k}"}],
                    "containers": [{"name": "c", "image": "x", "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpu"}]}}],
                },
            }
        )
    rnd.shuffle(pods)
    return objs + pods


def measure(res: SimulationResult) -> dict[str, float]:
    sched = res.scheduler
    assert sched is not None
    snap = sched.cache.snapshot()
    model = GpuTopology({})  # the same model measures both runs
    bottlenecks: list[float] = []
    ideal: list[float] = []  # the best set of that size on the same node, as if the node were empty
    matters = 0  # claims on a node where sets of that size differ in bottleneck (the choice matters)
    bounds: dict[tuple[int, int], tuple[float, float]] = {}
    nvlink = numa_local = multi = 0
    for c in res.items:
        if c["kind"] != "ResourceClaim":
            continue
        alloc = (c.get("status") or {}).get("allocation")
        if not alloc:
            continue
        results = alloc["devices"]["results"]
        if len(results) < 2:
            continue
        node = results[0]["pool"]
        view = model.view(snap, node)
        assert view is not None
        idx = sorted(view.gpu_of[(r["driver"], r["pool"], r["device"])] for r in results)
        multi += 1
        mask = sum(1 << i for i in idx)
        b, negspan = view.table.value(mask)
        bottlenecks.append(b / 10)
        key = (id(view.table), len(idx))
        if key not in bounds:
            vals = [view.table.value(m)[0] / 10 for m in range(1 << view.topo.size) if m.bit_count() == len(idx)]
            bounds[key] = (max(vals), min(vals))
        hi, lo = bounds[key]
        ideal.append(hi)
        matters += hi != lo
        if all(view.topo.codes[x][y].startswith("NV") for x in idx for y in idx if x < y):
            nvlink += 1
        if negspan == -1:
            numa_local += 1
    whole = 0
    for info in snap.nodes:
        view = model.view(snap, info.name)
        if view is not None and view.topo.size == 8 and model.free_mask(snap.ledger, info.name, view) == 0xFF:
            whole += 1
    return {
        "multi": multi,
        "mean_bottleneck": sum(bottlenecks) / max(1, len(bottlenecks)),
        "ideal_bottleneck": sum(ideal) / max(1, len(ideal)),
        "choice_matters": matters / max(1, multi),
        "nvlink_share": nvlink / max(1, multi),
        "numa_share": numa_local / max(1, multi),
        "placeable_8": whole,
        "unschedulable": res.summary["unschedulable"],
        "pods_per_s": res.summary["scheduled"] / max(res.timing.get("scheduling", 1e-9), 1e-9),
    }


def run(objs: list[dict[str, Any]], config: SchedulerConfig) -> SimulationResult:
    return asyncio.run(simulate(objs, config))


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else ("inf" if a else "-")


def quality(nodes: int, fill: float, seed: int) -> None:
    objs = fleet(nodes)
    gpus = sum(len(o["spec"].get("devices", [])) for o in objs if o["kind"] == "ResourceSlice")
    work = workload(gpus, fill, seed)
    pods = sum(1 for o in work if o["kind"] == "Pod")
    print(f"fleet: {nodes} nodes, {gpus} GPUs (H100 NV18 / A100 NV12 / B200 NV18, 1 in 4 degraded / A100 PCIe "
          f"bridged pairs / L40S PCIe); {pods} pods of 1/2/4/8 GPUs asking for {fill:.0%} of the GPUs, random order")
    t0 = time.perf_counter()
    ours = measure(run(objs + work, default_config()))
    t1 = time.perf_counter()
    ff = measure(run(objs + work, load_config_text(FIRST_FIT)))
    t2 = time.perf_counter()
    rows = [
        ("multi-GPU claims placed", f"{ours['multi']:.0f}", f"{ff['multi']:.0f}", ratio(ours["multi"], ff["multi"])),
        ("mean bottleneck bandwidth (GB/s)", f"{ours['mean_bottleneck']:.1f}", f"{ff['mean_bottleneck']:.1f}",
         ratio(ours["mean_bottleneck"], ff["mean_bottleneck"])),
        ("  bound: best set on the same node", f"{ours['ideal_bottleneck']:.1f}", f"{ff['ideal_bottleneck']:.1f}",
         ratio(ours["mean_bottleneck"], ours["ideal_bottleneck"])),
        ("  claims where the set matters", f"{ours['choice_matters']:.1%}", f"{ff['choice_matters']:.1%}", ""),
        ("all-NVLink multi-GPU claims", f"{ours['nvlink_share']:.1%}", f"{ff['nvlink_share']:.1%}",
         ratio(ours["nvlink_share"], ff["nvlink_share"])),
        ("one-NUMA-node multi-GPU claims", f"{ours['numa_share']:.1%}", f"{ff['numa_share']:.1%}",
         ratio(ours["numa_share"], ff["numa_share"])),
        ("8-GPU pods still placeable", f"{ours['placeable_8']:.0f}", f"{ff['placeable_8']:.0f}",
         ratio(ours["placeable_8"], ff["placeable_8"])),
        ("pods that did not fit", f"{ours['unschedulable']:.0f}", f"{ff['unschedulable']:.0f}", ""),
        ("scheduling pods/s", f"{ours['pods_per_s']:.0f}", f"{ff['pods_per_s']:.0f}",
         ratio(ours["pods_per_s"], ff["pods_per_s"])),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'':{w}}  {'topology':>10}  {'first-fit':>10}  {'ratio':>7}")
    for r in rows:
        print(f"{r[0]:{w}}  {r[1]:>10}  {r[2]:>10}  {r[3]:>7}")
    print(f"(simulate: topology {t1 - t0:.1f}s, first-fit {t2 - t1:.1f}s)")


def gangs(seed: int, busy_share: float = 0.4) -> None:
    """40 gangs of 6 eight-GPU pods on 400 DGX H100 in racks of 8, ``busy_share`` of the nodes with one GPU in use.

    Printed with the best possible: a member needs a whole free node, so a rack hosts ``free nodes // 6`` gangs
    and no placement can put more than the sum of that over the racks inside one rack."""
    from bench.bench_gang import workload as gang_workload
    from bench.fleet import RACK_LABEL, scale_fleet

    rnd = random.Random(seed)
    objs = scale_fleet(400)
    busy = set(rnd.sample(range(400), round(400 * busy_share)))
    for i in sorted(busy):
        node = f"dgx-h100-{i:05d}"
        objs.append({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"busy-{i}", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0"}]}}},
        })
    node_rack = {o["metadata"]["name"]: o["metadata"]["labels"][RACK_LABEL] for o in objs if o["kind"] == "Node"}
    free_per_rack: dict[str, int] = {}
    for i in range(400):
        if i not in busy:
            r = node_rack[f"dgx-h100-{i:05d}"]
            free_per_rack[r] = free_per_rack.get(r, 0) + 1
    best = min(40, sum(v // 6 for v in free_per_rack.values()))
    objs += gang_workload(40, 6, 8)
    out: dict[str, tuple[int, int, int]] = {}
    for name, cfg in (("topology", default_config()), ("first-fit", load_config_text(FIRST_FIT))):
        res = run(objs, cfg)
        assert res.scheduler is not None
        rack = {n.name: n.node.labels[RACK_LABEL] for n in res.scheduler.cache.snapshot().nodes}
        groups: dict[str, set[str]] = {}
        for o in res.items:
            if o["kind"] == "Pod" and o["spec"].get("nodeName"):
                g = o["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
                groups.setdefault(g, set()).add(rack[o["spec"]["nodeName"]])
        out[name] = (len(groups), sum(1 for v in groups.values() if len(v) == 1), sum(len(v) for v in groups.values()))
    (n1, one1, span1), (n2, one2, span2) = out["topology"], out["first-fit"]
    print(f"gangs (40 x 6 pods x 8 GPUs, 400 nodes, {busy_share:.0%} with a GPU in use): groups inside one rack: "
          f"topology {one1}/{n1}, first-fit {one2}/{n2} ({ratio(one1, one2)}), best possible {best}/40 "
          f"(racks with >= 6 whole free nodes, counted per rack); racks spanned {span1} vs {span2}")


def core(nodes: int, small: int, large: int, rounds: int) -> None:
    """Core throughput, topology off and on, alternating: wall-clock pods/s of the scheduling phase and pods per
    CPU-second of the whole simulate (less sensitive to other load on the machine)."""
    from bench.bench_simulate import workload as core_workload
    from bench.fleet import scale_fleet

    objs = scale_fleet(nodes) + core_workload(small, large)
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for name, cfg in (("off", load_config_text(FIRST_FIT)), ("on", default_config())):
            t0 = time.process_time()
            res = run(objs, cfg)
            used = time.process_time() - t0
            wall[name].append(res.summary["scheduled"] / res.timing["scheduling"])
            cpu[name].append(res.summary["scheduled"] / used)
    w_off, w_on = max(wall["off"]), max(wall["on"])
    c_off, c_on = max(cpu["off"]), max(cpu["on"])
    print(f"core bench ({nodes} nodes, {small} x 1 GPU + {large} x 4 GPU, best of {rounds}): scheduling phase "
          f"topology off {w_off:.0f} pods/s, on {w_on:.0f} pods/s ({w_on / w_off - 1:+.1%}); per CPU-second of "
          f"simulate: off {c_off:.0f}, on {c_on:.0f} ({c_on / c_off - 1:+.1%})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--fill", type=float, default=0.75)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--core", action="store_true", help="also compare core throughput with topology on/off")
    ap.add_argument("--rounds", type=int, default=2, help="--core: alternating off/on rounds (best of)")
    args = ap.parse_args()
    configure_logging(verbose=False)
    quality(args.nodes, args.fill, args.seed)
    gangs(args.seed, 0.4)
    gangs(args.seed, 0.1)
    if args.core:
        core(1000, 6000, 500, args.rounds)


if __name__ == "__main__":
    main()
