"""A pod no node can take is cheap (issue #23 item 5): the rejections reused from an equal pod are re-checked
once per distinct message, not once per node, and the message is still the pod's own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.framework import runtime
from scheduler.simulate.simulation import simulate


def _objs(nodes: int, pods: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for i in range(nodes):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i:03d}"},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}},
            }
        )
    for i in range(pods):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"big-{i}",
                    "namespace": "default",
                    "creationTimestamp": f"2026-01-01T00:0{i}:00Z",
                },
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}],
                },
            }
        )
    return objs


def _count_refilters(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts, in ``["own"]``, the Filter runs made inside ``Framework.own_rejections``."""
    calls = {"own": 0}
    real_own = runtime.Framework.own_rejections
    real_filter = runtime.Framework.run_filter
    inside = {"on": False}

    def own(self: Any, *a: Any, **k: Any) -> Any:
        inside["on"] = True
        try:
            return real_own(self, *a, **k)
        finally:
            inside["on"] = False

    def run_filter(self: Any, *a: Any, **k: Any) -> Any:
        if inside["on"]:
            calls["own"] += 1
        return real_filter(self, *a, **k)

    monkeypatch.setattr(runtime.Framework, "own_rejections", own)
    monkeypatch.setattr(runtime.Framework, "run_filter", run_filter)
    return calls


def test_reused_rejections_are_rechecked_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_refilters(monkeypatch)
    res = asyncio.run(simulate(_objs(200, 3)))
    assert res.summary["unschedulable"] == 3
    # the 2nd and 3rd pods reuse the 1st pod's 200 "Insufficient cpu" rejections: one re-check each
    assert 1 <= calls["own"] <= 2, calls
    for pod in (o for o in res.items if o["kind"] == "Pod"):
        [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["message"].startswith("0/200 nodes are available: 200 Insufficient cpu.")


def test_device_rejection_is_classified_once_per_node_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamicResources decides Unschedulable (eviction may help) vs UnschedulableAndUnresolvable once per node
    state and claim signature, not at every attempt of every equal pod."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import test_fragmentation as tf

    from plugins.dra import plugin as dra

    calls = {"n": 0}
    real = dra.DynamicResources._enough_devices

    def counted(self: Any, *a: Any) -> Any:
        calls["n"] += 1
        return real(self, *a)

    monkeypatch.setattr(dra.DynamicResources, "_enough_devices", counted)
    objs: list[dict[str, Any]] = [tf.CLASS]
    for i in range(20):
        objs += tf._node(f"n{i:02d}", "8", 1)
        objs += tf._pod(f"fill-{i}", 1, count=1, milli=1000)
    for i in range(5):
        objs += tf._pod(f"late-{i}", 10 + i, count=1, milli=1000)
    res = asyncio.run(simulate(objs))
    assert res.summary["scheduled"] == 20 and res.summary["unschedulable"] == 5
    # 20 nodes, each classified for the first late pod; the 4 equal pods after it reuse the verdicts
    assert calls["n"] <= 2 * 20, calls


def _gpu_objs(nodes: int, pods: int) -> list[dict[str, Any]]:
    """Node i has one shareable GPU of capacity 100 * (i + 1) milli (a distinct rejection message per node); each
    pod's template claim asks 1000 milli of one GPU, which no node has."""
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"milli": "1000"}}},
                            }
                        ]
                    }
                }
            },
        },
    ]
    for i in range(nodes):
        name = f"n{i:02d}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}},
            }
        )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": "gpu.example.com",
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "nodeName": name,
                    "devices": [
                        {
                            "name": "gpu-0",
                            "allowMultipleAllocations": True,
                            "capacity": {"milli": {"value": str(100 * (i + 1))}},
                        }
                    ],
                },
            }
        )
    for i in range(pods):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default", "creationTimestamp": f"2026-01-01T00:0{i}:00Z"},
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                },
            }
        )
    return objs


def test_device_rejections_reused_from_an_equal_pod_name_the_pods_own_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight nodes, eight distinct DynamicResources messages, three equal pods (template claims: each its own
    generated claim). The 2nd and 3rd pods reuse the 1st pod's verdicts; DynamicResources.retarget_template/fill name
    their own claims in the messages, so nothing is filtered again (before: one Filter per distinct message and
    pod, 16 here; on the openb trace replay 29% of the run), and no message names another pod's claim."""
    calls = _count_refilters(monkeypatch)
    res = asyncio.run(simulate(_gpu_objs(8, 3)))
    assert res.summary["unschedulable"] == 3
    assert calls["own"] == 0, calls
    claims = {o["metadata"]["name"] for o in res.items if o["kind"] == "ResourceClaim"}
    assert len(claims) == 3
    for pod in (o for o in res.items if o["kind"] == "Pod"):
        [mine] = [s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]]
        [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        msg = cond["message"]
        assert f"claim default/{mine}," in msg, msg
        assert msg.count("at most") == 8, msg  # one message per node, each with what is left there
        for other in claims - {mine}:
            assert f"default/{other}" not in msg


def test_swap_claims_replaces_whole_keys_only() -> None:
    from plugins.dra.plugin import _swap_claims

    swap = {"ns/a": "ns/x", "ns/a-1": "ns/y"}
    text = "1 claim ns/a, request g; resourceclaim ns/a-1 not available; claim ns/a-10, r; claim ns/a"
    assert (
        _swap_claims(text, swap)
        == "1 claim ns/x, request g; resourceclaim ns/y not available; claim ns/a-10, r; claim ns/x"
    )
