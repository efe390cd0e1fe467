"""The metrics port (``gateway.metrics_port``) answers as prometheus_client's own server does, and the
registry loads only the library's core until the first scrape (``gateway.metrics_made``)."""

from __future__ import annotations

import asyncio
import gzip
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from gateway.metrics import exposition, observe_rpc
from gateway.metrics_port import MetricsPort, open_metrics, request_environ, run_app

ROOT = Path(__file__).resolve().parents[2]

CORE_ONLY = """
import sys
from gateway.metrics import REGISTRY, exposition
REGISTRY.made()
heavy = sorted({"prometheus_client.exposition", "http.server", "wsgiref", "urllib.request", "email"} & set(sys.modules))
assert heavy == [], heavy
assert "gateway_open_files" in exposition()[0].decode()  # the first scrape loads the exposition
assert "prometheus_client.exposition" in sys.modules
import prometheus_client
from prometheus_client import start_http_server, Counter  # the package's own names: its __init__ runs then
assert prometheus_client.Counter is prometheus_client.metrics.Counter and callable(start_http_server)
"""


def test_the_registry_loads_prometheus_clients_core_alone_until_a_scrape() -> None:
    done = subprocess.run([sys.executable, "-c", CORE_ONLY], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _on_port(check: Callable[[str], Awaitable[None]]) -> None:
    port = open_metrics("kb", ("127.0.0.1", 0))
    assert isinstance(port, MetricsPort)

    async def run() -> None:
        await port.start()
        try:
            await check(port.address)
        finally:
            await port.close()

    asyncio.run(run())


def steady(text: bytes) -> bytes:
    """``text`` without the open-files sample (a scrape's own connection moves it)."""
    return b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(b"gateway_open_files "))


def steady_exposition(accept: str) -> tuple[str, bytes]:
    body, content_type = exposition(accept)
    return content_type, steady(body)


def test_a_scrape_answers_what_the_library_answers_in_each_format() -> None:
    observe_rpc("PortProbe", "OK", 0.003)
    openmetrics = "application/openmetrics-text; version=1.0.0; charset=utf-8"

    async def check(address: str) -> None:
        async with httpx.AsyncClient(base_url=f"http://{address}", timeout=5) as client:
            plain = await client.get("/metrics")
            assert plain.status_code == 200
            assert (plain.headers["content-type"], steady(plain.content)) == steady_exposition("")
            prefers = await client.get("/metrics", headers={"Accept": openmetrics})
            assert (prefers.headers["content-type"], steady(prefers.content)) == steady_exposition(openmetrics)
            assert prefers.text.endswith("# EOF\n")
            zipped = await client.get("/metrics", headers={"Accept-Encoding": "gzip"})
            assert zipped.headers["content-encoding"] == "gzip" and b"gateway_rpc_duration_seconds" in zipped.content
            only = await client.get("/metrics", params={"name[]": "gateway_open_files"})
            assert "gateway_open_files " in only.text and "gateway_rpc_duration_seconds" not in only.text
            options = await client.options("/metrics")
            assert (options.status_code, options.headers["allow"]) == (200, "OPTIONS,GET")
            posted = await client.post("/metrics", content=b"")
            assert posted.status_code == 405 and "use OPTIONS or GET" in posted.text

    _on_port(check)


def test_a_request_that_is_not_http_gets_a_400_and_a_silent_client_is_let_go() -> None:
    async def check(address: str) -> None:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HELLO\r\n\r\n")
        answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and answer.endswith(b"a metrics port answers GET /metrics\n")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write_eof()  # nothing sent: the port closes the connection without an answer
        assert await reader.read() == b""
        writer.close()

    _on_port(check)


