"""Scripted reviewer: reports where and with what environment it runs.

Usage: python tests/reviewers/probe.py

Reads its prompt, then answers with an empty reply whose summary is
"cwd=<its working folder> env=<its environment variable names, sorted, comma-separated>",
so a test can check the working folder and that only the intended variables
reached the reviewer (names only, never values).
"""

from __future__ import annotations

import json
import os
import sys

if __name__ == "__main__":
    sys.stdin.buffer.read()
    names = ",".join(sorted(os.environ))
    sys.stdout.write(json.dumps({"summary": f"cwd={os.getcwd()} env={names}", "proposals": []}))
    sys.stdout.flush()
    sys.exit(0)
