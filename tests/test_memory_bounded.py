"""A scheduler under churn holds memory for what exists, not for everything it has ever seen (issue: the leader's
RSS grew ~35 KB per pod created, without a plateau).

The scheduling core runs here against the in-memory API through rounds of churn: pods of four shapes from
ResourceClaimTemplates, pairs of pods sharing their own ResourceClaim (a signature per pair), CPU pods with pod
anti-affinity; each round deletes as many pods as it creates, and their claims go as kube-controller-manager would
take them. After a warm-up, the memory the Python heap holds (tracemalloc) must not grow with the pods churned
through: what grew before was per-state and per-signature memos cleared only at 100,000-500,000 entries (the
framework's filter and score memos, DynamicResources' per-node results, its status templates, the claim spec
cache keyed by claim UID, the fragmentation order memo), and maps keyed by a PodGroup nobody pruned.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import tracemalloc
from typing import Any

import pytest

from bench.fleet import scale_fleet
from e2e.fleet import claim_template, gpu_pod  # the live suites' pod and template builders
from plugins.fragmentation import plugin as fragmentation_plugin
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.framework import batch, runtime
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.claimcontroller import DeletionRecorder, create_pod_claims, release_claims
from scheduler.simulate.memapi import InMemoryAPI

Obj = dict[str, Any]
NS = "churn"
GPU = "gpu.nvidia.com"


def _cpu_pod(name: str, app: str) -> Obj:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {
            "schedulerName": "dra-scheduler",
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }


class Churn:
    def __init__(self, nodes: int = 12, per_round: int = 16, seed: int = 1) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.clock = FakeClock(1000.0)
        self.sched = Scheduler(self.cache, self.api, default_config(), clock=self.clock, inline_binding=True)
        self.deleted = DeletionRecorder()
        self.api.watchers.append(self.deleted)
        self.api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for o in scale_fleet(nodes):
            self.api.load_shared(o["kind"], o)
        for c in (1, 2, 4, 8):
            self.api.load_shared("ResourceClaimTemplate", claim_template(NS, f"t{c}", count=c))
        self.per_round = per_round
        self.rng = random.Random(seed)
        self.ids = itertools.count()
        self.live: list[str] = []
        self.shared: dict[str, list[str]] = {}  # claim -> its pods
        self.created = 0

    async def _create(self) -> None:
        rng = self.rng
        made = 0
        while made < self.per_round:
            i = next(self.ids)
            r = rng.random()
            if r < 0.15:
                await self.api.create("Pod", _cpu_pod(f"c{i}", f"web-{i % 5}"))
                self.live.append(f"c{i}")
                made += 1
            elif r < 0.3:
                claim = f"shared-{i}"
                await self.api.create(
                    "ResourceClaim",
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {"name": claim, "namespace": NS},
                        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
                    },
                )
                names = [f"s{i}-{j}" for j in range(2)]
                for n in names:
                    await self.api.create("Pod", gpu_pod(NS, n, claim=claim))
                self.shared[claim] = names
                self.live.extend(names)
                made += 2
            else:
                size = rng.choice((1, 1, 1, 2, 4, 8))
                stored = await self.api.create("Pod", gpu_pod(NS, f"g{i}", template=f"t{size}"))
                await create_pod_claims(self.api, stored)
                self.live.append(f"g{i}")
                made += 1
        self.created += made

    async def _schedule(self) -> None:
        q = self.sched.queue
        while True:
            info = q.pop()
            if info is None:
                wake = q.next_wakeup()
                if wake is None or wake > self.clock.now() + 5:
                    return
                self.clock.set(max(wake, self.clock.now()))
                continue
            await self.sched.run_once(info)

    async def _delete(self) -> None:
        self.rng.shuffle(self.live)
        gone, self.live = self.live[: self.per_round], self.live[self.per_round :]
        for name in gone:
            await self.api.delete("Pod", NS, name)
        await release_claims(self.api, self.deleted)
        self.deleted.deleted.clear()
        alive = set(self.live)
        for claim, pods in list(self.shared.items()):
            if alive.isdisjoint(pods):
                cur = await self.api.get("ResourceClaim", NS, claim)
                cur = {**cur, "status": {}}
                cur = await self.api.update("ResourceClaim", cur, subresource="status")
                await self.api.update("ResourceClaim", {**cur, "metadata": {**cur["metadata"], "finalizers": []}})
                await self.api.delete("ResourceClaim", NS, claim)
                del self.shared[claim]

    async def round(self) -> None:
        await self._create()
        await self._schedule()
        await self._delete()
        self.api.writes.clear()  # the in-memory API's own logs: not the scheduler's memory
        self.api.events.clear()
        self.clock.set(self.clock.now() + 1.0)


def _heap() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_memory_does_not_grow_with_the_pods_churned_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables that are bounded by size rather than pruned (signatures remembered, equal-pod batches, the
    fragmentation mix's window of recent pods) get small bounds here, so that the warm-up fills
    them: what grows after it grows without bound."""
    monkeypatch.setattr(runtime, "MAX_SIGNATURES", 24)
    monkeypatch.setattr(batch, "MAX_BATCHES", 24)
    monkeypatch.setattr(fragmentation_plugin, "DEFAULT_WINDOW", 300)

    async def go() -> tuple[list[tuple[int, int]], int]:
        churn = Churn()
        for _ in range(40):  # warm-up: every bounded table reaches its working size
            await churn.round()
        samples = []  # (pods created so far, heap bytes), every 10 rounds
        for r in range(160):
            await churn.round()
            if r % 10 == 9:
                samples.append((churn.created, _heap()))
        return samples, churn.sched.attempts["scheduled"]

    tracemalloc.start(1)
    try:
        samples, scheduled = asyncio.run(go())
    finally:
        tracemalloc.stop()
    assert scheduled > 2000  # the churn really placed pods (most rounds fill what the last one freed)
    # least-squares slope of the heap over the pods created: the live objects and the bounded tables come and go
    # by a few hundred KB from one sample to the next, so a slope over 16 samples, not two samples
    n = len(samples)
    mx = sum(x for x, _ in samples) / n
    my = sum(y for _, y in samples) / n
    per_pod = sum((x - mx) * (y - my) for x, y in samples) / sum((x - mx) ** 2 for x, _ in samples)
    # before: ~8 KB more per pod churned through, linear; now ~100 B (noise around a plateau)
    grown = samples[-1][1] - samples[0][1]
    pods = samples[-1][0] - samples[0][0]
    assert per_pod < 1024, f"{grown / 2**20:.2f} MiB more over {pods} pods: {per_pod:.0f} B per pod"


