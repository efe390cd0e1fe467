"""Properties of the name rules: shared-note names (``vault.names``), workspace file names
(``file_api.names``) and the slugs promotion makes into note names (``vault.promotion_names``).

- an accepted note name is canonical (validating it again gives it back), maps to one file
  directly inside ``notes/`` and back to the same name, and its longest file name (the retired
  twin ``stale__<name>.md``) and the writer's temp file beside it fit the 255-byte limit: a
  real write of that file succeeds;
- every refusal is ``InvalidArgument`` (the suite's 400), never another exception;
- a workspace file name is accepted exactly when it is one of the six, and its refusal is short;
- a promotion slug is "" or a note name that ``validate_name`` takes unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.atomic import is_temp_name, temp_name, write_atomic
from gateway.errors import InvalidArgument
from services.file_api.names import ALLOWED_FILES, check_filename
from services.kb.vault.names import (
    MAX_NAME_BYTES,
    MAX_NAME_CHARS,
    NOTE_SUFFIX,
    NOTES_DIR,
    name_from_path,
    note_path,
    retired_name,
    validate_name,
)
from services.kb.vault.promotion_names import slugify

NAME_LIMIT = 255  # bytes in one file name: ext4, xfs, btrfs, tmpfs, APFS

# Text rich in what the rules are about: separators, dots, wikilink characters, controls,
# whitespace, combining marks, the reserved prefix, and characters of 1 to 4 UTF-8 bytes.
TRICKY = st.sampled_from(
    ["/", "\\", ".", "..", "[", "]", "|", "#", "^", "\x00", "\t", "\n", "\x7f", "\x85", "\u2028", " ", "\u00a0",
     "\u0301", "e\u0301", "stale__", "é", "東", "\U00020000", "🙂", "a", "Z", "0", "-", "_", "%2F", ":"]
)
NAMES = st.one_of(
    st.text(max_size=130),
    st.lists(TRICKY, max_size=40).map("".join),
    st.lists(st.sampled_from(["東", "\U00020000", "é", "a"]), min_size=40, max_size=130).map("".join),
    # long one-script words near the character and byte limits (letters of 1 to 4 UTF-8 bytes)
    st.builds(lambda unit, n: unit * n, st.sampled_from(["x", "é", "東", "\U00020000"]), st.integers(40, 130)),
)


def _accepted(raw: str) -> str | None:
    try:
        return validate_name(raw)
    except InvalidArgument:
        return None


@given(raw=NAMES)
def test_a_note_name_is_canonical_confined_and_reversible(raw: str) -> None:
    name = _accepted(raw)  # any other exception fails the test
    if name is None:
        return
    assert validate_name(name) == name
    rel = note_path(name)
    assert name_from_path(rel) == name
    vault = Path("/vault")
    assert (vault / rel).parent == vault / NOTES_DIR  # one segment: no separator, never . or ..
    assert name not in (".", "..") and "/" not in name and "\x00" not in name
    twin = f"{retired_name(name)}{NOTE_SUFFIX}"
    assert len(twin.encode("utf-8")) <= NAME_LIMIT
    temp = temp_name(twin)  # the longest note's temp file keeps the whole name, and fits
    assert len(temp.encode("utf-8")) <= NAME_LIMIT and temp.startswith(f".{twin}.") and is_temp_name(temp)


@given(raw=NAMES)
def test_a_refused_note_name_is_invalid_argument(raw: str) -> None:
    for allow_retired in (False, True):
        try:
            validate_name(raw, allow_retired=allow_retired)
        except InvalidArgument as exc:
            assert str(exc) and len(str(exc)) < 200
            assert str(exc).isprintable()  # the offending character is named, never echoed raw


def test_the_longest_note_names_can_be_written_as_retired_twins(tmp_path: Path) -> None:
    """A real write: the retired twin of a name at the byte limit, with write_atomic's own temp file."""
    notes = tmp_path / NOTES_DIR
    notes.mkdir()
    for unit in ("x", "é", "東", "\U00020000"):
        raw = unit * min(MAX_NAME_CHARS, MAX_NAME_BYTES // len(unit.encode("utf-8")))
        name = validate_name(raw)
        path = notes / f"{retired_name(name)}{NOTE_SUFFIX}"
        write_atomic(path, b"# retired\n", expected=None)
        assert path.read_bytes() == b"# retired\n"
        assert [p.name for p in notes.iterdir()] == [path.name]  # no temp file left beside it
        path.unlink()
    assert list(notes.iterdir()) == []


@given(name=st.one_of(st.sampled_from(ALLOWED_FILES), st.text(max_size=100), st.lists(TRICKY).map("".join).map(lambda s: s + ".md")))
def test_a_workspace_file_name_is_one_of_the_six(name: str) -> None:
    if name in ALLOWED_FILES:
        assert check_filename(name) == name
        return
    with pytest.raises(InvalidArgument) as refused:
        check_filename(name)
    assert len(str(refused.value)) < 250  # the name is quoted cut, and the six are listed
    assert all(allowed in str(refused.value) for allowed in ALLOWED_FILES)


@given(text=st.one_of(NAMES, st.text(max_size=300)))
def test_a_promotion_slug_is_a_note_name_as_it_stands(text: str) -> None:
    slug = slugify(text)
    if slug:
        assert validate_name(slug) == slug
