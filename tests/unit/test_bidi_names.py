"""Bidirectional controls are refused in every name a caller picks.

Each of the twelve Bidi_Control code points, in each name rule: shared note
names, workspace file names, memory paths (memory_get), the paths a refresh is
told about, session ids; the message names the character, since the caller
cannot see it. Agent ids and topic slugs are ASCII patterns (refused already);
the topic slug rules also refuse a trailing newline, which ``re.match`` with
``$`` let through into a file name.
"""

from __future__ import annotations

import unicodedata

import pytest

from gateway.bidi import BIDI_CONTROLS, describe, first_bidi_control, refuse_bidi
from gateway.config import validate
from gateway.errors import InvalidArgument
from services.dreaming.apply.applier import plan
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import EPISODIC, Proposal
from services.dreaming.review.reply import parse_reply
from services.file_api.names import check_filename
from services.kb.archive.arguments import check_sources
from services.kb.index.excerpt import validate_path
from services.kb.vault.names import validate_name
from services.kb.vault.promotion import check_request
from services.watcher.sessions import SessionRegistry

CODE_POINTS = [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]
BIDI = [chr(c) for c in CODE_POINTS]


def test_the_set_is_unicodes_bidi_control_property() -> None:
    """Bidi_Control (PropList.txt): the embeddings, overrides and isolates, and the three marks."""
    assert BIDI_CONTROLS == set(BIDI)
    assert all(unicodedata.category(c) == "Cf" for c in BIDI)  # invisible format characters, not Cc controls
    embeddings = {c for c in map(chr, range(0x110000)) if unicodedata.bidirectional(c) in {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}}
    assert embeddings | {"\u061c", "\u200e", "\u200f"} == BIDI_CONTROLS


@pytest.mark.parametrize("char", BIDI, ids=[f"U+{c:04X}" for c in CODE_POINTS])
def test_every_name_rule_refuses_it_naming_the_character(char: str) -> None:
    shown = f"U+{ord(char):04X} ({unicodedata.name(char)})"
    rules = {
        "a shared note name": lambda: validate_name(f"invoice{char}dm.exe"),
        "a shared note name (retired)": lambda: validate_name(f"stale__deploy{char}", allow_retired=True),
        "a shared note name (leading)": lambda: validate_name(f"{char}deploy"),
        "a filename": lambda: check_filename(f"SOUL{char}.md"),
        "path": lambda: validate_path(f"memory/a{char}b.md"),
        "path (core)": lambda: validate_path(f"{char}MEMORY.md"),
        "paths: a path": lambda: check_sources(["MEMORY.md", f"memory/x{char}.md"]),
        "session_id": lambda: SessionRegistry(clock=lambda: 0).register("alfred", f"s-{char}-1", busy=False),
    }
    for what, call in rules.items():
        with pytest.raises(InvalidArgument) as info:
            call()
        assert shown in info.value.message, (what, info.value.message)
        assert char not in info.value.message, what  # the message shows the name of the character, never the character


def test_names_without_them_still_pass() -> None:
    assert validate_name("  Déploiement — étapes (v2)  ") == "Déploiement — étapes (v2)"
    assert validate_name("مذكرة النشر") == "مذكرة النشر"  # right-to-left script is fine; only the invisible controls are not
    assert check_filename("SOUL.md") == "SOUL.md"
    assert validate_path("memory/2024/deploys.md") == ["memory", "2024", "deploys.md"]
    assert check_sources(["memory/notes.md"]) == ["memory/notes.md"]
    assert SessionRegistry(clock=lambda: 0).register("alfred", "session-1", busy=True).session_id == "session-1"


def test_helpers() -> None:
    assert first_bidi_control("plain") is None
    assert first_bidi_control("a\u2067b\u202ec") == "\u2067"
    assert describe("\u202e") == "U+202E (RIGHT-TO-LEFT OVERRIDE)"
    refuse_bidi("no controls here", "x")
    with pytest.raises(InvalidArgument, match=r"^topic must not contain U\+200F \(RIGHT-TO-LEFT MARK\), a bidirectional control"):
        refuse_bidi("a\u200f", "topic")


@pytest.mark.parametrize("char", BIDI, ids=[f"U+{c:04X}" for c in CODE_POINTS])
def test_agent_ids_and_topic_slugs_are_ascii_patterns(char: str) -> None:
    raw = {"configVersion": "1.0.26", "agents": [{"id": f"alfred{char}"}]}
    assert any(p.startswith("agents[0].id:") for p in validate(raw))
    with pytest.raises(InvalidArgument, match="not a kebab slug"):
        check_request(f"deploys{char}", "a fact")
    reply = parse_reply('{"summary": "s", "proposals": [{"op": "add", "tier": "episodic", "topic": "deploys%s", "content": "x"}]}' % char)
    assert reply.proposals == () and "needs a topic" in reply.dropped[0]


@pytest.mark.parametrize("topic", ["deploys\n", "deploys\r\n", "\ndeploys"])
def test_a_topic_with_a_newline_never_becomes_a_file_name(topic: str) -> None:
    """``re.match(r"^[a-z0-9-]{1,64}$", "deploys\\n")`` matches: ``$`` also matches before a final newline."""
    import json

    reply = parse_reply(json.dumps({"proposals": [{"op": "add", "tier": "episodic", "topic": topic, "content": "- x"}]}))
    assert reply.proposals == () and "needs a topic" in reply.dropped[0]
    with pytest.raises(InvalidArgument, match="not a kebab slug"):
        check_request(topic, "a fact")
    result = plan({}, [("r/1", Proposal(op="add", content="- x", reason="r", topic=topic, tier=EPISODIC))],
                  Budgets(memory_chars=0, user_chars=0, write_routing=True))
    assert result.appends == [] and result.results[0].status == "skipped"
