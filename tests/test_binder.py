"""The binding cycle: write order, optimistic concurrency and rollback (ARCHITECTURE §4)."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.fleet import scale_fleet
from scheduler.api.clusterapi import ApiError, Conflict
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.claimcontroller import create_pod_claims
from scheduler.simulate.memapi import InMemoryAPI


def _setup(pods: int = 1, nodes: int = 1, gpus: int = 2) -> tuple[InMemoryAPI, Cache, Scheduler, FakeClock]:
    api = InMemoryAPI()
    cache = Cache()
    api.watchers.append(cache.apply)
    clock = FakeClock(100.0)
    sched = Scheduler(cache, api, default_config(), clock=clock, inline_binding=True)
    api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for o in scale_fleet(nodes, gpus):
        api.load(o["kind"], o)
    api.load(
        "ResourceClaimTemplate",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one", "namespace": "default"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
            },
        },
    )
    for i in range(pods):
        api.load(
            "Pod",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default"},
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}],
                    "containers": [{"name": "c", "image": "x"}],
                },
            },
        )
    return api, cache, sched, clock


async def _prepare(api: InMemoryAPI) -> None:
    for p in api.list("Pod"):
        await create_pod_claims(api, p)


async def _drain(sched: Scheduler, clock: FakeClock, rounds: int = 20) -> None:
    for _ in range(rounds):
        info = sched.queue.pop()
        if info is None:
            wake = sched.queue.next_wakeup()
            if wake is None:
                return
            clock.set(wake)
            sched.queue.flush()
            continue
        await sched.run_once(info)


def _claim(api: InMemoryAPI) -> dict[str, Any]:
    [c] = api.list("ResourceClaim")
    return c


def test_write_order_finalizer_then_status_then_binding() -> None:
    async def go() -> None:
        api, _cache, sched, clock = _setup()
        await _prepare(api)
        api.writes.clear()
        await _drain(sched, clock)
        verbs = [(v, k) for v, k, _ in api.writes if k in ("ResourceClaim", "Pod")]
        assert verbs[:3] == [("MODIFIED", "ResourceClaim"), ("MODIFIED", "ResourceClaim"), ("MODIFIED", "Pod")]
        claim = _claim(api)
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert claim["status"]["reservedFor"][0]["name"] == "p0"
        assert api.list("Pod")[0]["spec"]["nodeName"]

    asyncio.run(go())


def test_status_conflict_is_retried_with_fresh_get() -> None:
    async def go() -> None:
        api, _cache, sched, clock = _setup()
        await _prepare(api)
        api.fail_next[("update/status", "ResourceClaim")] = [Conflict("stale")]
        await _drain(sched, clock)
        assert api.list("Pod")[0]["spec"]["nodeName"]
        assert _claim(api)["status"]["allocation"]

    asyncio.run(go())


def test_failed_binding_rolls_back_claim_and_retries() -> None:
    async def go() -> None:
        api, cache, sched, clock = _setup()
        await _prepare(api)
        api.fail_next[("bind", "Pod")] = [ApiError("etcd unavailable")]
        info = sched.queue.pop()
        assert info is not None
        out = await sched.run_once(info)
        assert out.node == ""
        claim = _claim(api)
        # allocation written for this attempt was undone, reservation dropped, device free again
        assert "allocation" not in claim["status"] and claim["status"]["reservedFor"] == []
        node = api.list("Node")[0]["metadata"]["name"]
        assert not cache.ledger.pool_devices_in_use(("gpu.nvidia.com", node))
        pod = api.list("Pod")[0]
        [cond] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["reason"] == "SchedulerError" and "binding" in cond["message"]
        assert sched.queue.pool("default/p0") == "backoff"
        await _drain(sched, clock)
        assert api.list("Pod")[0]["spec"]["nodeName"]
        assert _claim(api)["status"]["allocation"]

    asyncio.run(go())


def test_claim_allocated_elsewhere_is_not_overwritten() -> None:
    async def go() -> None:
        api, _cache, sched, _clock = _setup()
        await _prepare(api)
        info = sched.queue.pop()
        assert info is not None
        # another scheduler allocates the claim between our cycle and our write
        claim = _claim(api)
        foreign = {
            "devices": {
                "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "elsewhere", "device": "gpu-9"}]
            }
        }
        orig_update = api.update

        async def racing_update(kind: str, obj: dict[str, Any], subresource: str = "") -> dict[str, Any]:
            if kind == "ResourceClaim" and subresource == "status" and not racing_update.done:  # type: ignore[attr-defined]
                racing_update.done = True  # type: ignore[attr-defined]
                cur = await api.get("ResourceClaim", "default", claim["metadata"]["name"])
                cur["status"] = {"allocation": foreign}
                await orig_update("ResourceClaim", cur, "status")
            return await orig_update(kind, obj, subresource)

        racing_update.done = False  # type: ignore[attr-defined]
        api.update = racing_update  # type: ignore[method-assign]
        out = await sched.run_once(info)
        assert out.node == ""
        assert _claim(api)["status"]["allocation"] == foreign
        assert not api.list("Pod")[0]["spec"].get("nodeName")

    asyncio.run(go())


def test_binding_uid_precondition() -> None:
    async def go() -> None:
        api = InMemoryAPI()
        api.load(
            "Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": {}}
        )
        try:
            await api.bind("default", "p", "not-the-uid", "n1")
        except Conflict:
            pass
        else:
            raise AssertionError("binding with a wrong UID must fail")

    asyncio.run(go())
