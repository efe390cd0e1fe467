"""The console's Dreams page in headless Chromium against the real suite, with scripted reviewers:
its history and Run now. Revert of one op of an older run from the history, a refused revert showing
the suite's reason with the file's bytes unchanged, and a run in flight shown with its elapsed time and
step while every button is disabled, its report shown when done. Screenshots in
``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import MISSING, Tab, available
from dreaming_support import add, dreaming, replace, reviewer, start_suite, write_reply
from dreams_page_support import RUN_TIMEOUT_S, open_dreams, settled
from suite_support import ADMIN_KEY, Suite, workspace

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

# The ferry line stands far (more than the journal's context) from the end, where later adds go,
# so an older run's edit of it can be reverted after newer runs.
MEMORY = "# Memory\n\n- the ferry leaves at noon\n" + "".join(f"- harbour fact number {n} holds\n" for n in range(4))


@pytest.fixture(scope="module")
def replies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replies")


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory, replies: Path) -> Iterator[Suite]:
    held = reviewer("hold.py", "--signal", replies / "asked", "--wait", replies / "go", "--limit", "60", replies / "held.json")
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", replies / "reply.json"))},
              {"id": "bruce", "dreaming": dreaming(held)}]
    suite = start_suite(tmp_path_factory.mktemp("console-history"), agents,
                        files={"alfred": {"MEMORY.md": MEMORY}, "bruce": {"MEMORY.md": MEMORY}})
    try:
        yield suite
    finally:
        suite.stop_all()


def memory_bytes(suite: Suite, agent: str = "alfred") -> bytes:
    return (workspace(suite, agent) / "MEMORY.md").read_bytes()


def auto_run(http: httpx.Client, replies: Path, *proposals: dict[str, Any]) -> str:
    write_reply(replies / "reply.json", proposals)
    reply = http.post("/api/v1/agents/alfred/dream:run", json={"mode": "auto"}, timeout=60)
    assert reply.status_code == 200 and reply.json()["status"] == "applied", reply.text
    run_id: str = reply.json()["runId"]
    return run_id


def run_entry(run_id: str) -> str:
    return f"#dream-history article.run[data-run='{run_id}']"


def test_revert_undoes_one_op_of_an_older_run_from_the_history(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                               replies: Path, console_suite: Suite) -> None:
    older = auto_run(admin_http, replies, replace("- the ferry leaves at noon", "- the ferry leaves at one"), add("- Ben fixes the nets"))
    newer = auto_run(admin_http, replies, add("- Cy paints the hull"))
    open_dreams(tab, ADMIN_KEY)
    tab.until("id => document.querySelector(`article.run[data-run='${id}']`) !== null", older)
    heads = tab.page.eval_on_selector_all("#dream-history article.run", "runs => runs.map(r => r.dataset.run)")
    assert heads.index(newer) < heads.index(older)  # newest first
    entry = tab.page.inner_text(run_entry(older))
    assert "manual, auto" in entry and "applied" in entry and "steps: " in entry and "+ - Ben fixes the nets" in entry
    assert "- - the ferry leaves at noon" in entry and "+ - the ferry leaves at one" in entry
    tab.screenshot(shots, "dreams-history")
    tab.page.click(f"{run_entry(older)} li.op-applied:has-text('ferry leaves') button.revert-one")
    settled(tab, "m => m.textContent.includes('undone:')")
    text = memory_bytes(console_suite).decode()
    assert "- the ferry leaves at noon" in text and "at one" not in text
    assert "- Ben fixes the nets" in text and "- Cy paints the hull" in text
    tab.until("s => document.querySelector(s) !== null", f"{run_entry(older)} li.op-reverted")
    assert "ferry leaves" in tab.page.inner_text(f"{run_entry(older)} li.op-reverted")
    tab.screenshot(shots, "dreams-history-reverted-op")


def test_a_refused_revert_shows_the_reason_and_changes_nothing(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                              replies: Path, console_suite: Suite) -> None:
    run_id = auto_run(admin_http, replies, add("- the lighthouse key is blue"))
    edited = memory_bytes(console_suite).decode().replace("- the lighthouse key is blue", "- the lighthouse key is green")
    assert admin_http.put("/api/v1/agents/alfred/files/MEMORY.md", json={"content": edited}).status_code == 200
    before = memory_bytes(console_suite)
    open_dreams(tab, ADMIN_KEY)
    tab.until("s => document.querySelector(s) !== null", f"{run_entry(run_id)} button.revert-run")
    tab.page.click(f"{run_entry(run_id)} button.revert-run")
    settled(tab, "m => m.className === 'error'")
    message = tab.page.text_content("#dream-message")
    assert "refused" in message and "changed since" in message and "not reverted" in message, message
    assert memory_bytes(console_suite) == before
    assert tab.page.query_selector(f"{run_entry(run_id)} li.op-applied") is not None
    tab.screenshot(shots, "dreams-refused-revert")


def shared_texts(suite: Suite) -> str:
    return "".join(p.read_text() for p in sorted((suite.home / "shared").rglob("notes/*.md")))


def test_revert_of_a_run_that_promoted_to_the_vault_takes_the_promotion_out(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                                            replies: Path, console_suite: Suite) -> None:
    eve = "- Eve sails at dawn"
    run_id = auto_run(admin_http, replies, add(eve, reason="sailing times"))
    assert eve in shared_texts(console_suite)
    open_dreams(tab, ADMIN_KEY)
    tab.until("s => document.querySelector(s) !== null", f"{run_entry(run_id)} button.revert-run")
    assert "Shared promotion of " in tab.page.inner_text(run_entry(run_id))
    tab.page.click(f"{run_entry(run_id)} button.revert-run")
    settled(tab, "m => m.textContent.includes('undone:')")
    message = tab.page.text_content("#dream-message")
    assert "shared note " in message and ": undone" in message, message
    assert eve not in shared_texts(console_suite) and eve not in memory_bytes(console_suite).decode()
    assert tab.page.query_selector(f"{run_entry(run_id)} button") is None
    tab.screenshot(shots, "dreams-reverted-promotion")


def run_ids(http: httpx.Client) -> list[str]:
    runs = http.get("/api/v1/agents/alfred/dream:runs", params={"pageSize": 100}).json().get("runs", [])
    return [r["runId"] for r in runs]


def test_older_runs_pages_through_the_history(tab: Tab, admin_http: httpx.Client, replies: Path) -> None:
    write_reply(replies / "reply.json", [])
    while len(run_ids(admin_http)) <= 20:  # one page and more
        assert admin_http.post("/api/v1/agents/alfred/dream:run", json={"mode": "propose"}, timeout=60).status_code == 200
    every = run_ids(admin_http)
    open_dreams(tab, ADMIN_KEY)
    tab.until("() => document.querySelectorAll('#dream-history article.run').length === 20")
    assert tab.page.is_visible("#older-runs")
    tab.page.click("#older-runs")
    tab.until("n => document.querySelectorAll('#dream-history article.run').length === n", len(every))
    shown = tab.page.eval_on_selector_all("#dream-history article.run", "runs => runs.map(r => r.dataset.run)")
    assert shown == every and tab.page.is_hidden("#older-runs")


def test_run_now_shows_progress_with_buttons_disabled_then_the_report(tab: Tab, shots: Path, replies: Path,
                                                                      console_suite: Suite) -> None:
    write_reply(replies / "held.json", [add("- Dee mends sails on Sundays")])
    open_dreams(tab, ADMIN_KEY, "bruce")
    tab.page.select_option("#dream-mode", "auto")
    tab.page.click("#dream-run")
    tab.until("() => (document.getElementById('dream-progress').textContent || '').includes('step: reviewer')", timeout=20)
    progress = tab.page.text_content("#dream-progress")
    assert "dreaming in auto mode: running for " in progress
    assert tab.page.eval_on_selector_all("#dreams button", "bs => bs.every(b => b.disabled)")
    tab.screenshot(shots, "dreams-running")
    (replies / "go").write_text("go")
    settled(tab, "m => m.textContent.startsWith('run ')", timeout=RUN_TIMEOUT_S)
    assert tab.page.is_hidden("#dream-progress")
    assert "Dee mends sails" in tab.page.inner_text("#dream-report li.op-applied")
    assert not tab.page.is_disabled("#dream-run")
    assert "- Dee mends sails on Sundays" in memory_bytes(console_suite, "bruce").decode()
