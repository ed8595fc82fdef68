"""Topology-aware preemption (issue 10 item 4; goes beyond upstream kube-scheduler 1.37.2, whose
``SelectVictimsOnNode`` and ``pickOneNodeForPreemption`` in ``pkg/scheduler/framework/preemption/preemption.go``
and ``plugins/defaultpreemption/default_preemption.go`` know nothing of device interconnect).

Rules checked (``plugins/defaultpreemption/topology.py``):

* inside a node, among minimal victim sets no worse than upstream's on each of upstream's five criteria, the one
  leaving the preemptor the best device set (GpuTopology's own score) wins: a 4-GPU pod on a node with two
  NVLink islands evicts the one pod whose GPUs complete an island rather than two pods on different islands,
  and of two equal-cost pairs the pair on one island;
* with GpuTopology disabled (or the preference switched off) the victims are upstream's: the reprieve order
  alone decides;
* a better topology never costs anything upstream counts: equal start times only (upstream's fifth criterion),
  no PDB violation added, never more or higher-priority victims;
* across nodes of equal upstream cost, the node where the preemptor's device set is best;
* properties on random nodes: the chosen set fits, is minimal (no victim can be reprieved), is no worse than
  upstream's on every criterion, and never leaves the preemptor a worse device set.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import random
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fleet import DGX_H100, TOPOLOGY_ANNOTATION, device_classes, gpu_node_objects
from plugins.defaultpreemption.core import Candidate, Reprieve, Victim, select_victims_on_node, sort_by_importance
from plugins.defaultpreemption.plugin import DefaultPreemption
from plugins.defaultpreemption.topology import MaskScores, TopologyPreference, no_worse, upstream_scores
from plugins.topology.plugin import GpuTopology, free_gpus, whole_gpus
from plugins.topology.scoring import SubsetTable, best_set_value, brute_force_best, mask_of
from scheduler.api.model import Pod
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import DEFAULT_SCHEDULER_NAME, SchedulerConfig, default_config, load_config_text
from scheduler.framework.interface import Code, CycleState, Status
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import SimulationResult, simulate

NODE = "isl-0"
PRIO = {"low": 10, "mid": 500, "high": 1000, "top": 5000}
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
NO_TOPOLOGY = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  plugins:
    multiPoint:
      disabled: [{name: GpuTopology}]
"""


# --- fixtures ----------------------------------------------------------------------------------------------


def islands(i: int, j: int) -> str:
    """Two NVLink islands, GPUs 0-3 and 4-7 (NUMA 0 and 1 on the DGX H100 layout), PCIe SYS between them."""
    return "NV12" if (i < 4) == (j < 4) else "SYS"


def nvswitch(i: int, j: int) -> str:
    return "NV18"


def bridges(i: int, j: int) -> str:
    """NVLink bridges on (0,2), (1,3), (4,5), (6,7) (k8s-device-plugin#546)."""
    return "NV12" if (min(i, j), max(i, j)) in {(0, 2), (1, 3), (4, 5), (6, 7)} else "SYS"


def gpu_node(name: str, link: Any = islands, cpu: str | None = None) -> list[dict[str, Any]]:
    objs = gpu_node_objects(name, DGX_H100)
    matrix = [["X" if i == j else link(i, j) for j in range(8)] for i in range(8)]
    for o in objs:
        if o["kind"] == "Node":
            doc = json.loads(o["metadata"]["annotations"][TOPOLOGY_ANNOTATION])
            doc["matrix"] = matrix
            o["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = json.dumps(doc)
            if cpu:
                o["status"]["allocatable"]["cpu"] = o["status"]["capacity"]["cpu"] = cpu
    return objs


def priority_classes() -> list[dict[str, Any]]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in PRIO.items()]


def gpu_claim(name: str, count: int, node: str = "", gpus: Sequence[int] = (), users: Sequence[str] = ()
              ) -> dict[str, Any]:
    c: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"claim-{name}"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}},
    }
    if gpus:
        c["metadata"]["finalizers"] = [DELETE_PROTECTION]
        c["status"] = {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{i}"} for i in gpus]}},
            "reservedFor": [{"resource": "pods", "name": u, "uid": f"uid-{u}"} for u in users],
        }
    return c


