"""The tombstone checks' shared parts (gateway.forget_guard): the ids found, the markers, the refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import FailedPrecondition
from gateway.forget_guard import (
    any_forgotten, checker, find_forgotten, new_markers, refuse_forgotten, skip_reason, why_forgotten)
from gateway.forgetting import Tombstones, marker

TEXT = "Dana Whitlock's locker code is 4471"


def test_the_ids_found_are_the_forgets_once_each(tmp_path: Path) -> None:
    assert find_forgotten(tmp_path, TEXT, "alfred") == [] and not any_forgotten(tmp_path, "alfred")
    Tombstones(tmp_path).add("F-0a", [TEXT, "hunter2 hunter3"], scope="alfred", at="t", by="k", places=1)
    assert any_forgotten(tmp_path, "alfred")
    assert find_forgotten(tmp_path, f"{TEXT}; hunter2 hunter3; {TEXT}", "alfred") == ["F-0a"]  # F-0a.2 is F-0a's


def test_new_markers_are_those_the_replaced_text_does_not_hold() -> None:
    text = f"a {marker('F-0a')} b {marker('F-0b.2')} c {marker('F-0a')}"
    assert new_markers(text) == ["F-0a", "F-0b"]
    assert new_markers(text, already=f"x {marker('F-0a')}") == ["F-0b"]
    assert new_markers("[forgotten F-zz] [forgotten 0a]") == []  # not a forget's id


def test_the_skip_reason_names_the_forgets() -> None:
    assert skip_reason(["F-0a", "F-0b"]) == "forgotten: F-0a, F-0b"
    assert skip_reason(["F-0a"], marker=True).startswith("forgotten: F-0a (its marker")


def test_the_refusal_names_the_forget_and_never_the_text(tmp_path: Path) -> None:
    Tombstones(tmp_path).add("F-0c", [TEXT], scope="*", at="t", by="k", places=1)
    refuse_forgotten(tmp_path, "Dana's locker is on deck 2", "content", "alfred")
    with pytest.raises(FailedPrecondition) as refused:
        refuse_forgotten(tmp_path, f"# Lockers\n- {TEXT.upper()}\n", "content", "alfred")
    assert "content holds text that was forgotten on purpose (F-0c)" in refused.value.message
    assert "4471" not in refused.value.message and "whitlock" not in refused.value.message.lower()


def test_why_forgotten_names_the_text_first_then_a_new_marker(tmp_path: Path) -> None:
    Tombstones(tmp_path).add("F-0d", [TEXT], scope="alfred", at="t", by="k", places=1)
    check = checker(tmp_path, "alfred")
    assert why_forgotten(f"{TEXT} {marker('F-0e')}", check) == "forgotten: F-0d"
    assert why_forgotten(f"x {marker('F-0e')}", check).startswith("forgotten: F-0e (its marker")
    assert why_forgotten(f"x {marker('F-0e')}", check, already=f"y {marker('F-0e')}") == ""
    assert why_forgotten("Dana's locker is on deck 2", check) == ""
