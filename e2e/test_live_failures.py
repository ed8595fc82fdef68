"""Failures: the scheduler killed (SIGKILL) in the middle of binding and restarted; the API server
restarted while pods are pending."""

from __future__ import annotations

import threading
import time
from typing import Any

from e2e import cluster
from e2e.fleet import (
    JSON,
    Kube,
    allocated_devices,
    check_state,
    claim_template,
    create_scale_fleet,
    fresh_namespace,
    gpu_pod,
    pod_scheduled_condition,
    wait_for,
)


def _orphans(pods: list[JSON], claims: list[JSON]) -> list[str]:
    """Claims allocated and reserved for a pod that is not bound: what a crash between the claim write
    and the Binding leaves behind."""
    bound = {p["metadata"]["uid"] for p in pods if p["spec"].get("nodeName")}
    return [
        c["metadata"]["name"]
        for c in claims
        if allocated_devices(c)
        and any(r.get("uid") not in bound for r in (c.get("status") or {}).get("reservedFor") or [])
    ]


def test_scheduler_killed_while_binding_recovers_consistently(kube: Kube, spawn_scheduler: Any) -> None:
    ns = fresh_namespace(kube, "crash")
    fleet = create_scale_fleet(kube, "crash", 10, 8)  # 80 devices for 100 pods
    kube.create(claim_template(ns, "one"))
    # a client rate limit spreads each pod's writes (finalizer, claim status, Binding) over tens of ms, so
    # the kill lands inside binding cycles deterministically
    sched = spawn_scheduler("--qps", "50", "--burst", "10").start()
    rv = kube.request("GET", "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims")["metadata"][
        "resourceVersion"]
    allocated: set[str] = set()
    seen = threading.Event()

    errors: list[str] = []

    def watch_claims() -> None:
        # the kill comes right after the 10th claim allocation appears: its pod cannot be bound yet
        nonlocal rv
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                for ev in kube.watch("ResourceClaim", ns, resource_version=rv, timeout=60):
                    obj = ev.get("object") or {}
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") == "MODIFIED" and allocated_devices(obj) and (obj.get("status") or {}).get(
                            "reservedFor"):
                        allocated.add(obj["metadata"]["name"])
                        if len(allocated) >= 10:
                            seen.set()
                            return
            except Exception as e:  # reported by the assertion below
                errors.append(repr(e))
                time.sleep(0.1)

    watcher = threading.Thread(target=watch_claims, daemon=True)
    watcher.start()
    kube.create_many([gpu_pod(ns, f"p-{i:03d}", template="one", fleet="crash") for i in range(100)], workers=16)
    assert seen.wait(60), f"{len(allocated)} claim allocations seen (watch errors {errors}):\n{sched.tail()}"
    sched.kill()
    pods, claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
    orphans = _orphans(pods, claims)
    bound_at_kill = sum(1 for p in pods if p["spec"].get("nodeName"))
    assert orphans, "the kill did not land between a claim write and its Binding"
    assert bound_at_kill < 80, "everything was bound before the kill"

    print(f"\nSIGKILL with {bound_at_kill} pods bound and {len(orphans)} claim(s) allocated for unbound pods")
    sched.start()  # same process arguments, a cold cache: state rebuilt from the API

    def recovered() -> tuple[list[JSON], list[JSON]] | None:
        pods = kube.list("Pod", ns)
        claims = kube.list("ResourceClaim", ns)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        if len(bound) == 80 and all(
            (c := pod_scheduled_condition(p)) and c.get("status") == "False" for p in pending
        ) and not _orphans(pods, claims):
            return pods, claims
        return None

    wait_for(recovered, 90, "80 pods bound, 20 unschedulable, no orphaned claim", interval=0.5)
    time.sleep(2)  # and it stays so
    pods, claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
    problems = check_state(pods, claims)
    assert problems == [], problems
    assert _orphans(pods, claims) == []
    devices = [d for c in claims for d in allocated_devices(c)]
    assert len(devices) == 80 == len(set(devices))
    assert {d[1] for d in devices} == set(fleet.node_names)
    by_name = {c["metadata"]["name"]: c for c in claims}
    # an allocation left by the crash was either reused for its pod or released, never leaked
    for name in orphans:
        c = by_name.get(name)
        assert c is None or not allocated_devices(c) or (c.get("status") or {}).get("reservedFor"), name
    assert sched.alive


def test_apiserver_restart_while_pods_are_pending(
    cluster_info: cluster.ClusterInfo, kube: Kube, spawn_scheduler: Any
) -> None:
    ns = fresh_namespace(kube, "restart")
    kube.create(claim_template(ns, "one"))
    sched = spawn_scheduler().start()
    # pending: they need the fleet "late", which does not exist yet
    kube.create_many([gpu_pod(ns, f"early-{i}", template="one", fleet="late") for i in range(8)])
    wait_for(lambda: all((c := pod_scheduled_condition(p)) and c.get("status") == "False"
                         for p in kube.list("Pod", ns)) and len(kube.list("Pod", ns)) == 8,
             30, "8 pending pods marked unschedulable")
    attempts = sched.metric("scheduler_schedule_attempts_total")

    cluster.restart_apiserver(cluster_info.run_dir, down_seconds=3, grace_seconds=0)  # a crash, 3 s down
    assert sched.alive, f"the scheduler died with the API server:\n{sched.tail()}"

    # only new watch events can tell the scheduler about these: its watches must have come back
    fleet = create_scale_fleet(kube, "late", 2, 8)
    kube.create_many([gpu_pod(ns, f"late-{i}", template="one", fleet="late") for i in range(4)])

    def all_bound() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 12 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(all_bound, 60, "the 12 pods bound after the API server restart", interval=0.5)
    claims = kube.list("ResourceClaim", ns)
    assert check_state(pods, claims) == []
    assert {p["spec"]["nodeName"] for p in pods} <= set(fleet.node_names)
    devices = [d for c in claims for d in allocated_devices(c)]
    assert len(devices) == 12 == len(set(devices))
    assert sched.metric("scheduler_schedule_attempts_total") > attempts
    assert sched.http("/readyz")[0] == 200
