"""The text of ``gateway vault reflect``, ``reflections``, ``accept`` and ``revert`` (gateway_cli/vault_reflect_cli.py),
and the two DESIGN commands' arguments: ``reflect --project P [--mode propose]``, ``revert --project P (RUN | --last)``."""

from __future__ import annotations

import argparse

import pytest

from gateway.v1 import kb_pb2
from gateway_cli import vault_cli, vault_reflect_cli


def parse(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    vault_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["vault", *words])


def test_the_design_commands_parse_and_revert_takes_exactly_one_of_run_and_last() -> None:
    args = parse("reflect", "--project", "team", "--mode", "propose")
    assert (args.action, args.project, args.mode) == ("reflect", "team", "propose")
    assert parse("revert", "--project", "team", "--last").last
    assert parse("revert", "--project", "team", "R-20261206T040000Z-1a2b3c").run == "R-20261206T040000Z-1a2b3c"
    for words in (("revert", "--project", "team"), ("revert", "--project", "team", "R-1", "--last"), ("reflect",)):
        with pytest.raises(SystemExit):
            parse(*words)
    assert parse("accept", "--project", "team", "R-1", "C-1", "C-2").clusters == ["C-1", "C-2"]


def test_a_run_prints_its_counts_each_cluster_and_how_to_accept_its_proposals() -> None:
    run = kb_pb2.VaultReflectionRun(
        project="team", run_id="R-20261206T040000Z-1a2b3c", mode="propose", trigger="schedule", status="ok", remaining=3,
        clusters=[kb_pb2.VaultClusterResult(cluster_id="C-0123456789ab", notes=["a", "b"], outcome="proposed", reason="same"),
                  kb_pb2.VaultClusterResult(cluster_id="C-ba9876543210", notes=["c", "d"], outcome="refused",
                                            reason="bounded: 3 of 4 lines dropped")],
        proposals=[kb_pb2.VaultMergeProposal(cluster_id="C-0123456789ab", name="a", replaces=["a", "b"], state="pending")],
    )
    text = vault_reflect_cli.run_text(run)
    assert text.splitlines()[0] == "vault reflection R-20261206T040000Z-1a2b3c of project team (propose, schedule): ok"
    assert "clusters: 2 (1 proposed, 1 refused); 3 wait for the next run" in text
    assert "refused  C-ba9876543210  c, d: bounded: 3 of 4 lines dropped" in text
    assert "accept with: gateway vault accept --project team R-20261206T040000Z-1a2b3c C-0123456789ab" in text
    noop = vault_reflect_cli.run_text(kb_pb2.VaultReflectionRun(project="team", run_id="R-x", mode="auto", trigger="manual",
                                                                status="noop", reason="the vault has not changed"))
    assert noop == "vault reflection R-x of project team (auto, manual): noop (the vault has not changed)\n"


def test_a_revert_prints_what_was_put_back_and_what_was_left() -> None:
    reply = kb_pb2.RevertVaultReflectionResponse(run_id="R-x", restored=["a", "b"], left=["c: changed since the run"])
    assert vault_reflect_cli.revert_text("team", reply).splitlines() == [
        "reverted reflection run R-x of project team: 2 notes put back", "  restored a", "  restored b",
        "  left     c: changed since the run"]
