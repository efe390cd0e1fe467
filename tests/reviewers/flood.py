"""Scripted reviewer: prints MEGABYTES of output (default 10) to stdout.

Usage: python tests/reviewers/flood.py [MEGABYTES]

Written in 64 KiB chunks; a reader that stops reading and kills it is
expected, so a broken pipe ends it quietly.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    total = int(float(sys.argv[1]) * 1_000_000) if len(sys.argv) > 1 else 10_000_000
    chunk = b"x" * 65536
    written = 0
    try:
        while written < total:
            part = chunk[: total - written]
            sys.stdout.buffer.write(part)
            written += len(part)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(0)
