"""The vault's weekly reflection on the console's Shared vault page, in headless Chromium against the real
suite with a scripted reviewer (tests/reviewers/reflect.py): a run in propose mode started from the page,
its proposal shown with the diff of each note it replaces, accepted from the page (the notes merged, as
REST shows), then the accept's run reverted from the page (the notes back byte for byte); a proposal
whose note was edited since is accepted from the page as stale, nothing merged; a key scoped to some
agents sees why the reflection is not shown; a hostile note name in a cluster and a proposal stays text,
and that proposal is rejected from the page. Each test keeps a screenshot of its page in
``build/test-artifacts/console/`` (conftest ``shots``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import MISSING, Tab, assert_inert, available
from dreaming_support import dreaming, reviewer, start_suite
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, Suite

pytestmark = pytest.mark.integration
if not available():
    pytest.skip(MISSING, allow_module_level=True)

NOTES = "/api/v1/agents/{agent}/shared/notes"
REFLECT_TIMEOUT_S = 90.0
SAILS = "# Sails\n\n- The jib is in the blue bag.\n- [[sail bags]]\n"
SAIL_BAGS = "# Sail bags\n\n- The jib is in the blue bag.\n- The main is on the boom.\n"
SAILS_MERGED = "# Sails\n\n- The jib is in the blue bag.\n- The main is on the boom.\n"
# Note names refuse / \ [ ] | # ^: the name carries what they allow.
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1"> javascript:window.__pwned=2'
HOSTILE_BODY = "# Lantern\n\n- The lantern hangs by the door.\n- [[anchor]]\n"
ANCHOR = "# Anchor\n\n- The anchor chain is 30 metres long.\n"
ANCHOR_MERGED = "# Anchor\n\n- The lantern hangs by the door.\n- The anchor chain is 30 metres long.\n"
OARS = "# Oars\n\n- Oars hang in the shed.\n- [[oar locks]]\n"
OAR_LOCKS = "# Oar locks\n\n- Oar locks are in the red tin.\n"
OARS_MERGED = "# Oars\n\n- Oars hang in the shed.\n- Oar locks are in the red tin.\n"
VAULTS = {"p-sea": [("sails", SAILS), ("sail bags", SAIL_BAGS)], "p-odd": [(HOSTILE_NAME, HOSTILE_BODY), ("anchor", ANCHOR)],
          "p-lake": [("oars", OARS), ("oar locks", OAR_LOCKS)]}
AGENTS = (("alfred", "p-sea"), ("bob", "p-sea"), ("dora", "p-odd"), ("eve", "p-lake"))


def merge(name: str, content: str, *replaces: str) -> dict[str, Any]:
    return {"decision": "merge", "name": name, "content": content, "replaces": list(replaces), "reason": "one topic"}


@pytest.fixture(scope="module")
def console_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    command = reviewer("reflect.py")  # its arguments are set by configure, once the home exists
    agents: list[dict[str, Any]] = [
        {"id": agent, "dreaming": dreaming(command), "knowledge": {"shared": {"project": project}}}
        for agent, project in AGENTS
    ]

    def configure(config: dict[str, Any], running: Suite) -> None:
        folder = running.home / "replies"
        folder.mkdir(exist_ok=True)
        replies = {"sails": merge("sails", SAILS_MERGED, "sails", "sail bags"),
                   "anchor": merge("anchor", ANCHOR_MERGED, HOSTILE_NAME, "anchor"),
                   "oars": merge("oars", OARS_MERGED, "oars", "oar locks")}
        (folder / "replies.json").write_text(json.dumps(replies), encoding="utf-8")
        for entry in config["agents"]:
            entry["dreaming"]["reviewerCommand"] = reviewer("reflect.py", folder / "replies.json", folder / "calls.txt")

    suite = start_suite(tmp_path_factory.mktemp("console-reflection"), agents, configure=configure)
    try:
        with httpx.Client(base_url=suite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as admin:
            for agent, project in (("alfred", "p-sea"), ("dora", "p-odd"), ("eve", "p-lake")):
                for name, content in VAULTS[project]:
                    made = admin.post(NOTES.format(agent=agent), json={"name": name, "content": content, "confirm": True})
                    assert made.status_code == 200 and made.json()["created"], made.text
        yield suite
    finally:
        suite.stop_all()


def on_disk(suite: Suite, project: str) -> dict[str, bytes]:
    """The bytes of the vault's notes and retired notes by name (its reserved pruned__ notes left out)."""
    folder = suite.home / "shared" / "kb" / project / "notes"
    return {p.stem: p.read_bytes() for p in sorted(folder.glob("*.md")) if not p.stem.startswith("pruned__")}


def runs(http: httpx.Client, project: str) -> list[dict[str, Any]]:
    reply = http.get(f"/api/v1/vaults/{project}/reflection:runs")
    assert reply.status_code == 200, reply.text
    found: list[dict[str, Any]] = reply.json().get("runs", [])
    return found


