"""LiveAPI against the in-process fake API server: connection, error mapping, writes, binding, events."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.api.clusterapi import ApiError, Conflict, Invalid, NotFound
from scheduler.kube.client import KubeConnection, LiveAPI, Unreachable, error_for
from scheduler.kube.flowcontrol import TokenBucket
from scheduler.kube.resources import PODGROUP_UPSTREAM, PODGROUP_UPSTREAM_ALPHA, PODGROUP_X
from tests.fake_apiserver import FakeAPIServer

EVENT_LOOPS = ("asyncio", "uvloop")  # tests/conftest.py runs every test here on both (run uses uvloop)


@pytest.fixture
async def api(server: FakeAPIServer) -> AsyncIterator[LiveAPI]:
    conn = KubeConnection(server.url, qps=0)
    a = LiveAPI(conn)
    yield a
    await a.close()
    await conn.close()


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"schedulerName": "dra-scheduler", **spec}}


async def test_kubeconfig_connection_sends_the_token(server: FakeAPIServer, tmp_path: Any) -> None:
    path = server.kubeconfig(str(tmp_path / "kubeconfig"))
    conn = await KubeConnection.from_kubeconfig(path, qps=50, burst=10)
    try:
        assert conn.host == server.url
        assert (conn.limiter.qps, conn.limiter.burst) == (50, 10)
        api = LiveAPI(conn)
        server.add("Node", {"metadata": {"name": "n1"}})
        node = await api.get("Node", "", "n1")
        assert node["metadata"]["name"] == "n1"
        assert server.headers[-1]["Authorization"] == "Bearer fake-token"
    finally:
        await conn.close()


async def test_kubeconfig_from_environment(server: FakeAPIServer, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("KUBECONFIG", server.kubeconfig(str(tmp_path / "kc")))
    conn = await KubeConnection.from_kubeconfig(None)
    try:
        assert conn.host == server.url and conn.source.endswith("kc")
    finally:
        await conn.close()


async def test_error_mapping(server: FakeAPIServer, api: LiveAPI) -> None:
    with pytest.raises(NotFound):
        await api.get("Pod", "default", "missing")
    await api.create("Pod", pod("a"))
    with pytest.raises(Conflict):
        await api.create("Pod", pod("a"))
    server.fail("POST", "/pods", 422)
    with pytest.raises(Invalid):
        await api.create("Pod", pod("b"))
    server.fail("POST", "/pods", 500)
    with pytest.raises(ApiError) as ei:
        await api.create("Pod", pod("b"))
    assert ei.value.status == 500 and type(ei.value) is ApiError
    assert server.count("POST", "/pods") == 4  # a write is not retried after a 500
    server.fail("GET", "/pods/a", 503)
    assert (await api.get("Pod", "default", "a"))["metadata"]["name"] == "a"  # a read is
    server.fail("POST", "/pods", 429)
    assert (await api.create("Pod", pod("c")))["metadata"]["name"] == "c"  # throttled: not applied, retried


def test_error_for_reads_the_status_message() -> None:
    e = error_for(409, b'{"kind":"Status","message":"the object has been modified","code":409}', "PUT /x")
    assert isinstance(e, Conflict) and "the object has been modified" in str(e)
    assert error_for(403, b"forbidden", "GET /y").status == 403


async def test_unreachable_server_is_an_api_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conn = KubeConnection(f"http://127.0.0.1:{port}", qps=0, request_timeout=2)
    try:
        with pytest.raises(Unreachable) as ei:
            await LiveAPI(conn).get("Pod", "default", "x")
        assert ei.value.status == 0 and isinstance(ei.value, ApiError)
    finally:
        await conn.close()


async def test_update_is_conditional_on_resource_version(server: FakeAPIServer, api: LiveAPI) -> None:
    created = await api.create("Pod", pod("a"))
    created["metadata"]["labels"] = {"x": "1"}
    updated = await api.update("Pod", created)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    created["metadata"]["labels"] = {"x": "2"}
    with pytest.raises(Conflict):
        await api.update("Pod", created)  # stale resourceVersion
    body = server.requests[-1][3]
    assert body["apiVersion"] == "v1" and body["kind"] == "Pod"
    st = {**updated, "status": {"phase": "Pending"}}
    after = await api.update("Pod", st, subresource="status")
    assert after["status"] == {"phase": "Pending"} and server.requests[-1][1].endswith("/pods/a/status")


async def test_managed_fields_are_neither_returned_nor_sent(server: FakeAPIServer, api: LiveAPI) -> None:
    """Answers lose metadata.managedFields as the informers' objects do, and a PUT of an object that still has
    them (held from elsewhere) sends it without them: the API server then keeps the stored ones (k8s.io/apimachinery
    v0.37.2 pkg/util/managedfields/internal/fieldmanager.go, ``decodeLiveOrNew``)."""
    managed = [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
    obj = pod("a")
    obj["metadata"]["managedFields"] = managed
    server.add("Pod", obj)
    got = await api.get("Pod", "default", "a")
    assert "managedFields" not in got["metadata"] and got["metadata"]["name"] == "a"
    got["metadata"]["managedFields"] = managed
    got["metadata"]["labels"] = {"x": "1"}
    updated = await api.update("Pod", got)
    body = server.requests[-1][3]
    assert "managedFields" not in body["metadata"] and body["metadata"]["labels"] == {"x": "1"}
    assert got["metadata"]["managedFields"] == managed  # the caller's object is left alone
    assert "managedFields" not in updated["metadata"]


async def test_claim_paths(server: FakeAPIServer, api: LiveAPI) -> None:
    claim = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": []}}}
    created = await api.create("ResourceClaim", claim)
    assert created["kind"] == "ResourceClaim" and created["apiVersion"] == "resource.k8s.io/v1"
    created["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    written = await api.update("ResourceClaim", created)
    written["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
    await api.update("ResourceClaim", written, subresource="status")
    assert server.requests[-1][1] == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    got = await api.get("ResourceClaim", "ns", "c")
    assert got["status"]["reservedFor"][0]["uid"] == "u"
    await api.delete("ResourceClaim", "ns", "c")
    with pytest.raises(NotFound):
        await api.delete("ResourceClaim", "ns", "c")


async def test_pod_status_patch_keeps_other_conditions(server: FakeAPIServer, api: LiveAPI) -> None:
    p = server.add("Pod", {**pod("a"), "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no"}
    out = await api.patch(
        "Pod",
        "default",
        "a",
        {"metadata": {"uid": p["metadata"]["uid"]}, "status": {"conditions": [cond]}},
        subresource="status",
    )
    assert {c["type"] for c in out["status"]["conditions"]} == {"Ready", "PodScheduled"}
    assert "strategic-merge-patch" in server.headers[-1]["Content-Type"]
    with pytest.raises(Conflict):  # UID precondition
        await api.patch("Pod", "default", "a", {"metadata": {"uid": "other"}, "status": {}}, subresource="status")


async def test_podgroup_uses_merge_patch_and_discovery(server: FakeAPIServer, api: LiveAPI) -> None:
    served = await api.discover()
    assert served == {PODGROUP_X: True, PODGROUP_UPSTREAM: False, PODGROUP_UPSTREAM_ALPHA: False}
    server.add("PodGroup", {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}})
    out = await api.patch("PodGroup", "default", "g", {"status": {"phase": "Scheduling"}}, subresource="status")
    assert out["status"]["phase"] == "Scheduling"
    assert server.headers[-1]["Content-Type"] == "application/merge-patch+json"
    assert server.requests[-1][1] == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/g/status"


async def test_podgroup_falls_back_to_the_upstream_api() -> None:
    s = FakeAPIServer(served=[("", "v1", "pods"), ("scheduling.k8s.io", "v1beta1", "podgroups")])
    await s.start()
    conn = KubeConnection(s.url, qps=0)
    try:
        api = LiveAPI(conn)
        assert await api.discover() == {PODGROUP_X: False, PODGROUP_UPSTREAM: True, PODGROUP_UPSTREAM_ALPHA: False}
        s.add(
            "PodGroup",
            {"metadata": {"name": "g", "namespace": "default"}},
            rid=("scheduling.k8s.io", "v1beta1", "podgroups"),
        )
        got = await api.get("PodGroup", "default", "g")
        assert got["apiVersion"] == "scheduling.k8s.io/v1beta1"
    finally:
        await conn.close()
        await s.stop()


async def test_bind_accepts_the_201_status(server: FakeAPIServer, api: LiveAPI) -> None:
    p = server.add("Pod", pod("a"))
    await api.bind("default", "a", p["metadata"]["uid"], "node-1")
    stored = server.get("Pod", "default", "a")
    assert stored is not None and stored["spec"]["nodeName"] == "node-1"
    method, path, _, body = server.requests[-1]
    assert (method, path) == ("POST", "/api/v1/namespaces/default/pods/a/binding")
    assert body["metadata"]["uid"] == p["metadata"]["uid"] and body["target"]["name"] == "node-1"


async def test_bind_uid_precondition_and_idempotence(server: FakeAPIServer, api: LiveAPI) -> None:
    p = server.add("Pod", pod("a"))
    with pytest.raises(Conflict):
        await api.bind("default", "a", "some-other-uid", "node-1")
    await api.bind("default", "a", p["metadata"]["uid"], "node-1")
    # a retry of a binding that went through (its answer lost) is a success, read back from the pod
    await api.bind("default", "a", p["metadata"]["uid"], "node-1")
    with pytest.raises(Conflict):
        await api.bind("default", "a", p["metadata"]["uid"], "node-2")


async def test_events_are_posted_in_the_background(server: FakeAPIServer, api: LiveAPI) -> None:
    p = server.add("Pod", pod("a"))
    await api.event(p, "Warning", "FailedScheduling", "0/1 nodes are available: " + "x" * 2000, "Scheduling")
    await api.flush_events()
    [ev] = server.list("Event")
    assert ev["reason"] == "FailedScheduling" and ev["type"] == "Warning"
    assert ev["reportingComponent"] == "dra-scheduler" and ev["source"]["component"] == "dra-scheduler"
    assert ev["involvedObject"]["uid"] == p["metadata"]["uid"] and ev["involvedObject"]["kind"] == "Pod"
    assert ev["metadata"]["namespace"] == "default" and len(ev["message"]) <= 1024
    node = server.add("Node", {"metadata": {"name": "n"}})
    server.fail("POST", "/events", 500)
    await api.event(node, "Normal", "X", "m", "A")  # best effort: never raises
    await api.flush_events()
    assert api.recorder.counts["failed"] == 1
    await api.event(node, "Normal", "Y", "m", "A")
    await api.flush_events()  # X, refused with a 500, is tried again (client-go retries those too)
    assert sorted(e["reason"] for e in server.list("Event")) == ["FailedScheduling", "X", "Y"]
    assert all(e["metadata"]["namespace"] == "default" for e in server.list("Event"))  # cluster-scoped object
    server.fail("POST", "/events", 422)
    await api.event(node, "Normal", "Z", "m", "A")
    await api.flush_events()
    await api.flush_events()  # a rejected Event is not tried again
    assert "Z" not in {e["reason"] for e in server.list("Event")}


async def test_token_bucket() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(d: float) -> None:
        slept.append(round(d, 3))
        now[0] += d

    tb = TokenBucket(qps=10, burst=2, clock=lambda: now[0], sleep=sleep)
    for _ in range(4):
        await tb.acquire()
    assert now[0] == pytest.approx(0.2) and slept == [0.1, 0.1]  # the burst, then one token every 0.1 s
    assert tb.throttled_requests == 2
    now[0] = 10.0
    await tb.acquire()
    await tb.acquire()
    assert now[0] == 10.0  # refilled (capped at burst)
    await TokenBucket(qps=0, burst=1).acquire()  # disabled


async def test_rate_limit_applies_to_requests(server: FakeAPIServer) -> None:
    conn = KubeConnection(server.url, qps=20, burst=1)
    try:
        api = LiveAPI(conn)
        server.add("Node", {"metadata": {"name": "n"}})
        for _ in range(4):
            await api.get("Node", "", "n")
        assert conn.limiter.throttled_requests >= 2
    finally:
        await conn.close()


async def test_discovery_asks_again_when_a_restarted_api_server_refuses_it(server: FakeAPIServer, api: LiveAPI) -> None:
    """A kube-apiserver just restarted answers 403 until its authorizer has loaded: that is not "not served"
    (the soak saw a replica start without PodGroup informers and report every gang's PodGroup missing)."""
    server.fail("GET", "/apis/scheduling.x-k8s.io/v1alpha1", 403, times=2)
    assert await api.serves(PODGROUP_X) is True
    server.fail("GET", "/apis/scheduling.x-k8s.io/v1alpha1", 403, times=100)
    assert await api.serves(PODGROUP_X, tries=2) is False  # still refused after the retries: not served, said so
    assert await api.serves(PODGROUP_UPSTREAM) is False  # 404: no retry needed
