"""Workload-aware preemption (issue #10 item 3): pod groups as preemptors and as victims.

Upstream: kubernetes v1.37.2 ``pkg/scheduler/framework/preemption/podgrouppreemption_test.go``
(TestPodGroupEvaluator_SelectVictimsOnDomain, TestPodGroupEvaluator_Preempt: the cases below keep their names;
upstream's mock filter of "capacity" slots per node is played by CPU: every pod requests 1 CPU, a node of capacity
N has N CPUs), ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go`` (TestSelectVictimsOnNode
"Workload Aware: Atomic preemption of PodGroup", "prefer single pod over podGroup for preemption candidate") and
``pkg/scheduler/framework/preemption/executor_test.go`` (the pod group preemptor's DisruptionTarget message and
Event). The GPU cases go beyond upstream (whose DynamicResources cannot free devices in a dry run, see
``../shared/reference/k8s-1.37-facts.md``): a gang of full-node GPU pods preempts jointly or not at all.

Differences from upstream's unit tests, by construction: the group cycle runs first and preemption only when the
group does not fit (upstream's table calls selectVictimsOnDomain directly, so cases where the group fits without
evictions, e.g. "Complex Mixed", do not apply; where the cycle would succeed with upstream's minCount, the port
raises minCount so that it fails); the placement is the gang cycle's own search.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bench.fleet import RACK_LABEL, scale_fleet
from plugins.defaultpreemption.core import POD, POD_GROUP, Victim
from plugins.defaultpreemption.group import ForkLedger, VictimIndex, admitted_priority
from scheduler.api.dra import DeviceResult
from scheduler.cache.cache import Cache
from scheduler.cache.ledger import DeviceLedger
from scheduler.config.schedulerconfig import default_config
from scheduler.framework.interface import Status
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.claimcontroller import DeletionRecorder, create_pod_claims, release_claims
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import SimulationResult, admit_priorities, simulate

Obj = dict[str, Any]
NS = "default"
LOW, MID, HIGH = 10, 100, 1000  # upstream preemption_test.go lowPriority, midPriority, highPriority
XK8S_LABEL = "scheduling.x-k8s.io/pod-group"
HOSTNAME = "kubernetes.io/hostname"
NODE0, NODE1 = "dgx-h100-00000", "dgx-h100-00001"


# --- objects ----------------------------------------------------------------------------------------------------


def cpu_node(name: str, cpu: int) -> Obj:
    alloc = {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc)}}


def cpu_pod(name: str, prio: int | None = None, on: str | None = None, group: str | None = None,
            start: int | None = None, labels: Mapping[str, str] | None = None, cpu: str = "1", **spec: Any) -> Obj:
    s: Obj = {"schedulerName": "dra-scheduler",
              "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}], **spec}
    if prio is not None:
        s["priority"] = prio
    if group:
        s["schedulingGroup"] = {"podGroupName": group}
    meta: Obj = {"name": name, "namespace": NS}
    if labels:
        meta["labels"] = dict(labels)
    o: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": s}
    if on:
        s["nodeName"] = on
        o["status"] = {"phase": "Running"}
        if start is not None:
            o["status"]["startTime"] = f"1970-01-01T00:00:{start:02d}Z"
    return o


def podgroup(name: str, prio: int | None = None, mode: str | None = None, min_count: int | None = 1,
             **spec: Any) -> Obj:
    """A scheduling.k8s.io/v1beta1 PodGroup (``min_count`` None: the basic policy)."""
    sp: Obj = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}},
               **spec}
    if prio is not None:
        sp["priority"] = prio
    if mode:
        sp["disruptionMode"] = {mode: {}}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": sp}


def xk8s_group(name: str, min_member: int) -> Obj:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member}}


def pdb(match: Mapping[str, str], allowed: int) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb", "namespace": NS},
            "spec": {"selector": {"matchLabels": dict(match)}}, "status": {"disruptionsAllowed": allowed}}


def priority_class(name: str, value: int, default: bool = False) -> Obj:
    o: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
              "value": value}
    if default:
        o["globalDefault"] = True
    return o


CLASSES = [priority_class("low", 10), priority_class("mid", 500), priority_class("high", 1000),
           priority_class("top", 5000)]


def template(name: str, count: int) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}}}


def gpu_pod(name: str, prio: str, tmpl: str, group: str | None = None, xk8s: str | None = None,
            labels: Mapping[str, str] | None = None, **more: Any) -> Obj:
    spec: Obj = {"schedulerName": "dra-scheduler", "priorityClassName": prio,
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tmpl}],
                 "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}], **more}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    meta: Obj = {"name": name, "namespace": NS, "labels": dict(labels or {})}
    if xk8s:
        meta["labels"][XK8S_LABEL] = xk8s
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def run(objs: Sequence[Obj]) -> SimulationResult:
    return asyncio.run(simulate(copy.deepcopy(list(objs))))


def then(first: SimulationResult, base: Sequence[Obj], more: Sequence[Obj]) -> SimulationResult:
    """A second run on the first one's output (pods and claims as the API server holds them)."""
    kept = [o for o in first.items if o["kind"] in ("Pod", "ResourceClaim", "PodGroup")]
    return run([*base, *kept, *more])


def by_name(items: Sequence[Obj], kind: str = "Pod") -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == kind}


def deleted_pods(res: SimulationResult) -> set[str]:
    return {o["metadata"]["name"] for o in res.deleted if o["kind"] == "Pod"}


def nodes_of(res: SimulationResult) -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in by_name(res.items).items() if p["spec"].get("nodeName")}


def devices_of(c: Obj) -> list[tuple[str, str, str]]:
    alloc = (c.get("status") or {}).get("allocation")
    if not alloc:
        return []
    return [(r["driver"], r["pool"], r["device"]) for r in alloc["devices"]["results"] if not r.get("adminAccess")]


def assert_no_device_twice(items: Sequence[Obj]) -> None:
    counts = Counter(d for c in items if c["kind"] == "ResourceClaim" for d in devices_of(c))
    assert not [d for d, n in counts.items() if n > 1], counts


