from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from gateway.v1 import options_pb2 as _options_pb2
from gateway.v1 import kb_pb2 as _kb_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReflectVaultRequest(_message.Message):
    __slots__ = ("project", "mode")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    project: str
    mode: str
    def __init__(self, project: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class DecideVaultMergesRequest(_message.Message):
    __slots__ = ("project", "run_id", "accept", "reject")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    project: str
    run_id: str
    accept: _containers.RepeatedScalarFieldContainer[str]
    reject: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, project: _Optional[str] = ..., run_id: _Optional[str] = ..., accept: _Optional[_Iterable[str]] = ..., reject: _Optional[_Iterable[str]] = ...) -> None: ...

class RunNowRequest(_message.Message):
    __slots__ = ("agent_id", "mode")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    mode: str
    def __init__(self, agent_id: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class ReviewerResult(_message.Message):
    __slots__ = ("ok", "reason", "seconds", "proposals", "dropped", "summary")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    seconds: float
    proposals: int
    dropped: _containers.RepeatedScalarFieldContainer[str]
    summary: str
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ..., seconds: _Optional[float] = ..., proposals: _Optional[int] = ..., dropped: _Optional[_Iterable[str]] = ..., summary: _Optional[str] = ...) -> None: ...

class DreamOp(_message.Message):
    __slots__ = ("op_id", "proposal_id", "op", "file", "tier", "topic", "status", "reason", "target", "content", "chars_removed", "chars_inserted", "proposal_reason")
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CHARS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    CHARS_INSERTED_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_REASON_FIELD_NUMBER: _ClassVar[int]
    op_id: str
    proposal_id: str
    op: str
    file: str
    tier: str
    topic: str
    status: str
    reason: str
    target: str
    content: str
    chars_removed: int
    chars_inserted: int
    proposal_reason: str
    def __init__(self, op_id: _Optional[str] = ..., proposal_id: _Optional[str] = ..., op: _Optional[str] = ..., file: _Optional[str] = ..., tier: _Optional[str] = ..., topic: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., target: _Optional[str] = ..., content: _Optional[str] = ..., chars_removed: _Optional[int] = ..., chars_inserted: _Optional[int] = ..., proposal_reason: _Optional[str] = ...) -> None: ...

class DreamFile(_message.Message):
    __slots__ = ("file", "chars_before", "chars_after")
    FILE_FIELD_NUMBER: _ClassVar[int]
    CHARS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    CHARS_AFTER_FIELD_NUMBER: _ClassVar[int]
    file: str
    chars_before: int
    chars_after: int
    def __init__(self, file: _Optional[str] = ..., chars_before: _Optional[int] = ..., chars_after: _Optional[int] = ...) -> None: ...

