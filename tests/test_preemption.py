"""DefaultPreemption with kube-scheduler 1.37.2 semantics (single pods).

Cases are ported from kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption_test.go`` (TestDryRunPreemption, TestSelectBestCandidate, TestPodEligibleToPreemptOthers,
TestPostFilter, TestPreEnqueue), ``pkg/scheduler/framework/preemption/{util_test.go,executor_test.go}``
(TestFilterVictimsWithPDBViolation, TestMoreImportantVictim, TestPodTerminatingByPreemption,
TestIsPodRunningPreemption, TestPrepareCandidate, TestRemoveNominatedNodeName) and
``pkg/scheduler/apis/config/validation/validation_pluginargs_test.go`` (TestValidateDefaultPreemptionArgs),
with the resources and priorities of those tables (small 100m/100, medium 200m/200, large 300m/300, very
large 500m/500; priorities -100, 0, 100, 1000, 10000). Upstream's fake filter plugins are replaced by the
real default profile; nodes have 500m CPU and 500 bytes of memory unless said otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from plugins.defaultpreemption import SPEC, validate_args
from plugins.defaultpreemption.core import (
    Candidate,
    Victim,
    calculate_num_candidates,
    filter_victims_with_pdb_violation,
    more_important_victim,
    pick_one_candidate,
    terminating_by_preemption,
)
from plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.api.model import pod_from
from scheduler.api.workloads import pdb_from, pdb_status
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import DEFAULT_SCHEDULER_NAME, Profile, SchedulerConfig, default_plugins
from scheduler.framework.interface import Code, CycleState, Status
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.claimcontroller import DeletionRecorder
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import simulate

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = ("100m", "100")
MEDIUM = ("200m", "200")
LARGE = ("300m", "300")
VERY_LARGE = ("500m", "500")
HOSTNAME = "kubernetes.io/hostname"


def epoch(n: int) -> str:
    return f"1970-01-01T00:00:{n:02d}Z"


def node(name: str, res: tuple[str, str] = VERY_LARGE, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    alloc = {"cpu": res[0], "memory": res[1], "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
        "status": {"capacity": dict(alloc), "allocatable": dict(alloc)},
    }


def pod(
    name: str,
    prio: int | None = None,
    res: tuple[str, str] | None = None,
    on: str | None = None,
    labels: Mapping[str, str] | None = None,
    start: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "x"}
    if res:
        c["resources"] = {"requests": {"cpu": res[0], "memory": res[1]}}
    s: dict[str, Any] = {"schedulerName": "dra-scheduler", "containers": [c], **spec}
    if prio is not None:
        s["priority"] = prio
    if on:
        s["nodeName"] = on
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    o: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": s}
    if labels:
        o["metadata"]["labels"] = dict(labels)
    if on:
        o["status"] = {"phase": "Running", **({"startTime": start} if start else {})}
    return o


def pdb(name: str, match: Mapping[str, str], allowed: int, disrupted: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": dict(match)}},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": dict.fromkeys(disrupted, "2026-01-01T00:00:00Z")},
    }


def config(args: Mapping[str, Any] | None = None) -> SchedulerConfig:
    plugin_args = {"DefaultPreemption": dict(args)} if args else {}
    return SchedulerConfig((Profile(DEFAULT_SCHEDULER_NAME, default_plugins(), plugin_args),))


class Cluster:
    """Objects in an in-memory API and a scheduler cache; evaluates preemption for one pending pod the way a
    failed cycle does (PreFilter, then Filter on every node, then DefaultPreemption)."""

    def __init__(self, objs: Sequence[dict[str, Any]], args: Mapping[str, Any] | None = None) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.sched = Scheduler(self.cache, self.api, config(args), clock=FakeClock(1000.0), inline_binding=True)
        for o in objs:
            self.api.load(o["kind"], o)
        self.fw = self.sched.profiles[DEFAULT_SCHEDULER_NAME]
        plugin = self.fw.instances["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        self.plugin = plugin

    def evaluate(self, name: str) -> tuple[Any, CycleState, dict[str, Status]]:
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

    def candidates(self, name: str, offset: int = 0) -> list[Candidate]:
        p, state, statuses = self.evaluate(name)
        snap = state.snapshot
        potential = [n for n in snap.nodes if n.name in statuses and statuses[n.name].code == Code.UNSCHEDULABLE]
        pdbs = list(snap.objects_of("PodDisruptionBudget").values())
        _, num = self.plugin.offset_and_num_candidates(len(potential)) if potential else (0, 0)
        cands, _ = self.plugin.dry_run_preemption(state, p, potential, pdbs, offset, num)
        return cands

    def post_filter(self, name: str) -> tuple[Any, Status]:
        p, state, statuses = self.evaluate(name)
        return self.plugin.post_filter(state, p, statuses)


def victims(c: Candidate) -> list[str]:
    return sorted(p.name for p in c.pods)


def as_sets(cands: Sequence[Candidate]) -> dict[str, tuple[list[str], int]]:
    return {c.node: (victims(c), c.num_pdb_violations) for c in cands}


# --- TestDryRunPreemption ---------------------------------------------------------------------------------


def test_dry_run_a_pod_that_fits_on_both_nodes_when_lower_priority_pods_are_preempted() -> None:
    c = Cluster([node("node1"), node("node2"), pod("p", HIGH, LARGE),
                 pod("p1", MID, LARGE, "node1"), pod("p2", MID, LARGE, "node2")])
    assert as_sets(c.candidates("p")) == {"node1": (["p1"], 0), "node2": (["p2"], 0)}


def test_dry_run_other_pods_running_are_higher_priority_no_preemption_would_happen() -> None:
    c = Cluster([node("node1"), node("node2"), pod("p", LOW, LARGE),
                 pod("p1", MID, LARGE, "node1"), pod("p2", MID, LARGE, "node2")])
    assert c.candidates("p") == []
    res, st = c.post_filter("p")
    assert res is not None and res.nominated_node_name == "" and st.code == Code.UNSCHEDULABLE
    assert st.message == "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."


def test_dry_run_medium_priority_pod_is_preempted_but_lower_priority_one_stays_as_it_is_small() -> None:
    c = Cluster([node("node1"), node("node2"), pod("p", HIGH, LARGE),
                 pod("p1.1", LOW, SMALL, "node1"), pod("p1.2", MID, LARGE, "node1"), pod("p2", MID, LARGE, "node2")])
    assert as_sets(c.candidates("p")) == {"node1": (["p1.2"], 0), "node2": (["p2"], 0)}


def test_dry_run_mixed_priority_pods_are_preempted() -> None:
    c = Cluster([node("node1"), node("node2"), pod("p", HIGH, LARGE),
                 pod("p1.1", MID, SMALL, "node1"), pod("p1.2", LOW, SMALL, "node1"),
                 pod("p1.3", MID, MEDIUM, "node1"), pod("p1.4", HIGH, SMALL, "node1"),
                 pod("p2", HIGH, LARGE, "node2")])
    cands = c.candidates("p")
    assert as_sets(cands) == {"node1": (["p1.2", "p1.3"], 0)}
    # victims in order of importance: the mid-priority one first
    assert [p.name for p in cands[0].pods] == ["p1.3", "p1.2"]


def test_dry_run_mixed_priority_pods_are_preempted_pick_later_start_time_one_when_priorities_are_equal() -> None:
    c = Cluster([node("node1"), node("node2"), pod("p", HIGH, LARGE),
                 pod("p1.1", LOW, SMALL, "node1", start=epoch(5)), pod("p1.2", LOW, SMALL, "node1", start=epoch(4)),
                 pod("p1.3", MID, MEDIUM, "node1", start=epoch(3)), pod("p1.4", HIGH, SMALL, "node1", start=epoch(2)),
                 pod("p2", HIGH, LARGE, "node2", start=epoch(1))])
    # p1.2 started earlier than p1.1: it is more important and reprieved first
    assert as_sets(c.candidates("p")) == {"node1": (["p1.1", "p1.3"], 0)}


def test_dry_run_pod_with_anti_affinity_is_preempted() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}, "topologyKey": HOSTNAME}]}}
    c = Cluster([node("node1"), node("node2"), pod("p", HIGH, SMALL, labels={"foo": ""}),
                 pod("p1.1", LOW, SMALL, "node1", labels={"foo": ""}, affinity=anti),
                 pod("p1.2", MID, SMALL, "node1"), pod("p1.3", HIGH, SMALL, "node1"),
                 pod("p2", HIGH, SMALL, "node2")])
    _, _, statuses = c.evaluate("p")
    assert statuses["node1"].reasons == ("node(s) didn't satisfy existing pods anti-affinity rules",)
    assert as_sets(c.candidates("p")) == {"node1": (["p1.1"], 0)}


def test_dry_run_preemption_to_resolve_pod_topology_spread_filter_failure() -> None:
    sel = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
    spread = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel},
        {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel},
    ]
    objs = [
        node("node-a", labels={"zone": "zone1"}), node("node-b", labels={"zone": "zone1"}),
        node("node-x", labels={"zone": "zone2"}),
        pod("p", HIGH, labels={"foo": ""}, topologySpreadConstraints=spread),
        pod("pod-a1", MID, on="node-a", labels={"foo": ""}), pod("pod-a2", LOW, on="node-a", labels={"foo": ""}),
        pod("pod-b1", LOW, on="node-b", labels={"foo": ""}),
        pod("pod-x1", HIGH, on="node-x", labels={"foo": ""}), pod("pod-x2", HIGH, on="node-x", labels={"foo": ""}),
    ]
    c = Cluster(objs)
    assert as_sets(c.candidates("p")) == {"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}


def test_dry_run_preemption_with_violation_of_same_pdb() -> None:
    c = Cluster([node("node1"), pod("p", HIGH, VERY_LARGE),
                 pod("p1.1", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pod("p1.2", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pdb("pdb", {"app": "foo"}, 1)])
    assert as_sets(c.candidates("p")) == {"node1": (["p1.1", "p1.2"], 1)}


def test_dry_run_pdb_with_processed_eviction_the_victim_does_not_belong_to_disrupted_pods() -> None:
    c = Cluster([node("node1"), pod("p", HIGH, VERY_LARGE),
                 pod("p1.1", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pod("p1.2", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pdb("pdb", {"app": "foo"}, 1, disrupted=["p2"])])
    assert as_sets(c.candidates("p")) == {"node1": (["p1.1", "p1.2"], 1)}


def test_dry_run_pdb_with_processed_eviction_the_victim_belongs_to_disrupted_pods() -> None:
    c = Cluster([node("node1"), pod("p", HIGH, VERY_LARGE),
                 pod("p1.1", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pod("p1.2", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pdb("pdb", {"app": "foo"}, 1, disrupted=["p1.2"])])
    assert as_sets(c.candidates("p")) == {"node1": (["p1.1", "p1.2"], 0)}


def test_dry_run_pdb_victim_in_disrupted_pods_is_treated_as_non_violating() -> None:
    c = Cluster([node("node1"), pod("p", HIGH, VERY_LARGE),
                 pod("p1.1", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pod("p1.2", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pod("p1.3", MID, MEDIUM, "node1", labels={"app": "foo"}),
                 pdb("pdb", {"app": "foo"}, 1, disrupted=["p1.3"])])
    assert as_sets(c.candidates("p")) == {"node1": (["p1.1", "p1.2", "p1.3"], 1)}


def test_dry_run_all_nodes_are_possible_candidates_but_args_limit_to_2() -> None:
    nodes = [node(f"node{i}") for i in range(1, 6)]
    running = [pod(f"p{i}", MID, LARGE, f"node{i}") for i in range(1, 6)]
    c = Cluster([*nodes, *running, pod("p", HIGH, LARGE)],
                {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1})
    assert [x.node for x in c.candidates("p", offset=0)] == ["node1", "node2"]
    # offset wraps around the potential nodes (upstream "preemption offset across multiple scheduling cycles")
    assert [x.node for x in c.candidates("p", offset=4)] == ["node5", "node1"]


def test_dry_run_some_nodes_are_not_possible_candidates_args_limit_to_2() -> None:
    nodes = [node(f"node{i}") for i in range(1, 6)]
    running = [pod(f"p{i}", MID if i % 2 else VERY_HIGH, LARGE, f"node{i}") for i in range(1, 6)]
    c = Cluster([*nodes, *running, pod("p", HIGH, LARGE)],
                {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1})
    assert [x.node for x in c.candidates("p")] == ["node1", "node3"]


def test_dry_run_looks_past_num_candidates_until_a_non_pdb_violating_node_is_found() -> None:
    nodes = [node(f"node{i}") for i in range(1, 6)]
    running = [
        pod("p1", MID, LARGE, "node1", labels={"app": "foo"}),
        pod("p2", MID, LARGE, "node2", labels={"app": "foo"}),
        pod("p3", MID, LARGE, "node3"),
        pod("p4", MID, LARGE, "node4", labels={"app": "foo"}),
        pod("p5", MID, LARGE, "node5"),
    ]
    c = Cluster([*nodes, *running, pod("p", HIGH, LARGE), pdb("pdb", {"app": "foo"}, 0)],
                {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 1})
    # numCandidates is 1, but node1 and node2 violate the budget: the dry run goes on to node3
    cands = c.candidates("p")
    assert [(x.node, x.num_pdb_violations) for x in cands] == [("node3", 0), ("node1", 1)]
    res, st = c.post_filter("p")  # from a random offset: a node without violation is chosen
    assert st.is_success and res is not None and res.nominated_node_name in ("node3", "node5")


# --- TestSelectBestCandidate ------------------------------------------------------------------------------


def _best(objs: list[dict[str, Any]]) -> str:
    c = Cluster(objs)
    res, st = c.post_filter("p")
    assert st.is_success, st
    assert res is not None
    return res.nominated_node_name


def _nodes(*names: str) -> list[dict[str, Any]]:
    return [node(n) for n in names]


def test_select_node_with_min_highest_priority_pod_is_picked() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", MID, MEDIUM, "node1", start=epoch(0)), pod("p1.2", MID, LARGE, "node1", start=epoch(0)),
                  pod("p2.1", MID, MEDIUM, "node2", start=epoch(0)), pod("p2.2", LOW, MEDIUM, "node2", start=epoch(0)),
                  pod("p3.1", LOW, MEDIUM, "node3", start=epoch(0)), pod("p3.2", LOW, MEDIUM, "node3", start=epoch(0))],
                 ) == "node3"


def test_select_when_highest_priorities_are_the_same_minimum_sum_of_priorities_is_picked() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", MID, MEDIUM, "node1", start=epoch(0)), pod("p1.2", MID, LARGE, "node1", start=epoch(0)),
                  pod("p2.1", MID, LARGE, "node2", start=epoch(0)), pod("p2.2", LOW, MEDIUM, "node2", start=epoch(0)),
                  pod("p3.1", MID, MEDIUM, "node3", start=epoch(0)), pod("p3.2", MID, MEDIUM, "node3", start=epoch(0))],
                 ) == "node2"


def test_select_when_highest_priority_and_sum_are_the_same_minimum_number_of_pods_is_picked() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", MID, SMALL, "node1"), pod("p1.2", NEG, SMALL, "node1"),
                  pod("p1.3", MID, SMALL, "node1"), pod("p1.4", NEG, SMALL, "node1"),
                  pod("p2.1", MID, LARGE, "node2"), pod("p2.2", NEG, MEDIUM, "node2"),
                  pod("p3.1", MID, MEDIUM, "node3"), pod("p3.2", NEG, SMALL, "node3"),
                  pod("p3.3", LOW, SMALL, "node3")]) == "node2"


def test_select_sum_of_adjusted_priorities_is_considered() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", MID, SMALL, "node1"), pod("p1.2", NEG, SMALL, "node1"),
                  pod("p1.3", NEG, SMALL, "node1"),
                  pod("p2.1", MID, LARGE, "node2"), pod("p2.2", NEG, MEDIUM, "node2"),
                  pod("p3.1", MID, MEDIUM, "node3"), pod("p3.2", NEG, SMALL, "node3"),
                  pod("p3.3", LOW, SMALL, "node3")]) == "node2"


def test_select_non_overlapping_lowest_high_priority_sum_priorities_and_number_of_pods() -> None:
    assert _best([*_nodes("node1", "node2", "node3", "node4"), pod("p", VERY_HIGH, VERY_LARGE),
                  pod("p1.1", MID, SMALL, "node1"), pod("p1.2", LOW, SMALL, "node1"), pod("p1.3", LOW, SMALL, "node1"),
                  pod("p2.1", HIGH, LARGE, "node2"),
                  pod("p3.1", MID, MEDIUM, "node3"), pod("p3.2", LOW, SMALL, "node3"),
                  pod("p3.3", LOW, SMALL, "node3"), pod("p3.4", LOW, MEDIUM, "node3"),
                  pod("p4.1", MID, MEDIUM, "node4"), pod("p4.2", MID, SMALL, "node4"),
                  pod("p4.3", MID, SMALL, "node4"), pod("p4.4", NEG, SMALL, "node4")]) == "node1"


def test_select_same_priority_same_number_of_victims_different_start_time_for_each_nodes_pod() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", MID, MEDIUM, "node1", start=epoch(2)), pod("p1.2", MID, MEDIUM, "node1", start=epoch(2)),
                  pod("p2.1", MID, MEDIUM, "node2", start=epoch(3)), pod("p2.2", MID, MEDIUM, "node2", start=epoch(3)),
                  pod("p3.1", MID, MEDIUM, "node3", start=epoch(1)), pod("p3.2", MID, MEDIUM, "node3", start=epoch(1))],
                 ) == "node2"


def test_select_same_priority_same_number_of_victims_different_start_time_for_all_pods() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", MID, MEDIUM, "node1", start=epoch(4)), pod("p1.2", MID, MEDIUM, "node1", start=epoch(2)),
                  pod("p2.1", MID, MEDIUM, "node2", start=epoch(5)), pod("p2.2", MID, MEDIUM, "node2", start=epoch(1)),
                  pod("p3.1", MID, MEDIUM, "node3", start=epoch(3)), pod("p3.2", MID, MEDIUM, "node3", start=epoch(6))],
                 ) == "node3"


def test_select_different_priority_same_number_of_victims_different_start_time_for_all_pods() -> None:
    assert _best([*_nodes("node1", "node2", "node3"), pod("p", HIGH, VERY_LARGE),
                  pod("p1.1", LOW, MEDIUM, "node1", start=epoch(4)), pod("p1.2", MID, MEDIUM, "node1", start=epoch(2)),
                  pod("p2.1", MID, MEDIUM, "node2", start=epoch(6)), pod("p2.2", LOW, MEDIUM, "node2", start=epoch(1)),
                  pod("p3.1", LOW, MEDIUM, "node3", start=epoch(3)), pod("p3.2", MID, MEDIUM, "node3", start=epoch(5))],
                 ) == "node2"


def _pods(*specs: tuple[str, int, str]) -> tuple[Any, ...]:
    """Pod objects (name, priority, startTime) for the pure-function tests."""
    out = []
    for name, prio, start in specs:
        raw = pod(name, prio, on="n", start=start or None)
        out.append(pod_from(raw))
    return tuple(out)


def test_pick_one_candidate_prefers_fewest_pdb_violations_then_upstream_order_then_tie_breakers() -> None:
    a = Candidate("a", tuple(Victim.of(p) for p in _pods(("x", LOW, epoch(1)))), num_pdb_violations=1)
    b = Candidate("b", tuple(Victim.of(p) for p in _pods(("y", MID, epoch(1)), ("z", MID, epoch(1)))))
    assert pick_one_candidate([a, b]) is b  # no PDB violation beats lower priorities
    c = Candidate("c", tuple(Victim.of(p) for p in _pods(("x", LOW, epoch(1)))))
    d = Candidate("d", tuple(Victim.of(p) for p in _pods(("y", LOW, epoch(1)))))
    assert pick_one_candidate([c, d]) is c  # a full tie: the first one
    assert pick_one_candidate([c, d], tie_breakers=[lambda x: 1 if x.node == "d" else 0]) is d
    assert pick_one_candidate([]) is None


# --- victims, PDBs, importance (util_test.go) -------------------------------------------------------------


def test_more_important_victim_priority_then_start_time() -> None:
    hi, lo, early, late, unstarted = _pods(
        ("hi", MID, epoch(5)), ("lo", LOW, epoch(1)), ("e", LOW, epoch(1)), ("l", LOW, epoch(2)), ("u", LOW, "")
    )
    assert more_important_victim(Victim.of(hi), Victim.of(lo))
    assert not more_important_victim(Victim.of(lo), Victim.of(hi))
    assert more_important_victim(Victim.of(early), Victim.of(late))
    assert not more_important_victim(Victim.of(late), Victim.of(early))
    assert more_important_victim(Victim.of(late), Victim.of(unstarted))  # not started yet = started now
    group = Victim((lo, early), LOW, "PodGroup")
    assert more_important_victim(group, Victim.of(late))  # a group outranks a single pod of equal priority


def _labelled(name: str, labels: Mapping[str, str], ns: str = "default") -> Any:
    raw = pod(name, LOW, on="n", labels=labels)
    raw["metadata"]["namespace"] = ns
    return pod_from(raw)


def test_filter_victims_with_pdb_violation() -> None:
    foo1, foo2, bar, nolabel = (_labelled("foo1", {"app": "foo"}), _labelled("foo2", {"app": "foo"}),
                                _labelled("bar", {"app": "bar"}), _labelled("nolabel", {}))
    vs = [Victim.of(p) for p in (foo1, foo2, bar, nolabel)]
    budget = pdb_from(pdb("pdb", {"app": "foo"}, 1))
    violating, ok = filter_victims_with_pdb_violation(vs, [budget])
    # the first foo pod uses the one allowed disruption, the second violates
    assert [(v.pods[0].name, n) for v, n in violating] == [("foo2", 1)]
    assert [v.pods[0].name for v in ok] == ["foo1", "bar", "nolabel"]
    # no budget: nothing violates
    assert filter_victims_with_pdb_violation(vs, []) == ([], vs)
    # a budget of another namespace, an empty selector: they match no pod
    other_ns = pdb_from({**pdb("o", {"app": "foo"}, 0), "metadata": {"name": "o", "namespace": "other"}})
    empty = pdb_from({**pdb("e", {}, 0), "spec": {"selector": {}}})
    nil = pdb_from({**pdb("n", {}, 0), "spec": {}})
    assert filter_victims_with_pdb_violation(vs, [other_ns, empty, nil])[0] == []
    # a pod whose eviction the API server already processed does not use up the budget
    processed = pdb_from(pdb("pdb", {"app": "foo"}, 0, disrupted=["foo1"]))
    violating, _ = filter_victims_with_pdb_violation(vs, [processed])
    assert [(v.pods[0].name, n) for v, n in violating] == [("foo2", 1)]
    # a group with two violating pods counts twice, and is violating as a whole
    group = Victim((foo1, foo2, bar), LOW, "PodGroup")
    violating, ok = filter_victims_with_pdb_violation([group], [pdb_from(pdb("pdb", {"app": "foo"}, 0))])
    assert [(len(v.pods), n) for v, n in violating] == [(3, 2)] and ok == []


def test_pod_terminating_by_preemption() -> None:
    cond = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    raw = pod("v", LOW, on="n")
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    raw["status"]["conditions"] = [cond]
    assert terminating_by_preemption(pod_from(raw))
    raw["status"]["conditions"] = [{**cond, "reason": "EvictionByEvictionAPI"}]
    assert not terminating_by_preemption(pod_from(raw))
    raw["status"]["conditions"] = [cond]
    del raw["metadata"]["deletionTimestamp"]
    assert not terminating_by_preemption(pod_from(raw))


def test_pdb_status_as_the_disruption_controller_computes_it() -> None:
    pods = [pod(f"w{i}", LOW, on="n", labels={"app": "w"}) for i in range(4)]
    pods.append(pod("pending", LOW, labels={"app": "w"}))  # not running: not healthy
    pods[0]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]  # not ready

    def status(spec: dict[str, Any]) -> dict[str, Any]:
        raw = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "b", "namespace": "default"},
               "spec": {"selector": {"matchLabels": {"app": "w"}}, **spec}}
        return pdb_status(raw, pods)

    s = status({"minAvailable": 2})
    assert (s["expectedPods"], s["currentHealthy"], s["desiredHealthy"], s["disruptionsAllowed"]) == (5, 3, 2, 1)
    assert status({"minAvailable": "50%"})["desiredHealthy"] == 3  # 50% of 5 rounded up
    assert status({"maxUnavailable": 1})["disruptionsAllowed"] == 0  # desired 4 > 3 healthy
    assert status({"maxUnavailable": "60%"})["desiredHealthy"] == 2  # 5 - ceil(3.0)
    assert status({"minAvailable": 5})["disruptionsAllowed"] == 0


# --- args (TestValidateDefaultPreemptionArgs) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}, []),
        ({"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": 100},
         ["a.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"]),
        ({"minCandidateNodesPercentage": 900, "minCandidateNodesAbsolute": 100},
         ["a.minCandidateNodesPercentage: Invalid value: 900: not in valid range [0, 100]"]),
        ({"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": -1},
         ["a.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"]),
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
         ["a.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
          "minCandidateNodesAbsolute",
          "a.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as "
          "minCandidateNodesPercentage"]),
        ({"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": -1},
         ["a.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]",
          "a.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"]),
        ({"minCandidateNodes": 1}, ["a.minCandidateNodes: unknown field"]),
        ({"minCandidateNodesAbsolute": "5"}, ["a.minCandidateNodesAbsolute: Invalid value: '5': must be an integer"]),
    ],
)
def test_validate_default_preemption_args(args: dict[str, Any], errors: list[str]) -> None:
    assert validate_args(args, "a") == errors


def test_default_args_and_registration() -> None:
    assert SPEC.default_args == {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}
    plugins = default_plugins()
    assert [r.name for r in plugins["postFilter"]] == ["DefaultPreemption"]
    assert "DefaultPreemption" in [r.name for r in plugins["preEnqueue"]]


@pytest.mark.parametrize(
    ("nodes", "pct", "absolute", "want"),
    [(10, 10, 100, 10), (1000, 10, 100, 100), (5000, 10, 100, 500), (5, 40, 1, 2), (4, 0, 3, 3), (2, 100, 0, 2)],
)
def test_calculate_num_candidates(nodes: int, pct: int, absolute: int, want: int) -> None:
    assert calculate_num_candidates(nodes, pct, absolute) == want


# --- TestPodEligibleToPreemptOthers -----------------------------------------------------------------------


def _terminating(name: str, by_preemption: bool) -> dict[str, Any]:
    raw = pod(name, LOW, SMALL, "node1")
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if by_preemption:
        raw["status"]["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    return raw


def _eligible(objs: list[dict[str, Any]], statuses: Mapping[str, Status] | None = None) -> tuple[bool, str]:
    c = Cluster(objs)
    p = c.cache.pod("default/p")
    assert p is not None
    return c.plugin.pod_eligible(c.cache.snapshot(), p, statuses if statuses is not None else {})


def test_eligible_pod_with_nominated_node() -> None:
    p = pod("p", HIGH, SMALL)
    p["status"] = {"nominatedNodeName": "node1"}
    unresolvable = {"node1": Status.unresolvable("node(s) had untolerated taint")}
    assert _eligible([node("node1"), p, _terminating("p1", True)], unresolvable) == (True, "")


def test_eligible_pod_without_nominated_node() -> None:
    assert _eligible([pod("p", HIGH, SMALL)]) == (True, "")


def test_not_eligible_with_preempt_never_policy() -> None:
    assert _eligible([pod("p", HIGH, SMALL, preemptionPolicy="Never")]) == (
        False, "not eligible due to preemptionPolicy=Never.")


def test_not_eligible_while_a_preemption_victim_is_terminating_on_the_nominated_node() -> None:
    p = pod("p", HIGH, SMALL)
    p["status"] = {"nominatedNodeName": "node1"}
    st = {"node1": Status.unschedulable("Insufficient cpu")}
    assert _eligible([node("node1"), p, _terminating("p1", True)], st) == (
        False, "not eligible due to a terminating pod on the nominated node.")


def test_eligible_when_non_victim_pods_are_terminating() -> None:
    p = pod("p", HIGH, SMALL)
    p["status"] = {"nominatedNodeName": "node1"}
    st = {"node1": Status.unschedulable("Insufficient cpu")}
    assert _eligible([node("node1"), p, _terminating("p1", False)], st) == (True, "")


# --- TestPostFilter ---------------------------------------------------------------------------------------


def test_post_filter_pod_with_higher_priority_can_be_made_schedulable() -> None:
    c = Cluster([node("node1", LARGE), pod("p", HIGH, LARGE), pod("p1", MID, LARGE, "node1")])
    res, st = c.post_filter("p")
    assert st.is_success and st.message == (
        "preemption: found a potential placement for pod on node node1, preempting 1 victims")
    assert res is not None and res.nominated_node_name == "node1" and res.actuate is not None


def test_post_filter_pod_with_tied_priority_is_still_unschedulable() -> None:
    c = Cluster([node("node1", LARGE), pod("p", MID, LARGE), pod("p1", MID, LARGE, "node1")])
    res, st = c.post_filter("p")
    assert st.code == Code.UNSCHEDULABLE
    assert st.message == "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    assert res is not None and res.nominated_node_name == "" and res.actuate is None


def test_post_filter_respects_unresolvable_node_statuses() -> None:
    """Upstream "preemption should respect filteredNodesStatuses": a node whose filter status was
    UnschedulableAndUnresolvable is not a candidate, even with lower-priority pods on it."""
    c = Cluster([node("node1", LARGE), pod("p", HIGH, LARGE), pod("p1", MID, LARGE, "node1")])
    p, state, _ = c.evaluate("p")
    res, st = c.plugin.post_filter(state, p, {"node1": Status.unresolvable("node(s) had untolerated taint")})
    assert st.message == "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    assert res is not None and res.nominated_node_name == ""


def test_post_filter_no_candidate_no_enough_resource_after_removing_low_priority_pods() -> None:
    c = Cluster([node("node1", LARGE), node("node2", LARGE), pod("p", HIGH, LARGE),
                 pod("p1", MID, SMALL, "node1"), pod("k1", VERY_HIGH, SMALL, "node1"),
                 pod("p2", MID, SMALL, "node2"), pod("k2", VERY_HIGH, SMALL, "node2")])
    res, st = c.post_filter("p")
    assert st.code == Code.UNSCHEDULABLE
    assert st.message == "preemption: 0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
    assert res is not None and res.nominated_node_name == ""


def test_post_filter_no_candidate_with_mixed_reasons() -> None:
    """Upstream "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU
    resource": node1 holds only a higher-priority pod, node2 is too small."""
    c = Cluster([node("node1", LARGE), node("node2", LARGE), node("node3", LARGE), node("node4", SMALL),
                 pod("p", HIGH, LARGE),
                 pod("p1", VERY_HIGH, LARGE, "node1"), pod("p2", MID, SMALL, "node2"),
                 pod("k2", VERY_HIGH, SMALL, "node2"), pod("p3", VERY_HIGH, LARGE, "node3")])
    res, st = c.post_filter("p")
    # node4 is too small for the pod at all (UnschedulableAndUnresolvable): not tried
    assert st.message == ("preemption: 0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
                          "1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.")
    assert res is not None and res.nominated_node_name == ""


