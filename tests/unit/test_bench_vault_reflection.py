"""bench/vault_reflection.py's pieces that decide its figures (bench/vault_reflection_reviewer.py,
bench/vault_reflection_judge.py, bench/vault_reflection_corpus.py): the instant reviewer reads the real
reflection prompt and answers what the strict parser takes; the planted key holds the copies; the judge
counts a merge into a note's own copy as right, any other as wrong, and a line of fact in no live note
as lost. The bench itself runs the suite and is not a test."""

from __future__ import annotations

import json
from pathlib import Path

from bench_modules import bench

from services.dreaming.reflect.decision import parse_decision
from services.dreaming.reflect.prompt import PromptNote, build_prompt

reviewer = bench("vault_reflection_reviewer")
judge = bench("vault_reflection_judge")
corpus = bench("vault_reflection_corpus")


def planted(tmp_path: Path) -> tuple[Path, object, dict[str, str]]:
    notes_dir = tmp_path / "notes"
    vault = corpus.plant(notes_dir, count=200, seed=3, dup_share=0.1)
    return notes_dir, vault, {p.name[:-3]: p.read_text(encoding="utf-8") for p in notes_dir.glob("*.md")}


def ask(notes: dict[str, str], *, pair: bool = False) -> dict[str, object]:
    prompt = build_prompt("team", [PromptNote(n, t) for n, t in notes.items()], "links+similar")
    answer: dict[str, object] = reviewer.decide(prompt, pair=pair)
    return answer


def test_the_key_holds_each_copy_once_under_a_name_of_its_own(tmp_path: Path) -> None:
    notes_dir, vault, texts = planted(tmp_path)
    copies = [n for g in vault.groups for n in g[1:]]
    assert len(copies) == vault.copies == len(set(copies)) >= 20
    assert len(texts) == 200 + vault.copies and all(c in texts for c in copies)
    assert all(1 < len(g) <= 3 for g in vault.groups)


def test_the_reviewer_merges_a_copy_into_its_original_and_the_parser_takes_it(tmp_path: Path) -> None:
    _, vault, texts = planted(tmp_path)
    group = next(g for g in vault.groups if len(g) == 2)
    other = next(n for n in texts if n not in vault.group_of())
    notes = {group[0]: texts[group[0]], other: texts[other], group[1]: texts[group[1]]}
    answer = ask(notes)
    assert answer["decision"] == "merge" and sorted(answer["replaces"]) == sorted(group)  # type: ignore[arg-type]
    decision = parse_decision(json.dumps(answer), list(notes))
    assert decision.merge and decision.name in group and other not in decision.replaces


def test_unrelated_notes_are_left(tmp_path: Path) -> None:
    _, vault, texts = planted(tmp_path)
    free = [n for n in texts if n not in vault.group_of()][:4]
    assert ask({n: texts[n] for n in free})["decision"] == "leave"


def test_pair_mode_merges_two_notes_of_a_group_of_three(tmp_path: Path) -> None:
    _, vault, texts = planted(tmp_path)
    group = next(g for g in vault.groups if len(g) == 3)
    whole = ask({n: texts[n] for n in group})
    pair = ask({n: texts[n] for n in group}, pair=True)
    assert sorted(whole["replaces"]) == sorted(group)  # type: ignore[arg-type]
    assert len(pair["replaces"]) == 2 and pair["name"] in pair["replaces"]  # type: ignore[arg-type]


def test_the_baseline_finds_the_planted_copies(tmp_path: Path) -> None:
    notes_dir, vault, _ = planted(tmp_path)
    base = judge.baseline(notes_dir, vault)
    assert base.copies_found >= 0.8 * vault.copies and base.true_pairs == base.pairs


def test_the_judge_counts_right_and_wrong_merges_and_lost_lines(tmp_path: Path) -> None:
    _, vault, texts = planted(tmp_path)
    (a, b), (_, d) = [g[:2] for g in vault.groups[:2]]
    marker = "<!-- retired: 2026-12-06T04:00:00Z reason: vault reflection: merged into {} (run R-1, M-0123456789ab) -->\n"
    notes = {n: t.encode() for n, t in texts.items() if n not in (b, d)}
    notes["stale__" + b] = (texts[b] + marker.format(a)).encode()  # a copy into its original, its lines archived
    notes["pruned__archive"] = texts[b].encode()
    notes["stale__" + d] = (texts[d] + marker.format(a)).encode()  # into another group's note, its lines nowhere
    found = judge.judge(notes, vault)
    assert (found.merged_away, found.true_copies) == (2, 1) and len(found.wrong) == 1
    assert found.lost and found.in_archive > 0
    assert found.left == vault.copies - 2
