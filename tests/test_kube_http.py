"""scheduler.kube.http: the lean HTTP/1.1 client the scheduler talks to the API server with.

Each test runs a raw asyncio server that answers byte for byte as the test says, so the cases a general
client library hides are visible: keep-alive reuse, chunked bodies, a server that closes a kept-alive
connection, answers that never come, streams. The retry rule is Go's ``net/http`` Transport
(``persistConn.shouldRetryRequest`` / ``Request.isReplayable`` in src/net/http/transport.go and request.go):
a request on a reused connection that failed before any answer arrived is sent again only if it is
idempotent; the keep-alive period stays below kube-apiserver's ``IdleTimeout`` of 90 s
(k8s.io/apiserver v0.37.2 pkg/server/secure_serving.go).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from scheduler.kube import http
from scheduler.kube.http import ConnectFailed, ExchangeFailed, HttpClient

EVENT_LOOPS = ("asyncio", "uvloop")  # tests/conftest.py runs every test here on both

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    """One request off the wire: (request line, headers with lower-case names, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    body = await reader.readexactly(n) if n else b""
    return lines[0], headers, body


def answer(body: bytes = b"{}", status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    """A server on a free port; ``handler(reader, writer, connection number)`` runs per connection. Yields
    its URL."""
    count = [0]

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        count[0] += 1
        with contextlib.suppress(Exception):
            await handler(reader, writer, count[0])
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def fetch(c: HttpClient, method: str = "GET", path: str = "/x", body: bytes | None = None) -> bytes:
    """The body of one answer (a 5 s timeout, no headers)."""
    return (await c.request(method, path, headers={}, body=body, timeout=5))[2]


def keepalive_handler(seen: list[str] | None = None) -> Handler:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            line, _, body = await read_request(reader)
            if seen is not None:
                seen.append(f"{n} {line} {body.decode()}")
            writer.write(answer(b'{"n": %d}' % n))
            await writer.drain()

    return h


async def test_requests_reuse_one_kept_alive_connection() -> None:
    seen: list[str] = []
    async with serve(keepalive_handler(seen)) as url:
        c = HttpClient(url)
        for _ in range(3):
            status, headers, body = await c.request("GET", "/api/v1/pods", headers={}, timeout=5)
            assert (status, body, headers["content-type"]) == (200, b'{"n": 1}', "application/json")
        assert c.connects == 1 and c.idle == 1
        await c.close()
    assert [s.split()[0] for s in seen] == ["1", "1", "1"]


async def test_request_line_headers_body_and_query_encoding() -> None:
    got: list[tuple[str, dict[str, str], bytes]] = []

    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        got.append(await read_request(reader))
        writer.write(answer())
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url + "/prefix/")
        await c.request(
            "PUT",
            "/api/v1/namespaces/a b/pods",
            params={"labelSelector": "app=x,tier!=db", "limit": "5"},
            headers={"Content-Type": "application/json", "Authorization": "Bearer t"},
            body=b'{"x":1}',
            timeout=5,
        )
        await c.close()
    line, headers, body = got[0]
    assert line == "PUT /prefix/api/v1/namespaces/a%20b/pods?labelSelector=app%3Dx%2Ctier%21%3Ddb&limit=5 HTTP/1.1"
    assert headers["host"] == url.removeprefix("http://")
    assert headers["content-length"] == "7" and headers["authorization"] == "Bearer t" and body == b'{"x":1}'


async def test_header_injection_is_refused() -> None:
    c = HttpClient("http://127.0.0.1:1")
    with pytest.raises(ValueError, match="line breaks"):
        await c.request("GET", "/x", headers={"Authorization": "Bearer a\r\nX-Evil: 1"}, timeout=1)


async def test_chunked_answer_is_decoded() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(b"6\r\n world\r\n0\r\n\r\n")
        await writer.drain()
        await read_request(reader)  # the connection stays usable
        writer.write(answer(b"again"))
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        assert await fetch(c) == b"hello world"
        assert await fetch(c, path="/y") == b"again"
        assert c.connects == 1
        await c.close()


async def test_connection_close_answer_is_not_pooled() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer(b"bye", extra="Connection: close\r\n"))
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        for _ in range(2):
            assert await fetch(c) == b"bye"
        assert c.connects == 2 and c.idle == 0
        await c.close()


