"""What a forget matches and the tombstones it leaves (gateway.forgetting)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from gateway import forgetting
from gateway.errors import InvalidArgument, NotFound
from gateway.forgetting import SHARED_SCOPE, Target, Tombstones, marker, words

SECRET = "AKIAIOSFODNN7EXAMPLE"


def test_a_text_matches_across_case_and_line_breaks_and_nothing_else() -> None:
    target = Target.parse("Alice's phone is 555-0142", None)
    text = "- alice's PHONE\n  is 555-0142.\n- Alice's phone is 555-0143\n- Bob's phone is 555-0142\n"
    scrubbed, count = target.scrub(text, "F-abc")
    assert count == 1
    assert scrubbed == "- [forgotten F-abc].\n- Alice's phone is 555-0143\n- Bob's phone is 555-0142\n"


def test_a_pattern_is_searched_as_given_and_every_match_counts() -> None:
    target = Target.parse(None, r"AKIA[0-9A-Z]{16}")
    scrubbed, count = target.scrub(f"key={SECRET}\nold: AKIAABCDEFGHIJKLMNOP\nAKIA-not\n", "F-1")
    assert count == 2 and SECRET not in scrubbed and scrubbed.endswith("AKIA-not\n")
    assert [m.group(0) for m in target.finditer(f"x {SECRET} y")] == [SECRET]


def test_a_target_is_compiled_once_however_many_texts_it_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forget searches every note and chunk of a vault: building the search again for each (escaping the
    text) once cost more than the searches (docs/benchmarks/forget.md)."""
    import gateway.forgetting as forgetting

    engine = forgetting._engine()
    built: list[str] = []

    def counting() -> object:
        built.append("engine")
        return engine

    monkeypatch.setattr(forgetting, "_engine", counting)
    for target in (Target(text="Alice's phone is 555-0142"), Target(pattern=r"AKIA[0-9A-Z]{16}")):
        built.clear()
        for n in range(50):
            target.finditer(f"note {n}: nothing here")
            target.scrub(f"note {n}: alice's phone is 555-0142, AKIAIOSFODNN7EXAMPLE", "F-1")
        assert built == ["engine"]


