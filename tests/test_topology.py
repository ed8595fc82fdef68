"""GpuTopology: the per-node interconnect model, best device sets (against brute force), the fixtures of
driver-data.md §3.4, malformed input, and the allocator's candidate-order hook with constraints, counters and
firstAvailable."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fleet import DGX_H100, DGX_H100_DYNAMIC_MIG, L40S_PCIE_8, gpu_node_objects, scale_fleet
from plugins.topology.graph import (
    ANNOTATION,
    PCIE_BW,
    GpuInfo,
    TopologyInputError,
    parse_annotation,
    topology_from_inputs,
    topology_from_matrix,
)
from plugins.topology.plugin import GpuTopology, parse_args, validate_args
from plugins.topology.scoring import (
    SubsetTable,
    bits,
    brute_force_best,
    brute_value,
    compress_names,
    describe,
    mask_of,
    table_for,
)
from scheduler.config.schedulerconfig import load_config_text
from scheduler.simulate.simulation import SimulationResult, simulate, to_table

# --- fixtures of driver-data.md §3.4 ---------------------------------------------------------------------------


def _matrix(n: int, code: Any) -> list[list[str]]:
    return [["X" if i == j else code(i, j) for j in range(n)] for i in range(n)]


def dgx_a100() -> Any:
    """(a) NV12 all-to-all via 6 NVSwitches; NPS4: GPU pairs on NUMA 3, 1, 7, 5, one PCIe switch per pair."""
    return topology_from_matrix(
        _matrix(8, lambda i, j: "NV12"),
        numa=[3, 3, 1, 1, 7, 7, 5, 5],
        roots=["pci0000:00", "pci0000:00", "pci0000:40", "pci0000:40", "pci0000:80", "pci0000:80", "pci0000:a0",
               "pci0000:a0"],
        product="NVIDIA A100-SXM4-80GB",
    )


def dgx_h100() -> Any:
    """(b) NV18 all-to-all via 4 NVSwitches; GPUs 0-3 on NUMA 0, 4-7 on NUMA 1; one root per GPU."""
    return topology_from_matrix(
        _matrix(8, lambda i, j: "NV18"),
        numa=[0, 0, 0, 0, 1, 1, 1, 1],
        roots=[f"pci0000:{r}" for r in ("15", "26", "37", "59", "97", "a7", "b7", "d7")],
        product="NVIDIA H100 80GB HBM3",
    )


def bridge_pairs() -> Any:
    """(f) NVLink bridges on non-adjacent indices (k8s-device-plugin#546): (0,2), (1,3), (4,5), (6,7) NV12,
    every other pair SYS, even inside a NUMA node."""
    pairs = {(0, 2), (1, 3), (4, 5), (6, 7)}
    return topology_from_matrix(
        _matrix(8, lambda i, j: "NV12" if (min(i, j), max(i, j)) in pairs else "SYS"),
        numa=[0, 0, 0, 0, 1, 1, 1, 1],
        product="NVIDIA A100 80GB PCIe",
    )


def l40s_box() -> Any:
    """(e) 8x L40S: PIX within a switch pair, NODE across switches of a socket, SYS across sockets."""

    def code(i: int, j: int) -> str:
        if i // 2 == j // 2:
            return "PIX"
        return "NODE" if i // 4 == j // 4 else "SYS"

    return topology_from_matrix(_matrix(8, code), numa=[0, 0, 0, 0, 1, 1, 1, 1], product="NVIDIA L40S")


def b200_degraded() -> Any:
    """(c) HGX B200, GPU 2 lost its NVLink (vllm#16336): its row shows NODE/SYS; 4 NUMA nodes, a pair each."""

    def code(i: int, j: int) -> str:
        if 2 in (i, j):
            return "NODE" if i // 2 == j // 2 else "SYS"
        return "NV18"

    return topology_from_matrix(_matrix(8, code), numa=[0, 0, 1, 1, 2, 2, 3, 3], product="NVIDIA B200")


def cloud_vm() -> Any:
    """(e) cloud H200 VM: everything under pci0000:00 (no PCIe information), NV18 all-to-all."""
    return topology_from_matrix(
        _matrix(8, lambda i, j: "NV18"), numa=[0] * 8, roots=["pci0000:00"] * 8, product="NVIDIA H200"
    )


def dgx1v() -> Any:
    """(g) DGX-1V hybrid cube-mesh (NV1/NV2, not all-to-all)."""
    rows = [
        "X NV1 NV1 NV2 NV2 SYS SYS SYS",
        "NV1 X NV2 NV1 SYS NV2 SYS SYS",
        "NV1 NV2 X NV2 SYS SYS NV1 SYS",
        "NV2 NV1 NV2 X SYS SYS SYS NV1",
        "NV2 SYS SYS SYS X NV1 NV1 NV2",
        "SYS NV2 SYS SYS NV1 X NV2 NV1",
        "SYS SYS NV1 SYS NV1 NV2 X NV2",
        "SYS SYS SYS NV1 NV2 NV1 NV2 X",
    ]
    return topology_from_matrix([r.split() for r in rows], numa=[0, 0, 0, 0, 1, 1, 1, 1], product="Tesla V100-SXM2")


def best(topo: Any, k: int, used: Sequence[int] = ()) -> list[int]:
    free = mask_of([i for i in range(topo.size) if i not in used])
    m = table_for(topo).best(free, k)
    assert m is not None
    return bits(m)


def test_dgx_a100_keeps_pcie_pairs_and_numa_together() -> None:
    t = dgx_a100()
    assert {t.codes[0][j] for j in range(1, 8)} == {"NV12"}
    assert t.graph.number_of_nodes() > 8 and any(d["kind"] == "nvswitch" for _, d in t.graph.nodes(data=True))
    assert best(t, 2) == [0, 1]
    assert best(t, 4) == [0, 1, 2, 3]  # two whole NUMA nodes, not four half ones
    assert best(t, 1, used=[0]) == [1]  # the lone GPU of a started pair, keeping three pairs whole
    assert best(t, 2, used=[0]) == [2, 3]
    assert describe(t, [0, 1, 2, 3]) == "gpu-0..3 NV12 all-pairs, NUMA 3+1"


def test_dgx_h100_prefers_one_numa_node() -> None:
    t = dgx_h100()
    assert best(t, 4) == [0, 1, 2, 3]
    assert best(t, 4, used=[1]) == [4, 5, 6, 7]
    assert best(t, 1, used=[0, 1, 2]) == [3]
    assert best(t, 1, used=[5]) == [4]  # fills the started NUMA node, NUMA 0 stays whole
    assert describe(t, [0, 1, 2, 3]) == "gpu-0..3 NV18 all-pairs, NUMA 0"
    assert describe(t, [3, 4]) == "gpu-3,4 NV18 all-pairs, NUMA 0+1"


def test_bridge_pairs_on_non_adjacent_indices() -> None:
    t = bridge_pairs()
    assert t.codes[0][2] == "NV12" and t.codes[0][1] == "SYS"
    assert best(t, 2) == [0, 2]
    assert best(t, 2, used=[0]) == [1, 3]
    assert best(t, 1, used=[0]) == [2]  # the orphaned bridge partner
    assert best(t, 4) == [0, 1, 2, 3]  # two bridged pairs on one NUMA node
    assert describe(t, [0, 2]) == "gpu-0,2 NV12 all-pairs, NUMA 0"


def test_pcie_l40s_box() -> None:
    t = l40s_box()
    assert (t.codes[0][1], t.codes[0][2], t.codes[0][4]) == ("PIX", "NODE", "SYS")
    assert (t.bw[0][1], t.bw[0][2], t.bw[0][4]) == (PCIE_BW["PIX"], PCIE_BW["NODE"], PCIE_BW["SYS"])
    assert best(t, 2) == [0, 1]
    assert best(t, 4) == [0, 1, 2, 3]
    assert best(t, 1, used=[0]) == [1]
    assert best(t, 2, used=[0]) == [2, 3]
    assert describe(t, [0, 1]) == "gpu-0,1 PIX, NUMA 0"
    assert describe(t, [1, 2]) == "gpu-1,2 NODE, NUMA 0"
    assert describe(t, [0, 4]) == "gpu-0,4 SYS, NUMA 0+1"


def test_cloud_vm_everything_under_one_root() -> None:
    t = cloud_vm()
    assert best(t, 4) == [0, 1, 2, 3]
    assert best(t, 4, used=[0, 2]) == [1, 3, 4, 5]
    # the same VM without the annotation: the attributes say nothing (one root, one NUMA node) but the
    # productName profile knows the board is NV18 all-to-all
    gpus = [GpuInfo(f"gpu-{i}", "NVIDIA H200", "pci0000:00", 0) for i in range(8)]
    topo, problems = topology_from_inputs("gpu.nvidia.com", gpus, (), None, parse_args({}).profiles or {})
    assert problems == [] and topo is not None
    assert topo.source == "profile" and topo.codes[0][7] == "NV18"
    # and without any profile: PXB everywhere, no preference but no failure
    topo, _ = topology_from_inputs("gpu.nvidia.com", gpus, (), None, {})
    assert topo is not None and topo.source == "attributes" and topo.codes[0][7] == "PXB"


def test_b200_with_one_gpu_nvlink_down() -> None:
    t = b200_degraded()
    assert t.codes[2][3] == "NODE" and t.codes[2][5] == "SYS" and t.codes[0][3] == "NV18"
    for k in (2, 3, 4, 6, 7):
        chosen = best(t, k)
        assert 2 not in chosen, (k, chosen)
        assert describe(t, chosen).split(" ")[1] == "NV18"
    assert best(t, 2) == [0, 1]
    assert best(t, 4) == [0, 1, 4, 5]
    assert best(t, 1) == [2]  # the GPU without NVLink serves single-GPU claims first
    assert "bottleneck SYS" in describe(t, best(t, 8))


def test_dgx1v_hybrid_cube_mesh() -> None:
    t = dgx1v()
    assert not any(d["kind"] == "nvswitch" for _, d in t.graph.nodes(data=True))
    assert t.codes[0][3] == "NV2" and t.codes[0][5] == "SYS"
    assert best(t, 2) == [0, 3]  # an NV2 pair
    assert best(t, 4) == [0, 1, 2, 3]
    assert describe(t, [0, 1, 2, 3]) == "gpu-0..3 NVLink all-pairs (min NV1), NUMA 0"


def test_compress_names() -> None:
    assert compress_names(["gpu-0", "gpu-1", "gpu-2", "gpu-3"]) == "gpu-0..3"
    assert compress_names(["gpu-1", "gpu-4", "gpu-5", "gpu-6"]) == "gpu-1,4..6"
    assert compress_names(["gpu-3"]) == "gpu-3"
    assert compress_names(["a", "gpu-1"]) == "a,gpu-1"


# --- property: the table equals brute force on random small topologies ------------------------------------------

CODES = ["NV1", "NV2", "NV4", "NV6", "NV12", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"]


@st.composite
def random_case(draw: Any) -> tuple[Any, int, int]:
    n = draw(st.integers(2, 8))
    cells = {(i, j): draw(st.sampled_from(CODES)) for i in range(n) for j in range(i + 1, n)}
    rows = [["X" if i == j else cells[(min(i, j), max(i, j))] for j in range(n)] for i in range(n)]
    numa = [draw(st.integers(0, 3)) for _ in range(n)]
    topo = topology_from_matrix(rows, numa=numa)
    free = draw(st.integers(1, (1 << n) - 1))
    k = draw(st.integers(1, free.bit_count()))
    return topo, free, k


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_case())
def test_best_subset_equals_brute_force(case: tuple[Any, int, int]) -> None:
    topo, free, k = case
    table = SubsetTable(topo.bw, topo.numa)  # a fresh table: nothing memoised from other cases
    got = table.best(free, k)
    assert got is not None and got.bit_count() == k and got & ~free == 0
    ref = brute_force_best(topo.bw, topo.numa, bits(free), k)
    assert ref is not None
    assert table.key(free, got) == ref[0]
    assert bits(got) == list(ref[1])  # ties: the lowest indices, as brute force in combination order
    # the primary criteria alone: the best bottleneck bandwidth, then NUMA locality, over every k-subset
    primary = max(brute_value(topo.bw, topo.numa, c) for c in itertools.combinations(bits(free), k))
    assert table.value(got) == primary
    assert table.best(free, k) == got  # memoised answer


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS"]), min_size=3, max_size=3))
def test_pcie_bandwidth_follows_the_tree(levels: list[str]) -> None:
    """Consistent (hierarchical) PCIe codes come back unchanged through the graph's widest paths."""
    lv = sorted(levels, key=list(PCIE_BW).index)  # closest first: (0,1) <= (0,2) = (1,2) is a valid tree
    rows = [["X", lv[0], lv[1]], [lv[0], "X", lv[1]], [lv[1], lv[1], "X"]]
    t = topology_from_matrix(rows)
    assert t.codes[0][1] == lv[0] and t.codes[0][2] == lv[1] and t.codes[1][2] == lv[1]
    assert t.bw[0][1] == PCIE_BW[lv[0]]


# --- malformed input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "invalid JSON"),
        ('["x"]', "must be a JSON object"),
        ('{"devices": ["gpu-0"], "matrix": [["X"]]}', "driver must be a non-empty string"),
        ('{"driver": "d", "devices": [], "matrix": []}', "devices must be a non-empty list"),
        ('{"driver": "d", "devices": ["a", "a"], "matrix": [["X", "NV1"], ["NV1", "X"]]}', "duplicate"),
        ('{"driver": "d", "devices": ["a", "b"], "matrix": [["X", "NV1"]]}', "must be a list of 2 rows"),
        ('{"driver": "d", "devices": ["a", "b"], "matrix": [["X", "NV1"], ["NV1"]]}', "row 1 must have 2 cells"),
        ('{"driver": "d", "devices": ["a", "b"], "matrix": [["X", "NVX"], ["NVX", "X"]]}', "unknown topology code"),
        ('{"driver": "d", "devices": ["a", "b"], "matrix": [["X", "NV2"], ["SYS", "X"]]}', "not symmetric"),
        ('{"driver": "d", "devices": ["a", "b"], "matrix": [["NV1", "NV2"], ["NV2", "X"]]}', "must be X"),
        ('{"driver": "d", "devices": ["a", "b"], "matrix": [[1, 2], [2, 1]]}', "must be a string"),
    ],
)
def test_malformed_annotation_is_rejected_with_a_reason(value: str, message: str) -> None:
    with pytest.raises(TopologyInputError, match=message):
        parse_annotation(value)


