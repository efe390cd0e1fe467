"""Reading the reviewer's reply: finding the JSON object, the envelope, and every validation rule."""

from __future__ import annotations

import json

import pytest

from services.dreaming.model.values import FIELD_CAP, Proposal, ReviewerReply
from services.dreaming.review.reply import MAX_PROPOSALS, ReplyError, first_json_object, parse_reply

ADD = {"op": "add", "file": "MEMORY.md", "content": "- Bruce moved to Lisbon.", "reason": "session 3"}


def reply(*proposals: object, summary: object = "ok") -> str:
    return json.dumps({"summary": summary, "proposals": list(proposals)})


def only(*proposals: object) -> ReviewerReply:
    return parse_reply(reply(*proposals))


def dropped_for(proposal: object) -> str:
    got = only(proposal)
    assert got.proposals == ()
    (line,) = got.dropped
    assert line.startswith("proposal 1: ") and "\n" not in line
    return line


# --- finding the object ------------------------------------------------------------------


def test_strict_reply_is_mapped_to_proposals() -> None:
    got = parse_reply(reply(
        {"op": "replace", "file": "USER.md", "target": "Lives in Paris", "content": "Lives in Lisbon",
         "reason": "said so", "score": 0.9, "recallCount": 2, "topic": "home-city"},
        summary="one change",
    ))
    assert got == ReviewerReply("one change", (Proposal(
        op="replace", file="USER.md", target="Lives in Paris", content="Lives in Lisbon", reason="said so",
        score=0.9, recall_count=2, topic="home-city"),), ())


def test_claude_envelope_holds_the_reply_in_result() -> None:
    envelope = {"type": "result", "subtype": "success", "is_error": False, "result": reply(ADD), "session_id": "s"}
    assert parse_reply(json.dumps(envelope)).proposals[0].content == ADD["content"]


def test_an_envelope_result_may_wrap_the_reply_in_prose() -> None:
    result = "Here is my review:\n```json\n" + reply(ADD) + "\n```\nDone."
    assert len(parse_reply(json.dumps({"type": "result", "is_error": False, "result": result})).proposals) == 1


def test_a_verbose_event_list_gives_its_result_event() -> None:
    events = [{"type": "system", "subtype": "init"}, {"type": "assistant", "message": {"content": []}},
              {"type": "result", "is_error": False, "result": reply(ADD)}]
    assert len(parse_reply(json.dumps(events)).proposals) == 1


def test_an_envelope_with_is_error_is_a_failure() -> None:
    with pytest.raises(ReplyError, match="reported an error: API Error: overloaded"):
        parse_reply(json.dumps({"type": "result", "is_error": True, "result": "API Error: overloaded"}))