@pytest.mark.parametrize(("text", "pattern", "says"), [
    (None, None, "exactly one"),
    ("alice", "alice", "exactly one"),
    ("a b", None, "at least 4"),
    ("x" * 5000, None, "at most 4096"),
    (None, "(", "not a valid regular expression"),
    (None, "a*", "empty string"),
    (None, "y" * 600, "at most 512"),
])
def test_a_bad_target_is_refused_naming_what_is_wrong(text: str | None, pattern: str | None, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        Target.parse(text, pattern)


def test_words_are_normalized_letters_and_digits() -> None:
    assert words("Ｃafé, the  CAFÉ!\nline-2") == ["café", "the", "café", "line", "2"]


def test_a_tombstone_holds_no_word_of_the_text_and_finds_it_again(tmp_path: Path) -> None:
    stones = Tombstones(tmp_path)
    made = stones.add("F-0001", ["Alice's phone is 555-0142", "alice's   PHONE is 555 0142"], scope="alfred",
                      at="2026-12-07T00:00:00Z", by="admin", places=3)
    assert [t.id for t in made] == ["F-0001"]  # the two spell the same words: one tombstone
    raw = (tmp_path / "forget" / "tombstones.json").read_text()
    assert "alice" not in raw.lower() and "0142" not in raw
    assert stat.S_IMODE((tmp_path / "forget" / "salt").stat().st_mode) == 0o600
    proposal = "Remember: ALICE'S phone -- is 555/0142 (ask first)"
    assert [t.id for t in stones.matches(proposal, "alfred")] == ["F-0001"]
    assert stones.matches(proposal, "bob") == []  # another agent's tombstone
    assert stones.matches("Alice's phone is 555-0143", "alfred") == []


def test_shared_tombstones_apply_to_every_agent_and_can_be_lifted(tmp_path: Path) -> None:
    stones = Tombstones(tmp_path)
    stones.add("F-0002", [SECRET, "hunter2 hunter3"], scope=SHARED_SCOPE, at="t", by="admin", places=1)
    assert [t.id for t in stones.all()] == ["F-0002", "F-0002.2"]
    assert [t.id for t in stones.matches(f"use {SECRET.lower()} now", "anyone")] == ["F-0002"]
    assert stones.add("F-0003", [SECRET], scope=SHARED_SCOPE, at="t", by="admin", places=1) == []  # known already
    assert stones.lift("F-0002").id == "F-0002"
    assert stones.all() == [] and stones.matches(SECRET, "anyone") == []
    with pytest.raises(NotFound):
        stones.lift("F-0002")


def test_the_salt_is_the_homes_own(tmp_path: Path) -> None:
    one, two = Tombstones(tmp_path / "a"), Tombstones(tmp_path / "b")
    one.add("F-1", [SECRET], scope="x", at="t", by="k", places=1)
    two.add("F-1", [SECRET], scope="x", at="t", by="k", places=1)
    digests = [json.loads((tmp_path / h / "forget" / "tombstones.json").read_text())[0]["digest"] for h in "ab"]
    assert digests[0] != digests[1]


def test_the_marker_names_the_tombstone() -> None:
    assert marker("F-12ab") == "[forgotten F-12ab]"


def test_a_check_rereads_the_file_only_when_it_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stones = Tombstones(tmp_path)
    stones.add("F-0004", ["Alice's phone is 555-0142"], scope="alfred", at="t", by="k", places=1)
    reads: list[int] = []
    real = forgetting.read_file

    def counting(path: Path) -> object:
        reads.append(1)
        return real(path)

    monkeypatch.setattr(forgetting, "read_file", counting)
    for _ in range(3):
        assert [t.id for t in Tombstones(tmp_path).matches("alice's phone is 555-0142", "alfred")] == ["F-0004"]
    assert len(reads) == 1  # the first check read it; the others cost a stat
    stones.add("F-0005", ["Bob's phone is 555-0199"], scope="alfred", at="t", by="k", places=1)
    reads.clear()
    assert [t.id for t in Tombstones(tmp_path).matches("bob's phone is 555-0199", "alfred")] == ["F-0005"]
    assert len(reads) == 1  # the changed file, read again once


def test_a_tombstone_holds_a_lead_of_its_first_word_and_one_without_a_lead_still_matches(tmp_path: Path) -> None:
    stones = Tombstones(tmp_path)
    (made,) = stones.add("F-0006", ["Alice's phone is 555-0142"], scope="alfred", at="t", by="k", places=1)
    assert len(made.lead) == 4 and int(made.lead, 16) >= 0
    path = tmp_path / "forget" / "tombstones.json"
    rows = json.loads(path.read_text())
    del rows[0]["lead"]  # as written before leads existed
    path.write_text(json.dumps(rows))
    found = stones.matches("so: ALICE'S phone is 555 0142!", "alfred")
    assert [(t.id, t.lead) for t in found] == [("F-0006", "")]


def test_apply_to_says_whether_any_tombstone_applies(tmp_path: Path) -> None:
    stones = Tombstones(tmp_path)
    assert not stones.apply_to("alfred")
    stones.add("F-0007", ["Alice's phone is 555-0142"], scope="bob", at="t", by="k", places=1)
    assert stones.apply_to("bob") and not stones.apply_to("alfred")
    stones.add("F-0008", [SECRET], scope=SHARED_SCOPE, at="t", by="k", places=1)
    assert stones.apply_to("alfred")


def test_many_tombstones_of_many_lengths_are_each_found(tmp_path: Path) -> None:
    stones = Tombstones(tmp_path)
    texts = [" ".join(f"w{n}x{k}" for k in range(1 + n % 17)) for n in range(300)]
    stones.add("F-0009", texts, scope="alfred", at="t", by="k", places=1)
    body = "\n".join(f"- noise {texts[n].upper()} noise" for n in (0, 150, 299))
    assert sorted(t.id for t in stones.matches(body, "alfred")) == ["F-0009", "F-0009.151", "F-0009.300"]


def test_a_pattern_that_takes_too_long_is_refused_not_left_running() -> None:
    target = Target.parse(None, r"(a+)+b")  # nested repeats: exponential on a run of a's with no b
    assert [m.group(0) for m in target.finditer("xaab")] == ["aab"]
    slow = "a" * 2000 + "c"
    with pytest.raises(InvalidArgument, match="took longer than 2 s"):
        target.finditer(slow)
    with pytest.raises(InvalidArgument, match="simplify it"):
        target.scrub(slow, "F-1")


def test_a_shared_tombstone_carries_a_salt_of_its_own_and_another_home_checks_it(tmp_path: Path) -> None:
    """Host A's shared tombstone, copied into host B's mirror of the vault's (``VAULT_FILE``), is found on B,
    whose home salt is another: the record's own salt is all a check needs (docs/concepts/forget.md)."""
    a, b = Tombstones(tmp_path / "a"), Tombstones(tmp_path / "b")
    b.add("F-00b1", ["something else entirely"], scope="hermes", at="t", by="k", places=1)  # B's own salt exists
    (mine,) = a.add("F-00a1", ["Marguerite Pellworth"], scope=SHARED_SCOPE, at="t", by="k", places=1)
    (agents,) = a.add("F-00a2", ["Alice's phone is 555-0142"], scope="alfred", at="t", by="k", places=1)
    assert len(mine.salt) == 64 and mine.salt != (tmp_path / "a" / "forget" / "salt").read_text().strip()
    assert agents.salt == ""  # an agent's tombstone keeps the home's salt
    assert b.matches("note: marguerite  PELLWORTH", "hermes") == []
    forgetting.write_file(tmp_path / "b" / "forget" / forgetting.VAULT_FILE, [mine])
    assert [t.id for t in b.matches("note: marguerite  PELLWORTH", "hermes")] == ["F-00a1"]
    assert b.apply_to("anyone") and [t.id for t in b.all()] == ["F-00b1"]  # the mirror is not the home's
    assert [t.id for t in b.matches("something else entirely", "hermes")] == ["F-00b1"]
    forgetting.write_file(tmp_path / "b" / "forget" / forgetting.VAULT_FILE, [])
    assert b.matches("note: marguerite  PELLWORTH", "hermes") == []


def test_two_shared_forgets_get_two_salts_and_a_text_is_tombstoned_once(tmp_path: Path) -> None:
    stones = Tombstones(tmp_path)
    (one,) = stones.add("F-00c1", ["Marguerite Pellworth"], scope=SHARED_SCOPE, at="t", by="k", places=1)
    (two,) = stones.add("F-00c2", ["Hunter's lodge key 4471"], scope=SHARED_SCOPE, at="t", by="k", places=1)
    assert one.salt != two.salt and one.digest != two.digest
    assert stones.add("F-00c3", ["marguerite pellworth"], scope=SHARED_SCOPE, at="t", by="k", places=1) == []
    found = stones.matches("Marguerite Pellworth has hunter's lodge key 4471", "alfred")
    assert sorted(t.id for t in found) == ["F-00c1", "F-00c2"]


def test_a_shared_tombstone_of_the_homes_salt_is_made_again_with_its_own(tmp_path: Path) -> None:
    """A shared tombstone written before shared ones had a salt of their own still matches; the same forget
    run again makes it anew with its own salt (what goes to the vault), not "known already"."""
    stones = Tombstones(tmp_path)
    stones.add("F-00f1", ["Marguerite Pellworth"], scope="alfred", at="t", by="k", places=1)  # the home's salt exists
    path = tmp_path / "forget" / "tombstones.json"
    rows = json.loads(path.read_text())
    rows[0].update(id="F-00f0", scope=SHARED_SCOPE)
    del rows[0]["salt"]  # as written before
    path.write_text(json.dumps(rows))
    assert [t.id for t in stones.matches("marguerite pellworth", "bob")] == ["F-00f0"]
    (again,) = stones.add("F-00f2", ["Marguerite Pellworth"], scope=SHARED_SCOPE, at="t", by="k", places=1)
    assert len(again.salt) == 64
    assert stones.add("F-00f3", ["Marguerite Pellworth"], scope=SHARED_SCOPE, at="t", by="k", places=1) == []
