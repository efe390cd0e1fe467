"""The examples of the README, docs/getting-started.md and docs/how-to/*.md, run against real processes.

Every fenced block of those pages that is a command (``sh``, ``console``) or an MCP set-up
(a ``json`` block with ``mcpServers``), or that has no language at all, is either run by one of the
``example`` functions below or named in ``SKIPPED`` with the reason; ``test_every_example_is_run_or_skipped``
fails on any other, so a new example cannot be added without being run or listed. Output shown as
such is fenced ``text``.

The examples run as a reader follows the pages, from the root of a repo checkout made in a
temporary folder: ``.venv/bin/gateway`` (this interpreter, running this checkout's code), and two
homes with a suite running on each: ``var/demo`` as ``make demo`` seeds it (the README's tour and
the dreams guide) and ``var/gateway`` as a first ``make up`` writes it (the getting-started guide
and most how-to guides). Only what must differ in a test is rewritten: the REST port 10850 (each
suite has free ports), absolute paths that name a place on the writer's machine (``/srv/…``,
``/backups``, ``/path/to/repo``) and the example ids of a run or a proposal, which the test makes
first. A ``sh`` block runs with ``bash -e -o pipefail``; a ``console`` block runs each ``$`` line and
compares what it prints (stdout and stderr, as on a terminal) with the lines shown under it, where a
generated key, a timestamp and a line ``…`` stand for any.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from docs_examples_support import (
    ANY,
    BASE_PATH,
    DOC_PORT,
    PAGES,
    ROOT,
    STAND_INS,
    Block,
    Tour,
    blocks,
    json_values,
    launch,
    memory,
    place_on_free_ports,
    shown_answers,
    suite_of,
)
from mcp import ClientSession, StdioServerParameters, stdio_client
from suite_support import START_DEADLINE_S, Suite, wait_until

from gateway.home import ensure_home

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("curl") is None, reason="the documented examples are curl commands: without curl they cannot run as written"),
]

TOOLS = {"memory_search", "memory_get", "memory_shared_create", "memory_shared_get", "memory_shared_update", "memory_shared_delete"}
SOUL = "# Soul\n\nAlfred is warm, helpful, and precise."
SOUL_SHA256 = hashlib.sha256(SOUL.encode()).hexdigest()
SOUL_ANSWERS = [  # the PUT and the GET of SOUL.md, as the pages show them
    {"filename": "SOUL.md", "message": "File saved. CLAUDE.md will auto-reload.", "sha256": SOUL_SHA256, "warnings": []},
    {"filename": "SOUL.md", "content": SOUL, "sha256": SOUL_SHA256},
]


# --- what runs, what does not ---------------------------------------------------------------------

SKIPPED: dict[tuple[str, str], str] = {
    ("README.md", "gateway vault reflect --project team --mode propose"): "needs a vault of notes worth merging and a "
    "reviewer; tests/integration/test_vault_reflection.py runs reflect, accept and revert against real processes",
    ("README.md", "make up     # creates .venv"): "make up runs the suite in the foreground until Ctrl-C, and make test runs every test, this one included",
    ("docs/getting-started.md", "make up     # creates .venv"): "the same block as the README's: make up blocks, make test runs every test",
    ("docs/how-to/docker-compose.md", "docker compose up -d"): "needs a Docker engine and host port 10850; tests/integration/test_compose_stack.py brings the stack up, "
    "reads the admin key from the init logs and calls the REST API where there is one",
    ("docs/how-to/kubernetes.md", "kubectl create namespace claude-gateway"): "needs a Kubernetes cluster; "
    "tests/unit/test_kubernetes_*.py render and validate what it applies and run its init container's script and probe",
    ("docs/how-to/kubernetes.md", "get configmap gateway-hosts"): "needs a Kubernetes cluster; "
    "tests/unit/test_kubernetes_consistency.py checks the agents table's hosts against the StatefulSet's pod names",
    ("docs/how-to/kubernetes.md", "label pod my-runner"): "needs a Kubernetes cluster; "
    "tests/unit/test_kubernetes_consistency.py checks the NetworkPolicy's ports",
    ("docs/how-to/kubernetes.md", "cat > /tmp/owner.dsn"): "needs a Kubernetes cluster and a PostgreSQL with the "
    "vault's two roles; tests/integration/test_vault_postgres_roles.py runs gateway vault migrate with the owner's DSN",
    ("docs/how-to/dreams.md", "$ gateway dream explain"): "the history of an entry the staleness GC moved a year after it was written; "
    "tests/integration/test_dreaming_staleness.py runs explain on such an entry",
    ("docs/how-to/dreams.md", "$ gateway dream alfred\n"): "the report of a model reviewer's run (a remove, a replace, two guards); "
    "the stand-in reviewer only adds, and the guards have tests of their own",
}


@dataclass
class Example:
    name: str
    pages: tuple[str, ...]
    marker: str
    run: Callable[[Tour, str], None]


EXAMPLES: list[Example] = []


def example(marker: str, *pages: str) -> Callable[[Callable[[Tour, str], None]], Callable[[Tour, str], None]]:
    """Register a function that runs the block of ``pages`` holding ``marker`` (the same text on each page).
    The examples run in the order they are registered, on the state the ones before left."""
    def register(fn: Callable[[Tour, str], None]) -> Callable[[Tour, str], None]:
        EXAMPLES.append(Example(fn.__name__, pages, marker, fn))
        return fn
    return register


def matches(block: Block) -> list[str]:
    """What claims ``block``: the names of the examples that run it and the skips that list it."""
    claims = [e.name for e in EXAMPLES if block.page in e.pages and e.marker in block.text]
    claims += [f"skipped: {marker!r}" for (page, marker) in SKIPPED if page == block.page and marker in block.text]
    return claims


def the_block(ex: Example) -> str:
    texts = {b.text for page in ex.pages for b in blocks(page) if b.checked and ex.marker in b.text}
    assert len(texts) == 1, f"{ex.name}: {len(texts)} different blocks of {ex.pages} hold {ex.marker!r}"
    return texts.pop()


def test_every_example_is_run_or_skipped() -> None:
    problems = []
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "":
                problems.append(f"{page}:{block.line}: a fence without a language: ```console for commands with their "
                                "output, ```sh for commands, ```text for output")
                continue
            if not block.checked:
                continue
            claims = matches(block)
            if len(claims) != 1:
                problems.append(f"{page}:{block.line}: ```{block.lang} block claimed by {claims or 'nothing'}: run it in "
                                "an example of tests/integration/test_docs_examples.py or name it in SKIPPED with the reason")
    for ex in EXAMPLES:
        for page in ex.pages:
            if not any(b.checked and ex.marker in b.text for b in blocks(page)):
                problems.append(f"example {ex.name}: no block of {page} holds {ex.marker!r}")
    for (page, marker) in SKIPPED:
        if not any(b.checked and marker in b.text for b in blocks(page)):
            problems.append(f"SKIPPED: no block of {page} holds {marker!r}")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tour]:
    tmp = tmp_path_factory.mktemp("docs")
    repo = tmp / "repo"
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    # The gateway command of this checkout: this interpreter, importing this checkout's code first.
    (venv_bin / "gateway").write_text(
        f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -m gateway_cli.cli "$@"\n')
    (venv_bin / "gateway").chmod(0o755)
    shims = tmp / "stand-ins"
    shims.mkdir()
    for name, script in STAND_INS.items():
        if shutil.which(name, path=BASE_PATH) is None:
            (shims / name).write_text(script)
            (shims / name).chmod(0o755)

    demo = repo / "var" / "demo"  # make demo: examples/demo-config.json, mode 0600
    demo.mkdir(parents=True)
    shutil.copyfile(ROOT / "examples" / "demo-config.json", demo / "config.json")
    place_on_free_ports(demo)
    ensure_home(demo)
    gateway = repo / "var" / "gateway"  # make up's first start: one agent, one admin key in admin-key.txt
    ensure_home(gateway)
    place_on_free_ports(gateway)
    admin_key = (gateway / "admin-key.txt").read_text().splitlines()[-1]

    suites = [suite_of(demo), suite_of(gateway)]
    try:
        launch(suites)
        yield Tour(repo, tmp, suites[0], suites[1], admin_key, base_path=f"{shims}:{BASE_PATH}")
    finally:
        for suite in suites:
            suite.stop_all()


def test_example(tour: Tour, ex: Example) -> None:
    ex.run(tour, the_block(ex))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "ex" in metafunc.fixturenames:
        metafunc.parametrize("ex", EXAMPLES, ids=[e.name for e in EXAMPLES])


# --- the README's tour, on var/demo -------------------------------------------------------------


@example('"content": "# Soul', "README.md")
def readme_write_and_read_soul(tour: Tour, block: str) -> None:
    out = tour.sh(block, tour.demo)
    assert json_values(out) == shown_answers(block) == SOUL_ANSWERS, out


@example("grep -A 3 -- '--- SOUL.md ---'", "README.md")
def readme_claude_md_changed(tour: Tour, block: str) -> None:
    claude = tour.demo.home / "agents" / "alfred" / "workspace" / "CLAUDE.md"
    wait_until(lambda: claude.exists() and "Alfred is warm" in claude.read_text(), 15, "the watcher to compose CLAUDE.md")
    out = tour.sh(block, tour.demo)
    assert out.startswith("--- SOUL.md ---\n") and "Alfred is warm, helpful, and precise." in out, out


@example("memory:search?query=deploy%20key", "README.md")
def readme_search_memory(tour: Tour, block: str) -> None:
    saved, found = json_values(tour.sh(block, tour.demo))
    assert saved == {"filename": "MEMORY.md", "message": "File saved. CLAUDE.md will auto-reload.", "sha256": saved["sha256"],
                     "warnings": []}
    assert any("The deploy key is in vault A." in hit["snippet"] for hit in found["hits"]), found


def mcp_over_http(tour: Tour, block: str, suite: Suite, env: dict[str, str]) -> None:
    """What a runtime does with an ``http`` server of .mcp.json: ask for the tools at its url, with its headers."""
    [server] = json.loads(block.replace(DOC_PORT, str(suite.http_port)))["mcpServers"].values()
    assert server["type"] == "http"
    headers = {name: re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], value) for name, value in server["headers"].items()}
    reply = httpx.post(server["url"], headers={**headers, "Accept": "application/json, text/event-stream"}, timeout=30,
                       json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert reply.status_code == 200, reply.text
    assert {tool["name"] for tool in reply.json()["result"]["tools"]} == TOOLS


@example('"type": "http"', "README.md")
def readme_mcp_json(tour: Tour, block: str) -> None:
    # "with `GATEWAY_API_KEY=admin-key-456` in its environment"
    [key] = re.findall(r"`GATEWAY_API_KEY=([^`]+)` in its environment", (ROOT / "README.md").read_text(encoding="utf-8"))
    mcp_over_http(tour, block, tour.demo, {"GATEWAY_API_KEY": key})


@example("gateway dream accept alfred p-410fe80f4270\n", "README.md", "docs/how-to/dreams.md")
def dream_with_the_stand_in_then_accept(tour: Tour, block: str) -> None:
    out = tour.sh(block, None)
    assert out.startswith('[\n  "gateway",\n  "reviewer",\n  "stand-in"\n]\n'), out
    assert "(auto, manual): applied" in out and "(propose, manual)" in out, out
    assert "p-410fe80f4270" in out, out
    assert memory(tour.demo).count("- The harbour office opens at 7.") == 1
    assert out.rstrip().endswith("- Jan prefers email over phone."), out


@example("memory:forget", "README.md")
def readme_forget(tour: Tour, block: str) -> None:
    out = tour.sh(block, tour.demo)
    assert out.startswith("alfred: forgot in the agent's files and archive:") and "  workspace: MEMORY.md: 1" in out, out
    assert out.rstrip().endswith("1") and "deploy key" not in out, out
    assert "deploy key" not in memory(tour.demo) and "[forgotten F-" in memory(tour.demo)


# --- getting started, on var/gateway ------------------------------------------------------------


@example("gateway compose alfred", "docs/getting-started.md")
def getting_started_gateway_command(tour: Tour, block: str) -> None:
    out = tour.sh(block, None)
    assert "--- MEMORY RULE ---" in out, out  # compose printed alfred's CLAUDE.md
    assert re.search(r"^alfred +" + re.escape(str(tour.gw.home / "agents" / "alfred" / "workspace")) + "$", out, re.M), out
    assert re.search(r"^admin +\* +write +sha256$", out, re.M), out


@example("export KEY=$(tail -n 1 var/gateway/admin-key.txt)", "docs/getting-started.md")
def getting_started_try_the_api(tour: Tour, block: str) -> None:
    out = tour.sh(block, tour.gw)
    assert json_values(out) == shown_answers(block) == SOUL_ANSWERS, out


# --- how-to guides ------------------------------------------------------------------------------


@example("$ gateway keys confirm ", "docs/how-to/agents-and-keys.md")
def agents_and_keys_session(tour: Tour, block: str) -> None:
    tour.console(block, tour.env(tour.gw), {"/srv/claude-gateway": str(tour.repo)})
    config = json.loads((tour.gw.home / "config.json").read_text())
    assert [a["id"] for a in config["agents"]] == ["alfred", "bob"]
    assert [k["name"] for k in config["gateway"]["api"]["keys"]] == ["admin", "bob-writer"]


@example("$ seq -f 'agent-%03g' 1 999", "docs/how-to/agents-and-keys.md")
def agents_and_keys_many_at_once(tour: Tour, block: str) -> None:
    home = tour.tmp / "gw-many"  # a home of its own: no running suite reloads 999 agents
    ensure_home(home)
    tour.console(block, tour.env(**{"GATEWAY_HOME": str(home), "PATH": f"{tour.repo}/.venv/bin:{tour.base_path}"}), {"/srv/gw": str(home)})
    assert len(json.loads((home / "config.json").read_text())["agents"]) == 1000


@example("gateway backup /backups/gw-monday", "docs/how-to/backup-restore.md")
def backup_while_running(tour: Tour, block: str) -> None:
    (tour.tmp / "backups").mkdir()  # the page's /backups: a folder that exists (a mounted disk), outside the home
    tour.sh(block.replace("/backups", str(tour.tmp / "backups")), tour.gw, tour.env(tour.gw))
    listed = json.loads((tour.tmp / "backups" / "gw-monday" / "backup.json").read_text())
    assert "config.json" in json.dumps(listed)


@example("gateway vault export --project global", "docs/how-to/move-vault.md")
def vault_export_while_running(tour: Tour, block: str) -> None:
    notes = tour.gw.home / "shared" / "kb" / "global" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "moving day.md").write_text("# Moving day\n- The vault moves with gateway vault export.\n")
    (tour.tmp / "backups").mkdir(exist_ok=True)
    out = tour.sh(block.replace("/backups", str(tour.tmp / "backups")), tour.gw, tour.env(tour.gw))
    assert out.startswith("exported vault 'global'"), out
    listed = json.loads((tour.tmp / "backups" / "vault-global" / "manifest.json").read_text())
    assert "notes/moving day.md" in listed["files"]


@example("gateway vault import --project global", "docs/how-to/move-vault.md")
def vault_import_into_the_same_vault(tour: Tour, block: str) -> None:
    out = tour.sh(block.replace("/backups", str(tour.tmp / "backups")), tour.gw, tour.env(tour.gw))
    assert " 0 notes written, " in out and " 0 skipped" in out, out  # every note is there already: nothing to do


@example('"type": "http"', "docs/how-to/connect-mcp.md")
def connect_mcp_over_http(tour: Tour, block: str) -> None:
    page = (ROOT / "docs" / "how-to" / "connect-mcp.md").read_text(encoding="utf-8")
    [make_key] = re.findall(r"`(export GATEWAY_API_KEY=\$\(gateway keys add [^`]*\))`", page)
    key = tour.sh(make_key + '\necho "$GATEWAY_API_KEY"', None, tour.env(tour.gw)).strip()
    assert re.fullmatch(ANY["key"], key), key
    mcp_over_http(tour, block, tour.gw, {"GATEWAY_API_KEY": key})


@example('"type": "stdio"', "docs/how-to/connect-mcp.md")
def connect_mcp_over_stdio(tour: Tour, block: str) -> None:
    [server] = json.loads(block.replace("/path/to/repo", str(tour.repo)))["mcpServers"].values()

    async def list_tools() -> set[str]:
        params = StdioServerParameters(command=server["command"], args=server["args"], env=tour.env())
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return {tool.name for tool in (await session.list_tools()).tools}

    assert asyncio.run(asyncio.wait_for(list_tools(), 60)) == TOOLS


@example("method\": \"tools/list\"", "docs/how-to/connect-mcp.md")
def connect_mcp_check_the_endpoint(tour: Tour, block: str) -> None:
    out = tour.sh(block, tour.gw, tour.env(KEY=tour.admin_key))
    for tool in TOOLS:
        assert f'"name":"{tool}"' in out.replace(" ", ""), out


@example("gateway config set gateway.dreaming.reviewerCommand '[\"gateway\",\"reviewer\",\"stand-in\"]'\n", "docs/how-to/dreams.md")
def dreams_set_the_stand_in(tour: Tour, block: str) -> None:
    tour.sh(block, None, tour.env(tour.gw))  # "on the home of make up, or any other"
    assert json.loads((tour.gw.home / "config.json").read_text())["gateway"]["dreaming"]["reviewerCommand"] == [
        "gateway", "reviewer", "stand-in"]


@example("http://localhost:10850/api/v1/agents | jq", "docs/how-to/console.md")
def console_list_agents(tour: Tour, block: str) -> None:
    [listed] = json_values(tour.sh(block, tour.demo))
    [alfred] = listed["agents"]  # "it sees alfred only, and may not write"
    assert alfred["agentId"] == "alfred" and alfred["writable"] is False, listed
    assert [f["name"] for f in alfred["files"]] == ["MEMORY.md", "USER.md", "CLAUDE.md"], listed


@example("curl -sI http://localhost:10850/ui/", "docs/how-to/console.md")
def console_headers(tour: Tour, block: str) -> None:
    out = tour.sh(block, tour.demo).lower()
    page = (ROOT / "docs" / "how-to" / "console.md").read_text(encoding="utf-8")
    [policy] = re.findall(r"\| `Content-Security-Policy` \| `([^`]+)`", page)
    assert out.startswith("http/1.1 200") and f"content-security-policy: {policy.lower()}" in out, out
    assert "x-content-type-options: nosniff" in out and "referrer-policy: no-referrer" in out, out


NEW_NOTES = ("The ferry leaves at noon on Sundays.", "Mara keeps the spare keys.")


@example("gateway config set agents.alfred.dreaming.mode propose", "docs/how-to/dreams.md")
def dreams_propose(tour: Tour, block: str) -> None:
    # A later session with two things to remember, so that there is something to propose; the tour's
    # transcript is a month old by then, out of the lookback window (the stand-in would propose its
    # lines again, skipped as applied but counted against maxChangesPerRun).
    sessions = tour.demo.home / "agents" / "alfred" / "sessions"
    month_ago = time.time() - 30 * 86400
    os.utime(sessions / "today.jsonl", (month_ago, month_ago))
    with open(sessions / "later.jsonl", "w") as transcript:
        for note in NEW_NOTES:
            transcript.write(json.dumps({"type": "user", "message": {"role": "user", "content": f"REMEMBER: {note}"}}) + "\n")
    before = memory(tour.demo)
    out = tour.sh(block, None, tour.env(tour.demo))
    assert "(propose, manual)" in out, out
    ids = []
    for note in NEW_NOTES:
        proposed = re.search(re.escape(note) + r".*\[(p-[0-9a-f]{12})\]", out)
        assert proposed, (note, out)
        ids.append(proposed.group(1))
    assert memory(tour.demo) == before
    tour.state["proposals"] = ids


@example("gateway dream status alfred\n", "docs/how-to/dreams.md")
def dreams_status(tour: Tour, block: str) -> None:
    out = tour.sh(block, None, tour.env(tour.demo))
    assert all(pid in out for pid in tour.state["proposals"]), out


@example("gateway dream accept alfred p-410fe80f4270 p-220c4f3b9474", "docs/how-to/dreams.md")
def dreams_accept(tour: Tour, block: str) -> None:
    first, second = tour.state["proposals"]  # the page's ids are examples: accept the two just proposed
    out = tour.sh(block.replace("p-410fe80f4270", first).replace("p-220c4f3b9474", second), None, tour.env(tour.demo))
    assert all(f"- {note}" in memory(tour.demo) for note in NEW_NOTES), (out, memory(tour.demo))
    [run_id] = set(re.findall(r"^dream (\S+) for alfred", out, re.M))
    tour.state["accept_run"] = run_id


@example("gateway dream revert alfred 20261201T143303Z-baa9dc ", "docs/how-to/dreams.md")
def dreams_revert(tour: Tour, block: str) -> None:
    out = tour.sh(block.replace("20261201T143303Z-baa9dc", tour.state["accept_run"]), None, tour.env(tour.demo))
    assert out.startswith("reverted "), out
    assert not any(note in memory(tour.demo) for note in NEW_NOTES), memory(tour.demo)
    assert "- Jan prefers email over phone." in memory(tour.demo)


@example("gateway dream reject alfred p-220c4f3b9474", "docs/how-to/dreams.md")
def dreams_reject(tour: Tour, block: str) -> None:
    again = tour.sh("gateway dream alfred\n", None, tour.env(tour.demo))  # reverted: proposed again, pending again
    [pid] = re.findall(re.escape(NEW_NOTES[1]) + r".*\[(p-[0-9a-f]{12})\]", again)
    out = tour.sh(block.replace("p-220c4f3b9474", pid), None, tour.env(tour.demo))
    assert out.startswith("rejected 1 proposal") and pid in out, out
    status = tour.sh("gateway dream status alfred\n", None, tour.env(tour.demo))
    assert pid not in status, status


TASK_LOG = ("# Memory\n\n## Tasks\n" + "".join(f"- [x] calibrated gauge {i} on the north pier\n" for i in range(40))
            + "\n## Harbour log\n" + "".join(f"- 2026-09-{1 + i % 28:02d} tide table check number {i} with Mara\n" for i in range(150)))


@example("gateway migrate-memory var/gateway/agents/alfred/workspace ", "docs/how-to/migrate-memory.md")
def migrate_memory(tour: Tour, block: str) -> None:
    ws = tour.gw.home / "agents" / "alfred" / "workspace"
    (ws / "MEMORY.md").write_text(TASK_LOG)  # far over the default budget of 8,000 characters
    out = tour.sh(block, None, tour.env(tour.gw))
    assert "calibrated gauge 0" in out  # less, on a pipe, printed the plan
    assert len((ws / "MEMORY.md").read_text()) <= 8000
    assert "- [x] calibrated gauge 0 on the north pier" in (ws / "memory" / "archive" / "completed.md").read_text()


@example("$ gateway config check", "docs/how-to/upgrade-config.md")
def upgrade_config(tour: Tour, block: str) -> None:
    home = tour.tmp / "gw-old"  # a config written for 1.0.19, before the archive and staleness blocks
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"configVersion": "1.0.19", "agents": [{"id": "alfred"}]}, indent=2))
    os.chmod(home / "config.json", 0o600)
    tour.console(block, tour.env(**{"GATEWAY_HOME": str(home), "PATH": f"{tour.repo}/.venv/bin:{tour.base_path}"}), {"/srv/gw": str(home)})
    assert json.loads((home / "config.json").read_text())["configVersion"] == "1.0.26"


@example("gateway restore /backups/gw-monday", "docs/how-to/backup-restore.md")
def restore_then_up(tour: Tour, block: str) -> None:
    tour.gw.stop_all()  # "Stop the suite first"; the restored home runs on the same ports
    text = block.replace("/backups", str(tour.tmp / "backups"))
    lines: list[str] = []
    up = subprocess.Popen(["bash", "-e", "-c", text], cwd=tour.repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=tour.env(tour.gw), start_new_session=True)
    assert up.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in up.stdout), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: any(line.startswith("ready ") for line in lines) or up.poll() is not None, START_DEADLINE_S,
                   "the restored suite's ready line")
        [url] = [line.split(" ", 1)[1] for line in lines if line.startswith("ready ")]
        got = httpx.get(f"{url}/api/v1/agents/alfred/files/SOUL.md", headers={"X-Api-Key": tour.admin_key}, timeout=10)
        assert got.json() == {"filename": "SOUL.md", "content": SOUL, "sha256": SOUL_SHA256}, got.text
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGINT)  # Ctrl-C
        up.wait(timeout=30)
        reader.join(timeout=5)
        up.stdout.close()
    assert lines[0].startswith("restored ") and (tour.repo / "var" / "gateway-restored" / "config.json").exists(), lines[:3]
    assert up.returncode == 0 and lines[-1] == "gateway: stopped", (up.returncode, lines[-5:])  # Ctrl-C stops it cleanly
