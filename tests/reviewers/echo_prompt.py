"""Scripted reviewer: reads its prompt and answers with a reply that depends on it.

Usage: python tests/reviewers/echo_prompt.py [FILE]

The summary is "prompt <N> chars sha256 <HEX>" (N counts the UTF-8 decoded
chars of stdin, HEX is the SHA-256 of its bytes), so a test can prove the
exact prompt arrived. For each line of the prompt that starts with
"REMEMBER: " (for example inside a transcript), it proposes adding the rest
of that line to FILE (default MEMORY.md), at most 10, so an end-to-end test
can follow a fact from a transcript into memory. The lines are found as the
shipped stand-in reviewer finds them (``gateway reviewer stand-in``,
gateway_cli/stand_in.py); this script keeps its own summary and proposals
without a topic, which tests compare exactly.
"""

from __future__ import annotations

import hashlib
import json
import sys

from gateway_cli.stand_in import MAX_FACTS, remembered

if __name__ == "__main__":
    target_file = sys.argv[1] if len(sys.argv) > 1 else "MEMORY.md"
    data = sys.stdin.buffer.read()
    text = data.decode("utf-8", errors="replace")
    proposals = [
        {"op": "add", "file": target_file, "content": f"- {fact}", "reason": "the session said REMEMBER"}
        for fact in remembered(text)[:MAX_FACTS]
    ]
    reply = {"summary": f"prompt {len(text)} chars sha256 {hashlib.sha256(data).hexdigest()}", "proposals": proposals}
    sys.stdout.write(json.dumps(reply))
    sys.stdout.flush()
    sys.exit(0)