def pod(name: str, prio: str, node: str = "", claim: str = "", cpu: str = "", start: str = "") -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "x", "resources": {}}
    spec: dict[str, Any] = {"schedulerName": "dra-scheduler", "priorityClassName": prio, "priority": PRIO[prio],
                            "containers": [c]}
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        c["resources"]["claims"] = [{"name": "gpu"}]
    if cpu:
        c["resources"]["requests"] = {"cpu": cpu}
    o: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}
    if node:
        spec["nodeName"] = node
        o["status"] = {"phase": "Running", **({"startTime": start} if start else {})}
    return o


def running(name: str, prio: str, gpus: Sequence[int], node: str = NODE, cpu: str = "", start: str = ""
            ) -> list[dict[str, Any]]:
    """A running pod holding ``gpus`` of ``node`` through its own claim."""
    return [pod(name, prio, node, f"{name}-gpu", cpu, start), gpu_claim(f"{name}-gpu", len(gpus), node, gpus, [name])]


def preemptor(name: str, gpus: int, prio: str = "high", cpu: str = "") -> list[dict[str, Any]]:
    return [pod(name, prio, claim=f"{name}-gpu", cpu=cpu), gpu_claim(f"{name}-gpu", gpus)]


def base(*nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*device_classes(), *priority_classes(), *(o for n in nodes for o in n)]


def run(objs: list[dict[str, Any]], config: SchedulerConfig | None = None) -> SimulationResult:
    return asyncio.run(simulate(copy.deepcopy(objs), config))


def evicted(res: SimulationResult) -> list[str]:
    return sorted(o["metadata"]["name"] for o in res.deleted if o["kind"] == "Pod")


