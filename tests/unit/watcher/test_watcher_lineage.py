"""Lineage (docs/concepts/lineage.md): what each composition read, what last changed it, per-session diffs, the bound."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gateway.config import AgentConfig, load_config
from gateway.home import ensure_home
from gateway.put_record import last_put, record_put
from services.watcher import lineage_store as store
from services.watcher import lineage_view
from services.watcher.compose import compose
from services.watcher.lineage import KEEP_COMPOSITIONS, Lineage
from services.watcher.lineage_view import bounded_diff
from services.watcher.origins import DREAM, JOURNAL, MISSING, PUT, UNKNOWN, Origin
from services.watcher.sessions import SessionRegistry


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        self.now += 1000
        return self.now


@pytest.fixture
def agent(tmp_path: Path) -> AgentConfig:
    assert ensure_home(tmp_path) is not None
    alfred = load_config(tmp_path).agents[0]
    alfred.workspace.mkdir(parents=True, exist_ok=True)
    return alfred


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(agent: AgentConfig, name: str, text: str) -> None:
    (agent.workspace / name).write_text(text, encoding="utf-8")


def put(agent: AgentConfig, name: str, text: str, at_ms: int) -> None:
    record_put(agent.agent_dir, name, text.encode("utf-8"), at_ms)
    write(agent, name, text)


def record(lineage: Lineage, agent: AgentConfig):  # type: ignore[no-untyped-def]
    return lineage.record(agent, compose(agent.workspace, agent.memory, agent.knowledge.archive.enabled))


def test_a_composition_records_every_source_hash_and_what_wrote_it(agent: AgentConfig) -> None:
    put(agent, "MEMORY.md", "# Memory\n\n- one\n", at_ms=1_700_000_000_000)
    write(agent, "SOUL.md", "# Soul\n")
    entry = record(Lineage(clock=Clock()), agent)
    memory, soul, user = entry.source("MEMORY.md"), entry.source("SOUL.md"), entry.source("USER.md")
    assert memory is not None and soul is not None and user is not None
    assert memory.sha256 == sha("# Memory\n\n- one\n") and memory.origin.kind == PUT
    assert memory.origin.describe() == "PUT at 2023-11-14 22:13:20 UTC"
    assert soul.origin.kind == UNKNOWN and soul.origin.describe() == "unknown (edited on disk)"
    assert user.sha256 is None and user.origin.kind == MISSING
    assert entry.claude_md_sha256 == sha(compose(agent.workspace, agent.memory, agent.knowledge.archive.enabled).text)
    assert store.read_revision(store.lineage_dir(agent.agent_dir), memory.sha256) == "# Memory\n\n- one\n"


def test_a_dream_run_is_named_from_the_journal_and_the_newer_writer_wins(agent: AgentConfig) -> None:
    text = "# Memory\n\n- dreamt\n"
    put(agent, "MEMORY.md", text, at_ms=1_000)
    journal = agent.workspace / JOURNAL
    journal.parent.mkdir(parents=True)
    lines = [{"kind": "edit", "run": "20261206T030000Z-ab12", "file": "MEMORY.md", "hashAfter": sha(text),
              "at": "2026-12-06T03:00:05+00:00"}, {"kind": "revert", "run": "x"}]
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines) + "{torn", encoding="utf-8")
    memory = record(Lineage(clock=Clock()), agent).source("MEMORY.md")
    assert memory is not None and memory.origin.kind == DREAM
    assert memory.origin.run_id == "20261206T030000Z-ab12" and memory.origin.describe() == "dream run 20261206T030000Z-ab12"


def test_a_put_record_names_only_the_content_it_wrote(agent: AgentConfig) -> None:
    put(agent, "MEMORY.md", "# Memory\n\n- put\n", at_ms=5_000)
    write(agent, "MEMORY.md", "# Memory\n\n- edited on disk\n")
    memory = record(Lineage(clock=Clock()), agent).source("MEMORY.md")
    assert memory is not None and memory.origin.kind == UNKNOWN
    assert last_put(agent.agent_dir, "MEMORY.md") is not None
    (store.lineage_dir(agent.agent_dir).parent / "puts" / "USER.md.json").write_text("not json")
    assert last_put(agent.agent_dir, "USER.md") is None


def test_the_same_bytes_add_no_composition_and_a_change_adds_one_keeping_unchanged_origins(agent: AgentConfig) -> None:
    put(agent, "SOUL.md", "# Soul\n", at_ms=7_000)
    lineage = Lineage(clock=Clock())
    first = record(lineage, agent)
    assert record(lineage, agent) == first
    write(agent, "MEMORY.md", "# Memory\n\n- new\n")
    second = record(lineage, agent)
    assert second.id == first.id + 1
    assert second.source("SOUL.md") == first.source("SOUL.md")  # carried over, PUT at 7,000
    assert store.load(store.lineage_dir(agent.agent_dir)) == [first, second]
    assert record(Lineage(clock=Clock()), agent) == second  # a restarted watcher reads the file back


def test_a_session_sees_its_revision_and_a_diff_to_todays_file_until_it_registers_again(agent: AgentConfig) -> None:
    write(agent, "MEMORY.md", "# Memory\n\n- old fact\n")
    lineage = Lineage(clock=Clock())
    registry = SessionRegistry(clock=Clock())
    first = record(lineage, agent)
    session = registry.register(agent.id, "s1", busy=False)
    lineage.tie(agent, "s1", ["s1"])
    write(agent, "MEMORY.md", "# Memory\n\n- new fact\n")
    second = record(lineage, agent)
    view = lineage.view(agent, [session])
    (one,) = view.sessions
    assert one.composition == first and [c.id for c in view.compositions] == [second.id, first.id]
    memory = next(s for s in one.sources if s.name == "MEMORY.md")
    assert memory.differs and memory.revision.sha256 == sha("# Memory\n\n- old fact\n")
    assert memory.today.sha256 == sha("# Memory\n\n- new fact\n")
    assert "-- old fact\n" in memory.diff and "+- new fact\n" in memory.diff and not memory.diff_truncated
    assert not next(s for s in one.sources if s.name == "SOUL.md").differs
    lineage.tie(agent, "s1", ["s1"])  # re-registered after a restart directive
    (again,) = lineage.view(agent, [session]).sessions
    assert again.composition == second and not any(s.differs for s in again.sources)


def test_history_keeps_the_newest_compositions_and_those_live_sessions_point_to(agent: AgentConfig) -> None:
    lineage = Lineage(clock=Clock())
    write(agent, "MEMORY.md", "# Memory\n\n- v0\n")
    pinned = record(lineage, agent)
    lineage.tie(agent, "old", ["old"])
    for n in range(1, KEEP_COMPOSITIONS + 5):
        write(agent, "MEMORY.md", f"# Memory\n\n- v{n}\n")
        record(lineage, agent)
    kept = store.load(store.lineage_dir(agent.agent_dir))
    assert len(kept) == KEEP_COMPOSITIONS + 1 and kept[0] == pinned
    revisions = sorted(p.name for p in (store.lineage_dir(agent.agent_dir) / store.REVISIONS).iterdir())
    named = sorted({s.sha256 for e in kept for s in e.sources if s.sha256})
    assert revisions == named  # the unpinned old revisions were deleted
    lineage.tie(agent, "new", ["new"])  # "old" ended: its tie goes, and so does its composition next time
    write(agent, "MEMORY.md", "# Memory\n\n- last\n")
    record(lineage, agent)
    assert pinned not in store.load(store.lineage_dir(agent.agent_dir))


def test_a_revision_too_large_to_keep_has_its_hash_but_no_diff(agent: AgentConfig) -> None:
    big = "# Memory\n\n" + "- a long line of memory\n" * (store.MAX_REVISION_BYTES // 20)
    write(agent, "MEMORY.md", big)
    lineage = Lineage(clock=Clock())
    entry = record(lineage, agent)
    session = SessionRegistry(clock=Clock()).register(agent.id, "s1", busy=True)
    lineage.tie(agent, "s1", ["s1"])
    write(agent, "MEMORY.md", "# Memory\n")
    (one,) = lineage.view(agent, [session]).sessions
    memory = next(s for s in one.sources if s.name == "MEMORY.md")
    assert entry.source("MEMORY.md") is not None and memory.differs and memory.diff == ""
    assert "was not kept" in memory.diff_unavailable


def test_a_session_registered_before_any_composition_has_none(agent: AgentConfig) -> None:
    lineage = Lineage(clock=Clock())
    session = SessionRegistry(clock=Clock()).register(agent.id, "early", busy=False)
    lineage.tie(agent, "early", ["early"])
    view = lineage.view(agent, [session])
    assert view.compositions == () and view.sessions[0].composition is None and view.sessions[0].sources == ()


def test_the_diff_is_cut_at_a_line_end_within_its_bound() -> None:
    old = "".join(f"line {n}\n" for n in range(2000))
    diff, cut = bounded_diff("MEMORY.md", old, "", limit=500)
    assert cut and len(diff) <= 500 and diff.endswith("\n")
    assert bounded_diff("MEMORY.md", "a\n", "b", limit=500) == ("--- MEMORY.md (session)\n+++ MEMORY.md (today)\n@@ -1 +1 @@\n-a\n+b\n", False)


def test_the_journal_is_read_again_once_a_dream_run_appended_to_it(agent: AgentConfig) -> None:
    lineage = Lineage(clock=Clock())
    write(agent, "MEMORY.md", "# Memory\n\n- by hand\n")
    journal = agent.workspace / JOURNAL
    journal.parent.mkdir(parents=True)
    journal.write_text("", encoding="utf-8")
    assert record(lineage, agent).source("MEMORY.md").origin.kind == UNKNOWN  # type: ignore[union-attr]
    dreamt = "# Memory\n\n- dreamt\n"
    line = {"kind": "edit", "run": "r2", "file": "MEMORY.md", "hashAfter": sha(dreamt), "at": "2026-12-06T03:00:05Z"}
    journal.write_text(json.dumps(line) + "\n", encoding="utf-8")
    write(agent, "MEMORY.md", dreamt)
    assert record(lineage, agent).source("MEMORY.md").origin == Origin(DREAM, 1_796_526_005_000, "r2")  # type: ignore[union-attr]


def test_the_diffs_of_one_answer_stop_at_their_budget(agent: AgentConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    write(agent, "MEMORY.md", "# Memory\n\n- old\n")
    lineage = Lineage(clock=Clock())
    record(lineage, agent)
    registry = SessionRegistry(clock=Clock())
    sessions = [registry.register(agent.id, sid, busy=False) for sid in ("a", "b")]
    for sid in ("a", "b"):
        lineage.tie(agent, sid, ["a", "b"])
    write(agent, "MEMORY.md", "# Memory\n\n- new\n")
    one_diff = len(bounded_diff("MEMORY.md", "# Memory\n\n- old\n", "# Memory\n\n- new\n")[0])
    monkeypatch.setattr(lineage_view, "MAX_ANSWER_DIFF_BYTES", one_diff)
    first, second = (next(s for s in v.sources if s.name == "MEMORY.md") for v in lineage.view(agent, sessions).sessions)
    assert first.diff and not first.diff_unavailable
    assert second.differs and second.diff == "" and second.diff_unavailable.startswith("left out: this answer's diffs")
