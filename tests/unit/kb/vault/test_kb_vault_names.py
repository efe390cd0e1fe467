"""Shared-vault note names: the validation table and the name → file mapping."""

from __future__ import annotations

import pytest

from gateway.atomic import temp_name
from gateway.errors import InvalidArgument
from services.kb.vault.names import (
    MAX_NAME_BYTES,
    MAX_NAME_CHARS,
    is_retired,
    live_name,
    name_from_path,
    note_path,
    retired_name,
    validate_name,
)

VALID = [
    ("deploy-process", "deploy-process"),
    ("Deploy Process (staging)", "Deploy Process (staging)"),
    ("  padded name \t", "padded name"),
    ("café notes", "café notes"),
    ("cafe\u0301", "café"),  # NFD → NFC
    ("東京 オフィス", "東京 オフィス"),
    ("v1.2 release", "v1.2 release"),
    ("a..b", "a..b"),
    ("what? yes! 100% & more: ok", "what? yes! 100% & more: ok"),
    ("x" * MAX_NAME_CHARS, "x" * MAX_NAME_CHARS),
    ("stale_single", "stale_single"),
    ("Stale__mixed case", "Stale__mixed case"),
]

INVALID = [
    ("", "empty"),
    ("   ", "empty"),
    ("a/b", "'/'"),
    ("../etc/passwd", "'/'"),
    ("a\\b", "'\\\\'"),
    ("nul\x00byte", "U+0000"),
    ("tab\tinside", "U+0009"),
    ("new\nline", "U+000A"),
    ("del\x7fmid", "U+007F"),
    ("c1\x85mid", "U+0085"),
    ("sep\u2028mid", "U+2028"),
    ("[[link]]", "'['"),
    ("alias|x", "'|'"),
    ("C# tips", "'#'"),
    ("block^ref", "'^'"),
    (".", "start with '.'"),
    ("..", "start with '.'"),
    (".hidden", "start with '.'"),
    ("x" * (MAX_NAME_CHARS + 1), "at most 120"),
    ("é" * (MAX_NAME_BYTES // 2 + 1), "at most 120"),  # 101 chars but 202 bytes
    ("stale__thing", "reserved"),
]


@pytest.mark.parametrize(("raw", "canonical"), VALID)
def test_valid_names_are_trimmed_and_normalised(raw: str, canonical: str) -> None:
    assert validate_name(raw) == canonical


@pytest.mark.parametrize(("raw", "why"), INVALID)
def test_invalid_names_are_refused_naming_the_rule(raw: str, why: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_name(raw)
    assert why in caught.value.message


def test_retired_names_pass_only_when_allowed() -> None:
    assert validate_name("stale__thing", allow_retired=True) == "stale__thing"
    assert is_retired("stale__thing") and not is_retired("thing")
    assert retired_name("thing") == "stale__thing"
    assert live_name("stale__thing") == "thing"
    assert live_name("thing") == "thing"


def test_the_name_maps_to_notes_name_md_and_back() -> None:
    for name, _ in VALID:
        canonical = validate_name(name)
        path = note_path(canonical)
        assert path == f"notes/{canonical}.md"
        assert name_from_path(path) == canonical


def test_paths_outside_notes_are_not_names() -> None:
    assert name_from_path("reports/backlinks.md") is None
    assert name_from_path("notes/sub/x.md") is None
    assert name_from_path("notes/x.txt") is None
    assert name_from_path("notes/.md") is None


def test_byte_bound_keeps_the_retired_temp_file_name_under_255_bytes() -> None:
    name = validate_name("é" * (MAX_NAME_BYTES // 2))
    file_name = retired_name(name) + ".md"
    temp = temp_name(file_name)  # write_atomic's temp file: "." + file name + "." + random + ".gwtmp"
    assert temp.startswith("." + file_name + ".")  # whole: no need to cut the name short
    assert len(temp.encode("utf-8")) <= 255