# --- PreEnqueue while the API work runs (TestPreEnqueue, TestIsPodRunningPreemption) -----------------------


def test_pre_enqueue_blocks_the_preemptor_until_its_last_victim_is_being_deleted() -> None:
    c = Cluster([node("node1", LARGE), pod("p", HIGH, LARGE), pod("p1", MID, LARGE, "node1")])
    res, st = c.post_filter("p")
    assert st.is_success and res is not None and res.actuate is not None
    p = c.cache.pod("default/p")
    other = c.cache.pod("default/p1")
    assert p is not None and other is not None
    blocked = c.plugin.pre_enqueue(c.cache.view(), p)
    assert blocked.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert blocked.message == "waiting for the preemption for this pod to be finished"
    assert c.plugin.pre_enqueue(c.cache.view(), other).is_success  # a different pod is not blocked
    # last victim registered and still running: blocked; being deleted or gone: not blocked
    c.plugin.executor.last_victim[p.uid] = ("node1", "default/p1")
    assert not c.plugin.pre_enqueue(c.cache.view(), p).is_success
    api = c.api
    raw = api.objects[("Pod", "default", "p1")]
    api._store("Pod", {**raw, "metadata": {**raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}, "MODIFIED")
    assert c.plugin.pre_enqueue(c.cache.view(), p).is_success
    asyncio.run(api.delete("Pod", "default", "p1"))
    assert c.plugin.pre_enqueue(c.cache.view(), p).is_success
    c.plugin.executor.preempting.clear()
    assert c.plugin.pre_enqueue(c.cache.view(), p).is_success


# --- the API work (TestPrepareCandidate, TestRemoveNominatedNodeName) ----------------------------------------


def test_actuation_writes_disruption_target_then_deletes_and_clears_lower_nominations() -> None:
    lower = pod("nominated-low", LOW, SMALL)
    lower["status"] = {"nominatedNodeName": "node1"}
    c = Cluster([node("node1", LARGE), node("node2", SMALL), pod("p", HIGH, LARGE),
                 pod("v1", MID, SMALL, "node1"), pod("v2", MID, MEDIUM, "node1"), lower])
    res, st = c.post_filter("p")
    assert st.is_success and res is not None and res.actuate is not None and res.nominated_node_name == "node1"
    c.api.writes.clear()
    recorder = DeletionRecorder()
    c.api.watchers.append(recorder)
    ok = asyncio.run(res.actuate(c.api, lambda: "2026-01-01T00:00:07Z"))
    assert ok
    writes = [w for w in c.api.writes if w[1] == "Pod"]
    assert writes == [
        ("MODIFIED", "Pod", "default/nominated-low"),  # nominatedNodeName cleared first
        ("MODIFIED", "Pod", "default/v1"),  # DisruptionTarget, then DELETE, victim by victim
        ("DELETED", "Pod", "default/v1"),
        ("MODIFIED", "Pod", "default/v2"),
        ("DELETED", "Pod", "default/v2"),
    ]
    assert "nominatedNodeName" not in c.api.objects[("Pod", "default", "nominated-low")]["status"]
    events = [(e["reason"], e["involvedObject"]["name"], e["message"]) for e in c.api.events]
    uid = c.api.objects[("Pod", "default", "p")]["metadata"]["uid"]
    assert events == [("Preempted", "v1", f"Preempted by pod {uid} on node node1"),
                      ("Preempted", "v2", f"Preempted by pod {uid} on node node1")]
    last = {o["metadata"]["name"]: o for o in recorder.deleted}
    cond = _cond(last["v1"], "DisruptionTarget")
    assert cond == {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                    "message": "dra-scheduler: preempting to accommodate a higher priority pod",
                    "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:07Z"}
    assert not c.plugin.executor.preempting


def test_actuation_skips_victims_already_being_deleted_and_tolerates_gone_ones() -> None:
    v1 = pod("v1", MID, SMALL, "node1")
    v1["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    c = Cluster([node("node1", LARGE), pod("p", HIGH, LARGE), v1, pod("v2", MID, MEDIUM, "node1")])
    res, st = c.post_filter("p")
    assert st.is_success and res is not None and res.actuate is not None
    assert c.plugin.executor.preempting  # the preemptor waits for the work
    asyncio.run(c.api.delete("Pod", "default", "v2"))  # gone before the work runs
    c.api.writes.clear()
    assert asyncio.run(res.actuate(c.api, lambda: "t"))
    assert c.api.writes == []  # v1 is already being deleted, v2 is gone: no call at all


def test_actuation_failure_reports_false() -> None:
    from scheduler.api.clusterapi import ApiError

    c = Cluster([node("node1", LARGE), pod("p", HIGH, LARGE), pod("v1", MID, LARGE, "node1")])
    res, _ = c.post_filter("p")
    assert res is not None and res.actuate is not None
    c.api.fail_next[("patch/status", "Pod")] = [ApiError("boom")]
    assert asyncio.run(res.actuate(c.api, lambda: "t")) is False
    assert ("Pod", "default", "v1") in c.api.objects  # not deleted after the failed condition write
    assert not c.plugin.executor.preempting


# --- end to end through simulate ----------------------------------------------------------------------------


def _by_name(items: list[dict[str, Any]], kind: str = "Pod") -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == kind}


def _cond(p: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == kind)


def test_simulate_preemption_contract_and_write_order() -> None:
    objs = [node("node1", LARGE), pod("low", MID, LARGE, "node1"), pod("high", HIGH, LARGE)]
    res = asyncio.run(simulate(objs))
    pods = _by_name(res.items)
    assert pods["high"]["spec"]["nodeName"] == "node1"
    assert "nominatedNodeName" not in pods["high"]["status"]  # cleared by the binding (1.35+, as upstream)
    assert "low" not in pods
    [victim] = [o for o in res.deleted if o["kind"] == "Pod"]
    assert victim["metadata"]["name"] == "low" and victim["metadata"]["deletionTimestamp"]
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 30
    cond = _cond(victim, "DisruptionTarget")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "PreemptionByScheduler", "dra-scheduler: preempting to accommodate a higher priority pod")
    assert res.summary["preempted"] == 1 and res.summary["scheduled"] == 1 and res.summary["unschedulable"] == 0
    sched = res.scheduler
    assert sched is not None
    writes = [w for w in sched.api.writes if w[1] == "Pod" and w[0] != "ADDED"]  # type: ignore[attr-defined]
    order = [w for w in writes if w[2] in ("default/high", "default/low")]
    # the preemptor's status (nominatedNodeName + PodScheduled=False), the victim's condition, its graceful
    # deletion (deletionTimestamp, then gone), then the preemptor's binding
    assert order[:5] == [
        ("MODIFIED", "Pod", "default/high"),
        ("MODIFIED", "Pod", "default/low"),
        ("MODIFIED", "Pod", "default/low"),
        ("DELETED", "Pod", "default/low"),
        ("MODIFIED", "Pod", "default/high"),
    ]
    failed = next(e for e in res.events if e["reason"] == "FailedScheduling")
    assert failed["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. "
        "preemption: found a potential placement for pod on node node1, preempting 1 victims"
    )


