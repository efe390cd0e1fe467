"""``gateway vault reflect``, ``revert``, ``reflections``, ``accept`` and ``reject``: the shared vault's weekly
reflection run now, undone, listed, and its proposals decided (docs/concepts/vault.md "Schedule and commands").

Each is one call to the dreaming service over gRPC with the home's internal token, and prints a short
report. Exit codes: 0 when the call happened (a noop run, and a revert that left a changed note, included);
1 when it could not (the service or the KB is down, a run of the vault is in progress); 2 for bad usage
(a project with no vault, an unknown run or cluster).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import DREAM_RUN_DEADLINE_S, sync_channel
from gateway.config import load_config
from gateway.home import read_internal_token
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, kb_pb2

ACTIONS = ("reflect", "revert", "reflections", "accept", "reject")
RUN_DEADLINE_S = DREAM_RUN_DEADLINE_S  # a run asks the reviewer once per cluster (maxClustersPerRun of them)
CALL_DEADLINE_S = 60.0


def add_parsers(actions: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:  # type: ignore[type-arg]
    reflect = actions.add_parser("reflect", help="run the vault's weekly reflection now: one reviewer call per cluster "
                                 "of notes that belong together, merged (auto) or proposed (propose) under the merge guards")
    reflect.add_argument("--mode", choices=("auto", "propose"),
                         help="auto merges, propose only records the merges (default: knowledge.shared.reflection.mode)")
    revert = actions.add_parser("revert", help="undo a reflection run's merges: the notes and their names put back exactly")
    which = revert.add_mutually_exclusive_group(required=True)
    which.add_argument("run", nargs="?", metavar="RUN", help="the run (R-…, from gateway vault reflections)")
    which.add_argument("--last", action="store_true", help="the last run that merged anything")
    listing = actions.add_parser("reflections", help="the vault's reflection runs, newest first, with their proposals")
    listing.add_argument("--limit", type=int, default=10, help="runs shown (at most 200; default 10)")
    accept = actions.add_parser("accept", help="merge proposals of a propose run (every guard checked again)")
    reject = actions.add_parser("reject", help="reject proposals of a propose run (nothing is written to the notes)")
    for parser in (accept, reject):
        parser.add_argument("run", metavar="RUN", help="the propose run (R-…)")
        parser.add_argument("clusters", nargs="+", metavar="CLUSTER", help="cluster ids (C-…) of its proposals")
    for parser in (reflect, revert, listing, accept, reject):
        parser.add_argument("--project", required=True, help="the vault's project (gateway.knowledge.shared.project)")
        parser.add_argument("--home", help="gateway home")
    return [reflect, revert, listing, accept, reject]


def _when(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "-"


def run_text(run: kb_pb2.VaultReflectionRun) -> str:
    """A run as the CLI prints it: its status, the count of each outcome, then one line per cluster."""
    head = f"vault reflection {run.run_id} of project {run.project} ({run.mode}, {run.trigger}): {run.status}"
    lines = [head + (f" ({run.reason})" if run.reason else "")]
    if run.reverted_at:
        lines.append(f"  reverted {_when(run.reverted_at)}")
    counts: dict[str, int] = {}
    for c in run.clusters:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    if run.clusters or run.remaining:
        shown = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "none"
        wait = f"; {run.remaining} wait for the next run" if run.remaining else ""
        lines.append(f"  clusters: {len(run.clusters)} ({shown}){wait}")
    for c in run.clusters:
        merge = f" -> {c.merge_id}" if c.merge_id else ""
        lines.append(f"  {c.outcome:<8} {c.cluster_id}  {', '.join(c.notes)}{merge}" + (f": {c.reason}" if c.reason else ""))
    for p in run.proposals:
        lines.append(f"  proposal {p.cluster_id} ({p.state}): {', '.join(p.replaces)} -> {p.name!r}")
    pending = [p.cluster_id for p in run.proposals if p.state == "pending"]
    if pending:
        lines.append(f"  accept with: gateway vault accept --project {run.project} {run.run_id} {' '.join(pending)}")
    return "\n".join(lines) + "\n"


def revert_text(project: str, reply: kb_pb2.RevertVaultReflectionResponse) -> str:
    lines = [f"reverted reflection run {reply.run_id} of project {project}: {len(reply.restored)} notes put back"]
    lines += [f"  restored {name}" for name in reply.restored]
    lines += [f"  left     {line}" for line in reply.left]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, home: Path) -> int:
    config = load_config(home)
    metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(home)),)
    address = config.grpc.address("dreaming")
    project = args.project
    with sync_channel(address) as channel:
        stub = dreaming_pb2_grpc.DreamingStub(channel)
        try:
            if args.action == "reflect":
                text = run_text(stub.ReflectVault(dreaming_pb2.ReflectVaultRequest(project=project, mode=args.mode or ""),
                                                  timeout=RUN_DEADLINE_S, metadata=metadata))
            elif args.action == "revert":
                request = kb_pb2.RevertVaultReflectionRequest(project=project, run_id=args.run or "", last=args.last)
                text = revert_text(project, stub.UndoVaultReflection(request, timeout=RUN_DEADLINE_S, metadata=metadata))
            elif args.action == "reflections":
                reply = stub.GetVaultReflections(kb_pb2.ListVaultReflectionsRequest(project=project, limit=args.limit),
                                                 timeout=CALL_DEADLINE_S, metadata=metadata)
                text = "".join(run_text(r) for r in reply.runs) or f"no reflection run of project {project} yet\n"
            else:
                ids = list(args.clusters)
                request = dreaming_pb2.DecideVaultMergesRequest(
                    project=project, run_id=args.run, accept=ids if args.action == "accept" else [],
                    reject=ids if args.action == "reject" else [])
                text = run_text(stub.DecideVaultMerges(request, timeout=RUN_DEADLINE_S, metadata=metadata))
        except grpc.RpcError as err:
            code = err.code()
            detail = err.details() or code.name
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and not detail.startswith("the "):
                detail = f"the dreaming service at {address} is not answering ({code.name}); is the suite running? (gateway up)"
            print(f"gateway: vault {args.action}: {detail}", file=sys.stderr)
            bad_usage = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)
            return 2 if code in bad_usage else 1
    sys.stdout.write(text)
    return 0