def condition(o: Obj, ctype: str) -> Obj | None:
    return next((c for c in (o.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


# --- upstream's TestPodGroupEvaluator_SelectVictimsOnDomain, on the whole scheduler ------------------------------


def _terminating(p: Obj) -> Obj:
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    return p


@dataclass
class Case:
    name: str
    capacity: dict[str, int]  # node -> CPUs (upstream's nodeCapacities)
    pods: list[Obj]
    members: int = 1
    min_count: int | None = 1  # the preemptor's gang minCount (None: basic)
    prio: int = HIGH  # the preemptor PodGroup's priority
    groups: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    victims: set[str] = field(default_factory=set)
    unresolvable: bool = False  # "No preemption victims found for incoming preemptor"
    preemptor_spec: dict[str, Any] = field(default_factory=dict)
    member_spec: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("Priority: mix of no groups and pod groups", {"node1": 2},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node1", "pg1")],
         groups=[podgroup("pg1", LOW, "single")], victims={"p1"}),
    Case("Priority: StartTime of pods from same group with disruption mode single", {"node1": 2},
         [cpu_pod("p1", LOW, "node1", "pg1", start=1), cpu_pod("p2", LOW, "node1", "pg1", start=0)],
         groups=[podgroup("pg1", LOW, "single")], victims={"p1"}),
    Case("Pod group with disruption mode group not reprieved", {"node1": 1, "node2": 1},
         [cpu_pod("p1", LOW, "node1", "pg1"), cpu_pod("p2", LOW, "node2", "pg1")],
         groups=[podgroup("pg1", LOW, "all")], victims={"p1", "p2"}),
    Case("PDB: Mixed groups", {"node1": 2},
         [cpu_pod("victim-pdb", LOW, "node1", "pg1", labels={"app": "foo"}),
          cpu_pod("victim-no-pdb", LOW, "node1", "pg1")],
         pdbs=[pdb({"app": "foo"}, 0)], victims={"victim-no-pdb"}),
    Case("PodGroup preemptor with PreemptLowerPriority preemption policy performs preemption",
         {"node1": 1, "node2": 1, "node3": 1},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node2", "pg1"), cpu_pod("p3", LOW, "node3", "pg2")],
         victims={"p1"}),
    Case("PodGroup preemptor with PreemptLowerPriority preemption policy performs preemption, ignoring member pod "
         "preemption policy", {"node1": 1, "node2": 1, "node3": 1},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node2", "pg1"), cpu_pod("p3", LOW, "node3", "pg2")],
         preemptor_spec={"preemptionPolicy": "PreemptLowerPriority"}, member_spec={"preemptionPolicy": "Never"},
         victims={"p1"}),
    Case("Preempt single lower priority pod", {"node1": 1}, [cpu_pod("p1", LOW, "node1")], victims={"p1"}),
    Case("Priority: Prefer lower priority victim", {"node1": 2},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", MID, "node1"), cpu_pod("p3", HIGH, "node1")],
         victims={"p1", "p2"}),
    Case("Efficiency: Preempt minimum number of victims", {"node1": 3},
         [cpu_pod(f"p{i}", LOW, "node1") for i in range(1, 5)], victims={"p3", "p4"}),
    Case("PDB: Prefer non-violating victim", {"node1": 2},
         [cpu_pod("victim-pdb", LOW, "node1", labels={"app": "foo"}), cpu_pod("victim-no-pdb", LOW, "node1")],
         pdbs=[pdb({"app": "foo"}, 0)], victims={"victim-no-pdb"}),
    Case("PDB: Prefer removing non-violating victim over lower priority violating victim", {"node1": 2},
         [cpu_pod("victim-pdb", LOW, "node1", labels={"app": "foo"}), cpu_pod("victim-no-pdb", MID, "node1")],
         pdbs=[pdb({"app": "foo"}, 0)], victims={"victim-no-pdb"}),
    Case("PodGroup preemptor with PreemptLowerPriority preemption policy performs preemption with PodGroup victims",
         {"node1": 1, "node2": 1, "node3": 1},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node2", "pg1"), cpu_pod("p3", LOW, "node3", "pg2")],
         groups=[podgroup("pg1", LOW, "single"), podgroup("pg2", LOW, "single")], victims={"p1"}),
    Case("PDB: Prefer lower priority pod for preemption, when preemption without pdb violation is not possible",
         {"node1": 2},
         [cpu_pod("p1", LOW, "node1", labels={"app": "foo"}), cpu_pod("p2", MID, "node1", labels={"app": "foo"})],
         pdbs=[pdb({"app": "foo"}, 0)], victims={"p1"}),
    Case("PodGroup: Prefer single pod over podGroup for preemption candidate", {"node1": 3},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("g1-1", LOW, "node1", "pg1"), cpu_pod("g1-2", LOW, "node1", "pg1")],
         groups=[podgroup("pg1", LOW, "all")], victims={"p1"}),
    Case("PodGroup: Preempt group as a whole on single node", {"node1": 3},
         [cpu_pod("g1-1", LOW, "node1", "pg1"), cpu_pod("g1-2", LOW, "node1", "pg1"), cpu_pod("p1", MID, "node1")],
         groups=[podgroup("pg1", LOW, "all")], victims={"g1-1", "g1-2"}),
    Case("PDB: Unit violation if any member violates", {"node1": 3},
         [cpu_pod("g1-1", LOW, "node1", "pg1", labels={"app": "foo"}), cpu_pod("g1-2", LOW, "node1", "pg1"),
          cpu_pod("p1", LOW, "node1")],
         groups=[podgroup("pg1", LOW, "all")], pdbs=[pdb({"app": "foo"}, 0)], victims={"p1"}),
    Case("Failure: Cannot preempt the victim with higher priority", {"node1": 1}, [cpu_pod("p1", HIGH, "node1")],
         prio=MID, unresolvable=True),
    Case("Failure: Cannot preempt the victim with equal priority", {"node1": 1}, [cpu_pod("p1", MID, "node1")],
         prio=MID, unresolvable=True),
    Case("Priority divergence: candidate victim PodGroup has lower priority than the Pods from that group",
         {"node1": 1, "node2": 1},
         [cpu_pod("p1", HIGH, "node1", "pg1"), cpu_pod("p2", HIGH, "node2", "pg1")],
         groups=[podgroup("pg1", MID, "all")], victims={"p1", "p2"}),
    Case("Priority divergence: candidate victim PodGroup has higher priority than the Pods from that group",
         {"node1": 1, "node2": 1},
         [cpu_pod("p1", LOW, "node1", "pg1"), cpu_pod("p2", LOW, "node2", "pg1")],
         groups=[podgroup("pg1", MID, "all")], prio=MID, unresolvable=True),
    Case("Gang scheduling: schedule as many pods as possible without preempting higher priority pods, but still "
         "more than minCount", {"node1": 1, "node2": 1, "node3": 1, "node4": 1},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node2"), cpu_pod("p3", HIGH, "node3"),
          cpu_pod("p4", HIGH, "node4")],
         members=3, victims={"p1", "p2"}),
    Case("Gang scheduling: do not reprieve victim pod group of lower priority", {"node1": 1, "node2": 1, "node3": 1},
         [cpu_pod("v1", MID, "node1", "victim-pg"), cpu_pod("v2", MID, "node2", "victim-pg"),
          cpu_pod("v3", LOW, "node3")],
         groups=[podgroup("victim-pg", MID, "all")], members=3, victims={"v1", "v2", "v3"}),
    Case("Gang scheduling: preempt a pod group victim but do not schedule full pod group",
         {"node1": 1, "node2": 1, "node3": 1, "node4": 1},
         [cpu_pod("v1", MID, "node1", "victim-pg"), cpu_pod("v2", MID, "node2", "victim-pg"),
          cpu_pod("v3", HIGH, "node3", "victim-pg2"), cpu_pod("v4", HIGH, "node4", "victim-pg2")],
         groups=[podgroup("victim-pg", MID, "all", 2), podgroup("victim-pg2", HIGH, "all", 2)], members=3,
         victims={"v1", "v2"}),
    Case("Basic scheduling: schedule as many pods as possible without preempting higher priority pods",
         {"node1": 1, "node2": 1, "node3": 1, "node4": 1},
         [cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node2"), cpu_pod("p3", HIGH, "node3"),
          cpu_pod("p4", HIGH, "node4")],
         members=3, min_count=None, victims={"p1", "p2"}),
    Case("Basic scheduling: do not reprieve victim pod group of lower priority", {"node1": 1, "node2": 1, "node3": 1},
         [cpu_pod("v1", MID, "node1", "victim-pg"), cpu_pod("v2", MID, "node2", "victim-pg"),
          cpu_pod("v3", LOW, "node3")],
         groups=[podgroup("victim-pg", MID, "all")], members=3, min_count=None, victims={"v1", "v2", "v3"}),
    # TestPodGroupEvaluator_SelectVictimsOnDomain "Preemptor group is eligible if nominated node has terminating pod
    # belonging to a pod group of higher priority" (with and without disruptionMode): minCount 2 so the cycle fails
    *(
        Case(f"Preemptor group is eligible if nominated node has terminating pod belonging to a pod group of higher "
             f"priority ({mode})", {"node1": 2, "node2": 1},
             [_terminating(cpu_pod("victim", LOW, "node1", "victim-pg")), cpu_pod("other-victim", LOW, "node1")],
             groups=[podgroup("victim-pg", HIGH, mode)], prio=MID, members=2, min_count=2,
             victims={"other-victim"})
        for mode in ("all", "single")
    ),
]


