"""Informers against the fake API server: list + watch into the Cache, 410 re-list, reconnects, staleness."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.kube.client import KubeConnection
from scheduler.kube.informer import Informer, InformerSet, cache_lookup
from scheduler.kube.resources import NODE, POD, RESOURCE_CLAIM
from tests.fake_apiserver import FakeAPIServer, eventually

FAST = {"backoff_initial": 0.02, "backoff_max": 0.1, "watch_timeout": (30.0, 30.0)}


EVENT_LOOPS = ("asyncio", "uvloop")  # tests/conftest.py runs every test here on both (run uses uvloop)


@pytest.fixture
async def conn(server: FakeAPIServer) -> AsyncIterator[KubeConnection]:
    c = KubeConnection(server.url, qps=0)
    yield c
    await c.close()


def pod(name: str, ns: str = "default", node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "dra-scheduler", "containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def claim(name: str, ns: str = "default") -> dict[str, Any]:
    req = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"devices": {"requests": [req]}}}

async def watching(inf: Informer, server: FakeAPIServer) -> None:
    """Start ``inf`` and return once its initial list is applied and its watch is open on the server."""
    inf.start()
    await asyncio.wait_for(inf.synced.wait(), 5)
    await eventually(lambda: len(server.watches) == 1)



async def test_initial_list_is_paginated_and_synced(server: FakeAPIServer, conn: KubeConnection) -> None:
    for i in range(5):
        server.add("Pod", pod(f"p{i}"))
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, page_size=2, cached=cache_lookup(cache), **FAST)
    inf.start()
    await asyncio.wait_for(inf.synced.wait(), 5)
    assert sorted(cache.pods()) == [f"default/p{i}" for i in range(5)]
    lists = [q for m, p, q, _ in server.requests if m == "GET" and p == "/api/v1/pods" and "watch" not in q]
    assert [q.get("continue", "") != "" for q in lists] == [False, True, True]
    assert all(q["limit"] == "2" for q in lists)
    p0 = cache.pod("default/p0")
    assert p0 is not None and p0.raw["kind"] == "Pod" and p0.raw["apiVersion"] == "v1"
    await eventually(lambda: server.count("GET", "/api/v1/pods") == 4)  # the watch
    watch = server.requests[-1][2]
    assert watch["watch"] == "1" and watch["allowWatchBookmarks"] == "true"
    assert watch["resourceVersion"] == inf.resource_version
    await inf.stop()


async def test_watch_events_reach_the_cache(server: FakeAPIServer, conn: KubeConnection) -> None:
    server.add("Node", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
    cache = Cache()
    infs = InformerSet(
        [Informer(conn, r, cache.apply, cached=cache_lookup(cache), **FAST) for r in (NODE, POD, RESOURCE_CLAIM)]
    )
    infs.start()
    await asyncio.wait_for(infs.wait_synced(), 5)
    assert infs.synced and not infs.not_synced()
    await eventually(lambda: len(server.watches) == 3)
    server.add("Pod", pod("a"))
    server.add("ResourceClaim", claim("c1"))
    await eventually(lambda: cache.pod("default/a") is not None and cache.claim("default/c1") is not None)
    p = server.get("Pod", "default", "a")
    assert p is not None
    p["spec"]["nodeName"] = "n1"
    server.modify("Pod", p)
    await eventually(lambda: (cache.pod("default/a") or pod_none()).node_name == "n1")
    await eventually(lambda: "default/a" in cache.snapshot().node_map["n1"].pods)
    server.remove("Pod", "default", "a")
    await eventually(lambda: cache.pod("default/a") is None)
    assert cache.snapshot().node_map["n1"].pods == ()
    server.remove("ResourceClaim", "default", "c1")
    await eventually(lambda: cache.claim("default/c1") is None)
    await infs.stop()


MANAGED = [{"manager": "kwok", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]


async def test_managed_fields_are_dropped_from_lists_and_watch_events(
    server: FakeAPIServer, conn: KubeConnection
) -> None:
    """As kube-scheduler's pod informer transform (kubernetes v1.37.2 pkg/scheduler/scheduler.go,
    ``newPodInformer``): metadata.managedFields never reach the store or the cache, listed or watched."""
    listed = pod("listed")
    listed["metadata"]["managedFields"] = MANAGED
    server.add("Pod", listed)
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, cached=cache_lookup(cache), **FAST)
    await watching(inf, server)
    watched = pod("watched")
    watched["metadata"]["managedFields"] = MANAGED
    server.add("Pod", watched)
    await eventually(lambda: cache.pod("default/watched") is not None)
    for key in ("default/listed", "default/watched"):
        p = cache.pod(key)
        assert p is not None and "managedFields" not in p.raw["metadata"] and p.raw["metadata"]["name"]
        assert "managedFields" not in inf.store[key]["metadata"]
    assert server.get("Pod", "default", "listed")["metadata"]["managedFields"] == MANAGED  # type: ignore[index]
    await inf.stop()


def pod_none() -> Any:
    class _P:
        node_name = None

    return _P()


async def test_relist_after_410_reconciles(server: FakeAPIServer, conn: KubeConnection) -> None:
    for n in ("keep", "gone", "changed"):
        server.add("Pod", pod(n))
    cache = Cache()
    seen: list[tuple[str, str]] = []

    def sink(kind: str, event: str, raw: dict[str, Any]) -> None:
        seen.append((event, raw["metadata"]["name"]))
        cache.apply(kind, event, raw)

    inf = Informer(conn, POD, sink, cached=cache_lookup(cache), **FAST)
    await watching(inf, server)
    seen.clear()
    # changes the watch never reports (history compacted before it could)
    server.remove("Pod", "default", "gone", silent=True)
    ch = server.get("Pod", "default", "changed")
    assert ch is not None
    ch["metadata"]["labels"] = {"v": "2"}
    server.modify("Pod", ch, silent=True)
    server.add("Pod", pod("new"), silent=True)
    server.expire()
    await eventually(lambda: inf.stats["relists"] == 1)
    assert sorted(seen) == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "changed")]
    assert sorted(cache.pods()) == ["default/changed", "default/keep", "default/new"]
    changed = cache.pod("default/changed")
    assert changed is not None and changed.meta.labels == {"v": "2"}
    assert inf.stats["gone"] == 1
    # and the watch goes on from the re-list's resourceVersion
    await eventually(lambda: len(server.watches) == 1)
    server.add("Pod", pod("later"))
    await eventually(lambda: cache.pod("default/later") is not None)
    await inf.stop()


async def test_watch_from_a_compacted_version_relists(server: FakeAPIServer, conn: KubeConnection) -> None:
    server.add("Pod", pod("a"))
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, **FAST)
    await watching(inf, server)
    server.remove("Pod", "default", "a", silent=True)
    server.disconnect()  # drops the stream; the re-watch from the old version gets 410
    server.compacted = server.rv + 1
    server.rv += 1
    await eventually(lambda: cache.pod("default/a") is None)
    assert inf.stats["relists"] >= 1
    await inf.stop()


async def test_reconnect_after_disconnect_resumes_from_last_version(
    server: FakeAPIServer, conn: KubeConnection
) -> None:
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, **FAST)
    await watching(inf, server)
    server.add("Pod", pod("a"))
    await eventually(lambda: cache.pod("default/a") is not None)
    last_rv = inf.resource_version
    server.disconnect()
    await eventually(lambda: len(server.watches) == 0)
    server.add("Pod", pod("b"))  # while disconnected: replayed from history on the new watch
    await eventually(lambda: cache.pod("default/b") is not None)
    watches = [q for m, p, q, _ in server.requests if q.get("watch") == "1"]
    assert len(watches) >= 2 and watches[1]["resourceVersion"] == last_rv
    assert inf.stats["lists"] == 1  # no re-list needed
    await inf.stop()


async def test_bookmarks_advance_the_resource_version(server: FakeAPIServer, conn: KubeConnection) -> None:
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, **FAST)
    await watching(inf, server)
    server.add("Node", {"metadata": {"name": "n"}})  # other kinds move the global resourceVersion
    server.bookmark()
    await eventually(lambda: inf.stats["bookmarks"] == 1)
    assert inf.resource_version == str(server.rv)
    await inf.stop()


async def test_an_older_event_does_not_overwrite_a_newer_cached_object(
    server: FakeAPIServer, conn: KubeConnection
) -> None:
    server.add("ResourceClaim", claim("c"))
    cache = Cache()
    inf = Informer(conn, RESOURCE_CLAIM, cache.apply, cached=cache_lookup(cache), **FAST)
    await watching(inf, server)
    # the cache learnt of a newer version (e.g. the answer to our own write) before the watch did
    newer = server.get("ResourceClaim", "default", "c")
    assert newer is not None
    newer["metadata"]["resourceVersion"] = str(server.rv + 100)
    newer["metadata"]["labels"] = {"version": "newer"}
    cache.apply("ResourceClaim", "MODIFIED", newer)
    late = server.get("ResourceClaim", "default", "c")
    assert late is not None
    late["metadata"]["labels"] = {"version": "late"}
    server.modify("ResourceClaim", late)  # rv below the cached one
    await eventually(lambda: inf.stats["stale"] == 1)
    held = cache.claim("default/c")
    assert held is not None and held.meta.labels == {"version": "newer"}
    # a really newer event is applied
    server.rv += 200
    latest = server.get("ResourceClaim", "default", "c")
    assert latest is not None
    latest["metadata"]["labels"] = {"version": "latest"}
    server.modify("ResourceClaim", latest)
    await eventually(lambda: (cache.claim("default/c") or held).meta.labels == {"version": "latest"})
    await inf.stop()


async def test_duplicate_objects_are_not_reapplied(server: FakeAPIServer, conn: KubeConnection) -> None:
    server.add("Pod", pod("a"))
    events: list[str] = []
    inf = Informer(conn, POD, lambda k, e, o: events.append(e), **FAST)
    items, _ = await inf.list_all()
    inf.reconcile(items)
    inf.reconcile(items)  # same versions: nothing to do
    assert events == ["ADDED"]


async def test_resync_relists(server: FakeAPIServer, conn: KubeConnection) -> None:
    server.add("Pod", pod("a"))
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, **FAST)
    await watching(inf, server)
    first = server.watches[0]
    server.remove("Pod", "default", "a", silent=True)
    await asyncio.wait_for(inf.resync(), 5)
    assert cache.pod("default/a") is None and inf.stats["relists"] == 1
    # the old watch was closed (the fake server ends a watch whose client went away) and a new one is open
    await eventually(lambda: len(server.watches) == 1 and server.watches[0] is not first)
    await inf.stop()


async def test_list_errors_back_off_and_retry(server: FakeAPIServer, conn: KubeConnection) -> None:
    server.add("Pod", pod("a"))
    server.fail("GET", "/api/v1/pods", 500, times=5)  # a GET is retried 3 times per call
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, **FAST)
    inf.start()
    await asyncio.wait_for(inf.synced.wait(), 10)
    assert cache.pod("default/a") is not None and inf.stats["errors"] >= 1
    await inf.stop()


async def test_field_selector_turns_finished_pods_into_deletions(server: FakeAPIServer, conn: KubeConnection) -> None:
    server.add("Pod", pod("a"))
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, field_selector="status.phase!=Succeeded,status.phase!=Failed", **FAST)
    await watching(inf, server)
    p = server.get("Pod", "default", "a")
    assert p is not None
    p["status"] = {"phase": "Succeeded"}
    server.modify("Pod", p)
    await eventually(lambda: cache.pod("default/a") is None)
    await inf.stop()


async def test_stop_is_clean(server: FakeAPIServer, conn: KubeConnection) -> None:
    inf = Informer(conn, POD, lambda *a: None, **FAST)
    task = inf.start()
    await asyncio.wait_for(inf.synced.wait(), 5)
    await eventually(lambda: len(server.watches) == 1)
    await asyncio.wait_for(inf.stop(), 2)
    assert task.done() and task.cancelled()
    server.bookmark()  # the server notices the closed connection on its next write
    await eventually(lambda: len(server.watches) == 0)


async def test_a_failing_sink_does_not_stop_the_informer(server: FakeAPIServer, conn: KubeConnection) -> None:
    got: list[str] = []

    def sink(kind: str, event: str, raw: dict[str, Any]) -> None:
        if raw["metadata"]["name"] == "bad":
            raise RuntimeError("boom")
        got.append(raw["metadata"]["name"])

    inf = Informer(conn, POD, sink, **FAST)
    await watching(inf, server)
    server.add("Pod", pod("bad"))
    server.add("Pod", pod("good"))
    await eventually(lambda: got == ["good"])
    assert inf.stats["sink_errors"] == 1
    await inf.stop()


async def test_pods_are_applied_after_every_other_kind(server: FakeAPIServer, conn: KubeConnection) -> None:
    """The first lists are applied kinds first, pods last (informer.APPLY_LAST), even when the pod list is
    answered first: here the claim and node lists fail twice before they answer."""
    server.add("Node", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
    for i in range(3):
        server.add("ResourceClaim", claim(f"c{i}"))
        server.add("Pod", pod(f"p{i}"))
    server.fail("GET", "/resourceclaims", 500, times=4)  # a GET is retried 3 times per call
    server.fail("GET", "/api/v1/nodes", 500, times=4)
    order: list[str] = []

    def sink(kind: str, event: str, raw: dict[str, Any]) -> None:
        order.append(kind)

    infs = InformerSet([Informer(conn, r, sink, **FAST) for r in (POD, RESOURCE_CLAIM, NODE)])
    pods = infs.informers[0]
    assert pods.apply_after == tuple(infs.informers[1:])
    infs.start()
    await asyncio.wait_for(infs.wait_synced(), 10)
    assert sorted(order[:4]) == ["Node", "ResourceClaim", "ResourceClaim", "ResourceClaim"]
    assert order[4:] == ["Pod"] * 3
    assert pods.stats["lists"] == 1  # listed once, at start, and held until the others were applied
    # later events are delivered as they come
    await eventually(lambda: len(server.watches) == 3)
    server.add("Pod", pod("late"))
    await eventually(lambda: order[-1:] == ["Pod"] and len(order) == 8)
    await infs.stop()


async def test_pods_applied_last_are_not_gated_by_claims_listed_later(
    server: FakeAPIServer, conn: KubeConnection
) -> None:
    """Pods whose claims exist go straight to the active queue at start-up: PreEnqueue runs once per pod, not
    again for every node and claim applied after the pods (the start-up cost this ordering removes)."""
    from scheduler.config.schedulerconfig import default_config
    from scheduler.loop.scheduler import Scheduler
    from scheduler.simulate.memapi import InMemoryAPI

    for i in range(4):
        server.add("Node", {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
    for i in range(5):
        server.add("ResourceClaim", claim(f"c{i}"))
        p = pod(f"p{i}")
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c{i}"}]
        server.add("Pod", p)
    server.fail("GET", "/resourceclaims", 500, times=4)
    cache = Cache()
    sched = Scheduler(cache, InMemoryAPI(), default_config())
    calls: list[str] = []
    pre_enqueue = sched.queue._pre_enqueue
    assert pre_enqueue is not None

    def counting(p: Any) -> Any:
        calls.append(p.key)
        return pre_enqueue(p)

    sched.queue._pre_enqueue = counting
    infs = InformerSet(
        [Informer(conn, r, cache.apply, cached=cache_lookup(cache), **FAST) for r in (POD, RESOURCE_CLAIM, NODE)]
    )
    infs.start()
    await asyncio.wait_for(infs.wait_synced(), 10)
    assert sched.queue.lengths()["active"] == 5 and sched.queue.lengths()["gated"] == 0
    assert sorted(calls) == [f"default/p{i}" for i in range(5)]
    await infs.stop()


# --- JSON on the wire (kube/resources.loads, dumps) ------------------------------------------------------------


def test_wire_json_is_orjson_with_the_standard_librarys_results() -> None:
    import json
    import math

    from scheduler.kube import resources

    assert resources.JSON_ENGINE == "orjson"
    doc = {
        "metadata": {"name": "p", "resourceVersion": "12", "labels": {"ü": "ß"}},
        "spec": {"n": 3, "f": 0.1, "big": 2**70, "list": [None, True, False, "x"]},
    }
    text = json.dumps(doc)
    assert resources.loads(text.encode()) == json.loads(text) == doc
    assert resources.loads(text) == doc
    # what orjson refuses, the standard library decodes as before
    assert math.isnan(resources.loads(b'{"v": NaN}')["v"])
    with pytest.raises(ValueError):
        resources.loads(b'{"v": ')
    # bodies: compact; what orjson cannot encode (beyond 64 bits, non-string keys) encoded as json.dumps does
    assert resources.dumps(doc) and json.loads(resources.dumps(doc)) == doc
    assert resources.dumps({"a": [1, 2]}) == b'{"a":[1,2]}'
    assert resources.dumps({1: "x"}) == b'{"1":"x"}'


async def test_watch_events_with_what_orjson_refuses_still_arrive(
    server: FakeAPIServer, conn: KubeConnection
) -> None:
    """An object holding an integer beyond 64 bits (free-form JSON in an annotation's value is a string, but
    opaque device parameters are not) is decoded as before."""
    cache = Cache()
    inf = Informer(conn, RESOURCE_CLAIM, cache.apply, cached=cache_lookup(cache), **FAST)
    await watching(inf, server)
    c = claim("big")
    c["spec"]["devices"]["config"] = [
        {"opaque": {"driver": "gpu.example.com", "parameters": {"limit": 2**70}}, "requests": ["gpu"]}
    ]
    server.add("ResourceClaim", c)
    await eventually(lambda: cache.claim("default/big") is not None)
    got = cache.claim("default/big")
    assert got is not None and got.raw["spec"]["devices"]["config"][0]["opaque"]["parameters"]["limit"] == 2**70
    await inf.stop()


# --- the first list applied page by page (issue 24, item 4) ----------------------------------------------------


class ScriptedConn:
    """What an informer uses of KubeConnection, answering each list request of a path with the next entry of its
    script: a page (``items`` and the ``continue`` token to hand out), an exception to raise, or an Event to wait
    for first (the server still working on that page). Watches stay open and quiet."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.asked: list[tuple[str, dict[str, str]]] = []

    async def request(self, method: str, path: str, *, params: dict[str, str], timeout: float = 0) -> Any:
        self.asked.append((path, dict(params)))
        steps = self.script[path]
        while isinstance(steps[0], asyncio.Event):
            await steps.pop(0).wait()
        step = steps.pop(0)
        if isinstance(step, Exception):
            raise step
        items, cont = step
        return {"metadata": {"resourceVersion": "100", "continue": cont}, "items": [dict(o) for o in items]}

    def stream(self, path: str, params: dict[str, str], timeout: float = 0) -> Any:
        class Quiet:
            async def __aenter__(self) -> Any:
                await asyncio.Event().wait()

            async def __aexit__(self, *exc: object) -> None:
                return None

        return Quiet()


