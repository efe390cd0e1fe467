"""The console's Shared vault page in headless Chromium against the real suite: notes listed with who
wrote them, a retired note marked, the graph reports (a dangling link, a contradiction) opening the note
they name, the link graph drawn as an SVG with one circle per node and one line per edge, and a hostile
note name, title and body rendered as inert text. Each test keeps a screenshot of its page in
``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import start_suite
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

NOTES = "/api/v1/agents/{agent}/shared/notes"
HARBOUR = "---\ntitle: Harbour\nclaims:\n  - id: tide\n    text: high tide at six\n---\nSee [[ferry]] and [[lighthouse]].\n"
FERRY = "---\nclaims:\n  - id: tide\n    text: high tide at nine\n---\n# Ferry times\nBack to [[harbour]].\n"
# Note names refuse / \ [ ] | # ^: the name carries what they allow, the title and body the rest.
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1"> javascript:window.__pwned=2'
HOSTILE_TITLE = "</script><script>window.__pwned=3</script>"
HOSTILE_BODY = (
    f"---\ntitle: '{HOSTILE_TITLE}'\n---\n"
    "</script><script>window.__pwned=4</script>\n"
    "[click me](javascript:window.__pwned=5)\n"
    '<a href="javascript:window.__pwned=6">link</a> <img src=x onerror="window.__pwned=7">\n'
    "Links to [[ferry]].\n"
)


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    suite = start_suite(tmp_path_factory.mktemp("console-vault"), [{"id": "alfred"}, {"id": "bob"}])
    try:
        with httpx.Client(base_url=suite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as admin:
            for name, content in (("harbour", HARBOUR), ("ferry", FERRY), ("old rota", "# Old rota\n- nobody reads it\n"),
                                  (HOSTILE_NAME, HOSTILE_BODY)):
                made = admin.post(NOTES.format(agent="alfred"), json={"name": name, "content": content, "confirm": True})
                assert made.status_code == 200 and made.json()["created"], made.text
            retired = admin.post(NOTES.format(agent="alfred") + "/old%20rota:retire", json={"reason": "nobody reads it"})
            assert retired.status_code == 200, retired.text
        with httpx.Client(base_url=suite.base_url, timeout=30, headers={"X-Api-Key": BOB_WRITER_KEY}) as bob:
            changed = bob.put(NOTES.format(agent="bob") + "/ferry", json={"content": FERRY + "- Sundays too\n"})
            assert changed.status_code == 200 and changed.json()["updated"], changed.text
        yield suite
    finally:
        suite.stop_all()


def open_vault(tab: Tab, key: str = READER_KEY) -> None:
    tab.open("#/agents/alfred/vault")
    tab.sign_in(key)
    tab.until("() => document.querySelectorAll('#vault-rows tr').length > 0 && document.getElementById('vault-svg') !== null")


def row(tab: Tab, name: str) -> str:
    return str(tab.page.evaluate(
        "name => [...document.querySelectorAll('#vault-rows tr')].find(r => r.dataset.note === name)?.innerText ?? ''", name))


def opened(tab: Tab, name: str) -> str:
    tab.until("name => document.getElementById('vault-note-name')?.textContent === name"
              " && document.getElementById('vault-note-text') !== null", name)
    return str(tab.page.text_content("#vault-note-text"))


def test_notes_are_listed_with_who_wrote_them_and_a_retired_note_is_marked(tab: Tab, shots: Path) -> None:
    open_vault(tab)
    names = tab.page.eval_on_selector_all("#vault-rows tr", "rows => rows.map(r => r.dataset.note)")
    assert names == sorted([HOSTILE_NAME, "ferry", "harbour"])
    ferry = row(tab, "ferry")
    assert "Ferry times" in ferry and "agent" in ferry and "alfred (key admin)" in ferry and "bob (key bob-writer)" in ferry
    assert "live" in ferry
    tab.page.check("#vault-retired")
    tab.until("() => [...document.querySelectorAll('#vault-rows tr')].some(r => r.dataset.note === 'stale__old rota')")
    old = row(tab, "stale__old rota")
    assert "retired" in old and "nobody reads it" in old and "alfred (key admin)" in old
    assert tab.page.get_attribute("#vault-rows tr[data-note='stale__old rota']", "class") == "note-retired"
    tab.screenshot(shots, "vault-notes")
    tab.page.click("#vault-rows tr[data-note='stale__old rota'] button.note-link")
    assert "nobody reads it" in opened(tab, "stale__old rota")


def test_a_dangling_link_and_a_contradiction_are_listed_and_open_their_note(tab: Tab, shots: Path) -> None:
    open_vault(tab)
    dangling = tab.page.inner_text("#vault-report-dangling")
    assert "links to [[lighthouse]], which no note is" in dangling
    contradiction = tab.page.inner_text("#vault-report-contradictions")
    assert "claim tide differs in text" in contradiction and "high tide at six" in contradiction
    tab.page.click("#vault-report-dangling button.note-link[data-note='harbour']")
    assert opened(tab, "harbour") == HARBOUR
    tab.screenshot(shots, "vault-report-opened")
    tab.page.click("#vault-report-contradictions button.note-link[data-note='ferry']")
    assert "high tide at nine" in opened(tab, "ferry")
    tab.page.click("#vault-report-dangling button.note-link[data-note='lighthouse']")
    tab.until("() => document.getElementById('vault-note-error') !== null")
    assert "lighthouse" in tab.page.text_content("#vault-note-error")


def test_the_graph_draws_one_circle_per_node_and_one_line_per_edge(tab: Tab, shots: Path, admin_http: httpx.Client) -> None:
    graph = admin_http.get("/api/v1/agents/alfred/shared/graph").json()
    open_vault(tab)
    drawn = tab.page.evaluate("() => ({circles: document.querySelectorAll('#vault-svg circle').length,"
                              " lines: document.querySelectorAll('#vault-svg line').length,"
                              " labels: [...document.querySelectorAll('#vault-svg g.node')].map(g => g.dataset.note)})")
    assert drawn["circles"] == len(graph["nodes"]) == 5  # four notes, one retired, and the missing lighthouse
    assert drawn["lines"] == len(graph["edges"]) == 4
    assert sorted(drawn["labels"]) == sorted(n["name"] for n in graph["nodes"])
    assert tab.page.get_attribute("#vault-svg g[data-note='lighthouse']", "class") == "node missing"
    tab.screenshot(shots, "vault-graph")
    tab.page.click("#vault-svg g.node[data-note='ferry'] circle")
    assert "high tide at nine" in opened(tab, "ferry")


def test_a_hostile_note_name_title_and_body_render_as_inert_text(tab: Tab, shots: Path) -> None:
    open_vault(tab)
    hostile = row(tab, HOSTILE_NAME)
    assert HOSTILE_NAME in hostile and HOSTILE_TITLE in hostile
    titles = tab.page.eval_on_selector_all("#vault-svg g.node > title", "titles => titles.map(t => t.textContent)")
    assert f"{HOSTILE_NAME}: {HOSTILE_TITLE}" in titles  # the label beside the circle is cut short
    tab.page.click(f"#vault-svg g.node[data-note='{HOSTILE_NAME}'] circle".replace('"', '\\"'))
    assert opened(tab, HOSTILE_NAME) == HOSTILE_BODY
    assert_inert(tab)
    tab.screenshot(shots, "vault-hostile")
