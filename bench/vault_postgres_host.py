"""One simulated agent host's client for bench/vault_postgres.py: creates shared notes through one KB over
gRPC and prints what each took as one JSON line.

Run by the bench, one process per host::

    python bench/vault_postgres_host.py --port P --home H --tag h3 --seed S

It makes a few unmeasured creates, prints ``ready`` and then obeys one line of stdin at a time, until
``stop`` or the end of stdin:

- ``go SECONDS``: a closed loop, creates back to back for SECONDS;
- ``go SECONDS RATE``: an open loop, creates at RATE a second (exponential gaps, so arrivals are a Poisson
  process) for SECONDS, each timed from the moment it was due, so a KB that falls behind shows its queue
  in the times (no coordinated omission); a create still unsent when the SECONDS are over is counted
  ``unsent``.

After each it prints ``{"ops": [[due offset s, seconds, written], ...], "unsent": N}``. Every create is of a
new note (a fresh topic, bench/kb_shared_vault.py's generator, named with the host's tag, so hosts never
clash); one that is nudged (similar notes exist) is sent again with ``confirm=true``, as an agent would,
and its time is both calls'.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import harness  # noqa: F401  (puts this checkout first on sys.path)
from kb_bench_support import AGENT
from kb_shared_vault import VaultGen

WARMUP = 3
RPC_TIMEOUT_S = 30.0

Op = tuple[float, float, bool]


def notes(gen: VaultGen, tag: str) -> Iterator[tuple[str, str]]:
    i = 0
    while True:
        yield gen.new_note(f"{tag}-{i:05d}")
        i += 1


def closed(create: Callable[[], bool], seconds: float) -> tuple[list[Op], int]:
    ops: list[Op] = []
    begin = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        written = create()
        ops.append((t0 - begin, time.perf_counter() - t0, written))
        if time.perf_counter() - begin >= seconds:
            return ops, 0


def opened(create: Callable[[], bool], seconds: float, rate: float, rng: random.Random) -> tuple[list[Op], int]:
    ops: list[Op] = []
    begin = time.perf_counter()
    due = rng.expovariate(rate)
    while due < seconds:
        now = time.perf_counter() - begin
        if now >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        written = create()
        ops.append((due, time.perf_counter() - begin - due, written))
        due += rng.expovariate(rate)
    unsent = 0
    while due < seconds:
        unsent += 1
        due += rng.expovariate(rate)
    return ops, unsent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--home", type=Path, required=True)
    p.add_argument("--tag", required=True, help="this host's tag: part of every note name, so hosts never clash")
    p.add_argument("--seed", type=int, required=True)
    args = p.parse_args(argv)

    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2, kb_pb2_grpc

    gen = VaultGen(args.seed)
    rng = random.Random(args.seed)
    source = notes(gen, args.tag)
    metadata = (("x-gateway-internal-token", read_internal_token(args.home)),)
    with grpc.insecure_channel(f"127.0.0.1:{args.port}") as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)

        def create() -> bool:
            name, content = next(source)
            for confirm in (False, True):
                request = kb_pb2.CreateSharedNoteRequest(agent_id=AGENT, name=name, content=content, confirm=confirm)
                if stub.CreateSharedNote(request, metadata=metadata, timeout=RPC_TIMEOUT_S).created:
                    return True
            return False

        for _ in range(WARMUP):
            create()
        print("ready", flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] != "go":
                break
            seconds = float(words[1])
            ops, unsent = opened(create, seconds, float(words[2]), rng) if len(words) > 2 else closed(create, seconds)
            print(json.dumps({"ops": ops, "unsent": unsent}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
