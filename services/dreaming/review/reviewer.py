"""Run the reviewer command and read its reply (the reviewer protocol, docs/concepts/reviewer.md "The reviewer").

``run_reviewer`` starts ``reviewerCommand`` with the prompt on stdin and turns
whatever happens into a ``ReviewerOutcome``; it never raises for what the
reviewer does (a missing executable, a crash, a timeout, a flood of output, a
reply of the wrong shape all give ``ok=False``, zero proposals and a one-line
``reason``), because a failed reviewer must never fail a dreaming run.

The child:

- is started with ``create_subprocess_exec`` (never a shell) in its own
  session, so its process group is its own: a timeout or an output flood kills
  the whole group (SIGKILL), grandchildren included, and reaps the leader. The
  group is also killed when the reviewer ends, so nothing it started outlives
  the call;
- gets exactly the environment ``env`` the caller passes. ``reviewer_environment``
  builds the usual one from the gateway's environment (read once, in the entry
  point): an allowlist of what a CLI needs to run and authenticate (PATH, HOME,
  locale, temp dir, proxies and CA files, ``ANTHROPIC_*`` / ``CLAUDE_*``); the
  gateway's own settings and every other variable stay out. Without ``env``
  the child gets only a default PATH and a UTF-8 locale: the gateway's
  environment is never inherited by accident;
- has its stdout read incrementally and capped (``max_stdout``) and its stderr
  drained concurrently into a short tail (for the reason), so neither pipe can
  block it or us.

A first element ``gateway`` is this installation's own command, and a command
that cannot start gets a reason with the fix (``reviewer_command``).

``parse_reply`` reads stdout: the strict reply object or Claude's
``--output-format json`` envelope (whose ``result`` string holds the reply);
the first balanced JSON object in the text is taken, so prose or a code fence
around it does no harm. Each proposal is validated into a ``Proposal``; a
malformed one is dropped with a one-line reason in ``ReviewerReply.dropped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from services.dreaming.model.values import (
    DURABLE,
    EPISODIC,
    FIELD_CAP,
    MEMORY_FILES,
    OPS,
    TOPIC_PATTERN,
    Proposal,
    ReviewerOutcome,
    ReviewerReply,
)
from services.dreaming.review.reviewer_command import resolve_command, start_failure

MAX_PROPOSALS: Final = 100  # proposals read from one reply; the rest are ignored
STDERR_TAIL: Final = 4096  # bytes of stderr kept for the reason
REASON_CAP: Final = 300  # chars of the reviewer's stderr quoted in a reason
# Brace-scan steps before the search for a JSON object gives up: twice what one pass over the
# largest stdout allowed by default (1 MiB) can take, so only adversarial nesting reaches it.
SCAN_BUDGET: Final = 2_000_000
SETTLE_S: Final = 2.0  # seconds to wait for the pipes' EOF once the group is dead
_CHUNK: Final = 65536

_TOPIC: Final = re.compile(TOPIC_PATTERN)  # fullmatch: "$" alone lets "deploys\n" through, a file name with a newline
_OUTSIDE: Final = re.compile(r'[{}"]')  # what matters to the scan outside a JSON string
_INSIDE: Final = re.compile(r'["\\]')  # and inside one
_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_PASSED_NAMES: Final = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
})
_PASSED_PREFIXES: Final = ("LC_", "ANTHROPIC_", "CLAUDE_")
_DEFAULT_ENV: Final = {"PATH": os.defpath, "LANG": "C.UTF-8"}


class ReplyError(ValueError):
    """The reviewer's output holds no usable reply; ``str()`` is the reason, one line."""


def reviewer_environment(source: Mapping[str, str]) -> dict[str, str]:
    """The reviewer's environment built from ``source`` (the gateway's, read by the entry point).

    Keeps only the allowlist of the module docstring; PATH and LANG default to
    a system PATH and ``C.UTF-8`` when ``source`` lacks them.
    """
    kept = {k: v for k, v in source.items() if k in _PASSED_NAMES or k.startswith(_PASSED_PREFIXES)}
    return {**_DEFAULT_ENV, **kept}


# --- reading the reply -------------------------------------------------------------------


def _balanced_end(text: str, start: int) -> tuple[int | None, int]:
    """Index of the ``}`` closing the ``{`` at ``start``, or None, and the scan steps taken.

    Braces inside JSON strings do not count; ``\\`` escapes the next char there.
    """
    depth = 0
    pos = start
    steps = 0
    while True:
        m = _OUTSIDE.search(text, pos)
        steps += 1
        if m is None:
            return None, steps
        char = m.group()
        pos = m.end()
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return m.start(), steps
        else:  # a string: skip to its closing quote, stepping over escapes
            while True:
                s = _INSIDE.search(text, pos)
                steps += 1
                if s is None:
                    return None, steps
                pos = s.end()
                if s.group() == '"':
                    break
                pos += 1  # the escaped char, whatever it is (\" \\ \n \u…)


