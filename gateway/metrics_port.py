"""A process's metrics port: ``http://HOST:PORT/metrics`` served on the process's own event loop.

docs/operations.md "Memory at rest": no thread and no HTTP server library wait at rest for a scrape.
The port is bound and listening when ``open_metrics`` returns (a port that cannot be bound stops the
process in one line, as before the loop runs); ``MetricsPort.start`` accepts on the running loop. Each
connection sends one request; its head is read here (the request line and the headers) and
answered as prometheus_client's own WSGI app (``make_wsgi_app``) answers it (``run_app``; a test
holds the two to the same answers): the format from ``Accept`` (``gateway.metrics``), gzip when
``Accept-Encoding`` asks for it, ``name[]`` to filter, ``OPTIONS`` and 405 for other methods, the
body made by the library's encoders. The answer is made in a worker thread (a scrape reads every
collector) and the connection is closed after it, as HTTP/1.0 servers do. A scraper that asks for
OpenMetrics (Prometheus) never loads ``prometheus_client.exposition``; one that asks for the text
format loads it at its first scrape (``gateway.metrics_made.encoder_for``).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any
from urllib.parse import parse_qs, unquote

from gateway.ports import BindError, listen_problem

HEAD_LIMIT_BYTES = 16 * 1024  # a request line and headers longer than this get a 400
READ_TIMEOUT_S = 10.0  # a client that has not sent its whole head by then is dropped
BACKLOG = 64

class MetricsPort:
    """A bound, listening socket for ``/metrics``; ``address`` is ``host:port`` as bound."""

    def __init__(self, sock: socket.socket, host: str) -> None:
        self._sock = sock
        self.address = f"{host}:{sock.getsockname()[1]}"
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Answer scrapes on the running loop, until ``close`` or the loop's end."""
        self._server = await asyncio.start_server(_answer, sock=self._sock, limit=HEAD_LIMIT_BYTES)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        else:
            self._sock.close()


def open_metrics(process: str, address: tuple[str, int] | None) -> MetricsPort | None:
    """The metrics port of ``process`` bound on ``address`` (None when ``address`` is None: metrics
    off). An operator who set a port expects it to work, so a port that cannot be bound stops the
    process: raises BindError with one line."""
    if address is None:
        return None
    host, port = address
    problem = listen_problem(host, port)
    if problem:
        raise BindError(f"{process} metrics (gateway.metrics): {problem}")
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise BindError(f"{process} metrics (gateway.metrics): cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the library's servers: a restart rebinds at once
        sock.bind(sockaddr)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise BindError(f"{process} metrics (gateway.metrics): cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return MetricsPort(sock, host)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return  # gone, or never sent a request: nobody to answer
        except asyncio.LimitOverrunError:
            head = b""
        environ = request_environ(head)
        if environ is None:
            status, headers, body = "400 Bad Request", [("Content-Type", "text/plain; charset=utf-8")], b"a metrics port answers GET /metrics\n"
        else:
            status, headers, body = await asyncio.to_thread(run_app, environ)
        lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in headers),
                 f"Content-Length: {len(body)}", "Connection: close", "", ""]
        writer.write("\r\n".join(lines).encode("latin-1") + body)
        await writer.drain()
    except ConnectionError:
        return
    finally:
        writer.close()


def request_environ(head: bytes) -> dict[str, Any] | None:
    """The WSGI environ of one request's head (request line and headers), or None when it is not an
    HTTP request: what prometheus_client's app reads (method, path, query, ``HTTP_*`` headers)."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:
        return None
    request_line, *header_lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    method, target, protocol = parts
    path, _, query = target.partition("?")
    environ: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": unquote(path, "iso-8859-1"),
                               "QUERY_STRING": query, "SERVER_PROTOCOL": protocol}
    for line in header_lines:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            return None
        environ["HTTP_" + name.strip().upper().replace("-", "_")] = value.strip()
    return environ


def run_app(environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """(status, headers, body) for one request, as prometheus_client's WSGI app (``make_wsgi_app``)
    answers it: OPTIONS and 405 for other methods, an empty favicon, else the registry in the format
    the ``Accept`` header asks for (``gateway.metrics_made.encoder_for``), only the ``name[]``
    series when the query names some, gzipped when ``Accept-Encoding`` allows it. An ``Accept``
    version that is no version number is a 400 (the library's app fails on it)."""
    method = environ["REQUEST_METHOD"]
    if method == "OPTIONS":
        return "200 OK", [("Allow", "OPTIONS,GET")], b""
    if method != "GET":
        status = "405 Method Not Allowed"
        return status, [("Allow", "OPTIONS,GET")], f"# HTTP {status}: {method}; use OPTIONS or GET\n".encode()
    if environ["PATH_INFO"] == "/favicon.ico":
        return "200 OK", [], b""
    from gateway.metrics import REGISTRY

    registry: Any = REGISTRY.made()  # first: it loads prometheus_client's core alone (gateway.metrics_made)
    from gateway.metrics_made import encoder_for

    accept = environ.get("HTTP_ACCEPT", "")
    try:
        encode, content_type = encoder_for(accept)
    except TypeError:
        return ("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8")],
                f"the Accept header's version is not a version number: {accept[:200]}\n".encode())
    names = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
    if names:
        registry = registry.restricted_registry(names)
    body, headers = encode(registry), [("Content-Type", content_type)]
    if _gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
        import gzip

        body = gzip.compress(body)
        headers.append(("Content-Encoding", "gzip"))
    return "200 OK", headers, body


def _gzip_accepted(accept_encoding: str) -> bool:
    return any(part.split(";")[0].strip().lower() == "gzip" for part in accept_encoding.split(","))
