"""Prometheus metrics: the process's registry, its HTTP endpoint and the per-RPC histogram.

Each process has one registry of its own (``REGISTRY``), not prometheus_client's
default one: every name it exposes starts with ``gateway_`` and nothing else
(a test in-process can read exactly what a scrape would). A process serves it at
``http://HOST:PORT/metrics`` on the port ``gateway.metrics`` gives it (``gateway.metrics_port``); the shim
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

**Made when first needed.** prometheus_client is not imported with this module: a metric is
declared here (``Counter``, ``Histogram``, ``Gauge``: prometheus_client's arguments) and every
declared metric, its preset children and the registered collectors are made (``gateway.metrics_made``,
which imports the library's core alone) together, at the first observation, the first read, or when
a metrics port opens. A process with metrics on makes them at its start, so every scrape shows the same series; a
service with metrics off makes them at its first observation, never at rest (docs/operations.md
"Memory at rest").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from gateway.resources import NAMES, open_files, open_files_limit

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

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


class Collecting(Protocol):
    """A collector (prometheus_client's protocol): metric families read at each scrape."""

    def collect(self) -> Iterable[Any]: ...

    def describe(self) -> Iterable[Any]: ...


class _Registry:
    """The process's registry, made with its metrics at first need (the module's docstring). Reads
    (``collect``, ``get_sample_value``) apply what requests queued (``observe_later``) first."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._made: CollectorRegistry | None = None
        self._waiting: list[Declared | Collecting] = []  # in the order a scrape shows them
        self.dropping = False  # ``drop``: observations go nowhere until a read makes the registry

    def declare(self, metric: Declared) -> None:
        with self._lock:
            if self._made is None:
                self._waiting.append(metric)
            else:
                metric.make(self._made)

    def register(self, collector: Collecting) -> None:
        """Read ``collector`` at every scrape (registered now, or when the registry is made)."""
        with self._lock:
            if self._made is None:
                self._waiting.append(collector)
            else:
                self._made.register(collector)

    def drop(self) -> None:
        """Nothing in this process will read the registry (a gRPC service with metrics off, for its
        whole life): observations go nowhere from now on, and prometheus_client is never loaded."""
        with self._lock:
            self.dropping = self._made is None

    def made(self) -> CollectorRegistry:
        """prometheus_client's registry, with every declared metric and registered collector in it."""
        made = self._made
        if made is not None:
            return made
        with self._lock:
            if self._made is None:
                from gateway.metrics_made import make_registry

                made = make_registry(apply_pending)
                for entry in self._waiting:
                    if isinstance(entry, Declared):
                        entry.make(made)
                    else:
                        made.register(entry)
                self._waiting.clear()
                self._made, self.dropping = made, False
            return self._made

    def collect(self) -> Iterator[Any]:
        yield from self.made().collect()

    def get_sample_value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.made().get_sample_value(name, labels)


REGISTRY = _Registry()


class Declared:
    """A metric declared now, made with the registry (``prometheus_client.<kind>`` with these
    arguments). ``children``: label values whose children are made with it (they show in a scrape
    before their first observation). Any other attribute is the made metric's (``labels``,
    ``inc``, ``observe``…), which makes the registry."""

    kind = ""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (), *, registry: _Registry,
                 children: Iterable[tuple[str, ...]] = (), **options: Any) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self._options, self._presets = options, tuple(children)
        self._metric: Any = None
        self._registry = registry
        self._children: dict[tuple[str, ...], Any] = {}
        registry.declare(self)

    def make(self, made: CollectorRegistry) -> None:
        from gateway.metrics_made import kind

        self._metric = kind(self.kind)(self.name, self.documentation, self.labelnames, registry=made, **self._options)
        for values in self._presets:
            self._children[values] = self._metric.labels(*values)

    def made(self) -> Any:
        """The prometheus_client metric (the registry is made first if it is not), or a metric that
        records nothing while the registry drops observations (``_Registry.drop``)."""
        if self._metric is None:
            if self._registry.dropping:
                return _NOWHERE
            self._registry.made()
        return self._metric

    def child(self, *values: str) -> Any:
        """The labelled child of ``values``, made once (a preset one, or at its first use)."""
        found = self._children.get(values)
        if found is None:
            found = self.made().labels(*values)
            if found is not _NOWHERE:
                self._children[values] = found
        return found

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.made(), attribute)


class _Nowhere:
    """A metric, and its children, that records nothing."""

    def labels(self, *values: str) -> _Nowhere:
        return self

    def inc(self, amount: float = 1) -> None:
        """Dropped: metrics are off in this process."""

    def observe(self, value: float) -> None:
        """Dropped: metrics are off in this process."""

    def set(self, value: float) -> None:
        """Dropped: metrics are off in this process."""


_NOWHERE = _Nowhere()


class Counter(Declared):
    kind = "Counter"


class Histogram(Declared):
    kind = "Histogram"


class Gauge(Declared):
    """A gauge; ``set_function`` before the registry is made is kept and applied when it is."""

    kind = "Gauge"
    _function: Callable[[], float] | None = None

    def set_function(self, function: Callable[[], float]) -> None:
        if self._metric is None:
            self._function = function
        else:
            self._metric.set_function(function)

    def make(self, made: CollectorRegistry) -> None:
        super().make(made)
        if self._function is not None:
            self._metric.set_function(self._function)


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


def gauge_family(name: str, documentation: str, value: float | None = None, labels: Iterable[str] | None = None) -> Any:
    """prometheus_client's ``GaugeMetricFamily``, for a collector's ``collect`` and ``describe`` (which
    run once the registry is made, so the import costs nothing more)."""
    from gateway.metrics_made import GaugeMetricFamily

    return GaugeMetricFamily(name, documentation, value=value, labels=None if labels is None else list(labels))


_OPEN_FILES = ("gateway_open_files", "File descriptors the process has open.")
_OPEN_FILES_LIMIT = ("gateway_open_files_limit", "The process's soft open-files limit (RLIMIT_NOFILE; -1: unlimited).")


class OpenFiles(Collecting):
    """``gateway_open_files`` and ``gateway_open_files_limit``: the process's descriptors, read at scrape time."""

    def collect(self) -> Iterator[Any]:
        used = open_files()
        family = gauge_family(*_OPEN_FILES)
        if used is not None:
            family.add_metric((), used)
        yield family
        yield gauge_family(*_OPEN_FILES_LIMIT, value=open_files_limit())

    def describe(self) -> Iterator[Any]:
        yield gauge_family(*_OPEN_FILES)
        yield gauge_family(*_OPEN_FILES_LIMIT)


REGISTRY.register(OpenFiles())


def closed_label(value: str, allowed: Iterable[str]) -> str:
    """``value`` when it is one of ``allowed``, else ``other`` (a label's set stays closed)."""
    return value if value in allowed else "other"


def exposition(accept: str = "") -> tuple[bytes, str]:
    """What ``/metrics`` answers a scraper whose ``Accept`` header is ``accept``: the registry's
    exposition and its content type, chosen exactly as the metrics ports choose them (the plain
    text format unless ``accept`` asks for OpenMetrics)."""
    made = REGISTRY.made()  # first: it loads prometheus_client's core alone (gateway.metrics_made)
    from gateway.metrics_made import encoder_for

    encode, content_type = encoder_for(accept)
    return encode(made), content_type