def assert_no_device_twice(res: SimulationResult) -> None:
    seen: list[tuple[str, str]] = []
    for c in res.items:
        if c["kind"] == "ResourceClaim" and (c.get("status") or {}).get("allocation"):
            seen += [(r["pool"], r["device"]) for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(seen) == len(set(seen)), seen


def devices(res: SimulationResult, claim: str) -> list[str]:
    c = next(o for o in res.items if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == claim)
    return sorted(r["device"] for r in c["status"]["allocation"]["devices"]["results"])


class Harness:
    """Objects in an in-memory API and a scheduler cache; runs a failed cycle's PreFilter and Filter for one
    pending pod, then dry runs of preemption on a node (the way DefaultPreemption does)."""

    def __init__(self, objs: Sequence[dict[str, Any]], topology: bool = True) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        config = default_config() if topology else load_config_text(NO_TOPOLOGY)
        self.sched = Scheduler(self.cache, self.api, config, clock=FakeClock(1000.0), inline_binding=True)
        for o in copy.deepcopy(list(objs)):
            self.api.load(o["kind"], o)
        self.fw = self.sched.profiles[DEFAULT_SCHEDULER_NAME]
        plugin = self.fw.instances["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        self.plugin = plugin

    def evaluate(self, name: str) -> tuple[Pod, CycleState, dict[str, Status]]:
        p = self.cache.pod(f"default/{name}")
        assert p is not None
        state = CycleState(self.cache.snapshot())
        _, st = self.fw.run_pre_filter(state, p)
        assert st.is_success, st
        statuses = {}
        for n in state.snapshot.nodes:
            s = self.fw.run_filter(state, p, n)
            if not s.is_success:
                statuses[n.name] = s
        return p, state, statuses

    def select(self, name: str, node: str = NODE, topology: bool = True
               ) -> tuple[list[Victim], int, Status, Reprieve | None, TopologyPreference | None]:
        """Victims on ``node``: upstream's (``topology=False``) or refined; the Reprieve of the dry run."""
        p, state, _ = self.evaluate(name)
        info = state.snapshot.node_map[node]
        dry = self.fw.dry_run(state, p, info)
        pref = TopologyPreference.of(state) if topology else None
        seen: list[Reprieve] = []

        def refine(rep: Reprieve, victims: list[Victim], violations: int) -> tuple[list[Victim], int] | Status:
            seen.append(rep)
            return pref.refine(rep, victims, violations) if pref is not None else (victims, violations)

        victims, violations, st = select_victims_on_node(
            dry, p.priority, [Victim.of(x) for x in info.pod_list], [], refine=refine)
        return victims, violations, st, (seen[0] if seen else None), pref


def names(victims: Sequence[Victim]) -> list[str]:
    return sorted(p.name for v in victims for p in v.pods)


# --- inside one node ---------------------------------------------------------------------------------------


def island_case() -> list[dict[str, Any]]:
    """Islands 0-3 and 4-7; gpu-3 and gpu-7 free. ``a-big`` holds 0-2; ``b-one`` gpu-4, ``c-one`` gpu-5 (all
    low); ``d-top`` gpu-6 (above the preemptor). The preemptor wants 4 GPUs."""
    return [*base(gpu_node(NODE)),
            *running("a-big", "low", [0, 1, 2]), *running("b-one", "low", [4]), *running("c-one", "low", [5]),
            *running("d-top", "top", [6]), *preemptor("p", 4)]


def test_one_victim_freeing_an_island_rather_than_two_on_different_islands() -> None:
    objs = island_case()
    ours = run(objs)
    # a-big alone completes island 0-3 (with free gpu-3): one victim, the preemptor all-NVLink
    assert evicted(ours) == ["a-big"]
    assert devices(ours, "p-gpu") == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert ours.summary["preempted"] == 1 and ours.summary["scheduled"] == 1
    assert_no_device_twice(ours)
    scheduled = next(e for e in ours.events if e["reason"] == "Scheduled")
    assert scheduled["message"].endswith("gpu-0..3 NV12 all-pairs, NUMA 0")
    # upstream (GpuTopology disabled): a-big is first in the node's pod order, so it is reprieved first (gpu-3,
    # 4, 5, 7 then suffice) and the two one-GPU pods go: a set across both islands
    upstream = run(objs, load_config_text(NO_TOPOLOGY))
    assert evicted(upstream) == ["b-one", "c-one"]
    assert devices(upstream, "p-gpu") == ["gpu-3", "gpu-4", "gpu-5", "gpu-7"]
    assert_no_device_twice(upstream)


def test_preference_switched_off_gives_upstreams_victims_with_gpu_topology_on() -> None:
    DefaultPreemption.topology_aware = False
    try:
        res = run(island_case())
    finally:
        DefaultPreemption.topology_aware = True
    assert evicted(res) == ["b-one", "c-one"]


def test_equal_cost_pairs_the_pair_on_one_island() -> None:
    """Four 2-GPU pods of equal priority, pod order alternating islands: upstream keeps the first two (one per
    island) and evicts the last two (one per island); ours evicts the two pods of one island, the less important
    ones (later in the reprieve order) on equal topology."""
    objs = [*base(gpu_node(NODE)),
            *running("p1", "low", [0, 1]), *running("p2", "low", [4, 5]), *running("p3", "low", [2, 3]),
            *running("p4", "low", [6, 7]), *preemptor("p", 4)]
    h = Harness(objs)
    victims, violations, st, _, pref = h.select("p")
    assert st.is_success and violations == 0
    assert names(victims) == ["p2", "p4"]
    assert pref is not None and pref.stats["improved"] == 1
    up, _, _, _, _ = h.select("p", topology=False)
    assert names(up) == ["p3", "p4"]
    res = run(objs)
    assert devices(res, "p-gpu") == ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    assert_no_device_twice(res)
    assert evicted(run(objs, load_config_text(NO_TOPOLOGY))) == ["p3", "p4"]


def test_start_time_is_an_upstream_criterion_the_topology_does_not_override() -> None:
    """Upstream's fifth criterion: the latest start among the highest-priority victims. When the island pair
    started earlier than upstream's pair, upstream's pair stays; with equal start times the island wins."""

    def case(starts: Sequence[str]) -> list[dict[str, Any]]:
        return [*base(gpu_node(NODE)),
                *running("p1", "low", [0, 1], start=starts[0]), *running("p2", "low", [4, 5], start=starts[1]),
                *running("p3", "low", [2, 3], start=starts[2]), *running("p4", "low", [6, 7], start=starts[3]),
                *preemptor("p", 4)]

    early, late = "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"
    # p1, p2 started first: upstream keeps them (more important), evicts p3, p4 (latest start: best criterion 5)
    v, _, _, _, _ = Harness(case([early, early, late, late])).select("p")
    assert names(v) == ["p3", "p4"]
    # all started in the same second: criterion 5 ties, the island pair is chosen
    v, _, _, _, _ = Harness(case([early] * 4)).select("p")
    assert names(v) == ["p2", "p4"]


def test_never_higher_priority_victims_for_a_better_topology() -> None:
    """Island 4-7 could be freed by evicting one mid pod; upstream evicts two low pods across islands. A higher
    highest-victim priority is worse by upstream's second criterion: upstream's choice stays."""
    objs = [*base(gpu_node(NODE)),
            *running("a-mid", "mid", [4, 5, 6, 7]), *running("b-low", "low", [0]), *running("c-low", "low", [1]),
            *running("d-top", "top", [2]), *preemptor("p", 4)]
    # free: gpu-3. Upstream: reprieve a-mid (most important) -> 0, 1, 3 free = 3 < 4: a-mid is a victim; then
    # b-low, c-low reprieved. So upstream evicts a-mid alone (island 4-7): nothing to improve.
    v, _, _, _, _ = Harness(objs).select("p")
    assert names(v) == ["a-mid"]
    objs = [*base(gpu_node(NODE)),
            *running("a-mid", "mid", [4, 5, 6]), *running("b-low", "low", [0]), *running("c-low", "low", [1]),
            *running("d-top", "top", [2]), *preemptor("p", 4)]
    # free: gpu-3, gpu-7. Upstream reprieves a-mid (0, 1, 3, 7 free suffice), evicts b-low and c-low (a set
    # across islands). Evicting a-mid alone would complete island 4-7 with one victim, but of higher priority.
    h = Harness(objs)
    v, _, _, _, pref = h.select("p")
    assert names(v) == ["b-low", "c-low"]
    assert pref is not None and pref.stats["improved"] == 0


def test_no_pdb_violation_added_for_a_better_topology() -> None:
    """The pod completing an island is protected by a PDB with no disruption allowed: upstream's first
    criterion; the violation-free cross-island set stays."""
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "protect", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "protected"}}},
           "status": {"disruptionsAllowed": 0}}
    objs = island_case()
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "a-big":
            o["metadata"]["labels"] = {"app": "protected"}
    res = run([*objs, pdb])
    assert evicted(res) == ["b-one", "c-one"]


