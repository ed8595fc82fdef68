"""A pod no node can take is cheap (issue #23 item 5): the rejections reused from an equal pod are re-checked
once per distinct message, not once per node, and the message is still the pod's own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.framework import batch, runtime
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
    """Counts, in ``["own"]``, the Filter runs made to rename reused rejections (``Framework.own_rejections``,
    or ``BatchRunner._refusal`` which does the same from its groups)."""
    calls = {"own": 0}
    real_filter = runtime.Framework.run_filter
    inside = {"on": False}

    def wrap(real: Any) -> Any:
        def inner(self: Any, *a: Any, **k: Any) -> Any:
            inside["on"] = True
            try:
                return real(self, *a, **k)
            finally:
                inside["on"] = False

        return inner

    def run_filter(self: Any, *a: Any, **k: Any) -> Any:
        if inside["on"]:
            calls["own"] += 1
        return real_filter(self, *a, **k)

    monkeypatch.setattr(runtime.Framework, "own_rejections", wrap(runtime.Framework.own_rejections))
    monkeypatch.setattr(batch.BatchRunner, "_refusal", wrap(batch.BatchRunner._refusal))
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


def _mixed_gpu_objs() -> list[dict[str, Any]]:
    """Nodes of one shareable GPU of 100 * (i + 1) milli; pods asking 300 milli (one signature) interleaved with
    pods asking 100 milli (another): the 300s fill what they can, then are refused while the 100s keep changing
    nodes between the refusals, so the refused pods' rejections come from pods bound since (gone), from refused
    pods (known), and from their own Filter on the changed nodes."""
    objs = _gpu_objs(12, 0)
    objs += [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"gpu-{m}", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"milli": str(m)}}}}
            ]}}},
        }
        for m in (100, 300)
    ]
    for i in range(60):
        m = 100 if i % 3 == 2 else 300
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i:02d}", "namespace": "default",
                             "creationTimestamp": f"2026-01-01T00:{i:02d}:00Z"},
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{m}"}],
                },
            }
        )
    return objs


def _outcomes(objs: list[dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
    res = asyncio.run(simulate([dict(o) for o in objs]))
    out = {}
    for pod in (o for o in res.items if o["kind"] == "Pod"):
        [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        spec = pod["spec"]
        out[pod["metadata"]["name"]] = (spec.get("nodeName", ""), cond.get("reason", ""), cond.get("message", ""))
    return out


def test_refusal_groups_give_the_statuses_of_filtering_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refused pods' statuses kept in groups across cycles (BatchRunner._refusal, updated for the changed
    nodes and the owners gone) give every pod the node and the message that renaming node by node gives, and that
    running every plugin on every node (no reuse at all) gives."""
    objs = _mixed_gpu_objs()
    monkeypatch.setenv("DRA_SCHEDULER_REFUSALS", "groups")
    grouped = _outcomes(objs)
    monkeypatch.setenv("DRA_SCHEDULER_REFUSALS", "nodes")
    by_node = _outcomes(objs)
    monkeypatch.setenv("DRA_SCHEDULER_REUSE", "off")
    fresh = _outcomes(objs)
    refused = [k for k, v in grouped.items() if not v[0]]
    assert len(refused) >= 10 and len(refused) < len(grouped) - 5, grouped
    assert grouped == by_node == fresh


def test_a_refused_signature_fits_again_when_a_node_changes() -> None:
    """Groups kept for a refused signature must follow the nodes: after every node refused pod 0, one node changes
    to fit, and the next equal pod is placed there; when it stops fitting the next one is refused with the
    counts of every node."""
    from scheduler.cache.cache import Cache
    from tests.test_batching import World, _cycle, _node, _pod, _schedulers

    names = [f"node-{i:03d}" for i in range(6)]
    world = World(names, 0)
    for name in names:
        world.change(name, False, 50, 0)
    cache = Cache()
    for name in names:
        cache.apply("Node", "ADDED", _node(name))
    scheds = _schedulers(world, cache, 0, ("Static",))
    got = {mode: _cycle(s, _pod(0)) for mode, s in scheds.items()}
    assert got["batch"][0] is None and got["batch"] == got["off"]
    world.change("node-004", True, 50, 0)
    got = {mode: _cycle(s, _pod(1)) for mode, s in scheds.items()}
    assert got["batch"][0] == "node-004" and got["batch"] == got["off"]
    world.change("node-004", False, 50, 0)
    world.change("node-001", False, 60, 0)
    got = {mode: _cycle(s, _pod(2)) for mode, s in scheds.items()}
    assert got["batch"][0] is None and got["batch"] == got["off"] == got["memo"]
    assert got["batch"][1].startswith("0/6 nodes are available: 1 0 does not fit, 1 1 does not fit,")
