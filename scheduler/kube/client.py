"""The connection to the API server and :class:`LiveAPI`, the live :class:`~scheduler.api.clusterapi.ClusterAPI`.

* Connection settings come from kubectl's loading rules (``--kubeconfig``, else ``$KUBECONFIG`` merged,
  else ``~/.kube/config``, else the in-cluster service account; ``--context``), resolved by
  :mod:`scheduler.kube.kubeconfig` and read with kubernetes-asyncio's loaders (auth plugins, cert files);
  requests then go out as raw JSON over :mod:`scheduler.kube.http`, a lean HTTP/1.1 client with a keep-alive
  pool (no generated models: they drop unknown fields and are ~30x slower to decode).
* ``wait_reachable`` probes ``/version`` at start-up with a capped backoff for a bounded time (``run
  --connect-timeout``): a scheduler pointed at no API server says so and exits non-zero.
* Every request, watches included, passes a client-side token bucket (``--qps``/``--burst``) that serves
  Leases first, then the waiting writes of older binding cycles before newer ones; then, watches excepted, it
  waits for one of ``max_inflight`` places in flight, handed out in the same order (when the API server, not the
  QPS budget, is the bottleneck, the requests queue there and not in the connection pool's
  first-come-first-served queue): :mod:`scheduler.kube.flowcontrol`.
* HTTP errors map to the scheduler's exceptions: 409 → Conflict, 404 → NotFound, 422 → Invalid, any other
  status → ApiError(status); a request that got no answer → :class:`Unreachable` (status 0). Reads and
  writes that the server cannot have applied (429, refused connections) are retried a few times.
* ``bind`` POSTs ``pods/{name}/binding`` and accepts the 201 ``Status`` the API server answers (the typed
  client fails on it, kubernetes-client/python #547). A bind whose outcome is unknown (connection lost,
  409 because an earlier try went through) is settled by reading the pod back.
* ``event`` queues a core/v1 Event and returns; :class:`~scheduler.kube.events.EventRecorder` posts it on
  a connection of its own (own rate limiter and pool, as kube-scheduler's separate events clientset),
  aggregating identical events into one Event with a count (best effort: a failure is logged, a full queue
  drops the event, nothing is raised), as client-go's event broadcaster does.
* Every request is counted by (verb, resource, status) in ``KubeConnection.requests``
  (``dra_scheduler_api_requests_total``).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import datetime as dt
import json
import os
import random
import socket
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import structlog

from scheduler.api.clusterapi import ApiError, Conflict, Invalid, NotFound, Obj, write_sequence
from scheduler.kube.events import EventRecorder
from scheduler.kube.flowcontrol import InFlight, TokenBucket
from scheduler.kube.http import ConnectFailed, ExchangeFailed, HttpClient, Stream, TransportError
from scheduler.kube.resources import ALTERNATIVES, OPTIONAL, POD, Resource, dumps, loads, resource_for, trim

log = structlog.get_logger("dra_scheduler.kube")

DEFAULT_QPS = 200.0
DEFAULT_BURST = 400
# Requests in flight at once per connection (InFlight; run --max-inflight). kube-scheduler's client multiplexes
# its binding goroutines over HTTP/2 without a client-side cap; ours holds one HTTP/1.1 connection per request in
# flight. On the live benchmark (1,000 pods first, QPS 5000, 2 cores) a cap of 32 held the binding writes back:
# medians of 3 rounds 145-180 pods/s at 32, 201-216 at 192, 236 at 256, 213 at 512 (each connection costs a TLS
# handshake on both sides). Under a QPS budget the token bucket, not this cap, decides.
DEFAULT_MAX_INFLIGHT = 256
COMPONENT = "dra-scheduler"
USER_AGENT = "dra-scheduler/0.1"
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
EVENT_MESSAGE_LIMIT = 1024  # the API server's note length limit
RETRIES = 3


class Unreachable(ApiError):
    """No HTTP answer (connection refused or lost, timeout)."""

    status = 0


DISCOVERY_TRIES = 6  # LiveAPI.serves: a failed discovery request is asked again 5 times (0.25 .. 4 s apart)


class Fenced(ApiError):
    """A write this replica must not send: it does not hold the leader lease (``KubeConnection.write_fence``)."""

    status = 0


def error_for(status: int, body: bytes | str, what: str) -> ApiError:
    """The scheduler exception for an HTTP error answer (a ``Status`` body gives the message)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    message = text.strip()[:2000]
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and doc.get("message"):
            message = str(doc["message"])
    except ValueError:
        pass
    message = f"{what}: {message or f'HTTP {status}'}"
    if status == 409:
        return Conflict(message)
    if status == 404:
        return NotFound(message)
    if status == 422:
        return Invalid(message)
    return ApiError(message, status)


