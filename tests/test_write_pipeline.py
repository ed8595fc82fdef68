"""The write path at the client QPS budget (issue #16): a pod's writes before newer pods' writes, Leases first,
other requests never starved, requests counted by verb and resource, and no request per pod beyond the
finalizer, the allocation and the Binding.

The rate limiter runs on a fake clock (its sleep advances the clock) and the connection on a fake transport
(an answer at once): the order of the grants is the assertion, never a duration.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from typing import Any

import pytest

from bench.fleet import scale_fleet
from scheduler.api.clusterapi import Obj, pod_writes, write_sequence
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.kube.client import KubeConnection, verb_and_resource
from scheduler.kube.flowcontrol import TokenBucket
from scheduler.kube.metrics import SchedulerMetrics
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.claimcontroller import create_pod_claims
from scheduler.simulate.memapi import InMemoryAPI
from tests.fake_apiserver import eventually


class FakeTime:
    """The limiter's clock and sleep: sleeping advances the clock, then lets every ready task run."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        for _ in range(20):
            await asyncio.sleep(0)


class FakeConnection(KubeConnection):
    """A KubeConnection whose transport answers every request at once with ``{}`` and records its path."""

    def __init__(self, qps: float = 100.0, burst: int = 1) -> None:
        super().__init__("http://fake.invalid", qps=qps, burst=burst)
        self.time = FakeTime()
        self.limiter = TokenBucket(qps, burst, clock=self.time.clock, sleep=self.time.sleep)
        self.sent: list[str] = []

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> tuple[int, str | None, bytes]:
        self.sent.append(f"{method} {path}")
        await asyncio.sleep(0)
        return 200, None, b"{}"


CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
PODS = "/api/v1/namespaces/ns/pods"


async def _binding_cycle(conn: KubeConnection, i: int) -> None:
    """A pod's three writes, each sent once the one before it was answered."""
    await conn.request("PUT", f"{CLAIMS}/c{i}", body={})
    await conn.request("PUT", f"{CLAIMS}/c{i}/status", body={})
    await conn.request("POST", f"{PODS}/p{i}/binding", body={})


def _pods_in_order(sent: list[str]) -> list[int]:
    out = []
    for s in sent:
        name = s.rsplit("/", 2)[-2] if s.endswith(("/status", "/binding")) else s.rsplit("/", 1)[-1]
        out.append(int(name[1:]))
    return out


async def test_older_pods_writes_are_granted_before_newer_pods_writes() -> None:
    conn = FakeConnection(qps=100, burst=1)
    await conn.limiter.acquire()  # the bucket is empty: every write below waits for its token
    tasks = []
    for i in range(5):
        with pod_writes():  # as Scheduler.run_once starts each binding cycle
            tasks.append(asyncio.create_task(_binding_cycle(conn, i)))
    await asyncio.gather(*tasks)
    # pod 0's allocation and Binding overtake the finalizer writes of pods 1-4 (a FIFO limiter: 0 1 2 3 4 0 1 ...)
    assert _pods_in_order(conn.sent) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert conn.limiter.granted["pods"] == 15
    await conn.close()


async def test_without_binding_cycles_requests_keep_their_order() -> None:
    conn = FakeConnection(qps=100, burst=1)
    await conn.limiter.acquire()
    tasks = [asyncio.create_task(_binding_cycle(conn, i)) for i in range(3)]  # no pod_writes: FIFO
    await asyncio.gather(*tasks)
    assert _pods_in_order(conn.sent) == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    assert conn.limiter.granted["other"] == 10  # with the first acquire
    await conn.close()


async def test_unprioritised_requests_are_not_starved_by_binding_cycles() -> None:
    conn = FakeConnection(qps=100, burst=1)
    await conn.limiter.acquire()
    tasks = []
    for i in range(10):
        with pod_writes():
            tasks.append(asyncio.create_task(_binding_cycle(conn, i)))
    for _ in range(3):
        await asyncio.sleep(0)  # every binding cycle waits for its first token
    others = [
        asyncio.create_task(conn.request("GET", "/api/v1/nodes", params={"limit": "500"})),
        asyncio.create_task(conn.request("PATCH", f"{PODS}/failed/status", body={})),
    ]
    await asyncio.gather(*tasks, *others)
    # 30 pod writes wait, yet each of the other two gets one of the next tokens (the flows alternate), in order
    assert conn.sent.index("GET /api/v1/nodes") == 1
    assert conn.sent.index(f"PATCH {PODS}/failed/status") == 3
    await conn.close()


