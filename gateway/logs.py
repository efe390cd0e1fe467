"""structlog set-up: JSON lines on stdout, context bound through contextvars.

Every RPC writes one line (``gateway.rpc``), so rendering a line is on the
request path. The profile of a REST GET (issue 15) put structlog's stdlib
``json.dumps`` and ``print`` at about 40% of a line's cost; lines are rendered
by orjson and written as bytes (structlog's ``BytesLoggerFactory``), the
set-up structlog's own documentation gives for speed. The lines read the same
to a JSON parser. orjson refuses what ``json`` would write (an integer past
64 bits, a lone surrogate in a string): such a line falls back to ``json``, so
no event is ever lost to its encoding.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS  # {1: ...} as json writes it: {"1": ...}


def _dumps(event: Any, default: Any = None) -> bytes:
    try:
        return orjson.dumps(event, default=default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: a value orjson cannot write, json can
        return json.dumps(event, default=default).encode("utf-8", "backslashreplace")


def configure(service: str, level: int = logging.INFO) -> structlog.stdlib.BoundLogger:
    """Route structlog to stdout as one JSON object per line, tagged with ``service``."""
    def add_service(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        event.setdefault("service", service)  # also in worker threads, where contextvars are empty
        return event

    if isinstance(sys.stdout, io.TextIOWrapper):
        # print() goes through the text layer, log lines straight to its buffer: flushing the text
        # layer at every line keeps the two in the order they were written.
        sys.stdout.reconfigure(line_buffering=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_service,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(sys.stdout.buffer),
        cache_logger_on_first_use=True,
    )
    logger: structlog.stdlib.BoundLogger = structlog.get_logger()
    return logger
