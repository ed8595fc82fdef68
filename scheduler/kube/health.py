"""HTTP endpoints for the kubelet and Prometheus: ``/healthz``, ``/readyz``, ``/metrics``.

* ``/healthz`` (and ``/livez``): 200 while the process is alive and its event loop answers (this handler runs
  on the loop the scheduler runs on, so a blocked loop fails the probe by timing out), and every check passed
  in ``live`` holds (e.g. the scheduling loop task has not died).
* ``/readyz``: 200 once every informer has applied its first list, whether or not this replica leads.
* ``/metrics``: the Prometheus text exposition of the scheduler's own registry.

A small HTTP/1.1 server on asyncio with the llhttp request parser (httptools), not a web framework: three
GET routes do not need one, and importing aiohttp's was ~0.15 s of every start. It keeps connections alive
(Prometheus and the kubelet reuse them), answers HEAD like GET without a body, 404 to other paths, 405 to
other methods, 400 to what does not parse, 431 to a request head over ``MAX_HEAD`` bytes, and closes a
connection idle for ``IDLE_TIMEOUT`` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http import HTTPStatus
from typing import cast
from urllib.parse import urlsplit

import httptools
import structlog

from scheduler.kube.metrics import CONTENT_TYPE_LATEST, SchedulerMetrics

log = structlog.get_logger("dra_scheduler.health")

Check = Callable[[], tuple[bool, str]]  # -> (ok, detail)
Answer = tuple[int, str, bytes]  # (status, content type, body)

MAX_HEAD = 64 << 10  # bytes of request line and headers
IDLE_TIMEOUT = 60.0  # seconds a connection may sit without a request
TEXT = "text/plain; charset=utf-8"


class HealthServer:
    def __init__(
        self,
        metrics: SchedulerMetrics,
        *,
        host: str = "0.0.0.0",
        port: int = 10259,
        ready: Check | None = None,
        live: Check | None = None,
        before_scrape: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self.ready = ready
        self.live = live
        self.before_scrape = before_scrape
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_HttpConnection] = set()
        self.routes: dict[str, Callable[[], Answer]] = {
            "/healthz": lambda: self._answer(self.live),
            "/livez": lambda: self._answer(self.live),
            "/readyz": lambda: self._answer(self.ready),
            "/metrics": self._metrics,
        }

    async def start(self) -> int:
        """Listen; returns the port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _HttpConnection(self), self.host, self.port)
        if self.port == 0 and self._server.sockets:
            self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("serving health and metrics", address=f"{self.host}:{self.port}")
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for c in list(self._conns):
                c.close()
            await self._server.wait_closed()
            self._server = None

    def answer(self, method: str, target: str) -> Answer:
        """The answer to one request (``target``: the request line's path and query)."""
        path = urlsplit(target).path
        route = self.routes.get(path)
        if route is None:
            return 404, TEXT, b"404: Not Found\n"
        if method not in ("GET", "HEAD"):
            return 405, TEXT, b"405: Method Not Allowed\n"
        return route()

    @staticmethod
    def _answer(check: Check | None) -> Answer:
        ok, detail = check() if check is not None else (True, "ok")
        return (200 if ok else 503), TEXT, ((detail or ("ok" if ok else "not ok")) + "\n").encode()

    def _metrics(self) -> Answer:
        if self.before_scrape is not None:
            try:
                self.before_scrape()
            except Exception as e:  # never fail a scrape on a stale gauge
                log.warning("metrics refresh failed", error=repr(e))
        return 200, CONTENT_TYPE_LATEST, self.metrics.exposition()


class _HttpConnection(asyncio.Protocol):
    """One client connection: requests parsed by httptools, answered in order."""

    def __init__(self, server: HealthServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.head = 0
        self.too_large = False
        self.idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        self.server._conns.add(self)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._conns.discard(self)
        if self.idle is not None:
            self.idle.cancel()

    def data_received(self, data: bytes) -> None:
        self._arm()
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, _TooLarge):  # an exception in a callback arrives wrapped
            if self.too_large:
                self._reply(431, TEXT, b"431: Request Header Fields Too Large\n", keep_alive=False, head=False)
            else:
                self._reply(400, TEXT, b"400: Bad Request\n", keep_alive=False, head=False)

    def _arm(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        self.idle = asyncio.get_running_loop().call_later(IDLE_TIMEOUT, self.close)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url = b""
        self.head = 0

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._count(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)

    def _count(self, n: int) -> None:
        self.head += n
        if self.head > MAX_HEAD:
            self.too_large = True
            raise _TooLarge

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode("latin-1")
        keep = bool(self.parser.should_keep_alive())
        try:
            status, ctype, body = self.server.answer(method, self.url.decode("latin-1"))
        except Exception as e:  # a failing check answers 500, the server goes on
            log.warning("health endpoint failed", path=self.url.decode("latin-1"), error=repr(e))
            status, ctype, body = 500, TEXT, b"500: Internal Server Error\n"
        self._reply(status, ctype, body, keep_alive=keep, head=method == "HEAD")

    def _reply(self, status: int, ctype: str, body: bytes, *, keep_alive: bool, head: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        reason = HTTPStatus(status).phrase
        lines = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        self.transport.write(lines.encode("latin-1") + (b"" if head else body))
        if not keep_alive:
            self.transport.close()


class _TooLarge(Exception):
    pass
