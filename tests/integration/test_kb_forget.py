"""ForgetText through the real KB process: a text planted in an agent's memory files and in a shared
note is reported without the text, then (once the files were rewritten, as dreaming does) forgotten:
no search finds it, no 8-character run of it is left in the archive's or the vault's bytes, and every
fact planted beside it is still found. Who may forget: write access to the agent, and a key whose scope
is ``*`` for the vault."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from forget_support import PLANTED, TOMBSTONE, residue, scrub_file
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite, make_home, wait_until

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.forgetting import SHARED_SCOPE, VAULT_FILE, Target, Tombstones, read_file
from gateway.home import read_internal_token
from gateway.tombstone_proto import to_proto
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
ADMIN = (("x-api-key", ADMIN_KEY),)
FILES = {
    "MEMORY.md": f"# Memory\n\n- The quokka lives on Rottnest Island.\n- {PLANTED}.\n",
    "memory/2026-11-02.md": f"# Day\n\nThe nightly backup runs at 03:00.\n\n{PLANTED}\n",
}


@pytest.fixture(scope="module")
def fsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [{"id": "alfred"}, {"id": "bob"}, {"id": "hermit", "knowledge": {"shared": {"enabled": False}}}]
    home, ports, http_port = make_home(tmp_path_factory.mktemp("forget"), agents)
    for agent in ("alfred", "bob", "hermit"):
        (home / "agents" / agent / "workspace" / "memory").mkdir(parents=True)
    running = Suite(home, http_port, ports)
    try:
        running.start("kb")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(fsuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(fsuite.address("kb")) as channel:
        yield kb_pb2_grpc.KnowledgeStub(channel)


def _paths(kb: kb_pb2_grpc.KnowledgeStub, query: str, corpus: str) -> list[str]:
    found = kb.Search(pb.SearchRequest(agent_id="alfred", query=query, corpus=corpus, limit=10, refresh=True),
                      metadata=ADMIN, timeout=30)
    return sorted(h.path for h in found.hits)


def _code(call) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def test_forget_reports_then_removes_the_text_from_the_archive_and_the_vault(fsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    workspace = fsuite.home / "agents" / "alfred" / "workspace"
    for rel, text in FILES.items():
        (workspace / rel).write_text(text, encoding="utf-8")
    kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="alfred", name="garden", confirm=True,
                                                   content="# Garden\n\nThe tamarind tree fruits in March.\n"),
                        metadata=ADMIN, timeout=30)
    # The planted text holds an AWS-style key, which the KB refuses in a shared note it is asked to write
    # (docs/concepts/secrets.md); a note written straight into the vault's folder is indexed all the same.
    notes = fsuite.home / "shared" / "kb" / "global" / "notes"
    (notes / "park-notes.md").write_text(f"# Park notes\n\nA bench by the pond.\n\n{PLANTED}\n", encoding="utf-8")
    expected = ["MEMORY.md", "memory/2026-11-02.md", "notes/park-notes.md"]
    wait_until(lambda: _paths(kb, "Quabbleworth", "all") == expected, 30, "the note written on disk to be indexed")

    dry = kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", text=PLANTED, shared=True), metadata=ADMIN, timeout=60)
    assert PLANTED.lower() not in str(dry).lower()
    assert [(s.store, [(p.place, p.count, list(p.lines)) for p in s.places], s.purged) for s in dry.stores] == [
        ("archive", [("MEMORY.md", 1, [4]), ("memory/2026-11-02.md", 1, [5])], False),
        ("vault:global", [("notes/park-notes.md", 1, [5])], False),
    ]

    target = Target.parse(PLANTED, None)
    for rel in FILES:  # dreaming's part: the workspace's files, rewritten with the marker
        scrub_file(workspace / rel, target)
    applied = kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", text=PLANTED, shared=True, apply=True,
                                                 tombstone_id=TOMBSTONE, changed_paths=[*FILES, "SOUL.md"]),
                            metadata=ADMIN, timeout=120)
    assert [(s.store, s.purged, list(s.left)) for s in applied.stores] == [("archive", True, []), ("vault:global", True, [])]
    assert [p.place for p in applied.stores[1].places] == ["notes/park-notes.md"]

    assert _paths(kb, "Quabbleworth", "all") == []
    assert _paths(kb, "ZX7QPLMNB4RTYUWE", "all") == []
    assert _paths(kb, "quokka", "memory") == ["MEMORY.md"]
    assert _paths(kb, "backup", "memory") == ["memory/2026-11-02.md"]
    assert _paths(kb, "tamarind", "shared") == ["notes/garden.md"]
    vault = fsuite.home / "shared" / "kb" / "global"
    files: list[Path] = [fsuite.home / "agents" / "alfred" / "kb.sqlite", *sorted(vault.rglob("*.md")), vault / "kb.sqlite",
                         fsuite.log_path("kb")]  # the KB's own log never held it
    assert residue(files) == []


def test_who_may_forget_and_what_is_refused(fsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    def forget(agent: str, key: str, **fields: object) -> None:
        kb.ForgetText(pb.ForgetTextRequest(agent_id=agent, **fields), metadata=(("x-api-key", key),), timeout=60)

    denied = grpc.StatusCode.PERMISSION_DENIED
    assert _code(lambda: forget("alfred", READER_KEY, text="spare key")) == denied  # read access only
    assert _code(lambda: forget("alfred", BOB_WRITER_KEY, text="spare key")) == denied  # another agent's key
    assert _code(lambda: forget("bob", BOB_WRITER_KEY, text="spare key", shared=True)) == denied  # the vault: scope "*"
    forget("bob", BOB_WRITER_KEY, text="spare key")  # its own agent's archive: allowed
    bad = grpc.StatusCode.INVALID_ARGUMENT
    assert _code(lambda: forget("alfred", ADMIN_KEY, text="spare key", pattern="x+")) == bad
    assert _code(lambda: forget("alfred", ADMIN_KEY, pattern="a*")) == bad  # matches the empty string
    assert _code(lambda: forget("alfred", ADMIN_KEY, text="spare key", apply=True)) == bad  # no tombstone id
    assert _code(lambda: forget("alfred", ADMIN_KEY, text="spare key", apply=True, tombstone_id=TOMBSTONE,
                                changed_paths=["../bob/workspace/MEMORY.md"])) == bad
    assert _code(lambda: forget("hermit", ADMIN_KEY, text="spare key", shared=True)) == grpc.StatusCode.FAILED_PRECONDITION


def test_a_note_named_with_the_text_is_renamed_and_no_byte_of_its_name_is_left(
        fsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    """A note whose name holds the text is renamed (the name-safe marker in place of the text), its authors
    and the links to it following; no reply shows the old name, and no byte of it is left in the vault."""
    text = "Ottoline Brasswick"
    new = f"forgotten {TOMBSTONE} contacts"
    for name, content in ((f"{text} contacts", f"# Contacts\n\n{text} moved to Leeds.\n"),
                          ("people", f"# People\n\n- [[{text} contacts|the card]]\n")):
        kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="alfred", name=name, confirm=True, content=content),
                            metadata=ADMIN, timeout=30)
    for apply in (False, True):
        reply = kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", text=text, shared=True, apply=apply,
                                                   tombstone_id=TOMBSTONE), metadata=ADMIN, timeout=120)
        assert "brasswick" not in str(reply).lower()
        vault = reply.stores[1]
        assert list(vault.left) == []
        assert [(p.place, p.kind) for p in vault.places if p.kind == "name"] == [
            (f"notes/[forgotten {TOMBSTONE}] contacts.md", "name")]
    got = kb.GetSharedNote(pb.GetSharedNoteRequest(agent_id="alfred", name=new), metadata=ADMIN, timeout=30)
    assert got.content == f"# Contacts\n\n[forgotten {TOMBSTONE}] moved to Leeds.\n"
    people = kb.GetSharedNote(pb.GetSharedNoteRequest(agent_id="alfred", name="people"), metadata=ADMIN, timeout=30)
    assert people.content == f"# People\n\n- [[{new}|the card]]\n"
    assert _code(lambda: kb.GetSharedNote(pb.GetSharedNoteRequest(agent_id="alfred", name=f"{text} contacts"),
                                          metadata=ADMIN, timeout=30)) == grpc.StatusCode.NOT_FOUND
    vault_dir = fsuite.home / "shared" / "kb" / "global"
    assert residue([*sorted(vault_dir.rglob("*.md")), vault_dir / "kb.sqlite"], text) == []


def test_a_pattern_applied_names_the_strings_it_matched_in_the_vault_for_the_tombstones(
        fsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="alfred", name="badges", confirm=True,
                                                   content="# Badges\n\n- door badge 4471-K\n- gate badge 9902-Q\n- door badge 4471-K\n"),
                        metadata=ADMIN, timeout=30)
    pattern = r"badge [0-9]{4}-[A-Z]"
    dry = kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", pattern=pattern, shared=True), metadata=ADMIN, timeout=60)
    assert list(dry.matched) == []  # a dry run names places only
    done = kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", pattern=pattern, shared=True, apply=True,
                                              tombstone_id=TOMBSTONE), metadata=ADMIN, timeout=120)
    assert list(done.matched) == ["badge 4471-K", "badge 9902-Q"]
    text = kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", text="gate badge", shared=True, apply=True,
                                              tombstone_id=TOMBSTONE), metadata=ADMIN, timeout=120)
    assert list(text.matched) == []  # a text is its own tombstone


def test_a_shared_forgets_tombstones_go_to_the_sqlite_vault_and_its_mirror_and_a_lift_takes_them_out(
        fsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    """The one mechanism on a SQLite vault too (docs/concepts/forget.md "Shared tombstones across hosts"):
    ForgetText's tombstones kept in the vault and mirrored into forget/vault-tombstones.json, which every
    check of the home reads; ShareTombstones (internal only) lifts them."""
    forget_id = "F-00000000aa01"
    [made] = Tombstones(fsuite.home / "elsewhere").add(forget_id, ["Wilhelmina Quarrington"], scope=SHARED_SCOPE,
                                                       at="2026-12-07T05:00:00Z", by="admin", places=0)
    stray = pb.ForgetTextRequest(agent_id="alfred", text="Wilhelmina Quarrington", shared=True, apply=True,
                                 tombstone_id="F-00000000aa02", tombstones=[to_proto(made)])
    assert _code(lambda: kb.ForgetText(stray, metadata=ADMIN, timeout=60)) == grpc.StatusCode.INVALID_ARGUMENT
    kb.ForgetText(pb.ForgetTextRequest(agent_id="alfred", text="Wilhelmina Quarrington", shared=True, apply=True,
                                       tombstone_id=forget_id, tombstones=[to_proto(made)]), metadata=ADMIN, timeout=120)
    mirror = fsuite.home / "forget" / VAULT_FILE
    assert read_file(mirror) == [made] and stat.S_IMODE(mirror.stat().st_mode) == 0o600
    with pytest.raises(grpc.RpcError) as refused:
        kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="bob", name="quarrington", confirm=True,
                                                       content="# Q\n\n- wilhelmina QUARRINGTON called\n"),
                            metadata=ADMIN, timeout=30)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and forget_id in (refused.value.details() or "")

    lift = pb.ShareTombstonesRequest(agent_id="alfred", lift=forget_id)
    assert _code(lambda: kb.ShareTombstones(lift, metadata=ADMIN, timeout=30)) == grpc.StatusCode.PERMISSION_DENIED
    internal = ((INTERNAL_TOKEN_HEADER, read_internal_token(fsuite.home)),)  # dreaming's calls carry it
    bad = pb.ShareTombstonesRequest(agent_id="alfred", tombstones=[pb.VaultTombstone(tombstone_id=forget_id, digest="x")])
    assert _code(lambda: kb.ShareTombstones(bad, metadata=internal, timeout=30)) == grpc.StatusCode.INVALID_ARGUMENT
    done = kb.ShareTombstones(lift, metadata=internal, timeout=30)
    assert (done.added, done.lifted, done.held) == (0, 1, 0) and read_file(mirror) == []
    kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="bob", name="quarrington", confirm=True,
                                                   content="# Q\n\n- wilhelmina QUARRINGTON called\n"), metadata=ADMIN, timeout=30)
