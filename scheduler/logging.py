"""structlog set-up: JSON lines to stderr; quiet unless verbose (simulate) or always on (run)."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(verbose: bool = False, json_logs: bool = True) -> None:
    level = logging.INFO if verbose else logging.WARNING
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    processors.append(structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer())
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
