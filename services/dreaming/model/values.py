"""The values dreaming passes between its steps (reviewer → selection → applier → audit).

Plain frozen dataclasses, no I/O: the reviewer's validated proposals, what
became of each op, and what a run did. docs/concepts/reviewer.md "The reviewer" and its
reviewer protocol (docs/concepts/reviewer.md "The reviewer") define the fields.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gateway.promotion_write import PromotionWrite

MEMORY_FILE = "MEMORY.md"
USER_FILE = "USER.md"
MEMORY_FILES = (MEMORY_FILE, USER_FILE)

OPS = ("add", "replace", "remove")
DURABLE = "durable"
EPISODIC = "episodic"
TOPIC_PATTERN = r"^[a-z0-9-]{1,64}$"
FIELD_CAP = 4000  # chars of any free-text field of a proposal (the reviewer protocol)

# Run triggers, modes, and the status of a run its caller or its process left before the end.
SCHEDULE = "schedule"
MANUAL = "manual"
ACCEPT = "accept"
AUTO = "auto"
PROPOSE = "propose"
INTERRUPTED = "interrupted"
FAILED = "failed"


def new_run_id(now: datetime) -> str:
    """A run id that sorts by start time: ``20240310T030412Z-1a2b3c``."""
    return f"{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def iso(moment: datetime) -> str:
    """``moment`` as the audit and the journal write it: UTC, to the second, with a ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Proposal:
    """One op the reviewer proposed, already validated.

    ``file`` is MEMORY.md or USER.md for the durable tier and ``""`` for an
    episodic add (it goes to ``<episodicArchiveDir>/<topic>.md``). ``target``
    is the anchor of a replace or remove (an add may name one: it is inserted
    after the anchor's line). ``topic`` is a kebab slug: required for an
    episodic add, optional for a durable op (it names the fact).
    """

    op: str
    file: str = ""
    target: str = ""
    content: str = ""
    reason: str = ""
    score: float = 0.0
    recall_count: int = 0
    topic: str = ""
    tier: str = DURABLE

    @property
    def id(self) -> str:
        """A stable id: the same op proposed again (another night, another run) has the same id."""
        canonical = json.dumps(
            [self.tier, self.op, self.file, self.target, self.content, self.topic], ensure_ascii=False, separators=(",", ":")
        )
        return "p-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]

    @property
    def shrinks(self) -> bool:
        """A remove, or a replace whose new text is shorter than its anchor: net-shrink ops."""
        return self.op == "remove" or (self.op == "replace" and len(self.content) < len(self.target))

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id, "op": self.op, "file": self.file, "target": self.target, "content": self.content,
            "reason": self.reason, "score": self.score, "recallCount": self.recall_count, "topic": self.topic,
            "tier": self.tier,
        }


@dataclass(frozen=True)
class ReviewerReply:
    """What the reviewer said: a one-line summary and the proposals that passed validation.
    ``dropped`` has one line per malformed proposal (why it was dropped)."""

    summary: str = ""
    proposals: tuple[Proposal, ...] = ()
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReviewerOutcome:
    """One reviewer call. ``ok`` false: zero proposals, and ``reason`` says why (exit code,
    timeout, no JSON, output too large…). The run goes on either way."""

    reply: ReviewerReply
    ok: bool
    reason: str = ""
    seconds: float = 0.0
    stdout_bytes: int = 0


@dataclass(frozen=True)
class OpResult:
    """What became of one proposal in a run: ``applied``, ``skipped`` (with ``reason``),
    ``proposed`` (propose mode) or ``restored`` (applied, then undone by the recall check)."""

    op_id: str  # "<run>/<n>", n from 1 in proposal order
    proposal: Proposal
    status: str
    reason: str = ""
    file: str = ""  # the file written (MEMORY.md, USER.md, memory/<topic>.md)
    chars_removed: int = 0
    chars_inserted: int = 0


@dataclass(frozen=True)
class VaultUndo:
    """What a revert did about one op's shared promotion: ``outcome`` undone, gone (the note no
    longer existed) or left (not changed; ``reason`` says why and what to do)."""

    op_id: str
    note: str
    project: str
    outcome: str
    reason: str
    deleted: bool = False


@dataclass(frozen=True)
class Promotion:
    """What became of one applied durable add offered to the shared vault (``vault/promotion.py``).

    ``outcome``: the KB's created, merged, updated, unchanged or declined, or
    ``skipped`` (the add carried no fact and was never sent), ``pending`` (kept
    on the host to retry) or ``dropped`` (kept, then its op was reverted). ``note``: the
    shared note that holds the fact now ("" when none). ``reason``: why.
    ``write``: what the promotion wrote (None when it wrote nothing). ``retry_of``:
    the run that kept it, for a kept promotion a later run retried ("" otherwise)."""

    op_id: str
    proposal_id: str
    outcome: str
    note: str
    reason: str
    name_from: str = ""
    passed_over: str = ""
    linked: tuple[str, ...] = ()
    folded: bool = False
    twin_kept: bool = False
    write: PromotionWrite | None = None
    retry_of: str = ""


@dataclass(frozen=True)
class FileChange:
    file: str
    chars_before: int
    chars_after: int


@dataclass(frozen=True)
class RunReport:
    """The outcome of one dreaming run, as audited and as returned by RunNow."""

    run_id: str
    agent_id: str
    mode: str
    trigger: str
    status: str  # applied | proposed | nothing | skipped | failed | interrupted (audit only: cancelled mid-run)
    reason: str = ""
    started_at: str = ""
    finished_at: str = ""
    summary: str = ""
    reviewer: ReviewerOutcome | None = None
    ops: tuple[OpResult, ...] = ()
    files: tuple[FileChange, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)  # other facts worth auditing (recall, CAS aborts)
    steps: tuple[str, ...] = ()  # the steps of the nightly order this run went through, in order
    promotions: tuple[Promotion, ...] = ()  # step 9: the applied durable adds offered to the shared vault
    not_promoted: str = ""  # why nothing landed in the shared vault ("" when something did)
