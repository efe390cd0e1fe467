"""Scripted reviewer: writes an error to stderr and exits with a non-zero status.

Usage: python tests/reviewers/fail.py [STATUS]

STATUS defaults to 3. A valid-looking reply is printed on stdout too, to prove
that a failed exit is a failure whatever the output says.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    status = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    sys.stdin.buffer.read()
    sys.stdout.write('{"summary": "should not count", "proposals": []}')
    sys.stdout.flush()
    sys.stderr.write("reviewer: something went wrong\nError: credit balance is too low\n")
    sys.stderr.flush()
    sys.exit(status)