def first_json_object(text: str) -> dict[str, object]:
    """The first balanced ``{…}`` in ``text`` that parses as a JSON object.

    Braces inside JSON strings do not count. A balanced span that is not JSON
    (prose like ``{this}``) is passed over and the search goes on from its
    next character. Raises ReplyError when there is none, or when the scan
    passes ``SCAN_BUDGET`` steps (adversarial nesting cannot make it slow).
    """
    steps = 0
    pos = text.find("{")
    while pos >= 0:
        end, used = _balanced_end(text, pos)
        steps += used
        if end is not None:
            with contextlib.suppress(ValueError, RecursionError):
                value = json.loads(text[pos : end + 1])
                if isinstance(value, dict):
                    return value
        if steps > SCAN_BUDGET:
            raise ReplyError("no JSON object found before the scan limit")
        pos = text.find("{", pos + 1)
    raise ReplyError("no JSON object in the reviewer's output")


def _valid(text: str) -> str:
    """``text`` with each lone surrogate (JSON's ``"\\ud800"`` decodes to one) as U+FFFD: what the
    reply explains is written to the audit and the journal, as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def _one_line(text: str) -> str:
    return " ".join(_valid(text).split())


def _show(value: object) -> str:
    shown = _valid(json.dumps(value, ensure_ascii=False))
    return shown if len(shown) <= 40 else shown[:39] + "…"


class _Malformed(Exception):
    """One proposal is dropped; the message says why."""


def _text(item: Mapping[str, object], key: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Malformed(f"{key} must be a string")
    return value


def _score(item: Mapping[str, object]) -> float:
    value = item.get("score")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        raise _Malformed(f"score must be a finite number (got {_show(value)})")
    return float(value)


def _recall_count(item: Mapping[str, object]) -> int:
    value = item.get("recallCount")
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed(f"recallCount must be a non-negative integer (got {_show(value)})")
    return value


def _proposal(item: object) -> Proposal:
    """One validated Proposal, or _Malformed saying why not (rules in parse_reply)."""
    if not isinstance(item, dict):
        raise _Malformed("not an object")
    op = item.get("op")
    if op not in OPS:
        raise _Malformed(f"op must be add, replace or remove (got {_show(op)})")
    tier = item.get("tier", DURABLE)
    if tier is None:
        tier = DURABLE
    if tier not in (DURABLE, EPISODIC):
        raise _Malformed(f"tier must be durable or episodic (got {_show(tier)})")
    target, content = _text(item, "target"), _text(item, "content")
    reason = _one_line(_text(item, "reason"))[:FIELD_CAP]  # a long reason is cut: it only explains
    for key, value in (("target", target), ("content", content)):
        if len(value) > FIELD_CAP:  # cutting an anchor or a fact would change what it means
            raise _Malformed(f"{key} is over {FIELD_CAP} chars")
        if _SURROGATE.search(value):  # so would replacing it, and it cannot be written as UTF-8
            raise _Malformed(f"{key} is not valid Unicode (a lone surrogate escape)")
    raw_topic = item.get("topic")
    topic = raw_topic if isinstance(raw_topic, str) and _TOPIC.fullmatch(raw_topic) else ""
    score, recall = _score(item), _recall_count(item)
    if tier == EPISODIC:
        if op != "add":
            raise _Malformed(f"the episodic tier takes only add (got {op})")
        if not topic:
            raise _Malformed(f"an episodic add needs a topic matching {TOPIC_PATTERN} (got {_show(raw_topic)})")
        if not content.strip():
            raise _Malformed("an episodic add needs content")
        return Proposal(op="add", file="", content=content, reason=reason, score=score,
                        recall_count=recall, topic=topic, tier=EPISODIC)
    file = item.get("file")
    if file not in MEMORY_FILES:
        raise _Malformed(f"file must be {' or '.join(MEMORY_FILES)} (got {_show(file)})")
    if op in ("replace", "remove") and not target.strip():
        raise _Malformed(f"{op} needs a target")
    if op in ("add", "replace") and not content.strip():
        raise _Malformed(f"{op} needs content")
    return Proposal(op=str(op), file=str(file), target=target, content="" if op == "remove" else content,
                    reason=reason, score=score, recall_count=recall, topic=topic, tier=DURABLE)


def _top_object(stdout: str) -> dict[str, object]:
    """The object the reply is read from: the whole output when it is one JSON value, else the
    first balanced object in it. An array is Claude's ``--verbose`` event list: its last
    ``result`` event is the envelope."""
    with contextlib.suppress(ValueError, RecursionError):
        whole = json.loads(stdout)
        if isinstance(whole, dict):
            return whole
        if isinstance(whole, list):
            results = [e for e in whole if isinstance(e, dict) and e.get("type") == "result"]
            if results:
                return results[-1]
    return first_json_object(stdout)


def _unwrap(obj: dict[str, object]) -> dict[str, object]:
    """The reply inside Claude's ``--output-format json`` envelope, or ``obj`` itself."""
    if obj.get("is_error") is True:
        result = obj.get("result")
        detail = f": {_one_line(result)[:REASON_CAP]}" if isinstance(result, str) and result.strip() else ""
        raise ReplyError(f"the reviewer reported an error{detail}")
    if "proposals" not in obj and obj.get("type") == "result" and not isinstance(obj.get("result"), str):
        raise ReplyError(f"the envelope has no result (subtype {_show(obj.get('subtype'))})")
    if "proposals" not in obj and isinstance(obj.get("result"), str):
        inner = first_json_object(str(obj["result"]))
        if "proposals" not in inner and isinstance(inner.get("result"), str):
            raise ReplyError("an envelope inside the envelope")  # one level only: no unbounded unwrapping
        return inner
    return obj


