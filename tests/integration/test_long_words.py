"""A long word does not block a night's compaction, with the real processes.

MEMORY.md is over its budget with 60 finished entries, one holding a 1,200-character unbroken key.
Were Search to look for a query's first 1,000 characters as a whole token, which that key is not,
the compactor's recall check could not find the entry and the whole pass would be rolled back
(MEMORY.md left over budget, none of the 60 moved), every night. A manual ``gateway dream``
with a stand-in reviewer moves them all, the recall check passes, and REST Search finds the key by
its own text (docs/concepts/archive.md "Knowledge archive (KB)" › Long words).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest
from dreaming_support import audit, cli, client, dreaming, read, reviewer, search, start_suite, write_reply
from grpc import insecure_channel
from suite_support import Suite

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

BUDGET = 4000
# 1,200 letters and digits in one run: a base64 key with its "+", "/" and "=" (separators) mapped away.
KEY = "".join(
    base64.b64encode(hashlib.sha512(str(n).encode()).digest()).decode().translate(str.maketrans("+/=", "xyz"))
    for n in range(14)
)[:1200]
FACTS = "## Facts\n" + "".join(f"- The Osprey relay {i} answers on channel {40 + i}.\n" for i in range(10))
TASKS = ["- [x] rotated the signing key " + KEY] + [
    f"- [x] calibrated gauge {i} on the north pier and logged the reading in the harbour book" for i in range(59)
]
MEMORY = "# Memory\n\n" + FACTS + "\n## Tasks\n" + "".join(f"{task}\n" for task in TASKS)


@pytest.fixture(scope="module")
def lsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("longwords")
    answer = tmp / "lena.json"
    write_reply(answer, [])  # the stand-in reviewer proposes nothing: the passes alone shrink the file
    agents = [{"id": "lena", "memory": {"memoryBudgetChars": BUDGET}, "dreaming": dreaming(reviewer("reply.py", answer))}]
    running = start_suite(tmp, agents, files={"lena": {"MEMORY.md": MEMORY}})
    try:
        yield running
    finally:
        running.stop_all()


def test_a_1200_character_word_no_longer_rolls_back_the_compaction(lsuite: Suite) -> None:
    assert len(KEY) == 1200 and KEY.isalnum() and len(MEMORY) > BUDGET
    ran = cli(lsuite, "lena")  # a manual run, as `gateway dream lena`
    assert ran.returncode == 0, ran.stdout + ran.stderr
    runs = [r for r in audit(lsuite, "lena") if r.get("kind") == "run"]
    assert len(runs) == 1, runs
    notes = runs[0]["notes"]
    assert not any("restored to its pre-image" in n for n in notes), notes
    assert any(n.startswith("Moves recall-checked: all 60 moved entries") for n in notes), notes
    after = read(lsuite, "lena", "MEMORY.md")
    assert len(after) <= BUDGET and FACTS in after
    assert not any(task in after for task in TASKS)
    completed = read(lsuite, "lena", "memory/archive/completed.md")
    assert all(f"{task}\n" in completed for task in TASKS)

    # Search by a user, over REST, with the key itself: found in the archive, on the key's line.
    line = completed.splitlines().index(TASKS[0]) + 1
    hits = search(lsuite, "lena", KEY)
    assert any(h["path"] == "memory/archive/completed.md" and h["startLine"] <= line <= h["endLine"] for h in hits), hits
    hits = search(lsuite, "lena", f"signing {KEY}")
    assert hits and hits[0]["path"] == "memory/archive/completed.md", hits


def test_a_huge_query_word_is_answered_not_an_error(lsuite: Suite) -> None:
    """A word of 6,000 characters (the key and more) is searched by its first 1,000, as a prefix:
    found, never a 500; a query of megabytes (over gRPC) is read no further than those 1,000."""
    hits = search(lsuite, "lena", KEY + "Q" * 4800)
    assert hits and all(KEY in read(lsuite, "lena", h["path"]) for h in hits), hits
    with client(lsuite) as http:
        huge = http.get("/api/v1/agents/lena/memory:search", params={"query": "Z" * 60_000})
    assert huge.status_code == 200 and huge.json()["hits"] == [], huge.text[:200]
    with insecure_channel(lsuite.address("kb")) as channel:  # 3 MB over gRPC: the same answer
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(lsuite.home)),)
        reply = stub.Search(kb_pb2.SearchRequest(agent_id="lena", query="Z" * 3_000_000), timeout=30, metadata=metadata)
        assert list(reply.hits) == []
        reply = stub.Search(kb_pb2.SearchRequest(agent_id="lena", query=KEY * 2500, limit=20), timeout=30, metadata=metadata)
        assert reply.hits and all(KEY in read(lsuite, "lena", h.path) for h in reply.hits)
