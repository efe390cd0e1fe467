"""gRPC servicer of gateway.v1.WorkspaceFiles: parse, authorize, call files.py.

A PUT whose content holds a secret (``gateway.secrets_guard``) is written all the same (the user's
own file) and answered with one ``warnings`` line per finding; each is logged (``put_holds_secret``:
the key's label, the file, the line and the detector, never the value). docs/concepts/secrets.md.
So is a PUT that brings back text a forget took out (``gateway.forget_guard``): written, with one
warning per forget naming its id, each logged (``put_holds_forgotten_text``: the key's label, the
file, the forget's id, never the text). docs/concepts/forget.md "Where tombstones are checked".
"""

from __future__ import annotations

import asyncio
import time

import grpc
import structlog

from gateway.config import AgentConfig
from gateway.errors import InvalidArgument
from gateway.forget_guard import find_forgotten
from gateway.live_config import LiveConfig
from gateway.put_record import record_put
from gateway.rpc import authorize_call, caller_label, unary
from gateway.secrets_guard import find_secrets
from gateway.v1 import files_pb2, files_pb2_grpc
from services.file_api import files
from services.file_api.names import check_filename
from services.file_api.read_cache import MIB, ReadCache

log = structlog.get_logger()

SAVED_MESSAGE = "File saved. CLAUDE.md will auto-reload."
SECRET_WARNING = ("{where}: this file now holds a secret; keep secrets in a secret store, not in memory "
                  "(`gateway doctor secrets {agent}` lists where they sit)")


def secret_warnings(agent_id: str, name: str, text: str, key: str | None) -> list[str]:
    """The ``warnings`` of a PUT of ``text`` to ``name``: one line per secret found, each logged with
    the caller's key label ``key``; the value is in neither. A scanner that fails is logged and warns
    of nothing: the file is written by then, and the answer must say so."""
    try:
        found_all = find_secrets(text)
    except Exception as exc:  # noqa: BLE001 - advisory only: the write it follows succeeded
        log.error("put_secret_scan_failed", agent=agent_id, file=name, error=f"{type(exc).__name__}: {exc}")
        return []
    out = []
    for found in found_all:
        log.warning("put_holds_secret", agent=agent_id, file=name, key=key, line=found.line, detector=found.detector)
        out.append(SECRET_WARNING.format(where=found.says(), agent=agent_id))
    return out


FORGOTTEN_WARNING = ("this file now holds text forgotten on purpose ({forget}); dreaming will not copy it and "
                     "search will not return it; the same `gateway forget {agent}` run again takes it out")


def forgotten_warnings(agent: AgentConfig, name: str, text: str, key: str | None) -> list[str]:
    """The ``warnings`` of a PUT of ``text`` to ``name`` for forgotten text: one line per forget whose
    text it brings back, each logged with the caller's key label ``key``; the text is in neither. A
    check that fails is logged and warns of nothing (the file is written by then)."""
    try:
        ids = find_forgotten(agent.home, text, agent.id)
    except Exception as exc:  # noqa: BLE001 - advisory only: the write it follows succeeded
        log.error("put_forgotten_check_failed", agent=agent.id, file=name, error=f"{type(exc).__name__}: {exc}")
        return []
    for forget in ids:
        log.warning("put_holds_forgotten_text", agent=agent.id, file=name, key=key, tombstone=forget)
    return [FORGOTTEN_WARNING.format(forget=forget, agent=agent.id) for forget in ids]


def _reply(name: str, text: str) -> files_pb2.GetFileResponse:
    """GetFile's answer; the read cache keeps one per unchanged file and every caller gets that same message."""
    return files_pb2.GetFileResponse(filename=name, content=text, sha256=files.sha256_hex(text.encode("utf-8")))


class WorkspaceFiles(files_pb2_grpc.WorkspaceFilesServicer):
    def __init__(self, live: LiveConfig) -> None:
        self._live = live
        self._reads = ReadCache(_reply, max_bytes=live.current.files.read_cache_mib * MIB)

    def _agent(self, context: grpc.aio.ServicerContext, agent_id: str, *, write: bool) -> AgentConfig:
        config, auth = self._live.snapshot()
        agent = config.agent(agent_id)
        authorize_call(auth, context, agent_id, agent_exists=agent is not None, write=write)
        assert agent is not None
        return agent

    @unary
    async def GetFile(self, request: files_pb2.GetFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.GetFileResponse:  # noqa: N802
        workspace = self._agent(context, request.agent_id, write=False).workspace
        name = check_filename(request.filename)
        return self._reads.read(workspace, name)

    @unary
    async def PutFile(self, request: files_pb2.PutFileRequest, context: grpc.aio.ServicerContext) -> files_pb2.PutFileResponse:  # noqa: N802
        agent = self._agent(context, request.agent_id, write=True)
        name = check_filename(request.filename)
        if not request.HasField("content"):
            raise InvalidArgument("content is required: send {\"content\": \"...\"}")
        data = files.check_content(request.content)
        expected = files.check_expected_sha256(request.expected_sha256) if request.HasField("expected_sha256") else None

        def record() -> None:  # lineage: what last changed the file (docs/concepts/lineage.md)
            try:
                record_put(agent.agent_dir, name, data, time.time_ns() // 1_000_000)
            except OSError as exc:  # the file is written all the same; lineage will say "unknown"
                log.warning("put_not_recorded", agent=agent.id, file=name, error=str(exc))

        key = caller_label()

        def write() -> list[str]:  # the guards run once the file is written: they warn, never refuse
            files.write_file(agent.workspace, name, data, expected_sha256=expected, before_rename=record)
            return [*secret_warnings(agent.id, name, request.content, key),
                    *forgotten_warnings(agent, name, request.content, key)]

        # fsync blocks, and so does the scan; keep them off the event loop so reads are not held up.
        warnings = await asyncio.to_thread(write)
        return files_pb2.PutFileResponse(filename=name, message=SAVED_MESSAGE, sha256=files.sha256_hex(data),
                                         warnings=warnings)
