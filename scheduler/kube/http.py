"""A lean HTTP/1.1 client for the API server: asyncio transports and the llhttp parser (httptools).

Why not a general client: at QPS 5000 the scheduler sends three writes and an Event per pod, and in a profile
of 1,000 pods on 200 nodes aiohttp's request machinery (URL objects, multidict headers, payload writers,
tracing hooks, per-request timers) was about a sixth of the scheduler's CPU, and importing it ~0.15 s of every
start (its connector builds two default SSL contexts at import). The API server needs little of that: one
host, JSON bodies of a few KB, ``Content-Length`` or chunked answers, long-lived watch streams.

What it does, and the rules it keeps (those of Go's ``net/http`` Transport, which client-go uses):

* **Keep-alive pool.** A finished exchange whose answer allows it (``should_keep_alive``) returns its
  connection to the pool; the most recently used idle connection is taken first. Idle connections are closed
  after ``keepalive`` seconds (15, aiohttp's default: below the API server's own idle timeout, so the client,
  not the server, closes an idle connection and a request never races a server's close). A connection the
  server closed while idle is seen (``connection_lost``) and never reused.
* **Retries below HTTP.** A request on a *reused* connection that fails before any byte of an answer arrived
  is sent again once on a new connection, only if it is idempotent (GET) -- Go's ``isReplayable``. Anything
  else that fails is reported: :class:`ConnectFailed` (the connection could not be opened: nothing was sent)
  or :class:`ExchangeFailed` (it broke during the exchange: the server may have acted on the request).
* **Timeouts** cover the whole exchange; a timed-out or cancelled exchange closes its connection (its state
  is unknown), it is never pooled.
* **Streams** (watches) get a connection of their own, read chunk by chunk with flow control (reading pauses
  while more than ``HIGH_WATER`` bytes wait for the reader), and closed at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast
from urllib.parse import quote, urlencode, urlsplit

import httptools

KEEPALIVE = 15.0  # seconds an idle connection is kept (aiohttp's default keepalive_timeout)
HIGH_WATER = 4 << 20  # a stream stops reading while this many bytes wait for its reader ...
LOW_WATER = 1 << 20  # ... and reads again below this
_PATH_SAFE = "/:@-._~!$&'()*+,;="  # RFC 3986 pchar (and "/"): left as they are in a request target


class TransportError(Exception):
    """The exchange failed below HTTP (no complete answer)."""


class ConnectFailed(TransportError):
    """The connection could not be opened: nothing was sent. ``certificate`` is set when the server's TLS
    certificate failed verification (waiting does not change that)."""

    def __init__(self, message: str, certificate: str | None = None) -> None:
        super().__init__(message)
        self.certificate = certificate


class ExchangeFailed(TransportError):
    """The connection broke (or the answer was malformed) after the request may have been sent."""


class _Conn(asyncio.Protocol):
    """One connection: the protocol object of its transport and the parser's callbacks."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.last_used = 0.0
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.received = False  # a byte of the current answer arrived
        self.complete = False
        self.keep_alive = False
        self.waiter: asyncio.Future[None] | None = None
        self.stream: Stream | None = None

    # --- asyncio.Protocol -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if self.waiter is None and self.stream is None:  # nothing asked: a server's unsolicited answer (408)
            self.abort()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ExchangeFailed(f"malformed HTTP answer: {e}"))
            self.abort()

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.complete:
            why = f": {exc}" if exc else ""
            self._fail(ExchangeFailed(f"the server closed the connection before a complete answer{why}"))

    # --- httptools callbacks ------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.stream is not None:
            self.stream.status = self.status
            self.stream.headers = self.headers
            self._wake()

    def on_body(self, body: bytes) -> None:
        if self.stream is not None:
            self.stream._feed(body)
        else:
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = bool(self.parser.should_keep_alive())
        if self.stream is not None:
            self.stream._end()
        self._wake()

    # --- exchanges -------------------------------------------------------------------------------------------

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: TransportError) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_exception(exc)
        if self.stream is not None:
            self.stream._fail(exc)

    def start(self, data: bytes) -> asyncio.Future[None]:
        """Send ``data`` (a whole request); the future is done at the answer's end (or its headers, for a
        stream)."""
        self.status = 0
        self.headers = {}
        self.chunks = []
        self.received = self.complete = self.keep_alive = False
        self.waiter = fut = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None:
            fut.set_exception(ExchangeFailed("the connection was closed"))
        else:
            self.transport.write(data)
        return fut

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Stream:
    """A streamed answer (a watch): ``status``, ``headers`` and its body chunk by chunk."""

    def __init__(self, conn: _Conn) -> None:
        self._conn = conn
        self.status = 0
        self.headers: dict[str, str] = {}
        self._buf: deque[bytes] = deque()
        self._size = 0
        self._paused = False
        self._eof = False
        self._exc: TransportError | None = None
        self._wakeup: asyncio.Future[None] | None = None

    def _feed(self, chunk: bytes) -> None:
        self._buf.append(chunk)
        self._size += len(chunk)
        if self._size > HIGH_WATER and not self._paused and self._conn.transport is not None:
            self._paused = True
            self._conn.transport.pause_reading()
        self._notify()

    def _end(self) -> None:
        self._eof = True
        self._notify()

    def _fail(self, exc: TransportError) -> None:
        if self._exc is None and not self._eof:
            self._exc = exc
        self._notify()

    def _notify(self) -> None:
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    async def read(self) -> bytes:
        """The next chunk of the body; ``b""`` at its end. Raises :class:`ExchangeFailed` if the connection
        broke first."""
        while not self._buf:
            if self._exc is not None:
                raise self._exc
            if self._eof:
                return b""
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        chunk = self._buf.popleft()
        self._size -= len(chunk)
        if self._paused and self._size < LOW_WATER and self._conn.transport is not None:
            self._paused = False
            self._conn.transport.resume_reading()
        return chunk

    async def iter_any(self) -> AsyncIterator[bytes]:
        while chunk := await self.read():
            yield chunk

    async def body(self) -> bytes:
        return b"".join([c async for c in self.iter_any()])

    def close(self) -> None:
        """Stop reading: the connection is closed and :meth:`read` raises :class:`ExchangeFailed`."""
        self._fail(ExchangeFailed("the stream was closed"))
        self._conn.abort()


