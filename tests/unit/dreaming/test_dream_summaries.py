"""Dreaming.GetDreamSummaries in process: every id authorized as a read, unknown agents answered
as such, the bound on ids, and each status as GetDreamStatus gives it without its text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from dreaming_stage import MEMORY, Stage, dreamer_on
from servicer_context import Context

from gateway.auth import INTERNAL_TOKEN_HEADER, Authenticator
from gateway.config import Config, build
from gateway.config_migrations import CURRENT_VERSION
from gateway.v1 import dreaming_pb2
from services.dreaming.servicer import MAX_SUMMARY_IDS, Dreaming

TOKEN = "internal-token"
KEYS = [{"name": "reader", "key": "reader-key", "agents": ["alfred"], "write": False},
        {"name": "admin", "key": "admin-key", "agents": "*", "write": True}]


def servicer(home: Path) -> Dreaming:
    config: Config = build({"configVersion": CURRENT_VERSION, "gateway": {"api": {"keys": KEYS}},
                            "agents": [{"id": "alfred"}, {"id": "bob"}]}, home)
    for agent in config.agents:
        agent.workspace.mkdir(parents=True, exist_ok=True)
        (agent.workspace / "MEMORY.md").write_text(MEMORY)
    auth = Authenticator(config.api.keys, TOKEN)
    return Dreaming(dreamer_on(config, home, Stage()), lambda: (config, auth))


def summaries(home: Path, ids: list[str], metadata: tuple[tuple[str, str], ...]) -> tuple[dreaming_pb2.DreamSummaries | None, Context]:
    context = Context(metadata)
    request = dreaming_pb2.GetDreamSummariesRequest(agent_ids=ids)
    try:
        return asyncio.run(servicer(home).GetDreamSummaries(request, context)), context  # type: ignore[arg-type]
    except grpc.aio.AbortError:
        return None, context


def test_the_internal_token_gets_every_known_agent_and_the_reason_for_the_others(tmp_path: Path) -> None:
    reply, _ = summaries(tmp_path, ["bob", "zed", "alfred", "bob", "../x"], ((INTERNAL_TOKEN_HEADER, TOKEN),))
    assert reply is not None
    assert [s.agent_id for s in reply.statuses] == ["bob", "alfred"]
    assert all(s.text == "" and s.mode == "auto" for s in reply.statuses)
    assert dict(reply.unknown) == {"zed": "agent 'zed' not found", "../x": reply.unknown["../x"]}
    assert "is not an agent id" in reply.unknown["../x"]


def test_a_key_reads_the_agents_of_its_scope_and_one_id_outside_it_fails_the_call(tmp_path: Path) -> None:
    reply, _ = summaries(tmp_path, ["alfred"], (("x-api-key", "reader-key"),))
    assert reply is not None and [s.agent_id for s in reply.statuses] == ["alfred"]
    reply, context = summaries(tmp_path, ["alfred", "bob"], (("x-api-key", "reader-key"),))
    assert reply is None and [code for code, _ in context.aborted] == [grpc.StatusCode.PERMISSION_DENIED]
    reply, context = summaries(tmp_path, ["alfred", "zed"], (("x-api-key", "reader-key"),))  # not named by its scope
    assert reply is None and [code for code, _ in context.aborted] == [grpc.StatusCode.PERMISSION_DENIED]
    reply, _ = summaries(tmp_path, ["alfred", "bob", "zed"], (("authorization", "Bearer admin-key"),))
    assert reply is not None and len(reply.statuses) == 2 and list(reply.unknown) == ["zed"]


@pytest.mark.parametrize("metadata", [(), (("x-api-key", "nobody"),), ((INTERNAL_TOKEN_HEADER, "wrong"),)])
def test_no_key_or_a_wrong_one_is_unauthenticated(tmp_path: Path, metadata: tuple[tuple[str, str], ...]) -> None:
    reply, context = summaries(tmp_path, ["alfred"], metadata)
    assert reply is None and [code for code, _ in context.aborted] == [grpc.StatusCode.UNAUTHENTICATED]


def test_the_ids_of_one_call_are_bounded(tmp_path: Path) -> None:
    reply, context = summaries(tmp_path, ["alfred"] * (MAX_SUMMARY_IDS + 1), ((INTERNAL_TOKEN_HEADER, TOKEN),))
    assert reply is None
    [(code, details)] = context.aborted
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("agent_ids:") and f"at most {MAX_SUMMARY_IDS}" in details
    reply, _ = summaries(tmp_path, [], ((INTERNAL_TOKEN_HEADER, TOKEN),))
    assert reply is not None and not reply.statuses and not reply.unknown


def test_a_summary_is_the_status_without_its_text(tmp_path: Path) -> None:
    dreaming = servicer(tmp_path)
    metadata = ((INTERNAL_TOKEN_HEADER, TOKEN),)
    single = asyncio.run(dreaming.GetDreamStatus(dreaming_pb2.GetDreamStatusRequest(agent_id="alfred"), Context(metadata)))  # type: ignore[arg-type]
    batch = asyncio.run(dreaming.GetDreamSummaries(dreaming_pb2.GetDreamSummariesRequest(agent_ids=["alfred"]), Context(metadata)))  # type: ignore[arg-type]
    assert single.text.startswith("dreaming for alfred")
    single.text = ""
    assert batch.statuses[0] == single
