"""One note's graph facts: frontmatter fields and body ``[[wiki-links]]`` (docs/concepts/vault.md "Shared vault", Graph layer).

Frontmatter is the text between a leading ``---`` line and the next ``---``
(or ``...``) line, as ``gateway.markdown`` defines them for the indexer too, read by ``frontmatter.load_frontmatter`` (PyYAML, safe profile). Fields:
``title`` (string; a number is taken as text), ``confidence`` (number in
[0, 1]), ``updatedAt`` (ISO date or datetime; naive means UTC) and ``claims``
(a list of mappings with ``id``, ``text``, ``status``, ``confidence``). A bad
field is a problem for the note and is ignored; the rest still counts.
Frontmatter over 64 KB (docs/architecture.md "Limits and defaults") is ignored and reported.

Links: ``[[target]]``, ``[[target|label]]``, ``[[target#section]]`` and
``[[target#^block]]`` all point at ``target``; a trailing ``.md`` is dropped;
``[[#section]]`` (the note itself) is not a link. Links inside fenced code
blocks and inline code spans are examples, not links. Embeds of attachments
(``![[diagram.png]]``) are not links; ``![[note]]`` is.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from gateway.markdown import FRONTMATTER_CLOSE, FRONTMATTER_OPEN, fenced
from services.kb.index.frontmatter import FrontmatterError, Value, load_frontmatter

MAX_FRONTMATTER_BYTES = 64 * 1024  # docs/architecture.md "Limits and defaults": graph layer

_LINK = re.compile(r"\[\[([^\[\]\n]+)\]\]")  # a literal prefix: the engine skips to each "[["
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_ATTACHMENT = re.compile(r"\.[A-Za-z0-9]{1,5}$")


@dataclass(frozen=True)
class Claim:
    note: str
    id: str
    text: str | None
    status: str | None
    confidence: float | None


@dataclass(frozen=True)
class ParsedNote:
    name: str
    title: str | None
    confidence: float | None
    updated_at: datetime | None  # UTC; None when absent or invalid
    claims: tuple[Claim, ...]
    links: tuple[str, ...]  # link targets as written, first occurrence order, no duplicates
    problems: tuple[str, ...]


def parse_note(name: str, text: str) -> ParsedNote:
    """Parse one note's text. Never raises: every defect becomes a message in ``problems``."""
    problems: list[str] = []
    fields: dict[str, Value] = {}
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    body = text
    start = text.find("\n")
    if text.startswith("---") and FRONTMATTER_OPEN.fullmatch(text if start == -1 else text[:start]):
        close = FRONTMATTER_CLOSE.search(text, start + 1) if start != -1 else None
        if close is None:
            problems.append("frontmatter: no closing '---' line (frontmatter ignored)")
        else:
            raw = text[start + 1:max(start + 1, close.start() - 1)]
            body = text[close.end():]
            if len(raw) * 4 > MAX_FRONTMATTER_BYTES and len(raw.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
                problems.append(f"frontmatter: larger than {MAX_FRONTMATTER_BYTES // 1024} KB (ignored)")
            else:
                try:
                    fields = load_frontmatter(raw, first_line=2)
                except FrontmatterError as exc:
                    problems.append(f"frontmatter: {exc} (frontmatter ignored)")
    title = _title(fields.get("title"), problems)
    confidence = _confidence(fields.get("confidence"), "confidence", problems)
    updated_at = _updated_at(fields.get("updatedAt"), problems)
    claims = _claims(name, fields.get("claims"), problems)
    return ParsedNote(name, title, confidence, updated_at, claims, extract_links(body), tuple(problems))


def extract_links(body: str) -> tuple[str, ...]:
    """Link targets in ``body``, deduplicated in first-seen order (see the module doc)."""
    if "[[" not in body:
        return ()
    if "```" in body or "~~~" in body:
        body = _drop_fences(body)
    if "`" in body:
        body = _INLINE_CODE.sub("", body)
    seen: dict[str, None] = {}
    for match in _LINK.finditer(body):
        target = match.group(1).split("|", 1)[0].split("#", 1)[0].rstrip("\\").strip()
        if target[-3:].lower() == ".md":
            target = target[:-3].rstrip()
        embed = match.start() > 0 and body[match.start() - 1] == "!"
        if not target or (embed and _ATTACHMENT.search(target)):
            continue
        seen.setdefault(target, None)
    return tuple(seen)


def _drop_fences(body: str) -> str:
    lines = body.split("\n")
    inside = fenced(line.removesuffix("\r") for line in lines)
    return "\n".join(line for line, hidden in zip(lines, inside, strict=True) if not hidden)


def _title(value: Value, problems: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return " ".join(value.split()) or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    problems.append(f"title: expected text, got {_kind(value)} (ignored)")
    return None


def _confidence(value: Value, where: str, problems: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"{where}: expected a number from 0 to 1, got {_kind(value)} (ignored)")
        return None
    if math.isnan(value) or not 0 <= value <= 1:
        problems.append(f"{where}: {value} is outside 0 to 1 (ignored)")
        return None
    return float(value)


def _updated_at(value: Value, problems: list[str]) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        moment = parse_timestamp(value)
        if moment is not None:
            return moment
    problems.append(f"updatedAt: expected an ISO date or datetime, got {_describe(value)} (ignored)")
    return None


def parse_timestamp(text: str) -> datetime | None:
    """``YYYY-MM-DD`` (midnight UTC) or an ISO datetime (naive → UTC) as an aware UTC datetime."""
    text = text.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _claims(note: str, value: Value, problems: list[str]) -> tuple[Claim, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"claims: expected a list, got {_kind(value)} (ignored)")
        return ()
    claims: list[Claim] = []
    for index, item in enumerate(value, 1):
        where = f"claims[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected a mapping with id and text, got {_kind(item)} (ignored)")
            continue
        claim_id = item.get("id")
        if isinstance(claim_id, bool) or not isinstance(claim_id, (str, int)) or not str(claim_id).strip():
            problems.append(f"{where}: missing or invalid id (claim ignored)")
            continue
        text = _text_field(item.get("text"), f"{where}.text", problems)
        status = _text_field(item.get("status"), f"{where}.status", problems)
        confidence = _confidence(item.get("confidence"), f"{where}.confidence", problems)
        claims.append(Claim(note, str(claim_id).strip(), text, status, confidence))
    return tuple(claims)


def _text_field(value: Value, where: str, problems: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    problems.append(f"{where}: expected text, got {_kind(value)} (ignored)")
    return None


def _kind(value: Value) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "nothing" if value is None else "text"


def _describe(value: Value) -> str:
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return repr(shown)
    return _kind(value)