class HttpClient:
    """Requests to one server (``url``: scheme, host, port and an optional path prefix)."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        keepalive: float = KEEPALIVE,
        clock: Any = time.monotonic,
    ) -> None:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if u.port is None else f"{host}:{u.port}"
        self.ssl_context = (ssl_context or ssl.create_default_context()) if self.https else None
        self.server_hostname = server_hostname if self.https else None
        self.keepalive = keepalive
        self.clock = clock
        self._idle: list[_Conn] = []
        self._open: set[_Conn] = set()  # every connection not closed yet: pooled, in a request, in a stream
        self.connects = 0  # connections opened (for tests and metrics)

    # --- connections -----------------------------------------------------------------------------------------

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                _Conn, self.host, self.port, ssl=self.ssl_context, server_hostname=self.server_hostname
            )
        except ssl.SSLCertVerificationError as e:
            why = e.verify_message or str(e)
            raise ConnectFailed(f"TLS verification of {self.host_header} failed: {why}", certificate=why) from e
        except OSError as e:  # refused, unreachable, DNS, TLS handshake (ssl.SSLError is an OSError)
            raise ConnectFailed(f"cannot connect to {self.host_header}: {e}") from e
        self.connects += 1
        self._open.add(conn)
        return conn

    def _take_idle(self) -> _Conn | None:
        now = self.clock()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.last_used < self.keepalive:
                return conn
            self._drop(conn)
        return None

    def _drop(self, conn: _Conn) -> None:
        conn.abort()
        self._open.discard(conn)

    def _release(self, conn: _Conn) -> None:
        if conn.complete and conn.keep_alive and not conn.closed:
            conn.last_used = self.clock()
            conn.waiter = None
            self._idle.append(conn)
        else:
            self._drop(conn)

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def close(self) -> None:
        for conn in self._open:
            conn.abort()
        self._open.clear()
        self._idle.clear()

    # --- requests --------------------------------------------------------------------------------------------

    def target(self, path: str, params: Mapping[str, str] | None = None) -> str:
        t = self.prefix + quote(path, safe=_PATH_SAFE)
        if params:
            t += "?" + urlencode(params, quote_via=quote)
        return t

    def head(self, method: str, target: str, headers: Mapping[str, str], length: int | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        for k, v in headers.items():
            if "\r" in v or "\n" in v or "\r" in k or "\n" in k or ":" in k:
                raise ValueError(f"header {k!r}: line breaks are not allowed in a header")
            lines.append(f"{k}: {v}")
        if length is not None:
            lines.append(f"Content-Length: {length}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeout: float,
    ) -> tuple[int, dict[str, str], bytes]:
        """One exchange: (status, headers with lower-case names, body). Raises :class:`ConnectFailed`,
        :class:`ExchangeFailed` or ``TimeoutError``."""
        data = self.head(method, self.target(path, params), headers, None if body is None else len(body))
        if body:
            data += body
        async with asyncio.timeout(timeout):
            conn = await self._start(data, replayable=method in ("GET", "HEAD"))
            status, got, raw = conn.status, conn.headers, b"".join(conn.chunks)
            conn.chunks = []
            self._release(conn)
            return status, got, raw

    async def _start(
        self, data: bytes, *, replayable: bool, stream: bool = False, connect_timeout: float | None = None
    ) -> _Conn:
        """Send ``data`` on the most recently used idle connection, or a new one, and wait for the answer (its
        headers only, for a ``stream``). A reused connection lost before any byte of an answer is replaced
        once if the request is ``replayable``; a failed, timed-out or cancelled exchange drops its connection."""
        for attempt in (1, 2):
            conn = self._take_idle()
            reused = conn is not None
            if conn is None:
                async with asyncio.timeout(connect_timeout):
                    conn = await self._connect()
            if stream:
                conn.stream = Stream(conn)
            try:
                await conn.start(data)
            except ExchangeFailed:
                self._drop(conn)
                if reused and replayable and not conn.received and attempt == 1:
                    continue  # a kept-alive connection the server had closed: Go's transport retries too
                raise
            except BaseException:  # cancelled or timed out: the connection is in an unknown state
                self._drop(conn)
                raise
            return conn
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str],
        timeout: float | None,
        connect_timeout: float = 10.0,
    ) -> AsyncIterator[Stream]:
        """A GET whose answer is read as it comes, on a connection of its own while it lasts (closed at the
        end, never pooled). The stream's status and headers are set on entry; ``timeout`` bounds the whole
        exchange.

        It takes an idle kept-alive connection when there is one -- an informer watches on the connection its
        list just used -- and opens one otherwise: at start-up 23 informers list and then watch, and each
        new connection costs a TLS handshake on both sides (ECDSA: ~2 ms of the scheduler's CPU each, 83 ms
        of a live start). Like :meth:`request`, a reused connection lost before any answer is replaced once."""
        data = self.head("GET", self.target(path, params), headers, None)
        async with asyncio.timeout(timeout):
            conn = await self._start(data, replayable=True, stream=True, connect_timeout=connect_timeout)
            assert conn.stream is not None
            try:
                yield conn.stream
            finally:
                self._drop(conn)  # never pooled
