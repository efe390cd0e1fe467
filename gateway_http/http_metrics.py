"""What the REST shim records of each request: its Prometheus metrics and its ``http`` log line.

Metrics count requests by route template, method and status. The ``http`` line
(method, route, status, ms) is queued and written with the next batch of lines
(``gateway.logs.later``), stamped with the moment the answer ended.

``route`` is a template (``/v1/agents/{agentId}/files/{filename}``), one of the shim's
own paths, or ``unmatched``: never the raw path, which can hold a file name or anything
a client sends. ``method`` outside HTTP's usual verbs is ``other``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Histogram

from gateway.logs import later
from gateway.metrics import REGISTRY, closed_label

HTTP_REQUESTS = Counter(
    "gateway_http_requests_total", "Requests the REST shim answered, by route template, method and status.",
    ("route", "method", "status"), registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "gateway_http_request_duration_seconds", "Time the REST shim took to answer, by route template and method.",
    ("route", "method"), registry=REGISTRY,
)
HTTP_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))

# Children per (route, method, status), all bounded: ``.labels()`` is not called per request.
_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def observe_http(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request; ``route`` must already be a bounded label (module docstring)."""
    key = (route, closed_label(method, HTTP_METHODS), status)
    children = _children.get(key)
    if children is None:
        children = _children[key] = (HTTP_REQUESTS.labels(key[0], key[1], str(status)), HTTP_DURATION.labels(key[0], key[1]))
    children[0].inc()
    children[1].observe(seconds)


def log_http(method: str, route: str, status: int, seconds: float) -> None:
    """Queue the ``http`` line of one answered request (``route``: its template, or the raw path if none matched)."""
    later("http", method=method, route=route, status=status, ms=round(seconds * 1000, 3))
