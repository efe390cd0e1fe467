"""The baseline of bench/rest_files.py: what a user would write instead of the suite.

One process, uvicorn + starlette, the two documented file endpoints and nothing
else. To keep the comparison fair it does the same essential work as the suite:

- checks ``X-Api-Key`` (or ``Authorization: Bearer``) against the configured key
  in constant time (SHA-256 digests + ``hmac.compare_digest``), 401 otherwise;
- accepts only the six allowed file names;
- GET reads the file (``""`` when absent) on the event loop, as the file API does;
- PUT writes through ``gateway.atomic.write_atomic`` itself (temp file in the
  same folder, fsync, ``os.replace``, fsync of the folder) in a worker thread,
  as the file API does;
- answers the same JSON shapes with compact separators, the same bytes as the shim.

It does not log per request, has no gRPC hop and no proto transcoding: that is
the overhead the benchmark measures.

Run: ``python bench/baseline_app.py --port N --workspace DIR --key KEY``
(uvicorn with the shim's own settings: asyncio loop, httptools, no access log).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.atomic import write_atomic

ALLOWED_FILES = ("SOUL.md", "USER.md", "MEMORY.md", "AGENTS.md", "HEARTBEAT.md", "IDENTITY.md")
SAVED_MESSAGE = "File saved. CLAUDE.md will auto-reload."
MAX_CONTENT_BYTES = 1_048_576


def build_app(workspace: Path, key: str, agent_id: str = "alfred") -> Starlette:
    key_digest = hashlib.sha256(key.encode()).digest()

    def authorized(request: Request) -> bool:
        presented = request.headers.get("x-api-key")
        if presented is None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            presented = token.strip() if scheme.lower() == "bearer" else ""
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        return hmac.compare_digest(digest, key_digest)

    def refuse(request: Request) -> JSONResponse | None:
        if not authorized(request):
            return JSONResponse({"error": "unknown API key"}, status_code=401)
        if request.path_params["agent_id"] != agent_id:
            return JSONResponse({"error": "no access to this agent"}, status_code=403)
        if request.path_params["filename"] not in ALLOWED_FILES:
            return JSONResponse({"error": "filename not allowed"}, status_code=400)
        return None

    async def get_file(request: Request) -> JSONResponse:
        refused = refuse(request)
        if refused is not None:
            return refused
        name = request.path_params["filename"]
        try:
            data = (workspace / name).read_bytes()
        except FileNotFoundError:
            data = b""
        return JSONResponse({"filename": name, "content": data.decode("utf-8"), "sha256": hashlib.sha256(data).hexdigest()})

    async def put_file(request: Request) -> JSONResponse:
        refused = refuse(request)
        if refused is not None:
            return refused
        name = request.path_params["filename"]
        try:
            body = json.loads(await request.body())
            content = body["content"]
            if not isinstance(content, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": 'send {"content": "..."}'}, status_code=400)
        data = content.encode("utf-8")
        if len(data) > MAX_CONTENT_BYTES:
            return JSONResponse({"error": "content too large"}, status_code=400)
        await asyncio.to_thread(write_atomic, workspace / name, data)
        return JSONResponse({"filename": name, "message": SAVED_MESSAGE, "sha256": hashlib.sha256(data).hexdigest()})

    path = "/api/v1/agents/{agent_id}/files/{filename}"
    return Starlette(routes=[Route(path, get_file, methods=["GET"]), Route(path, put_file, methods=["PUT"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--loop", default="asyncio", help="uvicorn loop (the shim uses asyncio)")
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.workspace, args.key),
        host="127.0.0.1",
        port=args.port,
        loop=args.loop,
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
