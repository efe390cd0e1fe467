"""The MCP server's translation of the KB's UNAVAILABLE: the KB's own answer (a server it needs is down)
keeps its words, a KB that cannot be reached is said to be not running."""

from __future__ import annotations

import grpc
from grpc.aio import AioRpcError, Metadata

from gateway.resources import UNAVAILABLE_METADATA
from gateway_mcp.client import translate

DOWN = "the shared vault of project 'global' is unavailable: its PostgreSQL server cannot be reached"


def error(trailing: Metadata) -> AioRpcError:
    return AioRpcError(grpc.StatusCode.UNAVAILABLE, Metadata(), trailing, details=DOWN)


def test_the_kbs_own_unavailable_names_the_vault() -> None:
    said = translate(error(Metadata((UNAVAILABLE_METADATA, "1"))), "127.0.0.1:1", 10)
    assert said.code == "UNAVAILABLE" and said.message == DOWN


def test_a_kb_that_cannot_be_reached_is_said_to_be_not_running() -> None:
    said = translate(error(Metadata()), "127.0.0.1:1", 10)
    assert "the KB service is not running" in said.message and DOWN not in said.message
