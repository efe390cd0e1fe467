"""Forget… on the console's Memory page in headless Chromium against the real suite
(docs/how-to/console.md "Forget a text", docs/concepts/forget.md): a fact planted in MEMORY.md over
REST (and in a memory file with a hostile name, and in a session transcript) is previewed (the report
names each place with its lines and lists the transcript, and never shows the fact), applied after a
second ask that names the number of places (Cancel first changes nothing), then the fact is gone from
the file over REST and from the page (the field emptied, MEMORY.md shown again with the marker), never
was in an address, storage or the page's log, and its tombstone is listed; Lift, asked twice, takes it
off the list. With "shared vault too" and a key whose scope is every agent, a shared note holding a
fact is previewed and scrubbed, and the shared tombstone is listed and lifted. A read-only key is told it cannot forget; a key scoped to one agent is told the shared
vault needs another; a pattern the suite refuses shows the suite's message; a preview made stale by an
edit cannot be applied."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import sessions_dir, start_suite, write_transcript
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

FACT = "Ottoline Fairweather keeps the gate code 4471 in her glovebox"
WORDS = ("Ottoline", "Fairweather", "glovebox")  # any of them on the page or in an address would be a leak
HOSTILE_NOTE = 'memory/notes <img src=x onerror="window.__pwned=1">.md'
MEMORY = "# Memory\n\n- the ferry leaves at noon\n"
TOMBSTONE = re.compile(r"^F-[0-9a-f]{12}$")
SHARED_FACT = "Wilhelmina Throssel lends her rowing boat on Sundays"


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [{"id": "alfred"}, {"id": "bob"}]
    files = {"alfred": {"MEMORY.md": MEMORY, HOSTILE_NOTE: f"# Notes\n\n- {FACT}\n"}, "bob": {"MEMORY.md": "# Memory\n\n- Bob waters the ferns\n"}}
    suite = start_suite(tmp_path_factory.mktemp("console-forget"), agents, files=files)
    try:
        yield suite
    finally:
        suite.stop_all()


def open_memory(tab: Tab, agent: str, key: str) -> None:
    tab.open(f"#/agents/{agent}/memory")
    tab.sign_in(key)
    tab.page.wait_for_selector("section.file[data-file='MEMORY.md']")
    tab.until("() => document.getElementById('tombstones-status').textContent !== ''")


def status(tab: Tab, busy: str) -> str:
    """The forget box's status line once it no longer says ``busy``."""
    tab.until("busy => !['', busy].includes(document.getElementById('forget-status').textContent)", busy, timeout=60)
    return str(tab.page.text_content("#forget-status"))


def preview(tab: Tab, text: str, *, pattern: bool = False, shared: bool = False) -> str:
    tab.page.fill("#forget-text", text)
    tab.page.set_checked("#forget-pattern", pattern)
    tab.page.set_checked("#forget-shared", shared)
    tab.page.click("#forget-preview")
    return status(tab, "previewing…")


def everything_shown(tab: Tab) -> str:
    """The page's text, every field's value, and the address."""
    return str(tab.page.evaluate("() => [document.body.innerText, location.href,"
                                 " ...[...document.querySelectorAll('input, textarea')].map(e => e.value)].join('\\n')"))


def assert_never_kept(tab: Tab) -> None:
    """The fact's words were never in a request's address, the page's storage or its console."""
    encoded = {form(word) for word in WORDS for form in (quote, quote_plus, str)}
    assert not [url for url in tab.requests if any(word in url for word in encoded)]
    storage = tab.page.evaluate("() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])")
    assert not [word for word in WORDS if word in storage] and "gateway-console-key" in storage
    assert not [line for line in tab.errors if any(word in line for word in WORDS)]