def test_preemptor_had_nominated_node_name_while_it_waited() -> None:
    """The nomination is written (with PodScheduled=False) before the victims are touched, and the binding
    clears it (ClearingNominatedNodeNameAfterBinding, on since 1.35). Seen through the API's watch."""
    c = Cluster([node("node1", LARGE), pod("low", MID, LARGE, "node1"), pod("high", HIGH, LARGE)])
    c.api.graceful_pod_deletion = True
    seen: list[tuple[str, str]] = []

    def watch(kind: str, event: str, obj: dict[str, Any]) -> None:
        if kind == "Pod":
            seen.append((obj["metadata"]["name"], (obj.get("status") or {}).get("nominatedNodeName", "")))

    c.api.watchers.append(watch)
    clock = c.sched.clock
    assert isinstance(clock, FakeClock)

    async def run() -> None:
        for _ in range(10):
            info = c.sched.queue.pop()
            if info is None:
                c.sched.queue.flush()
                wake = c.sched.queue.next_wakeup()
                if wake is None:
                    return
                clock.set(max(wake, clock.now()))
                continue
            await c.sched.run_once(info)

    asyncio.run(run())
    assert seen[0] == ("high", "node1")  # the preemptor's status, first
    assert seen[1:4] == [("low", ""), ("low", ""), ("low", "")]  # condition, deletionTimestamp, gone
    assert seen[-1] == ("high", "")  # bound: nomination cleared
    assert c.sched.nominator.pods_for_node("node1") == ()