def test_deleted_pods_and_old_node_versions_are_not_kept_alive_by_the_memos() -> None:
    """With the default bounds (512 signatures, 256 batches): the framework's filter and score memos and the
    equal-pod batches kept, per signature and node, the NodeInfo and the pod whose Filter gave the status. Each
    NodeInfo holds the pods on its node, so old versions kept pods deleted long ago alive, up to signatures x
    nodes of them (on 1,250 nodes, hundreds of thousands): the live leader's RSS climbed for 10+ minutes of churn
    before the tables were full. Now the memos keep NodeInfo.version and the pod's uid; a waiting pod is found in
    Framework.owners until it is bound or deleted (Scheduler._forget_pod)."""
    import gc

    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

    async def go() -> tuple[int, int, int, int]:
        churn = Churn()
        for _ in range(60):
            await churn.round()
        gc.collect()
        live = set(churn.live)
        objs = gc.get_objects()  # (other tests of this process may keep objects of their own: ours are in NS)
        gone = sum(1 for o in objs if type(o) is Pod and o.namespace == NS and o.meta.name not in live)
        infos = sum(1 for o in objs if type(o) is NodeInfo and any(p.namespace == NS for p in o.pod_list))
        owners = sum(len(fw.owners) for fw in churn.sched.profiles.values())
        return gone, infos, len(live), owners

    gone, infos, live, owners = asyncio.run(go())
    # before: 332 Pod objects of deleted pods alive after 60 rounds (1,616 after 120), NodeInfos likewise growing
    assert gone <= 40, (gone, live)
    assert infos <= 4 * 12 + 10, infos  # 12 nodes: the cache's, the last snapshot's, a few in flight
    assert owners <= live + 16, owners  # pending pods only