async def test_lease_requests_go_first() -> None:
    conn = FakeConnection(qps=100, burst=1)
    await conn.limiter.acquire()
    tasks = []
    for i in range(3):
        with pod_writes():
            tasks.append(asyncio.create_task(_binding_cycle(conn, i)))
    others = [asyncio.create_task(conn.request("GET", "/api/v1/nodes")) for _ in range(3)]
    for _ in range(3):
        await asyncio.sleep(0)
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra-scheduler"
    renew = asyncio.create_task(conn.request("PUT", lease, body={}))
    await asyncio.gather(*tasks, *others, renew)
    assert conn.sent[0] == f"PUT {lease}"
    assert conn.limiter.granted["critical"] == 1
    await conn.close()


async def test_a_cancelled_waiter_does_not_hold_a_token() -> None:
    t = FakeTime()
    tb = TokenBucket(100, 1, clock=t.clock, sleep=t.sleep)
    await tb.acquire()
    doomed = asyncio.create_task(tb.acquire(1))
    await asyncio.sleep(0)
    doomed.cancel()
    await tb.acquire(2)
    assert tb.waiting == 0 and t.now == pytest.approx(0.01)  # the next token went to the live waiter
    await tb.close()


def test_verb_and_resource() -> None:
    assert verb_and_resource("PUT", f"{CLAIMS}/c1") == ("update", "resourceclaims")
    assert verb_and_resource("PUT", f"{CLAIMS}/c1/status") == ("update", "resourceclaims/status")
    assert verb_and_resource("POST", f"{PODS}/p/binding") == ("create", "pods/binding")
    assert verb_and_resource("POST", "/api/v1/namespaces/ns/events") == ("create", "events")
    assert verb_and_resource("GET", "/api/v1/pods", {"watch": "true"}) == ("watch", "pods")
    assert verb_and_resource("GET", "/api/v1/pods", {"limit": "500"}) == ("list", "pods")
    assert verb_and_resource("GET", f"{PODS}/p") == ("get", "pods")
    assert verb_and_resource("GET", "/api/v1/namespaces") == ("list", "namespaces")
    assert verb_and_resource("GET", "/api/v1/namespaces/ns") == ("get", "namespaces")
    assert verb_and_resource("GET", "/apis/resource.k8s.io/v1") == ("get", "discovery")
    assert verb_and_resource("GET", "/version") == ("get", "version")
    assert verb_and_resource("DELETE", f"{PODS}/p") == ("delete", "pods")


async def test_requests_are_counted_by_verb_and_resource() -> None:
    conn = FakeConnection(qps=0)
    for i in range(2):
        await _binding_cycle(conn, i)
    await conn.request("GET", "/api/v1/nodes")
    assert conn.requests == {
        ("update", "resourceclaims", "200"): 2,
        ("update", "resourceclaims/status", "200"): 2,
        ("create", "pods/binding", "200"): 2,
        ("list", "nodes", "200"): 1,
    }
    m = SchedulerMetrics()
    m.watch_api(
        lambda: [("scheduling", *k, n) for k, n in conn.requests.items()],
        lambda: {"posted": 3, "dropped": 1},
        lambda: {"scheduling": 0.5},
    )
    text = m.exposition().decode()
    assert (
        'dra_scheduler_api_requests_total{client="scheduling",code="200",resource="pods/binding",verb="create"} 2.0'
        in text
    )
    assert 'dra_scheduler_events_total{result="dropped"} 1.0' in text
    assert 'dra_scheduler_api_throttled_seconds_total{client="scheduling"} 0.5' in text
    await conn.close()


# --- the binding cycle: which writes, in which cycle ------------------------------------------------------


