"""Properties of reading the reviewer's reply (``services/dreaming/review/reviewer.py``, ``model/values.py``).

- any bytes on stdout (decoded as ``run_reviewer`` decodes them) give a ``ReviewerReply`` or
  ``ReplyError``, the one error ``run_reviewer`` turns into a failed outcome: never another
  exception;
- every proposal in a reply is valid as the reviewer protocol says (op, tier, file, target,
  content, topic, score, recall count), its free-text fields are capped at ``FIELD_CAP``, ids
  are unique and at most ``MAX_PROPOSALS`` are read; the summary is one capped line;
- every text of the reply can be written as UTF-8 (the audit, the journal and MEMORY.md are);
- the strict form, Claude's JSON envelope, the ``--verbose`` event list and a reply wrapped
  in prose or a code fence all read as the same reply.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from services.dreaming.model.values import DURABLE, EPISODIC, FIELD_CAP, MEMORY_FILES, OPS, ReviewerReply
from services.dreaming.review.reply import MAX_PROPOSALS, ReplyError, parse_reply

TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "  ", "\n", "- fact", "## User", "\ud800", "x\udfffy", "é", "\x00", "{", "}", '"']),
    st.integers(FIELD_CAP - 2, FIELD_CAP + 2).map(lambda n: "x" * n),
)
ANY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)
PROPOSAL = st.fixed_dictionaries(
    {},
    optional={
        "op": st.one_of(st.sampled_from([*OPS, "ADD", "delete"]), ANY_JSON),
        "tier": st.one_of(st.sampled_from([DURABLE, EPISODIC, None, "semantic"]), ANY_JSON),
        "file": st.one_of(st.sampled_from([*MEMORY_FILES, "SOUL.md", "../MEMORY.md", ""]), ANY_JSON),
        "target": st.one_of(TEXT, ANY_JSON),
        "content": st.one_of(TEXT, ANY_JSON),
        "reason": st.one_of(TEXT, ANY_JSON, st.just("y" * (FIELD_CAP + 50))),
        "topic": st.one_of(st.sampled_from(["deploys", "a-b-1", "Bad Topic", "x" * 65, ""]), ANY_JSON),
        "score": st.one_of(st.floats(), st.integers(), st.sampled_from([True, "1", None, 10**400 // 10**399])),
        "recallCount": st.one_of(st.integers(-2, 10**20), st.floats(), st.sampled_from([True, "3", None, 2.0])),
        "extra": ANY_JSON,
    },
)
REPLIES = st.fixed_dictionaries(
    {"proposals": st.one_of(st.lists(st.one_of(PROPOSAL, ANY_JSON), max_size=6), ANY_JSON)},
    optional={"summary": st.one_of(TEXT, ANY_JSON), "extra": ANY_JSON},
)


def _check(reply: ReviewerReply) -> None:
    assert "\n" not in reply.summary and len(reply.summary) <= FIELD_CAP
    ids = [p.id for p in reply.proposals]
    assert len(ids) == len(set(ids)) and len(ids) <= MAX_PROPOSALS
    for p in reply.proposals:
        assert p.op in OPS and p.tier in (DURABLE, EPISODIC)
        for value in (p.target, p.content, p.reason, p.topic, p.file):
            assert len(value) <= FIELD_CAP
            value.encode("utf-8")  # UnicodeEncodeError: a lone surrogate got through
        assert "\n" not in p.reason
        assert p.score == p.score and abs(p.score) != float("inf") and p.recall_count >= 0
        if p.tier == EPISODIC:
            assert p.op == "add" and p.file == "" and p.topic and p.content.strip()
        else:
            assert p.file in MEMORY_FILES
            assert p.op == "add" or p.target.strip()
            assert p.op == "remove" or p.content.strip()
        json.dumps(p.to_json(), ensure_ascii=False).encode("utf-8")
    for line in reply.dropped:
        line.encode("utf-8")
    reply.summary.encode("utf-8")


def _read(stdout: str) -> ReviewerReply | None:
    try:
        reply = parse_reply(stdout)
    except ReplyError:
        return None
    _check(reply)
    return reply


@given(raw=st.one_of(st.binary(max_size=200), REPLIES.map(lambda r: json.dumps(r).encode())))
def test_any_output_is_a_valid_reply_or_a_reply_error(raw: bytes) -> None:
    for cut in (len(raw), len(raw) // 2):  # a reply cut short by the stdout cap, too
        _read(raw[:cut].decode("utf-8", errors="replace"))


@given(reply=REPLIES, ascii_only=st.booleans())
def test_every_form_of_the_same_reply_reads_the_same(reply: dict[str, Any], ascii_only: bool) -> None:
    strict = json.dumps(reply, ensure_ascii=ascii_only)
    expected = _read(strict)
    envelope = {"type": "result", "subtype": "success", "is_error": False, "result": strict}
    forms = [
        json.dumps(envelope, ensure_ascii=ascii_only),
        json.dumps([{"type": "system"}, envelope], ensure_ascii=ascii_only),
        f"Here is my review.\n```json\n{strict}\n```\nDone.",
        json.dumps({**envelope, "result": f"Sure:\n{strict}\nThat's all."}, ensure_ascii=ascii_only),
    ]
    for form in forms:
        assert _read(form) == expected, form[:200]


@given(count=st.integers(MAX_PROPOSALS - 1, MAX_PROPOSALS + 3))
def test_at_most_max_proposals_are_read(count: int) -> None:
    proposals = [{"op": "add", "file": "MEMORY.md", "content": f"fact {n}"} for n in range(count)]
    reply = parse_reply(json.dumps({"proposals": proposals}))
    assert len(reply.proposals) == min(count, MAX_PROPOSALS)
    assert bool(reply.dropped) == (count > MAX_PROPOSALS)