def test_simulate_nominated_pods_resources_are_held_for_it() -> None:
    """After preemption, a lower-priority pending pod must not take the room made for the nominated pod
    (upstream RunFilterPluginsWithNominatedPods / addGENominatedPods)."""
    objs = [node("node1", LARGE), pod("low", LOW, LARGE, "node1"), pod("high", HIGH, LARGE), pod("mid", MID, LARGE)]
    res = asyncio.run(simulate(objs))
    pods = _by_name(res.items)
    assert pods["high"]["spec"].get("nodeName") == "node1"
    assert not pods["mid"]["spec"].get("nodeName")
    assert [o["metadata"]["name"] for o in res.deleted] == ["low"]


def test_nominated_pod_is_counted_for_pods_of_equal_or_lower_priority_only() -> None:
    c = Cluster([node("node1", LARGE), pod("nominated", MID, LARGE), pod("lower", LOW, SMALL),
                 pod("equal", MID, SMALL), pod("higher", HIGH, SMALL)])
    nominated = c.cache.pod("default/nominated")
    assert nominated is not None
    c.sched.nominator.add(nominated, "node1", "Override")
    snap = c.cache.snapshot()
    info = snap.node_map["node1"]
    for name, fits in (("lower", False), ("equal", False), ("higher", True)):
        p = c.cache.pod(f"default/{name}")
        assert p is not None
        state = CycleState(snap)
        c.fw.run_pre_filter(state, p)
        st = c.fw.filter_node(state, p, info, c.fw.signature(state, p))
        assert st.is_success is fits, (name, st)
        if not fits:
            assert st.reasons == ("Insufficient cpu", "Insufficient memory")
    # the nominated pod itself is not counted against itself
    state = CycleState(snap)
    c.fw.run_pre_filter(state, nominated)
    assert c.fw.filter_node(state, nominated, info, None).is_success
    # nomination ends when the pod is deleted
    asyncio.run(c.api.delete("Pod", "default", "nominated"))
    assert c.sched.nominator.pods_for_node("node1") == ()


