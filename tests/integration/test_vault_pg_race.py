"""Two agent hosts racing on one PostgreSQL vault, and the server killed under them.

Eight OS processes, four through each host's REST shim, create one name at one barrier: one wins, the
seven others are 409s, and the note is the winner's bytes. Eight similar notes under eight names at once
(from threads, four through each host), none confirmed: one lands, the others are told about it (the
vault's advisory lock orders the near-duplicate check and the create). Then ``kill -9`` of the postmaster
while both hosts create notes in a loop: after a restart of the server (not of the hosts) every
acknowledged note is there with its exact bytes, no note is torn, and both hosts answer again by
themselves.

The module's cluster is its own, with ``synchronous_commit`` on: an acknowledged commit is then in the
kernel's page cache, which a killed server cannot lose (the session's cluster runs with it off).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pg_support import Cluster, running_cluster
from two_host_support import Host, bodies, client, race, race_in_threads, running_hosts, through_an_outage

pytestmark = pytest.mark.integration

RACERS = 8
CRANE = "# Harbour crane\n\nThe harbour crane lifts at most 40 tonnes; book it a day ahead with the port office.\n"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster({"synchronous_commit": "on"}) as started:
        yield started


@pytest.fixture(scope="module")
def database(cluster: Cluster) -> str:
    return cluster.create_database("race")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[dict[str, Host]]:
    with running_hosts(tmp_path_factory, database) as started:
        yield started


def test_eight_processes_creating_one_name_get_one_winner_and_its_exact_note(hosts: dict[str, Host], database: str) -> None:
    calls = [(hosts["AB"[i % 2]].notes, {"name": "harbour crane", "content": CRANE + f"\nracer {i}\n" * (i + 1)})
             for i in range(RACERS)]
    answers = race(calls)
    won = [(body, answer) for _, body, status, answer in answers if status == 200]
    lost = [answer for _, _, status, answer in answers if status != 200]
    assert len(won) == 1 and won[0][1]["created"] is True, answers
    assert [status for *_, status, _ in answers].count(409) == RACERS - 1, answers
    assert all("already exists" in answer["message"] for answer in lost), lost
    winner = won[0][0]["content"]
    assert bodies(database, ["harbour crane"]) == {"harbour crane": winner}
    for host in hosts.values():
        with client() as http:
            assert http.get(host.note("harbour crane")).json()["content"] == winner


def test_eight_similar_notes_at_once_land_one_without_confirm(hosts: dict[str, Host], database: str) -> None:
    names = [f"tide table {i}" for i in range(RACERS)]
    text = "# Tide table\n\n- high tide at the north quay is at 05:12 and 17:40\n- the slipway floods at spring tide\n"
    calls = [(hosts["AB"[i % 2]].notes, {"name": name, "content": text + f"- copied by racer {i}\n"})
             for i, name in enumerate(names)]
    answers = race_in_threads(calls)
    assert all(status == 200 for _, _, status, _ in answers), answers
    created = [body["name"] for _, body, _, answer in answers if answer["created"]]
    assert len(created) == 1, answers
    for _, body, _, answer in answers:
        if not answer["created"]:
            assert created[0] in [r["name"] for r in answer["related"]], answer
    assert list(bodies(database, names)) == created


def test_a_killed_postmaster_loses_no_acknowledged_note_and_both_hosts_recover(
        hosts: dict[str, Host], cluster: Cluster, database: str) -> None:
    summary = through_an_outage(hosts, database, cluster.kill_postmaster, cluster.start)
    print(f"\nkill -9 of the postmaster: {summary}")
