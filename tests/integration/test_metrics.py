"""Prometheus metrics of every process, scraped after real traffic.

One suite takes a REST PUT and GETs, a session, a KB refresh and search, the
recomposition the write causes and one dream with a scripted reviewer; then every
process's metrics port and the shim's ``/metrics`` are scraped. The counters must
have moved, and no label may hold a key, a path, a temp folder or an agent that is
not configured.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dreaming_support import add, dreaming, remove, reviewer, run_ok, start_suite, write_reply
from metrics_lint import lint, promtool, promtool_problems
from prometheus_client.parser import text_string_to_metric_families
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, READER_KEY, Suite, free_port, make_home, wait_claude

from gateway.ports import listen_problem
from gateway.v1 import dreaming_pb2, files_pb2, kb_pb2, watcher_pb2
from gateway_http.descriptors import all_routes

pytestmark = pytest.mark.integration

PROCESSES = ("file_api", "watcher", "kb", "dreaming", "http")
FILES = "/api/v1/agents/{agent_id}/files/{filename}"
SECRET_NAME = "secret-file-name-7f3a"  # sent in an unmatched path: must never become a label
KEYS = (ADMIN_KEY, READER_KEY, BOB_WRITER_KEY, CAROL_KEY)
SERVICES = {
    "file_api": files_pb2.DESCRIPTOR.services_by_name["WorkspaceFiles"],
    "watcher": watcher_pb2.DESCRIPTOR.services_by_name["Sessions"],
    "kb": kb_pb2.DESCRIPTOR.services_by_name["Knowledge"],
    "dreaming": dreaming_pb2.DESCRIPTOR.services_by_name["Dreaming"],
}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("metrics")
    reply = tmp / "reply.json"  # one op the applier applies, one it skips (its anchor is not there)
    write_reply(reply, [add("- the harbour opens at six"), remove("- a line that is not in the file")])
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", reply))}, {"id": "bob"}]
    running = start_suite(tmp, agents, files={"alfred": {"MEMORY.md": "# Memory\n\n- the ferry leaves at nine\n"}})
    try:
        yield running
    finally:
        running.stop_all()


def scrape(url: str) -> Samples:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def test_every_process_counts_real_traffic_under_bounded_labels(suite: Suite) -> None:
    with httpx.Client(base_url=suite.base_url, timeout=30) as http:
        put = http.put("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": ADMIN_KEY}, json={"content": "calm and exact\n"})
        assert put.status_code == 200, put.text
        assert http.get("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": READER_KEY}).status_code == 200
        assert http.get("/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": "wrong-key-123456"}).status_code == 401
        assert http.get(f"/api/v1/agents/alfred/{SECRET_NAME}/x", headers={"X-Api-Key": READER_KEY}).status_code == 404
        wait_claude(suite, "alfred", "calm and exact")  # the watcher recomposed after the write
        session = http.post("/api/v1/agents/alfred/sessions", headers={"X-Api-Key": ADMIN_KEY}, json={"state": "SESSION_STATE_IDLE"})
        assert session.status_code == 200, session.text
        refreshed = http.post("/api/v1/agents/alfred/memory:refresh", headers={"X-Api-Key": READER_KEY}, json={"wait": True})
        assert refreshed.status_code == 200, refreshed.text
        search = http.get("/api/v1/agents/alfred/memory:search", params={"query": "ferry"}, headers={"X-Api-Key": READER_KEY})
        assert search.status_code == 200 and search.json()["hits"], search.text
    report = run_ok(suite, "alfred")
    assert report["status"] == "applied", report

    scraped = {name: scrape(suite.metrics_url(name)) for name in PROCESSES}
    shim_api = scrape(f"{suite.base_url}/metrics")  # no key needed

    files, watcher, kb, dream, shim = (scraped[name] for name in PROCESSES)
    assert value(files, "gateway_rpc_duration_seconds_count", method="PutFile", code="OK") >= 1
    assert value(files, "gateway_rpc_duration_seconds_count", method="GetFile", code="OK") >= 1
    assert value(files, "gateway_rpc_duration_seconds_count", method="GetFile", code="UNAUTHENTICATED") >= 1
    assert value(watcher, "gateway_watcher_recompositions_total", outcome="written") >= 1
    assert value(watcher, "gateway_watcher_compose_duration_seconds_count") >= 1
    assert value(watcher, "gateway_watcher_live_sessions") == 1
    assert value(kb, "gateway_knowledge_refreshes_total") >= 1
    assert value(kb, "gateway_knowledge_refresh_duration_seconds_count") >= 1
    assert value(kb, "gateway_knowledge_search_duration_seconds_count", corpus="memory") >= 1
    assert value(kb, "gateway_knowledge_index_bytes", agent="alfred") > 0
    assert value(dream, "gateway_dream_runs_total", outcome="applied") == 1
    assert value(dream, "gateway_dream_ops_total", result="applied", reason="none") == 1
    assert value(dream, "gateway_dream_ops_total", result="skipped", reason="anchor_missing") == 1
    assert value(dream, "gateway_dream_reviewer_duration_seconds_count") == 1
    assert value(dream, "gateway_rpc_duration_seconds_count", method="RunNow", code="OK") == 1
    for samples in (shim, shim_api):  # the same registry on both ports
        assert value(samples, "gateway_http_requests_total", route=FILES, method="PUT", status="200") == 1
        assert value(samples, "gateway_http_requests_total", route=FILES, method="GET", status="401") == 1
        assert value(samples, "gateway_http_requests_total", route="unmatched", status="404") >= 1
        assert value(samples, "gateway_http_request_duration_seconds_count", route=FILES, method="GET") >= 2

    routes = {r.template for r in all_routes()} | {"/healthz", "/openapi.json", "/metrics", "/mcp/agents/{agentId}", "unmatched"}
    home = str(suite.home.parent)
    for process, samples in [*scraped.items(), ("http /metrics", shim_api)]:
        for name, labels in samples:
            assert name.startswith("gateway_"), (process, name)
            for label, text in labels:
                where = (process, name, label, text)
                assert not any(key in text for key in KEYS) and home not in text and SECRET_NAME not in text, where
                if label == "route":
                    assert text in routes, where
                elif label == "agent":
                    assert text in {"alfred", "bob"}, where
                elif label == "method" and process in SERVICES:
                    assert text in SERVICES[process].methods_by_name, where
                elif label != "le":
                    assert "/" not in text, where


# What Prometheus sends when it scrapes: it prefers OpenMetrics. What curl and promtool's users send: nothing.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
                     "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
TEXT = "text/plain"
OPENMETRICS = "application/openmetrics-text"


def test_every_exposition_passes_prometheus_lint_rules_in_one_format(suite: Suite) -> None:
    urls = {name: suite.metrics_url(name) for name in PROCESSES} | {"http /metrics": f"{suite.base_url}/metrics"}
    tool = promtool()
    problems: dict[str, list[str]] = {}
    for accept, expected in ((None, TEXT), ("text/plain", TEXT), (PROMETHEUS_ACCEPT, OPENMETRICS)):
        types = set()
        for name, url in urls.items():
            answer = httpx.get(url, headers={"Accept": accept} if accept else {}, timeout=10)
            assert answer.status_code == 200, (name, accept, answer.text)
            types.add(answer.headers["content-type"])
            assert answer.headers["content-type"].startswith(expected + ";"), (name, accept, answer.headers["content-type"])
            assert "# TYPE gateway_" in answer.text, (name, accept)
            assert answer.text.rstrip().endswith("# EOF") == (expected == OPENMETRICS), (name, accept)
            if expected != TEXT:
                continue  # promtool check metrics reads the text format
            found = lint(answer.text)
            if tool is not None:
                status, printed = promtool_problems(tool, answer.text)
                if status != 0:
                    found.append(f"promtool check metrics exited {status}: {printed}")
            if found:
                problems[f"{name} (Accept: {accept})"] = found
        assert len(types) == 1, (accept, types)  # one scraper, one format: every process negotiates alike
    assert not problems, problems
    kb = httpx.get(urls["kb"], timeout=10).text
    assert "gateway_knowledge_index_bytes{" in kb and "gateway_kb_" not in kb


@contextlib.contextmanager
def squatter(port: int) -> Iterator[None]:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield


def metrics_block(home: Path) -> dict[str, int]:
    return json.loads((home / "config.json").read_text())["gateway"]["metrics"]  # type: ignore[no-any-return]


def test_metrics_off_opens_no_port(tmp_path: Path) -> None:
    port = free_port()
    home, ports, http_port = make_home(tmp_path, metrics={"enabled": False, "fileApi": port})
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api")
        assert listen_problem("127.0.0.1", port) is None  # nobody listens there
        [listening] = [line for line in running.log_lines("file_api") if line["event"] == "listening"]
        assert listening["metrics"] is None
    finally:
        running.stop_all()


def test_a_busy_metrics_port_stops_the_process_and_the_launcher_in_one_line(tmp_path: Path) -> None:
    home, _, _ = make_home(tmp_path)
    port = metrics_block(home)["kb"]
    with squatter(port):
        served = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "serve", "kb", "--home", str(home)],
                                capture_output=True, text=True, timeout=60)
        up = subprocess.run([sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(home)],
                            capture_output=True, text=True, timeout=60)
    assert served.returncode == 1, served.stderr
    assert served.stderr.splitlines() == [served.stderr.strip()], served.stderr
    assert served.stderr.startswith(f"gateway: kb metrics (gateway.metrics): 127.0.0.1:{port} is already in use"), served.stderr
    assert up.returncode == 1 and "ready" not in up.stdout and "Traceback" not in up.stderr
    assert f"gateway: cannot start: kb metrics: 127.0.0.1:{port} is already in use" in up.stderr, up.stderr
