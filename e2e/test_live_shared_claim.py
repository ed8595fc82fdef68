"""Pods sharing one ResourceClaim, created at once, on the live 1.37.2 control plane.

Before, the second pod of an unallocated claim was scheduled while the first one's binding was in flight and lost
a 409 race on the claim's status ("got allocated elsewhere in the meantime", though both chose the same node), or
found it "in the process of being allocated": a wasted cycle and a retry. Now the allocation in flight is shared
(plugins/dra/state.py ``_InFlight``): every pod lands on the claim's node in one attempt, the claim is allocated
once and reserved for all of them. Upstream makes the later pods wait instead (kubernetes v1.37.2
``pkg/scheduler/framework/plugins/dynamicresources``: a claim with a pending allocation is "in the process of being
allocated"); ``reservedFor`` holds at most 256 consumers (k8s.io/api resource/v1 ``ResourceClaimReservedForMaxSize``).
"""

from __future__ import annotations

import pytest

from e2e.fleet import (
    Kube,
    SchedulerProcess,
    allocated_devices,
    create_scale_fleet,
    fresh_namespace,
    gpu_pod,
    wait_for,
)


@pytest.mark.parametrize("pods", [2, 8, 64])
def test_pods_created_together_share_one_claim_without_a_retry(
    kube: Kube, scheduler: SchedulerProcess, pods: int
) -> None:
    ns = fresh_namespace(kube, f"shared-{pods}")
    fleet = f"shared-{pods}"
    create_scale_fleet(kube, fleet, 3, 2)
    kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        }
    )
    attempts = {r: scheduler.metric_labeled("scheduler_schedule_attempts_total", result=r) for r in
                ("scheduled", "unschedulable", "error")}
    conflicts = scheduler.metric_labeled("dra_scheduler_api_requests_total", resource="resourceclaims/status",
                                         code="409")
    kube.create_many([gpu_pod(ns, f"p-{i:02d}", claim="shared", fleet=fleet) for i in range(pods)], workers=16)

    def all_bound() -> list[dict] | None:
        got = kube.list("Pod", ns)
        return got if len(got) == pods and all(p["spec"].get("nodeName") for p in got) else None

    bound = wait_for(all_bound, 120, f"{pods} pods of one claim bound", interval=0.5)
    nodes = {p["spec"]["nodeName"] for p in bound}
    assert len(nodes) == 1, nodes
    claim = kube.get("ResourceClaim", "shared", ns)
    assert len(allocated_devices(claim)) == 1
    assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] in nodes
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == sorted(p["metadata"]["name"] for p in bound)
    # one attempt per pod: no conflict on the claim, no failed binding, no "being allocated" wait
    after = {r: scheduler.metric_labeled("scheduler_schedule_attempts_total", result=r) for r in attempts}
    assert after["scheduled"] - attempts["scheduled"] == pods, (attempts, after)
    assert after["unschedulable"] == attempts["unschedulable"], (attempts, after)
    assert after["error"] == attempts["error"], (attempts, after)
    assert scheduler.metric_labeled("dra_scheduler_api_requests_total", resource="resourceclaims/status",
                                    code="409") == conflicts
    assert "allocated elsewhere" not in scheduler.tail(400)