class CountingAPI(InMemoryAPI):
    """InMemoryAPI that counts every call by (verb, kind[/subresource]) and notes the binding cycle of each."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()
        self.cycles: list[tuple[str, str, int | None]] = []  # (verb, object, write_sequence())

    def _note(self, verb: str, kind: str, name: str) -> None:
        self.calls[verb, kind] += 1
        self.cycles.append((verb, name, write_sequence()))

    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        self._note("get", kind, name)
        return await super().get(kind, namespace, name)

    async def create(self, kind: str, obj: Obj) -> Obj:
        self._note("create", kind, str((obj.get("metadata") or {}).get("name")))
        return await super().create(kind, obj)

    async def update(self, kind: str, obj: Obj, subresource: str = "") -> Obj:
        self._note("update", kind + (f"/{subresource}" if subresource else ""), obj["metadata"]["name"])
        return await super().update(kind, obj, subresource)

    async def patch(self, kind: str, namespace: str, name: str, patch: Obj, subresource: str = "") -> Obj:
        self._note("patch", kind + (f"/{subresource}" if subresource else ""), name)
        return await super().patch(kind, namespace, name, patch, subresource)

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        self._note("delete", kind, name)
        await super().delete(kind, namespace, name)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self._note("create", "Pod/binding", name)
        await super().bind(namespace, name, uid, node)


def _setup(pods: int, nodes: int = 2, gpus: int = 8) -> tuple[CountingAPI, Scheduler, FakeClock]:
    api = CountingAPI()
    cache = Cache()
    api.watchers.append(cache.apply)
    clock = FakeClock(100.0)
    api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for o in scale_fleet(nodes, gpus):
        api.load(o["kind"], o)
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    spec: dict[str, Any] = {"devices": {"requests": [request]}}
    api.load(
        "ResourceClaimTemplate",
        {"kind": "ResourceClaimTemplate", "metadata": {"name": "one", "namespace": "default"}, "spec": {"spec": spec}},
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
    sched = Scheduler(cache, api, default_config(), clock=clock, inline_binding=False)
    return api, sched, clock


async def _schedule_all(api: CountingAPI, sched: Scheduler, clock: FakeClock) -> list[str]:
    """Schedule every pod, binding cycles as tasks (as live); returns the pods in the order they were popped."""
    for p in api.list("Pod"):
        await create_pod_claims(api, p)  # kube-controller-manager's work, not counted below
    api.calls.clear()
    api.cycles.clear()
    popped: list[str] = []
    while (info := sched.queue.pop()) is not None:
        popped.append(info.pod.name)
        await sched.run_once(info)
    await sched.wait_bindings()
    return popped


async def test_each_binding_cycle_writes_under_its_own_number_in_scheduling_order() -> None:
    api, sched, clock = _setup(pods=6)
    popped = await _schedule_all(api, sched, clock)
    assert len(popped) == 6 and all((p.get("spec") or {}).get("nodeName") for p in api.list("Pod"))
    numbers: dict[str, set[int | None]] = collections.defaultdict(set)
    for _, name, seq in api.cycles:
        numbers[name.split("-")[0]].add(seq)  # a claim p3-gpu-xxxxx belongs to pod p3
    assert all(len(v) == 1 and None not in v for v in numbers.values())  # one number for all of a pod's writes
    assert sorted(popped, key=lambda pod: next(iter(numbers[pod])) or 0) == popped  # older pod, smaller number


async def test_requests_per_pod_are_the_finalizer_the_allocation_and_the_binding() -> None:
    api, sched, clock = _setup(pods=8)
    await _schedule_all(api, sched, clock)
    assert all((p.get("spec") or {}).get("nodeName") for p in api.list("Pod"))
    # nothing else: no GET before a write, no status patch, no PodScheduled condition on success
    assert api.calls == {
        ("update", "ResourceClaim"): 8,
        ("update", "ResourceClaim/status"): 8,
        ("create", "Pod/binding"): 8,
    }
    assert [e["reason"] for e in api.events] == ["Scheduled"] * 8  # Events: their own client, live


async def test_the_run_loop_lets_binding_cycles_write_between_scheduling_cycles() -> None:
    from scheduler.kube.run import RunOptions, SchedulerApp

    api, sched, _ = _setup(pods=6)
    for p in api.list("Pod"):
        await create_pod_claims(api, p)
    trace: list[str] = []
    schedule_one = sched.schedule_one

    def traced(info: Any) -> Any:
        trace.append(f"cycle {info.pod.name}")
        return schedule_one(info)

    sched.schedule_one = traced  # type: ignore[method-assign]
    bind = api.bind

    async def traced_bind(namespace: str, name: str, uid: str, node: str) -> None:
        trace.append(f"bind {name}")
        await bind(namespace, name, uid, node)

    api.bind = traced_bind  # type: ignore[method-assign]
    app = SchedulerApp(RunOptions(install_signal_handlers=False))
    app.sched = sched
    loop_task = asyncio.create_task(app._loop())
    try:
        for _ in range(1000):
            if sum(t.startswith("bind") for t in trace) == 6:
                break
            await asyncio.sleep(0)
    finally:
        app._stopping = True
        sched.queue.close()
        await loop_task
    # the first pod is bound before the last pod's scheduling cycle, not after the whole queue
    assert trace.index("bind p0") < max(i for i, t in enumerate(trace) if t.startswith("cycle"))


class GatedConnection(FakeConnection):
    """No token limit, one request in flight at once; every answer waits until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__(qps=0)
        self.inflight.limit = 1
        self.gate = asyncio.Event()

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> tuple[int, str | None, bytes]:
        self.sent.append(f"{method} {path}")
        await self.gate.wait()
        return 200, None, b"{}"