def test_equal_pods_do_not_reuse_a_verdict_from_before_a_nomination() -> None:
    """Reuse memo check: "first" and "second" have equal signatures (same requests). first's success on node1
    is memoised; then a higher-priority pod is nominated to node1 (the NodeInfo is unchanged). second must not
    reuse first's verdict: the nominated pod's resources are held."""
    c = Cluster([node("node1", LARGE), pod("first", LOW, LARGE), pod("second", LOW, LARGE),
                 pod("nominated", HIGH, LARGE)])
    snap = c.cache.snapshot()
    info = snap.node_map["node1"]

    def check(name: str) -> Status:
        p = c.cache.pod(f"default/{name}")
        assert p is not None
        state = CycleState(snap)
        c.fw.run_pre_filter(state, p)
        sig = c.fw.signature(state, p)
        assert sig is not None
        return c.fw.filter_node(state, p, info, sig)

    assert check("first").is_success
    hits = c.fw.memo_stats["filter_hits"]
    nominated = c.cache.pod("default/nominated")
    assert nominated is not None
    c.sched.nominator.add(nominated, "node1", "Override")
    assert not check("second").is_success
    assert c.fw.memo_stats["filter_hits"] == hits
    c.sched.nominator.delete(nominated)
    assert check("second").is_success  # without the nomination the memo may serve it again


