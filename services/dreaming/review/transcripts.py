"""An agent's own session transcripts, gathered for the nightly reviewer, and bounded reads.

``gather`` reads Claude Code JSONL transcripts (one JSON record a line) from an
agent's transcripts folder and keeps what the reviewer needs to consolidate
memory: the text of user and assistant messages, one-line markers for tool
calls and images, truncated tool results. The model's private reasoning
(``thinking`` blocks) and bookkeeping records (``summary``, ``system``,
``file-history-snapshot``, anything unknown) are left out.

Everything is bounded, always from the newest end, because the newest sessions
say most about what memory should hold now (the lookback window):

- per file, at most ``max_bytes_per_file`` bytes, taken from its tail (a
  multi-GB transcript is never read whole; the partial first line is dropped);
- per line, at most ``MAX_LINE_BYTES`` (a larger line is skipped and counted);
- per message, ``MESSAGE_CAP`` chars; tool inputs ``TOOL_INPUT_CAP``; tool
  results ``TOOL_RESULT_CAP`` (each cut shows ``… [N more chars]``);
- per session, the newest ``max_messages_per_session`` messages;
- in all, ``max_chars`` characters of message text, newest sessions and newest
  messages first; older ones are cut.

Transcripts are data, never trusted: a broken line (invalid JSON, non-UTF-8,
a record of the wrong shape, a huge line) is counted in ``skipped_lines`` and
never fatal, and no symlink is followed out of the folder (realpath
confinement, as everywhere in the suite).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

MAX_BYTES_PER_FILE: Final = 8 << 20  # tail of each transcript that is read
MAX_LINE_BYTES: Final = 1 << 20  # a longer line is skipped as broken
MESSAGE_CAP: Final = 8_000  # chars of one message's text
TOOL_INPUT_CAP: Final = 200  # chars of a tool call's input in its marker
TOOL_RESULT_CAP: Final = 500  # chars of a tool result
CUT_MARKER: Final = "\n[… cut here: the rest of this file is not shown]"

_ROLES: Final = ("user", "assistant")


@dataclass(frozen=True)
class Message:
    """One user or assistant message, rendered as plain text.

    ``timestamp`` is the record's time (aware, UTC when the record gave no
    offset) or None when the record had none or an unreadable one.
    """

    role: str
    text: str
    timestamp: datetime | None = None


@dataclass(frozen=True)
class Session:
    """The kept messages of one transcript file, oldest first.

    ``path`` is POSIX and relative to the transcripts folder. ``truncated`` is
    true when anything of the file was left out by a bound (its head beyond the
    byte cap, messages beyond the per-session or total caps).
    """

    path: str
    messages: tuple[Message, ...]
    truncated: bool = False
    mtime: datetime | None = None


@dataclass(frozen=True)
class Gathered:
    """What ``gather`` found.

    ``sessions`` are ordered oldest to newest (file mtime), ready for the
    prompt. ``total_chars`` is the sum of the kept messages' text lengths.
    ``skipped_lines`` counts broken lines of the files read. ``files_seen``
    counts the transcript files found in the folder, in the lookback window or
    not; ``newest_mtime`` is the newest of their mtimes (aware, UTC), or None
    when there is none: dreaming's quiet window reads it as activity.
    ``truncated`` is true when ``max_chars`` cut anything.
    """

    sessions: tuple[Session, ...] = ()
    total_chars: int = 0
    skipped_lines: int = 0
    files_seen: int = 0
    newest_mtime: datetime | None = None
    truncated: bool = False


@dataclass(frozen=True)
class _Found:
    rel: str
    real: str
    mtime: float


def clip(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` chars, followed by ``… [N more chars]`` when cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more chars]"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _find(root: str) -> list[_Found]:
    """Every regular ``*.jsonl`` file under ``root`` whose real path stays inside it.

    os.walk does not descend into symlinked folders (no loops, no escape); a
    symlinked file counts only when its target is inside ``root``, and a file
    reached twice (a link to another transcript) counts once.
    """
    found: list[_Found] = []
    reals: set[str] = set()
    for folder, _dirs, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith(".jsonl"):
                continue
            path = os.path.join(folder, name)
            real = os.path.realpath(path)
            if not _inside(real, root) or real in reals:
                continue
            try:
                st = os.stat(real)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            reals.add(real)
            found.append(_Found(Path(os.path.relpath(path, root)).as_posix(), real, st.st_mtime))
    return found


def _read_tail(real: str, limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of the file (whole lines only) and whether its head was left out.

    O_NOFOLLOW: the path was checked as real and confined; a link swapped in
    since is refused rather than followed.
    """
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"", False
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read(limit)
    if start == 0:
        return data, False
    # The first line is partial unless the byte before the cut was a newline; drop it either way.
    newline = data.find(b"\n")
    return (data[newline + 1 :] if newline >= 0 else b""), True


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _tool_use(block: dict[str, object]) -> str:
    name = block.get("name")
    tool = name if isinstance(name, str) and name else "tool"
    raw = block.get("input")
    if isinstance(raw, dict) and isinstance(raw.get("command"), str):
        shown = str(raw["command"])  # a shell call reads best as its command line
    elif raw is None:
        shown = ""
    else:
        shown = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    shown = clip(_one_line(shown), TOOL_INPUT_CAP)
    return f"[tool_use {_one_line(tool)}: {shown}]" if shown else f"[tool_use {_one_line(tool)}]"


