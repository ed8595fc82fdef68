"""DeviceFragmentation (plugins/fragmentation): the measure on hand-made node states, and placements through
``simulate`` on small fleets where fragmentation decides whether the last pod fits.

The measure is the paper's (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23, §4.2: a node's fragmentation for a task is all its free GPU
capacity when the task cannot run there, else the free capacity of the GPUs it cannot use; weighted by the
workload's task popularity), generalised to DRA (plugins/fragmentation/core.py). Every simulate case below also
runs with the plugin disabled, the profile kube-scheduler 1.37.2 would run, and checks that the last pod is then
refused: the cases fail without the plugin.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

import pytest

import plugins.fragmentation.core as core
from plugins.fragmentation.core import (
    DeviceModel,
    Mix,
    NodeModel,
    ReqShape,
    Scarcity,
    Shape,
    UnitModel,
    canonical,
    fragment,
    is_uniform,
)
from plugins.fragmentation.plugin import _take
from scheduler.config.schedulerconfig import load_config_text
from scheduler.simulate.simulation import simulate

GPU = ReqShape("gpu", 1)  # one whole GPU


def _share(milli: int) -> ReqShape:
    return ReqShape("gpu", 1, (("milli", milli),))


def _gpus(n: int) -> NodeModel:
    units = tuple(UnitModel(("milli",), (1000,)) for _ in range(n))
    devs = tuple(DeviceModel(frozenset({"gpu"}), i, True) for i in range(n))
    return NodeModel(units, devs, tuple(range(n)), {i: i for i in range(n)})


def _state(*left: int) -> Any:
    return tuple((v,) for v in left), tuple(v == 1000 for v in left)


# --- the measure ------------------------------------------------------------------------------------------------


def test_fragment_is_what_the_shape_cannot_use() -> None:
    m = _gpus(2)
    # a 470-share fits GPU 1 (530 left) and GPU 2: nothing stranded for it
    assert fragment(m, _state(530, 1000), Shape(0, 0, (_share(470),)), 10, 10) == 0
    # an 810-share only fits GPU 2: GPU 1's 530 are stranded for it
    assert fragment(m, _state(530, 1000), Shape(0, 0, (_share(810),)), 10, 10) == 530
    # a whole GPU: the partly used GPU is stranded
    assert fragment(m, _state(530, 1000), Shape(0, 0, (GPU,)), 10, 10) == 530
    # two whole GPUs do not fit: everything free is stranded
    assert fragment(m, _state(530, 1000), Shape(0, 0, (ReqShape("gpu", 2),)), 10, 10) == 1530
    # no cpu left for the shape: everything free is stranded
    assert fragment(m, _state(530, 1000), Shape(20, 0, (_share(470),)), 10, 10) == 1530
    # a device of another class/model: stranded for a shape whose request does not match it
    other = NodeModel(
        (UnitModel(("milli",), (1000,)),) * 2,
        (DeviceModel(frozenset({"gpu"}), 0, True), DeviceModel(frozenset({"t4"}), 1, True)),
        (0, 1),
        {0: 0, 1: 1},
    )
    assert fragment(other, _state(1000, 1000), Shape(0, 0, (GPU,)), 10, 10) == 1000


def test_stacking_a_share_on_the_used_gpu_fragments_less() -> None:
    """The case of issue #23: GpuTopology put every share on an untouched GPU. Under a mix of shares and whole
    GPUs, a second share on the GPU already shared keeps a whole GPU for the whole-GPU pods."""
    mix = Mix([(Shape(0, 0, (_share(470),)), 1.0), (Shape(0, 0, (GPU,)), 1.0)], strand=0)
    m = _gpus(2)
    stacked = mix.value(m, _state(60, 1000), 10, 10)
    spread = mix.value(m, _state(530, 530), 10, 10)
    assert stacked < spread


def test_the_stranding_term_counts_gpus_the_cpu_left_cannot_serve() -> None:
    shapes = [(Shape(12_000, 0, (GPU,)), 1.0)]
    m = _gpus(8)
    plain = Mix(shapes, strand=0)
    strand = Mix(shapes, strand=0.5)
    full = _state(*[1000] * 8)
    # 8 free GPUs and cpu for 2 of them at the mix's 12 cores per GPU: 6 GPUs' worth stranded, half-weighted
    assert plain.value(m, full, 24_000, 10**12) == 0
    assert strand.value(m, full, 24_000, 10**12) == pytest.approx(0.5 * 6000)
    assert strand.value(m, full, 96_000, 10**12) == 0


def test_partitionable_devices_count_their_counter_set() -> None:
    """MIG: a GPU's counter set is the unit; a 1g device uses 1/8 of it, the full-GPU device all of it."""
    unit = UnitModel(("memory",), (8,))
    m = NodeModel(
        (unit,),
        (
            DeviceModel(frozenset({"full"}), 0, False, (8,)),
            DeviceModel(frozenset({"1g"}), 0, False, (1,)),
            DeviceModel(frozenset({"1g"}), 0, False, (1,)),
        ),
        (0, 1, 2),
        {0: 0, 1: 1, 2: 2},
    )
    free = ((8,),), (True, True, True)
    one_used = ((7,),), (True, False, True)
    full = Shape(0, 0, (ReqShape("full", 1),))
    assert fragment(m, free, full, 1, 1) == 0
    assert fragment(m, one_used, full, 1, 1) == 875  # 7/8 of the GPU left, unusable for the full profile
    assert fragment(m, one_used, Shape(0, 0, (ReqShape("1g", 1),)), 1, 1) == 0