def test_shared_claim_with_a_surviving_pod_frees_no_gpu() -> None:
    """a-big's claim is also reserved by a pod above the preemptor: evicting a-big frees nothing (the claim
    stays allocated), so its island cannot be had; upstream's cross-island victims stay."""
    objs = [*base(gpu_node(NODE)),
            pod("a-big", "low", NODE, "shared"), pod("a-keeper", "top", NODE, "shared"),
            gpu_claim("shared", 3, NODE, [0, 1, 2], ["a-big", "a-keeper"]),
            *running("b-one", "low", [4]), *running("c-one", "low", [5]), *running("d-top", "top", [6]),
            *preemptor("p", 4)]
    h = Harness(objs)
    v, _, st, _, _ = h.select("p")
    assert st.is_success
    assert names(v) == ["b-one", "c-one"]


def test_cpu_victims_are_still_chosen_by_upstream_order_with_the_device_victims() -> None:
    """The node's CPU is full too: the preemptor needs one CPU pod evicted besides the GPUs. The island set is
    rebuilt with upstream's reprieve loop, which still picks the CPU victim."""
    objs = [*base(gpu_node(NODE, cpu="8")),
            *running("a-big", "low", [0, 1, 2], cpu="2"), *running("b-one", "low", [4], cpu="1"),
            *running("c-one", "low", [5], cpu="1"), *running("d-top", "top", [6], cpu="1"),
            pod("e-cpu", "low", NODE, cpu="3"), *preemptor("p", 4, cpu="2")]
    # used CPU: 2+1+1+1+3 = 8 of 8; the preemptor needs 2
    v, _, st, _, _ = Harness(objs).select("p")
    assert st.is_success
    assert names(v) == ["a-big"]  # a-big frees 3 GPUs and 2 CPUs: e-cpu is reprieved
    objs = [o for o in objs if o["metadata"]["name"] != "p"]
    objs.append(pod("p", "high", claim="p-gpu", cpu="3"))
    h = Harness(objs)
    v, _, st, _, _ = h.select("p")
    assert st.is_success
    # 3 CPUs: a-big frees 2, so e-cpu goes too (upstream: b-one, c-one and e-cpu, a set across islands)
    assert names(v) == ["a-big", "e-cpu"]
    assert names(h.select("p", topology=False)[0]) == ["b-one", "c-one", "e-cpu"]
    res = run(objs)
    assert evicted(res) == ["a-big", "e-cpu"]
    assert devices(res, "p-gpu") == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_no_op_for_cpu_and_single_gpu_preemptors_and_nvswitch_nodes() -> None:
    # a one-GPU preemptor: every single GPU is as good; no preference, upstream's victims
    objs = [*base(gpu_node(NODE)), *(o for i in range(8) for o in running(f"v{i}", "low", [i])),
            *preemptor("p", 1)]
    v, _, _, _, pref = Harness(objs).select("p")
    assert names(v) == ["v7"] and pref is None
    # a CPU preemptor: no preference at all
    objs = [*base(gpu_node(NODE, cpu="1")), *running("v0", "low", [0], cpu="1"), pod("p", "high", cpu="1")]
    h = Harness(objs)
    _, state, _ = h.evaluate("p")
    assert TopologyPreference.of(state) is None
    # NVSwitch all-to-all within one NUMA node: upstream's pick is already the best; no search
    objs = [*base(gpu_node(NODE, nvswitch)), *(o for i in range(8) for o in running(f"v{i}", "low", [i])),
            *preemptor("p", 2)]
    v, _, _, _, pref = Harness(objs).select("p")
    assert names(v) == ["v6", "v7"] and pref is not None and pref.stats["searched"] == 0