def case_objects(c: Case) -> list[Obj]:
    objs: list[Obj] = [cpu_node(n, cap) for n, cap in c.capacity.items()]
    objs += copy.deepcopy(c.pods) + copy.deepcopy(c.groups) + copy.deepcopy(c.pdbs)
    objs.append(podgroup("preemptor-pg", c.prio, min_count=c.min_count, **c.preemptor_spec))
    members = [cpu_pod(f"p-{chr(ord('a') + i)}", c.prio, None, "preemptor-pg", **c.member_spec)
               for i in range(c.members)]
    if c.name.startswith("Preemptor group is eligible"):
        members[1]["status"] = {"nominatedNodeName": "node1"}
    return objs + members


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_select_victims_on_domain(case: Case) -> None:
    res = run(case_objects(case))
    pods = by_name(res.items)
    members = [n for n in pods if n.startswith("p-")]
    placed = [n for n in members if pods[n]["spec"].get("nodeName")]
    msg = condition(pods[members[0]], "PodScheduled")
    if case.unresolvable:
        assert deleted_pods(res) == set() and placed == []
        assert msg is not None and "pod group preemption: No preemption victims found for incoming preemptor" in (
            msg["message"])
        return
    assert deleted_pods(res) == case.victims
    assert len(placed) >= (case.min_count or 1)
    # a victim group with disruptionMode all gets DisruptionTarget (scheduler/gang/cycle.py, from its members'
    # conditions)
    for g in case.groups:
        name = g["metadata"]["name"]
        hit = any(p["spec"].get("schedulingGroup", {}).get("podGroupName") == name
                  and (p["metadata"]["name"] in case.victims or condition(p, "DisruptionTarget"))
                  for p in case.pods)
        dt = condition(by_name(res.items, "PodGroup")[name], "DisruptionTarget")
        if "all" in g["spec"].get("disruptionMode", {}) and hit:
            assert dt is not None and (dt["status"], dt["reason"]) == ("True", "PreemptionByScheduler"), name
        elif not hit:
            assert dt is None, name
    failed = next(e for e in res.events if e["reason"] == "FailedScheduling")
    assert failed["message"].endswith(
        f"pod group preemption: found a placement for podgroup, preempting {len(case.victims)} victims")


def test_preempt_never_is_not_eligible() -> None:
    """TestPodGroupEvaluator_Preempt "PodGroup preemptor with PreemptNever policy does not perform preemption" (and a
    member with preemptionPolicy Never when the PodGroup has none: resolvePreemptionPolicy with the gate off)."""
    base = [cpu_node(f"node{i}", 1) for i in (1, 2, 3)] + [
        cpu_pod("p1", LOW, "node1"), cpu_pod("p2", LOW, "node2", "pg1"), cpu_pod("p3", LOW, "node3", "pg2")]
    for pg_spec, member_spec in (({"preemptionPolicy": "Never"}, {}), ({}, {"preemptionPolicy": "Never"})):
        objs = [*base, podgroup("preemptor-pg", HIGH, min_count=2, **pg_spec),
                cpu_pod("p-1", HIGH, None, "preemptor-pg"), cpu_pod("p-2", HIGH, None, "preemptor-pg", **member_spec)]
        res = run(objs)
        assert deleted_pods(res) == set() and not nodes_of(res).keys() & {"p-1", "p-2"}
        msg = condition(by_name(res.items)["p-1"], "PodScheduled")
        assert msg is not None and msg["message"].endswith(
            "pod group preemption: not eligible due to preemptionPolicy=Never.")