def _tool_result(block: dict[str, object]) -> str:
    content = block.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                parts.append(str(item["text"]))
            elif isinstance(item, dict) and item.get("type") == "image":
                parts.append("[image]")
    label = "tool_result error" if block.get("is_error") is True else "tool_result"
    text = clip("\n".join(parts).strip(), TOOL_RESULT_CAP)
    return f"[{label}: {text}]" if text else f"[{label}]"


def _render(content: object) -> str | None:
    """The text of a message's ``content``, or None when its shape is wrong."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(str(block["text"]).strip())
        elif kind == "tool_use":
            parts.append(_tool_use(block))
        elif kind == "tool_result":
            parts.append(_tool_result(block))
        elif kind == "image":
            parts.append("[image]")
        # thinking (private reasoning) and unknown block types are left out on purpose.
    return "\n".join(p for p in parts if p)


def _parse_line(raw: bytes, cutoff: datetime) -> Message | None | bool:
    """One line: a Message, None (a record to skip quietly) or False (a broken line)."""
    if len(raw) > MAX_LINE_BYTES:
        return False
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(record, dict):
        return False
    role = record.get("type")
    if role not in _ROLES:
        return None  # summary, system, file-history-snapshot, unknown: not conversation
    stamp = _timestamp(record.get("timestamp"))
    if stamp is not None and stamp < cutoff:
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return False
    text = _render(message.get("content"))
    if text is None:
        return False
    if not text:
        return None  # e.g. only a thinking block
    return Message(str(role), clip(text, MESSAGE_CAP), stamp)


def _read_session(found: _Found, cutoff: datetime, max_bytes: int) -> tuple[list[Message], bool, int]:
    """The messages of one file in file order, whether its head was cut, and its broken lines."""
    try:
        data, cut = _read_tail(found.real, max_bytes)
    except OSError:
        return [], False, 0
    messages: list[Message] = []
    broken = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        parsed = _parse_line(raw, cutoff)
        if parsed is False:
            broken += 1
        elif isinstance(parsed, Message):
            messages.append(parsed)
    return messages, cut, broken


def gather(
    transcripts_dir: Path,
    now: datetime,
    lookback_days: int,
    *,
    max_messages_per_session: int = 200,
    max_chars: int = 200_000,
    max_bytes_per_file: int = MAX_BYTES_PER_FILE,
) -> Gathered:
    """The agent's transcripts of the last ``lookback_days`` days before ``now``, bounded.

    Files are ``*.jsonl`` under ``transcripts_dir`` (recursively) whose mtime is
    inside the window; a record with a ``timestamp`` older than the window is
    skipped too. Bounds and rules are in the module docstring. A missing or
    unreadable folder gives an empty result. Raises ValueError when ``now`` is
    naive or a bound is negative; never for what the files contain.
    """
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    if min(lookback_days, max_messages_per_session, max_chars, max_bytes_per_file) < 0:
        raise ValueError("lookback and bounds must not be negative")
    root = os.path.realpath(transcripts_dir)
    if not os.path.isdir(root):
        return Gathered()
    found = _find(root)
    newest = max((f.mtime for f in found), default=None)
    cutoff = now - timedelta(days=lookback_days)
    recent = [f for f in found if datetime.fromtimestamp(f.mtime, tz=UTC) >= cutoff]
    recent.sort(key=lambda f: (f.mtime, f.rel), reverse=True)  # newest first: they get the budget

    kept: list[Session] = []
    budget = max_chars
    broken = 0
    cut_any = False
    for item in recent:
        if budget <= 0:
            cut_any = True  # older sessions left out entirely
            break
        messages, truncated, bad = _read_session(item, cutoff, max_bytes_per_file)
        broken += bad
        if len(messages) > max_messages_per_session:
            messages = messages[len(messages) - max_messages_per_session :]
            truncated = True
        chosen: list[Message] = []
        for message in reversed(messages):  # newest message first
            if len(message.text) > budget:
                budget = 0
                break
            budget -= len(message.text)
            chosen.append(message)
        if len(chosen) < len(messages):
            truncated = cut_any = True
        if chosen:
            mtime = datetime.fromtimestamp(item.mtime, tz=UTC)
            kept.append(Session(item.rel, tuple(reversed(chosen)), truncated, mtime))
    kept.reverse()  # oldest to newest for the prompt
    return Gathered(
        sessions=tuple(kept),
        total_chars=sum(len(m.text) for session in kept for m in session.messages),
        skipped_lines=broken,
        files_seen=len(found),
        newest_mtime=datetime.fromtimestamp(newest, tz=UTC) if newest is not None else None,
        truncated=cut_any,
    )


def read_bounded(path: Path, limit: int) -> str:
    """The text of ``path`` (UTF-8, invalid bytes replaced), at most ``limit`` chars in all.

    A longer file is cut and ends with ``CUT_MARKER`` (counted in ``limit``), so
    the reader knows the rest exists. A missing file reads as ``""`` (the API's
    view of a file not written yet). At most ``4 * limit + 4`` bytes are read.
    Raises OSError for other read failures and ValueError for a negative limit.
    """
    if limit < 0:
        raise ValueError("limit must not be negative")
    try:
        with open(path, "rb") as handle:
            # UTF-8 needs at most 4 bytes a char: this many bytes always hold more than limit chars.
            data = handle.read(4 * limit + 4)
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= limit:
        return text
    if limit < len(CUT_MARKER):
        return text[:limit]
    return text[: limit - len(CUT_MARKER)] + CUT_MARKER