def test_simulate_preemption_policy_never() -> None:
    never = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "never"},
             "value": HIGH, "preemptionPolicy": "Never"}
    objs = [never, node("node1", LARGE), pod("low", MID, LARGE, "node1"), pod("high", res=LARGE,
                                                                               priorityClassName="never")]
    res = asyncio.run(simulate(objs))
    pods = _by_name(res.items)
    assert not pods["high"]["spec"].get("nodeName") and pods["low"]["spec"]["nodeName"] == "node1"
    assert res.deleted == [] and res.summary["preempted"] == 0
    assert _cond(pods["high"], "PodScheduled")["message"].endswith(
        "preemption: not eligible due to preemptionPolicy=Never.")


def test_simulate_never_pointless_pod_that_would_not_fit_anyway() -> None:
    """Evicting every lower-priority pod would still not make room: nothing is evicted."""
    objs = [node("node1", LARGE), pod("low", LOW, SMALL, "node1"), pod("keep", VERY_HIGH, SMALL, "node1"),
            pod("big", HIGH, LARGE)]
    res = asyncio.run(simulate(objs))
    assert res.deleted == [] and res.summary["preempted"] == 0
    msg = _cond(_by_name(res.items)["big"], "PodScheduled")["message"]
    assert msg.endswith("preemption: 0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")
    # larger than the node: preemption is not even tried
    objs = [node("node1", LARGE), pod("low", LOW, SMALL, "node1"), pod("huge", HIGH, VERY_LARGE)]
    res = asyncio.run(simulate(objs))
    assert res.deleted == []
    msg = _cond(_by_name(res.items)["huge"], "PodScheduled")["message"]
    assert msg.endswith("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def test_simulate_never_pointless_victims_not_lower_priority() -> None:
    objs = [node("node1", LARGE), pod("peer", HIGH, LARGE, "node1"), pod("p", HIGH, LARGE)]
    res = asyncio.run(simulate(objs))
    assert res.deleted == [] and not _by_name(res.items)["p"]["spec"].get("nodeName")


def test_simulate_pdb_protected_pod_survives_when_another_node_can_be_used() -> None:
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "keep", "namespace": "default"},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}  # status computed
    objs = [budget, node("node1", LARGE), node("node2", LARGE),
            pod("db", LOW, LARGE, "node1", labels={"app": "db"}), pod("batch", MID, LARGE, "node2"),
            pod("p", HIGH, LARGE)]
    res = asyncio.run(simulate(objs))
    pods = _by_name(res.items)
    # node1's victim has the lower priority, but evicting it violates the budget: node2 is chosen
    assert pods["p"]["spec"]["nodeName"] == "node2" and pods["db"]["spec"]["nodeName"] == "node1"
    assert [o["metadata"]["name"] for o in res.deleted] == ["batch"]