# --- through simulate ----------------------------------------------------------------------------------------------

CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]},
}
OFF = load_config_text(
    """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  plugins:
    multiPoint:
      disabled: [{name: DeviceFragmentation}]
"""
)


def _node(name: str, cpu: str, gpus: int, model: str = "G2", shared: bool = True) -> list[dict[str, Any]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", "pods": "110"}},
    }
    devices = []
    for i in range(gpus):
        d: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": model}, "index": {"int": i}},
        }
        if shared:
            d["capacity"] = {"milli": {"value": "1000"}}
            d["allowMultipleAllocations"] = True
        devices.append(d)
    sl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-gpus"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "nodeName": name,
            "devices": devices,
        },
    }
    return [node, sl] if gpus else [node]


def _pod(name: str, t: int, cpu: str = "1", count: int = 0, milli: int = 0, models: tuple[str, ...] = ()) -> list[Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": f"2026-01-01T00:{t:02d}:00Z"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    if not count:
        return [pod]
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": count}
    if milli:
        exactly["capacity"] = {"requests": {"milli": str(milli)}}
    if models:
        listed = ", ".join(f'"{m}"' for m in models)
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["gpu.nvidia.com"].model in [{listed}]'}}]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    return [claim, pod]


def _placed(objs: list[dict[str, Any]], config: Any = None) -> dict[str, str]:
    res = asyncio.run(simulate(objs, config))
    return {o["metadata"]["name"]: o["spec"].get("nodeName", "") for o in res.items if o["kind"] == "Pod"}


def _both(objs: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    return _placed(objs), _placed(objs, OFF)


def test_shares_stack_so_a_whole_gpu_stays_free() -> None:
    """Two half-GPU shares on a 2-GPU node, then a whole-GPU pod: the shares must share one GPU."""
    objs = [CLASS, *_node("n1", "64", 2)]
    objs += _pod("share-a", 1, count=1, milli=500) + _pod("share-b", 2, count=1, milli=500)
    objs += _pod("whole", 3, count=1, milli=1000)
    on, off = _both(objs)
    assert on == {"share-a": "n1", "share-b": "n1", "whole": "n1"}
    assert off["whole"] == ""  # kube-scheduler's scoring + GpuTopology's order: shares on both GPUs


def test_cpu_pod_does_not_take_the_cpu_an_8_gpu_pod_needs() -> None:
    """The case of issue #23: the first 8-GPU/120-core task found no node because LeastAllocated had spread CPU
    pods onto the big GPU nodes."""
    objs = [CLASS, *_node("big", "128", 8), *_node("cpu-only", "32", 0)]
    objs += _pod("cpu-pod", 1, cpu="16") + _pod("train", 2, cpu="120", count=8, milli=1000)
    on, off = _both(objs)
    assert on == {"cpu-pod": "cpu-only", "train": "big"}
    assert off["cpu-pod"] == "big" and off["train"] == ""


def test_unconstrained_pod_leaves_the_model_others_need() -> None:
    """A whole-GPU pod that takes any model goes where the model-restricted pods cannot go."""
    objs = [CLASS, *_node("t4-node", "96", 2, model="T4"), *_node("g2-node", "8", 2, model="G2")]
    objs += _pod("any", 1, count=1, milli=1000)
    objs += _pod("t4-a", 2, count=1, milli=1000, models=("T4",)) + _pod("t4-b", 3, count=1, milli=1000, models=("T4",))
    on, off = _both(objs)
    assert on == {"any": "g2-node", "t4-a": "t4-node", "t4-b": "t4-node"}
    assert off["any"] == "t4-node" and "" in (off["t4-a"], off["t4-b"])


def _mig_node(name: str, cpu: str) -> list[dict[str, Any]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", "pods": "110"}},
    }
    devices: list[dict[str, Any]] = [
        {
            "name": "gpu-0-full",
            "attributes": {"profile": {"string": "full"}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "8"}}}],
        }
    ]
    for i in range(2):
        devices.append(
            {
                "name": f"gpu-0-half-{i}",
                "attributes": {"profile": {"string": "half"}},
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "4"}}}],
            }
        )
    sl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-mig"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "nodeName": name,
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}],
            "devices": devices,
        },
    }
    return [node, sl]