def test_without_gpu_topology_in_the_profile_there_is_no_preference() -> None:
    h = Harness(island_case(), topology=False)
    _, state, _ = h.evaluate("p")
    assert TopologyPreference.of(state) is None
    v, _, _, _, _ = h.select("p")
    assert names(v) == ["b-one", "c-one"]


# --- across nodes ------------------------------------------------------------------------------------------


def two_nodes() -> list[dict[str, Any]]:
    """Equal upstream cost on both nodes (one low victim of 4 GPUs, no start time): on n1 its GPUs straddle the
    islands, on n2 they are island 0-3. The other GPUs are held by pods above the preemptor."""
    objs = base(gpu_node("n1"), gpu_node("n2"))
    objs += running("n1-v", "low", [2, 3, 4, 5], node="n1") + running("n1-t", "top", [0, 1, 6, 7], node="n1")
    objs += running("n2-v", "low", [0, 1, 2, 3], node="n2") + running("n2-t", "top", [4, 5, 6, 7], node="n2")
    return [*objs, *preemptor("p", 4)]


def test_node_with_the_best_device_set_among_equal_cost_candidates() -> None:
    for topology, want in ((True, "n2"), (False, "n1")):
        h = Harness(two_nodes(), topology=topology)
        h.plugin.offset_and_num_candidates = lambda num_nodes: (0, num_nodes)  # type: ignore[method-assign]
        p, state, statuses = h.evaluate("p")
        result, st = h.plugin.post_filter(state, p, statuses)
        assert st.code == Code.SUCCESS, st
        assert result is not None and result.nominated_node_name == want
    # and end to end
    res = run(two_nodes())
    assert evicted(res) == ["n2-v"]
    assert devices(res, "p-gpu") == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_tie_breaker_runs_after_upstreams_criteria() -> None:
    """A node with fewer victims wins even when another node would give a better device set."""
    objs = base(gpu_node("n1"), gpu_node("n2"))
    objs += running("n1-v", "low", [2, 3, 4, 5], node="n1") + running("n1-t", "top", [0, 1, 6, 7], node="n1")
    objs += running("n2-a", "low", [0, 1], node="n2") + running("n2-b", "low", [2, 3], node="n2")
    objs += running("n2-t", "top", [4, 5, 6, 7], node="n2")
    res = run([*objs, *preemptor("p", 4)])
    assert evicted(res) == ["n1-v"]


