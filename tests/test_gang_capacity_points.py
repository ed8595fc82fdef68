"""The group capacity bound goes through the framework's extension points (scheduler/framework/capacity.py).

The engine (scheduler/gang/capacity.py) bounds how many members of a class fit on a node by the minimum over what
the profile's plugins contribute: ResourceCapacityPlugin (NodeResourcesFit) and DeviceCapacityPlugin
(DynamicResources). kube-scheduler 1.37.2 has no such pre-check for pod groups (its nearest relative is
PlacementFeasiblePlugin, pkg/scheduler/framework/interface.go); these tests add a stand-in plugin that contributes
a smaller room than the in-tree ones and check that a group that would fit is then rejected by the bound, before
any placement is searched, with the message the engine assembles from the stand-in's numbers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from scheduler.api.dra import DeviceClass
from scheduler.api.model import CPU, Pod, pod_from
from scheduler.cache.cache import NodeInfo, Snapshot
from scheduler.framework.capacity import (
    EXACT,
    UNBOUNDED,
    DeviceCapacityPlugin,
    DeviceDemand,
    ResourceCapacityPlugin,
)
from scheduler.framework.interface import CycleState, PreFilterResult, Status
from scheduler.gang.capacity import CapacityModel, ClassRoom, MemberClass, device_demands, shortage
from tests.test_gang import GROUP_LABEL, Live, podgroup

PROFILE = "dra-scheduler"


def cpu_node(name: str, cpu: int = 8) -> dict[str, Any]:
    alloc = {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(alloc), "allocatable": dict(alloc)},
    }


def cpu_member(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {GROUP_LABEL: group}},
        "spec": {
            "schedulerName": PROFILE,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def three_members_on_two_nodes() -> list[dict[str, Any]]:
    return [cpu_node("n1"), cpu_node("n2"), podgroup("g", 3), *(cpu_member(f"g-{i}", "g") for i in range(3))]


class CpuQuota:
    """A stand-in ResourceCapacityPlugin: one cpu free per node, whatever the node has (Filter lets all pass)."""

    name: ClassVar[str] = "CpuQuota"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return Status.ok()

    def checked_resources(self, requests: Mapping[str, int]) -> list[str]:
        return [CPU] if requests.get(CPU, 0) > 0 else []

    def free_resources(
        self, info: NodeInfo, resources: Sequence[str], classes: Mapping[str, DeviceClass]
    ) -> dict[str, int]:
        return {CPU: 1000} if CPU in resources else {}

    def resource_room(self, requests: Mapping[str, int], info: NodeInfo, classes: Mapping[str, DeviceClass]) -> int:
        return 1000 // requests[CPU] if requests.get(CPU, 0) > 0 else UNBOUNDED


@dataclass
class _WidgetState:
    owner: Widgets


class Widgets:
    """A stand-in DeviceCapacityPlugin: every member takes one widget, and each node has one free widget."""

    name: ClassVar[str] = "Widgets"

    def __init__(self) -> None:
        self.rooms: list[str] = []  # nodes asked about

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        state.write(self.name, _WidgetState(self))
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return Status.ok()

    def member_demands(self, state: CycleState) -> tuple[list[DeviceDemand], int]:
        if state.read(self.name) is None:
            return [], 0
        d = DeviceDemand(
            (EXACT, "widget.example.com", ()), "widget.example.com", 1, EXACT, [], "request widget: needs 1 device(s)"
        )
        d.requests.append("widget")
        return [d], 1

    def device_room(
        self, snap: Snapshot, info: NodeInfo, demands: Sequence[DeviceDemand], memo: dict[Hashable, Any]
    ) -> tuple[int, dict[Hashable, int]]:
        assert all(d.plugin == self.name for d in demands)
        memo["calls"] = memo.get("calls", 0) + 1
        self.rooms.append(info.name)
        return 1, {d.key: 1 for d in demands}


def _with(live: Live, plugin: Any, pre_filter: bool = False) -> None:
    """Enable ``plugin`` at Filter (and PreFilter) of the live scheduler's profile."""
    fw = live.sched.profiles[PROFILE]
    fw.instances[plugin.name] = plugin
    fw.filter.append(plugin)
    if pre_filter:
        fw.pre_filter.append(plugin)


def _run(live: Live) -> None:
    asyncio.run(live.run())


def _message(live: Live, pod: str) -> str:
    [p] = [o for o in live.api.stored("Pod") if o["metadata"]["name"] == pod]
    [cond] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["status"] == "False"
    return str(cond["message"])


def test_stand_ins_implement_the_points() -> None:
    assert isinstance(CpuQuota(), ResourceCapacityPlugin) and not isinstance(CpuQuota(), DeviceCapacityPlugin)
    assert isinstance(Widgets(), DeviceCapacityPlugin) and not isinstance(Widgets(), ResourceCapacityPlugin)


def test_without_a_stand_in_the_group_fits() -> None:
    live = Live(three_members_on_two_nodes())
    _run(live)
    assert sorted(live.bound("g")) == ["g-0", "g-1", "g-2"]


def test_a_resource_plugin_with_less_room_rejects_the_group_by_the_bound() -> None:
    """NodeResourcesFit says 8 cpu are free on each node; the stand-in says 1: the room is the smaller one, and
    the shortage message is the engine's, with the stand-in's numbers."""
    live = Live(three_members_on_two_nodes())
    _with(live, CpuQuota())
    _run(live)
    assert live.bound("g") == []
    msg = _message(live, "g-0")
    assert "not enough cpu: 3 cpu needed, 2 cpu free on the 2 nodes the members can use (3 members)" in msg, msg
    st = live.sched.gang.stats
    assert st["rejected_by_bound"] >= 1 and st["search_steps"] == 0


