"""One racer of ``two_host_support.race``, run as ``python vault_racer.py URL API_KEY``: reads a JSON body
from its first stdin line, opens its connection to URL, prints ``ready``, waits for the ``go`` line, POSTs
the body and prints the status and the answer as one JSON line. Only httpx is imported: a racer starts
in a fraction of a second."""

from __future__ import annotations

import json
import sys

import httpx


def main(url: str, key: str) -> None:
    body = json.loads(sys.stdin.readline())
    with httpx.Client(headers={"X-Api-Key": key}, timeout=60) as http:
        http.get(url.split("/api/", 1)[0] + "/healthz")  # the connection is open before the start
        print("ready", flush=True)
        sys.stdin.readline()
        response = http.post(url, json=body)
    print(json.dumps({"status": response.status_code, "answer": response.json()}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
