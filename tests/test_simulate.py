"""End-to-end tests of the offline simulator on the example workloads (ARCHITECTURE §3.2 contract)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from scheduler.simulate.simulation import load_objects, run_simulation, simulate, to_json, to_table

EXAMPLES = "manifests/examples/"


@pytest.fixture(scope="module")
def result() -> Any:
    return run_simulation([EXAMPLES])


def _index(items: list[dict[str, Any]], kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items if o["kind"] == kind}


def _pod_claims(pod: dict[str, Any], claims: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    ns = pod["metadata"]["namespace"]
    gen = {s["name"]: s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses", [])}
    out = []
    for pc in pod["spec"].get("resourceClaims", []):
        name = pc.get("resourceClaimName") or gen[pc["name"]]
        out.append(claims[(ns, name)])
    return out


def _devices(fleet: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for o in fleet:
        if o["kind"] == "ResourceSlice":
            for d in o["spec"].get("devices", []):
                out[(o["spec"]["driver"], o["spec"]["pool"]["name"], d["name"])] = d
    return out


def test_every_example_pod_is_allocated_or_explained(result: Any) -> None:
    claims = _index(result.items, "ResourceClaim")
    pods = _index(result.items, "Pod")
    assert pods, "the examples define pods"
    for (_ns, name), pod in pods.items():
        node = pod["spec"].get("nodeName")
        if node:
            for claim in _pod_claims(pod, claims):
                alloc = claim["status"]["allocation"]
                assert alloc["devices"]["results"], claim["metadata"]["name"]
                assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
                assert {"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]} in claim["status"][
                    "reservedFor"
                ]
                for r in alloc["devices"]["results"]:
                    assert r["pool"] == node  # NVIDIA driver: pool = node name, node-local slices
                assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
        else:
            cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            assert cond["status"] == "False"
            assert cond["reason"] in ("Unschedulable", "SchedulerError")
            assert "request" in cond["message"], cond["message"]


def test_expected_placements(result: Any) -> None:
    pods = _index(result.items, "Pod")
    claims = _index(result.items, "ResourceClaim")
    fleet = load_objects([EXAMPLES + "00-fleet.yaml"])
    devices = _devices(fleet)

    def node_of(name: str) -> str:
        [pod] = [p for (ns, n), p in pods.items() if n == name]
        return str(pod["spec"].get("nodeName", ""))

    def devices_of(name: str) -> list[dict[str, Any]]:
        [pod] = [p for (ns, n), p in pods.items() if n == name]
        out = []
        for c in _pod_claims(pod, claims):
            for r in c["status"]["allocation"]["devices"]["results"]:
                out.append(devices[(r["driver"], r["pool"], r["device"])])
        return out

    # (a) an A100 with >= 40Gi
    [gpu] = devices_of("finetune-qwen")
    assert gpu["attributes"]["productName"]["string"] == "NVIDIA A100-SXM4-80GB"
    # (b) the shared inference claim: two pods, one node, one device, two consumers
    assert node_of("qwen-inference") == node_of("embedding-service") != ""
    shared = [c for c in claims.values() if len(c.get("status", {}).get("reservedFor", [])) == 2]
    assert len(shared) == 1 and len(shared[0]["status"]["allocation"]["devices"]["results"]) == 1
    # (c) MIG: the two partitions come from the same parent GPU
    for pod in ("mig-inference-0", "mig-inference-1"):
        parts = devices_of(pod)
        assert len(parts) == 2
        assert parts[0]["attributes"]["parentUUID"] == parts[1]["attributes"]["parentUUID"]
        assert {p["attributes"]["profile"]["string"] for p in parts} == {"3g.40gb", "1g.10gb"}
    # (e) firstAvailable: the pods are tried in file order (the order `kubectl apply` creates them), so both the
    # A100 node and the H100 node are partly used when gpu-deployment comes; DeviceFragmentation's score (the
    # stranded capacity under the examples' request mix) prefers the H100 node, where the first subrequest (h100)
    # is satisfied: the subrequest chosen is the first one that node can satisfy
    assert node_of("gpu-deployment") == "dgx-h100-01"
    [claim] = _pod_claims(pods[("gpu-workload", "gpu-deployment")], claims)
    assert [r["request"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu/h100"]
    # (g) impossible request: explained, naming the request
    assert node_of("llm-405b-single-node") == ""


def test_unschedulable_message_names_request(result: Any) -> None:
    pods = _index(result.items, "Pod")
    [pod] = [p for (ns, n), p in pods.items() if n == "llm-405b-single-node"]
    [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "Unschedulable"
    assert "0/5 nodes are available" in cond["message"]
    assert "request gpus" in cond["message"] or "request " in cond["message"]
    assert "needs 16 device(s)" in cond["message"]
    assert any(
        e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "llm-405b-single-node"
        for e in result.events
    )


def test_json_contract_and_determinism() -> None:
    a = json.loads(to_json(run_simulation([EXAMPLES])))
    b = json.loads(to_json(run_simulation([EXAMPLES])))
    assert set(a) == {"items", "deleted", "summary"}
    assert set(a["summary"]) == {"pods", "scheduled", "unschedulable", "preempted", "seconds"}
    assert a["deleted"] == [] and a["summary"]["preempted"] == 0  # nothing preempted in the examples
    a["summary"].pop("seconds")
    b["summary"].pop("seconds")
    assert a == b
    kinds = {o["kind"] for o in a["items"]}
    assert kinds <= {"Pod", "ResourceClaim", "PodGroup"}
    gen = [
        o
        for o in a["items"]
        if o["kind"] == "ResourceClaim"
        and "resource.kubernetes.io/pod-claim-name" in o["metadata"].get("annotations", {})
    ]
    assert gen, "template claims are created by the simulated claim controller"
    for c in gen:
        [owner] = c["metadata"]["ownerReferences"]
        assert owner["kind"] == "Pod" and owner["controller"] is True


def test_table_lists_every_pod(result: Any) -> None:
    table = to_table(result)
    for ns, name in _index(result.items, "Pod"):
        assert f"{ns}/{name}" in table
    assert "pods scheduled" in table


def _gpu_pod(name: str, template: str = "one") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _template(name: str, count: int, cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": count}}]}}
        },
    }


def test_no_device_is_allocated_twice_when_the_fleet_fills() -> None:
    from bench.fleet import scale_fleet

    objs = scale_fleet(3, 4) + [_template("one", 1)] + [_gpu_pod(f"p{i}") for i in range(14)]
    res = asyncio.run(simulate(objs))
    assert res.summary["scheduled"] == 12 and res.summary["unschedulable"] == 2
    seen: set[tuple[str, str, str]] = set()
    for c in res.items:
        if c["kind"] == "ResourceClaim" and c.get("status", {}).get("allocation"):
            for r in c["status"]["allocation"]["devices"]["results"]:
                dev = (r["driver"], r["pool"], r["device"])
                assert dev not in seen
                seen.add(dev)
    assert len(seen) == 12


def test_pod_waits_for_its_device_class_then_schedules() -> None:
    """A pod whose class does not exist is unschedulable with a clear message, not an error loop."""
    from bench.fleet import scale_fleet

    objs = [o for o in scale_fleet(1, 2)] + [_template("one", 1, cls="missing-class"), _gpu_pod("p")]
    res = asyncio.run(simulate(objs))
    [pod] = [o for o in res.items if o["kind"] == "Pod"]
    [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "Unschedulable"
    assert "device class missing-class does not exist" in cond["message"]


def test_cel_runtime_error_is_reported_and_other_pods_still_schedule() -> None:
    from bench.fleet import scale_fleet

    bad = _template("bad", 1)
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].noSuchAttribute == "x"'}}
    ]
    objs = [*scale_fleet(1, 2), bad, _template("one", 1), _gpu_pod("broken", "bad"), _gpu_pod("fine")]
    res = asyncio.run(simulate(objs))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    assert pods["fine"]["spec"].get("nodeName")
    [cond] = [c for c in pods["broken"]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "SchedulerError"
    assert "noSuchAttribute" in cond["message"] and "request gpu" in cond["message"]


def test_existing_allocations_and_bound_pods_count_as_used() -> None:
    from bench.fleet import scale_fleet

    fleet = scale_fleet(1, 2)
    node = next(o for o in fleet if o["kind"] == "Node")["metadata"]["name"]
    existing = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "old", "namespace": "default", "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0"}]
                }
            }
        },
    }
    objs = [*fleet, existing, _template("one", 1), _gpu_pod("a"), _gpu_pod("b")]
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    assert res.summary == {**res.summary, "scheduled": 1, "unschedulable": 1}
    used = [
        r["device"]
        for c in res.items
        if c["kind"] == "ResourceClaim" and c["metadata"]["name"] != "old" and c.get("status", {}).get("allocation")
        for r in c["status"]["allocation"]["devices"]["results"]
    ]
    assert used == ["gpu-1"]


def test_pure_python_cel_fallback_gives_the_same_placements(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole pipeline also runs on cel-python (the portable fallback) with identical results."""
    fast = json.loads(to_json(run_simulation([EXAMPLES])))
    monkeypatch.setenv("DRA_SCHEDULER_CEL_ENGINE", "cel-python")
    slow_result = run_simulation([EXAMPLES])
    sched = slow_result.scheduler
    assert sched is not None
    assert sched.profiles["dra-scheduler"].instances["DynamicResources"].selectors.engine.name == "cel-python"
    slow = json.loads(to_json(slow_result))
    fast["summary"].pop("seconds")
    slow["summary"].pop("seconds")
    assert fast == slow


