"""The auth matrix (docs/architecture.md "Auth and the internal token") over the real suite: REST, gRPC and MCP.

Every REST route (``all_routes()``, so a new route is in the matrix with no
edit here) and every RPC of every service (the descriptors, streaming and
internal-only RPCs included) is called in each column:

| column | expected |
|---|---|
| no key | 401 / UNAUTHENTICATED |
| wrong key | 401 |
| read key, agent in its scope | allowed for a read RPC, 403 for a write |
| read key, agent out of its scope | 403 |
| write key, agent in its scope | allowed |
| unknown agent, ``*`` key | 404 |
| unknown agent, scoped key (its scope names the agent) | 403, as for any agent it does not cover |

A list about no one agent (``SCOPE_FILTERED``: the console's ``ListAgents``) filters by the
key's scope instead of refusing: every accepted key is allowed there. A call about many agents
(``UNKNOWN_ANSWERED``: ``GetDreamSummaries``) names an unknown agent in its reply: the unknown
agent with a ``*`` key is allowed there. A call about a whole vault (``VAULT_WIDE``: the weekly
reflection's public calls, which name a project) is allowed only for the ``*`` key and refused (403)
for every scoped key.

each keyed column with ``X-Api-Key: K`` and with ``Authorization: Bearer K``.
gRPC adds the internal token (allowed) and a wrong internal token (401); REST
adds the internal token header alone, which the shim does not forward (401).
"Allowed" means not 401/403 and no 5xx; the requests are built to succeed
(``auth_matrix_support``) and the few allowed cases that do not succeed are
listed in the hardening table's notes.

MCP: ``gateway mcp --agent alfred`` (stdio) acts for alfred alone: its tools
cannot read or search bob's files (another agent's path, traversal, absolute
paths, symlinks out of the workspace) while the shared vault tools, which are
shared by design, work. MCP over HTTP (``/mcp/agents/{agentId}`` on the shim)
has its own matrix, with the SDK's HTTP client: ``test_mcp_http.py``.

Afterwards no log of the run holds a key, the internal token, the SHA-256 hex
of either, or an 8-character prefix of any of them. Every mismatch is reported
in one table, not only the first.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import grpc
import httpx
import pytest
from auth_matrix_support import (
    ACCESS, INTERNAL_ONLY, READ, SCOPE_FILTERED, UNKNOWN_ANSWERED, VAULT_WIDE, Prep, all_methods, request_fields)
from dreaming_support import dreaming, reviewer
from google.protobuf import json_format, message_factory
from hardening_report import record
from mcp.types import TextContent
from suite_support import Suite, make_home, workspace
from test_mcp import mcp_session

import gateway.auth
from gateway.auth import INTERNAL_TOKEN_HEADER, Authenticator
from gateway.config import ApiKey
from gateway.home import read_internal_token
from gateway_http.descriptors import Route, all_routes

pytestmark = pytest.mark.integration

# Fresh random keys: a fixed key could share an 8-character prefix with a label the logs rightly hold.
KEYS = {name: f"mx_{secrets.token_urlsafe(24)}" for name in ("reader", "admin", "bob-writer", "carol", "wrong")}
WRONG_TOKEN = secrets.token_urlsafe(32)
ALFRED_PHRASE = "alfred keeps the lighthouse logbook"
BOB_SECRET = "zanzibar quokka protocol"  # in bob's files only: an MCP tool of alfred's must never show it
FORMS = ("x-api-key", "bearer")


@dataclass(frozen=True)
class Column:
    name: str
    agent: str
    key: str | None  # name in KEYS; None: no key
    expect: str  # "401", "403", "404", "allowed", or "access" (allowed for a read, 403 for a write)


COLUMNS = (
    Column("no key", "alfred", None, "401"),
    Column("wrong key", "alfred", "wrong", "401"),
    Column("read key, in scope", "alfred", "reader", "access"),
    Column("read key, out of scope", "bob", "reader", "403"),
    Column("write key, in scope", "bob", "bob-writer", "allowed"),
    Column("unknown agent, * key", "zed", "admin", "404"),
    Column("unknown agent, scoped key", "carol", "carol", "403"),
)
GRPC_CODES = {"401": grpc.StatusCode.UNAUTHENTICATED, "403": grpc.StatusCode.PERMISSION_DENIED, "404": grpc.StatusCode.NOT_FOUND}


@dataclass
class Outcome:
    transport: str
    what: str
    column: str
    expected: str
    got: str
    ms: float
    ok: bool
    succeeded: bool  # 2xx / OK
    fatal: bool  # 5xx / INTERNAL, UNKNOWN or a deadline: never the answer to any input


@dataclass
class Run:
    suite: Suite
    outcomes: list[Outcome] = field(default_factory=list)
    mcp: list[tuple[str, bool, str]] = field(default_factory=list)  # (probe, held, detail)

    def mismatches(self, transport: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.transport == transport and not o.ok]


def table(rows: list[Outcome]) -> str:
    lines = ["| transport | route / RPC | column | expected | got |", "|---|---|---|---|---|"]
    lines += [f"| {o.transport} | {o.what} | {o.column} | {o.expected} | {o.got} |" for o in rows]
    return "\n".join(lines)


def _expected(column: Column, full_name: str) -> str:
    if full_name in INTERNAL_ONLY and column.key is not None and column.key != "wrong":
        return "403"
    if full_name in VAULT_WIDE and column.key is not None and column.key != "wrong":
        return "allowed" if column.key == "admin" else "403"
    if full_name in SCOPE_FILTERED and column.key is not None and column.key != "wrong":
        return "allowed"
    if full_name in UNKNOWN_ANSWERED and column.name == "unknown agent, * key":
        return "allowed"
    if column.expect == "access":
        return "allowed" if ACCESS.get(full_name) == READ else "403"
    return column.expect


# --- REST -------------------------------------------------------------------------------


def _rest_request(route: Route, fields: dict[str, Any]) -> tuple[str, dict[str, str] | None, Any]:
    """URL path, query and JSON body of ``route`` for a request message built from ``fields``."""
    message = route.request_class(**fields)
    data = json_format.MessageToDict(message)
    parts = []
    for seg in route.segments:
        if seg.literal is not None:
            parts.append(seg.literal)
            continue
        assert seg.field is not None
        parts.append(quote(str(getattr(message, seg.field)), safe="") + (f":{seg.verb}" if seg.verb else ""))
        data.pop(route.request_class.DESCRIPTOR.fields_by_name[seg.field].json_name, None)
    path = "/" + "/".join(parts)
    if route.body:
        return path, None, data
    query = {k: (json.dumps(v) if isinstance(v, bool) else str(v)) for k, v in data.items() if not isinstance(v, (list, dict))}
    return path, query, None


def _rest_headers(column: Column, form: str) -> dict[str, str]:
    if column.key is None:
        return {}
    key = KEYS[column.key]
    return {"X-Api-Key": key} if form == "x-api-key" else {"Authorization": f"Bearer {key}"}


def _rest_case(run: Run, client: httpx.Client, prep: Prep, route: Route, label: str, column: str, expected: str,
               agent: str, headers: dict[str, str]) -> None:
    fields = request_fields(prep, route.method, agent, ready=expected == "allowed")
    path, query, body = _rest_request(route, fields)
    start = time.perf_counter()
    response = client.request(route.http_method, path, params=query, json=body, headers=headers)
    ms = (time.perf_counter() - start) * 1000
    status = response.status_code
    ok = status < 500 and (status not in (401, 403) if expected == "allowed" else status == int(expected))
    got = str(status) if ok else f"{status} {response.text[:90]}"
    run.outcomes.append(Outcome("REST", label, column, expected, got, ms, ok, 200 <= status < 300, status >= 500))


def _rest_matrix(run: Run, prep: Prep) -> None:
    token = read_internal_token(run.suite.home)
    with httpx.Client(base_url=run.suite.base_url, timeout=60) as client:
        for route in all_routes():
            label = f"{route.http_method} {route.template}"
            for column in COLUMNS:
                expected = _expected(column, route.method.full_name)
                for form in FORMS if column.key else FORMS[:1]:
                    name = f"{column.name} ({form})" if column.key else column.name
                    _rest_case(run, client, prep, route, label, name, expected, column.agent, _rest_headers(column, form))
            # the shim forwards X-Api-Key and Authorization only: the internal token is no credential over REST
            _rest_case(run, client, prep, route, label, "internal token header", "401", "alfred", {INTERNAL_TOKEN_HEADER: token})


# --- gRPC -------------------------------------------------------------------------------


def _grpc_metadata(column: Column, form: str) -> tuple[tuple[str, str], ...]:
    if column.key is None:
        return ()
    key = KEYS[column.key]
    return (("x-api-key", key),) if form == "x-api-key" else (("authorization", f"Bearer {key}"),)


def _grpc_case(run: Run, prep: Prep, method: Any, stub: Any, column: str, expected: str, agent: str,
               metadata: tuple[tuple[str, str], ...]) -> None:
    request = message_factory.GetMessageClass(method.input_type)(**request_fields(prep, method, agent, ready=expected == "allowed"))
    call = getattr(stub, method.name)
    start = time.perf_counter()
    try:
        if method.server_streaming:  # WatchDirectives: allowed means the first (pending) directive arrives
            stream = call(request, metadata=metadata, timeout=20)
            next(stream)
            stream.cancel()
        else:
            call(request, metadata=metadata, timeout=60)
        code = grpc.StatusCode.OK
        detail = ""
    except grpc.RpcError as err:
        code, detail = err.code(), err.details() or ""
    ms = (time.perf_counter() - start) * 1000
    fatal = code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED)
    if expected == "allowed":
        ok = not fatal and code not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
    else:
        ok = code == GRPC_CODES[expected]
    got = code.name if ok else f"{code.name} {detail[:90]}"
    run.outcomes.append(Outcome("gRPC", method.full_name.removeprefix("gateway.v1."), column, expected, got, ms, ok,
                                code == grpc.StatusCode.OK, fatal))


def _grpc_matrix(run: Run, prep: Prep) -> None:
    token = read_internal_token(run.suite.home)
    channels: dict[str, grpc.Channel] = {}
    try:
        for method, stub_class in all_methods():
            backend = {"WorkspaceFiles": "file_api", "Knowledge": "kb", "Sessions": "watcher", "Dreaming": "dreaming"}[
                method.containing_service.name]
            if backend not in channels:
                channels[backend] = grpc.insecure_channel(run.suite.address(backend))
            stub = stub_class(channels[backend])
            for column in COLUMNS:
                expected = _expected(column, method.full_name)
                for form in FORMS if column.key else FORMS[:1]:
                    name = f"{column.name} ({form})" if column.key else column.name
                    _grpc_case(run, prep, method, stub, name, expected, column.agent, _grpc_metadata(column, form))
            _grpc_case(run, prep, method, stub, "internal token", "allowed", "alfred", ((INTERNAL_TOKEN_HEADER, token),))
            _grpc_case(run, prep, method, stub, "wrong internal token", "401", "alfred", ((INTERNAL_TOKEN_HEADER, WRONG_TOKEN),))
    finally:
        for channel in channels.values():
            channel.close()


# --- MCP --------------------------------------------------------------------------------


def _text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def _mcp_probes(run: Run, http: httpx.Client) -> None:
    home = run.suite.home
    bob_memory = workspace(run.suite, "bob") / "MEMORY.md"
    memory = workspace(run.suite, "alfred") / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "bob-link.md").symlink_to(bob_memory)
    (memory / "bob-dir").symlink_to(bob_memory.parent, target_is_directory=True)
    bob_note = "bob shared checklist"
    control = http.get("/api/v1/agents/bob/memory:search", params={"query": "zanzibar", "refresh": "true"},
                       headers={"X-Api-Key": KEYS["bob-writer"]})
    assert "quokka" in control.text, control.text  # bob's secret is indexed and findable: by bob
    created = http.post("/api/v1/agents/bob/shared/notes", headers={"X-Api-Key": KEYS["bob-writer"]},
                        json={"name": bob_note, "content": "# Checklist\n\n- shared by bob for every agent\n", "confirm": True})
    assert created.status_code == 200, created.text

    def held(probe: str, ok: bool, detail: str) -> None:
        run.mcp.append((probe, ok, detail[:120].replace("\n", " ")))

    async with mcp_session(home, agent="alfred") as session:
        got = await session.call_tool("memory_get", {"path": "MEMORY.md"})
        held("memory_get MEMORY.md reads alfred's own file", not got.is_error and ALFRED_PHRASE in _text(got), _text(got))
        for path in (
            "../../bob/workspace/MEMORY.md",
            "memory/../../../bob/workspace/MEMORY.md",
            str(bob_memory),
            "//" + str(bob_memory).lstrip("/"),
            "..\\..\\bob\\workspace\\MEMORY.md",
            "%2e%2e/%2e%2e/bob/workspace/MEMORY.md",
            "memory/bob-link.md",
            "memory/bob-dir/MEMORY.md",
            "agents/bob/workspace/MEMORY.md",
            "memory/../../../bob/workspace/MEMORY.md\x00.md",
        ):
            result = await session.call_tool("memory_get", {"path": path})
            held(f"memory_get {path!r} is refused", result.is_error and BOB_SECRET not in _text(result), _text(result))
        for corpus in ("memory", "all", "shared"):  # the reply echoes the query: a hit would show "quokka" in its snippet
            found = await session.call_tool("memory_search", {"query": "zanzibar", "corpus": corpus, "refresh": True})
            held(f"memory_search corpus={corpus} finds nothing of bob's", "quokka" not in _text(found), _text(found))
        smuggled = await session.call_tool("memory_search", {"query": "zanzibar", "agent_id": "bob", "refresh": True})
        held("memory_search with an agent_id argument still searches alfred only", "quokka" not in _text(smuggled), _text(smuggled))
        own = await session.call_tool("memory_search", {"query": "lighthouse logbook"})
        held("memory_search finds alfred's own memory", "lighthouse" in _text(own), _text(own))
        shared = await session.call_tool("memory_shared_get", {"name": bob_note})
        held("memory_shared_get reads a note bob shared", not shared.is_error and "shared by bob" in _text(shared), _text(shared))
        made = await session.call_tool("memory_shared_create", {"name": "alfred mcp note", "content": "# From alfred\n\n- written through MCP\n", "confirm": True})
        held("memory_shared_create writes to the shared vault", not made.is_error, _text(made))
        updated = await session.call_tool("memory_shared_update", {"name": "alfred mcp note", "content": "# From alfred\n\n- written through MCP\n- and updated\n"})
        held("memory_shared_update updates it", not updated.is_error, _text(updated))
        seen = http.get("/api/v1/agents/bob/shared/notes/alfred%20mcp%20note", headers={"X-Api-Key": KEYS["bob-writer"]})
        held("bob reads alfred's MCP note over REST", seen.status_code == 200 and "and updated" in seen.json()["content"], seen.text)
        gone = await session.call_tool("memory_shared_delete", {"name": "alfred mcp note"})
        held("memory_shared_delete deletes it", not gone.is_error, _text(gone))


# --- the run ----------------------------------------------------------------------------


def _configure(home: Path, reply_file: Path) -> None:
    config = json.loads((home / "config.json").read_text())
    config["gateway"]["api"]["keys"] = [
        {"name": "reader", "key": KEYS["reader"], "agents": ["alfred"], "write": False},
        {"name": "admin", "keySha256": hashlib.sha256(KEYS["admin"].encode()).hexdigest(), "agents": "*", "write": True},
        {"name": "bob-writer", "keySha256": hashlib.sha256(KEYS["bob-writer"].encode()).hexdigest(), "agents": ["bob"], "write": True},
        {"name": "carol", "key": KEYS["carol"], "agents": ["carol"], "write": True},
    ]
    command = reviewer("reply.py", reply_file)
    config["agents"] = [{"id": "alfred", "dreaming": dreaming(command)}, {"id": "bob", "dreaming": dreaming(command)}]
    (home / "config.json").write_text(json.dumps(config, indent=2))
    for agent, line in (("alfred", ALFRED_PHRASE), ("bob", BOB_SECRET)):
        folder = home / "agents" / agent / "workspace"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "MEMORY.md").write_text(f"# Memory\n\n- {line}\n")
        (folder / "SOUL.md").write_text(f"# Soul\n\n{agent} is careful.\n")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One suite for the module; every case of every transport run once, in order."""
    tmp = tmp_path_factory.mktemp("auth")
    home, ports, http_port = make_home(tmp)
    reply_file = tmp / "reply.json"
    reply_file.write_text(json.dumps({"summary": "nothing to change", "proposals": []}))
    _configure(home, reply_file)
    suite = Suite(home, http_port, ports)
    try:
        suite.start("file_api", "watcher", "kb", "dreaming", "http")
        run = Run(suite)
        prep = Prep(home, {name: suite.address(name) for name in ("file_api", "watcher", "kb", "dreaming")}, reply_file)
        try:
            for agent in ("alfred", "bob"):
                prep.pending_directive(agent)
            _rest_matrix(run, prep)
            _grpc_matrix(run, prep)
        finally:
            prep.close()
        with httpx.Client(base_url=suite.base_url, timeout=60) as http:
            anyio.run(_mcp_probes, run, http)
        yield run
    finally:
        suite.stop_all()


