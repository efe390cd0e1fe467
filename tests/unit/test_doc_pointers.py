"""Comments point to the repository's own documents, and every pointer names a section that exists.

A comment explains a rule by naming the section that states it: ``README "Shared vault"``,
``docs/architecture.md "Limits and defaults"``. A renamed heading would leave such pointers
dangling, and a pointer to a document outside the repository cannot be followed at all.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = {"README": ROOT / "README.md", "docs/architecture.md": ROOT / "docs" / "architecture.md",
        "docs/operations.md": ROOT / "docs" / "operations.md"}
POINTER = re.compile(r'(README|docs/architecture\.md|docs/operations\.md)\s+"([^"\n]+)"')
OUTSIDE = re.compile(r"\b(SPEC|DESIGN)\.md\b")


def sources() -> list[Path]:
    found = [ROOT / "Makefile", ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for top in ("gateway", "gateway_http", "gateway_mcp", "services", "tests", "protos", "bench"):
        found += [p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".proto"} and ".venv" not in p.parts]
    return found


def headings(doc: Path) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.M)}


def test_every_pointer_names_an_existing_section() -> None:
    known = {name: headings(path) for name, path in DOCS.items()}
    dangling = []
    count = 0
    for path in sources():
        for doc, section in POINTER.findall(path.read_text(encoding="utf-8", errors="replace")):
            count += 1
            if section not in known[doc]:
                dangling.append(f"{path.relative_to(ROOT)}: {doc} {section!r}")
    assert count > 40  # the scan found the pointers (a broken pattern would find none)
    assert dangling == []


def test_nothing_points_outside_the_repository() -> None:
    outside = [f"{path.relative_to(ROOT)}: {m.group(0)}" for path in sources()
               for m in OUTSIDE.finditer(path.read_text(encoding="utf-8", errors="replace"))
               if path != Path(__file__).resolve()]
    assert outside == []
