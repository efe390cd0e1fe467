"""A bare grpc.aio server that runs the KB benchmark's baseline MATCH: the gRPC hop, measured alone.

Run by ``bench/kb_archive.py`` (not by hand): ``python bench/match_server.py PORT KB_SQLITE SQL``.

It serves one generic unary method, ``/bench.Match/Run``: the request is an FTS5
MATCH expression (UTF-8 bytes), the handler runs ``SQL`` (the benchmark's
baseline statement) with it on a read-only connection to ``KB_SQLITE`` (``schema.open_reader``),
exactly as the in-process baseline does, and the reply is the rows as JSON.
Nothing else is in the path: no auth, no logging, no protobuf messages, no
ranking. So ``(its latency - the in-process query's)`` is what gRPC itself costs
a handler that takes as long as the baseline query, on this machine; a service
that does the baseline's work or more cannot answer faster than this server.
It prints ``ready`` on stdout once it listens, and stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import grpc
import harness  # noqa: F401 - first: this checkout's services on sys.path

from services.kb.index import schema

METHOD = "/bench.Match/Run"


async def serve(port: int, db: Path, sql: str) -> None:
    reader = schema.open_reader(db)  # as the in-process baseline opens it

    async def run(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        rows = reader.execute(sql, (request.decode(),)).fetchall() if request else []
        return json.dumps(rows).encode()

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(run)  # bytes in, bytes out: no (de)serializers
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Match", {"Run": handler}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await server.stop(1)
    reader.close()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
