"""Helpers of the dreaming integration tests: agents' dreaming settings, scripted reviewers,
runs over REST and the CLI, and reading what a run left (audit, journal, DREAMS.md, pruned.md).

Everything runs against real processes (``suite_support.Suite``); nothing here is mocked.
Reviewers are the scripts of ``tests/reviewers`` (see its README), run by the dreaming
process with the interpreter running the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from suite_support import ADMIN_KEY, Suite, make_home, poll_get, wait_until, workspace

REVIEWERS = Path(__file__).resolve().parents[1] / "reviewers"
PRUNED = "memory/archive/pruned.md"
CLI_TIMEOUT_S = 90.0
RUN_TIMEOUT_S = 30.0  # what a test waits for a REST reply (the slowest run here takes about 11 s)


def reviewer(script: str, *args: str | Path) -> list[str]:
    """The reviewerCommand running ``tests/reviewers/<script>`` with ``args``."""
    return [sys.executable, str(REVIEWERS / script), *(str(a) for a in args)]


def slot_at(moment: datetime) -> dict[str, int]:
    """Settings that make ``moment`` (UTC, to the minute) an agent's exact nightly slot."""
    moment = moment.astimezone(UTC)
    return {"dreamHour": moment.hour, "dreamMinute": moment.minute, "staggerWindowMinutes": 0}


def far_slot() -> dict[str, int]:
    """A slot 12 h away: neither due nor inside the 6 h catch-up window while a test runs,
    so only RunNow makes an agent dream."""
    return slot_at(datetime.now(UTC) + timedelta(hours=12))


def dreaming(command: Sequence[str], **settings: Any) -> dict[str, Any]:
    """An agent's ``dreaming`` block: on, auto mode, a far slot, ``command`` as the reviewer."""
    return {"enabled": True, "mode": "auto", **far_slot(), "maxChangesPerRun": 10, "reviewerTimeoutSeconds": 30,
            "reviewerCommand": list(command), **settings}


def replies(home: Path) -> Path:
    """Where the tests keep the reviewers' reply files (outside every workspace)."""
    folder = home / "replies"
    folder.mkdir(exist_ok=True)
    return folder


def write_reply(path: Path, proposals: Sequence[dict[str, Any]], summary: str = "scripted reply") -> None:
    path.write_text(json.dumps({"summary": summary, "proposals": list(proposals)}), encoding="utf-8")


def remove(target: str, file: str = "MEMORY.md", reason: str = "obsolete") -> dict[str, Any]:
    return {"op": "remove", "file": file, "target": target, "reason": reason}


def replace(target: str, content: str, file: str = "MEMORY.md", reason: str = "outdated") -> dict[str, Any]:
    return {"op": "replace", "file": file, "target": target, "content": content, "reason": reason}


def add(content: str, file: str = "MEMORY.md", reason: str = "learned", **extra: Any) -> dict[str, Any]:
    return {"op": "add", "file": file, "content": content, "reason": reason, **extra}


def start_suite(
    tmp: Path,
    agents: list[dict[str, Any]],
    services: Sequence[str] = ("file_api", "watcher", "kb", "dreaming", "http"),
    files: dict[str, dict[str, str]] | None = None,
    configure: Callable[[dict[str, Any], Suite], None] | None = None,
    **gateway_extra: Any,
) -> Suite:
    """A home with ``agents`` (their workspaces made, ``files[agent]`` written in them) and
    ``services`` started in order. ``configure(config, suite)`` may edit config.json first (it
    knows the ports then). The caller stops the suite (``stop_all``)."""
    home, ports, http_port = make_home(tmp, agents, **gateway_extra)
    if configure is not None:
        config = json.loads((home / "config.json").read_text())
        configure(config, Suite(home, http_port, ports))
        (home / "config.json").write_text(json.dumps(config, indent=2))
    for entry in agents:
        folder = home / "agents" / entry["id"] / "workspace"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in (files or {}).get(entry["id"], {}).items():
            write(folder / name, text)
    running = Suite(home, http_port, ports)
    try:
        running.start(*services)
    except BaseException:
        running.stop_all()
        raise
    return running


def shim_sees(suite: Suite, backend: str) -> bool:
    """Whether the REST shim reaches ``backend`` (its /healthz says SERVING)."""
    try:
        body = poll_get(f"{suite.base_url}/healthz", 2).json()
    except (httpx.HTTPError, ValueError):
        return False
    return bool(body.get("backends", {}).get(backend) == "SERVING")


def restart(suite: Suite, name: str) -> None:
    """Start (or restart) process ``name`` and wait until the REST shim reaches it again
    (its channel may be backing off after the old process went)."""
    if name in suite.procs:
        suite.stop(name)
    suite.start(name)
    if "http" in suite.procs:
        wait_until(lambda: shim_sees(suite, name), 15, f"the REST shim to reach {name}")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def read(suite: Suite, agent: str, rel: str) -> str:
    """A workspace file's text; "" when it does not exist."""
    try:
        return (workspace(suite, agent) / rel).read_bytes().decode("utf-8")
    except FileNotFoundError:
        return ""


def snapshot(folder: Path, *, skip: Sequence[str] = (".dreaming",)) -> dict[str, bytes]:
    """Every file under ``folder`` (relative POSIX path → bytes), top-level folders in ``skip`` left out."""
    out: dict[str, bytes] = {}
    for root, dirs, names in os.walk(folder):
        rel_root = Path(root).relative_to(folder)
        if rel_root == Path("."):
            dirs[:] = [d for d in dirs if d not in skip]
        for name in names:
            out[(rel_root / name).as_posix()] = (Path(root) / name).read_bytes()
    return out


