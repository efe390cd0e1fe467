"""Search scores over REST: fixed precision, never exponent notation, in merge order."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, make_home

pytestmark = pytest.mark.integration

NOTES = {
    # "pelican" is in every chunk: FTS5's bm25 gives such a word (nearly) no weight, so a hit on it
    # alone scored about 0.000001 and printed as 1e-06.
    "memory/a.md": "# A\n\n- The otter naps by the pelican pier.\n",
    "memory/b.md": "# B\n\n- A pelican guards the harbour dock.\n",
    "memory/c.md": "# C\n\n- The pelican ferry leaves at nine.\n",
}
SHARED = {
    "pelican rules": "# Pelican rules\n- Never feed the pelican bread.\n",
    "otter rota": "# Otter rota\n- The otter keeper checks the pelican pier daily.\n",
}
SCORE = re.compile(r'"score":([^,}]+)')


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("scores"), [{"id": "alfred"}])
    workspace = home / "agents" / "alfred" / "workspace"
    for rel, text in NOTES.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    running = Suite(home, http_port, ports)
    try:
        running.start("kb", "http")
        with httpx.Client(base_url=running.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
            for name, content in SHARED.items():
                body = {"name": name, "content": content, "confirm": True}
                assert http.post("/api/v1/agents/alfred/shared/notes", json=body).status_code == 200
        yield running
    finally:
        running.stop_all()


def search(suite: Suite, query: str, corpus: str = "memory") -> tuple[str, list[dict[str, object]]]:
    with httpx.Client(base_url=suite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
        params = {"query": query, "corpus": corpus, "refresh": "true", "limit": 20}
        response = http.get("/api/v1/agents/alfred/memory:search", params=params)
    assert response.status_code == 200, response.text
    return response.text, response.json()["hits"]


@pytest.mark.parametrize(("query", "corpus"), [("pelican walrus", "memory"), ("otter pelican", "memory"),
                                               ("otter pelican", "shared"), ("otter pelican", "all"), ("pelican", "all")])
def test_scores_print_with_fixed_precision_best_first(scored: Suite, query: str, corpus: str) -> None:
    raw, hits = search(scored, query, corpus)
    printed = SCORE.findall(raw)
    assert len(printed) == len(hits) > 0
    for text in printed:
        assert "e" not in text.lower(), f"score printed as {text} in {raw}"
        assert re.fullmatch(r"\d+(\.\d{1,4})?", text), text  # at most 4 decimals
    scores = [float(str(h["score"])) for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s < 2.0 for s in scores)


def test_full_matches_rank_first_and_partial_matches_below_one(scored: Suite) -> None:
    _, hits = search(scored, "otter pelican", "all")  # memory and shared merged by score
    assert {(h["corpus"], h["path"]) for h in hits[:2]} == {("memory", "memory/a.md"), ("shared", "notes/otter rota.md")}
    assert all(float(str(h["score"])) >= 1.0 for h in hits[:2]) and all(float(str(h["score"])) < 1.0 for h in hits[2:])
    _, partial = search(scored, "pelican walrus")
    assert {h["path"] for h in partial} == set(NOTES) and all(float(str(h["score"])) < 1.0 for h in partial)