def versioned(o: dict[str, Any], rv: int) -> dict[str, Any]:
    o["metadata"]["resourceVersion"] = str(rv)
    return o


async def test_the_first_list_is_applied_page_by_page_and_synced_after_the_last() -> None:
    """Each page of the first list is applied when it arrives, while the server works on the next; ``synced``
    (what /readyz and the scheduling loop wait for) only once the last page is applied."""
    last_page = asyncio.Event()
    conn = ScriptedConn({"/api/v1/pods": [
        ([versioned(pod("p0"), 10), versioned(pod("p1"), 11)], "c1"),
        ([versioned(pod("p2"), 12)], "c2"),
        last_page,
        ([versioned(pod("p3"), 13)], ""),
    ]})
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, page_size=2, cached=cache_lookup(cache), **FAST)  # type: ignore[arg-type]
    inf.start()
    await eventually(lambda: len(cache.pods()) == 3)
    assert not inf.synced.is_set()
    assert sorted(cache.pods()) == ["default/p0", "default/p1", "default/p2"]
    last_page.set()
    await asyncio.wait_for(inf.synced.wait(), 5)
    assert sorted(cache.pods()) == [f"default/p{i}" for i in range(4)]
    assert inf.resource_version == "100" and inf.stats["ADDED"] == 4 and inf.stats["lists"] == 1
    await inf.stop()