# --- the pure parts ----------------------------------------------------------------------------------------


def test_best_set_value_is_the_value_of_the_brute_force_best_set() -> None:
    rnd = random.Random(7)
    codes = [60, 120, 180, 240]
    for _ in range(60):
        n = rnd.randint(2, 8)
        bw = [[0] * n for _ in range(n)]
        for i, j in itertools.combinations(range(n), 2):
            bw[i][j] = bw[j][i] = rnd.choice(codes)
        numa = [rnd.randint(0, 1) for _ in range(n)]
        table = SubsetTable(bw, numa)
        free = [i for i in range(n) if rnd.random() < 0.7]
        k = rnd.randint(1, n)
        got = best_set_value(table, mask_of(free), k)
        want = brute_force_best(bw, numa, free, k)
        if want is None:
            assert got is None
        else:
            assert got == want[0][:2]


def test_free_gpus_and_whole_gpus_on_a_node() -> None:
    objs = [*base(gpu_node(NODE)), *running("a", "low", [0, 5])]
    h = Harness(objs)
    snap = h.cache.snapshot()
    gpu = h.fw.instances["GpuTopology"]
    assert isinstance(gpu, GpuTopology)
    view = gpu.view(snap, NODE)
    assert view is not None
    assert free_gpus(snap.ledger, view) == 0xFF & ~(1 << 0 | 1 << 5)
    ids = [("gpu.nvidia.com", NODE, "gpu-1"), ("gpu.nvidia.com", NODE, "gpu-4"), ("other.driver", NODE, "nic-0")]
    assert whole_gpus(view, ids) == (1 << 1 | 1 << 4)
    assert whole_gpus(view, [("gpu.nvidia.com", NODE, "gpu-1-mig-1g10gb-19-0")]) in (None, 0)
    # the best 4 of the free GPUs: island 4-7 has gpu-5 in use, island 0-3 gpu-0: the best is cross-island
    assert gpu.best_value(snap, NODE, snap.ledger, 4) == best_set_value(view.table, 0xDE, 4)
    assert gpu.best_value(snap, NODE, snap.ledger, 7) is None


# --- properties ----------------------------------------------------------------------------------------------