async def test_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer(b"%d" % n))  # keep-alive answer, then the server hangs up while idle
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        assert await fetch(c, "POST", body=b"{}") == b"1"
        await asyncio.sleep(0.05)  # the FIN arrives: connection_lost marks the pooled connection closed
        assert await fetch(c, "POST", body=b"{}") == b"2"
        assert c.connects == 2
        await c.close()


def hang_up_on_second_request() -> Handler:
    """Connection 1 answers its first request and hangs up on the second without a byte of answer (the race
    of a server closing a kept-alive connection as the client reuses it); later connections answer."""

    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer(b"%d" % n))
        await writer.drain()
        if n == 1:
            await read_request(reader)
            writer.transport.abort()
            return
        while True:
            await read_request(reader)
            writer.write(answer(b"%d" % n))
            await writer.drain()

    return h


async def test_reused_connection_lost_before_an_answer_retries_a_get_once() -> None:
    async with serve(hang_up_on_second_request()) as url:
        c = HttpClient(url)
        assert await fetch(c) == b"1"
        assert await fetch(c) == b"2"
        assert c.connects == 2
        await c.close()


async def test_reused_connection_lost_before_an_answer_does_not_resend_a_write() -> None:
    """The server may have acted on a PUT/POST it read: it is reported, not sent again (the caller decides:
    :class:`~scheduler.kube.client.KubeConnection` raises Unreachable and the binder settles the outcome)."""
    async with serve(hang_up_on_second_request()) as url:
        c = HttpClient(url)
        assert await fetch(c, "POST", body=b"{}") == b"1"
        with pytest.raises(ExchangeFailed, match="before a complete answer"):
            await c.request("POST", "/x", headers={}, body=b"{}", timeout=5)
        assert c.connects == 1 and c.idle == 0
        await c.close()


async def test_fresh_connection_lost_is_not_retried_even_for_a_get() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.transport.abort()

    async with serve(h) as url:
        c = HttpClient(url)
        with pytest.raises(ExchangeFailed):
            await fetch(c)
        assert c.connects == 1
        await c.close()


async def test_refused_connection_is_connect_failed() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    c = HttpClient(f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectFailed, match="cannot connect"):
        await fetch(c)


async def test_timeout_drops_the_connection() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        if n == 1:
            await asyncio.sleep(10)  # never answers in time
        writer.write(answer(b"late" if n == 1 else b"ok"))
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        with pytest.raises(TimeoutError):
            await c.request("GET", "/x", headers={}, timeout=0.2)
        assert c.idle == 0  # its state is unknown: a late answer must not become the next request's answer
        assert await fetch(c) == b"ok"
        assert c.connects == 2
        await c.close()


async def test_idle_connection_older_than_keepalive_is_closed_not_reused() -> None:
    now = [0.0]
    async with serve(keepalive_handler()) as url:
        c = HttpClient(url, keepalive=15.0, clock=lambda: now[0])
        await fetch(c)
        now[0] = 14.0
        await fetch(c)
        assert c.connects == 1
        now[0] = 29.5  # idle 15.5 s since the last answer
        await fetch(c)
        assert c.connects == 2
        await c.close()


async def test_malformed_answer_is_exchange_failed() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 abc nonsense\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with serve(h) as url:
        c = HttpClient(url)
        with pytest.raises(ExchangeFailed, match="malformed"):
            await fetch(c)
        await c.close()


