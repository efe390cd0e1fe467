"""Slow and greedy clients of the REST shim, against the real processes.

With one-second limits in config.json: a connection that sends nothing is
closed, trickled headers and a trickled body are cut (408, then closed),
headers past their bound get 431, an idle keep-alive connection is closed, and a
normal client is served all the while. At ``maxConnections`` (with long limits, so
no timer closes anything meanwhile), a new connection closes the connection that has
waited longest for a whole request, never one whose request is being handled, and is
answered 503 at once only when every connection has a request in progress.
Every wait is bounded; nothing asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from hardening_report import record
from prometheus_client.parser import text_string_to_metric_families
from suite_support import ADMIN_KEY, Suite, make_home, poll_get, wait_until

pytestmark = pytest.mark.integration

LIMITS = {"headerTimeoutSeconds": 1, "bodyTimeoutSeconds": 1, "keepAliveSeconds": 1, "maxConnections": 16}
FILE = "/api/v1/agents/alfred/files/SOUL.md"
DRIP_S = 0.5  # one byte every half second
MAX_DRIPS = 120  # a minute of trickling: far past every limit, so an answer before the end is a cut
READ_TIMEOUT_S = 30.0
LONG_LIMITS = {"headerTimeoutSeconds": 60, "bodyTimeoutSeconds": 60, "keepAliveSeconds": 60}
CAP = 50
PROMPT_REQUESTS = 20


def set_api(home_config: str, **api: object) -> None:
    with open(home_config, encoding="utf-8") as handle:
        config = json.load(handle)
    config["gateway"]["api"].update(api)
    tmp = home_config + ".new"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(config, handle)
    os.replace(tmp, home_config)


@pytest.fixture(scope="module")
def ssuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("slow"))
    set_api(str(home / "config.json"), **LIMITS)
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api", "http")
        yield running
    finally:
        running.stop_all()


def connect(suite: Suite) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", suite.http_port), timeout=READ_TIMEOUT_S)
    sock.settimeout(READ_TIMEOUT_S)
    return sock


def read_to_end(sock: socket.socket) -> bytes:
    """Everything the shim sends until it closes (a reset after its answer counts as the close)."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def trickle(sock: socket.socket, first: bytes, drip: bytes) -> tuple[bytes, int]:
    """Send ``first``, then ``drip`` one byte per DRIP_S until the shim answers or closes.

    Returns what it sent back and how many drips went out first.
    """
    sock.sendall(first)
    for sent in range(MAX_DRIPS):
        readable, _, _ = select.select([sock], [], [], DRIP_S)
        if readable:
            return read_to_end(sock), sent
        try:
            sock.sendall(drip[sent % len(drip) : sent % len(drip) + 1])
        except (BrokenPipeError, ConnectionResetError):
            return read_to_end(sock), sent
    return b"", MAX_DRIPS


def status_of(reply: bytes) -> int | None:
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else None


def error_message(reply: bytes) -> str:
    return str(json.loads(reply.split(b"\r\n\r\n", 1)[1])["message"])


def head(method: str, path: str, *extra: str) -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: shim", f"X-Api-Key: {ADMIN_KEY}", *extra, ""]).encode()


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer (status, headers, a content-length body) on a connection that stays open."""
    reply = b""
    while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < content_length(reply):
        chunk = sock.recv(65536)
        assert chunk, f"closed before the answer was whole: {reply[:200]!r}"
        reply += chunk
    return reply


def content_length(reply: bytes) -> int:
    for line in reply.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@contextlib.contextmanager
def api_limits(suite: Suite, **api: object) -> Iterator[None]:
    """``gateway.api`` with ``api`` in force in the running shim for the block, then the module's LIMITS again."""
    config = str(suite.home / "config.json")

    def reloaded(count: int) -> bool:
        return sum(1 for line in suite.log_lines("http") if line.get("event") == "config_reloaded") >= count

    seen = sum(1 for line in suite.log_lines("http") if line.get("event") == "config_reloaded")
    set_api(config, **api)
    wait_until(lambda: reloaded(seen + 1), 20, "the shim to reload its limits")
    try:
        yield
    finally:
        set_api(config, **LIMITS)
        wait_until(lambda: reloaded(seen + 2), 20, "the shim to reload the test's limits")


def at_cap(suite: Suite, outcome: str) -> float:
    """``gateway_http_connections_at_cap_total{outcome=...}`` as the shim's metrics port shows it now."""
    text = poll_get(suite.metrics_url("http"), READ_TIMEOUT_S).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gateway_http_connections_at_cap_total" and sample.labels["outcome"] == outcome:
                return sample.value
    raise AssertionError(f"no gateway_http_connections_at_cap_total{{outcome={outcome!r}}} in the shim's metrics")