def test_malformed_annotation_falls_back_to_profile_and_attributes() -> None:
    gpus = [GpuInfo(f"gpu-{i}", "NVIDIA H100 80GB HBM3", f"pci0000:{i:02x}", i // 4) for i in range(8)]
    profiles = parse_args({}).profiles or {}
    topo, problems = topology_from_inputs("gpu.nvidia.com", gpus, (), "{broken", profiles)
    assert topo is not None and topo.source == "profile" and topo.codes[0][5] == "NV18"
    assert len(problems) == 1 and "invalid JSON" in problems[0]
    other = json.dumps({"driver": "gpu.nvidia.com", "devices": ["x-0", "x-1"], "matrix": [["X", "NV1"], ["NV1", "X"]]})
    topo, problems = topology_from_inputs("gpu.nvidia.com", gpus, (), other, {})
    assert topo is not None and topo.source == "attributes" and "names none of the node's GPUs" in problems[0]
    partial = json.dumps(
        {"driver": "gpu.nvidia.com", "devices": ["gpu-0", "gpu-9"], "matrix": [["X", "NV1"], ["NV1", "X"]]}
    )
    topo, problems = topology_from_inputs("gpu.nvidia.com", gpus, (), partial, {})
    assert topo is not None and topo.source == "annotation" and "gpu-9" in problems[0]


# --- args ------------------------------------------------------------------------------------------------------


def test_args_validation_has_field_paths() -> None:
    assert validate_args({}, "a") == []
    assert validate_args(
        {
            "mode": "Pack",
            "profiles": [
                {"productName": "X", "nvlink": "NV4"},
                {"productName": "Y", "matrix": [["X", "PIX"], ["PIX", "X"]]},
            ],
            "levels": ["topology.kubernetes.io/zone", {"name": "rack", "label": "example.com/rack"}],
            "requiredLevel": "rack",
            "preferredLevel": "topology.kubernetes.io/zone",
            "deviceOrder": False,
        },
        "a",
    ) == []
    errs = validate_args(
        {
            "mode": "Tight",
            "bogus": 1,
            "profiles": [{"productName": "X"}, {"productName": "Y", "nvlink": "PIX"}, "z"],
            "levels": [{"name": "rack"}, 3],
            "requiredLevel": "spine",
            "deviceOrder": "yes",
        },
        "p",
    )
    assert errs == [
        "p.bogus: unknown field",
        "p.mode: unsupported value 'Tight': supported values: 'Pack', 'Spread'",
        "p.profiles[0]: exactly one of nvlink and matrix is required",
        "p.profiles[1].nvlink: must be NV<n>",
        "p.profiles[2]: must be a map with productName and nvlink or matrix",
        "p.levels[0].label: required",
        "p.levels[1]: must be a label key or {name, label}",
        "p.requiredLevel: 'spine' is not one of the levels ()",
        "p.deviceOrder: must be true or false",
    ]


def test_config_file_accepts_topology_args() -> None:
    cfg = load_config_text(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  plugins:
    score:
      enabled: [{name: GpuTopology, weight: 5}]
  pluginConfig:
  - name: GpuTopology
    args: {mode: Spread, requiredLevel: rack}
"""
    )
    prof = cfg.profiles[0]
    assert ("GpuTopology", 5) in [(r.name, r.weight) for r in prof.plugins["score"]]
    assert prof.plugin_args["GpuTopology"]["mode"] == "Spread"


# --- the allocator hook, end to end through simulate --------------------------------------------------------------

NS = "default"


def template(name: str, count: int, *, constraints: list[dict[str, Any]] | None = None,
             first_available: list[int] | None = None, cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    if first_available:
        req: dict[str, Any] = {
            "name": "gpu",
            "firstAvailable": [
                {"name": f"n{c}", "deviceClassName": cls, "allocationMode": "ExactCount", "count": c}
                for c in first_available
            ],
        }
    else:
        req = {"name": "gpu", "exactly": {"deviceClassName": cls, "count": count}}
    devices: dict[str, Any] = {"requests": [req]}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": devices}},
    }


def gpu_pod(name: str, tmpl: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tmpl}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def used(name: str, node: str, *devices: str, cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    """An allocated claim: existing device use."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS, "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d} for d in devices
                    ]
                }
            }
        },
    }