def parse_reply(stdout: str) -> ReviewerReply:
    """The validated reply in the reviewer's ``stdout``.

    Takes the first balanced JSON object (``first_json_object``; an output that
    is a JSON array of Claude events gives its last ``result`` event), unwraps
    a Claude envelope (``"is_error": true`` is a failure), then validates:
    ``summary`` a string (one line, cut at ``FIELD_CAP``); ``proposals`` a list,
    of which the first ``MAX_PROPOSALS`` are read. Each proposal: ``op`` add,
    replace or remove; ``tier`` durable (default) or episodic. Durable needs
    ``file`` MEMORY.md or USER.md, a non-blank ``target`` for replace/remove and
    non-blank ``content`` for add/replace (a remove's content is ignored); an
    invalid optional ``topic`` is dropped from it. Episodic is an add only,
    needs a ``topic`` matching ``TOPIC_PATTERN`` and content; its file and
    target are ignored. ``score`` a finite number (0), ``recallCount`` a
    non-negative integer (0). A target or content over ``FIELD_CAP``, or holding
    a lone surrogate (an escape JSON allows and UTF-8 cannot carry), drops the
    proposal; a longer reason is cut, and a lone surrogate in the summary, a
    reason or a message is U+FFFD. A repeat of an earlier proposal (same id)
    is dropped. Unknown fields are ignored.

    Raises ReplyError when there is no object or it has the wrong shape.
    """
    if not stdout.strip():
        raise ReplyError("no output")
    obj = _unwrap(_top_object(stdout))
    summary = obj.get("summary", "")
    if summary is None:
        summary = ""
    if not isinstance(summary, str):
        raise ReplyError("summary is not a string")
    raw = obj.get("proposals")
    if not isinstance(raw, list):
        raise ReplyError("the reply has no proposals list")
    proposals: list[Proposal] = []
    dropped: list[str] = []
    seen: dict[str, int] = {}
    for n, item in enumerate(raw[:MAX_PROPOSALS], start=1):
        try:
            proposal = _proposal(item)
        except _Malformed as exc:
            dropped.append(f"proposal {n}: {exc}")
            continue
        if proposal.id in seen:
            dropped.append(f"proposal {n}: repeats proposal {seen[proposal.id]}")
            continue
        seen[proposal.id] = n
        proposals.append(proposal)
    if len(raw) > MAX_PROPOSALS:
        dropped.append(f"proposals {MAX_PROPOSALS + 1}-{len(raw)}: not read (at most {MAX_PROPOSALS})")
    return ReviewerReply(_one_line(summary)[:FIELD_CAP], tuple(proposals), tuple(dropped))


# --- running the reviewer ----------------------------------------------------------------


class _TooMuchOutput(Exception):
    """The reviewer wrote more than the stdout cap."""


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the reviewer's group; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the prompt and close stdin. A reviewer that exits without reading it is not an error."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.close()
        await stdin.wait_closed()


async def _read_capped(stdout: asyncio.StreamReader, limit: int, into: bytearray) -> None:
    """Read stdout to EOF into ``into``; raise _TooMuchOutput as soon as it passes ``limit`` bytes."""
    while chunk := await stdout.read(_CHUNK):
        into += chunk
        if len(into) > limit:
            raise _TooMuchOutput


async def _drain_tail(stderr: asyncio.StreamReader, into: bytearray) -> None:
    """Read stderr to EOF, keeping only its last ``STDERR_TAIL`` bytes."""
    while chunk := await stderr.read(_CHUNK):
        into += chunk
        del into[:-STDERR_TAIL]


