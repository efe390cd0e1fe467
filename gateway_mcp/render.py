"""Model-facing text (and structured content) for the KB's replies.

The text is what a model reads, so it is compact and says what to do next:
one ``path:start-end (score, provenance, importance)`` line per hit, the
snippet indented under it, and a line on index freshness.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from gateway.v1 import kb_pb2

SNIPPET_INDENT = "   "


class SearchHitOut(BaseModel):
    path: str
    start_line: int
    end_line: int
    snippet: str
    score: float
    provenance: str
    importance: int
    corpus: str


class SearchOut(BaseModel):
    """Structured content of ``memory_search``."""

    query: str
    corpus: str
    hits: list[SearchHitOut]
    generation: int
    stale: bool
    refreshed: bool


class GetOut(BaseModel):
    """Structured content of ``memory_get``."""

    path: str
    from_line: int
    to_line: int
    total_lines: int
    truncated: bool
    text: str


def search_out(query: str, corpus: str, reply: kb_pb2.SearchResponse) -> SearchOut:
    hits = [
        SearchHitOut(
            path=h.path,
            start_line=h.start_line,
            end_line=h.end_line,
            snippet=h.snippet,
            score=h.score,
            provenance=h.provenance or "untrusted",
            importance=h.importance,
            corpus=h.corpus or "memory",
        )
        for h in reply.hits
    ]
    return SearchOut(
        query=query, corpus=corpus, hits=hits, generation=reply.generation, stale=reply.stale, refreshed=reply.refreshed
    )


def _freshness(out: SearchOut) -> str:
    if out.stale:
        return (
            f"Index may be stale: a file changed after generation {out.generation} was built. "
            "Pass refresh=true to re-index before searching."
        )
    if out.refreshed:
        return f"Index refreshed before searching (generation {out.generation})."
    return f"Index generation {out.generation}, up to date."


def search_text(out: SearchOut) -> str:
    """The text block of a ``memory_search`` result."""
    where = {"memory": "your memory", "shared": "the shared vault", "all": "your memory and the shared vault"}
    scope = where.get(out.corpus, out.corpus)
    quoted = json.dumps(out.query, ensure_ascii=False)
    if not out.hits:
        lines = [
            f"No hits for {quoted} in {scope}. Try fewer or other keywords (synonyms, a name, a date)"
            + (', or corpus="all".' if out.corpus == "memory" else ".")
        ]
    else:
        lines = [f'{len(out.hits)} hit{"s" if len(out.hits) != 1 else ""} for {quoted} in {scope}:', ""]
        for number, hit in enumerate(out.hits, 1):
            where_from = "[shared] " if out.corpus == "all" and hit.corpus == "shared" else ""
            lines.append(
                f"{number}. {where_from}{hit.path}:{hit.start_line}-{hit.end_line} "
                f"(score {hit.score:.2f}, {hit.provenance}, importance {hit.importance})"
            )
            lines.extend(SNIPPET_INDENT + line for line in (hit.snippet.strip() or "(empty)").splitlines())
            lines.append("")
        if any(hit.corpus != "shared" for hit in out.hits):
            lines.append("Read a full passage with memory_get(path, from_line, lines) using a path and range above.")
    lines.append(_freshness(out))
    return "\n".join(lines)


def get_out(reply: kb_pb2.GetResponse) -> GetOut:
    return GetOut(
        path=reply.path,
        from_line=reply.from_line,
        to_line=reply.to_line,
        total_lines=reply.total_lines,
        truncated=reply.truncated,
        text=reply.text,
    )


def get_text(out: GetOut) -> str:
    """The text block of a ``memory_get`` result: a header line, then the exact excerpt."""
    if out.to_line < out.from_line:
        if out.total_lines == 0:
            return f"{out.path} is empty (0 lines)"
        return f"{out.path} has {out.total_lines} lines; nothing at line {out.from_line} or after"
    parts = [f"{out.path} lines {out.from_line}-{out.to_line} of {out.total_lines}", out.text]
    if out.truncated:
        # The cap can cut the last line; re-reading it is safe unless it is the only one shown.
        resume = out.to_line if out.to_line > out.from_line else out.to_line + 1
        parts.append(f"[excerpt cut at the size limit (line {out.to_line} may be partial); continue with from_line={resume}]")
    elif out.to_line < out.total_lines:
        parts.append(f"[{out.total_lines - out.to_line} more lines; continue with from_line={out.to_line + 1}]")
    return "\n".join(parts)