def run(objs: list[dict[str, Any]], config: str | None = None) -> SimulationResult:
    return asyncio.run(simulate(copy.deepcopy(objs), load_config_text(config) if config else None))


def devices_of(res: SimulationResult, pod: str) -> list[str]:
    p = next(o for o in res.items if o["kind"] == "Pod" and o["metadata"]["name"] == pod)
    claim = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    c = next(o for o in res.items if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == claim)
    return sorted(r["device"] for r in c["status"]["allocation"]["devices"]["results"])


def node_of(res: SimulationResult, pod: str) -> str:
    p = next(o for o in res.items if o["kind"] == "Pod" and o["metadata"]["name"] == pod)
    return str(p["spec"].get("nodeName", ""))


FIRST_FIT = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  pluginConfig:
  - name: GpuTopology
    args: {deviceOrder: false}
"""


def test_four_gpus_on_one_numa_node_instead_of_first_fit() -> None:
    objs = [*scale_fleet(1), used("old", "dgx-h100-00000", "gpu-1"), template("four", 4), gpu_pod("p", "four")]
    res = run(objs)
    assert devices_of(res, "p") == ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    first_fit = run(objs, FIRST_FIT)
    assert devices_of(first_fit, "p") == ["gpu-0", "gpu-2", "gpu-3", "gpu-4"]  # upstream: across NUMA nodes
    # and the event says which devices and why
    table = to_table(res)
    assert "gpu-4..7 NV18 all-pairs, NUMA 1" in table and "TOPOLOGY" in table


def test_constraint_against_the_preference_is_still_honoured() -> None:
    """The preferred set (one NUMA node) violates distinctAttribute numaNode: the search goes on and
    returns a valid set."""
    objs = [
        *scale_fleet(1),
        template("spread", 2, constraints=[{"distinctAttribute": "resource.kubernetes.io/numaNode"}]),
        gpu_pod("p", "spread"),
    ]
    res = run(objs)
    devs = devices_of(res, "p")
    assert len(devs) == 2 and {int(d[-1]) // 4 for d in devs} == {0, 1}


def test_match_attribute_with_preference() -> None:
    """L40S box with pcieRoot per switch pair: matchAttribute pcieRoot and the topology agree on a PIX pair;
    with gpu-0 used, both move to the next whole pair."""
    objs = [
        *gpu_node_objects("l40s", L40S_PCIE_8),
        *[o for o in scale_fleet(0) if o["kind"] == "DeviceClass"],
        used("old", "l40s", "gpu-0"),
        template("pair", 2, constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
        template("one", 1),
        gpu_pod("p", "pair"),
        gpu_pod("q", "one"),
    ]
    res = run(objs)
    assert devices_of(res, "p") == ["gpu-2", "gpu-3"]
    assert devices_of(res, "q") == ["gpu-1"]  # the single GPU goes next to the used one


def test_first_available_takes_the_fallback_with_the_best_set() -> None:
    fleet = scale_fleet(1)
    objs = [*fleet, used("old", "dgx-h100-00000", "gpu-6"), template("fa", 0, first_available=[8, 4]),
            gpu_pod("p", "fa")]
    res = run(objs)
    assert devices_of(res, "p") == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_counters_dynamic_mig_gpu_with_a_slice_in_use_is_avoided() -> None:
    """DynamicMIG: gpu-0 has a MIG slice allocated (its counters are partly consumed), so the whole gpu-0 is
    not free; the 4-GPU claim gets NUMA node 1."""
    objs = [
        *[o for o in scale_fleet(0) if o["kind"] == "DeviceClass"],
        *gpu_node_objects("dmig", DGX_H100_DYNAMIC_MIG),
        used("slice", "dmig", "gpu-0-mig-1g10gb-19-0", cls="mig.nvidia.com"),
        template("four", 4),
        gpu_pod("p", "four"),
        template("three", 3),
        gpu_pod("q", "three"),
    ]
    res = run(objs)
    assert devices_of(res, "p") == ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    assert devices_of(res, "q") == ["gpu-1", "gpu-2", "gpu-3"]


def test_hook_never_changes_feasibility() -> None:
    """Random existing use and claims on a DGX H100: with and without topology the same pods fit and no
    device is allocated twice."""
    import random

    rnd = random.Random(5)
    for trial in range(12):
        fleet = scale_fleet(2)
        taken = [f"gpu-{i}" for i in rnd.sample(range(8), rnd.randint(0, 6))]
        objs: list[dict[str, Any]] = [*fleet]
        if taken:
            objs.append(used("old", "dgx-h100-00000", *taken))
        sizes = [rnd.choice([1, 2, 3, 4, 8]) for _ in range(5)]
        for i, k in enumerate(sizes):
            cons = [{"matchAttribute": "resource.kubernetes.io/numaNode"}] if rnd.random() < 0.3 else None
            objs += [template(f"t{i}", k, constraints=cons), gpu_pod(f"p{i}", f"t{i}")]
        a, b = run(objs), run(objs, FIRST_FIT)
        assert a.summary["scheduled"] == b.summary["scheduled"], trial
        devs = [
            (r["pool"], r["device"])
            for c in a.items
            if c["kind"] == "ResourceClaim" and c["metadata"]["name"] != "old" and c.get("status", {}).get("allocation")
            for r in c["status"]["allocation"]["devices"]["results"]
        ]
        assert len(devs) == len(set(devs))
        assert not {("dgx-h100-00000", d) for d in taken} & set(devs)


# --- node scoring -----------------------------------------------------------------------------------------------


def test_pack_fills_the_started_node_spread_the_empty_one() -> None:
    objs = [*scale_fleet(2), used("old", "dgx-h100-00001", "gpu-0"), template("one", 1), gpu_pod("p", "one")]
    assert node_of(run(objs), "p") == "dgx-h100-00001"
    spread = FIRST_FIT.replace("{deviceOrder: false}", "{mode: Spread}")
    assert node_of(run(objs, spread), "p") == "dgx-h100-00000"


def test_four_gpu_claim_prefers_nvlink_node_over_pcie_box() -> None:
    objs = [
        *[o for o in scale_fleet(0) if o["kind"] == "DeviceClass"],
        *gpu_node_objects("a-l40s", L40S_PCIE_8),
        *gpu_node_objects("b-h100", DGX_H100),
        template("four", 4),
        gpu_pod("p", "four"),
    ]
    assert node_of(run(objs), "p") == "b-h100"


def test_node_score_components() -> None:
    plugin = GpuTopology({})
    t = l40s_box()
    from plugins.topology.plugin import NodeView

    view = NodeView(t, table_for(t), {}, tuple(() for _ in range(8)))
    full = 0xFF
    # a PIX pair beats a SYS pair on the same node; the fuller node wins at equal quality
    assert plugin.node_score(view, full, mask_of([0, 1])) > plugin.node_score(view, full, mask_of([0, 4]))
    assert plugin.node_score(view, 0b11111100, mask_of([2, 3])) > plugin.node_score(view, full, mask_of([0, 1]))


# --- malformed input through the scheduler --------------------------------------------------------------------------


def test_malformed_annotation_is_logged_reported_and_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.config.logging import configure_logging

    configure_logging(verbose=False)
    fleet = scale_fleet(1)
    for o in fleet:
        if o["kind"] == "Node":
            o["metadata"]["annotations"][ANNOTATION] = '{"driver": "gpu.nvidia.com", "devices": ["gpu-0"]'
    res = run([*fleet, template("four", 4), gpu_pod("p", "four"), gpu_pod("q", "four")])
    assert res.summary["scheduled"] == 2
    assert devices_of(res, "p") == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]  # profile + attributes still apply
    warnings = [e for e in res.events if e["reason"] == "InvalidDeviceTopology"]
    assert len(warnings) == 1
    assert warnings[0]["type"] == "Warning" and warnings[0]["involvedObject"]["kind"] == "Node"
    assert "invalid JSON" in warnings[0]["message"]
    assert "malformed device topology input ignored" in capsys.readouterr().err
