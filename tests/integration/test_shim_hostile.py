"""Hostile input over REST, table-driven, against the real suite.

Every vector gets a 4xx naming what was wrong (never a 5xx, and never 404
where the route exists and only the name is bad), and the home is unchanged.

- **Body vectors** on every route with a body (``all_routes()``): JSON nested
  1,000 deep, a 4,301-digit integer, lone surrogates in a key and in a value
  (an enum's where the route has one), ``1e999999``, ``-Infinity``, ``NaN``,
  and the body in UTF-16 (with and without a BOM) and UTF-32.
- **Credential vectors** on every route: ``X-Api-Key`` and ``Authorization``
  holding a TAB, a raw ``é`` or 64 KB.
- **Traversal vectors** in every path-like field a route takes: agent id
  (every route), filename, note name and session id in the URL (sent raw,
  so ``..`` reaches the shim unnormalised), and memory path (``memory:get``'s
  ``path``, ``memory:refresh``'s ``paths``), note name and session id in a
  body, with symlinks out of the workspace where a path can name one. No
  REST route takes a topic slug (only the reviewer's proposals carry one).

"Unchanged" is every file under the home hashed before and after, except:
``*.log`` (each request is logged); SQLite's ``-wal`` and ``-shm`` files,
which a reader's checkpoint or its shared-memory index rewrite on their own;
and each ``*.sqlite`` compared by its content (``iterdump``), not its bytes,
since a checkpoint moves pages into it without changing a row.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from hardening_report import record
from suite_support import ADMIN_KEY, Suite, wait_until, workspace

from gateway_http.descriptors import Route, all_routes

pytestmark = pytest.mark.integration

NOTE = "hostile-target"
SESSION = "hostile-session"
VALID_PATH = {"agent_id": "alfred", "filename": "SOUL.md", "name": NOTE, "session_id": SESSION}
# The body each route would accept, so that only the vector under test is wrong.
VALID_BODY = {
    "PutFile": {"content": "hostile"},
    "CreateSharedNote": {"name": "hostile-new", "content": "hostile"},
    "UpdateSharedNote": {"content": "hostile"},
    "RegisterSession": {"sessionId": "hostile-new", "state": "SESSION_STATE_IDLE"},
    "ReportState": {"state": "SESSION_STATE_BUSY"},
    "RetireSharedNote": {"reason": "hostile"},
    "RunNow": {"mode": "propose"},
}

# Path segments as they go on the wire (percent-escapes decoded by the shim, per segment).
SEGMENTS = ["..", "..%2Fx", "%2e%2e", "%2E%2E%2Fx", "a%2Fb", "%2Fetc%2Fpasswd", "%00", "a%00b", "..%5Cx",
            "a%5Cb", "C:%5Cx", "x" * 5000]
# The same ideas in a JSON string or a query value (no percent-decoding there).
STRINGS = ["..", "../x", "/etc/passwd", "a\x00b", "..\\x", "C:\\x", "x" * 5000, "memory/../../x"]
TAB_KEY, RAW_E_KEY, HUGE_KEY = b"admin\tkey-456", "admin-clé-456".encode(), b"k" * 65536


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    body: bytes | None
    fragment: str  # in the error message
    statuses: tuple[int, ...] = (400,)
    headers: tuple[tuple[str, bytes], ...] = (("X-Api-Key", ADMIN_KEY.encode()),)


def url_of(route: Route, **values: str) -> str:
    path = route.template
    for field, value in {**VALID_PATH, **values}.items():
        path = path.replace("{" + field + "}", value)
    return path


def valid_body(route: Route) -> bytes | None:
    return json.dumps(VALID_BODY.get(route.method.name, {})).encode() if route.body else None


def target_field(route: Route) -> str:
    """The body field a value vector goes in: the enum where there is one, else a settable field."""
    fields = [f for f in route.request_class.DESCRIPTOR.fields if f.name not in route.path_fields]
    enums = [f for f in fields if f.enum_type is not None]
    return (enums or fields)[0].json_name if fields else "unknownField"


def body_cases() -> list[Case]:
    cases = []
    for route in (r for r in all_routes() if r.body):
        path, field = url_of(route), target_field(route)
        where = f"{route.http_method} {route.template}"

        def value(raw: bytes, field: str = field) -> bytes:
            return b'{"' + field.encode() + b'": ' + raw + b"}"

        plain = json.dumps({field: "x"})
        for name, body, fragment in (
            ("deep array", b"[" * 1000 + b"]" * 1000, "nested too deeply"),
            ("deep object", value(b'{"a":' * 1000 + b"1" + b"}" * 1000), "nested too deeply"),
            ("4301 digits", value(b"1" * 4301), "number literal"),
            ("surrogate key", b'{"\\udfff": "x"}', "lone surrogate"),
            ("surrogate value", value(b'"\\udfff"'), "lone surrogate"),
            ("1e999999", value(b"1e999999"), "too large"),
            ("-Infinity", value(b"-Infinity"), "not JSON"),
            ("NaN", value(b"NaN"), "not JSON"),
            ("UTF-16 with BOM", plain.encode("utf-16"), "UTF-8"),
            ("UTF-16BE", plain.encode("utf-16-be"), "UTF-8"),
            ("UTF-32", plain.encode("utf-32"), "UTF-8"),
        ):
            cases.append(Case(f"{where}: {name}", route.http_method, path, body, fragment))
    return cases


def credential_cases() -> list[Case]:
    cases = []
    for route in all_routes():
        for header, value in (
            ("X-Api-Key", TAB_KEY), ("X-Api-Key", RAW_E_KEY), ("X-Api-Key", HUGE_KEY),
            ("Authorization", b"Bearer " + TAB_KEY), ("Authorization", b"Bearer " + RAW_E_KEY),
            ("Authorization", b"Bearer " + HUGE_KEY),
        ):
            shown = "64 KB" if len(value) > 1000 else repr(value)
            cases.append(Case(f"{route.http_method} {route.template}: {header} {shown}", route.http_method,
                              url_of(route), valid_body(route), header, (401,), ((header, value),)))
    return cases


def traversal_cases(outside: Path) -> list[Case]:
    cases = []
    for route in all_routes():
        for field in route.path_fields:
            for segment in SEGMENTS:
                cases.append(Case(f"{route.http_method} {route.template}: {field}={segment[:20]}", route.http_method,
                                  url_of(route, **{field: segment}), valid_body(route), ""))
    for text in [*STRINGS, "memory/escape.md", "USER.md", str(outside)]:
        cases.append(Case(f"memory:get path={text[:20]!r}", "GET",
                          "/api/v1/agents/alfred/memory:get?" + urlencode({"path": text}), None, ""))
    for text in [*STRINGS, str(outside)]:
        cases.append(Case(f"memory:refresh paths=[{text[:20]!r}]", "POST", "/api/v1/agents/alfred/memory:refresh",
                          json.dumps({"paths": [text]}).encode(), ""))
    for text in STRINGS:
        cases.append(Case(f"create note name={text[:20]!r}", "POST", "/api/v1/agents/alfred/shared/notes",
                          json.dumps({"name": text, "content": "hostile"}).encode(), ""))
        cases.append(Case(f"register sessionId={text[:20]!r}", "POST", "/api/v1/agents/alfred/sessions",
                          json.dumps({"sessionId": text, "state": "SESSION_STATE_IDLE"}).encode(), ""))
    cases.append(Case("GET a file that is a symlink out of the workspace", "GET",
                      "/api/v1/agents/alfred/files/USER.md", None, "link"))
    return cases


def snapshot(home: Path) -> dict[str, str]:
    """Digest of every file under ``home`` but the exclusions of the module docstring."""
    out = {}
    for path in sorted(home.rglob("*")):
        rel = str(path.relative_to(home))
        if path.is_symlink():
            out[rel] = "link -> " + os.readlink(path)
        elif not path.is_file() or path.suffix == ".log" or rel.endswith(("-wal", "-shm")):
            continue
        elif path.suffix == ".sqlite":
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                out[rel] = hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
            conn.close()
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def settled(home: Path) -> dict[str, str]:
    """The home's snapshot once it has not changed for a second (start-up and the fixture's writes
    are composed and indexed off the request path; under load two quick snapshots could both come
    before the watcher's recomposition)."""
    seen: list[dict[str, str]] = [snapshot(home)]

    def steady() -> bool:
        time.sleep(0.5)
        seen.append(snapshot(home))
        return seen[-1] == seen[-2] == seen[-3] if len(seen) >= 3 else False

    wait_until(steady, 30, "the home to stop changing")
    return seen[-1]


