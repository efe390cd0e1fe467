"""What the REST shim records of each request: its Prometheus metrics and its ``http`` log line.

Metrics count requests by route template, method and status. The ``http`` line
(method, route, status, ms) is queued and written with the next batch of lines
(``gateway.logs.later``), stamped with the moment the answer ended.

``route`` is a template (``/api/v1/agents/{agent_id}/files/{filename}``), one of the shim's
own paths, or ``unmatched``: never the raw path, which can hold a file name or anything
a client sends. ``method`` outside HTTP's usual verbs is ``other``.

It also counts what the connection cap did (``gateway_http.connections``): a new connection at
``maxConnections`` either evicted a waiting one or was refused.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.logs import later
from gateway.metrics import REGISTRY, Counter, Histogram, closed_label, observe_later

HTTP_REQUESTS = Counter(
    "gateway_http_requests_total", "Requests the REST shim answered, by route template, method and status.",
    ("route", "method", "status"), registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "gateway_http_request_duration_seconds", "Time the REST shim took to answer, by route template and method.",
    ("route", "method"), registry=REGISTRY,
)
HTTP_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
CAP_OUTCOMES = ("evicted", "refused")
HTTP_AT_CAP = Counter(
    "gateway_http_connections_at_cap_total",
    "New connections that found the REST shim at gateway.api.maxConnections, by outcome: evicted (the connection "
    "that had waited longest for a whole request was closed to let it in) or refused (answered 503: every held "
    "connection had a request in progress).",
    ("outcome",), registry=REGISTRY, children=[(outcome,) for outcome in CAP_OUTCOMES],
)

# What one request of (route, method, status) observes, all bounded: ``.labels()`` is not called per request.
_observers: dict[tuple[str, str, int], Callable[[float], None]] = {}


def _observer(route: str, method: str, status: int) -> Callable[[float], None]:
    count, duration = HTTP_REQUESTS.labels(route, method, str(status)).inc, HTTP_DURATION.labels(route, method).observe

    def observe(seconds: float) -> None:
        count()
        duration(seconds)

    return observe


def observe_http(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request (applied later, ``gateway.metrics.observe_later``); ``route`` must already be a bounded label."""
    key = (route, closed_label(method, HTTP_METHODS), status)
    observe = _observers.get(key)
    if observe is None:
        observe = _observers[key] = _observer(*key)
    observe_later(observe, seconds)


def log_http(method: str, route: str, status: int, seconds: float) -> None:
    """Queue the ``http`` line of one answered request (``route``: its template, or the raw path if none matched)."""
    later("http", method=method, route=route, status=status, ms=round(seconds * 1000, 3))


def observe_at_cap(outcome: str) -> None:
    """Count one new connection that found the cap reached: ``outcome`` is one of CAP_OUTCOMES."""
    HTTP_AT_CAP.child(closed_label(outcome, CAP_OUTCOMES)).inc()
