"""Gangs live (mirrors tests/test_gang.py): a scheduling.x-k8s.io PodGroup placed whole, devices included;
a group that cannot fit places nobody and says why; the PodGroup status written by the kopf controller
running in the scheduler process. The same for Kubernetes 1.37's own PodGroup (scheduling.k8s.io/v1beta1,
gate GenericWorkload): gang = spec.schedulingPolicy.gang.minCount, members name it in
spec.schedulingGroup.podGroupName."""

from __future__ import annotations

import time

from e2e.fleet import (
    JSON,
    POD_GROUP_LABEL,
    UPSTREAM_PODGROUP,
    Kube,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_template,
    create_scale_fleet,
    fresh_namespace,
    gpu_pod,
    pod_scheduled_condition,
    podgroup,
    upstream_member,
    upstream_podgroup,
    wait_for,
)


def _group(kube: Kube, ns: str, fleet: str, members: int = 8, min_member: int = 8) -> None:
    kube.create(claim_template(ns, "eight", count=8))
    kube.create(podgroup(ns, "train", min_member))
    kube.create_many([gpu_pod(ns, f"w-{i}", template="eight", fleet=fleet, group="train") for i in range(members)])


def test_group_of_eight_full_nodes_is_placed_whole_and_its_status_written(
    kube: Kube, scheduler: SchedulerProcess
) -> None:
    ns = fresh_namespace(kube, "gang-whole")
    fleet = create_scale_fleet(kube, "gang-whole", 8, 8)
    _group(kube, ns, "gang-whole")

    def bound() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 8 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(bound, 60, "all 8 members bound", interval=0.5)
    claims = kube.list("ResourceClaim", ns)
    assert check_state(pods, claims) == []
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(fleet.node_names)  # one whole node each
    devices = [d for c in claims for d in allocated_devices(c)]
    assert len(devices) == 64 == len(set(devices))

    def status_done() -> JSON | None:
        st = kube.get("PodGroup", "train", ns).get("status") or {}
        return st if st.get("phase") == "Running" and st.get("running") == 8 else None

    # kwok runs bound pods, so the controller goes Scheduled -> Running
    st = wait_for(status_done, 30, "PodGroup status phase Running with 8 running members")
    # scheduler-plugins' PodGroupStatus fields only (its CRD, manifests/crds/, prunes anything else)
    assert st["failed"] == 0 and st["succeeded"] == 0 and st["scheduleStartTime"]
    assert set(st) <= {"phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime"}, st
    events = kube.list("Event", ns, fieldSelector="involvedObject.kind=PodGroup,involvedObject.name=train")
    assert events, "phase transitions are reported as Events"
    # the controller wrote only status: no kopf annotations or finalizers on pods
    for p in kube.list("Pod", ns):
        assert not [a for a in (p["metadata"].get("annotations") or {}) if "kopf" in a]
        assert not p["metadata"].get("finalizers")


def test_group_that_cannot_fit_places_nobody_and_says_why(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "gang-short")
    create_scale_fleet(kube, "gang-short", 7, 8)  # one node short of 8 x 8 GPUs
    _group(kube, ns, "gang-short")

    def explained() -> list[JSON] | None:
        # the first group cycles may run while some members' claims are still being created by the claim
        # controller; the message converges once every member is in the queue
        pods = kube.list("Pod", ns)
        conds = [pod_scheduled_condition(p) for p in pods]
        ok = len(pods) == 8 and all(
            c and c.get("status") == "False" and "needs 8 device(s)" in c.get("message", "") for c in conds)
        return pods if ok else None

    pods = wait_for(explained, 60, "every member marked unschedulable, naming the request")
    for p in pods:
        cond = pod_scheduled_condition(p)
        assert cond is not None and cond["reason"] == "Unschedulable"
        assert f"pod group {ns}/train: cannot place minMember 8" in cond["message"], cond["message"]
        assert "request gpu: needs 8 device(s)" in cond["message"], cond["message"]

    def group_status() -> JSON | None:
        st = kube.get("PodGroup", "train", ns).get("status") or {}
        events = kube.list("Event", ns, fieldSelector="involvedObject.kind=PodGroup,involvedObject.name=train")
        said = any("cannot place" in e.get("message", "") for e in events)
        return st if st.get("phase") == "Scheduling" and said else None

    st = wait_for(group_status, 30, "PodGroup phase Scheduling and an Event saying why the group cannot be placed")
    assert st.get("running", 0) == 0
    # and nothing is placed later either: no member bound, no device held
    time.sleep(3)
    pods, claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
    assert not [p for p in pods if p["spec"].get("nodeName")]
    assert not [c for c in claims if allocated_devices(c) or (c.get("status") or {}).get("reservedFor")]
    assert check_state(pods, claims) == []