async def test_pod_pages_wait_for_the_other_kinds_even_when_they_arrive_first() -> None:
    """APPLY_LAST still holds page by page: the pod pages that arrive before the claims are applied wait, and go
    in (in order) once every other informer is synced."""
    claims_answer = asyncio.Event()
    conn = ScriptedConn({
        "/api/v1/pods": [([pod("p0"), pod("p1")], "c1"), ([pod("p2")], "c2"), ([pod("p3")], "")],
        "/apis/resource.k8s.io/v1/resourceclaims": [claims_answer, ([claim("c0")], "")],
    })
    order: list[str] = []
    infs = InformerSet(
        [Informer(conn, r, lambda k, e, o: order.append(o["metadata"]["name"]), page_size=2, **FAST)  # type: ignore[arg-type]
         for r in (POD, RESOURCE_CLAIM)]
    )
    infs.start()
    await eventually(lambda: len([p for p, _ in conn.asked if p == "/api/v1/pods"]) == 3)
    await asyncio.sleep(0.05)
    assert order == []  # every pod page is in, none applied
    claims_answer.set()
    await asyncio.wait_for(infs.wait_synced(), 5)
    assert order == ["c0", "p0", "p1", "p2", "p3"]
    await infs.stop()


async def test_an_expired_continue_token_during_the_first_list_reconciles_what_was_applied() -> None:
    """The first attempt's pages are applied; its continue token expires (410) and the list starts again: the
    complete new list is reconciled, so an object deleted in between does not stay in the cache."""
    from scheduler.api.clusterapi import ApiError

    conn = ScriptedConn({"/api/v1/pods": [
        ([versioned(pod("gone"), 10), versioned(pod("kept"), 11)], "c1"),
        ApiError("continue token expired", 410),
        ([versioned(pod("kept"), 11), versioned(pod("new"), 20)], ""),
    ]})
    cache = Cache()
    events: list[tuple[str, str]] = []

    def sink(kind: str, event: str, raw: dict[str, Any]) -> None:
        events.append((event, raw["metadata"]["name"]))
        cache.apply(kind, event, raw)

    inf = Informer(conn, POD, sink, page_size=2, cached=cache_lookup(cache), **FAST)  # type: ignore[arg-type]
    inf.start()
    await asyncio.wait_for(inf.synced.wait(), 5)
    assert sorted(cache.pods()) == ["default/kept", "default/new"]
    assert events == [("ADDED", "gone"), ("ADDED", "kept"), ("DELETED", "gone"), ("ADDED", "new")]
    assert inf.stats["list_restarts"] == 1 and inf.stats["lists"] == 1
    await inf.stop()


async def test_a_first_list_failing_after_some_pages_is_reconciled_on_retry() -> None:
    """An error after some pages were applied: the retry is reconciled against them (not applied on top)."""
    from scheduler.api.clusterapi import ApiError

    conn = ScriptedConn({"/api/v1/pods": [
        ([versioned(pod("gone"), 10)], "c1"),
        ApiError("internal error", 500),
        ([versioned(pod("kept"), 12)], ""),
    ]})
    cache = Cache()
    inf = Informer(conn, POD, cache.apply, page_size=1, cached=cache_lookup(cache), **FAST)  # type: ignore[arg-type]
    inf.start()
    await asyncio.wait_for(inf.synced.wait(), 5)
    assert sorted(cache.pods()) == ["default/kept"] and sorted(inf.store) == ["default/kept"]
    assert inf.stats["errors"] == 1 and inf.stats["DELETED"] == 1
    await inf.stop()
