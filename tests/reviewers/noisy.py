"""Scripted reviewer: floods stderr (default 2 MB), then prints a valid empty reply.

Usage: python tests/reviewers/noisy.py [MEGABYTES]

Proves the caller drains stderr while it waits: a caller that did not would
block this writer forever once the pipe buffer is full.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    total = int(float(sys.argv[1]) * 1_000_000) if len(sys.argv) > 1 else 2_000_000
    sys.stdin.buffer.read()
    line = b"warning: still thinking\n"
    for _ in range(total // len(line)):
        sys.stderr.buffer.write(line)
    sys.stderr.buffer.write(b"last words on stderr\n")
    sys.stderr.buffer.flush()
    sys.stdout.write('{"summary": "noisy but fine", "proposals": []}')
    sys.stdout.flush()
    sys.exit(0)