def test_a_node_state_memo_keeps_only_each_nodes_current_state() -> None:
    """scheduler/framework/memo.py: a new state of a node (another Node object, another revision) replaces the
    node's entries; a node state holds at most ``per_node`` keys; deleted nodes are forgotten by ``retain``."""
    from scheduler.framework.memo import NodeStateMemo

    memo: NodeStateMemo[int] = NodeStateMemo(per_node=3)
    a, b = object(), object()
    for rev in range(100):
        memo.put("n1", a, rev, "sig", rev)
    assert len(memo) == 1 and memo.get("n1", a, 99, "sig") == 99 and memo.get("n1", a, 98, "sig") is None
    memo.put("n1", b, 99, "sig", -1)  # a re-created node under the same name: not the old entries
    assert memo.get("n1", a, 99, "sig") is None and memo.get("n1", b, 99, "sig") == -1
    for i in range(10):
        memo.put("n1", b, 99, f"k{i}", i)
    assert len(memo) == 3 and memo.get("n1", b, 99, "k9") == 9 and memo.get("n1", b, 99, "k0") is None
    memo.put("n2", a, 0, "sig", 1)
    names = ("n2",)
    memo.retain(names)
    assert memo.node_count() == 1 and memo.get("n2", a, 0, "sig") == 1


def test_a_scheduling_cycle_leaves_no_reference_cycles() -> None:
    """What a cycle allocates must be freed by reference counting when the cycle is over, not wait for the
    collector. The live scheduler sets high collector thresholds (scheduler/cli.py GC_THRESHOLDS): a full
    collection comes once in millions of allocations, so each cycle's garbage in a cycle - its CycleState, the
    snapshot, the pods and NodeInfos it saw - piled up between full passes (43,000 unreachable objects found
    by a full collection 3 minutes into a live soak) and left pymalloc's arenas fragmented when it went. The
    cause: DeviceFragmentation kept in the CycleState a device-order function that held the CycleState
    (now a weak reference). gc's DEBUG_SAVEALL keeps whatever a collection finds unreachable, to count."""
    import gc
    from collections import Counter

    from scheduler.kube import memory

    async def go() -> tuple[Counter[str], int]:
        churn = Churn()
        for _ in range(10):
            await churn.round()
        gc.collect()
        with memory.saving_garbage() as saved:
            before = churn.created
            for _ in range(30):
                await churn.round()
            gc.collect()
            garbage = Counter(type(o).__qualname__ for o in saved)
        return garbage, churn.created - before

    garbage, pods = asyncio.run(go())
    assert pods >= 400
    # before: 58,000 objects per 1,000 pods: CycleState, Snapshot, NodeInfo, Pod, ResourceClaim, Allocator, ...
    assert sum(garbage.values()) == 0, garbage.most_common(12)


def test_nodes_replaced_under_new_names_leave_the_per_node_caches() -> None:
    """GpuTopology (its node views and free-device counts) and DeviceFragmentation (node models and device
    states) keep per-node caches keyed by node name; each entry holds the Node, its slices or a ledger. On a
    cluster whose autoscaler replaces nodes under new names they kept one entry per name ever seen, for as long
    as the process ran. Now the names that leave the snapshot leave the caches (``NodeNameTables``)."""
    from bench.fleet import DGX_H100, gpu_node_objects

    async def go() -> tuple[int, dict[str, int]]:
        churn = Churn(nodes=6)
        await churn.round()
        for k in range(24):  # the oldest node out, a new name in, every round
            nodes = sorted(n["metadata"]["name"] for n in churn.api.stored("Node"))
            old = nodes[0]
            for s in [s for s in churn.api.stored("ResourceSlice") if s["spec"].get("nodeName") == old]:
                await churn.api.delete("ResourceSlice", "", s["metadata"]["name"])
            for p in [p for p in churn.api.stored("Pod") if p["spec"].get("nodeName") == old]:
                await churn.api.delete("Pod", p["metadata"]["namespace"], p["metadata"]["name"])
                if p["metadata"]["name"] in churn.live:
                    churn.live.remove(p["metadata"]["name"])
            await churn.api.delete("Node", "", old)
            for o in gpu_node_objects(f"new-{k:03d}", DGX_H100.with_gpu_count(8)):
                await churn.api.create(o["kind"], o)
            await churn.round()
        fw = churn.sched.profiles["dra-scheduler"]
        topo, frag = fw.instances["GpuTopology"], fw.instances["DeviceFragmentation"]
        sizes = {
            "GpuTopology._views": len(topo._views),
            "GpuTopology._free": len(topo._free),
            "DeviceFragmentation._models": len(frag._models),
            "DeviceFragmentation._states": len(frag._states),
        }
        return len(churn.api.stored("Node")), sizes

    nodes, sizes = asyncio.run(go())
    assert nodes == 6
    assert all(0 < v <= nodes for v in sizes.values()), sizes  # before: 30 each (every name ever seen)