def test_ongoing_preemption_on_a_nominated_node_evicts_nothing_more() -> None:
    """TestPodGroupEvaluator_Preempt "Preemptor group returns success with current nominating infos if member has
    nominated node with terminating pods" (and "... belonging to a pod group of lower priority", with disruptionMode
    all and single: the pod's own priority is high, its group's low): the nominations stay, nothing more is
    evicted, although a lower-priority pod elsewhere could be."""
    for victim_group in (None, "all", "single"):
        victim = _terminating(cpu_pod("victim", HIGH if victim_group else LOW, "node1",
                                      "victim-pg" if victim_group else None))
        p2 = cpu_pod("p2", HIGH, None, "preemptor-pg")
        p2["status"] = {"nominatedNodeName": "node1"}
        objs = [cpu_node("node1", 1), cpu_node("node2", 1), cpu_pod("other", LOW, "node2"), victim,
                podgroup("preemptor-pg", HIGH, min_count=2), cpu_pod("p1", HIGH, None, "preemptor-pg"), p2]
        if victim_group:
            objs.append(podgroup("victim-pg", LOW, victim_group))
        res = run(objs)
        pods = by_name(res.items)
        assert deleted_pods(res) == set(), victim_group
        assert pods["other"]["spec"]["nodeName"] == "node2"
        assert pods["p2"]["status"].get("nominatedNodeName") == "node1"
        msg = condition(pods["p1"], "PodScheduled")
        assert msg is not None and "pod group preemption: ongoing preemption on nominated nodes" in msg["message"]
    # control: the terminating pod is not a preemption of lower priority (its group is high): "other" is evicted
    victim = _terminating(cpu_pod("victim", LOW, "node1", "victim-pg"))
    p2 = cpu_pod("p2", MID, None, "preemptor-pg")
    p2["status"] = {"nominatedNodeName": "node1"}
    res = run([cpu_node("node1", 1), cpu_node("node2", 1), cpu_pod("other", LOW, "node2"), victim,
               podgroup("victim-pg", HIGH, "all"), podgroup("preemptor-pg", MID, min_count=1),
               cpu_pod("p1", MID, None, "preemptor-pg"), p2])
    assert deleted_pods(res) == {"other"}


# --- GPU gangs -------------------------------------------------------------------------------------------------


def gang(kind: str, n: int, prio: str, tmpl: str = "gpus-8", min_count: int | None = None, name: str = "g",
         **spec: Any) -> list[Obj]:
    """A preemptor gang of ``n`` members: ``kind`` "x-k8s" (scheduler-plugins PodGroup) or "v1beta1" (the PodGroup
    gets the priority class too)."""
    m = min_count or n
    if kind == "x-k8s":
        return [xk8s_group(name, m), *(gpu_pod(f"{name}-{i}", prio, tmpl, xk8s=name) for i in range(n))]
    return [podgroup(name, None, min_count=m, priorityClassName=prio, **spec),
            *(gpu_pod(f"{name}-{i}", prio, tmpl, group=name) for i in range(n))]


def gpu_base(nodes: int, **kw: Any) -> list[Obj]:
    return [*scale_fleet(nodes, gpus_per_node=8, **kw), template("gpus-8", 8), template("gpus-4", 4), *CLASSES]


@pytest.mark.parametrize("kind", ["x-k8s", "v1beta1"])
def test_gang_of_four_full_node_gpu_pods_preempts_four_low_pods_jointly(kind: str) -> None:
    """4 nodes x 8 GPUs, each full with one low-priority 8-GPU pod; a high-priority gang of 4 x 8-GPU pods: no single
    member fits, the group as a whole preempts the 4 pods (upstream: "Gang scheduling" cases of
    TestPodGroupEvaluator_SelectVictimsOnDomain; with devices: beyond upstream), then binds whole."""
    base = gpu_base(4)
    first = run([*base, *(gpu_pod(f"low{i}", "low", "gpus-8") for i in range(4))])
    assert len(nodes_of(first)) == 4
    res = then(first, base, gang(kind, 4, "high"))
    pods = by_name(res.items)
    assert deleted_pods(res) == {f"low{i}" for i in range(4)}
    placed = nodes_of(res)
    assert sorted(placed) == [f"g-{i}" for i in range(4)] and len(set(placed.values())) == 4
    assert_no_device_twice(res.items)
    assert res.summary["preempted"] == 4 and res.summary["scheduled"] == 4
    victims = [o for o in res.deleted if o["kind"] == "Pod"]
    for v in victims:
        dt = condition(v, "DisruptionTarget")
        assert dt is not None and (dt["status"], dt["reason"]) == ("True", "PreemptionByScheduler")
        assert dt["message"] == "dra-scheduler: preempting to accommodate a higher priority podgroup"
        assert v["metadata"]["deletionTimestamp"]
    group_uid = by_name(res.items, "PodGroup")["g"]["metadata"]["uid"]
    preempted = [e for e in res.events if e["reason"] == "Preempted"]
    assert len(preempted) == 4 and all(e["message"] == f"Preempted by podgroup {group_uid} on node cluster"
                                       for e in preempted)
    failed = [e for e in res.events if e["reason"] == "FailedScheduling"]
    assert len(failed) == 4 and all(
        e["message"].endswith("pod group preemption: found a placement for podgroup, preempting 4 victims")
        for e in failed)
    # the victims' claims were released (simulate plays kube-controller-manager) and reused by the gang
    assert sum(1 for c in res.items if c["kind"] == "ResourceClaim") == 4
    assert all(len(devices_of(c)) == 8 for c in res.items if c["kind"] == "ResourceClaim")
    assert all(pods[f"g-{i}"]["spec"]["nodeName"] for i in range(4))


@pytest.mark.parametrize("kind", ["x-k8s", "v1beta1"])
def test_gang_that_would_still_not_fit_evicts_nobody(kind: str) -> None:
    """Never pointless (issue #10 item 5): one node holds a pod of higher priority than the gang; with every
    lower-priority pod gone only 3 nodes are free for 4 full-node members: nothing is evicted."""
    base = gpu_base(4)
    first = run([*base, *(gpu_pod(f"low{i}", "low", "gpus-8") for i in range(3)), gpu_pod("boss", "top", "gpus-8")])
    res = then(first, base, gang(kind, 4, "high"))
    assert res.deleted == [] and set(nodes_of(res)) == {"low0", "low1", "low2", "boss"}
    assert_no_device_twice(res.items)
    msg = condition(by_name(res.items)["g-0"], "PodScheduled")
    assert msg is not None and msg["reason"] == "Unschedulable"
    assert "pod group preemption: Preemption is not helpful for scheduling: the group does not fit even with all 3 " \
           "lower-priority victim(s) evicted" in msg["message"]


