"""scheduler.kube.health: the /healthz, /readyz and /metrics server (asyncio + httptools), on the wire.

What the kubelet's probes and Prometheus need (``GET``, keep-alive, ``Content-Length``), and what a server on a
pod port must do with anything else: 404 for other paths, 405 for other methods, 400 for what does not parse,
431 for an oversized head, an idle connection closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from scheduler.kube import health
from scheduler.kube.health import HealthServer
from scheduler.kube.metrics import CONTENT_TYPE_LATEST, SchedulerMetrics

EVENT_LOOPS = ("asyncio", "uvloop")  # tests/conftest.py runs every test here on both


@pytest.fixture
async def server() -> AsyncIterator[tuple[HealthServer, list[bool]]]:
    ready = [False]
    hs = HealthServer(
        SchedulerMetrics(),
        host="127.0.0.1",
        port=0,
        ready=lambda: (ready[0], "ok" if ready[0] else "caches not synced: pods"),
        live=lambda: (True, "ok"),
    )
    await hs.start()
    yield hs, ready
    await hs.stop()


async def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` on one connection and read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return data


def statuses(data: bytes) -> list[int]:
    """The status of each answer in ``data``, in order (walking the answers by their Content-Length)."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        out.append(int(lines[0].split()[1]))
        length = next(int(v) for k, _, v in (h.partition(b": ") for h in lines[1:]) if k.lower() == b"content-length")
        data = rest[length:] if b"HEAD" not in head else rest
    return out


async def test_keep_alive_serves_several_requests_on_one_connection(server: tuple[HealthServer, list[bool]]) -> None:
    hs, ready = server
    data = await exchange(
        hs.port,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert statuses(data) == [200, 503, 200]
    assert b"caches not synced: pods\n" in data
    assert b"Content-Type: " + CONTENT_TYPE_LATEST.encode() in data
    assert b"scheduler_pending_pods" in data
    ready[0] = True
    assert statuses(await exchange(hs.port, b"GET /readyz?verbose HTTP/1.1\r\nConnection: close\r\n\r\n")) == [200]


async def test_content_length_matches_the_body(server: tuple[HealthServer, list[bool]]) -> None:
    hs, _ = server
    data = await exchange(hs.port, b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert body == b"ok\n" and b"Content-Length: 3" in head and b"Connection: close" in head


async def test_head_answers_without_a_body(server: tuple[HealthServer, list[bool]]) -> None:
    hs, _ = server
    data = await exchange(hs.port, b"HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert statuses(data) == [200] and body == b"" and b"Content-Length: 3" in head


async def test_unknown_path_404_and_other_method_405(server: tuple[HealthServer, list[bool]]) -> None:
    hs, _ = server
    data = await exchange(
        hs.port,
        b"GET /nope HTTP/1.1\r\n\r\nPOST /healthz HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
        b"GET /livez HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    assert statuses(data) == [404, 405, 200]


async def test_garbage_is_400_and_closes(server: tuple[HealthServer, list[bool]]) -> None:
    hs, _ = server
    data = await exchange(hs.port, b"\x16\x03\x01 not http at all\r\n\r\n")
    assert statuses(data) == [400]


async def test_oversized_head_is_431(server: tuple[HealthServer, list[bool]], monkeypatch: pytest.MonkeyPatch) -> None:
    hs, _ = server
    monkeypatch.setattr(health, "MAX_HEAD", 1000)
    data = await exchange(hs.port, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n")
    assert statuses(data) == [431]


async def test_http_1_0_without_keep_alive_is_closed_after_the_answer(server: tuple[HealthServer, list[bool]]) -> None:
    hs, _ = server
    data = await exchange(hs.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert statuses(data) == [200] and b"Connection: close" in data


async def test_idle_connection_is_closed(
    server: tuple[HealthServer, list[bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    hs, _ = server
    monkeypatch.setattr(health, "IDLE_TIMEOUT", 0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", hs.port)
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server, nothing sent
    writer.close()


async def test_a_failing_check_answers_500_and_the_server_goes_on() -> None:
    def broken() -> tuple[bool, str]:
        raise RuntimeError("boom")

    hs = HealthServer(SchedulerMetrics(), host="127.0.0.1", port=0, ready=broken)
    await hs.start()
    try:
        data = await exchange(
            hs.port, b"GET /readyz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"
        )
        assert statuses(data) == [500, 200]
    finally:
        await hs.stop()


async def test_stop_closes_open_connections() -> None:
    hs = HealthServer(SchedulerMetrics(), host="127.0.0.1", port=0)
    await hs.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", hs.port)
    writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
    await writer.drain()
    await asyncio.wait_for(reader.readuntil(b"ok\n"), 5)
    await asyncio.wait_for(hs.stop(), 5)  # a kept-alive connection does not hold the server open
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()

