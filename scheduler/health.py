"""HTTP endpoints for the kubelet and Prometheus: ``/healthz``, ``/readyz``, ``/metrics`` (aiohttp).

* ``/healthz``: 200 while the process is alive and its event loop answers (this handler runs on the loop
  the scheduler runs on, so a blocked loop fails the probe by timing out), and every check passed in
  ``live`` holds (e.g. the scheduling loop task has not died).
* ``/readyz``: 200 once every informer has applied its first list, whether or not this replica leads.
* ``/metrics``: the Prometheus text exposition of the scheduler's own registry.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web

from scheduler.metrics import CONTENT_TYPE_LATEST, SchedulerMetrics

log = structlog.get_logger("dra_scheduler.health")

Check = Callable[[], tuple[bool, str]]  # -> (ok, detail)


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
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/livez", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)

    async def start(self) -> int:
        """Listen; returns the port (useful with port 0)."""
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            if sockets:
                self.port = int(sockets[0].getsockname()[1])
        log.info("serving health and metrics", address=f"{self.host}:{self.port}")
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @staticmethod
    def _answer(check: Check | None) -> web.Response:
        ok, detail = check() if check is not None else (True, "ok")
        return web.Response(status=200 if ok else 503, text=(detail or ("ok" if ok else "not ok")) + "\n")

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._answer(self.live)

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._answer(self.ready)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.before_scrape is not None:
            try:
                self.before_scrape()
            except Exception as e:  # never fail a scrape on a stale gauge
                log.warning("metrics refresh failed", error=repr(e))
        body = self.metrics.exposition()
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp
