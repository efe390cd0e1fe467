"""Scripted reviewer: prints Claude's `--output-format json` envelope around a reply.

Usage: python tests/reviewers/envelope.py [--error] [PATH]

The reply text (the envelope's `result` string) is the content of PATH, or
the environment variable DREAM_TEST_REPLY without PATH. With --error the
envelope says `"is_error": true` (as Claude does when the call failed) and
`result` holds an error message. Reads the whole prompt from stdin first.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    error = "--error" in argv
    args = [a for a in argv if a != "--error"]
    sys.stdin.buffer.read()
    if error:
        result = "API Error: overloaded"
    elif args:
        with open(args[0], encoding="utf-8") as handle:
            result = handle.read()
    else:
        result = os.environ.get("DREAM_TEST_REPLY", "")
    envelope = {
        "type": "result",
        "subtype": "error_during_execution" if error else "success",
        "is_error": error,
        "duration_ms": 1234,
        "num_turns": 1,
        "result": result,
        "session_id": "00000000-0000-4000-8000-000000000000",
        "total_cost_usd": 0.0,
    }
    sys.stdout.write(json.dumps(envelope))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