def test_gang_evicts_the_cheapest_victims() -> None:
    """Two full nodes hold "low" pods, two hold "mid" pods; a "high" gang of 2 full-node members preempts the two
    low-priority pods only (fewest, lowest-priority victims: upstream's reprieve order; the placement is searched
    with the least important victims removed first)."""
    base = gpu_base(4)
    first = run([*base, gpu_pod("mid0", "mid", "gpus-8"), gpu_pod("low0", "low", "gpus-8"),
                 gpu_pod("mid1", "mid", "gpus-8"), gpu_pod("low1", "low", "gpus-8")])
    low_nodes = {nodes_of(first)[n] for n in ("low0", "low1")}
    res = then(first, base, gang("v1beta1", 2, "high"))
    assert deleted_pods(res) == {"low0", "low1"}
    assert {nodes_of(res)[f"g-{i}"] for i in range(2)} == low_nodes
    assert_no_device_twice(res.items)


def test_gang_evicts_pdb_protected_pods_last() -> None:
    """FilterVictimsWithPDBViolation: among equal victims, those whose eviction would violate a budget are kept."""
    base = gpu_base(4)
    first = run([*base, *(gpu_pod(f"low{i}", "low", "gpus-8", labels={"app": "db" if i < 2 else "web"})
                          for i in range(4))])
    res = then(first, [*base, pdb({"app": "db"}, 0)], gang("v1beta1", 2, "high"))
    assert deleted_pods(res) == {"low2", "low3"}
    assert_no_device_twice(res.items)


def test_gang_preempts_only_inside_its_topology_domain() -> None:
    """schedulingConstraints.topology (rack): rack-0 has a cheap victim but a node the gang cannot take; the cheaper
    victim set {rack-0's low pod, one rack-1 pod} would split the gang across racks, so the gang takes rack-1 whole
    and the low-priority pod in rack-0 survives."""
    base = gpu_base(4, nodes_per_rack=2)
    first = run([*base, *(gpu_pod(name, prio, "gpus-8", nodeSelector={HOSTNAME: f"dgx-h100-0000{i}"})
                          for i, (name, prio) in enumerate([("cheap", "low"), ("boss", "top"), ("a", "mid"),
                                                            ("b", "mid")]))])
    where = nodes_of(first)
    assert where == {"cheap": NODE0, "boss": NODE1, "a": "dgx-h100-00002", "b": "dgx-h100-00003"}  # racks 0, 1
    res = then(first, base, gang("v1beta1", 2, "high",
                                 schedulingConstraints={"topology": [{"key": RACK_LABEL}]}))
    assert deleted_pods(res) == {"a", "b"}
    assert {nodes_of(res)["g-0"], nodes_of(res)["g-1"]} == {where["a"], where["b"]}
    assert nodes_of(res)["cheap"] == where["cheap"]
    assert_no_device_twice(res.items)


def test_gang_uses_free_devices_plus_the_fewest_victims() -> None:
    """Half a node is free, half is held by a low-priority 4-GPU pod, a "mid" pod holds the other node: a gang of two
    4-GPU members preempts the low pod only and uses the free GPUs with the freed ones (the dry run counts both)."""
    base = gpu_base(2)
    first = run([*base, gpu_pod("a", "low", "gpus-4", nodeSelector={HOSTNAME: NODE0}),
                 gpu_pod("b", "mid", "gpus-8", nodeSelector={HOSTNAME: NODE1})])
    assert set(nodes_of(first)) == {"a", "b"}
    res = then(first, base, [xk8s_group("g", 2), gpu_pod("g-0", "high", "gpus-4", xk8s="g"),
                             gpu_pod("g-1", "high", "gpus-4", xk8s="g")])
    assert deleted_pods(res) == {"a"}
    assert nodes_of(res)["g-0"] == nodes_of(res)["g-1"] == NODE0
    assert_no_device_twice(res.items)


# --- disruptionMode: all victims for a single-pod preemptor ------------------------------------------------------


def test_single_pod_preempting_a_member_of_an_all_group_evicts_the_whole_group() -> None:
    """default_preemption_test.go TestSelectVictimsOnNode "Workload Aware: Atomic preemption of PodGroup": the group
    spans two nodes; evicting its member on the chosen node evicts the member on the other node too (removed from
    the dry run through the PreFilter extensions); the PodGroup gets DisruptionTarget."""
    objs = [cpu_node("n0", 4), cpu_node("n1", 4), podgroup("g", LOW, "all", 2),
            cpu_pod("m0", LOW, "n0", "g", cpu="3"), cpu_pod("m1", LOW, "n1", "g", cpu="3"),
            cpu_pod("boss", HIGH, cpu="3")]
    res = run(objs)
    assert deleted_pods(res) == {"m0", "m1"}
    assert nodes_of(res)["boss"] in ("n0", "n1")
    failed = next(e for e in res.events if e["reason"] == "FailedScheduling")
    assert failed["message"].endswith("preempting 2 victims")
    dt = condition(by_name(res.items, "PodGroup")["g"], "DisruptionTarget")
    assert dt is not None and (dt["status"], dt["reason"]) == ("True", "PreemptionByScheduler")
    assert "disruptionMode All" in dt["message"]


def test_single_pod_prefers_a_cheaper_victim_over_a_whole_group() -> None:
    """"prefer single pod over podGroup for preemption candidate": a node whose only victim is one pod beats the
    nodes where the victim is a 2-pod group of the same priority (fewer victims, lower sum of priorities)."""
    objs = [cpu_node("n0", 4), cpu_node("n1", 4), cpu_node("n2", 4), podgroup("g", LOW, "all", 2),
            cpu_pod("m0", LOW, "n0", "g", cpu="3"), cpu_pod("m1", LOW, "n1", "g", cpu="3"),
            cpu_pod("single", LOW, "n2", cpu="3"), cpu_pod("boss", HIGH, cpu="3")]
    res = run(objs)
    assert deleted_pods(res) == {"single"} and nodes_of(res)["boss"] == "n2"
    assert condition(by_name(res.items, "PodGroup")["g"], "DisruptionTarget") is None
    # the group's cost counts all its members' priorities: a lower-priority group still loses to a single pod of
    # higher priority only on upstream's first criterion (highest victim priority)
    objs2 = copy.deepcopy(objs)
    objs2[6]["spec"]["priority"] = MID
    res2 = run(objs2)
    assert deleted_pods(res2) == {"m0", "m1"}


