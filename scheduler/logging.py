"""structlog set-up: one line per event on stderr, JSON (default) or text.

* ``level``: ``debug``, ``info``, ``warning``, ``error`` (``run --log-level``; ``simulate`` is quiet, warnings
  only, unless ``-v``).
* ``fmt``: ``json`` (one JSON object a line: ``timestamp``, ``level``, ``event`` and the event's keys) or
  ``text`` (``2026-01-01T00:00:00Z [info     ] event  key=value``, no colours).
* Records of the standard library's ``logging`` (kopf, aiohttp, asyncio) go through the same renderer, at
  the same level but never below ``warning`` unless ``debug`` is asked for.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMATS = ("json", "text")
_HANDLER_NAME = "dra-scheduler"


class _CurrentStderr:
    """``sys.stderr`` looked up at each write, not when logging is configured: a stream replaced later (pytest's
    capture, a daemon redirecting it) never leaves the loggers writing to a closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(
    verbose: bool = False,
    json_logs: bool = True,
    *,
    level: str | None = None,
    fmt: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """``level``/``fmt`` win over the older ``verbose``/``json_logs`` switches."""
    if level is not None and level not in LEVELS:
        raise ValueError(f"log level {level!r}: must be one of {', '.join(LEVELS)}")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: must be one of {', '.join(FORMATS)}")
    lvl = LEVELS[level] if level is not None else (logging.INFO if verbose else logging.WARNING)
    as_json = fmt == "json" if fmt is not None else json_logs
    out: Any = stream if stream is not None else _CurrentStderr()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=30, sort_keys=False)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    # the standard library's records (third-party libraries), rendered the same way
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root.addHandler(handler)
    root.setLevel(lvl if lvl == logging.DEBUG else max(lvl, logging.WARNING))
