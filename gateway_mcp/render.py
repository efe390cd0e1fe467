"""Model-facing text (and structured content) for the KB's replies.

The text is what a model reads, so it is compact and says what to do next:
one ``path:start-end (score, provenance, importance)`` line per hit, the
snippet indented under it, and a line on index freshness. Shared-note replies
that wrote nothing (the near-duplicate nudge, the line-drop warning) say so in
their first words and list the ways forward. Those replies, and a name clash
or a missing note, are worded here in terms of the tools: the KB's own
messages for them name REST routes, and are not passed on.

The structured content is what a program reads. Every answer of a writing tool
(``memory_shared_create``, ``_update``, ``_delete``) says ``written``: whether the
vault changed. A guard that held the write back (similar notes, the line-drop
guard) is ``written: false`` with ``needs_confirm: true`` (the same call with
``confirm=true`` writes), and the server marks that result ``isError``, as it
does a KB error (``written: false``, ``needs_confirm: false``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from types import GenericAlias
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pydantic import BaseModel, Field, create_model

from gateway.v1 import kb_pb2

SNIPPET_INDENT = "   "
SHARED_NOTES_DIR = "notes/"
SHARED_NOTE_SUFFIX = ".md"


# Protobuf scalar types as the JSON a structured result holds.
_SCALARS: dict[int, type] = {
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_INT64: int,
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_BOOL: bool,
}


def proto_fields(
    message: Descriptor, *, leave_out: Collection[str] = (), nested: Mapping[str, type[BaseModel]] | None = None
) -> dict[str, Any]:
    """Pydantic field definitions (for ``create_model``) of ``message``'s fields in their order, the
    same names and types, all required; ``nested`` names the model of each message field. Raises
    KeyError on a field of another type (the caller says what it means)."""
    fields: dict[str, Any] = {}
    for field in message.fields:
        if field.name in leave_out:
            continue
        kind = (nested or {})[field.name] if field.type == FieldDescriptor.TYPE_MESSAGE else _SCALARS[field.type]
        fields[field.name] = (GenericAlias(list, (kind,)) if field.is_repeated else kind, ...)
    return fields


# A hit as the KB's proto defines it (gateway.v1.SearchHit), so the two cannot drift apart; the
# entry hash is the KB's and the dreaming service's business, not a model's.
SearchHitOut: type[BaseModel] = create_model("SearchHitOut", **proto_fields(kb_pb2.SearchHit.DESCRIPTOR, leave_out={"entry_hash"}))
SearchOut: type[BaseModel] = create_model(
    "SearchOut",
    __doc__="Structured content of ``memory_search``.",
    query=(str, ...),
    corpus=(str, ...),
    **proto_fields(kb_pb2.SearchResponse.DESCRIPTOR, nested={"hits": SearchHitOut}),
)


class GetOut(BaseModel):
    """Structured content of ``memory_get``."""

    path: str
    from_line: int
    to_line: int
    total_lines: int
    truncated: bool
    text: str


def _provenance(hit: kb_pb2.SearchHit) -> str:
    return hit.provenance or "untrusted"


def _corpus(hit: kb_pb2.SearchHit) -> str:
    return hit.corpus or "memory"


def search_out(query: str, corpus: str, reply: kb_pb2.SearchResponse) -> dict[str, Any]:
    """The structured content of a ``memory_search`` result (``SearchOut``, as JSON)."""
    hits = [
        {name: getattr(hit, name) for name in SearchHitOut.model_fields}
        | {"provenance": _provenance(hit), "corpus": _corpus(hit)}
        for hit in reply.hits
    ]
    rest = {name: getattr(reply, name) for name in SearchOut.model_fields if name not in ("query", "corpus", "hits")}
    return SearchOut.model_validate({"query": query, "corpus": corpus, "hits": hits, **rest}).model_dump(mode="json")


def _freshness(reply: kb_pb2.SearchResponse) -> str:
    if reply.stale:
        return (
            f"Index may be stale: a file changed after generation {reply.generation} was built. "
            "Pass refresh=true to re-index before searching."
        )
    if reply.refreshed:
        return f"Index refreshed before searching (generation {reply.generation})."
    return f"Index generation {reply.generation}, up to date."


def search_text(query: str, corpus: str, reply: kb_pb2.SearchResponse) -> str:
    """The text block of a ``memory_search`` result."""
    where = {"memory": "your memory", "shared": "the shared vault", "all": "your memory and the shared vault"}
    scope = where.get(corpus, corpus)
    quoted = json.dumps(query, ensure_ascii=False)
    hits = list(reply.hits)
    if not hits:
        lines = [
            f"No hits for {quoted} in {scope}. Try fewer or other keywords (synonyms, a name, a date)"
            + (', or corpus="all".' if corpus == "memory" else ".")
        ]
    else:
        lines = [f'{len(hits)} hit{"s" if len(hits) != 1 else ""} for {quoted} in {scope}:', ""]
        for number, hit in enumerate(hits, 1):
            where_from = "[shared] " if corpus == "all" and _corpus(hit) == "shared" else ""
            lines.append(
                f"{number}. {where_from}{hit.path}:{hit.start_line}-{hit.end_line} "
                f"(score {hit.score:.2f}, {_provenance(hit)}, importance {hit.importance})"
            )
            lines.extend(SNIPPET_INDENT + line for line in (hit.snippet.strip() or "(empty)").splitlines())
            lines.append("")
        if any(_corpus(hit) != "shared" for hit in hits):
            lines.append("Read a full passage with memory_get(path, from_line, lines) using a path and range above.")
        shared = [hit for hit in hits if _corpus(hit) == "shared"]
        if shared:
            example = shared_note_name(shared[0].path)
            how = (
                f" ({shared[0].path} \u2192 {json.dumps(example, ensure_ascii=False)})" if example is not None else ""
            )
            lines.append(
                "Read a shared note in full with memory_shared_get(name); its name is the hit path without "
                f'"notes/" and ".md"{how}.'
            )
    lines.append(_freshness(reply))
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


def shared_note_name(path: str) -> str | None:
    """The shared note name a vault hit path holds (``notes/<name>.md`` -> ``<name>``), or None."""
    if not path.startswith(SHARED_NOTES_DIR) or not path.endswith(SHARED_NOTE_SUFFIX):
        return None
    name = path[len(SHARED_NOTES_DIR) : -len(SHARED_NOTE_SUFFIX)]
    return name if name and "/" not in name else None


def shared_note_path(name: str) -> str:
    """The vault-relative file of shared note ``name`` (what memory_search shows)."""
    return f"{SHARED_NOTES_DIR}{name}{SHARED_NOTE_SUFFIX}"


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


class RelatedNoteOut(BaseModel):
    name: str
    score: float
    snippet: str


WRITTEN = "True when the shared vault changed; false when nothing was written (a guard held it back, or an error)."
NEEDS_CONFIRM = "True when a guard held the write back: the same call again with confirm=true writes it."


class SharedCreateOut(BaseModel):
    """Structured content of ``memory_shared_create``. ``written`` false: nothing was written, see ``related``."""

    name: str
    path: str
    written: bool = Field(description=WRITTEN)
    needs_confirm: bool = Field(description=NEEDS_CONFIRM)
    created: bool
    related: list[RelatedNoteOut]
    linked: list[str]
    folded: bool
    message: str


class SharedNoteOut(BaseModel):
    """Structured content of ``memory_shared_get``."""

    name: str
    path: str
    content: str
    size_bytes: int
    lines: int
    retired: bool


class SharedUpdateOut(BaseModel):
    """Structured content of ``memory_shared_update``. ``written`` false: nothing was written, see ``warning``."""

    name: str
    path: str
    written: bool = Field(description=WRITTEN)
    needs_confirm: bool = Field(description=NEEDS_CONFIRM)
    updated: bool
    dropped_lines: int
    total_lines: int
    warning: str
    folded: bool
    message: str


class SharedDeleteOut(BaseModel):
    """Structured content of ``memory_shared_delete``."""

    name: str
    path: str
    written: bool = Field(description=WRITTEN)
    deleted: bool


def create_held_back(related: list[str]) -> str:
    """The MCP wording of a create that found similar notes and wrote nothing (the KB's names REST routes)."""
    names = ", ".join(_q(name) for name in related)
    return (
        f"nothing was written: {len(related)} similar shared note(s) exist ({names}). Update one with "
        "memory_shared_update, or call memory_shared_create again with confirm=true to create this note linked to them."
    )


def update_held_back(dropped: int, total: int) -> str:
    """The MCP wording of an update the line-drop guard held back (the KB's names REST routes)."""
    return (
        f"nothing was written: this update would drop {dropped} of the note's {total} non-blank lines (50% or more). "
        "Edit the note rather than replacing it (memory_shared_get, then memory_shared_update with the full edited "
        "content), or call memory_shared_update again with confirm=true."
    )


def shared_error(tool: str, code: str, name: str, message: str) -> str:
    """The text of a KB error for a shared-note tool: a name clash and a missing note point to the other
    tool (the KB's message names REST routes there); any other error is the KB's message as is."""
    if tool == "memory_shared_create" and code == "ALREADY_EXISTS":
        return f"a shared note named {name.strip()!r} already exists; use memory_shared_update to change it"
    if tool == "memory_shared_update" and code == "NOT_FOUND":
        return f"no shared note named {name.strip()!r}; use memory_shared_create to create it"
    return message


def shared_create_out(requested: str, reply: kb_pb2.CreateSharedNoteResponse) -> SharedCreateOut:
    name = reply.name or requested
    related = [RelatedNoteOut(name=r.name, score=r.score, snippet=r.snippet) for r in reply.related]
    return SharedCreateOut(
        name=name,
        path=shared_note_path(name),
        written=reply.created,
        needs_confirm=not reply.created and bool(related),
        created=reply.created,
        related=related,
        linked=list(reply.linked),
        folded=reply.folded,
        message=reply.message if reply.created or not related else create_held_back([r.name for r in related]),
    )


def shared_create_text(out: SharedCreateOut) -> str:
    """The text block of a ``memory_shared_create`` result."""
    if out.created:
        text = f"Created shared note {_q(out.name)} ({out.path})."
        if out.linked:
            links = ", ".join(f"[[{name}]]" for name in out.linked)
            text += f" Linked to related notes with a closing \"Related: {links}\" line."
        if out.folded:
            text += f" Its retired twin {_q('stale__' + out.name)} was folded back into it."
        return text + ' Every agent of your project can now find it (memory_search with corpus="shared").'
    count = len(out.related)
    if not count:
        return f"Nothing was written: shared note {_q(out.name)} was not created. {out.message}".rstrip()
    lines = [
        f"Nothing was written: shared note {_q(out.name)} was NOT created, because {count} similar "
        f"note{'s' if count != 1 else ''} already exist{'s' if count == 1 else ''} in the shared vault:",
        "",
    ]
    for number, note in enumerate(out.related, 1):
        lines.append(f"{number}. {_q(note.name)} (similarity {note.score:.2f})")
        lines.extend(SNIPPET_INDENT + line for line in (note.snippet.strip() or "(empty)").splitlines())
        lines.append("")
    lines += [
        "Either:",
        f"- update {'it' if count == 1 else 'one of them'}: read it with memory_shared_get(name), merge what you "
        "meant to add into it, and save it with memory_shared_update(name, content); or",
        f"- create {_q(out.name)} anyway: call memory_shared_create again with the same name and content "
        f"and confirm=true; the new note will link {'it as a [[wikilink]]' if count == 1 else 'them as [[wikilinks]]'}.",
    ]
    return "\n".join(lines)


def shared_note_out(reply: kb_pb2.SharedNote) -> SharedNoteOut:
    return SharedNoteOut(
        name=reply.name,
        path=shared_note_path(reply.name),
        content=reply.content,
        size_bytes=reply.size_bytes,
        lines=len(reply.content.splitlines()),
        retired=reply.retired,
    )


def shared_note_text(out: SharedNoteOut) -> str:
    """The text block of a ``memory_shared_get`` result: a header line, then the content verbatim."""
    header = f"shared note {_q(out.name)} ({out.path}, {out.lines} lines, {out.size_bytes} bytes)"
    if out.retired:
        live = out.name.removeprefix("stale__")
        header += f" [retired, read-only: create or update {_q(live)} to bring it back]"
    if not out.content:
        return header + " is empty"
    return header + "\n" + out.content


def shared_update_out(requested: str, reply: kb_pb2.UpdateSharedNoteResponse) -> SharedUpdateOut:
    name = reply.name or requested
    warning = reply.warning
    if warning and reply.total_lines:
        warning = update_held_back(reply.dropped_lines, reply.total_lines)
    return SharedUpdateOut(
        name=name,
        path=shared_note_path(name),
        written=reply.updated,
        needs_confirm=not reply.updated and bool(reply.warning),
        updated=reply.updated,
        dropped_lines=reply.dropped_lines,
        total_lines=reply.total_lines,
        warning=warning,
        folded=reply.folded,
        message=warning or reply.message,
    )


def shared_update_text(out: SharedUpdateOut) -> str:
    """The text block of a ``memory_shared_update`` result."""
    if out.updated:
        text = f"Updated shared note {_q(out.name)} ({out.path}): its full content was replaced"
        if out.dropped_lines:
            text += f", dropping {out.dropped_lines} of its {out.total_lines} previous non-blank lines"
        text += "."
        if out.folded:
            text += f" Its retired twin {_q('stale__' + out.name)} was folded back into it."
        return text
    first = f"Nothing was written: shared note {_q(out.name)} was NOT updated"
    if out.total_lines:
        first += (
            f", because the new content would drop {out.dropped_lines} of the note's {out.total_lines} "
            "non-blank lines (50% or more)."
        )
    else:
        first += ". " + (out.warning or out.message)
    return "\n".join(
        [
            first.rstrip(),
            "memory_shared_update replaces the whole note. Either:",
            f"- edit instead: read the current note with memory_shared_get({_q(out.name)}), change what you need "
            "and send the full edited content; or",
            "- if dropping those lines is intended, call memory_shared_update again with the same content "
            "and confirm=true.",
        ]
    )


def shared_delete_out(requested: str, reply: kb_pb2.DeleteSharedNoteResponse) -> SharedDeleteOut:
    name = reply.name or requested
    return SharedDeleteOut(name=name, path=shared_note_path(name), written=reply.deleted, deleted=reply.deleted)


def shared_delete_text(out: SharedDeleteOut) -> str:
    """The text block of a ``memory_shared_delete`` result."""
    if out.deleted:
        return f"Deleted shared note {_q(out.name)} ({out.path}); it is gone for every agent of your project."
    return f"Shared note {_q(out.name)} was not deleted."


def shared_write_refused(tool: str, name: str, message: str) -> SharedCreateOut | SharedUpdateOut | SharedDeleteOut:
    """The structured content of a writing tool's KB error (``message``: the text the tool returns): nothing written."""
    name = name.strip()
    path = shared_note_path(name)
    if tool == "memory_shared_create":
        return SharedCreateOut(name=name, path=path, written=False, needs_confirm=False, created=False, related=[],
                               linked=[], folded=False, message=message)
    if tool == "memory_shared_update":
        return SharedUpdateOut(name=name, path=path, written=False, needs_confirm=False, updated=False, dropped_lines=0,
                               total_lines=0, warning="", folded=False, message=message)
    return SharedDeleteOut(name=name, path=path, written=False, deleted=False)