async def test_a_busy_api_server_serves_older_pods_writes_first() -> None:
    conn = GatedConnection()
    first = asyncio.create_task(conn.request("GET", "/api/v1/nodes"))  # holds the one place
    await asyncio.sleep(0)
    go_old = asyncio.Event()

    async def old_pod() -> None:
        await go_old.wait()
        await conn.request("PUT", f"{CLAIMS}/old", body={})

    with pod_writes():
        old = asyncio.create_task(old_pod())
    with pod_writes():
        new = asyncio.create_task(conn.request("PUT", f"{CLAIMS}/new", body={}))
    await asyncio.sleep(0)
    go_old.set()  # the older pod's write arrives after the newer pod's
    for _ in range(5):
        await asyncio.sleep(0)
    assert conn.inflight.busy == 1 and conn.sent == ["GET /api/v1/nodes"]
    conn.gate.set()
    await asyncio.gather(first, old, new)
    # the freed place goes to the older pod (the HTTP pool's queue would have served the newer one first)
    assert conn.sent == ["GET /api/v1/nodes", f"PUT {CLAIMS}/old", f"PUT {CLAIMS}/new"]
    assert conn.inflight.busy == 0
    await conn.close()


async def test_the_run_loop_pauses_while_binding_writes_are_backlogged() -> None:
    from scheduler.kube.run import RunOptions, SchedulerApp

    api, sched, _ = _setup(pods=6)
    for p in api.list("Pod"):
        await create_pod_claims(api, p)
    popped: list[str] = []
    schedule_one = sched.schedule_one

    def traced(info: Any) -> Any:
        popped.append(info.pod.name)
        return schedule_one(info)

    sched.schedule_one = traced  # type: ignore[method-assign]
    conn = KubeConnection("http://fake.invalid", qps=100, burst=1)
    app = SchedulerApp(RunOptions(install_signal_handlers=False, write_backlog=0.5), conn=conn)
    app.sched = sched
    conn.limiter._queue.pods_waiting = 51  # more than 0.5 s of 100 QPS of binding writes wait for tokens
    loop_task = asyncio.create_task(app._loop())
    try:
        for _ in range(50):
            await asyncio.sleep(0.001)
        assert len(popped) == 1  # one scheduling cycle, then the loop waits for the writes
        conn.limiter._queue.pods_waiting = 50
        await eventually(lambda: len(popped) == 6, timeout=30)
    finally:
        app._stopping = True
        sched.queue.close()
        await loop_task
        await conn.close()
