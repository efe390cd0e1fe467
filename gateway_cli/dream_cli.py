"""``gateway dream …``: a dreaming run now, its status, accepting or rejecting proposals, reverting a run, an entry's history.

Each command is one call to the dreaming service over gRPC with the home's
internal token, and prints the text the service renders. Exit codes: 0 when
the call happened (a run that changed nothing included), 1 when it could not
(the service is down, a run of the agent is in progress, a revert is refused,
a reject of a proposal already decided),
2 for bad usage (an unknown agent, proposal, run or op).

``gateway dream AGENT [--mode auto|propose]`` runs; ``status``, ``accept``,
``reject``, ``revert`` and ``explain`` followed by an agent id are the subcommands (so an
agent named ``status`` dreams with ``gateway dream status`` alone).
``explain AGENT QUERY...`` prints the history of the entries the words find
(live, stale or pruned): first seen, moved, retrieved, invalidated, restored.
``revert`` prints, after the files, what became of each shared promotion of the
reverted ops (undone, or left with the reason); it exits 0 when the files were
reverted, a note left in the vault included (the output names it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import DREAM_RUN_DEADLINE_S, sync_channel
from gateway.config import Config
from gateway.errors import CommandError
from gateway.home import read_internal_token
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc

SUBCOMMANDS = ("status", "accept", "reject", "revert", "explain")
RUN_DEADLINE_S = DREAM_RUN_DEADLINE_S  # a run waits for the reviewer (reviewerTimeoutSeconds) and a free place
CALL_DEADLINE_S = 60.0
USAGE = (
    "usage: gateway dream AGENT [--mode auto|propose] | dream status AGENT | dream accept AGENT ID... "
    "| dream reject AGENT ID... | dream revert AGENT RUN[/OP] | dream explain AGENT QUERY..."
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    dream = sub.add_parser("dream", help="run dreaming now, or: status / accept / reject / revert / explain (through the dreaming service)",
                           description=USAGE)
    dream.add_argument("words", nargs="+", metavar="AGENT | status AGENT | accept AGENT ID... | reject AGENT ID... | revert AGENT RUN[/OP] | explain AGENT QUERY...")
    dream.add_argument("--mode", choices=("auto", "propose"), help="for a run: apply (auto) or only propose")
    dream.add_argument("--home", help="gateway home")


def run(args: argparse.Namespace, home: Path, config: Config) -> int:
    words = list(args.words)
    action = words[0] if len(words) >= 2 and words[0] in SUBCOMMANDS else "run"
    rest = words[1:] if action != "run" else words
    if action == "run" and len(rest) != 1:
        raise CommandError(USAGE)
    if (action in ("status",) and len(rest) != 1 or action == "revert" and len(rest) != 2
            or action in ("accept", "reject", "explain") and len(rest) < 2):
        raise CommandError(USAGE)
    if args.mode and action != "run":
        raise CommandError("--mode is for a run: gateway dream AGENT --mode propose")
    agent_id = rest[0]
    if config.agent(agent_id) is None:
        known = ", ".join(a.id for a in config.agents) or "none"
        raise CommandError(f"no agent {agent_id!r} in {home / 'config.json'} (agents: {known})")
    metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(home)),)
    address = config.grpc.address("dreaming")
    with sync_channel(address) as channel:
        stub = dreaming_pb2_grpc.DreamingStub(channel)
        try:
            if action == "run":
                reply = stub.RunNow(dreaming_pb2.RunNowRequest(agent_id=agent_id, mode=args.mode or ""),
                                    timeout=RUN_DEADLINE_S, metadata=metadata)
                text = reply.text
            elif action == "status":
                text = stub.GetDreamStatus(dreaming_pb2.GetDreamStatusRequest(agent_id=agent_id),
                                           timeout=CALL_DEADLINE_S, metadata=metadata).text
            elif action == "accept":
                text = stub.AcceptProposals(dreaming_pb2.AcceptProposalsRequest(agent_id=agent_id, ids=rest[1:]),
                                            timeout=RUN_DEADLINE_S, metadata=metadata).text
            elif action == "reject":
                text = stub.RejectProposals(dreaming_pb2.RejectProposalsRequest(agent_id=agent_id, ids=rest[1:]),
                                            timeout=CALL_DEADLINE_S, metadata=metadata).text
            elif action == "explain":
                text = stub.ExplainEntry(dreaming_pb2.ExplainEntryRequest(agent_id=agent_id, query=" ".join(rest[1:])),
                                         timeout=CALL_DEADLINE_S, metadata=metadata).text
            else:
                run_id, _, op = rest[1].partition("/")
                text = stub.RevertDream(dreaming_pb2.RevertDreamRequest(agent_id=agent_id, run_id=run_id, op_id=op),
                                        timeout=CALL_DEADLINE_S, metadata=metadata).message
        except grpc.RpcError as err:
            code = err.code()
            detail = err.details() or code.name
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                detail = f"the dreaming service at {address} is not answering ({code.name}); is the suite running? (gateway up)"
            print(f"gateway: dream {action}: {detail}", file=sys.stderr)
            return 2 if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT) else 1
    sys.stdout.write(text)
    return 0