class Wire:
    """Raw HTTP/1.1 requests (http.client keeps ``..`` and bytes headers as they are), reconnecting
    when the shim closes the connection."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def send(self, case: Case) -> tuple[int, dict[str, object], float]:
        for attempt in (1, 2):
            start = time.perf_counter()
            try:
                self._conn.putrequest(case.method, case.path, skip_accept_encoding=True)
                for name, value in case.headers:
                    self._conn.putheader(name, value)
                if case.body is not None:
                    self._conn.putheader("Content-Type", "application/json")
                    self._conn.putheader("Content-Length", str(len(case.body)))
                self._conn.endheaders(case.body)
                reply = self._conn.getresponse()
                data = reply.read()
            except (ConnectionError, http.client.HTTPException):
                self._conn.close()
                self._conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=30)
                if attempt == 2:
                    raise
                continue
            ms = (time.perf_counter() - start) * 1000
            if reply.getheader("connection", "").lower() == "close":
                self._conn.close()
            try:
                body = json.loads(data)
            except ValueError:  # uvicorn's own plain-text 500 when the application raised
                body = {"unparsed": data[:200].decode("utf-8", "replace")}
            return reply.status, body if isinstance(body, dict) else {"unparsed": body}, ms
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._conn.close()


@pytest.fixture(scope="module")
def prepared(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A note, a file, and symlinks leading out of alfred's workspace; the file they point at."""
    outside = tmp_path_factory.mktemp("outside") / "secret.md"
    outside.write_text("outside the workspace\n")
    with httpx.Client(base_url=suite.base_url, headers={"X-Api-Key": ADMIN_KEY}, timeout=30) as client:
        assert client.put("/api/v1/agents/alfred/files/SOUL.md", json={"content": "# Soul\n"}).status_code == 200
        created = client.post("/api/v1/agents/alfred/shared/notes", json={"name": NOTE, "content": "a target"})
        assert created.status_code == 200, created.text
    (workspace(suite, "alfred") / "memory").mkdir(parents=True, exist_ok=True)
    (workspace(suite, "alfred") / "memory" / "escape.md").symlink_to(outside)
    (workspace(suite, "alfred") / "USER.md").symlink_to(outside)
    with httpx.Client(base_url=suite.base_url, headers={"X-Api-Key": ADMIN_KEY}, timeout=60) as client:
        # The KB indexes on file events: let the refresh these links queued land before the snapshot.
        refreshed = client.post("/api/v1/agents/alfred/memory:refresh", json={"wait": True})
        assert refreshed.status_code == 200, refreshed.text
    yield outside


