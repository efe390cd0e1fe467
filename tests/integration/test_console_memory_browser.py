"""The console's Memory page in headless Chromium against the real suite (docs/how-to/console.md,
"An agent's Memory page"): reading and saving a file with the file API's compare-and-swap, a write
made with curl between opening and saving reported and not overwritten, a save holding a secret
written with the file API's warning shown, a read-only key reading
without an editor, "where did this go?" naming where a dream moved an entry out of MEMORY.md and
why (a scripted reviewer's run), and hostile memory text rendered inert. Each test keeps a
screenshot of its page in ``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import RUN_TIMEOUT_S, dreaming, remove, reviewer, start_suite, write_reply
from secret_samples import AWS_KEY, SECRETS
from suite_support import ADMIN_KEY, READER_KEY, Suite, workspace

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

HOSTILE_IMG = '<img src=x onerror="window.__pwned=1">'
HOSTILE_SCRIPT = "</script><script>window.__pwned=2</script>"
HOSTILE_LINK = "[click me](javascript:window.__pwned=3)"
HOSTILE_REASON = '<a href="javascript:window.__pwned=4">nobody asked</a> in a year'
GONE = f"- the harbour master is called Ines {HOSTILE_IMG}"
DORA_MEMORY = "# Memory\n\n" + "".join(f"- {line}\n" for line in (
    HOSTILE_LINK, HOSTILE_SCRIPT, "the ferry leaves at noon", "the lighthouse key is blue", "Mara keeps the spare keys",
    "Jan prefers email over phone", "the boat shed closes at six", "fuel is bought on Thursdays",
    "the radio channel is 16", "the slipway is slippery at low tide",
)) + GONE + "\n"
USER = "section.file[data-file='USER.md']"


@pytest.fixture(scope="module")
def reply_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replies") / "reply.json"


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory, reply_file: Path) -> Iterator[Suite]:
    agents = [{"id": "alfred"}, {"id": "dora", "dreaming": dreaming(reviewer("reply.py", reply_file))}]
    files = {"alfred": {"MEMORY.md": "# Memory\n\n- prefers tea\n", "USER.md": "# User\n\n- as opened\n"},
             "dora": {"MEMORY.md": DORA_MEMORY}}
    suite = start_suite(tmp_path_factory.mktemp("console-memory"), agents, files=files)
    try:
        yield suite
    finally:
        suite.stop_all()


def open_memory(tab: Tab, agent: str, key: str) -> None:
    tab.open(f"#/agents/{agent}/memory")
    tab.sign_in(key)
    tab.page.wait_for_selector("section.file[data-file='MEMORY.md']")


def save_user(tab: Tab, text: str) -> str:
    tab.page.fill(f"{USER} textarea", text)
    tab.page.click(f"{USER} button.save")
    tab.until(f"() => !['', 'saving…'].includes(document.querySelector(\"{USER} .file-status\").textContent)")
    return str(tab.page.text_content(f"{USER} .file-status"))


def curl_put(suite: Suite, agent: str, name: str, content: str) -> None:
    """A write made outside the page, as a person would with curl."""
    done = subprocess.run(["curl", "-s", "-f", "-X", "PUT", "-H", f"X-Api-Key: {ADMIN_KEY}", "-H", "Content-Type: application/json",
                           "-d", json.dumps({"content": content}), f"{suite.base_url}/api/v1/agents/{agent}/files/{name}"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr


def test_the_memory_page_reads_and_saves_and_keeps_the_new_hash(tab: Tab, shots: Path, console_suite: Suite) -> None:
    open_memory(tab, "alfred", ADMIN_KEY)
    assert tab.page.input_value(f"{USER} textarea") == "# User\n\n- as opened\n"
    assert save_user(tab, "# User\n\n- likes short answers\n").startswith("File saved")
    assert save_user(tab, "# User\n\n- likes short answers\n- and tea\n").startswith("File saved")  # the hash of the first save
    assert (workspace(console_suite, "alfred") / "USER.md").read_text() == "# User\n\n- likes short answers\n- and tea\n"
    puts = [u for u in tab.requests if u.endswith("/files/USER.md")]
    assert len(puts) == 3  # the open's GET and the two PUTs: no read before a save
    tab.screenshot(shots, "memory-saved")


def test_a_save_holding_a_secret_is_written_and_says_so(tab: Tab, console_suite: Suite) -> None:
    open_memory(tab, "alfred", ADMIN_KEY)
    status = save_user(tab, f"# User\n\n{SECRETS['AWS Access Key']}\n")
    assert status.startswith("File saved") and "line 3: AWS Access Key: this file now holds a secret" in status
    assert AWS_KEY not in status
    assert tab.page.get_attribute(f"{USER} .file-status", "class") == "error file-status"
    assert AWS_KEY in (workspace(console_suite, "alfred") / "USER.md").read_text()


def test_a_write_made_with_curl_after_opening_is_reported_not_overwritten(tab: Tab, shots: Path, console_suite: Suite) -> None:
    open_memory(tab, "alfred", ADMIN_KEY)
    curl_put(console_suite, "alfred", "USER.md", "# User\n\n- changed elsewhere, with curl\n")
    status = save_user(tab, "# User\n\n- my edit\n")
    assert "changed since you opened it" in status and status.startswith("Not saved")
    assert tab.page.text_content(f"{USER} pre.conflict") == "# User\n\n- changed elsewhere, with curl\n"
    assert (workspace(console_suite, "alfred") / "USER.md").read_bytes() == b"# User\n\n- changed elsewhere, with curl\n"
    assert "changed since you opened it" in save_user(tab, "# User\n\n- my edit, again\n")  # still the hash it opened with
    assert len(tab.page.query_selector_all(f"{USER} pre.conflict")) == 1
    assert (workspace(console_suite, "alfred") / "USER.md").read_bytes() == b"# User\n\n- changed elsewhere, with curl\n"
    tab.screenshot(shots, "memory-conflict")


def test_a_read_only_key_reads_memory_without_an_editor(tab: Tab, shots: Path) -> None:
    open_memory(tab, "alfred", READER_KEY)
    tab.page.wait_for_selector("section.file[data-file='MEMORY.md'] pre")
    assert tab.page.query_selector_all("textarea, button.save") == []
    assert "prefers tea" in tab.page.text_content("section.file[data-file='MEMORY.md'] pre")
    assert tab.page.is_visible("#explain-form")  # explain needs read access only
    tab.screenshot(shots, "memory-read-only")


def test_where_did_this_go_names_the_archive_the_run_and_the_reason(tab: Tab, shots: Path, admin_http: httpx.Client,
                                                                     reply_file: Path) -> None:
    write_reply(reply_file, [remove(GONE, reason=HOSTILE_REASON)])
    run = admin_http.post("/api/v1/agents/dora/dream:run", json={"mode": "auto"}, timeout=RUN_TIMEOUT_S)
    assert run.status_code == 200, run.text
    assert [op["status"] for op in run.json()["ops"] if op["op"] == "remove"] == ["applied"], run.text
    assert GONE not in admin_http.get("/api/v1/agents/dora/files/MEMORY.md").json()["content"]
    open_memory(tab, "dora", ADMIN_KEY)
    tab.page.fill("#explain-query", "harbour master Ines")
    tab.page.click("#explain-form button")
    tab.until("() => document.querySelectorAll('#explain-entries li.explained').length > 0"
              " || document.getElementById('explain-status').textContent.startsWith('explain failed')")
    answer = tab.page.inner_text("#explain-entries")
    assert "memory/archive/pruned.md" in answer and "(pruned)" in answer, answer
    assert "took it out of MEMORY.md" in answer and HOSTILE_REASON in answer, answer
    assert f"[{run.json()['runId']}/" in answer, answer  # the run and op that moved it
    assert HOSTILE_IMG in answer
    assert_inert(tab)
    tab.screenshot(shots, "memory-explain")


def test_hostile_memory_text_renders_as_inert_text(tab: Tab, shots: Path) -> None:
    open_memory(tab, "dora", ADMIN_KEY)
    text = tab.page.input_value("section.file[data-file='MEMORY.md'] textarea")
    assert HOSTILE_SCRIPT in text and HOSTILE_LINK in text
    tab.page.fill("#search-query", "click me")
    tab.page.click("#search-form button")
    tab.until("() => !['', 'searching…'].includes(document.getElementById('search-status').textContent)")
    assert HOSTILE_LINK in tab.page.text_content("#search-hits")
    assert_inert(tab)
    tab.screenshot(shots, "memory-hostile")
