"""Many processes race one create and one compare-and-swap update: exactly one of each wins.

Real processes (spawned interpreters), released together by a barrier before
every round, so the writers collide between a check and a rename as two
services of the suite would.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic

PROCESSES = 6
ROUNDS = 40
BASE = b"base content read by every writer\n"


def _race(index: int, folder: str, barrier: Barrier, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    root = Path(folder)
    for round_ in range(ROUNDS):
        data = f"writer {index} round {round_}\n".encode()
        barrier.wait()
        try:
            write_atomic(root / f"create-{round_}.md", data, expected=None)
            results.put(("create", round_, index))
        except WriteConflict:
            pass
        barrier.wait()
        try:
            write_atomic(root / f"update-{round_}.md", data, expected=BASE)
            results.put(("update", round_, index))
        except WriteConflict:
            pass


def test_exactly_one_creator_and_one_cas_updater_win_each_race(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        (tmp_path / f"update-{round_}.md").write_bytes(BASE)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    workers = [ctx.Process(target=_race, args=(i, str(tmp_path), barrier, results)) for i in range(PROCESSES)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=90)
        assert worker.exitcode == 0
    winners: dict[tuple[str, int], list[int]] = {}
    while not results.empty():
        kind, round_, index = results.get()
        winners.setdefault((kind, round_), []).append(index)
    for kind in ("create", "update"):
        for round_ in range(ROUNDS):
            won = winners.get((kind, round_), [])
            assert len(won) == 1, f"{kind} round {round_}: winners {won}"
            content = (tmp_path / f"{kind}-{round_}.md").read_bytes()
            assert content == f"writer {won[0]} round {round_}\n".encode()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
