"""Scripted reviewer that holds its run open until a file appears, then prints a chosen reply.

Usage: python tests/reviewers/hold.py [--signal PATH] --wait PATH [--limit SECONDS] REPLY_FILE

Reads the whole prompt; creates the file given by --signal (if any, atomically)
to say the reviewer is running; waits until the file given by --wait exists
(polling every 20 ms); then prints REPLY_FILE verbatim and exits 0. If --wait's
file has not appeared after --limit seconds (default 30) it exits with status
5 and says so on stderr, so a test can tell "released" from "gave up".

Two uses: a gate (the test creates the --wait file when it is done with the
run in progress) and a rendezvous (two runs, each signalling the file the
other waits for, can only both succeed if they are in progress at once).
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    signal_path = wait_path = ""
    limit = 30.0
    args: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--signal":
            signal_path = next(it)
        elif arg == "--wait":
            wait_path = next(it)
        elif arg == "--limit":
            limit = float(next(it))
        else:
            args.append(arg)
    if not wait_path or len(args) != 1:
        sys.stderr.write("usage: hold.py [--signal PATH] --wait PATH [--limit SECONDS] REPLY_FILE\n")
        return 2
    sys.stdin.buffer.read()
    if signal_path:
        with open(signal_path + ".tmp", "w", encoding="ascii") as handle:
            handle.write(f"{os.getpid()}\n")
        os.replace(signal_path + ".tmp", signal_path)
    deadline = time.monotonic() + limit
    while not os.path.exists(wait_path):
        if time.monotonic() > deadline:
            sys.stderr.write(f"hold.py: {wait_path} did not appear within {limit:g} s\n")
            return 5
        time.sleep(0.02)
    with open(args[0], "rb") as handle:
        sys.stdout.buffer.write(handle.read())
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
