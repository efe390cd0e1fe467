"""Scripted reviewer: prints prose with braces but no JSON object, then exits 0.

Usage: python tests/reviewers/garbage.py

It does not read its prompt (stdin), like a broken reviewer would not.
"""

from __future__ import annotations

import sys

TEXT = """I looked at the sessions {carefully} and here is what I think:
{ "summary": oops this is not JSON,
  proposals: [add everything] }
Also {{nested}} and a lone { brace, and "a quote.
"""

if __name__ == "__main__":
    sys.stdout.write(TEXT)
    sys.stdout.flush()
    sys.exit(0)