def test_every_rpc_has_an_access_level() -> None:
    """ACCESS names exactly the RPCs of the descriptors: a new RPC is classified read or write before it ships."""
    names = {method.full_name for method, _ in all_methods()}
    assert names - set(ACCESS) == set(), "classify these RPCs in auth_matrix_support.ACCESS"
    assert set(ACCESS) - names == set(), "these RPCs are gone: drop them from ACCESS"


def test_rest_matrix(matrix: Run) -> None:
    bad = matrix.mismatches("REST")
    assert not bad, "REST auth mismatches:\n" + table(bad)


def test_grpc_matrix(matrix: Run) -> None:
    bad = matrix.mismatches("gRPC")
    assert not bad, "gRPC auth mismatches:\n" + table(bad)


def test_mcp_acts_for_its_agent_only(matrix: Run) -> None:
    failed = [(probe, detail) for probe, ok, detail in matrix.mcp if not ok]
    assert not failed, "MCP probes that did not hold:\n" + "\n".join(f"- {p}: {d}" for p, d in failed)


def test_keys_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """identify() compares SHA-256 digests with hmac.compare_digest, against every key (no early exit)."""
    seen: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(gateway.auth.hmac, "compare_digest", recording)
    keys = [ApiKey(hashlib.sha256(k.encode()).digest(), None, True, n) for n, k in KEYS.items() if n != "wrong"]
    auth = Authenticator(keys, "the-token")
    assert auth.identify([("x-api-key", KEYS["reader"])]).label == "reader"  # the first key matches ...
    assert len(seen) == len(keys)  # ... and every other key is still compared
    assert all(len(a) == len(b) == 32 for a, b in seen)  # digests, never the key itself
    seen.clear()
    auth.identify([("authorization", f"Bearer {KEYS['carol']}")])
    assert len(seen) == len(keys)
    seen.clear()
    auth.identify([(INTERNAL_TOKEN_HEADER, "the-token")])
    assert seen == [(hashlib.sha256(b"the-token").digest(), hashlib.sha256(b"the-token").digest())]