# --- calls --------------------------------------------------------------------------------


def client(suite: Suite, key: str | None = ADMIN_KEY) -> httpx.Client:
    headers = {"X-Api-Key": key} if key is not None else {}
    return httpx.Client(base_url=suite.base_url, headers=headers, timeout=RUN_TIMEOUT_S)


def rest_run(suite: Suite, agent: str, mode: str = "", key: str | None = ADMIN_KEY) -> httpx.Response:
    with client(suite, key) as http:
        return http.post(f"/api/v1/agents/{agent}/dream:run", json={"mode": mode} if mode else {})


def run_ok(suite: Suite, agent: str, mode: str = "") -> dict[str, Any]:
    """RunNow over REST, which must answer 200; the DreamReport as JSON."""
    response = rest_run(suite, agent, mode)
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    return report


def rest_status(suite: Suite, agent: str, key: str | None = ADMIN_KEY) -> httpx.Response:
    with client(suite, key) as http:
        return http.get(f"/api/v1/agents/{agent}/dream:status")


def rest_accept(suite: Suite, agent: str, ids: Sequence[str], key: str | None = ADMIN_KEY) -> httpx.Response:
    with client(suite, key) as http:
        return http.post(f"/api/v1/agents/{agent}/dream:accept", json={"ids": list(ids)})


def rest_revert(suite: Suite, agent: str, run_id: str, op_id: str = "", key: str | None = ADMIN_KEY) -> httpx.Response:
    body = {"runId": run_id, **({"opId": op_id} if op_id else {})}
    with client(suite, key) as http:
        return http.post(f"/api/v1/agents/{agent}/dream:revert", json=body)


def put_file(suite: Suite, agent: str, name: str, content: str, key: str = ADMIN_KEY) -> None:
    with client(suite, key) as http:
        response = http.put(f"/api/v1/agents/{agent}/files/{name}", json={"content": content})
    assert response.status_code == 200, response.text


def search(suite: Suite, agent: str, query: str) -> list[dict[str, Any]]:
    """The hits of a REST memory:search (refreshed first: read-your-writes)."""
    with client(suite) as http:
        response = http.get(f"/api/v1/agents/{agent}/memory:search", params={"query": query, "limit": 20, "refresh": "true"})
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json().get("hits", [])
    return hits


def cli(suite: Suite, *words: str) -> subprocess.CompletedProcess[str]:
    """``gateway dream WORDS… --home HOME`` as a subprocess (exit code, stdout, stderr)."""
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "dream", *words, "--home", str(suite.home)],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


# --- what a run left ------------------------------------------------------------------------


def jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def audit(suite: Suite, agent: str) -> list[dict[str, Any]]:
    return jsonl(workspace(suite, agent) / ".dreaming" / "audit.jsonl")


def journal(suite: Suite, agent: str) -> list[dict[str, Any]]:
    return jsonl(workspace(suite, agent) / ".dreaming" / "journal.jsonl")


def run_record(suite: Suite, agent: str, run_id: str) -> dict[str, Any]:
    found = [r for r in audit(suite, agent) if r.get("kind") == "run" and r.get("run") == run_id]
    assert len(found) == 1, found
    return found[0]


def op_records(suite: Suite, agent: str, run_id: str) -> list[dict[str, Any]]:
    return [r for r in audit(suite, agent) if r.get("kind") == "op" and r.get("run") == run_id]


def dreams_entry(suite: Suite, agent: str, run_id: str) -> str:
    """The DREAMS.md entry of ``run_id`` (its heading to the next entry)."""
    text = read(suite, agent, ".dreaming/DREAMS.md")
    for part in text.split("\n## ")[1:]:
        if f"· run {run_id} (" in part.split("\n", 1)[0]:
            return "## " + part
    raise AssertionError(f"no DREAMS.md entry for run {run_id}:\n{text[-2000:]}")


def ops_by_status(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for op in report.get("ops", []):
        out.setdefault(op["status"], []).append(op)
    return out


def backups(suite: Suite, agent: str) -> list[str]:
    folder = workspace(suite, agent) / ".dreaming" / "backups"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


# --- transcripts -----------------------------------------------------------------------------


def transcript_record(role: str, text: str, at: datetime, session: str) -> dict[str, Any]:
    """One Claude Code JSONL record of a user or assistant message."""
    stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
    return {"type": role, "sessionId": session, "timestamp": stamp, "message": {"role": role, "content": text}}


def write_transcript(folder: Path, name: str, messages: Sequence[tuple[str, str]], *, age: timedelta = timedelta(0)) -> Path:
    """``folder/name`` as a Claude Code transcript of ``messages`` ((role, text) pairs), its records
    and mtime ``age`` in the past."""
    at = datetime.now(UTC) - age
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    lines = (json.dumps(transcript_record(role, text, at, name.removesuffix(".jsonl"))) for role, text in messages)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    stamp = at.timestamp()
    os.utime(path, (stamp, stamp))
    return path


def sessions_dir(suite: Suite, agent: str) -> Path:
    """The agent's default transcriptsDir."""
    return suite.home / "agents" / agent / "sessions"


# --- processes -------------------------------------------------------------------------------


def process_gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
