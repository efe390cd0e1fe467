"""Scripted reviewer: prints a chosen reply, then exits 0.

Usage: python tests/reviewers/reply.py [--ignore-stdin] [PATH]

The reply is the content of PATH, printed verbatim; without PATH it is the
value of the environment variable DREAM_TEST_REPLY. It reads the whole prompt
from stdin first, as a real reviewer does, unless --ignore-stdin is given (to
test a reviewer that exits without reading its prompt).
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    ignore_stdin = "--ignore-stdin" in argv
    args = [a for a in argv if a != "--ignore-stdin"]
    if not ignore_stdin:
        sys.stdin.buffer.read()
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