LINKS = {"islands": islands, "nvswitch": nvswitch, "bridges": bridges}
victim_spec = st.tuples(st.sampled_from([1, 1, 2, 2, 4]), st.sampled_from(["low", "low", "mid", "top"]),
                        st.sampled_from(["", "", "1"]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    link=st.sampled_from(sorted(LINKS)),
    specs=st.lists(victim_spec, min_size=1, max_size=8),
    k=st.integers(2, 4),
    cpu=st.sampled_from(["", "1", "2"]),
    seed=st.integers(0, 1000),
)
def test_property_minimal_no_worse_than_upstream_never_a_worse_device_set(
    link: str, specs: list[tuple[int, str, str]], k: int, cpu: str, seed: int
) -> None:
    rnd = random.Random(seed)
    free = list(range(8))
    rnd.shuffle(free)
    objs = base(gpu_node(NODE, LINKS[link], cpu="4"))
    used_cpu = 0
    for i, (n, prio, c) in enumerate(specs):
        if len(free) < n:
            break
        gpus, free = sorted(free[:n]), free[n:]
        if c and used_cpu + int(c) > 4:
            c = ""
        used_cpu += int(c or 0)
        objs += running(f"v{i}", prio, gpus, cpu=c)
    left = rnd.randint(0, k - 1) if rnd.random() < 0.8 else k  # GPUs left free: then the CPU may be short
    for j, g in enumerate(free[left:]):
        objs += running(f"w{j}", rnd.choice(["low", "top"]), [g])
    objs += preemptor("p", k, cpu=cpu)
    h = Harness(objs)
    up, up_viol, up_st, _, _ = h.select("p", topology=False)
    got, viol, st_, rep, pref = h.select("p")
    assert st_.code == up_st.code
    if not up_st.is_success:
        return
    if not up:
        return  # it fits without preemption
    assert rep is not None and pref is not None
    up_cand, cand = Candidate(NODE, tuple(up), up_viol), Candidate(NODE, tuple(got), viol)
    # no worse than upstream on each criterion: never more victims, higher-priority victims, PDB violations
    assert no_worse(upstream_scores(cand), upstream_scores(up_cand))
    assert len(got) <= len(up)
    assert max(v.priority for v in got) <= max(v.priority for v in up)
    assert got == sort_by_importance(got)
    # the search's fast estimate of upstream's criteria agrees with upstream's functions
    pos = {id(v): j for j, v in enumerate(rep.order)}
    assert MaskScores(rep)(sum(1 << pos[id(v)] for v in got)) == upstream_scores(cand)
    # the dry run is left with exactly the chosen victims removed, and the pod fits
    assert {id(v) for v in rep.order if rep.is_removed(v)} == {id(v) for v in got}
    assert rep.dry.fits().is_success
    # minimal: no victim can be reprieved
    for v in got:
        assert rep.add(v).is_success
        assert not rep.dry.fits().is_success, f"{v.pods[0].name} could be reprieved"
        assert rep.remove(v).is_success
    # the preemptor's device set is never worse than with upstream's victims
    view = pref.gpu.view(h.cache.snapshot(), NODE)
    assert view is not None
    ours = pref.values.get(NODE)
    if ours is not None:
        upstream_keys = {p.key for v in up for p in v.pods}
        assert rep.settle([v for v in rep.order if v.pods[0].key in upstream_keys]).is_success
        theirs = pref.value(rep, view, pref.demand(rep, view))
        assert theirs is not None and ours >= theirs


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from(["low", "mid", "top"])), min_size=2,
                   max_size=10),
    incoming=st.lists(st.tuples(st.sampled_from([2, 3, 4]), st.sampled_from(["mid", "high"])), min_size=1,
                      max_size=3),
    seed=st.integers(0, 1000),
)
def test_property_simulate_on_island_nodes_no_device_twice_victims_below_their_preemptor(
    specs: list[tuple[int, str]], incoming: list[tuple[int, str]], seed: int
) -> None:
    rnd = random.Random(seed)
    free = {n: list(range(8)) for n in ("n1", "n2")}
    for n in free:
        rnd.shuffle(free[n])
    objs = base(gpu_node("n1"), gpu_node("n2", bridges))
    for i, (k, prio) in enumerate(specs):
        node = rnd.choice(["n1", "n2"])
        if len(free[node]) < k:
            continue
        gpus, free[node] = sorted(free[node][:k]), free[node][k:]
        objs += running(f"v{i}", prio, gpus, node=node)
    for i, (k, prio) in enumerate(incoming):
        objs += preemptor(f"p{i}", k, prio)
    res = run(objs)
    assert_no_device_twice(res)
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    gone = {o["metadata"]["name"]: o for o in res.deleted if o["kind"] == "Pod"}
    by_uid = {o["metadata"].get("uid"): o for o in [*pods.values(), *gone.values()]}
    for e in res.events:
        if e["reason"] != "Preempted":
            continue
        victim = gone[e["involvedObject"]["name"]]
        preemptor_pod = by_uid[e["message"].split("Preempted by pod ")[1].split(" ")[0]]
        assert preemptor_pod["spec"]["priority"] > victim["spec"]["priority"]
        assert pods[preemptor_pod["metadata"]["name"]]["spec"].get("nodeName"), "preempted for nothing"
