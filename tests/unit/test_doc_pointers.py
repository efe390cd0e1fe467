"""Comments point to the repository's own documents, and every pointer names a section that exists.

A comment explains a rule by naming the page and the section that states it:
``docs/concepts/vault.md "Shared vault"``, ``docs/architecture.md "Limits and defaults"``. Any
Markdown page under ``docs/`` can be named this way. A renamed heading or a moved page would leave
such pointers dangling, and a pointer to a document outside the repository cannot be followed at
all. The README is the front page only: no comment points into it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS_DIR = ROOT / "docs"
# A pointer inside a JSON string has its quotes escaped: docs/x.md \"Section\".
POINTER = re.compile(r'\b(docs/[\w./-]+\.md)\s+\\?"([^"\n\\]+)\\?"')
README_POINTER = re.compile(r'\bREADME\s+\\?"([^"\n\\]+)\\?"')
OUTSIDE = re.compile(r"\b(SPEC|DESIGN)\.md\b")
SOURCE_TOPS = ("gateway", "gateway_cli", "gateway_http", "gateway_mcp", "services", "tests", "protos", "bench")


def pages() -> dict[str, Path]:
    """Every page a pointer may name, by its path from the repository root (``docs/concepts/vault.md``)."""
    return {path.relative_to(ROOT).as_posix(): path for path in sorted(DOCS_DIR.rglob("*.md"))}


def sources() -> list[Path]:
    found = [ROOT / "Makefile", ROOT / "README.md", ROOT / "gateway" / "config_schema.json", *pages().values()]
    for top in SOURCE_TOPS:
        found += [p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".proto"} and ".venv" not in p.parts]
    return found


def headings(doc: Path) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.M)}


def dangling_pointers(text: str, known: dict[str, set[str]]) -> list[str]:
    """The pointers in ``text`` that name a page that does not exist, or a section the page lacks."""
    dangling = []
    for doc, section in POINTER.findall(text):
        if doc not in known:
            dangling.append(f"{doc}: no such page")
        elif section not in known[doc]:
            dangling.append(f"{doc} {section!r}: no such section")
    return dangling


def test_every_pointer_names_an_existing_page_and_section() -> None:
    known = {name: headings(path) for name, path in pages().items()}
    dangling = []
    count = 0
    for path in sources():
        if path == Path(__file__).resolve():
            continue  # its own examples point nowhere on purpose
        text = path.read_text(encoding="utf-8", errors="replace")
        count += len(POINTER.findall(text))
        dangling += [f"{path.relative_to(ROOT)}: {problem}" for problem in dangling_pointers(text, known)]
    assert count > 80  # the scan found the pointers (a broken pattern would find none)
    assert dangling == []


def test_a_dangling_pointer_is_caught() -> None:
    known = {"docs/concepts/vault.md": {"Shared vault", "The vault's GC"}}
    text = ('docs/concepts/vault.md "Shared vault"; docs/concepts/vault.md "Vault GC"; '
            'docs/concepts/gone.md "Shared vault"')
    assert dangling_pointers(text, known) == [
        "docs/concepts/vault.md 'Vault GC': no such section",
        "docs/concepts/gone.md: no such page",
    ]


def test_nothing_points_into_the_readme() -> None:
    stale = [f"{path.relative_to(ROOT)}: README {m.group(1)!r}" for path in sources()
             for m in README_POINTER.finditer(path.read_text(encoding="utf-8", errors="replace"))
             if path != Path(__file__).resolve()]
    assert stale == []


def test_nothing_points_outside_the_repository() -> None:
    outside = [f"{path.relative_to(ROOT)}: {m.group(0)}" for path in sources()
               for m in OUTSIDE.finditer(path.read_text(encoding="utf-8", errors="replace"))
               if path != Path(__file__).resolve()]
    assert outside == []
