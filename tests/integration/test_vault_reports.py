"""The graph reports on both backends with the real suite (``knowledge.shared.graph``): after its own writes
each host's KB writes the five reports into its ``shared/kb/<project>/reports/``, on SQLite from the notes'
files and on PostgreSQL from every host's rows, and ``gateway vault reports`` renders them on demand; the
same notes give the same bytes on both (docs/concepts/vault.md "Shared vault", graph layer)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pg_support import Cluster, postgres  # noqa: F401  (fixture)
from suite_support import ADMIN_KEY, Suite, make_home, wait_until

pytestmark = pytest.mark.integration

HEADERS = {"X-Api-Key": ADMIN_KEY}
NOTES = "/api/v1/agents/alfred/shared/notes"
REPORTS = ("relationship-graph.md", "backlinks.md", "contradictions.md", "stale-pages.md", "low-confidence.md")
WRITTEN = [  # a note with links (one to a missing note), a retired one, claims that contradict, low confidence
    ("kiln", "---\ntitle: The kiln\nclaims:\n  - id: fire-temp\n    text: The kiln fires at 1200 C.\n---\n"
             "Loaded by [[potter]], glazed per [[glaze book]], cooled by [[nobody]].\n"),
    ("potter", "---\nconfidence: 0.3\nclaims:\n  - id: fire-temp\n    text: The kiln fires at 1100 C.\n---\n"
               "The potter loads the [[kiln]] on Mondays.\n"),
    ("glaze book", "# Glaze book\nCeladon and tenmoku recipes, in grams per kilo of dry mix.\n"),
]


def start(tmp: Path, shared: dict[str, object]) -> Suite:
    home, ports, http_port = make_home(tmp, knowledge={"shared": {"graph": True, **shared}})
    suite = Suite(home, http_port, ports)
    suite.start("kb", "http")
    return suite


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory, postgres: Cluster) -> Iterator[dict[str, Suite]]:
    database = postgres.create_database("reports_vault")
    running: dict[str, Suite] = {}
    try:
        running["sqlite"] = start(tmp_path_factory.mktemp("sqlite"), {})
        running["postgres"] = start(tmp_path_factory.mktemp("postgres"), {"backend": "postgres",
                                                                          "postgres": {"dsn": database}})
        yield running
    finally:
        for suite in running.values():
            suite.stop_all()


def reports_dir(suite: Suite) -> Path:
    return suite.home / "shared" / "kb" / "global" / "reports"


def reports(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in REPORTS if (folder / name).is_file()}


def write_notes(suite: Suite) -> None:
    with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
        for name, content in WRITTEN:
            made = http.post(NOTES, json={"name": name, "content": content, "confirm": True})
            assert made.status_code == 200 and made.json().get("created") is True, made.text
        retired = http.post(f"{NOTES}/glaze%20book:retire", json={"reason": "moved to the wiki"})
        assert retired.status_code == 200, retired.text


def gateway(*words: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", *words], capture_output=True, text=True,
                          timeout=60, env=env)


def test_both_backends_write_the_same_five_reports(suites: dict[str, Suite], tmp_path: Path) -> None:
    for suite in suites.values():
        write_notes(suite)
    def settled(suite: Suite) -> bool:
        """All five reports written after the last write (the retire): the KB writes them one file at a
        time, so the graph can show the retirement while the backlinks still show the note live."""
        found = {name: data.decode() for name, data in reports(reports_dir(suite)).items()}
        return (len(found) == 5 and "(retired)" in found["relationship-graph.md"]
                and "`stale__glaze book` ←" in found["backlinks.md"] and "`glaze book` ←" not in found["backlinks.md"])

    for backend, suite in suites.items():  # written by the KB after its writes, the last one (the retire) included
        wait_until(lambda s=suite: settled(s), 30, f"the {backend} KB's five reports")
    written = {backend: reports(reports_dir(suite)) for backend, suite in suites.items()}
    graph = written["postgres"]["relationship-graph.md"].decode()
    assert "- `kiln` → `potter`" in graph and "- `kiln` → `nobody` (missing note)" in graph
    assert "- `kiln` → `stale__glaze book`" in graph and "- `potter` → `kiln`" in graph
    assert "- `kiln` ← `potter`" in written["postgres"]["backlinks.md"].decode()
    assert "`fire-temp` — text differs" in written["postgres"]["contradictions.md"].decode()
    assert "- `potter` — 0.3" in written["postgres"]["low-confidence.md"].decode()
    assert written["postgres"] == written["sqlite"]

    for backend, suite in suites.items():  # on demand, from the whole vault: the same bytes again
        out = tmp_path / backend
        done = gateway("vault", "reports", "--project", "global", "--out", str(out), "--home", str(suite.home))
        assert done.returncode == 0, done.stderr
        assert "3 notes, 4 links (1 to missing notes)" in done.stdout and "5 of 5 files changed" in done.stdout
        assert reports(out) == written["sqlite"]