def test_single_mode_group_member_is_evicted_alone_with_the_group_priority() -> None:
    """``NewPodVictim``: a member of a disruptionMode single (or unset) group is a victim on its own, with the
    PodGroup's priority (GetPodPriority), not its own."""
    objs = [cpu_node("n0", 4), podgroup("g", LOW, None, 1), cpu_pod("m0", HIGH, "n0", "g", cpu="3"),
            cpu_pod("boss", MID, cpu="3")]
    res = run(objs)
    assert deleted_pods(res) == {"m0"} and nodes_of(res)["boss"] == "n0"


def test_podgroup_priority_from_class_and_global_default() -> None:
    """PodGroup priority as the Priority admission plugin sets it: ``spec.priority``, the class of
    ``spec.priorityClassName``, the ``globalDefault`` class, else 0 (upstream PodGroupPriority)."""
    classes = {"a": {"value": 7}, "d": {"value": 3, "globalDefault": True}}
    assert admitted_priority({"priority": 5, "priorityClassName": "a"}, classes) == 5
    assert admitted_priority({"priorityClassName": "a"}, classes) == 7
    assert admitted_priority({"priorityClassName": "system-node-critical"}, classes) == 2_000_001_000
    assert admitted_priority({}, classes) == 3
    assert admitted_priority({}, {}) == 0


def test_victim_index_units() -> None:
    """getCrossNodesVictims: one victim per disruptionMode-all group (all its scheduled pods, on any node), one per
    other pod; kinds rank groups above pods (MoreImportantVictim)."""
    api = InMemoryAPI()
    cache = Cache()
    api.watchers.append(cache.apply)
    for o in [cpu_node("n0", 8), cpu_node("n1", 8), podgroup("all", 5, "all"), podgroup("one", 6, "single"),
              cpu_pod("a0", 1, "n0", "all"), cpu_pod("a1", 1, "n1", "all"), cpu_pod("s0", 1, "n0", "one"),
              cpu_pod("x", 9, "n1")]:
        api.load(o["kind"], o)
    idx = VictimIndex(cache.snapshot())
    units = idx.cluster()
    by = {tuple(sorted(p.name for p in v.pods)): v for v in units}
    assert set(by) == {("a0", "a1"), ("s0",), ("x",)}
    assert (by[("a0", "a1")].priority, by[("a0", "a1")].kind) == (5, POD_GROUP)
    assert (by[("s0",)].priority, by[("s0",)].kind) == (6, POD_GROUP)
    assert (by[("x",)].priority, by[("x",)].kind) == (9, POD)
    n0 = cache.snapshot().node_map["n0"]
    assert [tuple(p.name for p in v.pods) for v in idx.on_node(n0)] == [("a0", "a1"), ("s0",)]
    assert isinstance(units[0], Victim)


def test_fork_ledger_revisions_never_meet_the_real_ledgers() -> None:
    """The dry run's ledger copy: hiding a claim frees its devices in the copy only, and every revision it reports
    is its own (negative, far from other copies), so no cache keyed by revision mixes the two."""
    base = DeviceLedger()
    base.set_pool_nodes({("d", "p0"): "n0"})
    res = (DeviceResult("r", "d", "p0", "dev0", False, "", {}),)
    base.observe_claim("u1", "ns/c1", res, "5")
    fork = ForkLedger(base)
    assert fork.is_allocated(("d", "p0", "dev0"))
    fork.hide("u1")
    assert not fork.is_allocated(("d", "p0", "dev0")) and base.is_allocated(("d", "p0", "dev0"))
    assert fork.node_revision("n0") < 0 and fork.pool_revision(("d", "p0")) < 0 and fork.revision < 0
    assert fork.node_revision("never-seen") < 0
    other = ForkLedger(base)
    assert abs(other.node_revision("n0") - fork.node_revision("n0")) > 1 << 30
    fork.show("u1")
    assert fork.is_allocated(("d", "p0", "dev0")) and fork.use_of("u1") is not None
    fork.reserve("u2", "ns/c2", (DeviceResult("r", "d", "p0", "dev1", False, "", {}),))
    assert not base.is_allocated(("d", "p0", "dev1")) and base.node_revision("n0") >= 0


# --- write order and the retry -----------------------------------------------------------------------------------


class Live:
    """The scheduler loop over the in-memory API with kube-controller-manager's claim release after deletions (as
    simulate), checking after every attempt: no device allocated twice, and no gang partial (0 or >= minMember /
    minCount bound) unless it lost members to preemption in single mode (upstream evicts such members alone) or is
    a scheduling.x-k8s.io group (no disruption mode; ARCHITECTURE §3.3: members deleted after binding)."""

    def __init__(self, objs: Sequence[Obj]) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.clock = FakeClock(1000.0)
        self.sched = Scheduler(self.cache, self.api, default_config(), clock=self.clock, inline_binding=True)
        self.api.graceful_pod_deletion = True
        self.deletions = DeletionRecorder()
        self.api.watchers.append(self.deletions)
        self.log: list[tuple[str, str, str, Obj]] = []
        self.api.watchers.append(lambda kind, event, obj: self.log.append(
            (kind, event, obj["metadata"]["name"], copy.deepcopy(obj))))
        self.api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        self.add(objs)

    def add(self, objs: Sequence[Obj]) -> None:
        """Load objects, pods admitted as the API server's Priority admission plugin would (their class's value)."""
        objs = copy.deepcopy(list(objs))
        admit_priorities([*CLASSES, *objs])
        order = ["PriorityClass", "Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim",
                 "PodDisruptionBudget", "PodGroup", "Pod"]
        for kind in order:
            for o in objs:
                if o["kind"] == kind:
                    self.api.load(kind, o)

    async def run(self, rounds: int = 300) -> None:
        for p in self.api.list("Pod"):
            await create_pod_claims(self.api, p)
        q = self.sched.queue
        for _ in range(rounds):
            info = q.pop()
            if info is None:
                q.flush()
                if q.lengths()["active"]:
                    continue
                wake = q.next_wakeup()
                if wake is None:
                    return
                self.clock.set(max(wake, self.clock.now()))
                continue
            await self.sched.run_once(info)
            if self.deletions.pods:
                await release_claims(self.api, self.deletions)
            self.check()

    def check(self) -> None:
        devs = [d for c in self.api.stored("ResourceClaim") for d in devices_of(c)]
        assert len(devs) == len(set(devs)), "a device is allocated twice"
        preempted = Counter[str]()
        for o in self.deletions.deleted:
            if o["kind"] == "Pod" and o["spec"].get("nodeName") and condition(o, "DisruptionTarget"):
                g = _group_of(o)
                if g:
                    preempted[g] += 1
        bound = Counter[str]()
        for p in self.api.stored("Pod"):
            g = _group_of(p)
            if g and p["spec"].get("nodeName"):
                bound[g] += 1
        for g in self.api.stored("PodGroup"):
            name = g["metadata"]["name"]
            spec = g["spec"]
            if "minMember" in spec:
                need, partial_ok = spec["minMember"], preempted[name] > 0
            else:
                gang_policy = spec["schedulingPolicy"].get("gang")
                if not gang_policy:
                    continue
                need = gang_policy["minCount"]
                partial_ok = preempted[name] > 0 and "all" not in (spec.get("disruptionMode") or {})
            n = bound[name]
            assert n == 0 or n >= need or partial_ok, (name, n, need)


