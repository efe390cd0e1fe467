"""Bidirectional controls in a name are a 400 naming the character, over REST.

The twelve Bidi_Control code points, each in every place a REST caller names
something that becomes a file name or is shown as one: a shared note name (in
the body and in the path), a workspace file name, a memory path, a refresh
path, a session id. Nothing is written: no file in the home has a bidi control
in its name, and the workspaces and the vault hold the same bytes as before.
The name rules themselves are unit-tested in ``tests/unit/test_bidi_names.py``.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, make_home

from gateway.bidi import BIDI_CONTROLS

pytestmark = pytest.mark.integration

BIDI = sorted(BIDI_CONTROLS)
HEADERS = {"X-Api-Key": ADMIN_KEY}


@pytest.fixture(scope="module")
def bsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("bidi"))
    memory = home / "agents" / "alfred" / "workspace" / "memory"
    memory.mkdir(parents=True)
    (memory / "deploys.md").write_text("# Deploys\n\n- on Tuesdays\n")
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api", "watcher", "kb", "http")
        yield running
    finally:
        running.stop_all()


def snapshot(home: Path) -> dict[str, str]:
    """SHA-256 of every file of the workspaces and the shared vault, but the indexes (the vault's
    is created when a first request opens the vault, refused or not; they are derived data)."""
    roots = [home / "agents", home / "shared"]
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots if root.exists() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith("kb.sqlite")}


def requests(char: str) -> list[tuple[str, str, dict[str, object] | None, dict[str, str] | None]]:
    """(method, path, JSON body, query) of each request naming something with ``char`` in it."""
    notes = "/api/v1/agents/alfred/shared/notes"
    return [
        ("POST", notes, {"name": f"invoice{char}dm.exe", "content": "x"}, None),
        ("GET", f"{notes}/{quote(f'deploy{char}', safe='')}", None, None),
        ("PUT", f"{notes}/{quote(f'deploy{char}', safe='')}", {"content": "x"}, None),
        ("DELETE", f"{notes}/{quote(f'{char}deploy', safe='')}", None, None),
        ("GET", f"/api/v1/agents/alfred/files/{quote(f'SOUL{char}.md', safe='')}", None, None),
        ("PUT", f"/api/v1/agents/alfred/files/{quote(f'{char}MEMORY.md', safe='')}", {"content": "x"}, None),
        ("GET", "/api/v1/agents/alfred/memory:get", None, {"path": f"memory/deploys{char}.md"}),
        ("POST", "/api/v1/agents/alfred/memory:refresh", {"paths": [f"memory/x{char}.md"]}, None),
        ("POST", "/api/v1/agents/alfred/sessions", {"sessionId": f"s{char}1", "state": "SESSION_STATE_IDLE"}, None),
    ]


def test_every_bidi_control_in_every_rest_name_is_a_400_naming_it(bsuite: Suite) -> None:
    before = snapshot(bsuite.home)
    wrong = []
    with httpx.Client(base_url=bsuite.base_url, headers=HEADERS, timeout=30) as http:
        for char in BIDI:
            shown = f"U+{ord(char):04X} ({unicodedata.name(char)})"
            for method, path, body, query in requests(char):
                response = http.request(method, path, json=body, params=query)
                message = response.json().get("message", "")
                if response.status_code != 400 or response.json().get("code") != 3 or shown not in message or char in message:
                    wrong.append(f"{shown} {method} {path} {query or ''}: {response.status_code} {message[:100]}")
    assert not wrong, "not a 400 naming the character:\n" + "\n".join(wrong)
    assert snapshot(bsuite.home) == before
    assert [p for p in bsuite.home.rglob("*") if BIDI_CONTROLS & set(p.name)] == []
