"""The console's Dreams page in headless Chromium against the real suite, with a scripted reviewer:
its proposals. A propose run's proposals shown as diffs, Accept applying exactly the chosen ones,
Reject recorded with who rejected and the same text not offered by the next propose run, hostile
reviewer reasons rendered as inert text, and a read-only key seeing proposals and history with no
button. Each test keeps a screenshot of its page in ``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import add, audit, dreaming, replace, reviewer, start_suite, write_reply
from dreams_page_support import open_dreams, run_now, settled
from suite_support import ADMIN_KEY, READER_KEY, Suite, workspace

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

MEMORY = "# Memory\n\n- the ferry leaves at noon\n"
HOSTILE_REASON = ('<img src=x onerror="window.__pwned=6"> </script><script>window.__pwned=8</script> '
                  '<a href="javascript:window.__pwned=7">see</a> javascript:window.__pwned=9')


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


def pending_texts(tab: Tab) -> str:
    return tab.page.inner_text("#dream-pending")


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
    diffs = pending_texts(tab)
    assert tab.page.inner_text("#dream-pending li.op code").startswith("p-")  # the id Accept takes
    assert "+ - Mara keeps the spare keys" in diffs and "- - the ferry leaves at noon" in diffs and "+ - the ferry leaves at one" in diffs
    assert HOSTILE_REASON in diffs
    assert HOSTILE_REASON in tab.page.inner_text("#dream-history")  # the run, in the history too
    assert_inert(tab)
    tab.screenshot(shots, "dreams-proposals")
    mara = tab.page.get_attribute("#dream-pending li.op:has-text('Mara keeps') input.choose", "value")
    tab.page.check(f"#dream-pending input.choose[value='{mara}']")
    tab.page.click("#accept")
    tab.until("() => document.querySelectorAll('#dream-pending li.op').length === 2")
    now = memory(admin_http)
    assert "- Mara keeps the spare keys" in now and "Jan prefers" not in now and "- the ferry leaves at noon" in now
    assert tab.page.inner_text(f"#dream-history li.op-accepted[data-proposal='{mara}']")
    tab.screenshot(shots, "dreams-accepted")
    tab.page.click("#dream-report li.op-applied button.revert-one")
    settled(tab, "m => m.textContent.includes('undone:')")
    assert memory(admin_http) == MEMORY
    assert_inert(tab)


def test_reject_is_recorded_and_the_next_propose_run_does_not_offer_the_text_again(
        tab: Tab, shots: Path, admin_http: httpx.Client, reply_file: Path, console_suite: Suite) -> None:
    kim, lee = "- Kim turns down cold calls", "- Lee drinks green tea"
    write_reply(reply_file, [add(kim), add(lee)])
    open_dreams(tab, ADMIN_KEY)
    run_now(tab, "propose")
    tab.until("t => document.getElementById('dream-pending').innerText.includes(t)", kim)
    proposal = tab.page.get_attribute(f"#dream-pending li.op:has-text('{kim}')", "data-proposal")
    tab.page.click(f"#dream-pending li.op:has-text('{kim}') button.reject-one")
    settled(tab, "m => m.textContent.startsWith('rejected 1 proposal')")
    assert kim not in pending_texts(tab) and lee in pending_texts(tab)
    decided = tab.page.inner_text(f"#dream-history li.op-rejected[data-proposal='{proposal}']")
    assert "rejected by admin" in decided
    tab.screenshot(shots, "dreams-rejected")
    runs = admin_http.get("/api/v1/agents/alfred/dream:runs").json()["runs"]
    op = next(o for o in runs[0]["ops"] if o.get("proposalId") == proposal)
    assert (op["status"], op["decidedBy"]) == ("rejected", "admin")
    assert any(r.get("kind") == "rejected" and r.get("by") == "admin" for r in audit(console_suite, "alfred"))

    run_now(tab, "propose")
    tab.until("t => document.getElementById('dream-pending').innerText.includes(t)", lee)
    assert kim not in pending_texts(tab)
    newest = tab.page.inner_text("#dream-history article.run >> nth=0")
    assert "skipped: rejected on " in newest and "by admin" in newest, newest
    pending = admin_http.get("/api/v1/agents/alfred/dream:status").json().get("pending", [])
    assert all(p.get("content") != kim for p in pending)
    assert kim not in (workspace(console_suite, "alfred") / "MEMORY.md").read_text()


def test_reject_selected_rejects_every_chosen_proposal(tab: Tab, admin_http: httpx.Client, reply_file: Path) -> None:
    write_reply(reply_file, [add("- Ola rides a red bike"), add("- Pia keeps bees")])
    open_dreams(tab, ADMIN_KEY)
    run_now(tab, "propose")
    tab.until("() => document.getElementById('dream-pending').innerText.includes('Pia keeps bees')")
    for text in ("Ola rides", "Pia keeps"):
        tab.page.check(f"#dream-pending li.op:has-text('{text}') input.choose")
    tab.page.click("#reject")
    settled(tab, "m => m.textContent.startsWith('rejected 2 proposal')")
    assert "Ola rides" not in pending_texts(tab) and "Pia keeps" not in pending_texts(tab)
    pending = admin_http.get("/api/v1/agents/alfred/dream:status").json().get("pending", [])
    assert not any("Ola rides" in p.get("content", "") or "Pia keeps" in p.get("content", "") for p in pending)


def test_a_read_only_key_sees_proposals_and_history_without_a_button(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                                      reply_file: Path) -> None:
    write_reply(reply_file, [add("- pending for the reader to see")])
    assert admin_http.post("/api/v1/agents/alfred/dream:run", json={"mode": "propose"}).status_code == 200
    open_dreams(tab, READER_KEY)
    tab.until("() => document.querySelectorAll('#dream-pending li.op').length >= 1")
    tab.until("() => document.querySelectorAll('#dream-history article.run').length >= 1")
    assert "pending for the reader to see" in tab.page.inner_text("#dream-history")
    assert tab.page.query_selector_all("#dreams button:not(#older-runs), #dreams input, #dreams select") == []
    assert "read only" in tab.page.text_content("#dreams")
    tab.screenshot(shots, "dreams-read-only")