def _mig_pod(name: str, t: int, profile: str, cpu: str = "1") -> list[dict[str, Any]]:
    claim, pod = _pod(name, t, cpu=cpu, count=1)
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["gpu.nvidia.com"].profile == "{profile}"'}}
    ]
    return [claim, pod]


def test_mig_partition_goes_to_the_gpu_already_partitioned() -> None:
    """Partitionable devices (KEP-4815 shared counters): a half partition joins the GPU that already has one
    instead of breaking the untouched GPU a full-GPU pod needs next. (Without the plugin this case passes too:
    GpuTopology fills MIG GPUs already in use first; the measure's MIG unit is checked above.)"""
    objs = [CLASS, *_mig_node("mig-a", "16"), *_mig_node("mig-b", "12")]
    objs += _mig_pod("half-1", 1, "half", cpu="8") + _mig_pod("half-2", 2, "half", cpu="4")
    objs += _mig_pod("full", 3, "full")
    on = _placed(objs)
    assert on["half-1"] == on["half-2"] != "" and on["full"] not in ("", on["half-1"])


def test_the_documented_kube_scheduler_scoring_recipe_is_a_valid_config() -> None:
    """docs/configuration.md's recipe (generated by scheduler.config.configref) turns the device placement off."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text.split("### kube-scheduler's scoring", 1)[1]
    recipe = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    cfg = load_config_text(recipe)
    [profile] = cfg.profiles
    scorers = {ref.name for ref in profile.plugins["score"]}
    assert "DeviceFragmentation" not in scorers and "GpuTopology" not in scorers
    assert "NodeResourcesFit" in scorers


def test_nodes_of_one_kind_share_the_memo() -> None:
    """The adapter interns (units, devices) to one ``kind``: F of one state is computed once for all such nodes."""
    kind = object()
    a, b = _gpus(2), _gpus(2)
    a = NodeModel(a.units, a.devices, a.ids, a.index, kind=kind)
    b = NodeModel(b.units, b.devices, ("x", "y"), {"x": 0, "y": 1}, kind=kind)
    mix = Mix([(Shape(0, 0, (_share(470),)), 1.0)], strand=0)
    assert mix.value(a, _state(530, 1000), 10, 10) == mix.value(b, _state(530, 1000), 10, 10)
    assert len(mix._memo) == 1
    mix.value(_gpus(2), _state(530, 1000), 10, 10)  # no kind: its own entry
    assert len(mix._memo) == 2


def _uniform(n: int) -> NodeModel:
    m = _gpus(n)
    return NodeModel(m.units, m.devices, m.ids, m.index, kind=object(), uniform=is_uniform(m.units, m.devices))


def test_only_models_whose_devices_are_their_own_alike_units_are_uniform() -> None:
    g = _gpus(4)
    assert is_uniform(g.units, g.devices)
    # another capacity on one GPU, another model (request keys) on one, a whole (not shareable) device, MIG counters
    assert not is_uniform((*g.units[:3], UnitModel(("milli",), (2000,))), g.devices)
    assert not is_uniform(g.units, (*g.devices[:3], DeviceModel(frozenset({"other"}), 3, True)))
    assert not is_uniform(g.units, (*g.devices[:3], DeviceModel(frozenset({"gpu"}), 3, False)))
    mig = (DeviceModel(frozenset({"gpu"}), 0, False, (1,)), DeviceModel(frozenset({"gpu"}), 0, False, (2,)))
    assert not is_uniform((UnitModel(("mem",), (8,)),), mig)
    assert not is_uniform((), ())


def test_permuted_states_of_a_uniform_kind_share_one_computation_of_f() -> None:
    """F of a state, and what taking one device leaves, depend only on the multiset of the units' (left, free)
    when every device is its own unit and all are alike: the memo keyed by the canonical state serves every
    permutation (another node of the kind with its shares on other GPUs), and computing each permutation afresh
    gives the same values (checked over random states)."""
    shapes = [
        (Shape(0, 0, (_share(470),)), 0.4),
        (Shape(0, 0, (_share(250),)), 0.2),
        (Shape(0, 0, (GPU,)), 0.3),
        (Shape(0, 0, (ReqShape("gpu", 2),)), 0.1),
    ]
    rng = random.Random(7)
    for _ in range(30):
        lefts = [rng.choice((0, 250, 530, 750, 1000)) for _ in range(4)]
        perm = rng.sample(range(4), 4)
        m = _uniform(4)
        s1, s2 = _state(*lefts), _state(*(lefts[i] for i in perm))
        assert canonical(m, s1) == canonical(m, s2)
        fresh = Mix(shapes, strand=0.5)
        want = fresh.expected(m, s2, (5, 5))
        mix = Mix(shapes, strand=0.5)
        assert mix.expected(m, s1, (5, 5)) == want
        assert mix.expected(m, s2, (5, 5)) == want
        # taking device d of s1 and the device it went to in s2 leave permutations of one state: equal F
        for d in range(4):
            a1, a2 = _take(m, s1, d, (("milli", 470),)), _take(m, s2, perm.index(d), (("milli", 470),))
            assert (a1 is None) == (a2 is None)
            if a1 is not None and a2 is not None:
                assert canonical(m, a1) == canonical(m, a2)
                assert Mix(shapes).expected(m, a1, (5, 5)) == Mix(shapes).expected(m, a2, (5, 5))


def test_a_permutation_of_a_known_state_is_not_computed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = core.device_fragment
    monkeypatch.setattr(core, "device_fragment", lambda *a: calls.append(1) or real(*a))
    mix = Mix([(Shape(0, 0, (_share(470),)), 1.0)], strand=0)
    m = _uniform(3)
    v = mix.expected(m, _state(530, 1000, 1000), (1, 1))
    assert len(calls) == 1
    for p in itertools.permutations((530, 1000, 1000)):
        assert mix.expected(m, _state(*p), (1, 1)) == v
    assert len(calls) == 1
    # not uniform (its own kind, no flag): every new order is computed
    g = _gpus(3)
    mix.expected(g, _state(530, 1000, 1000), (1, 1))
    mix.expected(g, _state(1000, 530, 1000), (1, 1))
    assert len(calls) == 3


def test_a_small_queue_is_learned_whole_before_the_first_placement() -> None:
    """Six pods in one file: the last one (a whole T4) is in the mix when the shares are placed, so the two shares
    stack on one T4 GPU and the T4-only pod gets the other (before the mix missed it and the shares spread)."""
    objs = [CLASS, *_node("g3", "128", 8), *_node("t4", "104", 2, model="T4")]
    objs += _pod("cpu", 1, cpu="12500m") + _pod("share-a", 2, count=1, milli=470)
    objs += _pod("share-b", 3, count=1, milli=470) + _pod("big", 4, cpu="120200m", count=8, milli=1000)
    objs += _pod("too-many", 5, count=4, milli=1000) + _pod("t4-only", 6, count=1, milli=1000, models=("T4",))
    placed = _placed(objs)
    assert placed["big"] == "g3" and placed["t4-only"] == "t4"
    assert placed["too-many"] == ""


# --- scarcity: the backlog's need of each kind of device ----------------------------------------------------------


def test_scarcity_weighs_units_by_the_pending_demand_of_other_keys() -> None:
    """``min(1, D_k / S_k)`` per key, in steps of 1/20, squared; a key matching every free unit and the pod's own
    key do not count (their pressure is the same wherever the pod goes)."""
    sc = Scarcity({"any": 9000, "t4": 3000, "g2": 1000, "none": 0}, {"any": 10_000, "t4": 2000, "g2": 8000}, 10_000)
    assert sc.ratios == {"t4": 1.0, "g2": pytest.approx(0.01)}  # "any" matches all 10,000 free: left out
    assert sc.pressure(frozenset({"any", "t4"}), frozenset({"any"})) == 1.0
    assert sc.pressure(frozenset({"any", "t4"}), frozenset({"t4"})) == 0.0  # its own key: the pod needs it anyway
    assert sc.pressure(frozenset({"any", "g2"}), frozenset({"any"})) == pytest.approx(0.01)  # 1000/8000 -> 0.1^2
    m = NodeModel(
        (UnitModel(("milli",), (1000,)),) * 2,
        (DeviceModel(frozenset({"any", "t4"}), 0, True), DeviceModel(frozenset({"any", "t4"}), 1, True)),
    )
    # a half share of a T4 unit: 500 thousandths at pressure 1
    assert sc.cost(m, _state(1000, 1000), _state(500, 1000), frozenset({"any"})) == 500.0
    assert Scarcity({"t4": 1}, {"t4": 20_000}, 40_000).ratios == {}  # 1/20000 rounds to 0: no pressure
    assert Scarcity({"t4": 1}, {}, 40_000).ratios == {"t4": 1.0}  # nothing free for it: full pressure


SCARCITY_OFF = load_config_text(
    """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  pluginConfig:
  - name: DeviceFragmentation
    args: {scarcity: 0}
