"""Scripted reviewer: reads its prompt, prints nothing, exits 0.

Usage: python tests/reviewers/silent.py
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    sys.stdin.buffer.read()
    sys.exit(0)
