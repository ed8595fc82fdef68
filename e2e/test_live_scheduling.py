"""Live scheduling behaviour: requeue on a DeviceClass created later; no device handed out twice when far
more pods than devices arrive at once."""

from __future__ import annotations

import time

from bench import fleet as gen
from e2e.fleet import (
    JSON,
    Kube,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_names,
    claim_template,
    create_scale_fleet,
    fresh_namespace,
    gpu_pod,
    pod_scheduled_condition,
    wait_for,
)


def test_pod_is_scheduled_once_its_device_class_is_created(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "late-class")
    create_scale_fleet(kube, "late-class", 1, 2)
    kube.create(claim_template(ns, "one", device_class="late-gpu"))
    kube.create(gpu_pod(ns, "p", template="one", fleet="late-class"))

    def unschedulable() -> dict[str, str] | None:
        cond = pod_scheduled_condition(kube.get("Pod", "p", ns))
        return cond if cond and cond.get("status") == "False" else None

    cond = wait_for(unschedulable, 30, "PodScheduled=False while the class is missing")
    assert cond["reason"] == "Unschedulable"
    assert "device class late-gpu does not exist" in cond["message"], cond["message"]
    assert not kube.get("Pod", "p", ns)["spec"].get("nodeName")

    created = time.monotonic()
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "late-gpu"},
                 "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{gen.DRIVER}'"}}]}})
    # the DeviceClass event requeues the pod (the periodic flush of unschedulable pods is minutes away)
    pod = wait_for(lambda: (p := kube.get("Pod", "p", ns))["spec"].get("nodeName") and p, 20,
                   "the pod bound after its DeviceClass was created")
    assert time.monotonic() - created < 20
    assert pod["spec"]["nodeName"] == "late-class-000"
    claims = kube.list("ResourceClaim", ns)
    assert check_state([pod], claims) == []
    [claim] = claims
    assert len(allocated_devices(claim)) == 1


def test_200_pods_at_once_on_160_devices_no_device_twice(kube: Kube, scheduler: SchedulerProcess) -> None:
    ns = fresh_namespace(kube, "crowd")
    fleet = create_scale_fleet(kube, "crowd", 20, 8)
    assert fleet.device_count() == 160
    kube.create(claim_template(ns, "one"))
    t0 = time.monotonic()
    kube.create_many([gpu_pod(ns, f"p-{i:03d}", template="one", fleet="crowd") for i in range(200)], workers=16)

    def settled() -> tuple[list[JSON], list[JSON]] | None:
        pods = kube.list("Pod", ns)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        conds = [pod_scheduled_condition(p) for p in pending]
        if len(bound) == 160 and all(c and c.get("status") == "False" for c in conds):
            return pods, kube.list("ResourceClaim", ns)
        return None

    pods, claims = wait_for(settled, 150, "160 pods bound and 40 marked unschedulable", interval=1.0)
    elapsed = time.monotonic() - t0
    # stays so: nothing more gets bound, no device freed or double-booked a little later
    time.sleep(2)
    pods, claims = kube.list("Pod", ns), kube.list("ResourceClaim", ns)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(bound) == 160 and len(pending) == 40
    assert check_state(pods, claims) == []
    devices = [d for c in claims for d in allocated_devices(c)]
    assert len(devices) == 160 == len(set(devices)), "a device was allocated twice"
    assert {d[1] for d in devices} == set(fleet.node_names)
    for p in pending:
        cond = pod_scheduled_condition(p)
        assert cond is not None and cond["reason"] == "Unschedulable", cond
        assert "0/21 nodes are available" in cond["message"] or "0/20 nodes" in cond["message"], cond["message"]
        assert "request gpu" in cond["message"] or "node(s) didn't match" in cond["message"], cond["message"]
        [name] = claim_names(p).values()
        [claim] = [c for c in claims if c["metadata"]["name"] == name]
        assert not allocated_devices(claim) and not (claim.get("status") or {}).get("reservedFor")
    print(f"\n200 pods / 160 devices: settled in {elapsed:.1f}s; "
          f"scheduler_schedule_attempts_total={scheduler.metric('scheduler_schedule_attempts_total'):.0f}")