def test_scheduled_event_explains_the_device_choice(result: Any) -> None:
    [msg] = [
        e["message"]
        for e in result.events
        if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "training-job"
    ]
    # 4 GPUs of an HGX A100 (NVSwitch, NV12 between every pair)
    assert msg.endswith("gpu-0..3 NV12 all-pairs, NUMA 3+1") or "NV12 all-pairs" in msg


def test_first_available_rank_is_normalised_as_upstream() -> None:
    """KEP-4816 / kubernetes 1.37.2 dynamicresources.go NormalizeScore: DefaultNormalizeScore (the best
    node 100, the others in proportion to the max), weight 2 in the default profile as upstream."""
    from plugins.dra.plugin import DynamicResources
    from scheduler.framework.interface import NodeScore

    plugin = DynamicResources({})
    scores = [NodeScore("h100", 8), NodeScore("a100", 7), NodeScore("l40s", 6)]
    plugin.normalize_score(None, None, scores)  # type: ignore[arg-type]
    assert [s.score for s in scores] == [100, 87, 75]
    none = [NodeScore("a", 0), NodeScore("b", 0)]
    plugin.normalize_score(None, None, none)  # type: ignore[arg-type]
    assert [s.score for s in none] == [0, 0]
    from scheduler.config.schedulerconfig import DEFAULT_PLUGINS

    weights = {r.name: r.weight for r in DEFAULT_PLUGINS["score"]}
    assert weights["DynamicResources"] == 2
