"""The order in which ``simulate`` tries pods, and when it stops retrying them (issue 25, item 6).

* kube-scheduler's PrioritySort (kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/queuesort/
  priority_sort.go``) orders the active queue by priority, then by the pod's queue timestamp, which
  ``pkg/scheduler/backend/queue/scheduling_queue.go`` sets when the pod is added (the informer's delivery,
  i.e. its arrival) and refreshes in ``AddUnschedulableIfNotPresent`` ("Refresh the timestamp since the pod
  is re-added"). A pod PreEnqueue keeps out (DynamicResources while its template claim does not exist yet)
  waits with that timestamp and keeps it when it is let in. ``simulate`` has every pod from the start: it
  uses the pod's ``creationTimestamp`` as its arrival, then file order. Pods with template claims used to
  fall behind every pod without one (gated at load, they entered the active heap last, and ties went to
  the order of entry into it).
* The same file's ``flushUnschedulablePodsLeftover`` (every 30 s) retries pods that waited longer than
  ``podMaxInUnschedulablePodsDuration`` (5 min). ``simulate`` does not (scheduler/simulate/simulation.py says why);
  it used to, by accident, whenever a device binding-condition wait moved its fake clock past 5 minutes.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from scheduler.api.model import Pod, pod_from
from scheduler.framework.interface import Code, QueuedPodInfo, Status
from scheduler.loop.queue import FakeClock, SchedulingQueue
from scheduler.simulate.simulation import simulate
from tests.test_binding_conditions import claim_obj, class_obj, fabric_device, node_obj, pod_obj, slice_obj

Raw = dict[str, Any]
DRIVER = "gpu.example.com"


def node(name: str, cpu: str = "4") -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def gpus(node_name: str, n: int) -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(n)],
        },
    }


DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}]}}},
}


def pod(name: str, created: str | None = None, template: bool = False, priority_class: str = "") -> Raw:
    """One CPU; with ``template``, also one GPU through a claim made from TEMPLATE."""
    spec: Raw = {
        "schedulerName": "dra-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
    }
    if template:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: Raw = {"name": name, "namespace": "default"}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def fleet(cpus: int) -> list[Raw]:
    """One node with room for ``cpus`` one-CPU pods and more GPUs than that: CPU decides who fits."""
    return [node("n1", str(cpus)), gpus("n1", 2 * cpus), DEVICE_CLASS, TEMPLATE]


def run(objs: list[Raw]) -> tuple[list[str], list[str]]:
    """(pods bound, in the order of their Scheduled events; all pods in the order they were first tried)."""
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    tried: list[str] = []
    bound: list[str] = []
    for e in res.events:
        name = e["involvedObject"]["name"]
        if e["involvedObject"]["kind"] != "Pod":
            continue
        if e["reason"] in ("Scheduled", "FailedScheduling") and name not in tried:
            tried.append(name)
        if e["reason"] == "Scheduled":
            bound.append(name)
    final = {o["metadata"]["name"] for o in res.items if o["kind"] == "Pod" and o["spec"].get("nodeName")}
    assert set(bound) == final
    return bound, tried


# --- creationTimestamp order ----------------------------------------------------------------------------------


def test_the_earliest_created_pods_are_bound_whatever_their_claims() -> None:
    """Twelve pods, every other one with a template claim, created a second apart, listed in the file neither in
    that order nor by name; room for four. The four bound are the four created first, and every pod is tried
    in creation order. (Before: the pods without a template claim first, in file order, then the others.)"""
    pods = [pod(f"p{i:02d}", f"2025-06-01T00:00:{i:02d}Z", template=i % 2 == 0) for i in range(12)]
    order = [7, 0, 11, 3, 8, 1, 10, 5, 2, 9, 4, 6]  # file order
    bound, tried = run(fleet(4) + [pods[i] for i in order])
    assert bound == ["p00", "p01", "p02", "p03"]
    assert tried == [f"p{i:02d}" for i in range(12)]


def test_equal_creation_times_go_in_file_order() -> None:
    """No creationTimestamp (all get the same default): file order decides, template claims or not. The names
    are not in file order, so the claim controller's pass over the pods by name (which used to release the
    gated pods in name order) cannot decide either."""
    names = ["zeta", "alpha", "mu", "beta", "omega", "delta", "kappa", "gamma"]
    objs = [pod(n, template=i % 3 != 1) for i, n in enumerate(names)]
    bound, tried = run(fleet(3) + objs)
    assert bound == names[:3] and tried == names


def test_priority_first_then_creation_time() -> None:
    classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
    ]
    objs = [
        pod("old-template", "2025-06-01T00:00:00Z", template=True),
        pod("old-plain", "2025-06-01T00:00:01Z"),
        pod("new-high-template", "2025-06-01T00:00:09Z", template=True, priority_class="high"),
        pod("new-high-plain", "2025-06-01T00:00:08Z", priority_class="high"),
        pod("middle-template", "2025-06-01T00:00:05Z", template=True),
    ]
    bound, tried = run(fleet(3) + classes + objs)
    assert tried == ["new-high-plain", "new-high-template", "old-template", "old-plain", "middle-template"]
    assert bound == tried[:3]


def test_creation_times_after_the_fake_clock_start_keep_their_order() -> None:
    """simulate's clock starts at 2026-01-01T00:00:00Z; pods created later (and one without creationTimestamp,
    which gets that time) keep the order of their creationTimestamps: all are shifted back by the same amount."""
    objs = [
        pod("d", "2031-03-01T00:00:00.5Z", template=True),
        pod("a", "2030-01-01T00:00:00+02:00"),  # 2029-12-31T22:00:00Z
        pod("no-timestamp"),
        pod("c", "2031-03-01T00:00:00.25Z"),
        pod("b", "2030-01-01T00:00:00Z", template=True),
    ]
    bound, tried = run(fleet(4) + objs)
    assert tried == ["no-timestamp", "a", "b", "c", "d"]
    assert bound == tried[:4]


# --- the queue ----------------------------------------------------------------------------------------------------


def _pod(name: str, created: float = 0.0, gated: bool = False) -> Pod:
    return pod_from(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"created": str(created)}},
            "spec": {"priority": 0, "schedulingGates": [{"name": "g"}] if gated else []},
        }
    )


def _less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:  # PrioritySort
    return a.pod.priority > b.pod.priority or (a.pod.priority == b.pod.priority and a.timestamp < b.timestamp)


def _gates(pod: Pod) -> Status:
    if pod.scheduling_gates:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gated",), "SchedulingGates")
    return Status.ok()


def test_a_pod_let_in_by_pre_enqueue_keeps_its_place() -> None:
    """Upstream a gated pod waits in the unschedulable pool with the timestamp of its add, and moveToActiveQ
    keeps it: with equal timestamps (a fake clock) the queue now breaks the tie by the order the timestamps
    were set, not by the order of entry into the active heap."""
    q = SchedulingQueue(_less, FakeClock(1000.0), pre_enqueue=_gates, events={"SchedulingGates": {("Pod", "Update")}})
    q.add(_pod("first", gated=True))
    q.add(_pod("second"))
    q.update(_pod("first"))  # the gate is removed
    assert [q.pop().pod.name for _ in range(2)] == ["first", "second"]  # type: ignore[union-attr]


def test_arrival_sets_the_queue_timestamp() -> None:
    q = SchedulingQueue(_less, FakeClock(1000.0), arrival=lambda p: float(p.meta.labels["created"]))
    q.add(_pod("late", created=900.0))
    q.add(_pod("early", created=100.0))
    infos = [q.pop(), q.pop()]
    assert [(i.pod.name, i.timestamp) for i in infos if i is not None] == [("early", 100.0), ("late", 900.0)]


def test_a_failed_attempt_refreshes_the_queue_timestamp() -> None:
    """Upstream AddUnschedulableIfNotPresent: "Refresh the timestamp since the pod is re-added": a retried pod
    comes after the pods that arrived before its failure, however early it arrived itself."""
    clock = FakeClock(1000.0)
    q = SchedulingQueue(_less, clock, initial_backoff=0.0, max_backoff=0.0)
    q.add(_pod("early"))
    clock.advance(1)
    q.add(_pod("late"))
    info = q.pop()
    assert info is not None and info.pod.name == "early" and info.timestamp == 1000.0
    clock.advance(5)
    q.add_unschedulable(info, {"NodeResourcesFit"}, q.scheduling_cycle)
    q.done("ns/early")
    q.on_event("Node", "Add")  # back to active at once (no backoff)
    assert q.info("ns/early").timestamp == 1006.0  # type: ignore[union-attr]
    assert [q.pop().pod.name for _ in range(2)] == ["late", "early"]  # type: ignore[union-attr]


# --- no 5-minute flush --------------------------------------------------------------------------------------------


def test_a_pod_no_event_concerns_is_tried_once_even_when_the_fake_clock_passes_five_minutes() -> None:
    """``fabric`` waits for device binding conditions no driver sets: 10 minutes of fake time per attempt, so the
    fake clock passes the 5 minutes of podMaxInUnschedulablePodsDuration several times. ``hopeless`` (no node
    has its label; NodeAffinity registers only Node events, and no Node changes) used to be flushed back each
    time and tried 7 times; it is tried once, as in a run where the clock does not move."""
    hopeless = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hopeless", "namespace": "default"},
        "spec": {"schedulerName": "dra-scheduler", "nodeSelector": {"missing": "label"}, "containers": [{"name": "c"}]},
    }
    objs = [
        node_obj("a"),
        node_obj("b"),
        slice_obj("a"),
        slice_obj("b", fabric_device("gpu-0", conditions=False)),
        class_obj(),
        claim_obj("c1"),
        claim_obj("c2"),
        hopeless,
        pod_obj("fabric", "c1", on="a"),
        pod_obj("plain", "c2", on="b"),
    ]
    res = asyncio.run(simulate(objs))
    assert res.scheduler is not None and res.scheduler.clock.now() - 1000.0 > 2 * 300
    failed = [e for e in res.events if e["involvedObject"]["name"] == "hopeless"]
    assert [e["reason"] for e in failed] == ["FailedScheduling"]
    assert res.summary["scheduled"] == 1 and res.summary["unschedulable"] == 2
