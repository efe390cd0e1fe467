"""Soft memory budgets and banners (docs/concepts/budgets.md "Budgets and banners")."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import MemorySettings
from services.watcher.budget import Overage, banner, budget_for, is_over
from services.watcher.compose import compose


def settings(**changes: object) -> MemorySettings:
    values: dict[str, object] = {
        "memory_budget_chars": 8000,
        "user_budget_chars": 3000,
        "over_budget": "warn",
        "write_routing": False,
        "episodic_archive_dir": "memory",
    }
    values.update(changes)
    return MemorySettings(**values)  # type: ignore[arg-type]


def section(text: str, name: str) -> str:
    """The body of section ``name`` of a composed CLAUDE.md."""
    start = text.index(f"--- {name} ---\n") + len(f"--- {name} ---\n")
    end = text.find("\n--- ", start)
    return text[start : end if end != -1 else len(text)]


def test_budget_for_each_file() -> None:
    memory = settings()
    assert budget_for("MEMORY.md", memory) == 8000
    assert budget_for("USER.md", memory) == 3000
    assert budget_for("SOUL.md", memory) is None
    assert budget_for("HEARTBEAT.md", memory) is None
    assert budget_for("MEMORY.md", settings(memory_budget_chars=0)) is None
    assert budget_for("USER.md", settings(user_budget_chars=0)) is None


def test_is_over_is_strict() -> None:
    assert not is_over(7999, 8000)
    assert not is_over(8000, 8000)
    assert is_over(8001, 8000)
    assert not is_over(10**6, None)
    assert not is_over(None, 8000)


@pytest.mark.parametrize(
    ("name", "budget_key", "budget", "chars"),
    [
        ("MEMORY.md", "memory_budget_chars", 8000, 7999),
        ("MEMORY.md", "memory_budget_chars", 8000, 8000),
        ("MEMORY.md", "memory_budget_chars", 8000, 8001),
        ("USER.md", "user_budget_chars", 3000, 2999),
        ("USER.md", "user_budget_chars", 3000, 3000),
        ("USER.md", "user_budget_chars", 3000, 3001),
    ],
)
@pytest.mark.parametrize("level", ["warn", "error"])
def test_banner_only_strictly_over_budget(
    tmp_path: Path, name: str, budget_key: str, budget: int, chars: int, level: str
) -> None:
    (tmp_path / name).write_text("x" * chars, encoding="utf-8")
    result = compose(tmp_path, settings(over_budget=level), archive_enabled=False)
    body = section(result.text, name)
    report = result.report(name)
    assert report.chars == chars
    assert report.budget == budget
    if chars <= budget:
        assert body == "x" * chars + "\n"
        assert not report.over_budget
        assert "OVER BUDGET" not in result.text
        return
    assert report.over_budget
    label = name.removesuffix(".md")
    if level == "warn":
        assert body.startswith(
            f"⚠️ {label} OVER BUDGET. {name} is {chars:,} chars; its budget is {budget:,} chars (1 char over).\n"
        )
        assert "🛑" not in result.text
    else:
        assert body.startswith(
            f"🛑 {label} OVER BUDGET — consolidate before anything else. "
            f"{name} is {chars:,} chars; its budget is {budget:,} chars (1 char over).\n"
            f"Before any other work, consolidate {name}: "
        )
        assert "⚠️" not in result.text
    assert "merge duplicate entries, drop stale or superseded ones" in body
    assert "The change applies on your next spawn; no restart is needed." in body
    assert body.endswith("\n\n" + "x" * chars + "\n")


def test_budget_zero_disables_the_banner(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("m" * 9000, encoding="utf-8")
    (tmp_path / "USER.md").write_text("u" * 4000, encoding="utf-8")
    result = compose(tmp_path, settings(memory_budget_chars=0, user_budget_chars=0), archive_enabled=True)
    assert "OVER BUDGET" not in result.text
    assert result.report("MEMORY.md").budget is None
    assert not result.report("MEMORY.md").over_budget
    assert section(result.text, "MEMORY.md") == "m" * 9000 + "\n"


@pytest.mark.parametrize(("count", "over"), [(8000, False), (8001, True)])
def test_chars_are_code_points_not_bytes(tmp_path: Path, count: int, over: bool) -> None:
    (tmp_path / "MEMORY.md").write_text("é" * count, encoding="utf-8")  # 2 bytes each
    result = compose(tmp_path, settings(), archive_enabled=False)
    assert result.report("MEMORY.md").chars == count
    assert result.report("MEMORY.md").over_budget is over
    assert ("OVER BUDGET" in result.text) is over


def test_non_memory_files_never_get_a_banner(tmp_path: Path) -> None:
    for name in ("SOUL.md", "IDENTITY.md", "AGENTS.md", "HEARTBEAT.md"):
        (tmp_path / name).write_text("s" * 15000, encoding="utf-8")
    result = compose(tmp_path, settings(memory_budget_chars=1, user_budget_chars=1), archive_enabled=True)
    assert "OVER BUDGET" not in result.text
    assert [r.name for r in result.files if r.budget is not None] == ["USER.md", "MEMORY.md"]
    assert not any(r.over_budget for r in result.files)


def test_banner_names_the_episodic_dir_only_with_routing(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("x" * 8100, encoding="utf-8")
    routed = compose(tmp_path, settings(write_routing=True, episodic_archive_dir="notes/episodes"), False)
    plain = compose(tmp_path, settings(write_routing=False), False)
    assert "move episodic task-log to `notes/episodes/<topic>.md`" in section(routed.text, "MEMORY.md")
    assert "episodic" not in section(plain.text, "MEMORY.md")
    assert "(100 chars over)" in section(plain.text, "MEMORY.md")


def test_banner_for_a_lower_bound_size() -> None:
    text = banner(Overage("MEMORY.md", 10_000, 8000, "warn", at_least=True))
    assert text.startswith(
        "⚠️ MEMORY OVER BUDGET. MEMORY.md is at least 10,000 chars; "
        "its budget is 8,000 chars (at least 2,000 chars over)."
    )