"""
)


def test_an_unrestricted_pod_leaves_the_scarce_model_to_the_pods_that_need_it() -> None:
    """FGD's expectation alone sends a pod that takes any model to the GPUs fewer shapes can use: here the G3 node,
    as G2-only pods are more popular than G3-only ones. But the two pending G3-only pods need both G3 GPUs; the
    scarcity term (pending demand >= free supply for the G3-only key) sends the unrestricted pod to G2, and every
    pod is placed. With ``scarcity: 0`` the second G3-only pod is refused (gpuspec33 workload of the openb trace:
    restricted tasks refused from 13% arrived, see core.Scarcity)."""
    objs = [CLASS, *_node("g2", "64", 8, model="G2"), *_node("g3", "64", 2, model="G3")]
    objs += _pod("any", 1, count=1, milli=1000)
    objs += _pod("g3-a", 2, count=1, milli=1000, models=("G3",)) + _pod("g3-b", 3, count=1, milli=1000, models=("G3",))
    for i in range(3):
        objs += _pod(f"g2-{i}", 4 + i, count=1, milli=1000, models=("G2",))
    on, off = _placed(objs), _placed(objs, SCARCITY_OFF)
    assert on == {"any": "g2", "g3-a": "g3", "g3-b": "g3", "g2-0": "g2", "g2-1": "g2", "g2-2": "g2"}
    assert off["any"] == "g3" and "" in (off["g3-a"], off["g3-b"])
