"""Shared tombstones across hosts (docs/concepts/forget.md "Shared tombstones across hosts"): two hosts, A
and B, each its own home and salt, on one throwaway PostgreSQL vault. A forget ``--shared`` on A puts its
tombstone in the vault; B's KB mirrors it, so B refuses a shared note that brings the text back (create and
update: FAILED_PRECONDITION naming the forget) and B's dreaming skips it; a lift on A reaches B at B's next
check of the vault, after which B accepts the text again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from dreaming_support import add, replies, run_ok, write_reply
from pg_support import Cluster, postgres  # noqa: F401  (fixture)
from suite_support import wait_until
from two_host_support import Host, client, running_hosts

pytestmark = pytest.mark.integration

SECRET = "Marguerite Pellworth lives at 14 Quarry Lane"
NOTE = f"# Neighbours\n\n- {SECRET}\n"
OTHER = "# Neighbours\n\n- the bakery opens at seven\n"
FAILED_PRECONDITION = 9  # the gRPC code in a REST error's body
EVERY_S = 1  # B checks the vault's tombstones every second here (60 by default)


@pytest.fixture(scope="module")
def database(postgres: Cluster) -> str:
    return postgres.create_database("pg_tombstones")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[dict[str, Host]]:
    with running_hosts(tmp_path_factory, database, services=("kb", "dreaming", "http"),
                       place=lambda _: {"postgres": {"tombstonesEveryS": EVERY_S}}) as started:
        yield started


def mirrored(host: Host) -> list[dict[str, Any]]:
    path = host.suite.home / "forget" / "vault-tombstones.json"
    return json.loads(path.read_text()) if path.exists() else []


def test_a_shared_forget_on_a_is_refused_on_b_until_it_is_lifted_on_a(hosts: dict[str, Host], database: str) -> None:
    a, b = hosts["A"], hosts["B"]
    with client() as http:
        assert b.create(http, "neighbours", OTHER).status_code == 200
        forgot = http.post(f"{a.suite.base_url}/api/v1/agents/{a.agent}/memory:forget",
                           json={"text": SECRET, "shared": True, "apply": True}, timeout=120)
        assert forgot.status_code == 200, forgot.text
        forget_id = forgot.json()["tombstoneId"]

        # in the vault, with a salt of its own and no word of the text
        with psycopg.connect(database) as conn:
            rows = conn.execute("SELECT id, salt, lifted_at FROM gateway_vault.vault_tombstones").fetchall()
            dumped = " ".join(str(r) for r in conn.execute("SELECT * FROM gateway_vault.vault_tombstones").fetchall())
        assert [(r[0], len(r[1]), r[2]) for r in rows] == [(forget_id, 64, "")]
        assert "pellworth" not in dumped.lower()
        home_salt = (b.suite.home / "forget" / "salt")
        assert not home_salt.exists() or rows[0][1] != home_salt.read_text().strip()

        # B's KB mirrors it (within its check interval) and refuses the text
        wait_until(lambda: [t["id"] for t in mirrored(b)] == [forget_id], 30, "B's mirror of the vault's tombstones")
        created = b.create(http, "pellworth", NOTE)
        assert created.status_code == 400 and created.json()["code"] == FAILED_PRECONDITION, created.text
        assert forget_id in created.text and "Pellworth" not in created.text
        updated = http.put(b.note("neighbours"), json={"content": NOTE})
        assert updated.status_code == 400 and updated.json()["code"] == FAILED_PRECONDITION, updated.text
        assert forget_id in updated.text

        # B's dreaming skips it (the reviewer proposes it again), so it never reaches the vault
        write_reply(replies(b.suite.home) / f"{b.agent}.json", [add(f"- {SECRET}", reason="neighbour", topic="neighbours-b")])
        report = run_ok(b.suite, b.agent)
        assert [(op["status"], op["reason"]) for op in report["ops"]] == [("skipped", f"forgotten: {forget_id}")], report
        with psycopg.connect(database) as conn:
            held = conn.execute("SELECT count(*) FROM gateway_vault.notes WHERE body ILIKE %s", ("%pellworth%",)).fetchone()
        assert held == (0,)

        # B lists it (the vault's, from A); a lift on A reaches B at its next check
        listed = http.get(f"{b.suite.base_url}/api/v1/agents/{b.agent}/tombstones").json()["tombstones"]
        assert [(t["tombstoneId"], t["scope"]) for t in listed] == [(forget_id, "*")]
        lifted = http.post(f"{a.suite.base_url}/api/v1/agents/{a.agent}/tombstones/{forget_id}:lift", json={})
        assert lifted.status_code == 200, lifted.text
        with psycopg.connect(database) as conn:
            assert conn.execute("SELECT lifted_at <> '' FROM gateway_vault.vault_tombstones").fetchall() == [(True,)]
        assert mirrored(a) == [] and json.loads((a.suite.home / "forget" / "tombstones.json").read_text()) == []
        wait_until(lambda: mirrored(b) == [], 30, "the lift in B's mirror")
        again = b.create(http, "pellworth", NOTE)
        assert again.status_code == 200 and again.json()["created"] is True, again.text


def test_a_lift_on_b_of_a_forget_made_on_a_reaches_a(hosts: dict[str, Host]) -> None:
    """B never held the tombstone in its own file (only its mirror of the vault's): B's lift lifts it in the
    vault, and A's KB takes it out of A's own file at its next check, after which A accepts the text."""
    a, b = hosts["A"], hosts["B"]
    text = "Bartholomew Quince keeps the spare key under the third stone"
    with client() as http:
        forgot = http.post(f"{a.suite.base_url}/api/v1/agents/{a.agent}/memory:forget",
                           json={"text": text, "shared": True, "apply": True}, timeout=120)
        assert forgot.status_code == 200, forgot.text
        forget_id = forgot.json()["tombstoneId"]
        own = a.suite.home / "forget" / "tombstones.json"
        assert forget_id in own.read_text()
        wait_until(lambda: forget_id in [t["id"] for t in mirrored(b)], 30, "B's mirror of the new tombstone")
        b_own = b.suite.home / "forget" / "tombstones.json"
        assert not b_own.exists() or forget_id not in b_own.read_text()  # B knows it from its mirror only

        lifted = http.post(f"{b.suite.base_url}/api/v1/agents/{b.agent}/tombstones/{forget_id}:lift", json={})
        assert lifted.status_code == 200, lifted.text
        assert forget_id not in [t["id"] for t in mirrored(b)]
        wait_until(lambda: forget_id not in own.read_text() and forget_id not in [t["id"] for t in mirrored(a)], 30,
                   "the lift made on B in A's own tombstones")
        created = a.create(http, "quince", f"# Quince\n\n- {text}\n")
        assert created.status_code == 200 and created.json()["created"] is True, created.text