async def test_concurrent_requests_open_as_many_connections_and_pool_them() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            await asyncio.sleep(0.02)
            writer.write(answer(b"%d" % n))
            await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        got = await asyncio.gather(*(c.request("GET", "/x", headers={}, timeout=5) for _ in range(4)))
        assert sorted(g[2] for g in got) == [b"1", b"2", b"3", b"4"]  # an answer never crosses requests
        assert c.connects == 4 and c.idle == 4
        await asyncio.gather(*(c.request("GET", "/x", headers={}, timeout=5) for _ in range(4)))
        assert c.connects == 4
        await c.close()


# --- streams --------------------------------------------------------------------------------------------


def watch_handler(lines: list[bytes], gate: asyncio.Event | None = None) -> Handler:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i, line in enumerate(lines):
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            if gate is not None and i == 0:
                await gate.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return h


async def test_stream_delivers_chunks_as_they_come_and_ends() -> None:
    gate = asyncio.Event()
    async with serve(watch_handler([b'{"type":"ADDED"}\n', b'{"type":"MODIFIED"}\n'], gate)) as url:
        c = HttpClient(url)
        async with c.stream("/api/v1/pods", params={"watch": "1"}, headers={}, timeout=5) as s:
            assert s.status == 200 and s.headers["content-type"] == "application/json"
            assert await s.read() == b'{"type":"ADDED"}\n'  # before the server sent the rest
            gate.set()
            assert await s.read() == b'{"type":"MODIFIED"}\n'
            assert await s.read() == b""
        assert c.idle == 0  # a stream's connection is its own and closed after
        await c.close()


async def test_stream_flow_control_pauses_and_resumes_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "HIGH_WATER", 1000)
    monkeypatch.setattr(http, "LOW_WATER", 100)
    lines = [b"x" * 300 + b"\n" for _ in range(50)]
    done = asyncio.Event()

    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for line in lines:  # one chunk per read on the client's side
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await done.wait()  # the connection stays open: only flow control can stop the client's reading

    async with serve(h) as url:
        c = HttpClient(url)
        async with c.stream("/w", headers={}, timeout=5) as s:
            await asyncio.sleep(0.4)  # the server has written everything by now
            transport: Any = s._conn.transport
            assert not transport.is_reading()
            assert s._size < 2000  # the rest waits in the socket, not in the process
            data = await s.body()
        done.set()
        await c.close()
    assert data == b"".join(lines)


async def test_closing_a_stream_makes_its_reader_fail() -> None:
    gate = asyncio.Event()
    async with serve(watch_handler([b"a\n", b"b\n"], gate)) as url:
        c = HttpClient(url)
        async with c.stream("/w", headers={}, timeout=5) as s:
            assert await s.read() == b"a\n"
            reader = asyncio.ensure_future(s.read())
            await asyncio.sleep(0.01)
            s.close()
            with pytest.raises(ExchangeFailed, match="closed"):
                await reader
        gate.set()
        await c.close()


async def test_stream_cut_by_the_server_fails_its_reader() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\na\n\r\n")
        await writer.drain()
        writer.transport.abort()  # no terminating chunk

    async with serve(h) as url:
        c = HttpClient(url)
        async with c.stream("/w", headers={}, timeout=5) as s:
            assert await s.read() == b"a\n"
            with pytest.raises(ExchangeFailed):
                await s.read()
        await c.close()


async def test_stream_timeout_bounds_the_whole_exchange() -> None:
    gate = asyncio.Event()
    async with serve(watch_handler([b"a\n", b"b\n"], gate)) as url:
        c = HttpClient(url)
        with pytest.raises(TimeoutError):
            async with c.stream("/w", headers={}, timeout=0.3) as s:
                assert await s.read() == b"a\n"
                await s.read()  # the server waits for the gate: the timeout ends it
        gate.set()
        await c.close()


