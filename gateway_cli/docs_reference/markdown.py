"""Markdown pieces shared by the generated pages: escaped prose, tables and anchored headings.

Text read from the code (proto comments, help strings, descriptions) is prose for people, not
Markdown: it names ``stale__<name>``, ``memory/**`` or ``{agentId}``, which Markdown would read
as HTML, emphasis or an attribute list. ``prose`` escapes it, leaving backtick code spans as
they are, so the page shows the text as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Characters Python-Markdown reads as markup, each escaped with a backslash; ``<`` and ``&``
# become entities instead (a backslash does not escape them).
_ESCAPED = re.compile(r"([\\*_\[\]{}|#`])")
_SPANS = re.compile(r"(`[^`]+`)")


def generated_note(source: str) -> str:
    """The admonition that opens every page: what it is generated from, and how to regenerate it."""
    return (
        '!!! note "Generated page"\n'
        f"    Generated from {source} by `python -m gateway_cli.docs_reference` (`make reference`): "
        "change the source, not this file.\n"
    )


def prose(text: str) -> str:
    """``text`` as literal Markdown: markup characters escaped, code spans kept, on one line."""
    parts = []
    for i, part in enumerate(_SPANS.split(" ".join(text.split()))):
        if i % 2:  # a code span: Markdown shows it verbatim, but a table still splits on its pipes
            parts.append(part.replace("|", "\\|"))
        else:
            part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            parts.append(_ESCAPED.sub(r"\\\1", part))
    return "".join(parts)


def code(text: str) -> str:
    """``text`` as an inline code span (pipes escaped for tables)."""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def paragraphs(texts: Iterable[str]) -> list[str]:
    """Each text as its own escaped paragraph, a blank line after each."""
    out: list[str] = []
    for text in texts:
        if text.strip():
            out += [prose(text), ""]
    return out


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table whose cells are already Markdown; a blank line after it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return [*lines, ""]


def heading(level: int, text: str, anchor: str) -> list[str]:
    """A heading with an explicit anchor (attr_list), so links do not depend on the title's slug."""
    return ["#" * level + f" {text} {{ #{anchor} }}", ""]


def slug(*parts: str) -> str:
    """A stable anchor from name parts: lower case, runs of anything else than letters and digits as ``-``."""
    return "-".join(re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-") for part in parts if part)


def page(title: str, source: str, intro: Sequence[str], body: Sequence[str]) -> str:
    """A whole page: title, the note naming its ``source`` (Markdown), the intro lines, the body; one final newline."""
    lines = [f"# {title}", "", generated_note(source), *intro, "", *body]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"
