"""``gateway forget …``: forget a text or a pattern everywhere an agent's memory keeps it, and its tombstones.

``gateway forget AGENT (--text T | --pattern RE) [--shared] [--dry-run]`` applies unless ``--dry-run``
(the REST call is the other way round: a dry run unless ``apply``), and prints the report: per store
and place a path, a count and line numbers, never the text. ``--text -`` reads the text from stdin,
so a secret need not sit in the shell's history or the process list. ``gateway forget AGENT --list``
prints the agent's tombstones (and the shared ones); ``gateway forget AGENT --lift ID`` lifts one.

Each is one call to the dreaming service over gRPC with the home's internal token (its key name in the
audit is ``internal``). Exit codes, as ``gateway dream``'s: 0 when the call happened, 1 when it could
not (the service is down, a run of the agent is in progress, the KB could not do its part: run the same
forget again), 2 for bad usage (an unknown agent, a bad text or pattern, an unknown tombstone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import DEFAULT_DEADLINE_S, FORGET_DEADLINE_S, sync_channel
from gateway.config import Config
from gateway.errors import CommandError
from gateway.home import read_internal_token
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc

USAGE = ("usage: gateway forget AGENT (--text T | --text - | --pattern RE) [--shared] [--dry-run] "
         "| forget AGENT --list | forget AGENT --lift ID")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    forget = sub.add_parser("forget", help="forget a text or pattern everywhere the agent's memory keeps it (or: --list, --lift ID)",
                            description=USAGE)
    forget.add_argument("agent", help="agent id")
    what = forget.add_mutually_exclusive_group(required=True)
    what.add_argument("--text", help="the text: its words in order, any case, any whitespace ('-': read it from stdin)")
    what.add_argument("--pattern", help="a Python regular expression")
    what.add_argument("--list", action="store_true", help="list the agent's tombstones (and the shared ones)")
    what.add_argument("--lift", metavar="ID", help="lift a tombstone (F-…): its text may come back")
    forget.add_argument("--shared", action="store_true", help="also the shared vault's notes, records and index")
    forget.add_argument("--dry-run", action="store_true", help="only report where it is; change nothing")
    forget.add_argument("--home", help="gateway home")


def _text(value: str | None) -> str | None:
    if value != "-":
        return value
    text = sys.stdin.read()
    return text[:-1] if text.endswith("\n") else text


def run(args: argparse.Namespace, home: Path, config: Config) -> int:
    if (args.list or args.lift) and (args.shared or args.dry_run):
        raise CommandError("--shared and --dry-run are for a forget: " + USAGE)
    agent_id = args.agent
    if config.agent(agent_id) is None:
        known = ", ".join(a.id for a in config.agents) or "none"
        raise CommandError(f"no agent {agent_id!r} in {home / 'config.json'} (agents: {known})")
    metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(home)),)
    address = config.grpc.address("dreaming")
    action = "list" if args.list else "lift" if args.lift else "forget"
    with sync_channel(address) as channel:
        stub = dreaming_pb2_grpc.DreamingStub(channel)
        try:
            if args.list:
                text = stub.ListTombstones(dreaming_pb2.ListTombstonesRequest(agent_id=agent_id),
                                           timeout=DEFAULT_DEADLINE_S, metadata=metadata).text
            elif args.lift:
                text = stub.LiftTombstone(dreaming_pb2.LiftTombstoneRequest(agent_id=agent_id, tombstone_id=args.lift),
                                          timeout=DEFAULT_DEADLINE_S, metadata=metadata).text
            else:
                request = dreaming_pb2.ForgetRequest(agent_id=agent_id, text=_text(args.text) or "",
                                                     pattern=args.pattern or "", shared=args.shared, apply=not args.dry_run)
                text = stub.Forget(request, timeout=FORGET_DEADLINE_S, metadata=metadata).text
        except grpc.RpcError as err:
            code = err.code()
            detail = err.details() or code.name
            if code == grpc.StatusCode.DEADLINE_EXCEEDED or code == grpc.StatusCode.UNAVAILABLE and not detail.startswith("the KB"):
                detail = f"the dreaming service at {address} is not answering ({code.name}); is the suite running? (gateway up)"
            print(f"gateway: forget {action}: {detail}", file=sys.stderr)
            return 2 if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT) else 1
    sys.stdout.write(text)
    return 0
