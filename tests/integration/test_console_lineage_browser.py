"""The console's Lineage page in headless Chromium against the real suite (docs/concepts/lineage.md):
a session registered after a PUT is shown running on that PUT's revision of MEMORY.md; a later write
makes the page say the file differs and show the diff, without a reload; after a restart directive
and the session's new registration the page names the new revision and shows no diff. Hostile
memory text in the diff and a hostile session id stay text; a key outside the agent's scope is
refused. Each test keeps a screenshot in ``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import start_suite
from suite_support import BOB_WRITER_KEY, READER_KEY, Suite, wait_claude
from test_watcher import DirectiveStream

from gateway.v1 import watcher_pb2

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

OLD = "# Memory\n\n- the user likes tea\n"
NEW = ("# Memory\n\n- the user likes coffee\n- <img src=x onerror=\"window.__pwned=1\">\n"
       "- </script><script>window.__pwned=2</script>\n- [click me](javascript:window.__pwned=3)\n")
HOSTILE_SESSION = '<img src=x onerror="window.__pwned=5">'
MEMORY_ITEM = "article[data-session='s1'] li.source[data-file='MEMORY.md']"


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    suite = start_suite(tmp_path_factory.mktemp("console-lineage"), [{"id": "alfred"}, {"id": "bob"}],
                        services=("file_api", "watcher", "http"))
    try:
        yield suite
    finally:
        suite.stop_all()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def put_memory(http: httpx.Client, agent: str, text: str) -> tuple[float, float]:
    """PUT MEMORY.md; the wall-clock seconds just before and just after."""
    before = time.time()
    assert http.put(f"/api/v1/agents/{agent}/files/MEMORY.md", json={"content": text}).status_code == 200
    return before, time.time()


def register(http: httpx.Client, agent: str, session: str) -> None:
    reply = http.post(f"/api/v1/agents/{agent}/sessions", json={"sessionId": session, "state": "SESSION_STATE_IDLE"})
    assert reply.status_code == 200, reply.text


def put_time(text: str) -> float:
    """The time in "runs on MEMORY.md as of PUT at YYYY-MM-DD hh:mm:ss UTC" (seconds since the epoch)."""
    stamp = text.split(" as of PUT at ", 1)[1].removesuffix(" UTC")
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


def assert_names_put(tab: Tab, window: tuple[float, float], text: str) -> None:
    runs_on = tab.page.text_content(f"{MEMORY_ITEM} .runs-on") or ""
    assert runs_on.startswith("runs on MEMORY.md as of PUT at "), runs_on
    assert int(window[0]) <= put_time(runs_on) <= window[1]
    assert sha(text)[:12] in (tab.page.text_content(MEMORY_ITEM) or "")


def test_the_page_names_the_sessions_revision_until_a_restart_directive(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                                      console_suite: Suite) -> None:
    first = put_memory(admin_http, "alfred", OLD)
    wait_claude(console_suite, "alfred", "likes tea")
    register(admin_http, "alfred", "s1")
    tab.open("#/agents/alfred/lineage")
    tab.sign_in(READER_KEY)
    tab.page.wait_for_selector(f"{MEMORY_ITEM} .runs-on")
    assert_names_put(tab, first, OLD)
    assert tab.page.text_content(f"{MEMORY_ITEM} .today") == "same as today"
    assert tab.page.query_selector_all("#lineage .diff") == []
    tab.screenshot(shots, "lineage-current")

    stream = DirectiveStream(console_suite, "alfred")
    try:
        second = put_memory(admin_http, "alfred", NEW)  # a memory write restarts nobody: s1 keeps its CLAUDE.md
        tab.page.evaluate("window.__sameDocument = true")
        tab.until("s => document.querySelector(s) !== null", f"{MEMORY_ITEM}.differs .diff", timeout=15)
        diff = tab.page.inner_text(f"{MEMORY_ITEM} .diff")
        assert "-- the user likes tea" in diff and "+- the user likes coffee" in diff
        assert '+- <img src=x onerror="window.__pwned=1">' in diff and "+- </script><script>window.__pwned=2</script>" in diff
        today = tab.page.text_content(f"{MEMORY_ITEM} .today") or ""
        assert today.startswith("differs from today's file: PUT at ")
        assert int(second[0]) <= put_time(today.replace("differs from today's file:", "runs on MEMORY.md as of")) <= second[1]
        assert_names_put(tab, first, OLD)
        assert tab.page.evaluate("window.__sameDocument") is True  # refreshed in place, no reload
        assert_inert(tab)
        tab.screenshot(shots, "lineage-differs")

        admin_http.put("/api/v1/agents/alfred/files/HEARTBEAT.md", json={"content": "beat\n"}).raise_for_status()
        directive = stream.next()
        assert directive.session_id == "s1" and directive.kind == watcher_pb2.DIRECTIVE_KIND_RESTART_NOW
    finally:
        stream.close()
    register(admin_http, "alfred", "s1")  # the runtime restarted the session on the new CLAUDE.md
    tab.until("s => document.querySelector(s) === null", f"{MEMORY_ITEM}.differs", timeout=15)
    assert_names_put(tab, second, NEW)
    assert tab.page.query_selector_all("#lineage .diff, #lineage li.differs") == []
    heartbeat = tab.page.text_content("article[data-session='s1'] li.source[data-file='HEARTBEAT.md'] .runs-on") or ""
    assert heartbeat.startswith("runs on HEARTBEAT.md as of PUT at ")
    assert_inert(tab)
    tab.screenshot(shots, "lineage-restarted")


def test_a_hostile_session_id_is_text_and_another_agents_lineage_is_refused(tab: Tab, shots: Path,
                                                                           admin_http: httpx.Client) -> None:
    register(admin_http, "bob", HOSTILE_SESSION)
    tab.open("#/agents/bob/lineage")
    tab.sign_in(BOB_WRITER_KEY)
    tab.page.wait_for_selector("article.lineage-session h3 code")
    assert tab.page.text_content("article.lineage-session h3 code") == HOSTILE_SESSION
    assert_inert(tab)
    tab.screenshot(shots, "lineage-hostile-session")
    tab.open("#/agents/alfred/lineage")
    tab.until("() => document.getElementById('lineage').textContent.startsWith('Cannot show alfred')")
    assert tab.page.query_selector_all("article.lineage-session") == []
    tab.screenshot(shots, "lineage-refused")
