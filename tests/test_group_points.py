"""The group cycle's framework extension points (scheduler/framework/interface.py; issue #11 item 3).

The gang cycle (scheduler/gang/cycle.py) names no plugin: it reaches them through PodGroupPostFilter (upstream
kubernetes v1.37.2 ``PodGroupPostFilterPlugin``), PlacementGenerate (upstream ``PlacementGeneratePlugin``),
GroupMemberScore, JointAllocation and BindingNote, found with ``isinstance`` over the profile's plugins. Each test
puts a tiny fake plugin implementing one point into a custom registry and profile and shows that the outcome
changes with it, so it fails if the engine stopped calling the point. The in-tree implementations (DefaultPreemption,
GpuTopology, DynamicResources) are checked against the protocols statically and at runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from plugins.defaultpreemption.plugin import DefaultPreemption
from plugins.dra.plugin import DynamicResources
from plugins.topology.plugin import GpuTopology
from scheduler.api.model import Pod, PodGroup
from scheduler.cache.cache import Cache, NodeInfo
from scheduler.cache.ledger import DeviceLedger
from scheduler.config.registry import PluginRef, PluginSpec, default_registry
from scheduler.config.schedulerconfig import SchedulerConfig, default_config
from scheduler.framework.domains import Attempt, Level, Plan
from scheduler.framework.interface import (
    GROUP_PENDING_KEY,
    AllocatedDevices,
    BindingNotePlugin,
    Code,
    CycleState,
    GroupMemberScorePlugin,
    JointAllocationPlugin,
    PlacementGeneratePlugin,
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupScheduling,
    PostFilterResult,
    PreFilterResult,
    Status,
)
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
RACK = "example.com/rack"


def node(name: str, rack: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, RACK: rack}},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def pod(name: str, group: str = "", cpu: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["labels"] = {GROUP_LABEL: group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "dra-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def fleet() -> list[dict[str, Any]]:
    """Four equal nodes, two racks: with equal scores the search prefers n1 (snapshot order)."""
    return [node("n1", "r1"), node("n2", "r1"), node("n3", "r2"), node("n4", "r2")]


def config(add: Mapping[str, Sequence[str]], drop: Sequence[str] = ()) -> SchedulerConfig:
    """The default profile without the plugins ``drop``, with ``add`` (point -> plugin names) put first."""
    prof = default_config().profiles[0]
    points: dict[str, tuple[PluginRef, ...]] = {}
    for point in {*prof.plugins, *add}:
        refs = tuple(r for r in prof.plugins.get(point, ()) if r.name not in drop)
        points[point] = (*(PluginRef(n) for n in add.get(point, ())), *refs)
    return SchedulerConfig(profiles=(replace(prof, plugins=points),))


@dataclass
class Run:
    api: InMemoryAPI
    sched: Scheduler

    def pod(self, name: str) -> dict[str, Any]:
        return next(p for p in self.api.stored("Pod") if p["metadata"]["name"] == name)

    def node_of(self, name: str) -> str:
        return str(self.pod(name)["spec"].get("nodeName", ""))

    def condition(self, name: str) -> dict[str, Any]:
        p = self.pod(name)
        conds = [c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
        return conds[-1] if conds else {}

    def scheduled_events(self) -> dict[str, str]:
        return {e["involvedObject"]["name"]: e["message"] for e in self.api.events if e["reason"] == "Scheduled"}


def run(objs: list[dict[str, Any]], cfg: SchedulerConfig, fakes: Mapping[str, Any]) -> Run:
    """Schedule ``objs`` with ``cfg``, the fake plugin instances ``fakes`` (name -> instance) registered."""
    registry = dict(default_registry())
    points = frozenset({"preFilter", "filter", "postFilter"})

    def factory(inst: Any) -> Callable[[Mapping[str, Any]], Any]:
        return lambda _args: inst

    for name, inst in fakes.items():
        registry[name] = PluginSpec(name, factory(inst), points)

    async def go() -> Run:
        api = InMemoryAPI()
        cache = Cache()
        api.watchers.append(cache.apply)
        clock = FakeClock(1000.0)
        sched = Scheduler(cache, api, cfg, clock=clock, inline_binding=True, registry=registry)
        api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        for kind in ("Node", "PodGroup", "Pod"):
            for o in objs:
                if o["kind"] == kind:
                    api.load(kind, o)
        q = sched.queue
        for _ in range(100):
            info = q.pop()
            if info is None:
                q.flush()
                if q.lengths()["active"]:
                    continue
                wake = q.next_wakeup()
                if wake is None or wake > 1100.0:
                    break
                clock.set(max(wake, clock.now()))
                continue
            await sched.run_once(info)
        return Run(api, sched)

    return asyncio.run(go())


class _Skip:
    """A PreFilter that does nothing (so that the fake is instantiated in the profile)."""

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        return None, Status.skip()


# --- the in-tree implementations --------------------------------------------------------------------------------


def test_in_tree_plugins_implement_the_group_points() -> None:
    preemption: PodGroupPostFilterPlugin = DefaultPreemption({})
    gpu = GpuTopology({})
    topology: PlacementGeneratePlugin = gpu
    scorer: GroupMemberScorePlugin = gpu
    note: BindingNotePlugin = gpu
    dra: JointAllocationPlugin = DynamicResources({})
    for inst, point in (
        (preemption, PodGroupPostFilterPlugin),
        (topology, PlacementGeneratePlugin),
        (scorer, GroupMemberScorePlugin),
        (note, BindingNotePlugin),
        (dra, JointAllocationPlugin),
    ):
        assert isinstance(inst, point)
    fw = Scheduler(Cache(), InMemoryAPI(), default_config()).profiles["dra-scheduler"]
    assert [p.name for p in fw.pod_group_post_filter_plugins()] == ["DefaultPreemption"]
    assert [fw.placement_generator(), fw.group_member_scorer()] == [fw.instances["GpuTopology"]] * 2
    assert fw.joint_allocator() is fw.instances["DynamicResources"]
    assert [p.name for p in fw.binding_note_plugins()] == ["GpuTopology"]


# --- PodGroupPostFilter -------------------------------------------------------------------------------------------


@dataclass
class FakeGroupPostFilter:
    name: ClassVar[str] = "FakeGroupPostFilter"
    calls: list[PodGroupInfo] = field(default_factory=list)
    searched: list[int | None] = field(default_factory=list)

    def post_filter(
        self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        return None, Status.unschedulable("no single-pod help")

    async def pod_group_post_filter(
        self,
        cache: Cache,
        group: PodGroupInfo,
        nominated: Mapping[str, str],
        scheduling: PodGroupScheduling,
        scheduler_name: str,
    ) -> PodGroupPostFilterResult:
        self.calls.append(group)
        got, _ = await scheduling.search(cache)  # the group's own search (still does not fit: nothing changed)
        self.searched.append(None if got is None else len(got))
        nominations = {m.key: "n4" for m in group.unscheduled}
        return PodGroupPostFilterResult(Status(Code.SUCCESS, ("the fake would make room on n4",)), nominations)


def test_pod_group_post_filter_is_asked_when_a_group_does_not_fit() -> None:
    """kubernetes v1.37.2 ``RunPodGroupPostFilterPlugins``: a group that does not fit goes to the PostFilter plugins
    implementing PodGroupPostFilter; their message and nominations reach the members."""
    fake = FakeGroupPostFilter()
    cfg = config({"postFilter": [fake.name]}, drop=["DefaultPreemption"])
    big = [pod(f"m{i}", "g", cpu="6") for i in range(5)]  # 5 x 6 cpu: one per node, 4 nodes
    r = run([*fleet(), podgroup("g", 5), *big], cfg, {fake.name: fake})
    assert fake.calls, "PodGroupPostFilter was not called"
    assert fake.calls[0].pod_group.meta.key == "default/g"
    assert sorted(p.name for p in fake.calls[0].unscheduled) == [f"m{i}" for i in range(5)]
    assert fake.calls[0].group_pods == frozenset(f"default/m{i}" for i in range(5))
    assert fake.searched[0] is None
    cond = r.condition("m0")
    assert cond["status"] == "False" and cond["message"].endswith("; the fake would make room on n4")
    assert r.pod("m0")["status"].get("nominatedNodeName") == "n4"
    assert not any(r.node_of(f"m{i}") for i in range(5))


# --- PlacementGenerate --------------------------------------------------------------------------------------------


class FakeRackPlacement(_Skip):
    """Groups go to rack r2 only (a required level with one domain)."""

    name: ClassVar[str] = "FakeRackPlacement"
    level = Level("rack", RACK)

    def placement_levels(self) -> Sequence[Level]:
        return (self.level,)

    def generate_placements(
        self,
        pod_group: PodGroup | None,
        labels: Mapping[str, Mapping[str, str]],
        slots: Mapping[str, int],
        need: int,
    ) -> tuple[Plan, str]:
        nodes = frozenset(n for n, lab in labels.items() if lab.get(RACK) == "r2")
        return Plan((Attempt(self.level, "r2", nodes, sum(slots[n] for n in nodes)),), ""), ""

    def describe_placement(self, node_labels: Sequence[Mapping[str, str]], members: int) -> str:
        return "somewhere"


def test_placement_generate_decides_the_domains_a_group_is_tried_in() -> None:
    group = [podgroup("g", 2), pod("a", "g"), pod("b", "g")]
    without = run([*fleet(), *group], config({}, drop=["GpuTopology"]), {})
    assert {without.node_of("a"), without.node_of("b")} <= {"n1", "n2"}
    fake = FakeRackPlacement()
    r = run([*fleet(), *group], config({"preFilter": [fake.name]}, drop=["GpuTopology"]), {fake.name: fake})
    assert {r.node_of("a"), r.node_of("b")} <= {"n3", "n4"}
    gs = r.sched.gang.groups["default/g"]
    assert gs.topology == f"placed in rack r2 ({RACK}), the smallest domain with room for 2 members"


# --- GroupMemberScore -----------------------------------------------------------------------------------------------


class FakeMemberScore(_Skip):
    name: ClassVar[str] = "FakeMemberScore"

    def group_score(self, member: Pod, candidate: NodeInfo, used: Sequence[str]) -> int:
        return 1_000_000 if candidate.name == "n4" else 0


def test_group_member_score_ranks_the_nodes_of_single_members() -> None:
    # members that ask for different things are classes of one member each: ranked with group_score
    group = [podgroup("g", 2), pod("a", "g", cpu="1"), pod("b", "g", cpu="2")]
    without = run([*fleet(), *group], config({}, drop=["GpuTopology"]), {})
    assert "n4" not in {without.node_of("a"), without.node_of("b")}
    fake = FakeMemberScore()
    r = run([*fleet(), *group], config({"preFilter": [fake.name]}, drop=["GpuTopology"]), {fake.name: fake})
    assert (r.node_of("a"), r.node_of("b")) == ("n4", "n4")


# --- JointAllocation --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _NoDevices:
    results: tuple[Any, ...] = ()


@dataclass
class FakeJoint:
    """A Filter that lets one pod per node through, unless the members there are "allocated jointly"."""

    name: ClassVar[str] = "FakeJoint"
    joint_calls: int = 0
    pending_seen: list[bool] = field(default_factory=list)

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        self.pending_seen.append(state.read(GROUP_PENDING_KEY) is not None)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        others = [p for p in node.pod_list if p.key != pod.key]
        return Status.unschedulable("one pod per node") if others else Status.ok()

    def joint_resolvable(self, status: Status) -> bool:
        return status.plugin == self.name

    def allocate_jointly(self, states: Sequence[CycleState], node: NodeInfo) -> list[list[_NoDevices]] | None:
        self.joint_calls += 1
        return [[_NoDevices()] for _ in states]

    def member_allocation(self, state: CycleState, node: str) -> list[_NoDevices]:
        return [_NoDevices()]

    def reserve_member_allocation(
        self, state: CycleState, node: str, allocations: Sequence[AllocatedDevices], ledger: DeviceLedger
    ) -> list[tuple[str, AllocatedDevices]]:
        return [(f"claim-of-{id(state)}", a) for a in allocations]

    def member_claims(self, state: CycleState, node: str) -> tuple[list[str], list[tuple[str, AllocatedDevices]]]:
        return [f"claim-of-{id(state)}"], []


def test_joint_allocation_lets_members_share_a_node_a_filter_rejected() -> None:
    one = [node("n1", "r1")]
    group = [podgroup("g", 2), pod("a", "g"), pod("b", "g")]
    fake = FakeJoint()
    drop = ["DynamicResources", "GpuTopology"]
    r = run([*one, *group], config({"preFilter": [fake.name], "filter": [fake.name]}, drop), {fake.name: fake})
    assert fake.joint_calls >= 1
    assert (r.node_of("a"), r.node_of("b")) == ("n1", "n1")
    assert fake.pending_seen and all(fake.pending_seen)  # the group's pending map is in every member's state

    class NotResolvable(FakeJoint):
        def joint_resolvable(self, status: Status) -> bool:
            return False

    fake2 = NotResolvable()
    r2 = run([*one, *group], config({"preFilter": [fake2.name], "filter": [fake2.name]}, drop), {fake2.name: fake2})
    assert fake2.joint_calls == 0
    assert (r2.node_of("a"), r2.node_of("b")) == ("", "")


# --- BindingNote ------------------------------------------------------------------------------------------------


class FakeNote(_Skip):
    name: ClassVar[str] = "FakeNote"

    def binding_note(self, state: CycleState, node: str) -> str:
        return f"noted {node}"


def test_binding_note_is_in_the_scheduled_event_of_pods_and_group_members() -> None:
    objs = [*fleet(), pod("single"), podgroup("g", 2), pod("a", "g"), pod("b", "g")]
    without = run(objs, config({}), {})
    n = without.node_of("single")
    assert without.scheduled_events()["single"] == f"Successfully assigned default/single to {n}"
    fake = FakeNote()
    r = run(objs, config({"preFilter": [fake.name]}), {fake.name: fake})
    events = r.scheduled_events()
    n, a = r.node_of("single"), r.node_of("a")
    assert events["single"] == f"Successfully assigned default/single to {n}: noted {n}"
    assert events["a"] == f"Successfully assigned default/a to {a} (pod group default/g): noted {a}"