def hold(suite: Suite, kind: str) -> socket.socket:
    """A connection left waiting for a whole request: ``silent`` sent nothing, ``partial`` part of its
    headers, ``idle`` one request, answered 200, and nothing since."""
    sock = connect(suite)
    if kind == "partial":
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: shim\r\nX-Pad: ")
    elif kind == "idle":
        sock.sendall(head("GET", FILE, ""))
        assert status_of(read_answer(sock)) == 200
    return sock


def mid_request(suite: Suite, body: bytes) -> socket.socket:
    """A connection whose PUT is being handled: the shim has its headers and asked for the body
    (100 Continue, sent once the request is read and the body wanted), which it has not got yet."""
    sock = connect(suite)
    sock.sendall(head("PUT", FILE, "Content-Type: application/json", f"Content-Length: {len(body)}",
                      "Expect: 100-continue", ""))
    assert status_of(read_answer(sock)) == 100
    return sock


def closed_by_shim(socks: list[socket.socket], closed: dict[int, bytes]) -> int:
    """Add to ``closed`` (index: what the shim sent before closing) every one of ``socks`` the shim
    has closed since; how many are in it."""
    readable, _, _ = select.select([sock for i, sock in enumerate(socks) if i not in closed], [], [], 0)
    for sock in readable:
        closed[socks.index(sock)] = read_to_end(sock)
    return len(closed)


def prompt_get(suite: Suite, opened: list[socket.socket]) -> int | None:
    """A prompt client's GET on a connection of its own, left open (in ``opened``); its status."""
    sock = connect(suite)
    opened.append(sock)
    sock.sendall(head("GET", FILE, ""))
    return status_of(read_answer(sock))


def test_a_connection_that_sends_nothing_is_closed(ssuite: Suite) -> None:
    with connect(ssuite) as sock:
        assert read_to_end(sock) == b""


def test_trickled_headers_are_cut_with_408(ssuite: Suite) -> None:
    with connect(ssuite) as sock:
        reply, drips = trickle(sock, b"GET /healthz HTTP/1.1\r\nX-Pad: ", b"abcdefgh")
    assert drips < MAX_DRIPS
    assert status_of(reply) == 408, reply[:200]
    assert "request headers not received within 1 s" in error_message(reply)


def test_a_trickled_body_is_cut_with_408_and_nothing_is_written(ssuite: Suite) -> None:
    soul = ssuite.home / "agents" / "alfred" / "workspace" / "SOUL.md"
    before = soul.read_bytes() if soul.exists() else None
    body = json.dumps({"content": "x" * 200}).encode()
    with connect(ssuite) as sock:
        first = head("PUT", FILE, "Content-Type: application/json", f"Content-Length: {len(body)}", "") + body[:1]
        reply, drips = trickle(sock, first, body[1:])
    assert drips < len(body) - 1  # cut before the body was whole
    assert status_of(reply) == 408, reply[:200]
    assert "request body not received within 1 s" in error_message(reply)
    assert (soul.read_bytes() if soul.exists() else None) == before


def test_headers_past_their_bound_get_431_and_a_64_kb_key_still_gets_its_401(ssuite: Suite) -> None:
    with connect(ssuite) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: shim\r\n")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the shim may stop reading at its bound
            for _ in range(64):  # 1 MiB of headers, sent as fast as the shim reads them
                sock.sendall(b"X-Pad: " + b"p" * 16377 + b"\r\n")
        reply = read_to_end(sock)
    assert status_of(reply) == 431, reply[:200]
    with httpx.Client(base_url=ssuite.base_url, timeout=READ_TIMEOUT_S) as client:
        refused = client.get(FILE, headers={"X-Api-Key": "k" * 65536})
    assert refused.status_code == 401 and "X-Api-Key" in refused.json()["message"]


def test_an_idle_keep_alive_connection_is_closed(ssuite: Suite) -> None:
    with connect(ssuite) as sock:
        sock.sendall(head("GET", FILE, ""))
        assert status_of(read_answer(sock)) == 200
        assert read_to_end(sock) == b""  # then nothing more: the shim closed the idle connection


def test_normal_clients_are_served_while_others_trickle(ssuite: Suite) -> None:
    outcomes: list[tuple[str, int | None]] = []

    def attacker(kind: str) -> None:
        with connect(ssuite) as sock:
            if kind == "silent":
                outcomes.append((kind, 0 if read_to_end(sock) == b"" else None))
                return
            if kind == "headers":
                reply, _ = trickle(sock, b"GET /healthz HTTP/1.1\r\nX-Pad: ", b"zzzz")
            else:
                reply, _ = trickle(sock, head("PUT", FILE, "Content-Length: 500", "") + b"{", b'"')
            outcomes.append((kind, status_of(reply)))

    kinds = ["silent", "headers", "body"] * 3
    threads = [threading.Thread(target=attacker, args=(kind,), daemon=True) for kind in kinds]
    for thread in threads:
        thread.start()
    served, longest = [], 0.0
    with httpx.Client(base_url=ssuite.base_url, headers={"X-Api-Key": ADMIN_KEY}, timeout=READ_TIMEOUT_S) as client:
        i = 0
        while any(t.is_alive() for t in threads) or i < 5:
            start = time.perf_counter()
            reply = client.put(FILE, json={"content": f"# Soul {i}\n"}) if i % 2 else client.get(FILE)
            longest = max(longest, (time.perf_counter() - start) * 1000)
            served.append(reply.status_code)
            i += 1
    for thread in threads:
        thread.join(READ_TIMEOUT_S)
    assert served and set(served) == {200}, served
    assert sorted(outcomes) == sorted((k, {"silent": 0, "headers": 408, "body": 408}[k]) for k in kinds), outcomes
    record(
        "slow clients (REST)",
        inputs=len(kinds),
        errors_5xx=sum(1 for s in served if s >= 500),
        longest_ms=round(longest, 1),
        notes=f"{len(kinds)} silent/trickling connections cut (closed or 408) with 1 s limits while a normal client "
        f"was served {len(served)} requests, all 200; longest = slowest normal request meanwhile",
    )


