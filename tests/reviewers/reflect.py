"""Scripted reviewer of the vault's weekly reflection: answers each cluster from a file of canned replies.

Usage: python tests/reviewers/reflect.py REPLIES_JSON CALLS_FILE

Reads the whole prompt and appends one line to CALLS_FILE (so a test counts the calls). REPLIES_JSON
maps a note name to what to do when the cluster in the prompt lists that note (the prompt's numbered
list, ``1. "name"``; the first name of the file listed there wins):

- an object or a string: printed as the reply (an object as JSON);
- ``{"put": {"url": URL, "key": KEY, "content": TEXT}, "reply": …}``: first PUTs ``{"content": TEXT,
  "confirm": true}`` to URL (a shared note of the REST shim) with the header X-Api-Key: KEY, then
  prints the reply: the note changes while the run holds the cluster (exit 4 when the PUT fails).

A cluster that lists none of the names gets ``{"decision": "leave", "reason": "not scripted"}``. The
prompt is saved to CALLS_FILE's folder as ``prompt-<N>.txt``. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path


def put(spec: dict[str, str]) -> str:
    body = json.dumps({"content": spec["content"], "confirm": True}).encode("utf-8")
    request = urllib.request.Request(spec["url"], data=body, method="PUT",
                                     headers={"X-Api-Key": spec["key"], "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return "" if response.status == 200 else f"HTTP {response.status}"
    except (urllib.error.URLError, OSError) as exc:
        return str(exc)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: reflect.py REPLIES_JSON CALLS_FILE\n")
        return 2
    prompt = sys.stdin.read()
    calls = Path(argv[1])
    with calls.open("a", encoding="utf-8") as handle:
        handle.write("call\n")
    count = len(calls.read_text(encoding="utf-8").splitlines())
    (calls.parent / f"prompt-{count}.txt").write_text(prompt, encoding="utf-8")
    listed = set(re.findall(r'^[0-9]+\. (".*")$', prompt, flags=re.MULTILINE))
    replies = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    for name, action in replies.items():
        if json.dumps(name, ensure_ascii=False) not in listed:
            continue
        if isinstance(action, dict) and "put" in action:
            problem = put(action["put"])
            if problem:
                sys.stderr.write(f"PUT failed: {problem}\n")
                return 4
            action = action["reply"]
        sys.stdout.write(action if isinstance(action, str) else json.dumps(action))
        return 0
    sys.stdout.write('{"decision": "leave", "reason": "not scripted"}')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
