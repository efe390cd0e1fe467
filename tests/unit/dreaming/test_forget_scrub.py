"""Finding a forget's target in the forms dreaming stores text in: plain text, JSON string values
(escaped), a journal edit's cut context, and quotes shortened with an ellipsis."""

from __future__ import annotations

import json

from gateway.forgetting import Target, marker
from services.dreaming.forget.scrub import scrub_edit, scrub_json, scrub_text
from services.dreaming.forget.workspace import scrub_file

FACT = "Dana Whitlock's locker code is 7741-Ü"
TARGET = Target.parse(FACT, None)
ID = "F-0123456789ab"
M = marker(ID)


def test_plain_text_matches_across_case_and_line_breaks_with_their_lines() -> None:
    text = "# Notes\n\n- dana whitlock's\nLOCKER code is 7741-ü, said Dana.\n- Then: " + FACT + "\n"
    done = scrub_text(text, TARGET, ID)
    assert done.count == 2 and done.lines == (3, 5)
    assert done.text == f"# Notes\n\n- {M}, said Dana.\n- Then: {M}\n"


def test_a_quote_cut_by_an_ellipsis_loses_its_start_of_the_text_too() -> None:
    cut = '"- Lobby notes: Dana Whitlock\'s lock…" and "Dana…" and "nothing to do with it…"'
    done = scrub_text(cut, TARGET, ID)
    assert done.count == 1
    assert done.text == f'"- Lobby notes: {M}…" and "Dana…" and "nothing to do with it…"'  # under 8 chars names nothing


def test_a_pattern_has_no_fragments() -> None:
    target = Target.parse(None, r"code is \d+")
    assert scrub_text("the code is 7741 and the code is…", target, ID).text == f"the {M} and the code is…"


def test_json_values_are_searched_decoded_and_only_changed_literals_are_re_encoded() -> None:
    record = {"kind": "op", FACT: "a key is the format's, not remembered text", "n": 3,
              "proposal": {"content": f"first line\n{FACT}", "reason": "kept as it was \u00e9"}}
    raw = json.dumps(record, ensure_ascii=True)
    assert FACT not in raw and "\\u00dc" in raw  # escaped: a search of the raw bytes would miss it
    done = scrub_json(raw, TARGET, ID)
    assert done.count == 1
    out = json.loads(done.text)
    assert out["proposal"]["content"] == f"first line\n{M}" and FACT in out
    assert done.text.isascii() and '"reason": "kept as it was \\u00e9"' in done.text
    assert done.text.replace(json.dumps(f"first line\n{M}"), "X") == raw.replace(json.dumps(f"first line\n{FACT}"), "X")


def test_a_pretty_json_document_keeps_its_layout() -> None:
    raw = json.dumps({"format": 1, "lastRun": {"reason": f"the reviewer said: {FACT}", "status": "nothing"}}, indent=2, ensure_ascii=False) + "\n"
    done = scrub_json(raw, TARGET, ID)
    assert done.count == 1 and done.lines == (4,)
    assert done.text == raw.replace(FACT, M)


def test_a_journal_edit_is_scrubbed_across_its_context_and_its_cut_edges() -> None:
    fields = {"before": "People\n\n- Dana Whitlock's", "removed": " locker code is 7741-Ü (facilities)\n", "inserted": "",
              "after": "- The office"}
    new, count = scrub_edit(fields, TARGET, ID, at_start=True, at_end=False)
    assert new == {"before": f"People\n\n- {M}", "removed": f"{M} (facilities)\n", "inserted": "", "after": "- The office"}
    assert count == 2
    tail = {"before": "tlock's locker code is 7741-Ü\n", "removed": "- The office opens at 7.", "inserted": "- At 8.", "after": "\n"}
    assert scrub_edit(tail, TARGET, ID, at_start=False, at_end=False)[0]["before"] == f"{M}\n"
    assert scrub_edit(tail, TARGET, ID, at_start=True, at_end=False)[0] == tail  # not cut there: it is the file's start
    head = {"before": "x\n", "removed": "", "inserted": "- New.\n", "after": "- Dana Whitlock's lo"}
    assert scrub_edit(head, TARGET, ID, at_start=False, at_end=False)[0]["after"] == f"- {M}"


def test_a_journal_line_keeps_every_field_it_does_not_change() -> None:
    record = {"kind": "edit", "run": "r1", "op": "r1/1", "file": "MEMORY.md", "opKind": "remove", "offset": 12,
              "removed": f"- {FACT}\n", "inserted": "", "before": "# Memory\n\n", "after": "- Next.\n", "atStart": True,
              "atEnd": False, "hashBefore": "ab", "hashAfter": "cd", "reason": "stale", "headingPath": ["Memory"], "at": "t"}
    raw = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    done = scrub_json(raw, TARGET, ID)
    assert done.count == 1
    assert done.text == raw.replace(FACT, M)


def test_json_lines_keep_unchanged_lines_and_scrub_a_torn_one_as_text() -> None:
    lines = [json.dumps({"kind": "run", "summary": "quiet"}), json.dumps({"kind": "op", "reason": FACT}), '{"kind":"op","reason":"' + FACT]
    raw = ("\n".join(lines)).encode()
    new, done = scrub_file("audit.jsonl", raw, TARGET, ID)
    out = new.decode().split("\n")
    assert out[0] == lines[0] and json.loads(out[1])["reason"] == M and out[2] == '{"kind":"op","reason":"' + M
    assert done.count == 2 and done.lines == (2, 3)


def test_bytes_that_are_not_utf8_are_written_back_as_they_were() -> None:
    raw = b"\xff\xfe latin-1 caf\xe9 then " + FACT.encode() + b" \xff\n"
    new, done = scrub_file("MEMORY.md.r1", raw, TARGET, ID)
    assert done.count == 1 and new == b"\xff\xfe latin-1 caf\xe9 then " + M.encode() + b" \xff\n"


def test_a_damaged_json_copy_is_still_searched_in_its_escaped_literals() -> None:
    torn = '{"format": 1, "lastRun": {"reason": ' + json.dumps(FACT) + ', "status": "noth'
    assert "\\u00dc" in torn
    done = scrub_json(torn, TARGET, ID)
    assert done.count == 1 and done.text == torn.replace(json.dumps(FACT), json.dumps(M))
