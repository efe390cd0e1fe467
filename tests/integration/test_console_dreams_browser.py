"""The console's Dreams page in headless Chromium against the real suite, with a scripted reviewer:
a propose run's proposals shown as diffs, Accept applying exactly the chosen ones, Revert undoing one
op, a refused revert showing the suite's reason and changing nothing, and a read-only key seeing no
button. Each test keeps a screenshot of its page in ``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import add, dreaming, replace, reviewer, start_suite, write_reply
from suite_support import ADMIN_KEY, READER_KEY, Suite

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

MEMORY = "# Memory\n\n- the ferry leaves at noon\n"
HOSTILE_REASON = '<img src=x onerror="window.__pwned=6"> see javascript:window.__pwned=7'


@pytest.fixture(scope="module")
def reply_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replies") / "reply.json"


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory, reply_file: Path) -> Iterator[Suite]:
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", reply_file))}]
    suite = start_suite(tmp_path_factory.mktemp("console-dreams"), agents, files={"alfred": {"MEMORY.md": MEMORY}})
    try:
        yield suite
    finally:
        suite.stop_all()


def memory(http: httpx.Client) -> str:
    content: str = http.get("/api/v1/agents/alfred/files/MEMORY.md").json()["content"]
    return content


def open_dreams(tab: Tab, key: str) -> None:
    tab.open("#/agents/alfred/dreams")
    tab.sign_in(key)
    tab.until("() => document.querySelector('#dream-status h3') !== null")


def run_now(tab: Tab, mode: str) -> None:
    tab.page.select_option("#dream-mode", mode)
    tab.page.click("#dream-run")
    tab.until("() => document.getElementById('dream-message').textContent.startsWith('run ')", timeout=30)


def test_a_propose_run_shows_diffs_and_accept_applies_only_the_chosen_one(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                                          reply_file: Path) -> None:
    write_reply(reply_file, [
        add("- Mara keeps the spare keys", reason=HOSTILE_REASON),
        add("- Jan prefers email over phone"),
        replace("- the ferry leaves at noon", "- the ferry leaves at one"),
    ])
    open_dreams(tab, ADMIN_KEY)
    run_now(tab, "propose")
    tab.until("() => document.querySelectorAll('#dream-pending li.op').length === 3")
    diffs = tab.page.inner_text("#dream-pending")
    assert tab.page.inner_text("#dream-pending li.op code").startswith("p-")  # the id Accept takes
    assert "+ - Mara keeps the spare keys" in diffs and "- - the ferry leaves at noon" in diffs and "+ - the ferry leaves at one" in diffs
    assert HOSTILE_REASON in diffs
    assert_inert(tab)
    tab.screenshot(shots, "dreams-proposed")
    mara = tab.page.get_attribute("#dream-pending li.op:has-text('Mara keeps') input.choose", "value")
    tab.page.check(f"#dream-pending input.choose[value='{mara}']")
    tab.page.click("#accept")
    tab.until("() => document.querySelectorAll('#dream-pending li.op').length === 2")
    now = memory(admin_http)
    assert "- Mara keeps the spare keys" in now and "Jan prefers" not in now and "- the ferry leaves at noon" in now
    tab.screenshot(shots, "dreams-accepted")
    tab.page.click("#dream-report li.op-applied button.revert-one")
    tab.until("() => document.getElementById('dream-message').textContent.includes('undone:')")
    assert memory(admin_http) == MEMORY
    tab.screenshot(shots, "dreams-reverted-op")


def test_a_refused_revert_shows_the_reason_and_changes_nothing(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                              reply_file: Path) -> None:
    write_reply(reply_file, [add("- the lighthouse key is blue")])
    open_dreams(tab, ADMIN_KEY)
    run_now(tab, "auto")
    assert "- the lighthouse key is blue" in memory(admin_http)
    edited = memory(admin_http).replace("- the lighthouse key is blue", "- the lighthouse key is green")
    assert admin_http.put("/api/v1/agents/alfred/files/MEMORY.md", json={"content": edited}).status_code == 200
    tab.page.click("#revert-run")
    tab.until("() => document.getElementById('dream-message').className === 'error'")
    message = tab.page.text_content("#dream-message")
    assert "refused" in message and "changed since" in message and "not reverted" in message, message
    assert memory(admin_http) == edited
    tab.screenshot(shots, "dreams-refused")


def test_a_read_only_key_sees_the_dreams_without_a_button(tab: Tab, shots: Path, admin_http: httpx.Client, reply_file: Path) -> None:
    write_reply(reply_file, [add("- pending for the reader to see")])
    assert admin_http.post("/api/v1/agents/alfred/dream:run", json={"mode": "propose"}).status_code == 200
    open_dreams(tab, READER_KEY)
    tab.until("() => document.querySelectorAll('#dream-pending li.op').length >= 1")
    assert tab.page.query_selector_all("#dreams button, #dreams input, #dreams select") == []
    assert "read only" in tab.page.text_content("#dreams")
    tab.screenshot(shots, "dreams-read-only")
