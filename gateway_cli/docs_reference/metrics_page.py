"""docs/reference/metrics.md: every Prometheus metric of the suite, with its type, labels and help.

Each metric is declared beside the code that observes it and registered in the process's
registry (``gateway.metrics.REGISTRY``). This module imports the modules that declare them
(``METRIC_MODULES``; importing starts nothing) and reads each metric object and collector
class there. A collector a process registers only at start (the KB's index sizes) is
described from its class, whose ``describe`` needs no state. A test checks that every module
declaring a metric is listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from gateway.metrics import Collecting, Declared
from gateway_cli.docs_reference.markdown import code, heading, page, prose, slug, table

# The modules that declare metrics; the process that exposes them is named by the package.
METRIC_MODULES = (
    "gateway.metrics",
    "gateway_http.http_metrics",
    "services.dreaming.records.metrics",
    "services.kb.metrics",
    "services.watcher.main",
    "services.watcher.recomposer",
)
PROCESSES = {"gateway": "every process", "gateway_http": "http"}


@dataclass(frozen=True)
class MetricDoc:
    name: str  # as a scrape shows it (a counter's with ``_total``)
    type: str
    labels: tuple[str, ...]
    help: str
    process: str
    module: str


def _process(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "services" else PROCESSES[parts[0]]


def _doc(family: Metric, labels: tuple[str, ...], module: str) -> MetricDoc:
    name = family.name + "_total" if family.type == "counter" else family.name
    return MetricDoc(name, family.type, labels, family.documentation, _process(module), module)


def metrics() -> list[MetricDoc]:
    """Every metric the modules declare, by name."""
    found: dict[str, MetricDoc] = {}
    for module_name in METRIC_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, Declared):
                families = [(family, value.labelnames) for family in value.made().describe()]
            elif isinstance(value, type) and Collecting in value.__mro__[1:] and value.__module__ == module_name:
                # Collecting is a Protocol our collector classes subclass by name: issubclass cannot test it.
                described: Iterable[Metric] = object.__new__(value).describe()  # describe() of these classes reads no state
                families = [(family, tuple(getattr(family, "_labelnames", ()))) for family in described]
            else:
                continue
            for family, labels in families:
                doc = _doc(family, labels, module_name)
                found.setdefault(doc.name, doc)
    return sorted(found.values(), key=lambda doc: doc.name)


def render() -> str:
    """The whole page."""
    listed = metrics()
    intro = [
        "Every metric the suite's processes expose at `/metrics`. Each process serves its own registry on the "
        "metrics port config.json gives it ([config](config.md)); the REST shim also answers `GET /metrics` on its "
        "API port. The format is the Prometheus text format, or OpenMetrics for a scraper that asks for it. "
        "A histogram `NAME` is scraped as `NAME_bucket` (label `le`), `NAME_sum` and `NAME_count`. "
        "Labels never carry a key, a path or free text: a value outside a label's closed set is `other`.",
        "",
        *table(("metric", "type", "labels", "process"),
               [(f"[{code(m.name)}](#{slug(m.name)})", m.type, ", ".join(code(label) for label in m.labels),
                 prose(m.process)) for m in listed]),
    ]
    body: list[str] = []
    for m in listed:
        body += heading(2, code(m.name), slug(m.name))
        body += [prose(m.help), ""]
        body += [f"- **Type**: {m.type}",
                 f"- **Labels**: {', '.join(code(label) for label in m.labels) if m.labels else 'none'}",
                 f"- **Exposed by**: {prose(m.process)} (declared in {code(m.module)})", ""]
    return page("Metrics", "the metrics declared in " + ", ".join(code(m) for m in METRIC_MODULES), intro, body)