def test_hostile_input_gets_a_4xx_naming_it_and_changes_nothing(suite: Suite, prepared: Path) -> None:
    cases = body_cases() + credential_cases() + traversal_cases(prepared)
    before, outside_before = settled(suite.home), prepared.read_bytes()
    wire = Wire(suite.http_port)
    failures, statuses, longest, errors_5xx = [], set(), 0.0, 0
    try:
        for case in cases:
            status, body, ms = wire.send(case)
            longest = max(longest, ms)
            statuses.add(status)
            errors_5xx += status >= 500
            message = str(body.get("message", ""))
            if status not in case.statuses or case.fragment not in message or set(body) != {"code", "message", "details", "error"}:
                failures.append(f"{case.name}: {status} {message[:160]!r}")
    finally:
        wire.close()
    after = snapshot(suite.home)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    record(
        "hostile input (REST)",
        inputs=len(cases),
        errors_5xx=errors_5xx,
        longest_ms=round(longest, 1),
        notes=f"{len(all_routes())} routes ({sum(1 for r in all_routes() if r.body)} with a body): body, credential "
        "and traversal vectors; every answer a 4xx naming the problem; home unchanged (logs and SQLite -wal/-shm "
        "excluded, databases compared by content)",
    )
    assert not failures, f"{len(failures)} of {len(cases)} vectors answered wrong:\n" + "\n".join(failures[:40])
    assert not changed, f"the home changed: {changed}"
    assert prepared.read_bytes() == outside_before
    assert statuses <= {400, 401}, statuses
