"""The example workloads of manifests/examples/ on the demo fleet, scheduled live (mirrors
tests/test_simulate.py): claims allocated as ARCHITECTURE §3.2 says, template claims made by the real
resourceclaim controller, the shared claim on one device, the impossible pod explained."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import cluster
from e2e.fleet import (
    DELETE_PROTECTION,
    POD_CLAIM_NAME_ANNOTATION,
    Kube,
    SchedulerProcess,
    allocated_devices,
    check_state,
    claim_names,
    create_demo_fleet,
    pod_scheduled_condition,
    wait_for,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "manifests" / "examples"
UNSCHEDULABLE = "llm-405b-single-node"


class Live:
    def __init__(self, kube: Kube, namespaces: list[str]) -> None:
        self.kube = kube
        self.namespaces = namespaces
        self.refresh()

    def refresh(self) -> None:
        self.pods = {p["metadata"]["name"]: p for ns in self.namespaces for p in self.kube.list("Pod", ns)}
        self.claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for ns in self.namespaces
            for c in self.kube.list("ResourceClaim", ns)
        }
        self.devices = {
            (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): d
            for s in self.kube.list("ResourceSlice")
            for d in s["spec"].get("devices") or []
        }

    def claims_of(self, pod: str) -> list[dict[str, Any]]:
        p = self.pods[pod]
        return [self.claims[(p["metadata"]["namespace"], n)] for n in claim_names(p).values() if n]

    def node_of(self, pod: str) -> str:
        return str(self.pods[pod]["spec"].get("nodeName") or "")

    def devices_of(self, pod: str) -> list[tuple[str, dict[str, Any]]]:
        """(request, device) of every allocation result of the pod's claims."""
        out = []
        for c in self.claims_of(pod):
            for r in c["status"]["allocation"]["devices"]["results"]:
                out.append((r["request"], self.devices[(r["driver"], r["pool"], r["device"])]))
        return out


def _settled(live: Live) -> bool:
    live.refresh()
    if len(live.pods) != 9:
        return False
    for name, p in live.pods.items():
        if name == UNSCHEDULABLE:
            cond = pod_scheduled_condition(p)
            if not cond or cond.get("status") != "False":
                return False
        elif not p["spec"].get("nodeName") or p["status"].get("phase") != "Running":
            return False  # bound, and kwok (the fake kubelet) runs it
    return True


@pytest.fixture(scope="module")
def live(cluster_info: cluster.ClusterInfo, kube: Kube, scheduler: SchedulerProcess) -> Live:
    create_demo_fleet(kube)
    namespaces = []
    for f in sorted(EXAMPLES.glob("*.yaml")):
        if f.name.startswith("00-"):
            continue  # the fleet: created above as a driver would (slices owned by the real Node UIDs)
        cluster_info.kubectl("apply", "-f", str(f))  # as a user would
        namespaces += [d["metadata"]["name"] for d in yaml.safe_load_all(f.read_text()) if d["kind"] == "Namespace"]
    state = Live(kube, sorted(set(namespaces)))
    wait_for(lambda: _settled(state), 60, "every example pod bound and running, llm-405b-single-node unschedulable")
    return state


