"""Prometheus metrics: the process's registry, its HTTP endpoint and the per-RPC histogram.

Each process has one registry of its own (``REGISTRY``), not prometheus_client's
default one: every name it exposes starts with ``gateway_`` and nothing else
(a test in-process can read exactly what a scrape would). A process serves it at
``http://HOST:PORT/metrics`` on the port ``gateway.metrics`` gives it; the shim
also answers ``GET /metrics`` on its API port. Both choose the format as
prometheus_client does, from the scraper's ``Accept`` header (``exposition``):
OpenMetrics to a scraper that prefers it (Prometheus itself), else the plain
text format; so every process answers one scraper in one format. Names follow
Prometheus' conventions, which ``promtool check metrics`` enforces: base units as suffixes, ``_total`` on
counters, no name part that reads as an abbreviated unit (so the KB's metrics are
``gateway_knowledge_*``, never ``gateway_kb_*``). The metrics of one service are
declared beside the code that observes them, registered here.

Labels never carry a key, a path or free text: methods and routes come from the
protos, codes from gRPC's fixed set, agent ids from config.json, reasons from
closed sets (``closed_label``). A label value outside its set becomes ``other``.

**Observations made later.** The observations every request makes (the RPC
histogram here, the shim's request counter and histogram) are queued by the
request (``observe_later``) and applied together: when ``MAX_PENDING`` wait, and before
anything reads the registry (a scrape, ``exposition``, a test's
``get_sample_value``: ``REGISTRY.collect`` applies them first). A read never
misses an observation made before it; applied one by one between the requests,
they cost several times what they cost together (as for the per-request log
lines).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gateway.ports import BindError, listen_problem
from gateway.resources import NAMES, open_files, open_files_limit

disable_created_metrics()  # the *_created series double a scrape and say nothing an operator alerts on

MAX_PENDING = 256  # observations queued before they are applied in one go (a few hundred microseconds)

Observation = tuple[Callable[[float], None], float]


class _Pending:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.observations: list[Observation] = []


_pending = _Pending()


def observe_later(observe: Callable[[float], None], value: float) -> None:
    """Queue ``observe(value)`` (a child's ``observe`` or ``inc``): applied with the next batch, before any read."""
    pending = _pending
    with pending.lock:
        pending.observations.append((observe, value))
        full = len(pending.observations) >= MAX_PENDING
    if full:
        apply_pending()


def apply_pending() -> None:
    """Apply every queued observation now."""
    pending = _pending
    with pending.lock:
        observations, pending.observations = pending.observations, []
    for observe, value in observations:
        observe(value)


class _Registry(CollectorRegistry):
    """The process's registry: what requests queued (``observe_later``) is applied before every read."""

    def collect(self) -> Iterator[Metric]:
        apply_pending()
        yield from super().collect()


REGISTRY = _Registry(auto_describe=True)

RPC_DURATION = Histogram(
    "gateway_rpc_duration_seconds",
    "Time a gRPC method took on the server, by method and status code.",
    ("method", "code"),
    registry=REGISTRY,
)

# One labelled child per (method, code), looked up in a dict: ``.labels()`` builds and checks
# the label tuple on every call, and this sits on every request's path.
_rpc_children: dict[tuple[str, str], Callable[[float], None]] = {}


def observe_rpc(method: str, code: str, seconds: float) -> None:
    """Count one RPC of ``method`` that ended with ``code`` after ``seconds`` on the server (applied later)."""
    observe = _rpc_children.get((method, code))
    if observe is None:
        observe = _rpc_children[(method, code)] = RPC_DURATION.labels(method, code).observe
    observe_later(observe, seconds)


SHORTAGES = Counter(
    "gateway_resource_shortages_total",
    "Calls answered UNAVAILABLE because the process ran out of a resource (gateway.resources), by resource.",
    ("resource",),
    registry=REGISTRY,
)


def observe_shortage(resource: str) -> None:
    """Count one call that hit a shortage of ``resource`` (a ``gateway.resources.NAMES`` value)."""
    SHORTAGES.labels(closed_label(resource, NAMES.values())).inc()


class _OpenFiles(Collector):
    """``gateway_open_files`` and ``gateway_open_files_limit``: the process's descriptors, read at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        used = open_files()
        family = GaugeMetricFamily("gateway_open_files", "File descriptors the process has open.")
        if used is not None:
            family.add_metric((), used)
        yield family
        yield GaugeMetricFamily(
            "gateway_open_files_limit", "The process's soft open-files limit (RLIMIT_NOFILE; -1: unlimited).",
            value=open_files_limit(),
        )

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("gateway_open_files", "File descriptors the process has open.")
        yield GaugeMetricFamily("gateway_open_files_limit", "The process's soft open-files limit (RLIMIT_NOFILE; -1: unlimited).")


REGISTRY.register(_OpenFiles())


def closed_label(value: str, allowed: Iterable[str]) -> str:
    """``value`` when it is one of ``allowed``, else ``other`` (a label's set stays closed)."""
    return value if value in allowed else "other"


def exposition(accept: str = "") -> tuple[bytes, str]:
    """What ``/metrics`` answers a scraper whose ``Accept`` header is ``accept``: the registry's
    exposition and its content type, chosen exactly as the metrics ports choose them (the plain
    text format unless ``accept`` asks for OpenMetrics)."""
    encode, content_type = choose_encoder(accept)
    return encode(REGISTRY), content_type


def serve_metrics(process: str, address: tuple[str, int] | None) -> str | None:
    """Serve ``REGISTRY`` on ``address`` in a daemon thread; ``host:port`` it listens on, or
    None when ``address`` is None (metrics off). An operator who set a port expects it to
    work, so a port that cannot be bound stops the process: raises BindError with one line."""
    if address is None:
        return None
    host, port = address
    problem = listen_problem(host, port)
    if problem:
        raise BindError(f"{process} metrics (gateway.metrics): {problem}")
    try:
        server = _metrics_server(host, port)
    except OSError as exc:
        raise BindError(f"{process} metrics (gateway.metrics): cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    # No poll interval: prometheus_client's own thread wakes twice a second to check for a shutdown
    # nobody asks for (the thread ends with the process).
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": None}, name="metrics", daemon=True).start()
    return f"{host}:{server.server_address[1]}"


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


def _metrics_server(host: str, port: int) -> WSGIServer:
    """A threading WSGI server of ``REGISTRY`` bound to ``host:port`` (IPv6 too), not yet serving."""
    family, *_, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
    return make_server(str(sockaddr[0]), port, make_wsgi_app(REGISTRY), server_class, handler_class=_Quiet)
