"""Scripted reviewer: prints a chosen reply, then exits 0.

Usage: python tests/reviewers/reply.py [--ignore-stdin] [--delay SECONDS] [PATH]

The reply is the content of PATH, printed verbatim; without PATH it is the
value of the environment variable DREAM_TEST_REPLY. It reads the whole prompt
from stdin first, as a real reviewer does, unless --ignore-stdin is given (to
test a reviewer that exits without reading its prompt). --delay makes it take
SECONDS before it answers, like a model that thinks for a while.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    ignore_stdin = "--ignore-stdin" in argv
    args = [a for a in argv if a != "--ignore-stdin"]
    delay = 0.0
    if "--delay" in args:
        at = args.index("--delay")
        delay = float(args[at + 1])
        del args[at : at + 2]
    if not ignore_stdin:
        sys.stdin.buffer.read()
    time.sleep(delay)
    if args:
        with open(args[0], "rb") as handle:
            reply = handle.read()
    else:
        reply = os.environ.get("DREAM_TEST_REPLY", "").encode("utf-8")
    sys.stdout.buffer.write(reply)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
