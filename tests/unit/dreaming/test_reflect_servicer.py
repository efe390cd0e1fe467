"""Dreaming's four vault reflection RPCs in process (services/dreaming/servicer.py, reflection.py): a key
whose scope is "*" (with write access for all but the list), INVALID_ARGUMENT for a bad project, mode or
ids, FAILED_PRECONDITION for a project no agent shares, ABORTED when the vault is busy, and a run through."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from dreaming_stage import Stage, dreamer_on
from reflect_fakes import FakeKb, ScriptedReviewer
from servicer_context import Context

from gateway.auth import INTERNAL_TOKEN_HEADER, Authenticator
from gateway.config import build
from gateway.config_migrations import CURRENT_VERSION
from gateway.v1 import dreaming_pb2, kb_pb2
from services.dreaming.reflection import Reflections
from services.dreaming.servicer import Dreaming

TOKEN = "internal-token"
KEYS = [{"name": "scoped", "key": "scoped-key", "agents": ["alfred"], "write": True},
        {"name": "star-reader", "key": "reader-key", "agents": "*", "write": False},
        {"name": "admin", "key": "admin-key", "agents": "*", "write": True}]
NOTES = {"a": "# A\n- one\n", "b": "# B\n- one\n"}
INTERNAL = ((INTERNAL_TOKEN_HEADER, TOKEN),)


def servicer(home: Path, kb: FakeKb) -> Dreaming:
    config = build({"configVersion": CURRENT_VERSION, "gateway": {"api": {"keys": KEYS}},
                    "agents": [{"id": "alfred", "knowledge": {"shared": {"project": "team"}}},
                               {"id": "bob", "knowledge": {"shared": {"project": "off", "enabled": False}}}]}, home)
    auth = Authenticator(config.api.keys, TOKEN)
    reviewer = ScriptedReviewer({"a": {"decision": "merge", "name": "a", "content": "# A\n- one\n", "replaces": ["a", "b"],
                                       "reason": "same"}})
    return Dreaming(dreamer_on(config, home, Stage()), lambda: (config, auth), Reflections(kb, reviewer))


def call(method: Callable[[Any, Any], Awaitable[Any]], request: Any, metadata: tuple[tuple[str, str], ...]) -> tuple[Any, Context]:
    context = Context(metadata)
    try:
        return asyncio.run(method(request, context)), context
    except grpc.aio.AbortError:
        return None, context


def code(context: Context) -> grpc.StatusCode | None:
    return context.aborted[0][0] if context.aborted else None


def test_a_run_through_the_rpc_merges_and_the_list_shows_it(tmp_path: Path) -> None:
    kb = FakeKb(dict(NOTES), [("a", "b")])
    s = servicer(tmp_path, kb)
    run, context = call(s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="team"), (("x-api-key", "admin-key"),))
    assert context.aborted == [] and run.status == "ok" and [c.outcome for c in run.clusters] == ["merged"]
    assert run.run_id.startswith("R-") and run.trigger == "manual" and run.mode == "auto"
    listed, _ = call(s.GetVaultReflections, kb_pb2.ListVaultReflectionsRequest(project="team"), (("x-api-key", "reader-key"),))
    assert [r.run_id for r in listed.runs] == [run.run_id]


def test_a_key_whose_scope_is_not_star_or_has_no_write_is_refused(tmp_path: Path) -> None:
    s = servicer(tmp_path, FakeKb(dict(NOTES), [("a", "b")]))
    _, context = call(s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="team"), (("x-api-key", "scoped-key"),))
    assert code(context) == grpc.StatusCode.PERMISSION_DENIED and 'scope is "*"' in context.aborted[0][1]
    _, context = call(s.GetVaultReflections, kb_pb2.ListVaultReflectionsRequest(project="team"), (("x-api-key", "scoped-key"),))
    assert code(context) == grpc.StatusCode.PERMISSION_DENIED
    for method, request in ((s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="team")),
                            (s.UndoVaultReflection, kb_pb2.RevertVaultReflectionRequest(project="team", last=True)),
                            (s.DecideVaultMerges, dreaming_pb2.DecideVaultMergesRequest(project="team"))):
        _, context = call(method, request, (("x-api-key", "reader-key"),))
        assert code(context) == grpc.StatusCode.PERMISSION_DENIED and "write access" in context.aborted[0][1]
    _, context = call(s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="team"), (("x-api-key", "nope"),))
    assert code(context) == grpc.StatusCode.UNAUTHENTICATED


def test_bad_input_is_invalid_argument_naming_the_field(tmp_path: Path) -> None:
    s = servicer(tmp_path, FakeKb(dict(NOTES), [("a", "b")]))
    cases = [
        (s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project=""), "project is required"),
        (s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="../x"), "is not a project name"),
        (s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="team", mode="yolo"), "mode:"),
        (s.UndoVaultReflection, kb_pb2.RevertVaultReflectionRequest(project="team"), "exactly one of run_id"),
        (s.UndoVaultReflection, kb_pb2.RevertVaultReflectionRequest(project="team", run_id="R-1", last=True), "exactly one of run_id"),
        (s.UndoVaultReflection, kb_pb2.RevertVaultReflectionRequest(project="team", run_id="20261206T040000Z-abc"), "not a reflection run id"),
        (s.DecideVaultMerges, dreaming_pb2.DecideVaultMergesRequest(project="team", run_id="R-20261206T040000Z-abc123"), "accept or reject is required"),
        (s.DecideVaultMerges, dreaming_pb2.DecideVaultMergesRequest(project="team", run_id="R-20261206T040000Z-abc123", accept=["C-1"]), "is not a cluster id"),
        (s.DecideVaultMerges, dreaming_pb2.DecideVaultMergesRequest(project="team", run_id="x", accept=["C-000000000000"]), "run_id:"),
        (s.DecideVaultMerges, dreaming_pb2.DecideVaultMergesRequest(project="team", run_id="R-20261206T040000Z-abc123",
                                                                    accept=["C-000000000000"], reject=["C-000000000000"]), "both accepted and rejected"),
        (s.GetVaultReflections, kb_pb2.ListVaultReflectionsRequest(project="team", limit=201), "limit:"),
    ]
    for method, request, words in cases:
        _, context = call(method, request, INTERNAL)
        assert code(context) == grpc.StatusCode.INVALID_ARGUMENT and words in context.aborted[0][1], (words, context.aborted)


def test_a_project_no_agent_shares_is_failed_precondition_and_a_busy_vault_aborted(tmp_path: Path) -> None:
    s = servicer(tmp_path, FakeKb(dict(NOTES), [("a", "b")], busy_with="R-20261206T040000Z-ffffff"))
    for project in ("elsewhere", "off"):
        _, context = call(s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project=project), INTERNAL)
        assert code(context) == grpc.StatusCode.FAILED_PRECONDITION and "no agent has the shared KB on" in context.aborted[0][1]
    _, context = call(s.ReflectVault, dreaming_pb2.ReflectVaultRequest(project="team"), INTERNAL)
    assert code(context) == grpc.StatusCode.ABORTED and "R-20261206T040000Z-ffffff" in context.aborted[0][1]


def test_deciding_on_an_unknown_run_is_not_found(tmp_path: Path) -> None:
    s = servicer(tmp_path, FakeKb(dict(NOTES), [("a", "b")]))
    request = dreaming_pb2.DecideVaultMergesRequest(project="team", run_id="R-20261206T040000Z-abc123", accept=["C-000000000000"])
    _, context = call(s.DecideVaultMerges, request, INTERNAL)
    assert code(context) == grpc.StatusCode.NOT_FOUND