@pytest.mark.parametrize("kind", ["silent", "partial", "idle"])
def test_waiting_connections_at_the_cap_make_room_for_a_prompt_client(ssuite: Suite, kind: str) -> None:
    held: list[socket.socket] = []
    prompt: list[socket.socket] = []
    with api_limits(ssuite, maxConnections=CAP, **LONG_LIMITS):
        evicted, refused = at_cap(ssuite, "evicted"), at_cap(ssuite, "refused")
        try:
            held.extend(hold(ssuite, kind) for _ in range(CAP))
            statuses = [prompt_get(ssuite, prompt) for _ in range(PROMPT_REQUESTS)]
            assert statuses == [200] * PROMPT_REQUESTS
            closed: dict[int, bytes] = {}
            wait_until(lambda: closed_by_shim(held, closed) >= PROMPT_REQUESTS, 20, "the evicted connections to close")
            # Each prompt connection, left open, made room by closing one held connection: the
            # one that had waited longest. Its own connections, younger, were all kept.
            assert sorted(closed) == list(range(PROMPT_REQUESTS)), sorted(closed)
            assert closed_by_shim(prompt, {}) == 0
            if kind == "partial":  # it had begun a request: it is told why it was closed
                assert {status_of(reply) for reply in closed.values()} == {503}
                assert "closed to make room" in error_message(closed[0])
            else:
                assert set(closed.values()) == {b""}
            assert at_cap(ssuite, "evicted") == evicted + PROMPT_REQUESTS
            assert at_cap(ssuite, "refused") == refused
        finally:
            for sock in held + prompt:
                sock.close()


def test_a_connection_mid_request_is_not_evicted(ssuite: Suite) -> None:
    body = json.dumps({"content": "# Soul, sent while the cap is reached\n"}).encode()
    others: list[socket.socket] = []
    with api_limits(ssuite, maxConnections=5, **LONG_LIMITS):
        try:
            busy = mid_request(ssuite, body)  # the oldest connection of all
            others.append(busy)
            held = [hold(ssuite, "silent") for _ in range(4)]
            others.extend(held)
            statuses = [prompt_get(ssuite, others) for _ in range(len(held))]
            assert statuses == [200] * len(held)
            closed: dict[int, bytes] = {}
            wait_until(lambda: closed_by_shim(held, closed) == len(held), 20, "the held connections to be evicted")
            assert closed_by_shim([busy], {}) == 0  # older than every one evicted, and still open
            busy.sendall(body)
            assert status_of(read_answer(busy)) == 200
        finally:
            for sock in others:
                sock.close()
    assert json.loads(body)["content"] in (ssuite.home / "agents" / "alfred" / "workspace" / "SOUL.md").read_text()


def test_connections_past_the_cap_are_refused_at_once_when_none_waits(ssuite: Suite) -> None:
    body = json.dumps({"content": "# Soul, at the cap\n"}).encode()
    busy: list[socket.socket] = []
    with api_limits(ssuite, maxConnections=3, **LONG_LIMITS):
        evicted, refused = at_cap(ssuite, "evicted"), at_cap(ssuite, "refused")
        try:
            busy.extend(mid_request(ssuite, body) for _ in range(3))
            with connect(ssuite) as extra:
                extra.sendall(head("GET", FILE, ""))
                reply = read_to_end(extra)
            assert status_of(reply) == 503, reply[:200]
            assert "maximum of 3 connections" in error_message(reply)
            assert at_cap(ssuite, "refused") == refused + 1
            busy[0].sendall(body)  # answered, it waits for its next request: the next newcomer's room
            assert status_of(read_answer(busy[0])) == 200
            with connect(ssuite) as newcomer:
                newcomer.sendall(head("GET", FILE, "Connection: close", ""))
                assert status_of(read_to_end(newcomer)) == 200
            assert read_to_end(busy[0]) == b""
            assert at_cap(ssuite, "evicted") == evicted + 1
        finally:
            for sock in busy:
                sock.close()