def test_simulate_pdb_violated_when_no_other_choice() -> None:
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "keep", "namespace": "default"},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    objs = [budget, node("node1", LARGE), pod("db", LOW, LARGE, "node1", labels={"app": "db"}), pod("p", HIGH, LARGE)]
    res = asyncio.run(simulate(objs))
    assert _by_name(res.items)["p"]["spec"]["nodeName"] == "node1"
    assert [o["metadata"]["name"] for o in res.deleted] == ["db"]


def test_simulate_minimal_victim_set_reprieves_what_it_can() -> None:
    objs = [node("node1", VERY_LARGE), pod("a", LOW, SMALL, "node1"), pod("b", MID, MEDIUM, "node1"),
            pod("c", LOW, MEDIUM, "node1", start=epoch(2)), pod("p", HIGH, MEDIUM)]
    res = asyncio.run(simulate(objs))
    pods = _by_name(res.items)
    assert pods["p"]["spec"]["nodeName"] == "node1"
    # the node is full; p needs 200m. With all three removed, b (mid priority) is reprieved first; then c
    # (started, so older than a, which has not: more important) does not fit back and is the victim; a, the
    # least important, is small enough to be reprieved
    assert sorted(o["metadata"]["name"] for o in res.deleted) == ["c"]
    assert {"a", "b"} <= set(pods)