def _secrets(home: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in [*KEYS.items(), ("internal token", read_internal_token(home)), ("wrong internal token", WRONG_TOKEN)]:
        digest = hashlib.sha256(value.encode()).hexdigest()
        out.update({name: value, f"sha256({name})": digest, f"SHA256({name})": digest.upper()})
    return out


def test_no_secret_in_any_log(matrix: Run) -> None:
    """Every log of the run (each service's, the MCP server's): no key, token, SHA-256 hex, or 8-char prefix of one.

    Every other file of the home but config.json (which holds keys and hashes by design) and
    .internal-token is searched for the whole secrets too. Then the figures go to the hardening table.
    """
    home = matrix.suite.home
    secrets_ = _secrets(home)
    logs = sorted(home.rglob("*.log"))
    assert {p.name for p in logs} >= {"file_api.log", "watcher.log", "kb.log", "dreaming.log", "http.log", "mcp.log"}
    assert any(re.search(r'"event":\s*"rpc"', p.read_text()) for p in logs)  # the rpc log was on
    found = []
    for path in logs:
        text = path.read_text(errors="replace")
        for name, value in secrets_.items():
            for shown, needle in ((name, value), (f"{name}[:8]", value[:8])):
                if needle in text:
                    found.append(f"{path.relative_to(home)}: {shown}")
    for path in sorted(p for p in home.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix != ".log"):
        if path.name.startswith("config.json") or path.name == ".internal-token":
            continue
        data = path.read_bytes()
        found += [f"{path.relative_to(home)}: {name}" for name, value in secrets_.items() if value.encode() in data]
    assert not found, "secrets found in the home:\n" + "\n".join(found)

    cases = matrix.outcomes
    rest = sorted({o.what for o in cases if o.transport == "REST"})
    rpcs = sorted({o.what for o in cases if o.transport == "gRPC"})
    allowed = [o for o in cases if o.expected == "allowed"]
    unsucceeded = sorted({f"{o.transport} {o.what}" for o in allowed if not o.succeeded})
    errors_5xx = sum(1 for o in cases if o.fatal)
    unexpected = sum(1 for o in cases if not o.ok) + sum(1 for _, ok, _ in matrix.mcp if not ok)
    per_rest = sum(1 for o in cases if o.transport == "REST" and o.what == rest[0])
    per_grpc = sum(1 for o in cases if o.transport == "gRPC" and o.what == rpcs[0])
    record(
        "auth matrix",
        inputs=len(cases) + len(matrix.mcp),
        errors_5xx=errors_5xx,
        longest_ms=round(max(o.ms for o in cases), 1),
        notes=(f"REST {len(rest)} routes × {per_rest} cases, gRPC {len(rpcs)} methods × {per_grpc} cases "
               "(the 6 key kinds, the unknown agent with a * and with a scoped key, each key as X-Api-Key and as Bearer; "
               "internal token: gRPC accepts it, a wrong one is 401, REST does not forward it), "
               f"MCP {len(matrix.mcp)} probes; {sum(1 for o in allowed if o.succeeded)} of {len(allowed)} allowed cases "
               f"succeeded (not: {', '.join(unsucceeded) or 'none'}); {unexpected} unexpected; no secret in any log"),
    )