def test_two_groups_competing_for_one_groups_capacity(kube: Kube, scheduler: SchedulerProcess) -> None:
    """Both groups need all 4 nodes: exactly one is placed whole, the other holds nothing; once the first
    group's pods are deleted (the claim controller deallocates their claims), the second is placed whole."""
    ns = fresh_namespace(kube, "gang-race")
    fleet = create_scale_fleet(kube, "gang-race", 4, 8)
    kube.create(claim_template(ns, "eight", count=8))
    kube.create_many([podgroup(ns, "g1", 4), podgroup(ns, "g2", 4)])
    kube.create_many([gpu_pod(ns, f"{g}-{i}", template="eight", fleet="gang-race", group=g)
                      for i in range(4) for g in ("g1", "g2")])

    def bound_by_group() -> dict[str, int]:
        out = {"g1": 0, "g2": 0}
        for p in kube.list("Pod", ns):
            if p["spec"].get("nodeName"):
                out[p["metadata"]["labels"][POD_GROUP_LABEL]] += 1
        return out

    def one_whole() -> str | None:
        pods = kube.list("Pod", ns)
        counts = bound_by_group()
        waiting = [p for p in pods if not p["spec"].get("nodeName")]
        if sorted(counts.values()) == [0, 4] and all(
            (c := pod_scheduled_condition(p)) and c.get("status") == "False" for p in waiting
        ):
            return "g1" if counts["g1"] == 4 else "g2"
        return None

    winner = wait_for(one_whole, 60, "one group placed whole, the other's members unschedulable", interval=0.5)
    loser = "g2" if winner == "g1" else "g1"
    time.sleep(2)
    assert bound_by_group() == {winner: 4, loser: 0}
    claims = kube.list("ResourceClaim", ns)
    pods = kube.list("Pod", ns)
    assert check_state(pods, claims) == []
    assert len([d for c in claims for d in allocated_devices(c)]) == 32  # the loser holds no device

    for i in range(4):
        kube.delete("Pod", f"{winner}-{i}", ns, grace=0)

    def loser_whole() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(loser_whole, 60, f"{loser} placed whole after {winner}'s pods were deleted", interval=0.5)
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(fleet.node_names)
    assert check_state(pods, kube.list("ResourceClaim", ns)) == []


def _upstream_group(kube: Kube, ns: str, fleet: str, members: int) -> None:
    kube.create(claim_template(ns, "eight", count=8))
    pg = kube.create(upstream_podgroup(ns, "train", members))
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == members
    kube.create_many([upstream_member(gpu_pod(ns, f"w-{i}", template="eight", fleet=fleet, group="train"), "train")
                      for i in range(members)])


def test_upstream_v1beta1_podgroup_is_placed_whole(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "gang-k8s")
    fleet = create_scale_fleet(kube, "gang-k8s", 4, 8)
    _upstream_group(kube, ns, "gang-k8s", 4)

    def bound() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(bound, 60, "all 4 members of the v1beta1 PodGroup bound", interval=0.5)
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "train"} for p in pods)
    claims = kube.list("ResourceClaim", ns)
    assert check_state(pods, claims) == []
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(fleet.node_names)
    assert kube.get(UPSTREAM_PODGROUP, "train", ns)["metadata"]["name"] == "train"


def test_upstream_v1beta1_podgroup_that_cannot_fit_places_nobody(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "gang-k8s-short")
    create_scale_fleet(kube, "gang-k8s-short", 3, 8)  # one node short of 4 x 8 GPUs
    _upstream_group(kube, ns, "gang-k8s-short", 4)

    def explained() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        conds = [pod_scheduled_condition(p) for p in pods]
        ok = len(pods) == 4 and all(
            c and c.get("status") == "False" and f"pod group {ns}/train" in c.get("message", "") for c in conds)
        return pods if ok else None

    pods = wait_for(explained, 60, "every member of the v1beta1 PodGroup marked unschedulable, naming the group")
    for p in pods:
        cond = pod_scheduled_condition(p)
        assert cond is not None and cond["reason"] == "Unschedulable", cond
    time.sleep(2)
    pods, claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
    assert not [p for p in pods if p["spec"].get("nodeName")]
    assert not [c for c in claims if allocated_devices(c) or (c.get("status") or {}).get("reservedFor")]
    assert check_state(pods, claims) == []