def test_simulate_nomination_cleared_when_preemption_finds_no_candidate() -> None:
    """Upstream: no candidate → PostFilterResult with an empty nominated node (ModeOverride) → cleared."""
    p = pod("p", MID, LARGE)
    p["status"] = {"nominatedNodeName": "node1"}
    objs = [node("node1", LARGE), pod("keep", VERY_HIGH, LARGE, "node1"), p]
    res = asyncio.run(simulate(objs))
    after = _by_name(res.items)["p"]
    assert not after["spec"].get("nodeName") and "nominatedNodeName" not in after["status"]


def test_simulate_nomination_kept_while_its_victim_terminates() -> None:
    """Upstream PodEligibleToPreemptOthers: a victim of an earlier preemption still terminating on the nominated
    node: no new preemption, the nomination stays (nil PostFilterResult)."""
    p = pod("p", HIGH, LARGE)
    p["status"] = {"nominatedNodeName": "node1"}
    victim = pod("old", LOW, LARGE, "node1")
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    objs = [node("node1", LARGE), node("node2", LARGE), pod("other", LOW, LARGE, "node2"), victim, p]
    res = asyncio.run(simulate(objs))
    after = _by_name(res.items)["p"]
    assert after["status"]["nominatedNodeName"] == "node1" and not after["spec"].get("nodeName")
    assert res.deleted == []  # "other" on node2 is not evicted either
    assert _cond(after, "PodScheduled")["message"].endswith(
        "preemption: not eligible due to a terminating pod on the nominated node.")


def test_live_async_preemption_gates_the_preemptor_until_its_victims_are_deleted() -> None:
    """SchedulerAsyncPreemption (beta, on in 1.37): the preemptor's cycle ends at once, the API work runs as a
    task; meanwhile DefaultPreemption's PreEnqueue keeps the preemptor out of the queue; the victims' deletion
    (an assigned-pod Delete event) lets it back in."""
    c = Cluster([node("node1", LARGE), pod("low", MID, LARGE, "node1"), pod("high", HIGH, LARGE)])
    c.sched.inline_binding = False
    q = c.sched.queue

    async def run() -> None:
        info = q.pop()
        assert info is not None and info.pod.name == "high"
        await c.sched.run_once(info)
        assert ("Pod", "default", "low") in c.api.objects  # the work has not run yet
        assert q.pool("default/high") == "unschedulable"
        q.on_event("Pod", "Delete")  # any assigned-pod deletion: to backoff, then PreEnqueue refuses it
        clock = c.sched.clock
        assert isinstance(clock, FakeClock)
        clock.advance(30)
        assert q.pop() is None
        assert q.pool("default/high") == "gated"
        await c.sched.wait_bindings()
        assert ("Pod", "default", "low") not in c.api.objects
        assert q.pool("default/high") in ("backoff", "active")
        assert c.sched.nominator.node_of(info.pod) == "node1"

    asyncio.run(run())