def open_vault(tab: Tab, agent: str, key: str = ADMIN_KEY) -> None:
    tab.open(f"#/agents/{agent}/vault")
    tab.sign_in(key)
    tab.until("() => document.querySelectorAll('#vault-rows tr').length > 0"
              " && (document.querySelector('#reflection-runs h4') !== null || document.getElementById('reflection-scope') !== null)")


def live_rows(tab: Tab) -> list[str]:
    return list(tab.page.eval_on_selector_all("#vault-rows tr", "rows => rows.map(r => r.dataset.note)"))


def settled(tab: Tab, timeout: float = 10.0) -> str:
    """The section's message once its write and the listing after it are done."""
    tab.until("() => document.getElementById('reflection')?.dataset.busy === undefined"
              " && !document.getElementById('reflection-message').textContent.endsWith('…')", timeout=timeout)
    return str(tab.page.text_content("#reflection-message"))


def test_propose_from_the_page_then_accept_then_revert_puts_the_notes_back(tab: Tab, shots: Path, admin_http: httpx.Client,
        console_suite: Suite) -> None:
    before = on_disk(console_suite, "p-sea")
    assert set(before) == {"sails", "sail bags"}
    open_vault(tab, "alfred")
    assert tab.page.text_content("#reflection-project") == "p-sea"
    assert "no run yet" in tab.page.inner_text("#reflection-runs")
    tab.page.select_option("#reflection-mode", "propose")
    tab.page.click("#reflection-run")  # propose writes nothing: not asked again
    said = settled(tab, REFLECT_TIMEOUT_S)
    assert said.startswith("run R-") and "refused" not in said, said
    assert tab.page.is_enabled("#reflection-run") and tab.page.is_enabled("#reflection-mode")
    [run] = runs(admin_http, "p-sea")
    assert run["mode"] == "propose" and run["trigger"] == "manual" and run["status"] == "ok", run
    [proposal] = run["proposals"]
    assert proposal["state"] == "pending" and sorted(proposal["replaces"]) == ["sail bags", "sails"]
    assert on_disk(console_suite, "p-sea") == before  # a proposal writes nothing

    entry = f"#reflection-runs article[data-run='{run['runId']}']"
    item = f"{entry} li.proposal[data-cluster='{proposal['clusterId']}']"
    head = tab.page.inner_text(entry)
    assert "manual, propose" in head and "1 cluster seen: 1 proposed" in head, head
    shown = tab.page.inner_text(item)
    assert "pending" in shown and "reviewer: one topic" in shown and "into" in shown and "sails" in shown
    diffs = tab.page.eval_on_selector_all(f"{item} .diff", "ds => ds.map(d => d.querySelector('.diff-head').textContent)")
    assert sorted(diffs) == ["sail bags → sails", "sails → sails"]
    added = tab.page.eval_on_selector_all(f"{item} .diff .ins", "rows => rows.map(r => r.textContent)")
    assert "+ - The main is on the boom." in added  # sails gains the line of sail bags
    tab.screenshot(shots, "reflection-proposal")

    tab.page.click(f"{item} button.accept-one")
    assert "sail bags will be retired" in tab.page.inner_text("#reflection-confirm")
    tab.page.click("#reflection-yes")
    said = settled(tab, REFLECT_TIMEOUT_S)
    assert said.startswith(f"accepted {proposal['clusterId']}"), said
    tab.until("sel => document.querySelector(sel)?.dataset.state === 'accepted'", item)
    assert live_rows(tab) == ["sails"]  # the page's notes were read again
    listed = admin_http.get(NOTES.format(agent="alfred"), params={"includeRetired": "true"}).json()["notes"]
    assert sorted(n["name"] for n in listed) == ["sails", "stale__sail bags"]
    merged = admin_http.get(NOTES.format(agent="alfred") + "/sails").json()["content"]
    assert SAILS_MERGED in merged
    decision = runs(admin_http, "p-sea")[0]
    assert decision["reason"] == f"decided proposals of run {run['runId']}"
    assert [c["outcome"] for c in decision["clusters"]] == ["merged"], decision
    tab.screenshot(shots, "reflection-accepted")

    tab.page.click(f"#reflection-runs article[data-run='{decision['runId']}'] button.revert-run")
    assert decision["runId"] in tab.page.inner_text("#reflection-confirm")
    tab.page.click("#reflection-yes")
    said = settled(tab, REFLECT_TIMEOUT_S)
    assert said.startswith(f"reverted {decision['runId']}: restored") and "sail bags" in said, said
    assert on_disk(console_suite, "p-sea") == before
    assert live_rows(tab) == ["sail bags", "sails"]
    tab.until("sel => document.querySelector(sel + ' .run-reverted') !== null"
              " && document.querySelector(sel + ' button.revert-run') === null",
              f"#reflection-runs article[data-run='{decision['runId']}']")
    assert tab.errors == []
    tab.screenshot(shots, "reflection-reverted")


