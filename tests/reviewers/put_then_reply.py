"""Scripted reviewer: writes a file through the REST API mid-run, then prints a chosen reply.

Usage: python tests/reviewers/put_then_reply.py URL KEY CONTENT_FILE REPLY_FILE

Reads the whole prompt, then PUTs the content of CONTENT_FILE to URL (a file
endpoint of the REST shim, e.g. http://127.0.0.1:PORT/api/v1/agents/alfred/files/MEMORY.md)
with the header X-Api-Key: KEY, and only once the PUT has answered 200 prints
REPLY_FILE verbatim. So the run that called it finds the file changed since it
read it, every time: the compare-and-swap case made deterministic. Standard
library only; proxies are never used (the URL is local). A PUT that fails is
an exit status 4 with the reason on stderr.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        sys.stderr.write("usage: put_then_reply.py URL KEY CONTENT_FILE REPLY_FILE\n")
        return 2
    url, key, content_file, reply_file = argv
    sys.stdin.buffer.read()
    with open(content_file, encoding="utf-8") as handle:
        body = json.dumps({"content": handle.read()}).encode("utf-8")
    request = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"X-Api-Key": key, "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        sys.stderr.write(f"PUT {url}: HTTP {exc.code}: {exc.read()[:300]!r}\n")
        return 4
    except OSError as exc:
        sys.stderr.write(f"PUT {url}: {exc}\n")
        return 4
    if status != 200:
        sys.stderr.write(f"PUT {url}: HTTP {status}\n")
        return 4
    with open(reply_file, "rb") as handle:
        sys.stdout.buffer.write(handle.read())
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
