"""The reviewer's reply (the reviewer protocol, docs/concepts/reviewer.md "The reviewer"), read.

``parse_reply`` reads the reviewer's stdout: the strict reply object or Claude's
``--output-format json`` envelope (whose ``result`` string holds the reply);
the first balanced JSON object in the text is taken, so prose or a code fence
around it does no harm. Each proposal is validated into a ``Proposal``; a
malformed one is dropped with a one-line reason in ``ReviewerReply.dropped``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Final

from services.dreaming.model.values import (
    DURABLE,
    EPISODIC,
    FIELD_CAP,
    MEMORY_FILES,
    OPS,
    TOPIC_PATTERN,
    Proposal,
    ReviewerReply,
)

MAX_PROPOSALS: Final = 100  # proposals read from one reply; the rest are ignored
REASON_CAP: Final = 300  # chars of the reviewer's own words (its stderr, an error result) quoted in a reason
# Brace-scan steps before the search for a JSON object gives up: twice what one pass over the
# largest stdout allowed by default (1 MiB) can take, so only adversarial nesting reaches it.
SCAN_BUDGET: Final = 2_000_000
_TOPIC: Final = re.compile(TOPIC_PATTERN)  # fullmatch: "$" alone lets "deploys\n" through, a file name with a newline
_OUTSIDE: Final = re.compile(r'[{}"]')  # what matters to the scan outside a JSON string
_INSIDE: Final = re.compile(r'["\\]')  # and inside one
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class ReplyError(ValueError):
    """The reviewer's output holds no usable reply; ``str()`` is the reason, one line."""


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


def one_line(text: str) -> str:
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
    reason = one_line(_text(item, "reason"))[:FIELD_CAP]  # a long reason is cut: it only explains
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
        detail = f": {one_line(result)[:REASON_CAP]}" if isinstance(result, str) and result.strip() else ""
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
    return ReviewerReply(one_line(summary)[:FIELD_CAP], tuple(proposals), tuple(dropped))
