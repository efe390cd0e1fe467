"""structlog set-up: JSON lines on stdout, context bound through contextvars."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(service: str, level: int = logging.INFO) -> structlog.stdlib.BoundLogger:
    """Route structlog to stdout as one JSON object per line, tagged with ``service``."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)
    return structlog.get_logger()
