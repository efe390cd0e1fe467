"""Schemathesis against the shim's own ``/openapi.json``, over the real suite.

Every documented operation gets a bounded number of generated requests: some
that fit the document (positive), sent with the admin key, and some that break
it (negative: wrong types, missing or mangled fields and credentials). Each
goes to the real REST shim, and its response must pass:

- ``not_a_server_error``: no 5xx;
- ``status_code_conformance``: the status is one the document lists for the
  operation (the document lists each status, so this is not vacuous);
- ``content_type_conformance`` and ``response_schema_conformance``: the
  documented media type, and a body that fits the documented schema
  (the error body included);
- ``response_headers_conformance``;
- ``negative_data_rejection``: data that breaks the document gets a 4xx;
- ``ignored_auth``: an operation that answered 2xx refuses the same request
  without a key, and with a made-up one.

Half the cases name a real agent (``alfred``, who dreams with a scripted
reviewer that proposes nothing, or ``bob``), and half the file requests one of
the six allowed file names, so requests get past the path checks into the
services; the other cases carry whatever schemathesis makes up, which the
shim and the services refuse (400/403/404). The figures go to the hardening
table (``hardening_report.record``). There is no stateful phase: the document
declares no links, and inferring them would not fit the time budget.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hardening_report import record
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from suite_support import ADMIN_KEY, Suite, make_home

from gateway_http.descriptors import all_routes
from gateway_http.openapi import openapi_document
from services.file_api.names import ALLOWED_FILES

pytestmark = pytest.mark.integration

REVIEWERS = Path(__file__).resolve().parents[1] / "reviewers"
AGENTS = ("alfred", "bob")
EXAMPLES = {GenerationMode.POSITIVE: 15, GenerationMode.NEGATIVE: 10}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    ignored_auth,
]
# The operations, from the routes the shim serves (test_the_served_document_is_built_from_the_routes).
OPERATIONS = [(method.upper(), path) for path, methods in openapi_document(all_routes())["paths"].items() for method in methods]


@dataclass
class Tally:
    """What the generated requests got, for the hardening table (``ignored_auth``'s probes,
    sent on a session of their own, are not counted)."""

    requests: int = 0
    errors_5xx: int = 0
    longest_ms: float = 0.0
    operations: set[str] = field(default_factory=set)
    statuses: dict[int, int] = field(default_factory=dict)

    def count(self, response: requests.Response, *_: Any, **__: Any) -> None:
        self.requests += 1
        self.longest_ms = max(self.longest_ms, response.elapsed.total_seconds() * 1000)
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        if response.status_code >= 500:
            self.errors_5xx += 1


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """The whole suite; alfred dreams with a reviewer that proposes nothing, so a RunNow is quick."""
    tmp = tmp_path_factory.mktemp("fuzz")
    reply = tmp / "empty-reply.json"
    reply.write_text(json.dumps({"summary": "nothing to change", "proposals": []}))
    reviewer = [sys.executable, str(REVIEWERS / "reply.py"), str(reply)]
    dreaming = {"enabled": True, "mode": "auto", "reviewerCommand": reviewer, "reviewerTimeoutSeconds": 30}
    home, ports, http_port = make_home(tmp, [{"id": "alfred", "dreaming": dreaming}, {"id": "bob"}])
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api", "watcher", "kb", "dreaming", "http")
        yield running
    finally:
        running.stop_all()


@pytest.fixture(scope="module")
def api(suite: Suite) -> Any:
    """The served document, loaded by schemathesis with the admin key as the ApiKeyAuth credential
    (an explicit config: no schemathesis.toml found on disk changes the run)."""
    config = schemathesis.Config.from_dict({"auth": {"openapi": {"ApiKeyAuth": {"api_key": ADMIN_KEY}}}})
    return schemathesis.openapi.from_url(f"{suite.base_url}/openapi.json", config=config)


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    counts = Tally()
    yield counts
    if counts.operations == {f"{m} {p}" for m, p in OPERATIONS}:  # only a run of every operation is recorded
        examples = "/".join(str(n) for n in EXAMPLES.values())
        record(
            "schemathesis /openapi.json",
            inputs=counts.requests,
            errors_5xx=counts.errors_5xx,
            longest_ms=round(counts.longest_ms, 1),
            notes=(
                f"{len(OPERATIONS)} operations, {examples} positive/negative examples each; checks: no 5xx, "
                "documented status, content type, headers and body schema, negative data refused, "
                "auth enforced (its probes not counted)"
            ),
        )


def test_the_served_document_is_built_from_the_routes(api: Any) -> None:
    assert api.raw_schema == json.loads(json.dumps(openapi_document(all_routes())))


def _cases(operation: Any, mode: GenerationMode) -> st.SearchStrategy[Any]:
    """Cases for ``operation``: half with a real agent (and an allowed file name, for the file API)."""
    params = {p.name for p in operation.path_parameters}
    fixed = {
        "agentId": st.sampled_from(AGENTS),
        **({"filename": st.sampled_from(ALLOWED_FILES)} if "filename" in params else {}),
    }
    real = st.fixed_dictionaries(fixed).flatmap(
        lambda values: operation.as_strategy(generation_mode=mode, path_parameters=values)
    )
    return st.one_of(real, operation.as_strategy(generation_mode=mode))


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_operation(api: Any, tally: Tally, method: str, path: str) -> None:
    operation = api[path][method]
    session = requests.Session()
    session.hooks["response"].append(tally.count)

    def exchange(case: Any) -> None:
        response = case.call(session=session, timeout=30)
        case.validate_response(response, checks=CHECKS, transport_kwargs={"session": session, "timeout": 30})

    for mode, examples in EXAMPLES.items():
        bounded = settings(
            max_examples=examples,
            derandomize=True,  # the same requests on every run of the same test selection
            database=None,
            deadline=None,  # the machine is noisy; the timings are recorded, not asserted
            phases=[Phase.explicit, Phase.generate],  # no shrinking: each step would be a request
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
        )
        bounded(given(case=_cases(operation, mode))(exchange))()
    session.close()
    tally.operations.add(f"{method} {path}")
