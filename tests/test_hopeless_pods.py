"""A pod no node can take is cheap (issue #23 item 5): the rejections reused from an equal pod are re-checked
once per distinct message, not once per node, and the message is still the pod's own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.framework import runtime
from scheduler.simulate import simulate


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


def test_reused_rejections_are_rechecked_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
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
