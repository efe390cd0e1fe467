"""Fail-closed provenance rules."""

from __future__ import annotations

import pytest

from services.kb.index.provenance import classify


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("MEMORY.md", "owner"),
        ("USER.md", "owner"),
        ("memory/deploy.md", "agent"),
        ("memory/2025-01-01.md", "agent"),
        ("memory/projects/apollo/notes.md", "agent"),
        ("memory/pinned/core.md", "agent"),
        ("memory/MEMORY.md", "agent"),
        ("memory/archive/pruned.md", "system"),
        ("memory/archive/stale.md", "system"),
        ("memory/inbox/mail.md", "untrusted"),
        ("memory/imported/web.md", "untrusted"),
        ("memory/external/x/y.md", "untrusted"),
        ("memory/untrusted/a.md", "untrusted"),
        ("SOUL.md", "untrusted"),
        ("memory.md", "untrusted"),
        ("notes/MEMORY.md", "untrusted"),
        ("imported/x.md", "untrusted"),
        ("", "untrusted"),
        ("/etc/passwd", "untrusted"),
        ("memory/../MEMORY.md", "untrusted"),
        ("memory//x.md", "untrusted"),
        ("memory\\x.md", "untrusted"),
        ("memory/x\x00.md", "untrusted"),
    ],
)
def test_path_rules(path: str, expected: str) -> None:
    assert classify(path) == expected


def test_frontmatter_can_lower_trust() -> None:
    assert classify("MEMORY.md", "untrusted") == "untrusted"
    assert classify("memory/a.md", " Untrusted ") == "untrusted"


@pytest.mark.parametrize("claim", ["owner", "system", "agent", "root", ""])
def test_frontmatter_cannot_raise_trust(claim: str) -> None:
    assert classify("memory/inbox/mail.md", claim) == "untrusted"
    assert classify("memory/a.md", claim) == "agent"
