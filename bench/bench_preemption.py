"""Benchmark: preemption (issue 10): victim-selection time on a full fleet, and the topology quality of the
preemptors' devices with our victim choice against upstream's.

(a) **Time**: 1,000 DGX H100 nodes full of low-priority pods (per node: 8 one-GPU template-claim pods with 4 CPUs
    each, 12 CPU pods of 16 CPUs: every GPU and CPU in use), then a stream of high-priority preemptors (one-GPU +
    4 CPUs, CPU-only 16 CPUs, four-GPU + 8 CPUs). Every node is a potential candidate; DefaultPreemption dry-runs
    ``max(10% of nodes, 100)`` of them per preemptor (upstream's defaults). Printed: PostFilter ms per preemptor
    (mean, p50, p95, max) and the stream's pods/s (scheduling phase: failed cycle, preemption, victims deleted,
    retry, bind), with the topology preference on and off.
(b) **Quality**: a mixed fleet with device topology (DGX H100 NV18 with 2 NUMA nodes, HGX A100 NV12 with NPS4,
    HGX B200 with one GPU's NVLink down on one node in four, A100 PCIe with NVLink bridges on pairs, and nodes of
    two 4-GPU NVLink islands), filled first fit (lowest free device indices, as upstream's allocator) by one-,
    two- and four-GPU low-priority pods with generated names; then two- and four-GPU high-priority preemptors.
    Run three times on the same input with GpuTopology on: ours (topology-aware victims on each node and
    choice of the node), "in-node" (our victims on each node, upstream's node choice) and upstream
    (``DefaultPreemption.topology_aware = False``: upstream's victims and node choice). Printed for the
    preemptors' claims: mean bottleneck bandwidth, share of all-NVLink claims, share inside one NUMA node, share
    as good as the best the node's SKU can give; the victims; where the preemptors landed. ``--start-batches N``
    gives the victims start times from N batches (upstream's last criterion then ties less often);
    ``--quality-only KIND`` uses one kind of node.

    python bench/bench_preemption.py [--nodes 1000] [--preemptors 100] [--quality-nodes 200]
        [--quality-preemptors 60] [--start-batches 0] [--quality-only KIND] [--seed 5] [--skip-time]
        [--skip-quality]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

sys.path.insert(0, ".")

from bench.fleet import (
    DGX_H100,
    HGX_A100_80GB,
    TOPOLOGY_ANNOTATION,
    Sku,
    device_classes,
    gpu_node_objects,
    scale_fleet,
)
from plugins.defaultpreemption.plugin import DefaultPreemption
from plugins.topology.plugin import GpuTopology
from plugins.topology.scoring import best_set_value
from scheduler.config.logging import configure_logging
from scheduler.simulate.simulation import SimulationResult, simulate

NS = "bench"
DRIVER = "gpu.nvidia.com"
PRIORITIES = {"low": 10, "low-2": 20, "high": 1000}
_UUID_NS = uuid.UUID("0b7a3c52-6f0e-4f55-9d61-2a8f4e1c7d90")

JSON = dict[str, Any]


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(_UUID_NS, "/".join(parts)))


# --- objects ---------------------------------------------------------------------------------------------------


def priority_classes() -> list[JSON]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in PRIORITIES.items()]


def templates() -> list[JSON]:
    return [{
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"gpu-{k}", "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": k}}]}}},
    } for k in (1, 2, 4)]


def pending(name: str, prio: str, gpus: int, cpu: str, memory: str = "8Gi") -> JSON:
    spec: JSON = {
        "schedulerName": "dra-scheduler",
        "priorityClassName": prio,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if gpus:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{gpus}"}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def running(name: str, prio: str, node: str, gpus: list[int], cpu: str, memory: str, start: str = "") -> list[JSON]:
    """A bound, running pod and (with ``gpus``) the claim generated from its template, allocated and reserved,
    as ``kubectl get -o yaml`` shows them."""
    uid = _uid("pod", name)
    spec: JSON = {
        "schedulerName": "dra-scheduler",
        "priorityClassName": prio,
        "priority": PRIORITIES[prio],
        "nodeName": node,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    status: JSON = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    if start:
        status["startTime"] = start
    pod: JSON = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "uid": uid},
                 "spec": spec, "status": status}
    if not gpus:
        return [pod]
    claim_name = f"{name}-gpu-x"
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{len(gpus)}"}]
    spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    claim: JSON = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name, "namespace": NS, "uid": _uid("claim", name),
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True,
                                 "blockOwnerDeletion": True}],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": len(gpus)}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [
                    {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"} for i in gpus]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": name, "uid": uid}],
        },
    }
    return [pod, claim]


# --- (a) time --------------------------------------------------------------------------------------------------


class PostFilterTimer:
    """Wraps ``DefaultPreemption.post_filter`` to time every call (all instances)."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self.by_kind: dict[str, list[float]] = {}  # the preemptor name's last part -> ms
        self.orig: Callable[..., Any] = DefaultPreemption.post_filter

    def __enter__(self) -> PostFilterTimer:
        orig, out, by_kind = self.orig, self.ms, self.by_kind

        def timed(plugin: DefaultPreemption, state: Any, pod: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(plugin, state, pod, *args, **kwargs)
            finally:
                ms = (time.perf_counter() - t0) * 1000
                out.append(ms)
                by_kind.setdefault(pod.name.rsplit("-", 1)[-1], []).append(ms)

        DefaultPreemption.post_filter = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        DefaultPreemption.post_filter = self.orig  # type: ignore[method-assign]


def full_fleet(nodes: int, seed: int) -> list[JSON]:
    rnd = random.Random(seed)
    objs = [*scale_fleet(nodes), *priority_classes(), *templates(),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    for n in range(nodes):
        node = f"dgx-h100-{n:05d}"
        for g in range(8):
            objs += running(f"g-{n:05d}-{g}", rnd.choice(["low", "low-2"]), node, [g], "4", "16Gi")
        for c in range(12):
            objs += running(f"c-{n:05d}-{c:02d}", rnd.choice(["low", "low-2"]), node, [], "16", "128Gi")
    return objs


def preemptor_stream(count: int, seed: int) -> list[JSON]:
    rnd = random.Random(seed + 1)
    out = []
    for i in range(count):
        kind = rnd.choices(["gpu1", "cpu", "gpu4"], weights=(40, 30, 30))[0]
        if kind == "gpu1":
            out.append(pending(f"hp-{i:04d}-gpu1", "high", 1, "4"))
        elif kind == "cpu":
            out.append(pending(f"hp-{i:04d}-cpu", "high", 0, "16"))
        else:
            out.append(pending(f"hp-{i:04d}-gpu4", "high", 4, "8"))
    return out


def topology_stats(res: SimulationResult) -> str:
    assert res.scheduler is not None
    plugin = res.scheduler.profiles["dra-scheduler"].instances["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    st = plugin.topology_stats
    return (f"nodes scored {st['nodes']}, searched {st['searched']}, victim sets rebuilt {st['tries']}, "
            f"improved {st['improved']}")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def time_bench(nodes: int, preemptors: int, seed: int) -> None:
    t0 = time.perf_counter()
    objs = full_fleet(nodes, seed) + preemptor_stream(preemptors, seed)
    gen = time.perf_counter() - t0
    victims_total = sum(1 for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName"))
    print(f"(a) {nodes} DGX H100 nodes full of low-priority pods ({victims_total} pods: 8 x 1-GPU template-claim "
          f"+ 12 CPU pods per node, every GPU and CPU in use; generated in {gen:.1f}s); {preemptors} high-priority "
          "preemptors (40% 1 GPU + 4 CPU, 30% 16 CPU, 30% 4 GPU + 8 CPU)")
    for aware in (True, False):
        DefaultPreemption.topology_aware = aware
        try:
            with PostFilterTimer() as timer:
                res = asyncio.run(simulate(objs))
        finally:
            DefaultPreemption.topology_aware = True
        s = res.summary
        sched_s = res.timing.get("scheduling", s["seconds"])
        ms = timer.ms
        label = "topology preference on " if aware else "topology preference off"
        print(f"    {label}: PostFilter {len(ms)} calls, mean {statistics.fmean(ms):.0f} ms, p50 {pct(ms, 0.5):.0f} "
              f"ms, p95 {pct(ms, 0.95):.0f} ms, max {max(ms):.0f} ms; preemptors bound {s['scheduled']}/"
              f"{preemptors}, {s['preempted']} victims; stream {s['scheduled'] / sched_s:.1f} pods/s "
              f"(scheduling phase {sched_s:.1f}s, load {res.timing.get('load', 0.0):.1f}s)")
        kinds = ", ".join(f"{k} {statistics.fmean(v):.0f} ms" for k, v in sorted(timer.by_kind.items()))
        print(f"        mean PostFilter by preemptor: {kinds}")
        if aware:
            print(f"        topology preference: {topology_stats(res)}")


# --- (b) quality -----------------------------------------------------------------------------------------------


def _islands(i: int, j: int) -> str:
    return "NV12" if (i < 4) == (j < 4) else "SYS"


def _with_matrix(objs: list[JSON], matrix: list[list[str]]) -> list[JSON]:
    for o in objs:
        if o["kind"] == "Node":
            doc = json.loads(o["metadata"]["annotations"][TOPOLOGY_ANNOTATION])
            doc["matrix"] = matrix
            o["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = json.dumps(doc)
    return objs


KINDS = ("h100", "b200", "a100", "bridged", "islands")


def quality_fleet(nodes: int, only: str = "") -> list[JSON]:
    """30% DGX H100, 25% HGX A100 (NPS4), 15% HGX B200 (1 in 4 with GPU 2's NVLink down), 15% A100 PCIe with
    NVLink bridges, 15% two 4-GPU NVLink islands; or only nodes of the kind ``only``."""
    from bench.bench_topology import A100_PCIE_BRIDGED, B200_SKU, bridged_matrix, degraded_b200_matrix

    islands = [["X" if i == j else _islands(i, j) for j in range(8)] for i in range(8)]
    mix: list[tuple[str, float, Sku, Callable[[int], list[list[str]] | None]]] = [
        ("h100", 0.30, DGX_H100, lambda j: None),
        ("a100", 0.25, HGX_A100_80GB, lambda j: None),
        ("b200", 0.15, B200_SKU, lambda j: degraded_b200_matrix() if j % 4 == 0 else None),
        ("bridged", 0.15, A100_PCIE_BRIDGED, lambda j: bridged_matrix()),
        ("islands", 0.15, DGX_H100, lambda j: islands),
    ]
    counts = {k: (nodes if k == only else 0) if only else int(nodes * share) for k, share, _, _ in mix}
    counts["h100"] += nodes - sum(counts.values())
    objs = device_classes()
    for kind, _, sku, matrix in mix:
        for j in range(counts[kind]):
            node = gpu_node_objects(f"{kind}-{j:03d}", sku)
            m = matrix(j)
            objs += _with_matrix(node, m) if m is not None else node
    return objs


def first_fit_fill(fleet: list[JSON], seed: int, start_batches: int) -> list[JSON]:
    """Fill every node's GPUs with 1/2/4-GPU low-priority pods arriving in random order, each on the lowest free
    device indices of the first node with room (upstream's allocator order), named as generated pods are."""
    rnd = random.Random(seed)
    nodes = [o["metadata"]["name"] for o in fleet if o["kind"] == "Node"]
    free: dict[str, list[int]] = {n: list(range(8)) for n in nodes}
    starts = [f"2026-01-01T{h:02d}:{m:02d}:00Z" for h in range(24) for m in (0, 30)][:start_batches]
    out: list[JSON] = []
    i = 0
    open_nodes = list(nodes)
    while open_nodes:
        k = rnd.choices((1, 2, 4), weights=(40, 35, 25))[0]
        node = next((n for n in open_nodes if len(free[n]) >= k), None)
        if node is None:
            k = 1
            node = open_nodes[0]
        gpus, free[node] = free[node][:k], free[node][k:]
        if not free[node]:
            open_nodes.remove(node)
        prio = "low-2" if rnd.random() < 0.25 else "low"
        # generated names (a Job's or ReplicaSet's pods): the name order upstream falls back to on equal
        # priority and start time says nothing about the devices
        name = f"v-{rnd.getrandbits(40):010x}-{k}gpu"
        out += running(name, prio, node, gpus, "1", "4Gi", rnd.choice(starts) if starts else "")
        i += 1
    return out


def measure(res: SimulationResult) -> Mapping[str, float]:
    sched = res.scheduler
    assert sched is not None
    snap = sched.cache.snapshot()
    model = GpuTopology({})
    bottleneck: list[float] = []
    nvlink = numa = ideal = n = 0
    for c in res.items:
        if c["kind"] != "ResourceClaim" or not c["metadata"]["name"].startswith("hp-"):
            continue
        alloc = (c.get("status") or {}).get("allocation")
        if not alloc:
            continue
        results = alloc["devices"]["results"]
        node = results[0]["pool"]
        view = model.view(snap, node)
        assert view is not None
        idx = sorted(view.gpu_of[(r["driver"], r["pool"], r["device"])] for r in results)
        mask = sum(1 << i for i in idx)
        b, negspan = view.table.value(mask)
        n += 1
        bottleneck.append(b / 10)
        nvlink += all(view.topo.codes[x][y].startswith("NV") for x in idx for y in idx if x < y)
        numa += negspan == -1
        ideal += (b, negspan) == best_set_value(view.table, view.full, len(idx))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    bound = sum(1 for name, o in pods.items() if name.startswith("hp-") and o["spec"].get("nodeName"))
    kinds = Counter(o["spec"]["nodeName"].rsplit("-", 1)[0] for name, o in pods.items()
                    if name.startswith("hp-") and o["spec"].get("nodeName"))
    victims = [o for o in res.deleted if o["kind"] == "Pod"]
    return {
        "claims": n,
        "bound": bound,
        "bottleneck": statistics.fmean(bottleneck) if bottleneck else 0.0,
        "nvlink": nvlink / max(1, n),
        "numa": numa / max(1, n),
        "ideal": ideal / max(1, n),
        "victims": len(victims),
        "victim_prio": sum(o["spec"].get("priority", 0) for o in victims),
        **{f"on:{k}": float(n) for k, n in kinds.items()},
    }


def quality_bench(nodes: int, preemptors: int, seed: int, start_batches: int, only: str = "") -> None:
    fleet = quality_fleet(nodes, only)
    objs = [*fleet, *priority_classes(), *templates(), *first_fit_fill(fleet, seed, start_batches)]
    rnd = random.Random(seed + 2)
    for i in range(preemptors):
        k = rnd.choices((2, 4), weights=(40, 60))[0]
        objs.append(pending(f"hp-{i:03d}-{k}gpu", "high", k, "1"))
    fill = sum(1 for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName"))
    starts = f"start times in {start_batches} batches" if start_batches else "no start times (equal)"
    kinds = (f"only {only}" if only else "30% DGX H100 NV18, 25% HGX A100 NV12 NPS4, 15% HGX B200 1 in 4 degraded, "
             "15% A100 PCIe bridged pairs, 15% two 4-GPU NVLink islands")
    print(f"(b) {nodes} nodes ({kinds}) filled first fit by {fill} 1/2/4-GPU low-priority pods ({starts}); "
          f"{preemptors} high-priority 2/4-GPU preemptors")
    runs: dict[str, Mapping[str, float]] = {}
    stats = ""
    orig_tie_breaker = DefaultPreemption._topology_tie_breaker
    for name, aware, node_choice in (("ours", True, True), ("in-node", True, False), ("upstream", False, False)):
        DefaultPreemption.topology_aware = aware
        if not node_choice:  # our victim choice on each node, upstream's choice of the node
            DefaultPreemption._topology_tie_breaker = lambda self, c: 0.0  # type: ignore[method-assign]
        try:
            res = asyncio.run(simulate(objs))
        finally:
            DefaultPreemption.topology_aware = True
            DefaultPreemption._topology_tie_breaker = orig_tie_breaker  # type: ignore[method-assign]
        runs[name] = measure(res)
        stats = stats or topology_stats(res)
    ours, up = runs["ours"], runs["upstream"]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "-"

    def row(label: str, key: str, fmt: str, with_ratio: bool = True) -> tuple[str, ...]:
        vals = [format(runs[n].get(key, 0.0), fmt) for n in ("ours", "in-node", "upstream")]
        return (label, *vals, ratio(ours.get(key, 0.0), up.get(key, 0.0)) if with_ratio else "")

    rows = [
        row("preemptors bound", "bound", ".0f", False),
        row("mean bottleneck bandwidth (GB/s)", "bottleneck", ".1f"),
        row("all-NVLink claims", "nvlink", ".1%"),
        row("one-NUMA-node claims", "numa", ".1%"),
        row("claims as good as the SKU's best", "ideal", ".1%"),
        row("victims", "victims", ".0f"),
        row("sum of victims' priorities", "victim_prio", ".0f", False),
        *(row(f"preemptors on {k} nodes", "on:" + k, ".0f", False)
          for k in KINDS if not only),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"    {'':{w}}  {'ours':>8}  {'in-node':>8}  {'upstream':>8}  {'ours/up':>7}")
    for r in rows:
        print(f"    {r[0]:{w}}  {r[1]:>8}  {r[2]:>8}  {r[3]:>8}  {r[4]:>7}")
    print("    (in-node: our victim choice on each node, upstream's node choice)")
    print(f"    topology preference (ours): {stats}. The runs diverge after their first different choice, so victim "
          "totals are not paired; each single choice has no more victims than upstream's on the same state.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--preemptors", type=int, default=100)
    ap.add_argument("--quality-nodes", type=int, default=200)
    ap.add_argument("--quality-preemptors", type=int, default=60)
    ap.add_argument("--start-batches", type=int, default=0, help="(b): victims' start times from N batches")
    ap.add_argument("--quality-only", default="", choices=["", *KINDS], help="(b): a fleet of one kind of node")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--skip-time", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    args = ap.parse_args()
    configure_logging(verbose=False)
    if not args.skip_time:
        time_bench(args.nodes, args.preemptors, args.seed)
    if not args.skip_quality:
        quality_bench(args.quality_nodes, args.quality_preemptors, args.seed, args.start_batches, args.quality_only)


if __name__ == "__main__":
    main()
