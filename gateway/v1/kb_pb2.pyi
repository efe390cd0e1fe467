from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from gateway.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VaultGcOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VAULT_GC_OUTCOME_UNSPECIFIED: _ClassVar[VaultGcOutcome]
    VAULT_GC_OUTCOME_RAN: _ClassVar[VaultGcOutcome]
    VAULT_GC_OUTCOME_ALREADY_RAN: _ClassVar[VaultGcOutcome]
    VAULT_GC_OUTCOME_DISABLED: _ClassVar[VaultGcOutcome]

class MergeOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MERGE_OUTCOME_UNSPECIFIED: _ClassVar[MergeOutcome]
    MERGE_OUTCOME_MERGED: _ClassVar[MergeOutcome]
    MERGE_OUTCOME_REFUSED: _ClassVar[MergeOutcome]
    MERGE_OUTCOME_CHANGED: _ClassVar[MergeOutcome]
VAULT_GC_OUTCOME_UNSPECIFIED: VaultGcOutcome
VAULT_GC_OUTCOME_RAN: VaultGcOutcome
VAULT_GC_OUTCOME_ALREADY_RAN: VaultGcOutcome
VAULT_GC_OUTCOME_DISABLED: VaultGcOutcome
MERGE_OUTCOME_UNSPECIFIED: MergeOutcome
MERGE_OUTCOME_MERGED: MergeOutcome
MERGE_OUTCOME_REFUSED: MergeOutcome
MERGE_OUTCOME_CHANGED: MergeOutcome

class ListSharedNotesRequest(_message.Message):
    __slots__ = ("agent_id", "page_size", "page_token", "include_retired")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_RETIRED_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    include_retired: bool
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_retired: _Optional[bool] = ...) -> None: ...

class NoteWrite(_message.Message):
    __slots__ = ("agent_id", "key", "run_id", "at")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    key: str
    run_id: str
    at: float
    def __init__(self, agent_id: _Optional[str] = ..., key: _Optional[str] = ..., run_id: _Optional[str] = ..., at: _Optional[float] = ...) -> None: ...

