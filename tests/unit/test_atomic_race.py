"""Many processes race one create and one compare-and-swap update: exactly one of each wins.

Real processes (fresh interpreters over pipes, no multiprocessing helpers left
behind), released together before every round, so the writers collide between
a check and a rename as two services of the suite would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gateway.atomic import is_temp_name

PROCESSES = 6
ROUNDS = 40
BASE = b"base content read by every writer\n"

WRITER = r"""
import sys
from pathlib import Path
from gateway.atomic import WriteConflict, write_atomic

index, root = int(sys.argv[1]), Path(sys.argv[2])
for line in sys.stdin:  # one line per race: "<kind> <round>"
    kind, round_ = line.split()
    data = f"writer {index} round {round_}\n".encode()
    expected = None if kind == "create" else b"base content read by every writer\n"
    try:
        write_atomic(root / f"{kind}-{round_}.md", data, expected=expected)
        print("won", flush=True)
    except WriteConflict:
        print("lost", flush=True)
"""


def test_exactly_one_creator_and_one_cas_updater_win_each_race(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        (tmp_path / f"update-{round_}.md").write_bytes(BASE)
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(i), str(tmp_path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
        for i in range(PROCESSES)
    ]
    try:
        for kind in ("create", "update"):
            for round_ in range(ROUNDS):
                for w in writers:  # every writer gets the go before any answers
                    assert w.stdin is not None
                    w.stdin.write(f"{kind} {round_}\n")
                    w.stdin.flush()
                answers = [w.stdout.readline().strip() for w in writers if w.stdout is not None]
                won = [i for i, a in enumerate(answers) if a == "won"]
                assert len(won) == 1, f"{kind} round {round_}: winners {won} ({answers})"
                content = (tmp_path / f"{kind}-{round_}.md").read_bytes()
                assert content == f"writer {won[0]} round {round_}\n".encode()
    finally:
        for w in writers:
            for stream in (w.stdin, w.stdout):
                if stream is not None:
                    stream.close()
            w.wait(timeout=30)
    assert not [p.name for p in tmp_path.iterdir() if is_temp_name(p.name)]