def test_an_envelope_without_result_is_a_failure() -> None:
    with pytest.raises(ReplyError, match="envelope has no result"):
        parse_reply(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": False}))


def test_nested_envelopes_are_not_unwrapped_forever() -> None:
    inner = json.dumps({"type": "result", "result": reply(ADD)})
    with pytest.raises(ReplyError, match="envelope inside the envelope"):
        parse_reply(json.dumps({"type": "result", "result": inner}))


def test_prose_and_code_fences_around_the_object_do_no_harm() -> None:
    text = "Sure! I reviewed {the sessions}.\n```json\n" + reply(ADD) + "\n```\nHope this helps {:"
    got = parse_reply(text)
    assert [p.content for p in got.proposals] == [ADD["content"]]


def test_braces_quotes_and_escapes_inside_strings_do_not_confuse_the_scan() -> None:
    tricky = 'Use {braces}, "quotes" and a back\\slash } {{ "'
    text = "note: {\n" + reply({**ADD, "content": tricky}, summary='a "}" in the summary') + " trailing }"
    got = parse_reply(text)
    assert got.proposals[0].content == tricky
    assert got.summary == 'a "}" in the summary'


def test_an_unclosed_brace_before_the_object_is_passed_over() -> None:
    assert len(parse_reply("I will use { as a marker.\n" + reply(ADD)).proposals) == 1


def test_the_first_json_object_is_taken() -> None:
    assert first_json_object('x {"a": 1} {"b": 2}') == {"a": 1}
    with pytest.raises(ReplyError, match="no proposals list"):
        parse_reply('{"example": true} then ' + reply(ADD))


def test_a_deeply_nested_object_is_no_crash() -> None:
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    with pytest.raises(ReplyError):
        parse_reply(deep)


def test_adversarial_braces_end_in_an_error_not_a_hang() -> None:
    with pytest.raises(ReplyError):
        parse_reply("{" * 300_000 + "x")
    with pytest.raises(ReplyError):
        parse_reply('{"a":"' * 200_000)


@pytest.mark.parametrize("text, reason", [
    ("", "no output"),
    ("   \n", "no output"),
    ("I have no changes to propose.", "no JSON object"),
    ("{not: json}", "no JSON object"),
    ("[1, 2]", "no JSON object"),
    ('{"summary": "x"}', "no proposals list"),
    ('{"summary": "x", "proposals": {"op": "add"}}', "no proposals list"),
    ('{"summary": 5, "proposals": []}', "summary is not a string"),
])
def test_unusable_output_is_a_reply_error(text: str, reason: str) -> None:
    with pytest.raises(ReplyError, match=reason):
        parse_reply(text)


def test_reply_error_is_a_value_error() -> None:
    assert issubclass(ReplyError, ValueError)


# --- the summary -------------------------------------------------------------------------


def test_summary_is_one_line_and_capped() -> None:
    assert parse_reply(reply(summary="two\nlines\t here ")).summary == "two lines here"
    assert len(parse_reply(reply(summary="s" * (FIELD_CAP + 50))).summary) == FIELD_CAP
    assert parse_reply(json.dumps({"proposals": []})).summary == ""
    assert parse_reply(json.dumps({"summary": None, "proposals": []})).summary == ""


# --- each proposal -----------------------------------------------------------------------


def test_a_malformed_proposal_is_dropped_and_the_others_kept() -> None:
    got = only(ADD, {"op": "delete", "file": "MEMORY.md", "target": "x"}, {**ADD, "content": "- second"})
    assert [p.content for p in got.proposals] == [ADD["content"], "- second"]
    assert got.dropped == ('proposal 2: op must be add, replace or remove (got "delete")',)


@pytest.mark.parametrize("proposal, why", [
    ("add this", "not an object"),
    ({"file": "MEMORY.md", "content": "x"}, "op must be"),
    ({**ADD, "op": "ADD"}, "op must be"),
    ({**ADD, "file": "SOUL.md"}, "file must be MEMORY.md or USER.md"),
    ({k: v for k, v in ADD.items() if k != "file"}, "file must be"),
    ({**ADD, "file": "memory.md"}, "file must be"),
    ({"op": "replace", "file": "MEMORY.md", "content": "new"}, "replace needs a target"),
    ({"op": "remove", "file": "MEMORY.md", "target": "  \n"}, "remove needs a target"),
    ({"op": "add", "file": "MEMORY.md"}, "add needs content"),
    ({"op": "replace", "file": "MEMORY.md", "target": "old", "content": " "}, "replace needs content"),
    ({**ADD, "content": 12}, "content must be a string"),
    ({"op": "remove", "file": "MEMORY.md", "target": ["x"]}, "target must be a string"),
    ({**ADD, "reason": {"why": 1}}, "reason must be a string"),
    ({**ADD, "tier": "forever"}, "tier must be durable or episodic"),
    ({**ADD, "score": "high"}, "score must be a finite number"),
    ({**ADD, "score": True}, "score must be a finite number"),
    ({**ADD, "recallCount": -1}, "recallCount must be a non-negative integer"),
    ({**ADD, "recallCount": 2.5}, "recallCount must be"),
    ({**ADD, "recallCount": "3"}, "recallCount must be"),
    ({**ADD, "recallCount": True}, "recallCount must be"),
    ({**ADD, "content": "c" * (FIELD_CAP + 1)}, f"content is over {FIELD_CAP} chars"),
    ({"op": "remove", "file": "MEMORY.md", "target": "t" * (FIELD_CAP + 1)}, f"target is over {FIELD_CAP} chars"),
])
def test_validation_rules_drop_with_a_reason(proposal: object, why: str) -> None:
    assert why in dropped_for(proposal)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_score_must_be_finite(literal: str) -> None:
    text = reply(ADD).replace('"reason": "session 3"', f'"reason": "r", "score": {literal}')
    assert "score must be a finite number" in parse_reply(text).dropped[0]


def test_defaults_and_accepted_numbers() -> None:
    (plain,) = only(ADD).proposals
    assert (plain.score, plain.recall_count, plain.topic, plain.tier, plain.target) == (0.0, 0, "", "durable", "")
    (numbers,) = only({**ADD, "score": 1, "recallCount": 3.0}).proposals
    assert (numbers.score, numbers.recall_count) == (1.0, 3)
    (nulls,) = only({**ADD, "score": None, "recallCount": None, "target": None, "tier": None}).proposals
    assert (nulls.score, nulls.recall_count, nulls.target, nulls.tier) == (0.0, 0, "", "durable")


def test_an_add_may_name_an_anchor_and_a_remove_keeps_no_content() -> None:
    (anchored,) = only({**ADD, "target": "## Places"}).proposals
    assert anchored.target == "## Places"
    (removal,) = only({"op": "remove", "file": "USER.md", "target": "- old", "content": "ignored"}).proposals
    assert (removal.op, removal.target, removal.content) == ("remove", "- old", "")


def test_fields_at_the_cap_are_kept_and_a_long_reason_is_cut() -> None:
    (p,) = only({"op": "replace", "file": "MEMORY.md", "target": "t" * FIELD_CAP, "content": "c" * FIELD_CAP,
                 "reason": "first line\nsecond " + "r" * FIELD_CAP}).proposals
    assert len(p.target) == FIELD_CAP and len(p.content) == FIELD_CAP
    assert len(p.reason) == FIELD_CAP and p.reason.startswith("first line second r")


def test_an_invalid_topic_on_a_durable_op_is_dropped_from_it_only() -> None:
    for bad in ("Home City", "x" * 65, "", "a/b", 7, "café"):
        (p,) = only({**ADD, "topic": bad}).proposals
        assert p.topic == "" and p.content == ADD["content"]
    assert only({**ADD, "topic": "a-1"}).proposals[0].topic == "a-1"
    assert only({**ADD, "topic": "Home City"}).dropped == ()


def test_episodic_add_needs_a_topic_and_ignores_file_and_target() -> None:
    (p,) = only({"op": "add", "tier": "episodic", "topic": "deploy-2026-11", "file": "MEMORY.md",
                 "target": "x", "content": "- 30 Nov: deployed v2", "reason": "task log"}).proposals
    assert (p.tier, p.file, p.target, p.topic, p.content) == ("episodic", "", "", "deploy-2026-11", "- 30 Nov: deployed v2")


@pytest.mark.parametrize("proposal, why", [
    ({"op": "replace", "tier": "episodic", "topic": "t", "target": "a", "content": "b"}, "episodic tier takes only add"),
    ({"op": "remove", "tier": "episodic", "topic": "t", "target": "a"}, "episodic tier takes only add"),
    ({"op": "add", "tier": "episodic", "content": "x"}, "needs a topic"),
    ({"op": "add", "tier": "episodic", "topic": "Bad Topic", "content": "x"}, "needs a topic"),
    ({"op": "add", "tier": "episodic", "topic": "../etc", "content": "x"}, "needs a topic"),
    ({"op": "add", "tier": "episodic", "topic": "t" * 65, "content": "x"}, "needs a topic"),
    ({"op": "add", "tier": "episodic", "topic": "ok"}, "needs content"),
])
def test_episodic_rules(proposal: object, why: str) -> None:
    assert why in dropped_for(proposal)


def test_unknown_fields_are_ignored() -> None:
    (p,) = only({**ADD, "confidence": "high", "id": "p-123", "extra": {"nested": [1]}}).proposals
    assert p == Proposal(op="add", file="MEMORY.md", content=ADD["content"], reason="session 3")


def test_a_repeated_proposal_is_dropped() -> None:
    got = only(ADD, {**ADD, "reason": "said again"})
    assert len(got.proposals) == 1 and got.dropped == ("proposal 2: repeats proposal 1",)


def test_a_huge_list_is_read_only_up_to_the_cap() -> None:
    many = [{**ADD, "content": f"- fact {n}"} for n in range(MAX_PROPOSALS + 50)]
    got = only(*many)
    assert len(got.proposals) == MAX_PROPOSALS
    assert got.dropped == (f"proposals {MAX_PROPOSALS + 1}-{MAX_PROPOSALS + 50}: not read (at most {MAX_PROPOSALS})",)


def test_lone_surrogate_escapes_never_reach_a_proposal_nor_break_the_reply() -> None:
    """JSON lets a reviewer write "\\ud800", which no UTF-8 file can hold. In a content it would make
    parse_reply raise UnicodeEncodeError (the proposal's id hashes it) and fail the run; in a summary,
    a reason or a refused value it would reach the audit, written as UTF-8."""
    text = (
        '{"summary": "sum \\ud800", "proposals": ['
        '{"op": "add", "file": "MEMORY.md", "content": "- fact \\udfff"},'
        '{"op": "replace", "file": "MEMORY.md", "target": "old \\ud800", "content": "new"},'
        '{"op": "add", "file": "MEMORY.md", "content": "- kept", "reason": "why \\ud83d"},'
        '{"op": "\\ud800"}]}'
    )
    got = parse_reply(text)
    assert got.summary == "sum \ufffd"
    assert [(p.content, p.reason) for p in got.proposals] == [("- kept", "why \ufffd")]
    assert got.dropped == (
        "proposal 1: content is not valid Unicode (a lone surrogate escape)",
        "proposal 2: target is not valid Unicode (a lone surrogate escape)",
        'proposal 4: op must be add, replace or remove (got "\ufffd")',
    )
    for line in (got.summary, *got.dropped, *(p.reason for p in got.proposals)):
        line.encode("utf-8")