async def _exchange(proc: asyncio.subprocess.Process, data: bytes, limit: int, out: bytearray) -> int:
    """Feed stdin while reading stdout (a large prompt must not deadlock), then wait for the exit."""
    assert proc.stdin is not None and proc.stdout is not None
    feeder = asyncio.create_task(_feed(proc.stdin, data))
    try:
        await _read_capped(proc.stdout, limit, out)
        return await proc.wait()
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)


async def _discard(stream: asyncio.StreamReader) -> None:
    while await stream.read(_CHUNK):
        continue  # read and dropped: a full pipe would block the reviewer


async def _settle(proc: asyncio.subprocess.Process, drainer: asyncio.Task[None]) -> None:
    """Read both pipes to EOF, so their transports close and no fd is left behind.

    The group is dead, so EOF comes at once; the bound is for a process that
    left the group (setsid) still holding a pipe: then the transport is closed
    directly (asyncio has no public way to give up on a child's pipes).
    """
    assert proc.stdout is not None
    rest = asyncio.create_task(_discard(proc.stdout))
    _done, pending = await asyncio.wait({drainer, rest}, timeout=SETTLE_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    transport = getattr(proc, "_transport", None)
    if pending and transport is not None:
        transport.close()


def _stderr_hint(tail: bytearray) -> str:
    text = _one_line(tail.decode("utf-8", errors="replace"))
    return f": {text[-REASON_CAP:]}" if text else ""


async def run_reviewer(
    command: Sequence[str],
    prompt: str,
    timeout_s: float,
    *,
    max_stdout: int = 1 << 20,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ReviewerOutcome:
    """Run ``command`` with ``prompt`` on stdin for at most ``timeout_s`` seconds and parse its reply.

    ``env`` is the child's whole environment (see ``reviewer_environment``);
    None gives only a default PATH and LANG. A first element ``gateway`` is
    this installation's command (``resolve_command``). ``cwd`` is its working folder
    (None: ours). More than ``max_stdout`` bytes on stdout, or the timeout,
    kill the whole process group. Never raises for what the reviewer does
    (rules in the module docstring); ``ok`` is true only for a zero exit whose
    output ``parse_reply`` accepts. Cancelling the call kills the group too.
    """
    started = time.monotonic()

    def outcome(ok: bool, reason: str = "", reply: ReviewerReply | None = None, nbytes: int = 0) -> ReviewerOutcome:
        seconds = round(time.monotonic() - started, 3)
        return ReviewerOutcome(reply or ReviewerReply(), ok, reason, seconds, nbytes)

    if not command:
        return outcome(False, "the reviewer command is empty")
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *resolve_command(command),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else dict(_DEFAULT_ENV),
        start_new_session=True,  # its own process group, so a kill reaches its children
    ))
    cancelled = False
    while True:
        # The child runs before asyncio has connected its pipes: a cancel in between must wait
        # for the spawn, so that the group is killed below (not left running, nor waited for).
        try:
            proc = await asyncio.shield(spawn)
            break
        except asyncio.CancelledError:
            cancelled = True
        except OSError as exc:
            if cancelled:
                raise asyncio.CancelledError from None
            return outcome(False, start_failure(command, exc, env if env is not None else _DEFAULT_ENV))

    assert proc.stderr is not None
    out = bytearray()
    err = bytearray()
    drainer = asyncio.create_task(_drain_tail(proc.stderr, err))
    failure = ""
    code: int | None = None
    try:
        if cancelled:
            raise asyncio.CancelledError  # cancelled while spawning: the group goes at once
        data = prompt.encode("utf-8", errors="replace")
        code = await asyncio.wait_for(_exchange(proc, data, max_stdout, out), timeout_s)
    except TimeoutError:
        failure = f"timed out after {timeout_s:g} s"
    except _TooMuchOutput:
        failure = f"more than {_size(max_stdout)} on stdout"
    finally:
        # Whatever happened, nothing the reviewer started outlives the call.
        _kill_group(proc.pid)
        # Pipes first: asyncio's wait() returns only once every pipe is closed, and a
        # pipe left unread (after a flood) would never close.
        await _settle(proc, drainer)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), SETTLE_S)
    nbytes = len(out)
    if failure:
        return outcome(False, failure + _stderr_hint(err), nbytes=nbytes)
    if code != 0:
        status = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        return outcome(False, status + _stderr_hint(err), nbytes=nbytes)
    try:
        reply = parse_reply(out.decode("utf-8", errors="replace"))
    except ReplyError as exc:
        return outcome(False, str(exc), nbytes=nbytes)
    return outcome(True, reply=reply, nbytes=nbytes)
