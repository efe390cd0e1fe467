"""The web console in headless Chromium against the real suite (docs/how-to/console.md).

Sign-in with a read-only key, a write key, a scoped key and a wrong one; the Agents page's budget
bar moving after a PUT made outside the page, without a reload; a row's last-run op counts and run
health after runs of a scripted reviewer (bob's); and hostile memory text and session ids rendered
as inert text. The Memory page's own tests are in ``test_console_memory_browser.py``. Each test
keeps a screenshot of its page in
``build/test-artifacts/console/`` (conftest ``shots``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import add, dreaming, reviewer, start_suite, write_reply
from dreaming_support import replace as replace_op
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

AGENTS = ("alfred", "bob", "dora")
HOSTILE = (
    '<img src=x onerror="window.__pwned=1">',
    "</script><script>window.__pwned=2</script>",
    "[click me](javascript:window.__pwned=3)",
    '<a href="javascript:window.__pwned=4">link</a>',
)
HOSTILE_SESSION = '<img src=x onerror="window.__pwned=5">'


@pytest.fixture(scope="module")
def bob_reply(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reply bob's scripted reviewer prints (``tests/reviewers/reply.py``)."""
    return tmp_path_factory.mktemp("console-replies") / "bob.json"


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory, bob_reply: Path) -> Iterator[Suite]:
    memories = {"alfred": "- prefers tea\n" * 200, "bob": "- ships on Fridays\n" * 40,
                "dora": "- a very long memory line that keeps growing\n" * 200}
    files = {agent: {"MEMORY.md": f"# Memory\n\n{memory}", "SOUL.md": f"# Soul\n\n{agent} is careful.\n"}
             for agent, memory in memories.items()}
    agents = [{"id": a, **({"dreaming": dreaming(reviewer("reply.py", bob_reply), maxChangesPerRun=2)} if a == "bob" else {})} for a in AGENTS]
    suite = start_suite(tmp_path_factory.mktemp("console"), agents, files=files)
    try:
        with httpx.Client(base_url=suite.base_url, timeout=10, headers={"X-Api-Key": ADMIN_KEY}) as client:
            for agent, session, state in (("alfred", "telegram-4711", "BUSY"), ("alfred", "cron-nightly", "IDLE"),
                                          ("bob", "slack-bob-1", "IDLE")):
                reply = client.post(f"/api/v1/agents/{agent}/sessions", json={"sessionId": session, "state": f"SESSION_STATE_{state}"})
                assert reply.status_code == 200, reply.text
        yield suite
    finally:
        suite.stop_all()


def test_a_wrong_key_is_told_so_on_the_form(tab: Tab, shots: Path) -> None:
    tab.open()
    tab.sign_in("not-a-key-at-all")
    tab.until("() => document.getElementById('sign-in-error').textContent.length > 0")
    assert "not accepted" in tab.page.text_content("#sign-in-error")
    assert tab.page.is_visible("#sign-in") and not tab.page.is_visible("#agents")
    assert tab.page.evaluate("sessionStorage.length") == 0
    tab.screenshot(shots, "wrong-key")


def test_a_read_only_key_sees_its_agent_and_no_write_button(tab: Tab, shots: Path) -> None:
    tab.open()
    tab.sign_in(READER_KEY)
    assert tab.wait_rows(1) == ["alfred"]
    assert tab.page.query_selector_all("button.run-now") == []
    assert "read only" in tab.page.text_content("#agents-rows tr")
    assert READER_KEY not in tab.page.url and READER_KEY not in tab.page.content()
    tab.screenshot(shots, "read-only")


def test_a_write_key_sees_every_agent_and_its_write_buttons(tab: Tab, shots: Path) -> None:
    tab.open()
    tab.sign_in(ADMIN_KEY)
    assert tab.wait_rows(3) == list(AGENTS)
    assert len(tab.page.query_selector_all("button.run-now")) == 3
    links = tab.page.eval_on_selector_all("tr[data-agent=bob] .page-links a", "links => links.map(a => a.getAttribute('href'))")
    assert links == ["#/agents/bob/dreams", "#/agents/bob/vault", "#/agents/bob/lineage"]
    tab.page.click("tr[data-agent=bob] a.lineage-link")
    tab.page.wait_for_selector("#lineage .page-links")
    assert tab.page.text_content("#lineage .page-links") == "all agents · memory · dreams · vault"
    tab.screenshot(shots, "write-key")


def test_a_scoped_key_sees_only_its_agent_and_signs_out(tab: Tab, shots: Path) -> None:
    tab.open()
    tab.sign_in(BOB_WRITER_KEY)
    assert tab.wait_rows(1) == ["bob"]
    assert len(tab.page.query_selector_all("button.run-now")) == 1
    tab.screenshot(shots, "scoped-key")
    tab.page.click("#sign-out")
    assert tab.page.is_visible("#sign-in") and tab.page.evaluate("sessionStorage.length") == 0


def memory_meter(tab: Tab, agent: str) -> float:
    return float(tab.page.get_attribute(f"#agents-rows tr[data-agent={agent}] meter[data-file='MEMORY.md']", "value") or 0)