def test_preview_then_forget_after_asking_then_lift(tab: Tab, shots: Path, admin_http: httpx.Client, console_suite: Suite) -> None:
    put = admin_http.put("/api/v1/agents/alfred/files/MEMORY.md", json={"content": f"{MEMORY}- {FACT}\n"})
    assert put.status_code == 200, put.text
    write_transcript(sessions_dir(console_suite, "alfred"), "s1.jsonl", [("user", f"Please remember: {FACT}.")])
    open_memory(tab, "alfred", ADMIN_KEY)
    assert tab.page.text_content("#tombstones-status") == "none: nothing of this agent is forgotten"
    assert FACT in tab.page.input_value("section.file[data-file='MEMORY.md'] textarea")  # the test can fail

    assert preview(tab, FACT).startswith("Nothing was changed")
    report = str(tab.page.inner_text("#forget-report"))
    assert "Preview (nothing changed)" in report, report
    memory = tab.page.inner_text("#forget-report li.forget-place[data-store='workspace'][data-path='MEMORY.md']")
    assert memory.endswith("MEMORY.md: 1 match (line 4)"), memory
    assert tab.page.is_visible(f"#forget-report li.forget-place[data-path='{HOSTILE_NOTE}']")
    assert "s1.jsonl: 1 match (line 1)" in tab.page.inner_text("#forget-report .forget-store[data-store='transcripts']")
    assert not [word for word in WORDS if word in report], report  # the report never shows the fact
    places = len(tab.page.query_selector_all("#forget-report .forget-store:not([data-store='transcripts']) li.forget-place"))
    assert places >= 2

    tab.page.click("#forget-apply")
    question = str(tab.page.inner_text("#forget-confirm"))
    assert f"replaces the text in {places} places of alfred's memory" in question and "It cannot be undone" in question, question
    assert "1 transcript holding it" in question, question
    tab.page.click("#forget-no")  # Cancel: nothing is sent
    assert not tab.page.is_visible("#forget-confirm")
    assert FACT in admin_http.get("/api/v1/agents/alfred/files/MEMORY.md").json()["content"]
    tab.page.click("#forget-apply")
    tab.screenshot(shots, "forget-asked")
    tab.page.click("#forget-yes")
    assert status(tab, "forgetting…").startswith("Forgotten. The marker is [forgotten F-")
    tombstone = str(tab.page.text_content("#forget-tombstone"))
    assert TOMBSTONE.match(tombstone), tombstone
    assert "rewritten" in tab.page.inner_text("#forget-report li.forget-place[data-path='MEMORY.md']")
    assert "left: " in tab.page.inner_text("#forget-report .forget-store[data-store='transcripts']")

    memory_now = admin_http.get("/api/v1/agents/alfred/files/MEMORY.md").json()["content"]
    assert FACT not in memory_now and f"[forgotten {tombstone}]" in memory_now, memory_now
    listed = admin_http.get("/api/v1/agents/alfred/tombstones").json()["tombstones"]
    assert [(t["tombstoneId"], t["scope"]) for t in listed] == [(tombstone, "alfred")]
    tab.until("id => document.querySelector(`#tombstones-rows tr[data-tombstone='${id}']`) !== null", tombstone)
    tab.until("() => document.querySelector(\"section.file[data-file='MEMORY.md'] textarea\").value.includes('[forgotten ')")
    shown = everything_shown(tab)
    assert not [word for word in WORDS if word in shown]  # the field emptied, MEMORY.md read again
    assert_never_kept(tab)
    assert_inert(tab)
    tab.screenshot(shots, "forget-applied")

    row = f"#tombstones-rows tr[data-tombstone='{tombstone}']"
    tab.page.click(f"{row} button.lift")
    assert "may then be written back" in tab.page.inner_text(f"{row} .lift-question")
    tab.page.click(f"{row} button.lift-no")  # Cancel: the row is as it was
    assert tab.page.query_selector(f"{row} .lift-question") is None
    assert [t["tombstoneId"] for t in admin_http.get("/api/v1/agents/alfred/tombstones").json()["tombstones"]] == [tombstone]
    tab.page.click(f"{row} button.lift")
    tab.page.click(f"{row} button.lift-yes")
    tab.until("() => document.getElementById('tombstones-status').textContent.startsWith('Lifted')")
    assert tab.page.query_selector(row) is None
    assert admin_http.get("/api/v1/agents/alfred/tombstones").json()["tombstones"] == []
    tab.screenshot(shots, "forget-lifted")