def test_a_key_scoped_to_some_agents_sees_why_the_reflection_is_not_shown(tab: Tab, shots: Path, admin_http: httpx.Client,
        console_suite: Suite) -> None:
    direct = httpx.get(f"{console_suite.base_url}/api/v1/vaults/p-sea/reflection:runs",
                       headers={"X-Api-Key": BOB_WRITER_KEY}, timeout=30)
    assert direct.status_code == 403, direct.text
    open_vault(tab, "bob", BOB_WRITER_KEY)
    said = tab.page.inner_text("#reflection-scope")
    assert 'scope is every agent ("*")' in said
    assert tab.page.query_selector("#reflection-run") is None and tab.page.query_selector(".revert-run") is None
    assert tab.page.text_content("#reflection-project") == "p-sea"
    assert len(tab.page.query_selector_all("#vault-rows tr")) >= 1  # the notes are still listed
    tab.screenshot(shots, "reflection-scoped-key")


def test_a_hostile_note_name_in_a_cluster_and_a_proposal_is_text_and_the_proposal_rejected(tab: Tab, shots: Path, admin_http: httpx.Client,
        console_suite: Suite) -> None:
    before = on_disk(console_suite, "p-odd")
    reply = admin_http.post("/api/v1/vaults/p-odd/reflection:run", json={"mode": "propose"}, timeout=REFLECT_TIMEOUT_S)
    assert reply.status_code == 200, reply.text
    run = reply.json()
    assert [c["outcome"] for c in run["clusters"]] == ["proposed"], run
    open_vault(tab, "dora")
    entry = f"#reflection-runs article[data-run='{run['runId']}']"
    names = tab.page.eval_on_selector_all(f"{entry} q.note-name", "qs => qs.map(q => q.textContent)")
    assert names.count(HOSTILE_NAME) == 2  # the cluster's notes and the proposal's
    heads = tab.page.eval_on_selector_all(f"{entry} .diff-head", "hs => hs.map(h => h.textContent)")
    assert f"{HOSTILE_NAME} → anchor" in heads
    tab.page.click(f"{entry} li.cluster q.note-name button.note-link >> nth=0")  # a name opens its note
    tab.until("name => document.getElementById('vault-note-name')?.textContent === name"
              " && document.getElementById('vault-note-text')?.textContent.includes('lantern hangs')", HOSTILE_NAME)
    tab.page.click(f"{entry} li.proposal button.accept-one")
    assert HOSTILE_NAME in tab.page.inner_text("#reflection-confirm")
    tab.page.click("#reflection-no")
    assert tab.page.is_hidden("#reflection-confirm")
    tab.page.click(f"{entry} li.proposal button.reject-one")  # writes no note: not asked again
    said = settled(tab, REFLECT_TIMEOUT_S)
    assert said.startswith(f"rejected {run['proposals'][0]['clusterId']}"), said
    tab.until("sel => document.querySelector(sel + ' li.proposal')?.dataset.state === 'rejected'"
              " && document.querySelector(sel + ' li.proposal .op-controls') === null", entry)
    assert_inert(tab)
    assert on_disk(console_suite, "p-odd") == before
    tab.screenshot(shots, "reflection-hostile")


def test_a_proposal_whose_note_changed_since_is_accepted_as_stale_and_nothing_merges(tab: Tab, shots: Path, admin_http: httpx.Client,
        console_suite: Suite) -> None:
    reply = admin_http.post("/api/v1/vaults/p-lake/reflection:run", json={"mode": "propose"}, timeout=REFLECT_TIMEOUT_S)
    assert reply.status_code == 200, reply.text
    run = reply.json()
    [proposal] = run["proposals"]
    edited = OAR_LOCKS + "- Spare locks are in the drawer.\n"
    put = admin_http.put(NOTES.format(agent="eve") + "/oar%20locks", json={"content": edited, "confirm": True})
    assert put.status_code == 200, put.text
    before = on_disk(console_suite, "p-lake")
    open_vault(tab, "eve")
    item = f"#reflection-runs article[data-run='{run['runId']}'] li.proposal[data-cluster='{proposal['clusterId']}']"
    added = tab.page.eval_on_selector_all(f"{item} .diff .del", "rows => rows.map(r => r.textContent)")
    assert "- - Spare locks are in the drawer." in added  # the diff is from the note as it is now
    tab.page.click(f"{item} button.accept-one")
    tab.page.click("#reflection-yes")
    said = settled(tab, REFLECT_TIMEOUT_S)
    assert said.startswith(f"accepted {proposal['clusterId']}") and "1 changed" in said, said
    tab.until("sel => document.querySelector(sel)?.dataset.state === 'stale'", item)
    decision = runs(admin_http, "p-lake")[0]
    assert [c["outcome"] for c in decision["clusters"]] == ["changed"] and decision["clusters"][0]["reason"], decision
    shown = tab.page.inner_text(f"#reflection-runs article[data-run='{decision['runId']}']")
    assert "changed" in shown and decision["clusters"][0]["reason"] in shown
    assert tab.page.query_selector(f"#reflection-runs article[data-run='{decision['runId']}'] button.revert-run") is None
    assert on_disk(console_suite, "p-lake") == before
    tab.screenshot(shots, "reflection-stale")