class DreamReport(_message.Message):
    __slots__ = ("run_id", "agent_id", "mode", "trigger", "status", "reason", "started_at", "finished_at", "reviewer", "ops", "files", "notes", "text", "steps")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    agent_id: str
    mode: str
    trigger: str
    status: str
    reason: str
    started_at: str
    finished_at: str
    reviewer: ReviewerResult
    ops: _containers.RepeatedCompositeFieldContainer[DreamOp]
    files: _containers.RepeatedCompositeFieldContainer[DreamFile]
    notes: _containers.RepeatedScalarFieldContainer[str]
    text: str
    steps: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., mode: _Optional[str] = ..., trigger: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., started_at: _Optional[str] = ..., finished_at: _Optional[str] = ..., reviewer: _Optional[_Union[ReviewerResult, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[DreamOp, _Mapping]]] = ..., files: _Optional[_Iterable[_Union[DreamFile, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ..., text: _Optional[str] = ..., steps: _Optional[_Iterable[str]] = ...) -> None: ...

class GetDreamStatusRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class GetDreamSummariesRequest(_message.Message):
    __slots__ = ("agent_ids",)
    AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    agent_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DreamSummaries(_message.Message):
    __slots__ = ("statuses", "unknown")
    class UnknownEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedCompositeFieldContainer[DreamStatus]
    unknown: _containers.ScalarMap[str, str]
    def __init__(self, statuses: _Optional[_Iterable[_Union[DreamStatus, _Mapping]]] = ..., unknown: _Optional[_Mapping[str, str]] = ...) -> None: ...

class LastRun(_message.Message):
    __slots__ = ("run_id", "trigger", "mode", "status", "reason", "started_at", "finished_at", "ops_applied", "ops_skipped", "ops_proposed")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    OPS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    OPS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    OPS_PROPOSED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    trigger: str
    mode: str
    status: str
    reason: str
    started_at: str
    finished_at: str
    ops_applied: int
    ops_skipped: int
    ops_proposed: int
    def __init__(self, run_id: _Optional[str] = ..., trigger: _Optional[str] = ..., mode: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., started_at: _Optional[str] = ..., finished_at: _Optional[str] = ..., ops_applied: _Optional[int] = ..., ops_skipped: _Optional[int] = ..., ops_proposed: _Optional[int] = ...) -> None: ...

class RunHealth(_message.Message):
    __slots__ = ("failures_last_7_days", "last_failure_at", "last_failure_reason", "promoted", "not_promoted")
    FAILURES_LAST_7_DAYS_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_REASON_FIELD_NUMBER: _ClassVar[int]
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    NOT_PROMOTED_FIELD_NUMBER: _ClassVar[int]
    failures_last_7_days: int
    last_failure_at: str
    last_failure_reason: str
    promoted: int
    not_promoted: str
    def __init__(self, failures_last_7_days: _Optional[int] = ..., last_failure_at: _Optional[str] = ..., last_failure_reason: _Optional[str] = ..., promoted: _Optional[int] = ..., not_promoted: _Optional[str] = ...) -> None: ...

class DreamStatus(_message.Message):
    __slots__ = ("agent_id", "scheduled", "mode", "next_run_at", "last_run", "pending", "last_night", "text", "health", "running", "kept_promotions")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    LAST_NIGHT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    KEPT_PROMOTIONS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    scheduled: bool
    mode: str
    next_run_at: str
    last_run: LastRun
    pending: _containers.RepeatedCompositeFieldContainer[DreamOp]
    last_night: str
    text: str
    health: RunHealth
    running: str
    kept_promotions: int
    def __init__(self, agent_id: _Optional[str] = ..., scheduled: _Optional[bool] = ..., mode: _Optional[str] = ..., next_run_at: _Optional[str] = ..., last_run: _Optional[_Union[LastRun, _Mapping]] = ..., pending: _Optional[_Iterable[_Union[DreamOp, _Mapping]]] = ..., last_night: _Optional[str] = ..., text: _Optional[str] = ..., health: _Optional[_Union[RunHealth, _Mapping]] = ..., running: _Optional[str] = ..., kept_promotions: _Optional[int] = ...) -> None: ...

class ListDreamRunsRequest(_message.Message):
    __slots__ = ("agent_id", "page_size", "page_token")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class OpChange(_message.Message):
    __slots__ = ("file", "before", "after", "start_line", "end_line", "cut")
    FILE_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    file: str
    before: str
    after: str
    start_line: int
    end_line: int
    cut: bool
    def __init__(self, file: _Optional[str] = ..., before: _Optional[str] = ..., after: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., cut: _Optional[bool] = ...) -> None: ...

class DreamRunOp(_message.Message):
    __slots__ = ("op_id", "proposal_id", "op", "file", "tier", "topic", "status", "reason", "proposal_reason", "pending", "changes", "decided_by", "decided_at")
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_REASON_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    op_id: str
    proposal_id: str
    op: str
    file: str
    tier: str
    topic: str
    status: str
    reason: str
    proposal_reason: str
    pending: bool
    changes: _containers.RepeatedCompositeFieldContainer[OpChange]
    decided_by: str
    decided_at: str
    def __init__(self, op_id: _Optional[str] = ..., proposal_id: _Optional[str] = ..., op: _Optional[str] = ..., file: _Optional[str] = ..., tier: _Optional[str] = ..., topic: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., proposal_reason: _Optional[str] = ..., pending: _Optional[bool] = ..., changes: _Optional[_Iterable[_Union[OpChange, _Mapping]]] = ..., decided_by: _Optional[str] = ..., decided_at: _Optional[str] = ...) -> None: ...

class DreamRun(_message.Message):
    __slots__ = ("run_id", "trigger", "mode", "status", "reason", "started_at", "finished_at", "steps", "summary", "notes", "ops", "ops_total")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    OPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    trigger: str
    mode: str
    status: str
    reason: str
    started_at: str
    finished_at: str
    steps: _containers.RepeatedScalarFieldContainer[str]
    summary: str
    notes: _containers.RepeatedScalarFieldContainer[str]
    ops: _containers.RepeatedCompositeFieldContainer[DreamRunOp]
    ops_total: int
    def __init__(self, run_id: _Optional[str] = ..., trigger: _Optional[str] = ..., mode: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., started_at: _Optional[str] = ..., finished_at: _Optional[str] = ..., steps: _Optional[_Iterable[str]] = ..., summary: _Optional[str] = ..., notes: _Optional[_Iterable[str]] = ..., ops: _Optional[_Iterable[_Union[DreamRunOp, _Mapping]]] = ..., ops_total: _Optional[int] = ...) -> None: ...

class DreamRuns(_message.Message):
    __slots__ = ("agent_id", "runs", "next_page_token", "cut")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    runs: _containers.RepeatedCompositeFieldContainer[DreamRun]
    next_page_token: str
    cut: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_id: _Optional[str] = ..., runs: _Optional[_Iterable[_Union[DreamRun, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., cut: _Optional[_Iterable[str]] = ...) -> None: ...

class AcceptProposalsRequest(_message.Message):
    __slots__ = ("agent_id", "ids")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_id: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RejectProposalsRequest(_message.Message):
    __slots__ = ("agent_id", "ids")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_id: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RejectedProposal(_message.Message):
    __slots__ = ("proposal_id", "op", "file", "text", "rejected_at", "rejected_by")
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_AT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_BY_FIELD_NUMBER: _ClassVar[int]
    proposal_id: str
    op: str
    file: str
    text: str
    rejected_at: str
    rejected_by: str
    def __init__(self, proposal_id: _Optional[str] = ..., op: _Optional[str] = ..., file: _Optional[str] = ..., text: _Optional[str] = ..., rejected_at: _Optional[str] = ..., rejected_by: _Optional[str] = ...) -> None: ...

class RejectReport(_message.Message):
    __slots__ = ("agent_id", "rejected", "text")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedProposal]
    text: str
    def __init__(self, agent_id: _Optional[str] = ..., rejected: _Optional[_Iterable[_Union[RejectedProposal, _Mapping]]] = ..., text: _Optional[str] = ...) -> None: ...

class RevertDreamRequest(_message.Message):
    __slots__ = ("agent_id", "run_id", "op_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    run_id: str
    op_id: str
    def __init__(self, agent_id: _Optional[str] = ..., run_id: _Optional[str] = ..., op_id: _Optional[str] = ...) -> None: ...

class RevertReport(_message.Message):
    __slots__ = ("agent_id", "run_id", "reverted", "already", "files", "message", "vault")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REVERTED_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    VAULT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    run_id: str
    reverted: _containers.RepeatedScalarFieldContainer[str]
    already: _containers.RepeatedScalarFieldContainer[str]
    files: _containers.RepeatedCompositeFieldContainer[DreamFile]
    message: str
    vault: _containers.RepeatedCompositeFieldContainer[VaultUndo]
    def __init__(self, agent_id: _Optional[str] = ..., run_id: _Optional[str] = ..., reverted: _Optional[_Iterable[str]] = ..., already: _Optional[_Iterable[str]] = ..., files: _Optional[_Iterable[_Union[DreamFile, _Mapping]]] = ..., message: _Optional[str] = ..., vault: _Optional[_Iterable[_Union[VaultUndo, _Mapping]]] = ...) -> None: ...

class VaultUndo(_message.Message):
    __slots__ = ("op_id", "note", "project", "outcome", "reason", "deleted")
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    op_id: str
    note: str
    project: str
    outcome: str
    reason: str
    deleted: bool
    def __init__(self, op_id: _Optional[str] = ..., note: _Optional[str] = ..., project: _Optional[str] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class ExplainEntryRequest(_message.Message):
    __slots__ = ("agent_id", "query", "limit")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    query: str
    limit: int
    def __init__(self, agent_id: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class EntryPlace(_message.Message):
    __slots__ = ("path", "start_line", "end_line", "state")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    end_line: int
    state: str
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., state: _Optional[str] = ...) -> None: ...

class EntryEvent(_message.Message):
    __slots__ = ("at", "kind", "detail", "run_id", "op_id", "file", "to_file")
    AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    TO_FILE_FIELD_NUMBER: _ClassVar[int]
    at: str
    kind: str
    detail: str
    run_id: str
    op_id: str
    file: str
    to_file: str
    def __init__(self, at: _Optional[str] = ..., kind: _Optional[str] = ..., detail: _Optional[str] = ..., run_id: _Optional[str] = ..., op_id: _Optional[str] = ..., file: _Optional[str] = ..., to_file: _Optional[str] = ...) -> None: ...

class ExplainedEntry(_message.Message):
    __slots__ = ("entry_hash", "text", "places", "first_seen", "first_path", "retrieval_count", "last_retrieved", "invalid_at", "restored_at", "supersedes_key", "events")
    ENTRY_HASH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PLACES_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_FIELD_NUMBER: _ClassVar[int]
    FIRST_PATH_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_RETRIEVED_FIELD_NUMBER: _ClassVar[int]
    INVALID_AT_FIELD_NUMBER: _ClassVar[int]
    RESTORED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_KEY_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    entry_hash: str
    text: str
    places: _containers.RepeatedCompositeFieldContainer[EntryPlace]
    first_seen: str
    first_path: str
    retrieval_count: int
    last_retrieved: str
    invalid_at: str
    restored_at: str
    supersedes_key: str
    events: _containers.RepeatedCompositeFieldContainer[EntryEvent]
    def __init__(self, entry_hash: _Optional[str] = ..., text: _Optional[str] = ..., places: _Optional[_Iterable[_Union[EntryPlace, _Mapping]]] = ..., first_seen: _Optional[str] = ..., first_path: _Optional[str] = ..., retrieval_count: _Optional[int] = ..., last_retrieved: _Optional[str] = ..., invalid_at: _Optional[str] = ..., restored_at: _Optional[str] = ..., supersedes_key: _Optional[str] = ..., events: _Optional[_Iterable[_Union[EntryEvent, _Mapping]]] = ...) -> None: ...

class EntryExplanation(_message.Message):
    __slots__ = ("agent_id", "query", "entries", "text")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    query: str
    entries: _containers.RepeatedCompositeFieldContainer[ExplainedEntry]
    text: str
    def __init__(self, agent_id: _Optional[str] = ..., query: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[ExplainedEntry, _Mapping]]] = ..., text: _Optional[str] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("agent_id", "text", "pattern", "shared", "apply")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    APPLY_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    text: str
    pattern: str
    shared: bool
    apply: bool
    def __init__(self, agent_id: _Optional[str] = ..., text: _Optional[str] = ..., pattern: _Optional[str] = ..., shared: _Optional[bool] = ..., apply: _Optional[bool] = ...) -> None: ...

class ForgetReportPlace(_message.Message):
    __slots__ = ("store", "path", "kind", "count", "lines", "changed", "left")
    STORE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    store: str
    path: str
    kind: str
    count: int
    lines: _containers.RepeatedScalarFieldContainer[int]
    changed: bool
    left: str
    def __init__(self, store: _Optional[str] = ..., path: _Optional[str] = ..., kind: _Optional[str] = ..., count: _Optional[int] = ..., lines: _Optional[_Iterable[int]] = ..., changed: _Optional[bool] = ..., left: _Optional[str] = ...) -> None: ...

class ForgetPurge(_message.Message):
    __slots__ = ("store", "bytes_before", "bytes_after", "seconds")
    STORE_FIELD_NUMBER: _ClassVar[int]
    BYTES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    BYTES_AFTER_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    store: str
    bytes_before: int
    bytes_after: int
    seconds: float
    def __init__(self, store: _Optional[str] = ..., bytes_before: _Optional[int] = ..., bytes_after: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class ForgetReport(_message.Message):
    __slots__ = ("agent_id", "applied", "shared", "tombstone_id", "places", "purges", "changed", "matches", "tombstones", "text")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_ID_FIELD_NUMBER: _ClassVar[int]
    PLACES_FIELD_NUMBER: _ClassVar[int]
    PURGES_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    applied: bool
    shared: bool
    tombstone_id: str
    places: _containers.RepeatedCompositeFieldContainer[ForgetReportPlace]
    purges: _containers.RepeatedCompositeFieldContainer[ForgetPurge]
    changed: int
    matches: int
    tombstones: int
    text: str
    def __init__(self, agent_id: _Optional[str] = ..., applied: _Optional[bool] = ..., shared: _Optional[bool] = ..., tombstone_id: _Optional[str] = ..., places: _Optional[_Iterable[_Union[ForgetReportPlace, _Mapping]]] = ..., purges: _Optional[_Iterable[_Union[ForgetPurge, _Mapping]]] = ..., changed: _Optional[int] = ..., matches: _Optional[int] = ..., tombstones: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class ListTombstonesRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class LiftTombstoneRequest(_message.Message):
    __slots__ = ("agent_id", "tombstone_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    tombstone_id: str
    def __init__(self, agent_id: _Optional[str] = ..., tombstone_id: _Optional[str] = ...) -> None: ...

class TombstoneInfo(_message.Message):
    __slots__ = ("tombstone_id", "scope", "words", "at", "by", "places")
    TOMBSTONE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    WORDS_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    PLACES_FIELD_NUMBER: _ClassVar[int]
    tombstone_id: str
    scope: str
    words: int
    at: str
    by: str
    places: int
    def __init__(self, tombstone_id: _Optional[str] = ..., scope: _Optional[str] = ..., words: _Optional[int] = ..., at: _Optional[str] = ..., by: _Optional[str] = ..., places: _Optional[int] = ...) -> None: ...

class TombstoneList(_message.Message):
    __slots__ = ("agent_id", "tombstones", "text")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    tombstones: _containers.RepeatedCompositeFieldContainer[TombstoneInfo]
    text: str
    def __init__(self, agent_id: _Optional[str] = ..., tombstones: _Optional[_Iterable[_Union[TombstoneInfo, _Mapping]]] = ..., text: _Optional[str] = ...) -> None: ...