def test_request_environ_reads_the_method_path_query_and_headers() -> None:
    head = b"GET /met%72ics?name[]=a HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\naccept:  text/plain \r\n\r\n"
    assert request_environ(head) == {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "name[]=a", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "x", "HTTP_ACCEPT_ENCODING": "gzip", "HTTP_ACCEPT": "text/plain",
    }
    assert request_environ(b"GET /metrics\r\n\r\n") is None
    assert request_environ(b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n") is None


def test_a_gzipped_scrape_unzips_to_the_plain_one() -> None:
    async def check(address: str) -> None:
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"GET /metrics?name[]=gateway_open_files_limit HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
            raw = b""
            while chunk := await asyncio.to_thread(sock.recv, 65536):
                raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        assert b"Content-Encoding: gzip" in head and f"Content-Length: {len(body)}".encode() in head
        assert gzip.decompress(body).startswith(b"# HELP gateway_open_files_limit ")

    _on_port(check)


ACCEPTS = (
    "", "*/*", "text/plain", "text/plain; version=0.0.4", "text/plain;version=1.0.0",
    "text/plain;version=1.0.0;escaping=allow-utf-8", "application/openmetrics-text",
    "application/openmetrics-text; version=1.0.0", "application/openmetrics-text;version=0.0.1",
    "application/openmetrics-text;version=0.0.1,text/plain;version=0.0.4;q=0.5",
    "application/openmetrics-text;version=2.0.0", "application/openmetrics-text;escaping=dots;version=1.0.0",
    "application/openmetrics-text;version=1.0.0;escaping=bogus", "application/openmetrics-text;version=1.0.0;escaping=",
    "text/plain;version=0.0.4,application/openmetrics-text;version=1.0.0",
    # Prometheus 2 and 3 (scrape_protocols by default)
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
)


def _library(environ: dict[str, str]) -> tuple[str, list[tuple[str, str]], bytes]:
    from prometheus_client.exposition import make_wsgi_app

    from gateway.metrics import REGISTRY

    answer: dict[str, object] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"], answer["headers"] = status, headers

    body = b"".join(make_wsgi_app(REGISTRY.made())(environ, start_response))
    return str(answer["status"]), list(answer["headers"]), body  # type: ignore[call-overload]


def _comparable(answer: tuple[str, list[tuple[str, str]], bytes]) -> tuple[str, list[tuple[str, str]], bytes]:
    status, headers, body = answer
    if ("Content-Encoding", "gzip") in headers:
        body = gzip.decompress(body)  # the gzip header holds the time it was made
    return status, headers, steady(body)


def test_each_request_is_answered_as_the_librarys_own_app_answers_it() -> None:
    observe_rpc("PortMatrix", "OK", 0.004)
    requests = [("GET", "/metrics", "", accept, "") for accept in ACCEPTS]
    requests += [("GET", "/metrics", query, accept, encoding) for query in ("name[]=gateway_rpc_duration_seconds", "name[]=")
                 for accept in ("", ACCEPTS[-1]) for encoding in ("", "gzip", "br, GZIP;q=1")]
    requests += [(method, path, "", "", "") for method in ("OPTIONS", "POST", "HEAD") for path in ("/metrics", "/favicon.ico")]
    requests += [("GET", "/favicon.ico", "", "", ""), ("GET", "/anything", "", ACCEPTS[-1], "")]
    for method, path, query, accept, encoding in requests:
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query}
        if accept:
            environ["HTTP_ACCEPT"] = accept
        if encoding:
            environ["HTTP_ACCEPT_ENCODING"] = encoding
        ours, theirs = _comparable(run_app(dict(environ))), _comparable(_library(dict(environ)))
        assert ours == theirs, (method, path, query, accept, encoding)


def test_an_accept_version_that_is_no_number_is_a_400() -> None:
    status, _, body = run_app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "HTTP_ACCEPT": "application/openmetrics-text;version=1.x"})
    assert status == "400 Bad Request" and b"not a version number" in body


OPENMETRICS_ALONE = """
import sys
from gateway.metrics_port import run_app
accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5"
status, headers, body = run_app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "HTTP_ACCEPT": accept, "HTTP_ACCEPT_ENCODING": "gzip"})
assert status == "200 OK" and headers[0][1].startswith("application/openmetrics-text"), headers
heavy = sorted({"prometheus_client.exposition", "http.server", "wsgiref", "urllib.request", "email"} & set(sys.modules))
assert heavy == [], heavy  # Prometheus' scrape loads no more than the library's core
run_app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics"})  # curl's: the text format, from the library's module
assert "prometheus_client.exposition" in sys.modules
"""


def test_an_openmetrics_scrape_loads_only_the_librarys_core() -> None:
    done = subprocess.run([sys.executable, "-c", OPENMETRICS_ALONE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