class SharedNoteInfo(_message.Message):
    __slots__ = ("name", "title", "created", "changed", "updated_at", "size_bytes", "retired", "provenance", "retired_at", "retired_reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    RETIRED_AT_FIELD_NUMBER: _ClassVar[int]
    RETIRED_REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    title: str
    created: NoteWrite
    changed: NoteWrite
    updated_at: float
    size_bytes: int
    retired: bool
    provenance: str
    retired_at: float
    retired_reason: str
    def __init__(self, name: _Optional[str] = ..., title: _Optional[str] = ..., created: _Optional[_Union[NoteWrite, _Mapping]] = ..., changed: _Optional[_Union[NoteWrite, _Mapping]] = ..., updated_at: _Optional[float] = ..., size_bytes: _Optional[int] = ..., retired: _Optional[bool] = ..., provenance: _Optional[str] = ..., retired_at: _Optional[float] = ..., retired_reason: _Optional[str] = ...) -> None: ...

class ListSharedNotesResponse(_message.Message):
    __slots__ = ("notes", "next_page_token", "total", "project")
    NOTES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    notes: _containers.RepeatedCompositeFieldContainer[SharedNoteInfo]
    next_page_token: str
    total: int
    project: str
    def __init__(self, notes: _Optional[_Iterable[_Union[SharedNoteInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., project: _Optional[str] = ...) -> None: ...

class GetVaultGraphRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class VaultGraphNode(_message.Message):
    __slots__ = ("name", "title", "retired", "missing")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    name: str
    title: str
    retired: bool
    missing: bool
    def __init__(self, name: _Optional[str] = ..., title: _Optional[str] = ..., retired: _Optional[bool] = ..., missing: _Optional[bool] = ...) -> None: ...

class VaultGraphEdge(_message.Message):
    __slots__ = ("from_name", "to_name")
    FROM_NAME_FIELD_NUMBER: _ClassVar[int]
    TO_NAME_FIELD_NUMBER: _ClassVar[int]
    from_name: str
    to_name: str
    def __init__(self, from_name: _Optional[str] = ..., to_name: _Optional[str] = ...) -> None: ...

class VaultFinding(_message.Message):
    __slots__ = ("notes", "text")
    NOTES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    notes: _containers.RepeatedScalarFieldContainer[str]
    text: str
    def __init__(self, notes: _Optional[_Iterable[str]] = ..., text: _Optional[str] = ...) -> None: ...

class VaultGraph(_message.Message):
    __slots__ = ("nodes", "edges", "contradictions", "stale", "dangling", "low_confidence", "problems", "total_nodes", "total_edges", "truncated", "message")
    NODES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTIONS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    DANGLING_FIELD_NUMBER: _ClassVar[int]
    LOW_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NODES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_EDGES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[VaultGraphNode]
    edges: _containers.RepeatedCompositeFieldContainer[VaultGraphEdge]
    contradictions: _containers.RepeatedCompositeFieldContainer[VaultFinding]
    stale: _containers.RepeatedCompositeFieldContainer[VaultFinding]
    dangling: _containers.RepeatedCompositeFieldContainer[VaultFinding]
    low_confidence: _containers.RepeatedCompositeFieldContainer[VaultFinding]
    problems: _containers.RepeatedCompositeFieldContainer[VaultFinding]
    total_nodes: int
    total_edges: int
    truncated: bool
    message: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[VaultGraphNode, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[VaultGraphEdge, _Mapping]]] = ..., contradictions: _Optional[_Iterable[_Union[VaultFinding, _Mapping]]] = ..., stale: _Optional[_Iterable[_Union[VaultFinding, _Mapping]]] = ..., dangling: _Optional[_Iterable[_Union[VaultFinding, _Mapping]]] = ..., low_confidence: _Optional[_Iterable[_Union[VaultFinding, _Mapping]]] = ..., problems: _Optional[_Iterable[_Union[VaultFinding, _Mapping]]] = ..., total_nodes: _Optional[int] = ..., total_edges: _Optional[int] = ..., truncated: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class CollectVaultRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class CollectVaultResponse(_message.Message):
    __slots__ = ("outcome", "project", "day", "ran_for", "stale_days", "max_retirements_per_run", "folded", "retired", "restored", "kept", "waiting", "skipped", "skipped_count", "message")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    DAY_FIELD_NUMBER: _ClassVar[int]
    RAN_FOR_FIELD_NUMBER: _ClassVar[int]
    STALE_DAYS_FIELD_NUMBER: _ClassVar[int]
    MAX_RETIREMENTS_PER_RUN_FIELD_NUMBER: _ClassVar[int]
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    RESTORED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    outcome: VaultGcOutcome
    project: str
    day: str
    ran_for: str
    stale_days: int
    max_retirements_per_run: int
    folded: int
    retired: _containers.RepeatedScalarFieldContainer[str]
    restored: _containers.RepeatedScalarFieldContainer[str]
    kept: _containers.RepeatedScalarFieldContainer[str]
    waiting: int
    skipped: _containers.RepeatedScalarFieldContainer[str]
    skipped_count: int
    message: str
    def __init__(self, outcome: _Optional[_Union[VaultGcOutcome, str]] = ..., project: _Optional[str] = ..., day: _Optional[str] = ..., ran_for: _Optional[str] = ..., stale_days: _Optional[int] = ..., max_retirements_per_run: _Optional[int] = ..., folded: _Optional[int] = ..., retired: _Optional[_Iterable[str]] = ..., restored: _Optional[_Iterable[str]] = ..., kept: _Optional[_Iterable[str]] = ..., waiting: _Optional[int] = ..., skipped: _Optional[_Iterable[str]] = ..., skipped_count: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class RelatedNote(_message.Message):
    __slots__ = ("name", "snippet", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    snippet: str
    score: float
    def __init__(self, name: _Optional[str] = ..., snippet: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class CreateSharedNoteRequest(_message.Message):
    __slots__ = ("agent_id", "name", "content", "confirm")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    content: str
    confirm: bool
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ..., content: _Optional[str] = ..., confirm: _Optional[bool] = ...) -> None: ...

class CreateSharedNoteResponse(_message.Message):
    __slots__ = ("name", "created", "related", "linked", "folded", "message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RELATED_FIELD_NUMBER: _ClassVar[int]
    LINKED_FIELD_NUMBER: _ClassVar[int]
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    created: bool
    related: _containers.RepeatedCompositeFieldContainer[RelatedNote]
    linked: _containers.RepeatedScalarFieldContainer[str]
    folded: bool
    message: str
    def __init__(self, name: _Optional[str] = ..., created: _Optional[bool] = ..., related: _Optional[_Iterable[_Union[RelatedNote, _Mapping]]] = ..., linked: _Optional[_Iterable[str]] = ..., folded: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class GetSharedNoteRequest(_message.Message):
    __slots__ = ("agent_id", "name")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SharedNote(_message.Message):
    __slots__ = ("name", "content", "size_bytes", "retired")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    name: str
    content: str
    size_bytes: int
    retired: bool
    def __init__(self, name: _Optional[str] = ..., content: _Optional[str] = ..., size_bytes: _Optional[int] = ..., retired: _Optional[bool] = ...) -> None: ...

class UpdateSharedNoteRequest(_message.Message):
    __slots__ = ("agent_id", "name", "content", "confirm")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    content: str
    confirm: bool
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ..., content: _Optional[str] = ..., confirm: _Optional[bool] = ...) -> None: ...

class UpdateSharedNoteResponse(_message.Message):
    __slots__ = ("name", "updated", "dropped_lines", "total_lines", "warning", "folded", "message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_LINES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    updated: bool
    dropped_lines: int
    total_lines: int
    warning: str
    folded: bool
    message: str
    def __init__(self, name: _Optional[str] = ..., updated: _Optional[bool] = ..., dropped_lines: _Optional[int] = ..., total_lines: _Optional[int] = ..., warning: _Optional[str] = ..., folded: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class DeleteSharedNoteRequest(_message.Message):
    __slots__ = ("agent_id", "name")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteSharedNoteResponse(_message.Message):
    __slots__ = ("name", "deleted")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    name: str
    deleted: bool
    def __init__(self, name: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class RetireSharedNoteRequest(_message.Message):
    __slots__ = ("agent_id", "name", "reason")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    reason: str
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RestoreSharedNoteRequest(_message.Message):
    __slots__ = ("agent_id", "name")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    def __init__(self, agent_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SharedNoteMoved(_message.Message):
    __slots__ = ("from_name", "to_name")
    FROM_NAME_FIELD_NUMBER: _ClassVar[int]
    TO_NAME_FIELD_NUMBER: _ClassVar[int]
    from_name: str
    to_name: str
    def __init__(self, from_name: _Optional[str] = ..., to_name: _Optional[str] = ...) -> None: ...

class PromoteFactRequest(_message.Message):
    __slots__ = ("agent_id", "topic", "reason", "content", "run_id", "request_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    topic: str
    reason: str
    content: str
    run_id: str
    request_id: str
    def __init__(self, agent_id: _Optional[str] = ..., topic: _Optional[str] = ..., reason: _Optional[str] = ..., content: _Optional[str] = ..., run_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class PromoteFactResponse(_message.Message):
    __slots__ = ("outcome", "name", "name_from", "passed_over", "linked", "folded", "twin_kept", "held", "seed", "reason", "message", "weight", "write")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FROM_FIELD_NUMBER: _ClassVar[int]
    PASSED_OVER_FIELD_NUMBER: _ClassVar[int]
    LINKED_FIELD_NUMBER: _ClassVar[int]
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    TWIN_KEPT_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    name: str
    name_from: str
    passed_over: str
    linked: _containers.RepeatedScalarFieldContainer[str]
    folded: bool
    twin_kept: bool
    held: int
    seed: int
    reason: str
    message: str
    weight: float
    write: PromotionWrite
    def __init__(self, outcome: _Optional[str] = ..., name: _Optional[str] = ..., name_from: _Optional[str] = ..., passed_over: _Optional[str] = ..., linked: _Optional[_Iterable[str]] = ..., folded: _Optional[bool] = ..., twin_kept: _Optional[bool] = ..., held: _Optional[int] = ..., seed: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., weight: _Optional[float] = ..., write: _Optional[_Union[PromotionWrite, _Mapping]] = ...) -> None: ...

class PromotionWrite(_message.Message):
    __slots__ = ("note", "project", "kind", "offset", "removed", "added", "block", "hash_before", "hash_after", "folded_twin")
    NOTE_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    HASH_BEFORE_FIELD_NUMBER: _ClassVar[int]
    HASH_AFTER_FIELD_NUMBER: _ClassVar[int]
    FOLDED_TWIN_FIELD_NUMBER: _ClassVar[int]
    note: str
    project: str
    kind: str
    offset: int
    removed: str
    added: str
    block: str
    hash_before: str
    hash_after: str
    folded_twin: str
    def __init__(self, note: _Optional[str] = ..., project: _Optional[str] = ..., kind: _Optional[str] = ..., offset: _Optional[int] = ..., removed: _Optional[str] = ..., added: _Optional[str] = ..., block: _Optional[str] = ..., hash_before: _Optional[str] = ..., hash_after: _Optional[str] = ..., folded_twin: _Optional[str] = ...) -> None: ...

class UndoPromotionRequest(_message.Message):
    __slots__ = ("agent_id", "run_id", "op_id", "write", "request_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    OP_ID_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    run_id: str
    op_id: str
    write: PromotionWrite
    request_id: str
    def __init__(self, agent_id: _Optional[str] = ..., run_id: _Optional[str] = ..., op_id: _Optional[str] = ..., write: _Optional[_Union[PromotionWrite, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UndoPromotionResponse(_message.Message):
    __slots__ = ("outcome", "note", "reason", "message", "deleted", "twin_restored")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    TWIN_RESTORED_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    note: str
    reason: str
    message: str
    deleted: bool
    twin_restored: bool
    def __init__(self, outcome: _Optional[str] = ..., note: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., deleted: _Optional[bool] = ..., twin_restored: _Optional[bool] = ...) -> None: ...

class RefreshRequest(_message.Message):
    __slots__ = ("agent_id", "wait", "paths")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    wait: bool
    paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_id: _Optional[str] = ..., wait: _Optional[bool] = ..., paths: _Optional[_Iterable[str]] = ...) -> None: ...

class RefreshReport(_message.Message):
    __slots__ = ("indexed", "skipped", "pruned", "errors", "seconds", "rebuilt")
    INDEXED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    PRUNED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    REBUILT_FIELD_NUMBER: _ClassVar[int]
    indexed: int
    skipped: int
    pruned: int
    errors: _containers.RepeatedScalarFieldContainer[str]
    seconds: float
    rebuilt: bool
    def __init__(self, indexed: _Optional[int] = ..., skipped: _Optional[int] = ..., pruned: _Optional[int] = ..., errors: _Optional[_Iterable[str]] = ..., seconds: _Optional[float] = ..., rebuilt: _Optional[bool] = ...) -> None: ...

class RefreshResponse(_message.Message):
    __slots__ = ("agent_id", "generation", "queued", "report")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    generation: int
    queued: bool
    report: RefreshReport
    def __init__(self, agent_id: _Optional[str] = ..., generation: _Optional[int] = ..., queued: _Optional[bool] = ..., report: _Optional[_Union[RefreshReport, _Mapping]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("agent_id", "query", "corpus", "limit", "refresh")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    query: str
    corpus: str
    limit: int
    refresh: bool
    def __init__(self, agent_id: _Optional[str] = ..., query: _Optional[str] = ..., corpus: _Optional[str] = ..., limit: _Optional[int] = ..., refresh: _Optional[bool] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("path", "start_line", "end_line", "snippet", "score", "provenance", "importance", "entry_hash", "corpus")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_HASH_FIELD_NUMBER: _ClassVar[int]
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    end_line: int
    snippet: str
    score: float
    provenance: str
    importance: int
    entry_hash: str
    corpus: str
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., snippet: _Optional[str] = ..., score: _Optional[float] = ..., provenance: _Optional[str] = ..., importance: _Optional[int] = ..., entry_hash: _Optional[str] = ..., corpus: _Optional[str] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "generation", "stale", "refreshed")
    HITS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    REFRESHED_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    generation: int
    stale: bool
    refreshed: bool
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., generation: _Optional[int] = ..., stale: _Optional[bool] = ..., refreshed: _Optional[bool] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("agent_id", "path", "from_line", "lines")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FROM_LINE_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    path: str
    from_line: int
    lines: int
    def __init__(self, agent_id: _Optional[str] = ..., path: _Optional[str] = ..., from_line: _Optional[int] = ..., lines: _Optional[int] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("path", "text", "from_line", "to_line", "total_lines", "truncated")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FROM_LINE_FIELD_NUMBER: _ClassVar[int]
    TO_LINE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    path: str
    text: str
    from_line: int
    to_line: int
    total_lines: int
    truncated: bool
    def __init__(self, path: _Optional[str] = ..., text: _Optional[str] = ..., from_line: _Optional[int] = ..., to_line: _Optional[int] = ..., total_lines: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ForgetTextRequest(_message.Message):
    __slots__ = ("agent_id", "text", "pattern", "shared", "apply", "tombstone_id", "changed_paths", "tombstones")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    APPLY_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGED_PATHS_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    text: str
    pattern: str
    shared: bool
    apply: bool
    tombstone_id: str
    changed_paths: _containers.RepeatedScalarFieldContainer[str]
    tombstones: _containers.RepeatedCompositeFieldContainer[VaultTombstone]
    def __init__(self, agent_id: _Optional[str] = ..., text: _Optional[str] = ..., pattern: _Optional[str] = ..., shared: _Optional[bool] = ..., apply: _Optional[bool] = ..., tombstone_id: _Optional[str] = ..., changed_paths: _Optional[_Iterable[str]] = ..., tombstones: _Optional[_Iterable[_Union[VaultTombstone, _Mapping]]] = ...) -> None: ...

class VaultTombstone(_message.Message):
    __slots__ = ("tombstone_id", "digest", "salt", "lead", "words", "at", "by", "places")
    TOMBSTONE_ID_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    LEAD_FIELD_NUMBER: _ClassVar[int]
    WORDS_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    PLACES_FIELD_NUMBER: _ClassVar[int]
    tombstone_id: str
    digest: str
    salt: str
    lead: str
    words: int
    at: str
    by: str
    places: int
    def __init__(self, tombstone_id: _Optional[str] = ..., digest: _Optional[str] = ..., salt: _Optional[str] = ..., lead: _Optional[str] = ..., words: _Optional[int] = ..., at: _Optional[str] = ..., by: _Optional[str] = ..., places: _Optional[int] = ...) -> None: ...

class ShareTombstonesRequest(_message.Message):
    __slots__ = ("agent_id", "tombstones", "lift")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    LIFT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    tombstones: _containers.RepeatedCompositeFieldContainer[VaultTombstone]
    lift: str
    def __init__(self, agent_id: _Optional[str] = ..., tombstones: _Optional[_Iterable[_Union[VaultTombstone, _Mapping]]] = ..., lift: _Optional[str] = ...) -> None: ...

class ShareTombstonesResponse(_message.Message):
    __slots__ = ("added", "lifted", "held")
    ADDED_FIELD_NUMBER: _ClassVar[int]
    LIFTED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    added: int
    lifted: int
    held: int
    def __init__(self, added: _Optional[int] = ..., lifted: _Optional[int] = ..., held: _Optional[int] = ...) -> None: ...

class ForgetPlace(_message.Message):
    __slots__ = ("place", "kind", "count", "lines")
    PLACE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    place: str
    kind: str
    count: int
    lines: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, place: _Optional[str] = ..., kind: _Optional[str] = ..., count: _Optional[int] = ..., lines: _Optional[_Iterable[int]] = ...) -> None: ...

class ForgetStore(_message.Message):
    __slots__ = ("store", "places", "left", "purged", "bytes_before", "bytes_after", "purge_seconds")
    STORE_FIELD_NUMBER: _ClassVar[int]
    PLACES_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    PURGED_FIELD_NUMBER: _ClassVar[int]
    BYTES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    BYTES_AFTER_FIELD_NUMBER: _ClassVar[int]
    PURGE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    store: str
    places: _containers.RepeatedCompositeFieldContainer[ForgetPlace]
    left: _containers.RepeatedCompositeFieldContainer[ForgetPlace]
    purged: bool
    bytes_before: int
    bytes_after: int
    purge_seconds: float
    def __init__(self, store: _Optional[str] = ..., places: _Optional[_Iterable[_Union[ForgetPlace, _Mapping]]] = ..., left: _Optional[_Iterable[_Union[ForgetPlace, _Mapping]]] = ..., purged: _Optional[bool] = ..., bytes_before: _Optional[int] = ..., bytes_after: _Optional[int] = ..., purge_seconds: _Optional[float] = ...) -> None: ...

class ForgetTextResponse(_message.Message):
    __slots__ = ("stores", "matched")
    STORES_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    stores: _containers.RepeatedCompositeFieldContainer[ForgetStore]
    matched: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stores: _Optional[_Iterable[_Union[ForgetStore, _Mapping]]] = ..., matched: _Optional[_Iterable[str]] = ...) -> None: ...

class FoldRetrievalsRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class FoldRetrievalsResponse(_message.Message):
    __slots__ = ("folded", "entries")
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    folded: int
    entries: int
    def __init__(self, folded: _Optional[int] = ..., entries: _Optional[int] = ...) -> None: ...

class GetIndexStatusRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class IndexStatus(_message.Message):
    __slots__ = ("agent_id", "enabled", "exists", "generation", "sources", "chunks", "stale", "tokenizer")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    enabled: bool
    exists: bool
    generation: int
    sources: int
    chunks: int
    stale: bool
    tokenizer: str
    def __init__(self, agent_id: _Optional[str] = ..., enabled: _Optional[bool] = ..., exists: _Optional[bool] = ..., generation: _Optional[int] = ..., sources: _Optional[int] = ..., chunks: _Optional[int] = ..., stale: _Optional[bool] = ..., tokenizer: _Optional[str] = ...) -> None: ...

class RecallProbe(_message.Message):
    __slots__ = ("path", "query", "text")
    PATH_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    path: str
    query: str
    text: str
    def __init__(self, path: _Optional[str] = ..., query: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class ProbeRecallRequest(_message.Message):
    __slots__ = ("agent_id", "probes")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PROBES_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    probes: _containers.RepeatedCompositeFieldContainer[RecallProbe]
    def __init__(self, agent_id: _Optional[str] = ..., probes: _Optional[_Iterable[_Union[RecallProbe, _Mapping]]] = ...) -> None: ...

class ProbeRecallResponse(_message.Message):
    __slots__ = ("found", "generation")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    found: _containers.RepeatedScalarFieldContainer[bool]
    generation: int
    def __init__(self, found: _Optional[_Iterable[bool]] = ..., generation: _Optional[int] = ...) -> None: ...

class ListArchiveEntriesRequest(_message.Message):
    __slots__ = ("agent_id", "page_size", "page_token", "entry_hashes")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ENTRY_HASHES_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    entry_hashes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., entry_hashes: _Optional[_Iterable[str]] = ...) -> None: ...

class EntryLifecycle(_message.Message):
    __slots__ = ("entry_hash", "first_path", "first_seen", "last_retrieved", "retrieval_count", "supersedes_key", "invalid_at", "restored_at")
    ENTRY_HASH_FIELD_NUMBER: _ClassVar[int]
    FIRST_PATH_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_FIELD_NUMBER: _ClassVar[int]
    LAST_RETRIEVED_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_KEY_FIELD_NUMBER: _ClassVar[int]
    INVALID_AT_FIELD_NUMBER: _ClassVar[int]
    RESTORED_AT_FIELD_NUMBER: _ClassVar[int]
    entry_hash: str
    first_path: str
    first_seen: float
    last_retrieved: float
    retrieval_count: int
    supersedes_key: str
    invalid_at: float
    restored_at: float
    def __init__(self, entry_hash: _Optional[str] = ..., first_path: _Optional[str] = ..., first_seen: _Optional[float] = ..., last_retrieved: _Optional[float] = ..., retrieval_count: _Optional[int] = ..., supersedes_key: _Optional[str] = ..., invalid_at: _Optional[float] = ..., restored_at: _Optional[float] = ...) -> None: ...

class ArchiveEntry(_message.Message):
    __slots__ = ("path", "start_line", "end_line", "importance", "provenance", "lifecycle")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    end_line: int
    importance: int
    provenance: str
    lifecycle: EntryLifecycle
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., importance: _Optional[int] = ..., provenance: _Optional[str] = ..., lifecycle: _Optional[_Union[EntryLifecycle, _Mapping]] = ...) -> None: ...

class ArchiveSource(_message.Message):
    __slots__ = ("path", "content_hash", "provenance")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    path: str
    content_hash: str
    provenance: str
    def __init__(self, path: _Optional[str] = ..., content_hash: _Optional[str] = ..., provenance: _Optional[str] = ...) -> None: ...

class ListArchiveEntriesResponse(_message.Message):
    __slots__ = ("entries", "sources", "next_page_token", "lifecycle")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[ArchiveEntry]
    sources: _containers.RepeatedCompositeFieldContainer[ArchiveSource]
    next_page_token: str
    lifecycle: _containers.RepeatedCompositeFieldContainer[EntryLifecycle]
    def __init__(self, entries: _Optional[_Iterable[_Union[ArchiveEntry, _Mapping]]] = ..., sources: _Optional[_Iterable[_Union[ArchiveSource, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., lifecycle: _Optional[_Iterable[_Union[EntryLifecycle, _Mapping]]] = ...) -> None: ...

class LifecycleUpdate(_message.Message):
    __slots__ = ("entry_hash", "supersedes_key", "invalid_at", "clear_invalid", "restored_at")
    ENTRY_HASH_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_KEY_FIELD_NUMBER: _ClassVar[int]
    INVALID_AT_FIELD_NUMBER: _ClassVar[int]
    CLEAR_INVALID_FIELD_NUMBER: _ClassVar[int]
    RESTORED_AT_FIELD_NUMBER: _ClassVar[int]
    entry_hash: str
    supersedes_key: str
    invalid_at: float
    clear_invalid: bool
    restored_at: float
    def __init__(self, entry_hash: _Optional[str] = ..., supersedes_key: _Optional[str] = ..., invalid_at: _Optional[float] = ..., clear_invalid: _Optional[bool] = ..., restored_at: _Optional[float] = ...) -> None: ...

class UpdateEntryLifecycleRequest(_message.Message):
    __slots__ = ("agent_id", "updates")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    updates: _containers.RepeatedCompositeFieldContainer[LifecycleUpdate]
    def __init__(self, agent_id: _Optional[str] = ..., updates: _Optional[_Iterable[_Union[LifecycleUpdate, _Mapping]]] = ...) -> None: ...

class UpdateEntryLifecycleResponse(_message.Message):
    __slots__ = ("updated", "missing")
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    updated: int
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, updated: _Optional[int] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class PlanVaultReflectionRequest(_message.Message):
    __slots__ = ("project", "run_id", "max_clusters", "max_cluster_bytes", "claim_seconds")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    MAX_CLUSTER_BYTES_FIELD_NUMBER: _ClassVar[int]
    CLAIM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    project: str
    run_id: str
    max_clusters: int
    max_cluster_bytes: int
    claim_seconds: int
    def __init__(self, project: _Optional[str] = ..., run_id: _Optional[str] = ..., max_clusters: _Optional[int] = ..., max_cluster_bytes: _Optional[int] = ..., claim_seconds: _Optional[int] = ...) -> None: ...

class ClusterNote(_message.Message):
    __slots__ = ("name", "content", "sha256", "updated_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    content: str
    sha256: str
    updated_at: float
    def __init__(self, name: _Optional[str] = ..., content: _Optional[str] = ..., sha256: _Optional[str] = ..., updated_at: _Optional[float] = ...) -> None: ...

class VaultCluster(_message.Message):
    __slots__ = ("id", "notes", "joined_by", "contradiction", "cut")
    ID_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    JOINED_BY_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTION_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    id: str
    notes: _containers.RepeatedCompositeFieldContainer[ClusterNote]
    joined_by: str
    contradiction: str
    cut: bool
    def __init__(self, id: _Optional[str] = ..., notes: _Optional[_Iterable[_Union[ClusterNote, _Mapping]]] = ..., joined_by: _Optional[str] = ..., contradiction: _Optional[str] = ..., cut: _Optional[bool] = ...) -> None: ...

class VaultReflectionPlan(_message.Message):
    __slots__ = ("project", "revision", "watermark", "unchanged", "busy", "busy_with", "clusters", "remaining", "notes")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    BUSY_WITH_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    project: str
    revision: str
    watermark: str
    unchanged: bool
    busy: bool
    busy_with: str
    clusters: _containers.RepeatedCompositeFieldContainer[VaultCluster]
    remaining: int
    notes: int
    def __init__(self, project: _Optional[str] = ..., revision: _Optional[str] = ..., watermark: _Optional[str] = ..., unchanged: _Optional[bool] = ..., busy: _Optional[bool] = ..., busy_with: _Optional[str] = ..., clusters: _Optional[_Iterable[_Union[VaultCluster, _Mapping]]] = ..., remaining: _Optional[int] = ..., notes: _Optional[int] = ...) -> None: ...

class MergeVaultNotesRequest(_message.Message):
    __slots__ = ("project", "run_id", "cluster_id", "name", "content", "replaces", "expected_sha256", "max_drop_share", "reason", "dry_run")
    class ExpectedSha256Entry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REPLACES_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    MAX_DROP_SHARE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    project: str
    run_id: str
    cluster_id: str
    name: str
    content: str
    replaces: _containers.RepeatedScalarFieldContainer[str]
    expected_sha256: _containers.ScalarMap[str, str]
    max_drop_share: float
    reason: str
    dry_run: bool
    def __init__(self, project: _Optional[str] = ..., run_id: _Optional[str] = ..., cluster_id: _Optional[str] = ..., name: _Optional[str] = ..., content: _Optional[str] = ..., replaces: _Optional[_Iterable[str]] = ..., expected_sha256: _Optional[_Mapping[str, str]] = ..., max_drop_share: _Optional[float] = ..., reason: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class MergeVaultNotesResponse(_message.Message):
    __slots__ = ("outcome", "reason", "retired", "pruned_lines", "distinct_lines", "merge_id")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    PRUNED_LINES_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_LINES_FIELD_NUMBER: _ClassVar[int]
    MERGE_ID_FIELD_NUMBER: _ClassVar[int]
    outcome: MergeOutcome
    reason: str
    retired: _containers.RepeatedScalarFieldContainer[str]
    pruned_lines: int
    distinct_lines: int
    merge_id: str
    def __init__(self, outcome: _Optional[_Union[MergeOutcome, str]] = ..., reason: _Optional[str] = ..., retired: _Optional[_Iterable[str]] = ..., pruned_lines: _Optional[int] = ..., distinct_lines: _Optional[int] = ..., merge_id: _Optional[str] = ...) -> None: ...

class VaultMergeProposal(_message.Message):
    __slots__ = ("cluster_id", "name", "content", "replaces", "expected_sha256", "reason", "state")
    class ExpectedSha256Entry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REPLACES_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    name: str
    content: str
    replaces: _containers.RepeatedScalarFieldContainer[str]
    expected_sha256: _containers.ScalarMap[str, str]
    reason: str
    state: str
    def __init__(self, cluster_id: _Optional[str] = ..., name: _Optional[str] = ..., content: _Optional[str] = ..., replaces: _Optional[_Iterable[str]] = ..., expected_sha256: _Optional[_Mapping[str, str]] = ..., reason: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class VaultClusterResult(_message.Message):
    __slots__ = ("cluster_id", "notes", "outcome", "reason", "merge_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MERGE_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    notes: _containers.RepeatedScalarFieldContainer[str]
    outcome: str
    reason: str
    merge_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., notes: _Optional[_Iterable[str]] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., merge_id: _Optional[str] = ...) -> None: ...

class RecordVaultReflectionRequest(_message.Message):
    __slots__ = ("project", "run_id", "mode", "trigger", "clusters", "proposals", "status", "reason", "started_at", "remaining")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    project: str
    run_id: str
    mode: str
    trigger: str
    clusters: _containers.RepeatedCompositeFieldContainer[VaultClusterResult]
    proposals: _containers.RepeatedCompositeFieldContainer[VaultMergeProposal]
    status: str
    reason: str
    started_at: float
    remaining: int
    def __init__(self, project: _Optional[str] = ..., run_id: _Optional[str] = ..., mode: _Optional[str] = ..., trigger: _Optional[str] = ..., clusters: _Optional[_Iterable[_Union[VaultClusterResult, _Mapping]]] = ..., proposals: _Optional[_Iterable[_Union[VaultMergeProposal, _Mapping]]] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., started_at: _Optional[float] = ..., remaining: _Optional[int] = ...) -> None: ...

class VaultReflectionRun(_message.Message):
    __slots__ = ("project", "run_id", "mode", "trigger", "status", "reason", "started_at", "finished_at", "clusters", "proposals", "remaining", "revision", "reverted_at")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    REVERTED_AT_FIELD_NUMBER: _ClassVar[int]
    project: str
    run_id: str
    mode: str
    trigger: str
    status: str
    reason: str
    started_at: float
    finished_at: float
    clusters: _containers.RepeatedCompositeFieldContainer[VaultClusterResult]
    proposals: _containers.RepeatedCompositeFieldContainer[VaultMergeProposal]
    remaining: int
    revision: str
    reverted_at: float
    def __init__(self, project: _Optional[str] = ..., run_id: _Optional[str] = ..., mode: _Optional[str] = ..., trigger: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., started_at: _Optional[float] = ..., finished_at: _Optional[float] = ..., clusters: _Optional[_Iterable[_Union[VaultClusterResult, _Mapping]]] = ..., proposals: _Optional[_Iterable[_Union[VaultMergeProposal, _Mapping]]] = ..., remaining: _Optional[int] = ..., revision: _Optional[str] = ..., reverted_at: _Optional[float] = ...) -> None: ...

class ListVaultReflectionsRequest(_message.Message):
    __slots__ = ("project", "limit")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    project: str
    limit: int
    def __init__(self, project: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListVaultReflectionsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[VaultReflectionRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[VaultReflectionRun, _Mapping]]] = ...) -> None: ...

class RevertVaultReflectionRequest(_message.Message):
    __slots__ = ("project", "run_id", "last")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    project: str
    run_id: str
    last: bool
    def __init__(self, project: _Optional[str] = ..., run_id: _Optional[str] = ..., last: _Optional[bool] = ...) -> None: ...

class RevertVaultReflectionResponse(_message.Message):
    __slots__ = ("run_id", "restored", "left")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RESTORED_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    restored: _containers.RepeatedScalarFieldContainer[str]
    left: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., restored: _Optional[_Iterable[str]] = ..., left: _Optional[_Iterable[str]] = ...) -> None: ...
