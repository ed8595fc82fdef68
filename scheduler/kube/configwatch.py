"""The scheduler configuration, from a file or a ConfigMap, watched and applied without a restart.

* ``--config F``: the file is read at start and polled (a ConfigMap mounted as a volume changes by an
  atomic symlink swap, which polling the content sees).
* ``--config-map NS/NAME``: key ``scheduler-config.yaml``, read at start and then watched (an informer on
  that one object).

A valid change is handed to ``apply`` (``Scheduler.reconfigure``). An invalid one is rejected: an ERROR log
line and, for a ConfigMap, a Warning Event on it, each giving every error with its field path; the
configuration in force stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.api.clusterapi import ApiError, NotFound, Obj
from scheduler.config.schedulerconfig import (
    CONFIGMAP_KEY,
    ConfigError,
    SchedulerConfig,
    config_from_document,
    load_config_file,
)
from scheduler.kube.client import KubeConnection, LiveAPI
from scheduler.kube.informer import Informer
from scheduler.kube.resources import CONFIGMAP

log = structlog.get_logger("dra_scheduler.config")

Apply = Callable[[SchedulerConfig], None]
REJECTED_REASON = "InvalidSchedulerConfiguration"
APPLIED_REASON = "SchedulerConfigurationApplied"


def parse_config_map_ref(ref: str) -> tuple[str, str]:
    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"--config-map must be NAMESPACE/NAME, got {ref!r}")
    return ns, name


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ConfigWatcher:
    def __init__(
        self,
        apply: Apply,
        *,
        file: str | None = None,
        config_map: str | None = None,
        api: LiveAPI | None = None,
        conn: KubeConnection | None = None,
        poll_interval: float = 2.0,
        on_result: Callable[[str], None] | None = None,
        informer_options: dict[str, Any] | None = None,
    ) -> None:
        if file and config_map:
            raise ValueError("use --config or --config-map, not both")
        self.apply = apply
        self.file = file
        self.api = api
        self.conn = conn
        self.poll_interval = poll_interval
        self.on_result = on_result
        self.namespace, self.name = parse_config_map_ref(config_map) if config_map else ("", "")
        self._informer_options = informer_options or {}
        self._applied = ""  # digest of the text in force
        self._rejected = ""  # digest of the last text rejected (reported once)
        self.informer: Informer | None = None
        self.current: SchedulerConfig | None = None

    @property
    def source(self) -> str:
        if self.file:
            return self.file
        if self.name:
            return f"configmap {self.namespace}/{self.name}"
        return "defaults"

    # --- start ----------------------------------------------------------------------------------------------

    async def initial(self) -> SchedulerConfig | None:
        """The configuration to start with (raises ConfigError when it is invalid); None = defaults."""
        if self.file:
            text = _read(self.file)
            self._applied = _digest(text)
            self.current = load_config_file(self.file)
            return self.current
        if self.name:
            assert self.api is not None
            try:
                cm = await self.api.get("ConfigMap", self.namespace, self.name)
            except NotFound:
                log.warning("configuration ConfigMap not found; starting with defaults", source=self.source)
                return None
            text = _cm_text(cm) or ""
            try:
                self.current = config_from_document(cm)
            except ConfigError as e:
                await self._report_rejected(cm, e.errors)
                raise
            self._applied = _digest(text)
            return self.current
        return None

    # --- watch ----------------------------------------------------------------------------------------------

    async def run(self) -> None:
        if self.file:
            await self._poll_file()
        elif self.name:
            assert self.conn is not None
            self.informer = Informer(
                self.conn,
                CONFIGMAP,
                self._on_event,
                namespace=self.namespace,
                field_selector=f"metadata.name={self.name}",
                name=f"configmap {self.namespace}/{self.name}",
                **self._informer_options,
            )
            try:
                await self.informer.run()
            finally:
                self.informer = None

    async def _poll_file(self) -> None:
        assert self.file is not None
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                text = _read(self.file)
            except OSError as e:
                log.warning("cannot read the configuration file; keeping the configuration in force", error=str(e))
                continue
            digest = _digest(text)
            if digest in (self._applied, self._rejected):
                continue
            try:
                cfg = load_config_file(self.file)
            except ConfigError as e:
                self._rejected = digest
                self._log_rejected(e.errors)
                continue
            self._try_apply(cfg, digest, None)

    def _on_event(self, kind: str, event: str, cm: Obj) -> None:
        if event == "DELETED":
            log.warning("configuration ConfigMap deleted; keeping the configuration in force", source=self.source)
            return
        text = _cm_text(cm)
        digest = _digest(text or "")
        if digest in (self._applied, self._rejected):
            return
        try:
            cfg = config_from_document(cm)
        except ConfigError as e:
            self._rejected = digest
            self._spawn(self._report_rejected(cm, e.errors))
            return
        self._try_apply(cfg, digest, cm)

    def _try_apply(self, cfg: SchedulerConfig, digest: str, cm: Obj | None) -> None:
        try:
            self.apply(cfg)
        except Exception as e:  # a framework that cannot be built from a config that validated
            self._rejected = digest
            errors = [f"config: cannot build the scheduler framework: {e}"]
            if cm is not None:
                self._spawn(self._report_rejected(cm, errors))
            else:
                self._log_rejected(errors)
            return
        self._applied = digest
        self._rejected = ""
        self.current = cfg
        log.info("configuration reloaded", source=self.source)
        if self.on_result is not None:
            self.on_result("applied")
        if cm is not None and self.api is not None:
            self._spawn(self.api.event(cm, "Normal", APPLIED_REASON, "scheduler configuration applied", "Reconfigure"))

    def _log_rejected(self, errors: list[str]) -> None:
        log.error(
            "invalid scheduler configuration rejected; keeping the configuration in force",
            source=self.source,
            errors=errors,
        )
        if self.on_result is not None:
            self.on_result("rejected")

    async def _report_rejected(self, cm: Obj, errors: list[str]) -> None:
        self._log_rejected(errors)
        if self.api is None:
            return
        message = f"invalid scheduler configuration rejected ({len(errors)} error(s)): " + "; ".join(errors)
        with contextlib.suppress(ApiError):
            await self.api.event(cm, "Warning", REJECTED_REASON, message, "Reconfigure")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)


_tasks: set[asyncio.Future[Any]] = set()


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _cm_text(cm: Obj) -> str | None:
    data = cm.get("data") or {}
    v = data.get(CONFIGMAP_KEY) if isinstance(data, dict) else None
    return v if isinstance(v, str) else None
