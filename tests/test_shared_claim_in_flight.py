"""Pods sharing one unallocated ResourceClaim, scheduled back to back while the first pod's binding is in flight.

Live, binding cycles are tasks and the informer echoes our writes a little later. Before this, the second pod of a
claim either found it "in the process of being allocated" (a wasted, unschedulable cycle: the claim was reserved in
the ledger but not written) or, once written but not yet echoed, allocated it a second time and lost at PreBind
("got allocated elsewhere in the meantime", a 409 race and a retry). Upstream kube-scheduler 1.37.2 makes the second
pod wait (``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``: a claim with a pending allocation
in the assume cache is "in the process of being allocated"); here it shares the allocation in flight, pinned to its
node, and its PreBind waits for the first pod's write, then only adds itself to ``reservedFor``.

The API here delays its watch events (as a real informer does) until the test lets them through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from bench.fleet import scale_fleet
from scheduler.api.clusterapi import Conflict
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI

Obj = dict[str, Any]


class DelayedWatch:
    """Watch events reach the cache only when ``deliver`` is called (an informer a little behind the writes)."""

    def __init__(self, sink: Callable[[str, str, Obj], None]) -> None:
        self.sink = sink
        self.held: list[tuple[str, str, Obj]] = []

    def __call__(self, kind: str, event: str, obj: Obj) -> None:
        self.held.append((kind, event, obj))

    def deliver(self) -> None:
        held, self.held = self.held, []
        for ev in held:
            self.sink(*ev)


def _claim() -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }


def _pod(i: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"uid-p{i}"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _setup(pods: int, nodes: int = 3) -> tuple[InMemoryAPI, Scheduler, DelayedWatch]:
    api = InMemoryAPI()
    cache = Cache()
    watch = DelayedWatch(cache.apply)
    api.watchers.append(watch)
    sched = Scheduler(cache, api, default_config(), clock=FakeClock(100.0), inline_binding=False)
    api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for o in scale_fleet(nodes, 2):
        api.load(o["kind"], o)
    api.load("ResourceClaim", _claim())
    for i in range(pods):
        api.load("Pod", _pod(i))
    watch.deliver()
    return api, sched, watch


def _count_conflicts(api: InMemoryAPI) -> list[str]:
    """Every 409 the API answers to a ResourceClaim write, recorded."""
    seen: list[str] = []
    update = api.update

    async def counting(kind: str, obj: Obj, subresource: str = "") -> Obj:
        try:
            return await update(kind, obj, subresource)
        except Conflict:
            seen.append(f"{kind}/{subresource}")
            raise

    api.update = counting  # type: ignore[method-assign]
    return seen


async def _cycle(sched: Scheduler) -> str:
    info = sched.queue.pop()
    assert info is not None
    out = await sched.run_once(info)
    return out.node


@pytest.mark.parametrize("pods", [2, 8, 64])
def test_pods_of_one_claim_share_the_allocation_in_flight(pods: int) -> None:
    async def go() -> None:
        api, sched, watch = _setup(pods)
        conflicts = _count_conflicts(api)
        # every pod is scheduled before the first one's binding task has written anything
        nodes = [await _cycle(sched) for _ in range(pods)]
        assert len(set(nodes)) == 1 and nodes[0], nodes
        await sched.wait_bindings()
        watch.deliver()
        [claim] = api.list("ResourceClaim")
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == nodes[0]
        assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == sorted(f"p{i}" for i in range(pods))
        bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.list("Pod")}
        assert set(bound.values()) == {nodes[0]}
        # no wasted cycle: every attempt scheduled its pod, no retry, no conflict
        assert sched.attempts["scheduled"] == pods
        assert sched.attempts["unschedulable"] == 0 and sched.attempts["error"] == 0
        assert not [e for e in api.events if e.get("reason") == "FailedScheduling"]
        # the pods add themselves to reservedFor one after the other, each from the last write: no 409 among them
        assert conflicts == []

    asyncio.run(go())


def test_a_pod_after_the_write_but_before_its_watch_event_reuses_the_written_allocation() -> None:
    """The first pod's allocation is written; the informer has not brought it yet: the next pod of the claim
    sees the claim as written (allocated on that node), not as the informer's stale unallocated copy."""

    async def go() -> None:
        api, sched, watch = _setup(2)
        first = await _cycle(sched)
        await sched.wait_bindings()  # written; the watch event is still held back
        [claim] = api.list("ResourceClaim")
        assert claim["status"]["allocation"]
        second = await _cycle(sched)
        await sched.wait_bindings()
        watch.deliver()
        assert second == first
        [claim] = api.list("ResourceClaim")
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p0", "p1"]
        assert sched.attempts["scheduled"] == 2 and sched.attempts["error"] == 0
        assert sched.attempts["unschedulable"] == 0

    asyncio.run(go())


def test_the_sharing_pod_fails_and_retries_when_the_first_pods_binding_is_given_up() -> None:
    """The first pod's binding fails before its claim is written: the pod that shared the allocation in flight
    does not write a claim nobody allocated; its binding fails and it is tried again."""

    async def go() -> None:
        api, sched, watch = _setup(2)
        original = api.bind

        async def refuse_p0(namespace: str, name: str, uid: str, node: str) -> None:
            if name == "p0":
                from scheduler.api.clusterapi import ApiError

                raise ApiError(500, "binding refused by the test")
            await original(namespace, name, uid, node)

        await _cycle(sched)
        await _cycle(sched)
        api.bind = refuse_p0  # type: ignore[method-assign]
        await sched.wait_bindings()
        watch.deliver()
        [claim] = api.list("ResourceClaim")
        # p0's attempt rolled back: p1 holds the claim alone (or nobody does, when p1's PreBind saw p0 give up)
        reserved = [r["name"] for r in (claim.get("status") or {}).get("reservedFor") or []]
        assert "p0" not in reserved
        if reserved:
            assert claim["status"]["allocation"]
        pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.list("Pod")}
        assert pods["p0"] is None

    asyncio.run(go())