def test_the_budget_bar_moves_after_a_put_without_a_reload(tab: Tab, shots: Path, admin_http: httpx.Client) -> None:
    tab.open()
    tab.sign_in(ADMIN_KEY)
    tab.wait_rows(3)
    tab.page.evaluate("window.__sameDocument = true")
    before = memory_meter(tab, "bob")
    grown = "# Memory\n\n" + "- ships on Fridays, and on Mondays too\n" * 120
    assert admin_http.put("/api/v1/agents/bob/files/MEMORY.md", json={"content": grown}).status_code == 200
    tab.until("n => Number(document.querySelector(\"tr[data-agent=bob] meter[data-file='MEMORY.md']\").value) === n",
              len(grown))
    assert memory_meter(tab, "bob") == len(grown) > before
    assert tab.page.evaluate("window.__sameDocument") is True  # no reload happened
    assert "OVER BUDGET" in tab.page.text_content("tr[data-agent=dora]")
    api_calls = [u for u in tab.requests if "/api/" in u]
    assert api_calls and all(u.endswith("/api/v1/agents") for u in api_calls)  # one call per refresh, for every agent
    tab.screenshot(shots, "agents")


def test_a_row_shows_the_last_runs_ops_and_the_run_health(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                          bob_reply: Path) -> None:
    bob_reply.write_text(HOSTILE[0])  # no JSON: the reviewer fails, and its output stays text
    failed = admin_http.post("/api/v1/agents/bob/dream:run", json={"mode": "propose"})
    assert failed.status_code == 200 and failed.json()["reviewer"]["ok"] is False, failed.text
    write_reply(bob_reply, [add("- Bob ships on Fridays at noon."), add("- Bob answers in Dutch."),
                            replace_op("- ships on Fridays", "- ships on Mondays")])  # over maxChangesPerRun: skipped
    proposed = admin_http.post("/api/v1/agents/bob/dream:run", json={"mode": "propose"})
    assert proposed.status_code == 200 and proposed.json()["status"] == "proposed", proposed.text
    health = admin_http.get("/api/v1/agents/bob/dream:status").json()["health"]
    assert health["failuresLast7Days"] == 1 and health["notPromoted"].startswith("a propose run"), health
    tab.open()
    tab.sign_in(ADMIN_KEY)
    tab.wait_rows(3)
    row = "tr[data-agent=bob]"
    tab.until(f"() => document.querySelector('{row} .op-counts')?.textContent === '0 applied · 1 skipped · 2 proposed'")
    failures = tab.page.text_content(f"{row} .health-failures") or ""
    assert failures.startswith("1 failed in 7 days, last ") and failed.json()["reason"][:40] in failures
    assert tab.page.get_attribute(f"{row} .health-failures", "title") == health["lastFailureReason"]
    assert tab.page.text_content(f"{row} .not-promoted") == f"nothing promoted: {health['notPromoted']}"
    assert tab.page.text_content("tr[data-agent=alfred] td.health") == "no failures in 7 days"
    assert "OVER BUDGET" in tab.page.text_content("tr[data-agent=dora]")
    assert_inert(tab)
    tab.screenshot(shots, "agents-health")


def test_hostile_memory_text_and_session_ids_render_as_inert_text(tab: Tab, shots: Path, admin_http: httpx.Client) -> None:
    hostile = "# Memory\n\n" + "".join(f"- {line}\n" for line in HOSTILE)
    assert admin_http.put("/api/v1/agents/dora/files/MEMORY.md", json={"content": hostile}).status_code == 200
    session = admin_http.post("/api/v1/agents/dora/sessions", json={"sessionId": HOSTILE_SESSION, "state": "SESSION_STATE_IDLE"})
    assert session.status_code == 200, session.text
    tab.open()
    tab.sign_in(ADMIN_KEY)
    tab.page.wait_for_selector("tr[data-agent=dora] .session")
    assert HOSTILE_SESSION in tab.page.text_content("tr[data-agent=dora] .session")
    tab.page.click("tr[data-agent=dora] a.agent-id")
    text = tab.page.wait_for_selector("section.file[data-file='MEMORY.md'] textarea")
    assert text is not None and text.input_value() == hostile
    tab.page.fill("#search-query", "click me")
    tab.page.click("#search-form button")
    tab.until("() => !['', 'searching…'].includes(document.getElementById('search-status').textContent)")
    assert HOSTILE[1] in tab.page.text_content("#search-hits pre")
    assert_inert(tab)
    tab.screenshot(shots, "hostile")
    assert admin_http.put("/api/v1/agents/alfred/files/HEARTBEAT.md", json={"content": hostile}).status_code == 200
    tab.page.click("#sign-out")
    tab.open("#/agents/alfred/memory")
    tab.sign_in(READER_KEY)
    tab.page.wait_for_selector("section.file[data-file='HEARTBEAT.md'] pre")
    assert tab.page.text_content("section.file[data-file='HEARTBEAT.md'] pre") == hostile
    assert_inert(tab)
    tab.screenshot(shots, "hostile-read-only")

