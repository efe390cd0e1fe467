"""Which names the file API accepts."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidArgument
from services.file_api.names import ALLOWED_FILES, check_filename


def test_the_six_allowed_names() -> None:
    assert ALLOWED_FILES == ("SOUL.md", "USER.md", "MEMORY.md", "AGENTS.md", "HEARTBEAT.md", "IDENTITY.md")
    for name in ALLOWED_FILES:
        assert check_filename(name) == name


@pytest.mark.parametrize("name", ["CLAUDE.md", "README.md", "soul.md", "Soul.md"])
def test_plain_names_outside_the_list_name_the_list(name: str) -> None:
    with pytest.raises(InvalidArgument, match="not allowed; allowed: SOUL.md, USER.md, MEMORY.md, AGENTS.md, HEARTBEAT.md, IDENTITY.md"):
        check_filename(name)


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../SOUL.md", "memory/SOUL.md", "/SOUL.md", "..\\SOUL.md", "SOUL.md\x00", "SOUL.md\x00.txt",
     "%2e%2e%2fSOUL.md", "SOUL%2Emd", "SOUL.md/", " SOUL.md", "SOUL.txt", "SOUL", ".SOUL.md", "SOUL.md.md.bak", "x" * 300 + ".md"],
)
def test_malformed_names_are_invalid(name: str) -> None:
    with pytest.raises(InvalidArgument, match="expected a plain NAME.md"):
        check_filename(name)
