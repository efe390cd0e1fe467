"""The restart table (docs/concepts/sessions.md "Sessions and restarts") and the session registry, with an injected clock."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidArgument, NotFound
from services.watcher.restart_policy import ChangeClass, DirectiveKind, classify, decide
from services.watcher.sessions import SessionRegistry


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"MEMORY.md"}, ChangeClass.MEMORY),
        ({"USER.md", "MEMORY.md"}, ChangeClass.MEMORY),
        ({"SOUL.md"}, ChangeClass.IDENTITY),
        ({"AGENTS.md"}, ChangeClass.IDENTITY),
        ({"IDENTITY.md", "MEMORY.md"}, ChangeClass.IDENTITY),
        ({"HEARTBEAT.md"}, ChangeClass.OTHER),
        ({"HEARTBEAT.md", "SOUL.md", "MEMORY.md"}, ChangeClass.OTHER),
        ({"notes.txt"}, ChangeClass.OTHER),
        (set(), None),
    ],
)
def test_classify_takes_the_strongest_class(files: set[str], expected: ChangeClass | None) -> None:
    assert classify(files) == expected


@pytest.mark.parametrize(
    ("change", "busy", "kind"),
    [
        (ChangeClass.MEMORY, True, None),
        (ChangeClass.MEMORY, False, None),
        (ChangeClass.IDENTITY, True, None),
        (ChangeClass.IDENTITY, False, DirectiveKind.RESPAWN_ON_NEXT_MESSAGE),
        (ChangeClass.OTHER, True, DirectiveKind.RESTART_WHEN_IDLE),
        (ChangeClass.OTHER, False, DirectiveKind.RESTART_NOW),
    ],
)
def test_decide_matches_the_spec_table(change: ChangeClass, busy: bool, kind: DirectiveKind | None) -> None:
    assert decide(change, busy) == kind


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def test_registry_lifecycle_and_activity() -> None:
    clock = Clock()
    reg = SessionRegistry(clock=clock)
    assert reg.last_activity("a") == 0
    s1 = reg.register("a", "s1", busy=False)
    clock.now = 2_000
    reg.register("a", "s2", busy=True)
    assert [r.session_id for r in reg.live("a")] == ["s1", "s2"]
    assert s1.started_at_ms == 1_000 and reg.last_activity("a") == 2_000
    clock.now = 3_000
    record, due = reg.report("a", "s1", busy=True)
    assert record.busy and due is None and reg.last_activity("a") == 3_000
    with pytest.raises(NotFound):
        reg.report("a", "ghost", busy=False)
    clock.now = 4_000
    assert reg.end("a", "s1") is True and reg.end("a", "s1") is False
    assert reg.last_activity("a") == 4_000
    assert reg.register("a", "", busy=False).session_id  # generated id
    with pytest.raises(InvalidArgument):
        reg.register("a", "x" * 200, busy=False)


def test_apply_change_and_the_deferred_restart() -> None:
    reg = SessionRegistry(clock=Clock())
    reg.register("a", "busy", busy=True)
    reg.register("a", "idle", busy=False)
    assert reg.apply_change("a", ChangeClass.MEMORY, ("MEMORY.md",), 1) == []
    identity = reg.apply_change("a", ChangeClass.IDENTITY, ("SOUL.md",), 2)
    assert [(d.session_id, d.kind) for d in identity] == [("idle", DirectiveKind.RESPAWN_ON_NEXT_MESSAGE)]
    other = reg.apply_change("a", ChangeClass.OTHER, ("HEARTBEAT.md",), 3)
    assert {d.session_id: d.kind for d in other} == {"busy": DirectiveKind.RESTART_WHEN_IDLE, "idle": DirectiveKind.RESTART_NOW}
    _, due = reg.report("a", "busy", busy=False)
    assert due is not None and due.kind is DirectiveKind.RESTART_NOW and due.generation == 3
    assert reg.get("a", "busy").pending == due