def _group_of(p: Obj) -> str:
    return ((p["metadata"].get("labels") or {}).get(XK8S_LABEL)
            or ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or "")


def test_members_are_nominated_before_victims_are_touched_and_bind_after() -> None:
    """ARCHITECTURE §4: the preemptor's nominatedNodeName first (each member its node: upstream NominatingInfos per
    pod), then each victim DisruptionTarget then DELETE; the group is retried once the victims are gone and binds
    on the nominated nodes."""

    async def go() -> Live:
        base = gpu_base(2)
        live = Live([*base, gpu_pod("low0", "low", "gpus-8"), gpu_pod("low1", "low", "gpus-8")])
        await live.run()
        assert all(p["spec"].get("nodeName") for p in live.api.list("Pod"))
        live.log.clear()
        live.add(gang("v1beta1", 2, "high"))
        await live.run()
        return live

    live = asyncio.run(go())
    log = live.log
    first_victim_write = next(i for i, (k, e, n, _) in enumerate(log) if k == "Pod" and n.startswith("low"))
    nominated = {n: o["status"]["nominatedNodeName"] for k, e, n, o in log[:first_victim_write]
                 if k == "Pod" and (o.get("status") or {}).get("nominatedNodeName")}
    assert set(nominated) == {"g-0", "g-1"} and len(set(nominated.values())) == 2
    victim_events = [(n, e, bool(condition(o, "DisruptionTarget"))) for k, e, n, o in log
                     if k == "Pod" and n.startswith("low")]
    for name in ("low0", "low1"):
        mine = [(e, dt) for n, e, dt in victim_events if n == name]
        assert mine[0] == ("MODIFIED", True) and mine[-1][0] == "DELETED"  # condition, then the deletion
    bound = {n: o["spec"]["nodeName"] for k, e, n, o in log if k == "Pod" and n.startswith("g-")
             and o["spec"].get("nodeName")}
    assert bound == nominated
    assert live.sched.gang.stats["preemptions"] == 1


# --- property: no device twice, no gang partial, never pointless -------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list[Obj], list[Obj]]:
    nodes = draw(st.integers(2, 4))
    existing: list[Obj] = []
    n = 0
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["pod", "all", "single", "x-k8s"]))
        prio = draw(st.sampled_from(["low", "mid", "top"]))
        size = draw(st.sampled_from([2, 4, 8]))
        tmpl = {2: "gpus-2", 4: "gpus-4", 8: "gpus-8"}[size]
        n += 1
        if kind == "pod":
            existing.append(gpu_pod(f"e{n}", prio, tmpl))
            continue
        count = draw(st.integers(1, 3))
        name = f"eg{n}"
        if kind == "x-k8s":
            existing.append(xk8s_group(name, count))
            existing += [gpu_pod(f"{name}-{i}", prio, tmpl, xk8s=name) for i in range(count)]
        else:
            existing.append(podgroup(name, None, kind, count, priorityClassName=prio))
            existing += [gpu_pod(f"{name}-{i}", prio, tmpl, group=name) for i in range(count)]
    size = draw(st.sampled_from([2, 4, 8]))
    tmpl = {2: "gpus-2", 4: "gpus-4", 8: "gpus-8"}[size]
    kind = draw(st.sampled_from(["single", "x-k8s", "v1beta1"]))
    prio = draw(st.sampled_from(["mid", "high"]))
    if kind == "single":
        preemptor = [gpu_pod("p", prio, tmpl)]
    else:
        members = draw(st.integers(1, 4))
        preemptor = gang(kind, members, prio, tmpl, min_count=draw(st.integers(1, members)), name="pg")
    return nodes, existing, preemptor


PRIO = {"low": 10, "mid": 500, "high": 1000, "top": 5000}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_property_preemption_keeps_devices_single_and_gangs_whole(sc: tuple[int, list[Obj], list[Obj]]) -> None:
    """After any preemption (checked after every scheduling attempt): no device is allocated twice; a gang is never
    partially bound (0 or >= minMember / minCount) except a disruptionMode-single or scheduling.x-k8s.io group that
    lost members to preemption (upstream evicts those members one by one); a disruptionMode-all group is evicted
    whole or not at all; only lower-priority pods are evicted; nothing is evicted for a preemptor that then does not
    bind (never pointless)."""
    nodes, existing, preemptor = sc
    base = [*scale_fleet(nodes, gpus_per_node=8), *(template(f"gpus-{k}", k) for k in (2, 4, 8)), *CLASSES]

    async def go() -> tuple[Live, int]:
        live = Live([*base, *existing])
        await live.run()
        for p in live.api.list("Pod"):  # what did not fit leaves: only the preemptor is pending in phase 2
            if not p["spec"].get("nodeName"):
                await live.api.delete("Pod", NS, p["metadata"]["name"])
        start = len(live.deletions.deleted)
        live.add(preemptor)
        await live.run()
        return live, start

    live, start = asyncio.run(go())
    deleted = [o for o in live.deletions.deleted[start:] if o["kind"] == "Pod"]
    kind = "single pod" if len(preemptor) == 1 else preemptor[0]["apiVersion"].split("/")[0]
    event(f"{kind} preemptor: {'evicted' if deleted else 'evicted nothing'}")
    if not deleted:
        return
    event(f"victim kinds: {sorted({_kind_of(o, live) for o in deleted})}")
    stored = {p["metadata"]["name"]: p for p in live.api.stored("Pod")}
    preemptor_pods = [o["metadata"]["name"] for o in preemptor if o["kind"] == "Pod"]
    assert any(stored[n]["spec"].get("nodeName") for n in preemptor_pods), "evicted for nothing"
    top = max(PRIO[stored[n]["spec"]["priorityClassName"]] for n in preemptor_pods)
    assert all(PRIO[o["spec"]["priorityClassName"]] < top for o in deleted)
    groups = {g["metadata"]["name"]: g for g in live.api.stored("PodGroup")}
    gone = Counter(_group_of(o) for o in deleted)
    for name in gone:
        g = groups.get(name)
        if g is not None and "all" in (g["spec"].get("disruptionMode") or {}):
            left = [p for p in stored.values() if _group_of(p) == name and p["spec"].get("nodeName")]
            assert left == [], f"group {name} with disruptionMode all evicted in part"