def verb_and_resource(method: str, path: str, params: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The API server's verb and resource of a request (as in its audit log and ``apiserver_request_total``):
    ``("create", "pods/binding")``, ``("update", "resourceclaims/status")``, ``("list", "nodes")``,
    ``("watch", "pods")``; discovery (``/api``, ``/apis/group/version``) is ``("get", "discovery")``, and a
    path outside the API, ``/version``, is ``("get", "version")``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return method.lower(), parts[0] if parts else ""
    if not rest:
        return method.lower(), "discovery"
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    if method == "GET":
        watch = (params or {}).get("watch") in ("true", "1")
        verb = "get" if named else ("watch" if watch else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
        if method == "DELETE" and not named:
            verb = "deletecollection"
    return verb, resource


TokenSource = Callable[[], Awaitable[str | None]]


class KubeConnection:
    """One keep-alive connection pool to the API server (:class:`~scheduler.kube.http.HttpClient`), with
    authentication and the rate limiter."""

    def __init__(
        self,
        host: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        token: TokenSource | None = None,
        basic_auth: tuple[str, str] | None = None,
        server_hostname: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        request_timeout: float = 30.0,
        user_agent: str = USER_AGENT,
        source: str = "",
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        self.host = host.rstrip("/")
        self.limiter = TokenBucket(qps, burst)
        self.inflight = InFlight(max_inflight)
        self.request_timeout = request_timeout
        self.source = source
        # requests sent (each try of a retried one), by (verb, resource, HTTP status or "error")
        self.requests: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._ssl = ssl_context
        self._token = token
        self._basic_auth = basic_auth
        self._basic = "Basic " + base64.b64encode(":".join(basic_auth).encode()).decode() if basic_auth else None
        self._server_hostname = server_hostname
        self._user_agent = user_agent
        self._http: HttpClient | None = None
        self._background: list[asyncio.Task[Any]] = []
        # set by from_kubeconfig: the endpoint and credentials for other clients (kopf) of the same cluster
        self.login: Callable[[], Awaitable[dict[str, Any]]] | None = None
        # with leader election: asked right before a write (not a read, not a Lease request) is sent; False = the
        # write is not sent (Fenced). Siblings share it.
        self.write_fence: Callable[[], bool] | None = None
        # writes sent and not answered yet: a replica giving its lease up waits for them first, so none of its
        # writes reaches the API server after the release (a cancelled request may already be on the wire)
        self.writes_in_flight = 0
        self._writes_idle: asyncio.Event | None = None

    @classmethod
    async def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        env: Mapping[str, str] | None = None,
        service_account_dir: str | None = None,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> KubeConnection:
        """kubectl's loading rules (:mod:`scheduler.kube.kubeconfig`): ``kubeconfig``, else ``$KUBECONFIG``
        (merged), else ``~/.kube/config``, else the in-cluster service account. Raises
        :class:`~scheduler.kube.kubeconfig.KubeconfigError` with a one-line message."""
        from scheduler.kube.kubeconfig import (
            HOST_ENV,
            PORT_ENV,
            InCluster,
            KubeconfigError,
            resolve,
            static_settings,
            tls_context,
        )

        env = os.environ if env is None else env
        found = resolve(kubeconfig, context, env, service_account_dir)
        settings = static_settings(found)
        if settings is not None:  # no plugin needed: without kubernetes-asyncio (~0.2 s of start-up CPU)
            conn = cls(
                settings.host,
                ssl_context=settings.ssl_context(),
                token=settings.authorization,
                server_hostname=settings.tls_server_name,
                qps=qps,
                burst=burst,
                source=settings.source,
                max_inflight=max_inflight,
            )
            conn.login = settings.login
            log.info("api server connection", host=conn.host, source=settings.source, context=settings.context)
            return conn
        from kubernetes_asyncio.client import Configuration
        from kubernetes_asyncio.config import kube_config
        from kubernetes_asyncio.config.config_exception import ConfigException
        from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

        cfg = Configuration()
        loader = None
        try:
            if isinstance(found, InCluster):
                ic_env = {HOST_ENV: env.get(HOST_ENV, ""), PORT_ENV: env.get(PORT_ENV, "")}
                InClusterConfigLoader(found.token_file, found.ca_file, environ=ic_env).load_and_set(cfg)
            else:
                loader = kube_config.KubeConfigLoader(
                    config_dict=found.merged, active_context=found.context, config_base_path=None
                )
                await loader.load_and_set(cfg)
        except (ConfigException, AssertionError, KeyError, TypeError, ValueError, OSError) as e:
            where = found.source if isinstance(found, InCluster) else f"{found.source}, context {found.context}"
            raise KubeconfigError(f"{where}: {str(e) or type(e).__name__}") from None
        source = found.source
        context_name = None if isinstance(found, InCluster) else found.context
        if not str(cfg.host or "").startswith(("http://", "https://")):
            raise KubeconfigError(f"{source}: the cluster has no server URL (got {cfg.host!r})")
        ctx = tls_context(source, cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file, bool(cfg.verify_ssl))

        async def token() -> str | None:
            if "BearerToken" not in cfg.api_key and cfg.refresh_api_key_hook is None:
                return None
            value = await cfg.get_api_key_with_prefix("BearerToken")
            return str(value) if value else None

        basic = (str(cfg.username), str(cfg.password)) if cfg.username and cfg.password else None
        conn = cls(
            str(cfg.host),
            ssl_context=ctx if str(cfg.host).startswith("https") else None,
            token=token,
            basic_auth=basic,
            server_hostname=cfg.tls_server_name or None,
            qps=qps,
            burst=burst,
            source=source,
            max_inflight=max_inflight,
        )

        async def login() -> dict[str, Any]:
            """The same endpoint and credentials as keyword arguments of ``kopf.ConnectionInfo``."""
            tok = await token() or ""
            scheme, value = tok.split(" ", 1) if " " in tok else ("Bearer", tok)
            return {
                "server": conn.host,
                "ca_path": cfg.ssl_ca_cert or None,
                "insecure": not cfg.verify_ssl or None,
                "certificate_path": cfg.cert_file or None,
                "private_key_path": cfg.key_file or None,
                "username": basic[0] if basic else None,
                "password": basic[1] if basic else None,
                "scheme": scheme if value else None,
                "token": value or None,
            }

        conn.login = login
        if loader is not None and (loader.provider == "gcp" or "exec" in (loader._user or {})):
            # exec-plugin / gcp tokens expire: refresh them in the background, as kubernetes-asyncio does
            conn._background.append(asyncio.create_task(kube_config.refresh_token(loader, cfg)))
        log.info("api server connection", host=conn.host, source=source, context=context_name, qps=qps, burst=burst)
        return conn

    def sibling(self, user_agent: str | None = None) -> KubeConnection:
        """A second connection to the same API server with the same credentials and the same QPS/burst, but
        its own rate limiter and its own connection pool: what kube-scheduler's ``createClients``
        (cmd/kube-scheduler/app/options/options.go) makes for Events, so that recording them never delays
        a scheduling request (and the other way round)."""
        other = KubeConnection(
            self.host,
            ssl_context=self._ssl,
            token=self._token,
            basic_auth=self._basic_auth,
            server_hostname=self._server_hostname,
            qps=self.limiter.qps,
            burst=self.limiter.burst,
            request_timeout=self.request_timeout,
            user_agent=user_agent or self._user_agent,
            source=self.source,
            max_inflight=self.inflight.limit,
        )
        other.login = self.login
        other.write_fence = self.write_fence
        return other

    async def probe(self, timeout: float) -> str:
        """One GET /version: "" when the API server answered (any HTTP status but 401), else why not.
        Raises :class:`ApiError` for answers that waiting will not change (401, a TLS verification error)."""
        await self.limiter.acquire()
        headers = await self._headers(None)
        try:
            status, _, _ = await self.http.request("GET", "/version", headers=headers, timeout=max(timeout, 0.05))
        except (TransportError, TimeoutError, OSError) as e:
            if isinstance(e, ConnectFailed) and e.certificate is not None:  # waiting will not change that
                raise ApiError(f"TLS verification of the API server at {self.host} failed: {e.certificate}", 0) from e
            return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        self.requests["get", "version", str(status)] += 1
        if status == 401:
            raise ApiError(
                f"the API server at {self.host} rejected the credentials of {self.source or 'this client'} "
                "(401 Unauthorized)",
                401,
            )
        if status >= 500:
            return f"HTTP {status} from {self.host}/version"
        return ""

    async def wait_reachable(
        self,
        timeout: float | None,
        *,
        on_wait: Callable[[str], None] | None = None,
        initial_delay: float = 0.5,
        max_delay: float = 8.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Probe until the API server answers, with a capped, jittered exponential backoff, for at most
        ``timeout`` seconds (None: for ever); then raise :class:`Unreachable` naming the server and the last
        error. Each failed probe is logged (what is waited for, the error, the time left) and passed to
        ``on_wait``."""
        deadline = None if timeout is None else clock() + timeout
        delay = initial_delay
        attempt = 0
        while True:
            attempt += 1
            left = None if deadline is None else deadline - clock()
            why = await self.probe(10.0 if left is None else min(max(left, 0.05), 10.0))
            if not why:
                if attempt > 1:
                    log.info("api server reachable", host=self.host, attempts=attempt)
                return
            left = None if deadline is None else deadline - clock()
            if left is not None and left <= 0:
                raise Unreachable(
                    f"the API server at {self.host} ({self.source or 'given connection'}) was not reachable within "
                    f"{timeout:g}s ({attempt} attempts; last error: {why})"
                )
            wait = delay * random.uniform(0.8, 1.2)
            if left is not None:
                wait = min(wait, left)
            log.warning(
                "waiting for the API server",
                host=self.host,
                source=self.source,
                error=why,
                attempt=attempt,
                retry_in=round(wait, 2),
                gives_up_in=None if left is None else round(left, 1),
            )
            if on_wait is not None:
                on_wait(f"waiting for the API server at {self.host} (attempt {attempt}: {why})")
            await asyncio.sleep(wait)
            delay = min(delay * 2, max_delay)

    @property
    def http(self) -> HttpClient:
        if self._http is None:
            self._http = HttpClient(self.host, ssl_context=self._ssl, server_hostname=self._server_hostname)
        return self._http

    async def close(self) -> None:
        await self.limiter.close()
        self.inflight.close()
        for t in self._background:
            t.cancel()
        for t in self._background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._background.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        h = {"User-Agent": self._user_agent, "Accept": JSON}
        if content_type:
            h["Content-Type"] = content_type
        if self._token is not None:
            tok = await self._token()
            if tok:
                h["Authorization"] = tok if " " in tok else f"Bearer {tok}"
        if self._basic is not None and "Authorization" not in h:
            h["Authorization"] = self._basic
        return h

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        retry_unsent: bool = True,
    ) -> Any:
        """Send one request and return the decoded JSON answer (``None`` for an empty body).

        Its turn at the rate limiter, and then for a place among the requests in flight (:class:`InFlight`):
        a Lease request first, a request inside a binding cycle (:func:`scheduler.api.clusterapi.pod_writes`) by the
        age of its cycle, anything else first come, first served (:class:`~scheduler.kube.flowcontrol.TokenBucket`).

        Retried (up to RETRIES times, with backoff) only when the server cannot have acted on it: 429
        (throttled by API Priority and Fairness, honouring Retry-After) and connections that could not be
        opened; a GET is also retried on other connection errors and on 5xx answers."""
        data = None if body is None else dumps(body)
        what = f"{method} {path}"
        idempotent = method == "GET"
        verb, resource = verb_and_resource(method, path, params)
        critical = resource.startswith("leases")
        priority = None if critical else write_sequence()
        attempt = 0
        while True:
            attempt += 1
            await self.limiter.acquire(priority, critical=critical)
            headers = await self._headers(content_type if data is not None else None)
            retry_after = 0.0
            try:
                async with self.inflight.place(priority, critical):
                    fence = self.write_fence
                    if fence is not None and not critical and not idempotent and not fence():
                        self.requests[verb, resource, "fenced"] += 1
                        raise Fenced(f"{what}: not sent: this replica does not hold the leader lease")
                    if idempotent or critical:
                        status, retry_header, raw = await self._send(method, path, params, data, headers, timeout)
                    else:
                        self._write_started()
                        try:
                            status, retry_header, raw = await self._send(method, path, params, data, headers, timeout)
                        finally:
                            self._write_ended()
            except ConnectFailed as e:  # not sent
                self.requests[verb, resource, "error"] += 1
                if not retry_unsent or attempt >= RETRIES:
                    raise Unreachable(f"{what}: {e}") from e
            except (ExchangeFailed, TimeoutError) as e:
                self.requests[verb, resource, "error"] += 1
                if not idempotent or attempt >= RETRIES:
                    raise Unreachable(f"{what}: {type(e).__name__}: {e}") from e
            else:
                self.requests[verb, resource, str(status)] += 1
                if status < 300:
                    return loads(raw) if raw.strip() else None
                err = error_for(status, raw, what)
                retryable = status == 429 or (idempotent and status >= 500)
                if not retryable or attempt >= RETRIES:
                    raise err
                retry_after = _retry_after(retry_header)
            delay = max(retry_after, 0.1 * 2**attempt * random.uniform(0.5, 1.5))
            log.info("retrying request", request=what, attempt=attempt, delay=round(delay, 3))
            await asyncio.sleep(delay)

    def _write_started(self) -> None:
        self.writes_in_flight += 1
        if self._writes_idle is not None:
            self._writes_idle.clear()

    def _write_ended(self) -> None:
        self.writes_in_flight -= 1
        if self.writes_in_flight == 0 and self._writes_idle is not None:
            self._writes_idle.set()

    async def writes_settled(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until no write of this connection is in flight; False on timeout."""
        if self.writes_in_flight == 0:
            return True
        if self._writes_idle is None:
            self._writes_idle = asyncio.Event()
        try:
            async with asyncio.timeout(timeout):  # not wait_for: 3.11 can lose a cancel
                await self._writes_idle.wait()
        except TimeoutError:
            return False
        return True

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> tuple[int, str | None, bytes]:
        """One HTTP exchange: (status, Retry-After header, body). Raises :class:`ConnectFailed` (not sent),
        :class:`ExchangeFailed` and ``TimeoutError``."""
        status, got, raw = await self.http.request(
            method, path, params=params, headers=headers, body=data, timeout=timeout or self.request_timeout
        )
        return status, got.get("retry-after"), raw

    @contextlib.asynccontextmanager
    async def stream(self, path: str, params: Mapping[str, str], timeout: float | None = None) -> AsyncIterator[Stream]:
        """A streaming GET (watch): the response, its status already checked (error → ApiError). A broken
        stream raises :class:`~scheduler.kube.http.ExchangeFailed` from its reads."""
        await self.limiter.acquire()
        _, resource = verb_and_resource("GET", path)
        headers = await self._headers(None)
        try:
            async with self.http.stream(path, params=params, headers=headers, timeout=timeout) as resp:
                self.requests["watch", resource, str(resp.status)] += 1
                if resp.status != 200:
                    raise error_for(resp.status, await resp.body(), f"GET {path} (watch)")
                yield resp
        except ConnectFailed as e:
            self.requests["watch", resource, "error"] += 1
            raise Unreachable(f"GET {path} (watch): {e}") from e


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 0), 0.0), 30.0)
    except ValueError:
        return 0.0


async def iter_lines(resp: Stream) -> AsyncIterator[bytes]:
    """The lines of a streamed body, however long (a watch event holds a whole object)."""
    buf = bytearray()
    async for chunk in resp.iter_any():
        start = len(buf)
        buf += chunk
        i = buf.find(b"\n", start)
        while i >= 0:
            line = bytes(buf[:i])
            del buf[: i + 1]
            if line.strip():
                yield line
            i = buf.find(b"\n")
    if bytes(buf).strip():
        yield bytes(buf)


def now_rfc3339(micro: bool = False) -> str:
    t = dt.datetime.now(dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if micro else t.strftime("%Y-%m-%dT%H:%M:%SZ")


class LiveAPI:
    """:class:`~scheduler.api.clusterapi.ClusterAPI` over a :class:`KubeConnection`, with the same semantics as
    :class:`~scheduler.simulate.memapi.InMemoryAPI` (optimistic concurrency, UID-guarded binding)."""

    def __init__(
        self,
        conn: KubeConnection,
        *,
        events_conn: KubeConnection | None = None,
        component: str = COMPONENT,
        instance: str | None = None,
        event_queue_size: int = 1000,
    ) -> None:
        """``events_conn``: the connection Events go out on (default: ``conn.sibling()``, closed by
        :meth:`close`): never ``conn`` itself, so that Events and scheduling writes do not share a limiter."""
        self.conn = conn
        self.component = component
        self.instance = instance or socket.gethostname()
        self.served: dict[Resource, bool] = {}
        self._own_events_conn = events_conn is None
        self.events_conn = events_conn if events_conn is not None else conn.sibling()
        self.recorder = EventRecorder(
            self.events_conn, queue_size=event_queue_size, yield_to=lambda: conn.inflight.waiting > 0
        )

    @property
    def events_posted(self) -> int:
        return self.recorder.counts["posted"]

    @property
    def events_dropped(self) -> int:
        return self.recorder.counts["dropped"]

    # --- discovery ---------------------------------------------------------------------------------------

    async def discover(self) -> dict[Resource, bool]:
        """Which optional APIs (PodGroup CRD, scheduling.k8s.io PodGroups) the cluster serves."""
        found = await asyncio.gather(*(self.serves(r) for r in OPTIONAL))  # one round trip of start-up, not one each
        self.served.update(zip(OPTIONAL, found, strict=True))
        return dict(self.served)

    async def serves(self, r: Resource, tries: int = DISCOVERY_TRIES) -> bool:
        """Whether the API server serves ``r``: 404 on its group version means no. Any other failure (a kube-apiserver
        just restarted answers 403 until its authorizer has loaded, or 5xx, or nothing) is asked again with backoff
        before it counts as "not served": a replica started then ran without its PodGroup informers, and as leader
        told every gang member its PodGroup did not exist, until the next discovery round 30 s later."""
        for attempt in range(tries):
            try:
                doc = await self.conn.request("GET", r.group_version_path)
            except NotFound:
                return False
            except ApiError as e:
                if attempt + 1 < tries:
                    await asyncio.sleep(min(4.0, 0.25 * 2**attempt))
                    continue
                log.warning("API discovery failed; treating the API as not served", api=r.api_version, error=str(e))
                return False
            return any(isinstance(x, dict) and x.get("name") == r.plural for x in (doc or {}).get("resources") or [])
        return False

    def _resource(self, kind: str, api_version: str = "") -> Resource:
        r = resource_for(kind, api_version)
        if not api_version and kind in ALTERNATIVES and self.served and not self.served.get(r, True):
            for alt in ALTERNATIVES[kind]:
                if self.served.get(alt):
                    return alt
        return r

    def _candidates(self, kind: str) -> list[Resource]:
        """For a read or write by name only: the preferred resource, then the other served versions."""
        first = self._resource(kind)
        rest = [r for r in ALTERNATIVES.get(kind, ()) if r != first and self.served.get(r)]
        return [first, *rest]

    # --- ClusterAPI -------------------------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        last: ApiError | None = None
        for r in self._candidates(kind):
            try:
                return _typed(await self.conn.request("GET", r.path(namespace, name)), r)
            except NotFound as e:
                last = e
        assert last is not None
        raise last

    async def list(self, kind: str, namespace: str = "", **params: str) -> list[Obj]:
        """All objects of ``kind`` (one page after the other). Not on the ClusterAPI protocol."""
        r = self._resource(kind)
        out: list[Obj] = []
        cont = ""
        while True:
            q = {**params, "limit": "500"}
            if cont:
                q["continue"] = cont
            doc = await self.conn.request("GET", r.path(namespace), params=q)
            out.extend(_typed(o, r) for o in doc.get("items") or [])
            cont = (doc.get("metadata") or {}).get("continue") or ""
            if not cont:
                return out

    async def create(self, kind: str, obj: Obj) -> Obj:
        r = self._resource(kind, str(obj.get("apiVersion") or ""))
        body = {**obj, "apiVersion": r.api_version, "kind": r.kind}
        ns = (obj.get("metadata") or {}).get("namespace") or ("default" if r.namespaced else "")
        return _typed(await self.conn.request("POST", r.path(ns), body=body), r)

    async def update(self, kind: str, obj: Obj, subresource: str = "") -> Obj:
        """PUT; the object's metadata.resourceVersion makes it conditional (stale → Conflict)."""
        r = self._resource(kind, str(obj.get("apiVersion") or ""))
        m = obj.get("metadata") or {}
        if not m.get("resourceVersion"):
            raise Invalid(f"{kind} {m.get('name')}: update needs metadata.resourceVersion")
        # without managedFields: the server keeps the stored ones (see scheduler.kube.resources.trim)
        body = {**obj, "apiVersion": r.api_version, "kind": r.kind}
        if "managedFields" in m:
            body["metadata"] = {k: v for k, v in m.items() if k != "managedFields"}
        path = r.path(m.get("namespace") or "", m.get("name") or "", subresource)
        return _typed(await self.conn.request("PUT", path, body=body), r)

    async def patch(self, kind: str, namespace: str, name: str, patch: Obj, subresource: str = "") -> Obj:
        """Merge patch (RFC 7386); a Pod's status is patched with a strategic merge patch so that the
        conditions and claim statuses it does not name survive (list entries merge by key).
        ``metadata.uid`` / ``metadata.resourceVersion`` in the patch are checked by the API server."""
        last: ApiError | None = None
        for r in self._candidates(kind):
            ctype = STRATEGIC_MERGE_PATCH if (r == POD and subresource == "status") else MERGE_PATCH
            try:
                doc = await self.conn.request(
                    "PATCH", r.path(namespace, name, subresource), body=patch, content_type=ctype
                )
            except NotFound as e:
                last = e
                continue
            return _typed(doc, r)
        assert last is not None
        raise last

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        last: ApiError | None = None
        for r in self._candidates(kind):
            try:
                await self.conn.request("DELETE", r.path(namespace, name))
                return
            except NotFound as e:
                last = e
        assert last is not None
        raise last

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/{name}/binding with the pod UID as precondition (201 + a Status is success)."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.conn.request("POST", POD.path(namespace, name, "binding"), body=body)
            return
        except (Conflict, Unreachable) as e:
            # An earlier try, or this one, may have gone through: the pod, read back, settles it.
            if await self._bound_to(namespace, name, uid, node):
                log.info("binding confirmed by reading the pod back", pod=f"{namespace}/{name}", node=node)
                return
            raise e
        except ApiError as e:
            if e.status >= 500 and await self._bound_to(namespace, name, uid, node):
                return
            raise

    async def _bound_to(self, namespace: str, name: str, uid: str, node: str) -> bool:
        try:
            pod = await self.conn.request("GET", POD.path(namespace, name))
        except ApiError:
            return False
        return bool((pod.get("metadata") or {}).get("uid") == uid and (pod.get("spec") or {}).get("nodeName") == node)

    async def event(self, obj: Obj, event_type: str, reason: str, message: str, action: str) -> None:
        """Record a core/v1 Event about ``obj`` on the events connection (aggregated into series: see
        :mod:`scheduler.kube.events`); never raises, never waits for the API server."""
        try:
            ev = self._event_body(obj, event_type, reason, message, action)
        except Exception as e:  # best effort: a malformed object must not break scheduling
            log.warning("event not recorded", reason=reason, error=str(e))
            return
        self.recorder.record(ev)

    def _event_body(self, obj: Obj, event_type: str, reason: str, message: str, action: str) -> Obj:
        m = obj.get("metadata") or {}
        kind = str(obj.get("kind") or "")
        api_version = str(obj.get("apiVersion") or "")
        if not api_version and kind:
            with contextlib.suppress(ValueError):
                api_version = resource_for(kind).api_version
        ns = str(m.get("namespace") or "")
        name = str(m.get("name") or "")
        if len(message) > EVENT_MESSAGE_LIMIT:
            message = message[: EVENT_MESSAGE_LIMIT - 4] + " ..."
        now = now_rfc3339()
        involved = {"apiVersion": api_version, "kind": kind, "name": name, "namespace": ns, "uid": m.get("uid", "")}
        if m.get("resourceVersion"):
            involved["resourceVersion"] = m["resourceVersion"]
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}{uuid.uuid4().hex[:4]}", "namespace": ns or "default"},
            "involvedObject": involved,
            "type": event_type,
            "reason": reason,
            "message": message,
            "action": action,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    async def flush_events(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout`` seconds) until every queued event has been written or given up."""
        await self.recorder.flush(timeout)

    async def close(self, timeout: float = 5.0) -> None:
        """Flush the Events (what is queued, and the counts of running series), then close the events
        connection if this object opened it."""
        await self.recorder.close(timeout)
        if self._own_events_conn:
            await self.events_conn.close()


def _typed(obj: Any, r: Resource) -> Obj:
    """List items come without apiVersion/kind: give them the resource's, so the object is self-describing.
    ``metadata.managedFields`` are dropped, as the informers drop them (:func:`scheduler.kube.resources.trim`)."""
    if not isinstance(obj, dict):
        raise ApiError(f"unexpected answer for {r.kind}: {type(obj).__name__}")
    if "kind" not in obj or "apiVersion" not in obj:
        obj.setdefault("apiVersion", r.api_version)
        obj.setdefault("kind", r.kind)
    trim(obj)
    return obj