def test_a_device_plugin_contributes_demands_and_room() -> None:
    """A member's demands come from the DeviceCapacityPlugin's PreFilter state; its room bounds the class."""
    live = Live(three_members_on_two_nodes())
    widgets = Widgets()
    _with(live, widgets, pre_filter=True)
    _run(live)
    assert live.bound("g") == []
    msg = _message(live, "g-0")
    assert (
        "not enough devices of class widget.example.com: 3 needed, 2 free on the 2 nodes the members can use "
        "(3 members; request widget: needs 1 device(s) each)"
    ) in msg, msg
    assert set(widgets.rooms) == {"n1", "n2"}
    st = live.sched.gang.stats
    assert st["rejected_by_bound"] >= 1 and st["search_steps"] == 0
    # the plugin's memo is its own and kept by the gang scheduler across cycles
    assert live.sched.gang._matches.memo("Widgets")["calls"] >= 2


def test_the_model_takes_the_least_room_and_only_plugins_enabled_at_filter() -> None:
    live = Live(three_members_on_two_nodes())
    fw = live.sched.profiles[PROFILE]
    snap = live.cache.snapshot()
    info = snap.node_map["n1"]
    requests = {CPU: 1000}
    alone = CapacityModel(fw.instances, fw.filter)
    assert alone.checked_resources(requests) == [CPU]
    assert alone.resource_cap(requests, info) == 8  # NodeResourcesFit: 8 cpu free
    assert alone.free_resources(info, [CPU]) == {CPU: 8000, "pods": 110}
    quota = CpuQuota()
    instances = {**fw.instances, quota.name: quota}
    assert CapacityModel(instances, fw.filter).resource_cap(requests, info) == 8  # not a Filter plugin: ignored
    both = CapacityModel(instances, [*fw.filter, quota])
    assert both.checked_resources(requests) == [CPU]
    assert both.resource_cap(requests, info) == 1
    assert both.free_resources(info, [CPU]) == {CPU: 1000, "pods": 110}

    widgets = Widgets()
    state = CycleState(snap)
    widgets.pre_filter(state, pod_from(cpu_member("g-0", "g")))
    demands, devices = device_demands(state, [quota, widgets])
    assert devices == 1 and [d.plugin for d in demands] == ["Widgets"]
    assert device_demands(state, [quota]) == ([], 0)  # only the plugins given are asked
    assert CapacityModel({widgets.name: widgets}, []).device_room(snap, info, demands) == (UNBOUNDED, {})
    model = CapacityModel({widgets.name: widgets}, [widgets])
    assert model.device_room(snap, info, demands) == (1, {demands[0].key: 1})

    c = MemberClass("c", [], requests=requests, demands=demands, devices=1, target=3)
    room = ClassRoom(caps={"n1": 1, "n2": 1}, free={demands[0].key: {"n1": 1, "n2": 1}})
    assert shortage([c], {"c": room}, 3, model, {}).startswith(
        "not enough devices of class widget.example.com: 3 needed, 2 free on the 2 nodes the members can use"
    )


def test_a_claim_shared_by_classes_is_one_demand_in_the_bound() -> None:
    """Issue 25 item 1, at the engine: members that share a claim (a PodGroup's claim, KEP-5729, or one
    ResourceClaim named by several pods) are classes of one member each; the claim is allocated once and reserved
    for all of them (resource.k8s.io/v1 ResourceClaim status.reservedFor; kubernetes v1.37.2 pkg/scheduler), so
    ``shortage`` counts its devices once (DeviceDemand.claims, MemberClass.shared) and every other claim once per
    member. KEP-4671: the gang is refused only when the devices really fall short."""
    live = Live(three_members_on_two_nodes())
    fw = live.sched.profiles[PROFILE]
    model = CapacityModel(fw.instances, fw.filter)
    key = (EXACT, "fabric.example.com", ())

    def member(i: int, own: int) -> MemberClass:
        claims = {"shared-uid": ("default/g-fabric-x", 1)}
        if own:
            claims[f"own-{i}"] = (f"default/m{i}-own", own)
        d = DeviceDemand(key, "fabric.example.com", 1 + own, EXACT, [], f"requests fabric, own: need {1 + own}",
                         claims=claims)
        return MemberClass(("shares-a-claim", i), [], demands=[d], devices=1 + own, label="claim templates x",
                           target=1, shared=frozenset({"shared-uid"}))

    def bound(classes: list[MemberClass], free: int) -> str:
        rooms = {c.key: ClassRoom(caps={"n1": 1}, free={key: {"n1": free}}, resources={"n1": {"pods": 110}})
                 for c in classes}
        return shortage(classes, rooms, len(classes), model, {})

    # 4 members on one shared claim of 1 device: 1 needed, however many members (was 4)
    assert bound([member(i, 0) for i in range(4)], 2) == ""
    assert bound([member(i, 0) for i in range(4)], 1) == ""
    # plus one device of each member's own claim: 1 + 4 = 5 needed
    assert bound([member(i, 1) for i in range(4)], 5) == ""
    assert bound([member(i, 1) for i in range(4)], 4) == (
        "not enough devices of class fabric.example.com: 5 needed, 4 free on the 1 node the members can use "
        "(4 members of claim templates x: their own claims need 1 device(s) each; "
        "claim default/g-fabric-x shared by 4 members: 1 device(s) once)"
    )