def _kind_of(pod: Obj, live: Live) -> str:
    g = _group_of(pod)
    if not g:
        return "pod"
    for pg in live.api.stored("PodGroup"):
        if pg["metadata"]["name"] == g:
            return next(iter(pg["spec"].get("disruptionMode") or {"x-k8s" if "minMember" in pg["spec"] else "single":
                                                                    0}))
    return "group?"


def _cache_of(objs: Sequence[Obj]) -> tuple[InMemoryAPI, Cache]:
    api = InMemoryAPI()
    cache = Cache()
    api.watchers.append(cache.apply)
    for o in objs:
        api.load(o["kind"], copy.deepcopy(o))
    return api, cache


def _composite(name: str, prio: int | None, parent: str | None = None) -> Obj:
    spec: Obj = {"schedulingPolicy": {"basic": {}}}
    if prio is not None:
        spec["priority"] = prio
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


@pytest.mark.parametrize(
    ("extra", "want"),
    [
        # TestPodEligibleToPreemptOthers "... victim priority overridden by PodGroup in victim namespace"
        ([podgroup("pg1", LOW)], LOW),
        # "... victim priority overridden by CompositePodGroup in victim namespace"
        ([podgroup("pg1", MID, parentCompositePodGroupName="cpg1"), _composite("cpg1", LOW)], LOW),
        # "... CompositePodGroup not found in victim namespace, fallback to PodGroup priority"
        ([podgroup("pg1", LOW, parentCompositePodGroupName="cpg1")], LOW),
        # "... PodGroup not found in victim namespace, fallback to pod priority"
        ([], 10_000),
        # "... victim priority overridden by root CompositePodGroup in multi-level CPG hierarchy"
        ([podgroup("pg1", MID, parentCompositePodGroupName="mid"), _composite("mid", HIGH, "root"),
          _composite("root", LOW)], LOW),
    ],
    ids=["podgroup", "composite", "composite missing", "podgroup missing", "root of a multi-level hierarchy"],
)
def test_victim_priority_is_the_root_groups(extra: list[Obj], want: int) -> None:
    """GetPodPriority (util.go): a victim's priority is its group hierarchy root's; DefaultPreemption's
    PodEligibleToPreemptOthers uses it for a terminating pod on the nominated node."""
    victim = _terminating(cpu_pod("v1", 10_000, "node1", "pg1"))
    preemptor = cpu_pod("p", HIGH)
    preemptor["status"] = {"nominatedNodeName": "node1"}
    _, cache = _cache_of([cpu_node("node1", 1), *extra, victim, preemptor])
    snap = cache.snapshot()
    unit = VictimIndex(snap).unit(cache.pod(f"{NS}/v1"))  # type: ignore[arg-type]
    assert unit.priority == want
    sched = Scheduler(cache, InMemoryAPI(), default_config(), clock=FakeClock(1000.0), inline_binding=True)
    fw = next(iter(sched.profiles.values()))
    plugin = fw.instances["DefaultPreemption"]
    ok, why = plugin.pod_eligible(snap, cache.pod(f"{NS}/p"), {"node1": Status.unschedulable("Insufficient cpu")})
    assert ok == (want >= HIGH), why
    if not ok:
        assert why == "not eligible due to a terminating pod on the nominated node."


def test_gang_search_respects_room_held_for_a_nominated_pod() -> None:
    """The group cycle filters with the nominated pods of equal or higher priority (upstream
    RunFilterPluginsWithNominatedPods / addGENominatedPods): a higher-priority pod nominated to n0 (gated here, so it
    waits) holds n0; a lower-priority gang of two full-node members does not take it. A lower-priority nominated pod
    holds nothing against the gang."""
    for nominee_prio, gang_fits in ((HIGH, False), (LOW, True)):
        nominee = cpu_pod("nominee", nominee_prio, cpu="3", schedulingGates=[{"name": "wait"}])
        nominee["status"] = {"nominatedNodeName": "n0"}
        res = run([cpu_node("n0", 4), cpu_node("n1", 4), podgroup("g", MID, min_count=2),
                   cpu_pod("m0", MID, None, "g", cpu="3"), cpu_pod("m1", MID, None, "g", cpu="3"), nominee])
        placed = nodes_of(res)
        assert ({"m0", "m1"} <= set(placed)) == gang_fits, placed
        assert "nominee" not in placed and deleted_pods(res) == set()


def test_only_the_placed_members_are_nominated() -> None:
    """TestPodGroupEvaluator_SelectVictimsOnDomain_NominatedNodes: the members the placement holds are nominated to
    their nodes, the one left out is not; after the evictions the nominated members bind there and the third stays
    pending (no room: nothing of higher priority is evicted for it)."""

    async def go() -> Live:
        live = Live([cpu_node("n0", 1), cpu_node("n1", 1), cpu_node("n2", 1), cpu_pod("low0", LOW, "n0"),
                     cpu_pod("low1", LOW, "n1"), cpu_pod("boss", HIGH, "n2")])
        await live.run()
        live.log.clear()
        live.add([podgroup("g", MID, min_count=1), *(cpu_pod(f"m{i}", MID, None, "g") for i in range(3))])
        await live.run()
        return live

    live = asyncio.run(go())
    first_victim_write = next(i for i, (k, _, n, _) in enumerate(live.log) if k == "Pod" and n.startswith("low"))
    nominated = {n: o["status"]["nominatedNodeName"] for k, _, n, o in live.log[:first_victim_write]
                 if k == "Pod" and (o.get("status") or {}).get("nominatedNodeName")}
    assert len(nominated) == 2 and set(nominated.values()) == {"n0", "n1"}
    pods = {p["metadata"]["name"]: p for p in live.api.list("Pod")}
    assert {n: pods[n]["spec"].get("nodeName") for n in nominated} == nominated
    [left] = [n for n in ("m0", "m1", "m2") if n not in nominated]
    assert not pods[left]["spec"].get("nodeName") and not pods[left]["status"].get("nominatedNodeName")
    assert pods["boss"]["spec"]["nodeName"] == "n2" and {o["metadata"]["name"] for o in live.deletions.deleted
                                                         if o["kind"] == "Pod"} == {"low0", "low1"}