def test_every_example_pod_is_bound_with_claims_allocated_as_the_contract_says(live: Live) -> None:
    assert len(live.pods) == 9
    bound = [n for n in live.pods if live.node_of(n)]
    assert len(bound) == 8, sorted(bound)
    assert check_state(list(live.pods.values()), list(live.claims.values())) == []
    for name in bound:
        pod = live.pods[name]
        node = live.node_of(name)
        claims = live.claims_of(name)
        assert claims and len(claims) == len(pod["spec"]["resourceClaims"]), name
        for c in claims:
            assert DELETE_PROTECTION in c["metadata"]["finalizers"]
            alloc = c["status"]["allocation"]
            assert alloc["devices"]["results"], c["metadata"]["name"]
            for r in alloc["devices"]["results"]:
                assert r["driver"] == "gpu.nvidia.com" and r["pool"] == node  # node-local pool = node name
                assert (r["driver"], r["pool"], r["device"]) in live.devices  # a published device
            assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
            assert {"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]} in c["status"]["reservedFor"]
        # kwok ran the pod: the binding reached the "kubelet"
        assert pod["status"].get("phase") in ("Running", "Succeeded"), (name, pod["status"].get("phase"))


def test_template_claims_were_created_by_the_resourceclaim_controller(live: Live) -> None:
    templated = [n for n, p in live.pods.items() if any(
        pc.get("resourceClaimTemplateName") for pc in p["spec"]["resourceClaims"])]
    assert sorted(templated) == ["finetune-qwen", "llm-405b-single-node", "mig-inference-0", "mig-inference-1",
                                 "training-job"]
    for name in templated:
        pod = live.pods[name]
        [status] = pod["status"]["resourceClaimStatuses"]  # written by kube-controller-manager
        claim = live.claims[(pod["metadata"]["namespace"], status["resourceClaimName"])]
        [owner] = claim["metadata"]["ownerReferences"]
        assert owner["kind"] == "Pod" and owner["name"] == name and owner["uid"] == pod["metadata"]["uid"]
        assert owner["controller"] is True
        assert claim["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] == status["name"]
        assert claim["metadata"]["generateName"] == f"{name}-{status['name']}-"


def test_expected_placements(live: Live) -> None:
    # (a) one whole A100 80GB by attributes and capacity
    [(_, gpu)] = live.devices_of("finetune-qwen")
    assert gpu["attributes"]["productName"]["string"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["attributes"]["type"]["string"] == "gpu"
    # (c) MIG: 3g.40gb + 1g.10gb of the same parent GPU, on the static-MIG node
    for pod in ("mig-inference-0", "mig-inference-1"):
        assert live.node_of(pod) == "a100-mig-01"
        parts = dict(live.devices_of(pod))
        assert parts["large-slice"]["attributes"]["profile"]["string"] == "3g.40gb"
        assert parts["small-slice"]["attributes"]["profile"]["string"] == "1g.10gb"
        assert parts["large-slice"]["attributes"]["parentUUID"] == parts["small-slice"]["attributes"]["parentUUID"]
    # (d) CEL brand + architecture + memory: a Hopper
    [(req, h100)] = live.devices_of("gpu-workload")
    assert req == "gpu/nvidia-gpu" and live.node_of("gpu-workload") == "dgx-h100-01"
    assert h100["attributes"]["architecture"]["string"] == "Hopper"
    # (e) firstAvailable: the subrequest named in the result is the one the device satisfies
    [(req, dev)] = live.devices_of("gpu-deployment")
    product = dev["attributes"]["productName"]["string"]
    assert (req, product) in {("gpu/h100", "NVIDIA H100 80GB HBM3"), ("gpu/a100", "NVIDIA A100-SXM4-80GB")}, (
        req, product)
    # (f) 4 A100s of one node and one product
    devs = live.devices_of("training-job")
    assert len(devs) == 4 and {r for r, _ in devs} == {"gpus"}
    assert {d["attributes"]["productName"]["string"] for _, d in devs} == {"NVIDIA A100-SXM4-80GB"}
    assert live.node_of("training-job") in ("hgx-a100-01", "a100-mig-01")


def test_shared_claim_is_used_by_two_pods_on_one_device(live: Live) -> None:
    a, b = live.pods["qwen-inference"], live.pods["embedding-service"]
    assert live.node_of("qwen-inference") == live.node_of("embedding-service") == "t4-01"
    claim = live.claims[("inference", "shared-inference-gpu")]
    assert live.claims_of("qwen-inference") == live.claims_of("embedding-service") == [claim]
    [dev] = allocated_devices(claim)
    assert dev[1] == "t4-01"
    reserved = {(r["name"], r["uid"]) for r in claim["status"]["reservedFor"]}
    assert reserved == {("qwen-inference", a["metadata"]["uid"]), ("embedding-service", b["metadata"]["uid"])}
    # nobody else got that device
    others = [c for k, c in live.claims.items() if k != ("inference", "shared-inference-gpu")]
    assert all(dev not in allocated_devices(c) for c in others)


def test_unschedulable_example_says_which_request_cannot_be_met(live: Live, kube: Kube) -> None:
    pod = live.pods[UNSCHEDULABLE]
    assert not live.node_of(UNSCHEDULABLE)
    cond = pod_scheduled_condition(pod)
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "0/5 nodes are available" in cond["message"]
    assert "request gpus" in cond["message"] and "needs 16 device(s)" in cond["message"], cond["message"]
    [claim] = live.claims_of(UNSCHEDULABLE)
    assert not (claim.get("status") or {}).get("allocation")
    assert not (claim.get("status") or {}).get("reservedFor")
    events = kube.list("Event", "too-big", fieldSelector=f"involvedObject.name={UNSCHEDULABLE}")
    assert any(e["reason"] == "FailedScheduling" and "needs 16 device(s)" in e["message"] for e in events), events


def test_no_device_is_allocated_twice(live: Live) -> None:
    seen: dict[tuple[str, str, str], str] = {}
    for (_ns, name), c in live.claims.items():
        for dev in allocated_devices(c):
            assert dev not in seen, (dev, seen.get(dev), name)
            seen[dev] = name
    assert len(seen) == 1 + 1 + 1 + 2 + 2 + 4 + 1  # finetune, shared, cel, mig x2 (2 each), training, firstAvailable
