"""The vault's weekly reflection as the Dreaming service offers it (docs/concepts/vault.md "Schedule and commands"):
the check of a request's project, mode and ids, the run now or on the schedule, the runs with their
proposals, accept or reject, and revert; each through the KB (``reflect.run.VaultPeer``) and the
reviewer command."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from gateway.config import Config
from gateway.errors import FailedPrecondition, InvalidArgument, Unavailable, shown
from gateway.v1 import kb_pb2
from services.dreaming.model.values import AUTO, MANUAL, PROPOSE, SCHEDULE, new_run_id
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.reflect import run as reflect_run
from services.dreaming.reflect.run import Ask, VaultPeer
from services.dreaming.reflect.vaults import Vault, is_project, vaults

RUN_ID = re.compile(r"^R-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4,8}$")
CLUSTER_ID = re.compile(r"^C-[0-9a-f]{12}$")
MAX_IDS = 100
MAX_RUNS = 200


def check_project(project: str) -> str:
    if not project:
        raise InvalidArgument("project is required: the vault's project (knowledge.shared.project)")
    if not is_project(project):
        raise InvalidArgument(f"project: {shown(project)} is not a project name (1-64 letters, digits, '.', '_' or '-')")
    return project


def check_mode(mode: str) -> str:
    if mode not in ("", AUTO, PROPOSE):
        raise InvalidArgument(f"mode: {shown(mode)} is not a mode; accepted: auto, propose (or empty for the configured mode)")
    return mode


def check_run_id(run_id: str, field: str = "run_id") -> str:
    if not run_id:
        raise InvalidArgument(f"{field} is required: the reflection run (R-…, from gateway vault reflections)")
    if not RUN_ID.fullmatch(run_id):
        raise InvalidArgument(f"{field}: {shown(run_id)} is not a reflection run id (like R-20261206T040000Z-1a2b3c)")
    return run_id


def check_clusters(accept: Sequence[str], reject: Sequence[str]) -> tuple[list[str], list[str]]:
    if not accept and not reject:
        raise InvalidArgument("accept or reject is required: the cluster ids (C-…) of the run's proposals")
    if len(accept) + len(reject) > MAX_IDS:
        raise InvalidArgument(f"accept and reject: {len(accept) + len(reject)} ids; at most {MAX_IDS} in one call")
    bad = [c for c in (*accept, *reject) if not CLUSTER_ID.fullmatch(c)]
    if bad:
        raise InvalidArgument(f"{shown(bad[0])} is not a cluster id (C- and 12 hex digits)")
    both = sorted(set(accept) & set(reject))
    if both:
        raise InvalidArgument(f"cluster {both[0]} is both accepted and rejected")
    return list(dict.fromkeys(accept)), list(dict.fromkeys(reject))


def vault_of(config: Config, project: str) -> Vault:
    """The vault of ``project``. Raises InvalidArgument for a malformed name, FailedPrecondition when
    no agent has the shared KB on for it."""
    found = vaults(config).get(check_project(project))
    if found is None:
        raise FailedPrecondition(f"no agent has the shared KB on for project {project!r} "
                                 "(knowledge.shared.enabled and knowledge.shared.project): it has no vault here")
    return found


def run_id_now(now: datetime) -> str:
    return "R-" + new_run_id(now)


class Reflections:
    """The reflection calls of one dreaming process: ``peer`` is the KB, ``ask`` the reviewer."""

    def __init__(self, peer: VaultPeer, ask: Ask, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._peer = peer
        self._ask = ask
        self._now = now

    async def run(self, vault: Vault, mode: str = "", trigger: str = MANUAL) -> kb_pb2.VaultReflectionRun:
        """Run the vault's reflection now. Raises Aborted when busy, Unavailable when the KB cannot answer."""
        now = self._now()
        try:
            return await reflect_run.reflect(vault, self._peer, self._ask, mode=mode or vault.settings.mode,
                                             trigger=trigger, run_id=run_id_now(now), started_at=now.timestamp())
        except PeerUnavailable as exc:
            raise Unavailable(f"the vault's reflection needs the KB: {exc}") from None

    async def scheduled(self, vault: Vault) -> kb_pb2.VaultReflectionRun:
        """The weekly run (``reflect.scheduler``)."""
        return await self.run(vault, trigger=SCHEDULE)

    async def runs(self, vault: Vault, limit: int) -> kb_pb2.ListVaultReflectionsResponse:
        """The vault's runs, newest first, each proposal's state as its latest decision left it."""
        if limit < 0 or limit > MAX_RUNS:
            raise InvalidArgument(f"limit: {limit} is out of range; 1 to {MAX_RUNS}, or 0 for 20")
        try:
            reply = await self._peer.list_reflections(vault.project, limit)
        except PeerUnavailable as exc:
            raise Unavailable(f"the vault's reflection runs need the KB: {exc}") from None
        return kb_pb2.ListVaultReflectionsResponse(runs=reflect_run.with_decisions(list(reply.runs)))

    async def decide(self, vault: Vault, run_id: str, accept: Sequence[str], reject: Sequence[str]) -> kb_pb2.VaultReflectionRun:
        """Accept or reject pending proposals of ``run_id``. Raises NotFound, Aborted, Unavailable."""
        target = check_run_id(run_id)
        accept, reject = check_clusters(accept, reject)
        now = self._now()
        try:
            history = await self._peer.list_reflections(vault.project, MAX_RUNS)
            return await reflect_run.decide(vault, self._peer, target=target, accept=accept, reject=reject,
                                            run_id=run_id_now(now), started_at=now.timestamp(), history=list(history.runs))
        except PeerUnavailable as exc:
            raise Unavailable(f"deciding on proposals needs the KB: {exc}") from None

    async def undo(self, vault: Vault, run_id: str, last: bool) -> kb_pb2.RevertVaultReflectionResponse:
        """Undo one run's merges, or the last run's that merged anything."""
        if last == bool(run_id):
            raise InvalidArgument("give exactly one of run_id (runId) and last")
        if run_id:
            check_run_id(run_id)
        try:
            return await self._peer.revert_reflection(
                kb_pb2.RevertVaultReflectionRequest(project=vault.project, run_id=run_id, last=last))
        except PeerUnavailable as exc:
            raise Unavailable(f"a revert needs the KB: {exc}") from None
