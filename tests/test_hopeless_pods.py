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
