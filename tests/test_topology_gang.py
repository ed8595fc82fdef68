"""GpuTopology across nodes: gangs go to the smallest topology domain (clique / rack / block / zone) that can
host them, a required level is honoured, and the PodGroup status and Scheduled events say where and why."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from bench.fleet import RACK_LABEL, scale_fleet
from scheduler.config.schedulerconfig import load_config_text
from scheduler.gang.status import podgroup_reason
from scheduler.simulate.simulation import SimulationResult, simulate
from tests.test_topology import gpu_pod, template, used

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def podgroup(name: str, min_member: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": min_member},
    }


def member(name: str, tmpl: str, group: str) -> dict[str, Any]:
    p = gpu_pod(name, tmpl)
    p["metadata"]["labels"] = {GROUP_LABEL: group}
    return p


def fleet_with_full_nodes(nodes: int, full: list[int]) -> list[dict[str, Any]]:
    objs = scale_fleet(nodes)
    for i in full:
        objs.append(used(f"busy-{i}", f"dgx-h100-{i:05d}", *(f"gpu-{g}" for g in range(8))))
    return objs


def run(objs: list[dict[str, Any]], config: str | None = None) -> SimulationResult:
    return asyncio.run(simulate(copy.deepcopy(objs), load_config_text(config) if config else None))


def placements(res: SimulationResult) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["spec"].get("nodeName", "")
        for o in res.items
        if o["kind"] == "Pod"
    }


def racks(res: SimulationResult, fleet: list[dict[str, Any]]) -> set[str]:
    rack_of = {o["metadata"]["name"]: o["metadata"]["labels"][RACK_LABEL] for o in fleet if o["kind"] == "Node"}
    return {rack_of[n] for n in placements(res).values() if n}


def status(res: SimulationResult, name: str) -> dict[str, Any]:
    """The PodGroup's status (scheduler-plugins' fields) plus ``message``: why / where, as the phase Event says."""
    pg = next(o for o in res.items if o["kind"] == "PodGroup" and o["metadata"]["name"] == name)
    assert res.scheduler is not None
    sched = res.scheduler
    key = f"default/{name}"
    _, _, message = podgroup_reason(sched.cache.podgroups()[key], list(sched.cache.pods().values()),
                                    sched.gang.groups.get(key))
    return {**pg["status"], "message": message}


def test_group_goes_to_the_tightest_rack_that_fits() -> None:
    # 3 racks of 8 nodes; rack-0 has 4 free nodes, rack-1 and rack-2 are empty
    fleet = fleet_with_full_nodes(24, [0, 1, 2, 3])
    objs = [*fleet, template("eight", 8), podgroup("g", 4), *(member(f"w{i}", "eight", "g") for i in range(4))]
    res = run(objs)
    assert all(placements(res).values())
    assert racks(res, fleet) == {"rack-0"}
    st = status(res, "g")
    assert st["phase"] == "Scheduling"  # scheduler-plugins' phase: bound, not yet running
    msg = st["message"]
    assert "4 members bound; topology: placed in rack rack-0 (cloud.provider.com/topology-rack)" in msg
    assert "the smallest domain with room for 4 members" in msg
    events = [e for e in res.events if e["reason"] == "Scheduled"]
    assert len(events) == 4
    assert all(e["message"].endswith("(pod group default/g): gpu-0..7 NV18 all-pairs, NUMA 0+1") for e in events)


def test_clique_is_preferred_over_rack() -> None:
    fleet = fleet_with_full_nodes(16, [])
    for o in fleet:
        if o["kind"] == "Node" and o["metadata"]["name"] in {f"dgx-h100-{i:05d}" for i in (10, 11, 12)}:
            o["metadata"]["labels"]["nvidia.com/gpu.clique"] = "uuid.1"
    objs = [*fleet, template("eight", 8), podgroup("g", 3), *(member(f"w{i}", "eight", "g") for i in range(3))]
    res = run(objs)
    assert sorted(placements(res).values()) == ["dgx-h100-00010", "dgx-h100-00011", "dgx-h100-00012"]
    assert "placed in clique uuid.1 (nvidia.com/gpu.clique)" in status(res, "g")["message"]


def test_group_larger_than_any_rack_uses_the_block_unless_rack_is_required() -> None:
    fleet = fleet_with_full_nodes(24, [0, 1, 2, 3])
    objs = [*fleet, template("eight", 8), podgroup("g", 10), *(member(f"w{i}", "eight", "g") for i in range(10))]
    res = run(objs)
    assert all(placements(res).values())
    assert len(racks(res, fleet)) == 2  # two racks, not three: the group stays as compact as it can
    assert "placed in block block-0" in status(res, "g")["message"]

    required = copy.deepcopy(objs)
    for o in required:
        if o["kind"] == "PodGroup":
            o["metadata"]["annotations"] = {"dra-scheduler.io/topology-required": "rack"}
    res = run(required)
    assert not any(placements(res).values())
    msg = status(res, "g")["message"]
    assert "required topology level rack (cloud.provider.com/topology-rack): no rack has room for 10 members" in msg
    assert "(largest: rack-2 with room for 8)" in msg


def test_required_level_from_plugin_args() -> None:
    fleet = fleet_with_full_nodes(16, [0])
    objs = [*fleet, template("eight", 8), podgroup("g", 8), *(member(f"w{i}", "eight", "g") for i in range(8))]
    config = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  pluginConfig:
  - name: GpuTopology
    args: {requiredLevel: rack}
"""
    res = run(objs, config)
    assert racks(res, fleet) == {"rack-1"}  # rack-0 has only 7 free nodes


def test_small_members_stay_in_one_rack() -> None:
    fleet = fleet_with_full_nodes(16, [])
    objs = [*fleet, template("two", 2), podgroup("g", 6), *(member(f"w{i}", "two", "g") for i in range(6))]
    res = run(objs)
    assert all(placements(res).values())
    assert len(racks(res, fleet)) == 1
    assert len(set(placements(res).values())) <= 2  # packed: 12 GPUs on at most two nodes


def test_unknown_level_in_annotation_is_reported_and_ignored() -> None:
    fleet = fleet_with_full_nodes(8, [])
    pg = podgroup("g", 2, {"dra-scheduler.io/topology-preferred": "spine"})
    res = run([*fleet, template("eight", 8), pg, *(member(f"w{i}", "eight", "g") for i in range(2))])
    assert all(placements(res).values())
    msg = status(res, "g")["message"]
    assert "annotation dra-scheduler.io/topology-preferred: 'spine' is not a topology level" in msg
