"""The test suite itself: pytest imports test modules by their basename (rootdir and no packages),
so two test files of one name in different folders stop the collection of the whole suite."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(path.name for path in TESTS.rglob("*.py") if path.name != "conftest.py" and "__pycache__" not in path.parts)
    assert [name for name, count in names.items() if count > 1] == []
