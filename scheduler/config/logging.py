"""structlog set-up: one line per event on stderr, JSON (default) or text.

* ``level``: ``debug``, ``info``, ``warning``, ``error`` (``run --log-level``; ``simulate`` is quiet, warnings
  only, unless ``-v``).
* ``fmt``: ``json`` (one JSON object a line: ``timestamp``, ``level``, ``event`` and the event's keys) or
  ``text`` (``2026-01-01T00:00:00Z [info     ] event  key=value``, no colours).
* Records of the standard library's ``logging`` (kopf, aiohttp, asyncio) go through the same renderer, at
  the same level but never below ``warning`` unless ``debug`` is asked for.
* Every line goes out whole: a record and its newline in one write, under :data:`OUTPUT_LOCK`, which
  ``simulate``'s progress (scheduler/simulate/progress.py, written from a ticker thread too) and its notes
  (:func:`write_line`) take as well. (structlog's ``PrintLogger`` writes the newline separately: a progress
  line written between the two ended up glued to the record, and the JSON lines could not be parsed.)
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMATS = ("json", "text")
_HANDLER_NAME = "dra-scheduler"


OUTPUT_LOCK = threading.RLock()
_before_line: Callable[[], None] | None = None


def set_before_line(hook: Callable[[], None] | None) -> Callable[[], None] | None:
    """Run ``hook`` (under :data:`OUTPUT_LOCK`) before each log line or :func:`write_line`: ``simulate``'s bar on
    a terminal erases itself there, so that the line does not start after it. Returns the previous hook."""
    global _before_line
    previous, _before_line = _before_line, hook
    return previous


class _LineStream:
    """Where the loggers write: each ``write`` carries whole lines (structlog's ``WriteLogger`` and logging's
    ``StreamHandler`` write a record with its newline at once) and is made under :data:`OUTPUT_LOCK`. Without a
    stream of its own, ``sys.stderr`` is looked up at each write, not when logging is configured: a stream
    replaced later (pytest's capture, a daemon redirecting it) never leaves the loggers writing to a closed
    file."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        with OUTPUT_LOCK:
            if _before_line is not None:
                _before_line()
            return (self._stream or sys.stderr).write(text)

    def flush(self) -> None:
        (self._stream or sys.stderr).flush()


def write_line(text: str) -> None:
    """One whole line on ``sys.stderr`` (``simulate``'s notes), never mixed with a log record or progress line
    written by another thread."""
    with OUTPUT_LOCK:
        if _before_line is not None:
            _before_line()
        sys.stderr.write(text + "\n")
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
    out: Any = _LineStream(stream)
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
        logger_factory=structlog.WriteLoggerFactory(out),  # record and newline in one write (PrintLogger: two)
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