async def test_stream_takes_the_idle_connection_a_list_just_used() -> None:
    """An informer lists, then watches: the watch goes on the kept-alive connection of the list (no second TLS
    handshake), and that connection is not pooled again once the stream ends."""
    seen: list[str] = []

    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        line, _, _ = await read_request(reader)
        seen.append(f"{n} {line.split()[1]}")
        writer.write(answer(b'{"items": []}'))
        await writer.drain()
        line, _, _ = await read_request(reader)
        seen.append(f"{n} {line.split()[1]}")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nev\n\r\n0\r\n\r\n")
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        await c.request("GET", "/api/v1/pods", headers={}, timeout=5)
        async with c.stream("/api/v1/pods", params={"watch": "1"}, headers={}, timeout=5) as s:
            assert await s.body() == b"ev\n"
        assert c.connects == 1 and c.idle == 0
        await c.close()
    assert seen == ["1 /api/v1/pods", "1 /api/v1/pods?watch=1"]


async def test_stream_on_a_reused_connection_lost_before_an_answer_is_sent_again_once() -> None:
    async def h(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        if n == 1:
            writer.write(answer(b"{}"))
            await writer.drain()
            await read_request(reader)  # the watch on the kept-alive connection: hang up without an answer
            writer.transport.abort()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\n\r\n")
        await writer.drain()

    async with serve(h) as url:
        c = HttpClient(url)
        await fetch(c)
        async with c.stream("/w", headers={}, timeout=5) as s:
            assert await s.body() == b"ok\n"
        assert c.connects == 2
        await c.close()


async def test_close_ends_open_streams() -> None:
    gate = asyncio.Event()
    async with serve(watch_handler([b"a\n", b"b\n"], gate)) as url:
        c = HttpClient(url)
        async with c.stream("/w", headers={}, timeout=5) as s:
            assert await s.read() == b"a\n"
            await c.close()  # shutting the client down reaches a stream in progress
            with pytest.raises(ExchangeFailed):
                await s.read()
        gate.set()


def test_url_forms() -> None:
    c = HttpClient("https://[::1]:6443/k8s/clusters/c-1")
    assert (c.host, c.port, c.host_header, c.prefix, c.https) == ("::1", 6443, "[::1]:6443", "/k8s/clusters/c-1", True)
    assert c.target("/api", {"a": "b c"}) == "/k8s/clusters/c-1/api?a=b%20c"
    assert HttpClient("http://example.test").port == 80
    with pytest.raises(ValueError, match="not an http"):
        HttpClient("ftp://example.test")



def test_run_uses_uvloop_when_installed_and_the_standard_loop_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import uvloop

    from scheduler.cli import event_loop_factory

    assert event_loop_factory() is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed (Windows)
    assert event_loop_factory() is None


@pytest.fixture
def self_signed(tmp_path: Any) -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed certificate (that no client trusts)."""
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))
    return ctx


async def test_untrusted_server_certificate_is_connect_failed_and_probe_gives_up(self_signed: ssl.SSLContext) -> None:
    """A certificate that fails verification is reported as such (ConnectFailed.certificate), and the start-up
    probe raises instead of waiting: waiting does not change a certificate."""
    from scheduler.api.clusterapi import ApiError
    from scheduler.kube.client import KubeConnection

    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0, ssl=self_signed)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        with pytest.raises(ConnectFailed) as got:
            await HttpClient(url, ssl_context=ssl.create_default_context()).request("GET", "/", headers={}, timeout=5)
        assert got.value.certificate and "certificate" in got.value.certificate
        conn = KubeConnection(url, ssl_context=ssl.create_default_context(), qps=0)
        with pytest.raises(ApiError, match=r"TLS verification of the API server at .* failed"):
            await conn.probe(5)
        await conn.close()
    finally:
        server.close()


def test_the_event_loop_can_be_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """DRA_SCHEDULER_EVENT_LOOP=asyncio runs on the standard loop even with uvloop installed; a wrong value stops
    the start with a message naming the choices."""
    import uvloop

    from scheduler.cli import EVENT_LOOP_ENV, event_loop_factory

    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert event_loop_factory() is None
    monkeypatch.setenv(EVENT_LOOP_ENV, "UVLoop")
    assert event_loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv(EVENT_LOOP_ENV, "trio")
    with pytest.raises(SystemExit, match="choose uvloop or asyncio"):
        event_loop_factory()