def test_a_read_only_key_is_told_it_cannot_forget(tab: Tab, shots: Path) -> None:
    open_memory(tab, "alfred", READER_KEY)
    assert tab.page.query_selector("#forget-form") is None
    said = str(tab.page.text_content("#tombstones-status"))
    assert said.startswith("This key cannot forget: ") and tab.page.get_attribute("#tombstones-status", "class") == "error", said
    assert tab.page.is_visible("#explain-form")  # the rest of the page is as it was
    tab.screenshot(shots, "forget-read-only")


def test_refusals_show_the_suites_words_and_a_stale_preview_cannot_be_applied(tab: Tab, shots: Path, admin_http: httpx.Client) -> None:
    open_memory(tab, "bob", BOB_WRITER_KEY)
    assert tab.page.text_content("#tombstones-status") == "none: nothing of this agent is forgotten"
    said = preview(tab, "Bob waters the ferns", shared=True)
    assert said.startswith('This key cannot forget in the shared vault (that needs a key whose scope is every agent, "*"): '), said
    assert tab.page.is_disabled("#forget-apply")
    said = preview(tab, "x*", pattern=True)
    assert said.startswith("Not accepted: ") and "empty" in said, said
    assert tab.page.is_disabled("#forget-apply")
    tab.page.set_checked("#forget-pattern", False)
    tab.page.set_checked("#forget-shared", False)
    tab.page.fill("#forget-text", "Bob waters the ferns")
    tab.page.press("#forget-text", "Enter")  # a preview from the keyboard: the form's submit, kept off the address
    assert status(tab, "previewing…").startswith("Nothing was changed")
    assert "#/agents/bob/memory" in tab.page.url and "ferns" not in tab.page.url
    tab.page.click("#forget-apply")  # the field's blur changes nothing: the preview still holds
    assert "replaces the text in" in tab.page.inner_text("#forget-confirm")
    tab.page.click("#forget-no")
    assert tab.page.is_enabled("#forget-apply")
    tab.page.fill("#forget-text", "Bob waters the ferns daily")  # the preview no longer says what would be forgotten
    assert tab.page.is_disabled("#forget-apply")
    assert "Bob waters the ferns" in admin_http.get("/api/v1/agents/bob/files/MEMORY.md").json()["content"]
    assert admin_http.get("/api/v1/agents/bob/tombstones").json()["tombstones"] == []
    tab.screenshot(shots, "forget-refused")


def test_a_forget_in_the_shared_vault_too_and_its_shared_tombstone(tab: Tab, shots: Path, admin_http: httpx.Client) -> None:
    made = admin_http.post("/api/v1/agents/alfred/shared/notes", json={"name": "boats", "content": f"# Boats\n\n- {SHARED_FACT}\n", "confirm": True})
    assert made.status_code == 200 and made.json()["created"], made.text
    open_memory(tab, "alfred", ADMIN_KEY)
    assert preview(tab, SHARED_FACT, shared=True).startswith("Nothing was changed")
    assert "notes/boats.md [note]: 1 match (line 3)" in tab.page.inner_text("#forget-report .forget-store[data-store='vault:global']")
    tab.page.click("#forget-apply")
    assert "of alfred's memory and the shared vault" in tab.page.inner_text("#forget-confirm")
    tab.page.click("#forget-yes")
    assert status(tab, "forgetting…").startswith("Forgotten.")
    tombstone = str(tab.page.text_content("#forget-tombstone"))
    note = admin_http.get("/api/v1/agents/alfred/shared/notes/boats").json()["content"]
    assert SHARED_FACT not in note and f"[forgotten {tombstone}]" in note, note
    row = f"#tombstones-rows tr[data-tombstone='{tombstone}']"
    tab.until("row => document.querySelector(row) !== null", row)
    assert "* (the shared vault, every agent)" in tab.page.inner_text(row)
    tab.screenshot(shots, "forget-shared")
    tab.page.click(f"{row} button.lift")
    tab.page.click(f"{row} button.lift-yes")
    tab.until("() => document.getElementById('tombstones-status').textContent.startsWith('Lifted')")
    assert tombstone not in [t["tombstoneId"] for t in admin_http.get("/api/v1/agents/alfred/tombstones").json().get("tombstones", [])]
