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

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATE_UNSPECIFIED: _ClassVar[SessionState]
    SESSION_STATE_IDLE: _ClassVar[SessionState]
    SESSION_STATE_BUSY: _ClassVar[SessionState]

class DirectiveKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIRECTIVE_KIND_UNSPECIFIED: _ClassVar[DirectiveKind]
    DIRECTIVE_KIND_RESTART_NOW: _ClassVar[DirectiveKind]
    DIRECTIVE_KIND_RESTART_WHEN_IDLE: _ClassVar[DirectiveKind]
    DIRECTIVE_KIND_RESPAWN_ON_NEXT_MESSAGE: _ClassVar[DirectiveKind]

class ChangeClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANGE_CLASS_UNSPECIFIED: _ClassVar[ChangeClass]
    CHANGE_CLASS_MEMORY: _ClassVar[ChangeClass]
    CHANGE_CLASS_IDENTITY: _ClassVar[ChangeClass]
    CHANGE_CLASS_OTHER: _ClassVar[ChangeClass]

class OriginKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORIGIN_KIND_UNSPECIFIED: _ClassVar[OriginKind]
    ORIGIN_KIND_PUT: _ClassVar[OriginKind]
    ORIGIN_KIND_DREAM: _ClassVar[OriginKind]
    ORIGIN_KIND_UNKNOWN: _ClassVar[OriginKind]
    ORIGIN_KIND_MISSING: _ClassVar[OriginKind]
SESSION_STATE_UNSPECIFIED: SessionState
SESSION_STATE_IDLE: SessionState
SESSION_STATE_BUSY: SessionState
DIRECTIVE_KIND_UNSPECIFIED: DirectiveKind
DIRECTIVE_KIND_RESTART_NOW: DirectiveKind
DIRECTIVE_KIND_RESTART_WHEN_IDLE: DirectiveKind
DIRECTIVE_KIND_RESPAWN_ON_NEXT_MESSAGE: DirectiveKind
CHANGE_CLASS_UNSPECIFIED: ChangeClass
CHANGE_CLASS_MEMORY: ChangeClass
CHANGE_CLASS_IDENTITY: ChangeClass
CHANGE_CLASS_OTHER: ChangeClass
ORIGIN_KIND_UNSPECIFIED: OriginKind
ORIGIN_KIND_PUT: OriginKind
ORIGIN_KIND_DREAM: OriginKind
ORIGIN_KIND_UNKNOWN: OriginKind
ORIGIN_KIND_MISSING: OriginKind

class Directive(_message.Message):
    __slots__ = ("agent_id", "session_id", "kind", "change_class", "changed_files", "reason", "generation")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CHANGE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FILES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    kind: DirectiveKind
    change_class: ChangeClass
    changed_files: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    generation: int
    def __init__(self, agent_id: _Optional[str] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[DirectiveKind, str]] = ..., change_class: _Optional[_Union[ChangeClass, str]] = ..., changed_files: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("agent_id", "session_id", "state", "started_at_ms", "last_activity_ms", "pending")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_MS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    state: SessionState
    started_at_ms: int
    last_activity_ms: int
    pending: Directive
    def __init__(self, agent_id: _Optional[str] = ..., session_id: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ..., started_at_ms: _Optional[int] = ..., last_activity_ms: _Optional[int] = ..., pending: _Optional[_Union[Directive, _Mapping]] = ...) -> None: ...

class RegisterSessionRequest(_message.Message):
    __slots__ = ("agent_id", "session_id", "state")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    state: SessionState
    def __init__(self, agent_id: _Optional[str] = ..., session_id: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ...) -> None: ...

class ReportStateRequest(_message.Message):
    __slots__ = ("agent_id", "session_id", "state")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    state: SessionState
    def __init__(self, agent_id: _Optional[str] = ..., session_id: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ...) -> None: ...

class EndSessionRequest(_message.Message):
    __slots__ = ("agent_id", "session_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    def __init__(self, agent_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class EndSessionResponse(_message.Message):
    __slots__ = ("ended",)
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ended: bool
    def __init__(self, ended: _Optional[bool] = ...) -> None: ...

class WatchDirectivesRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class GetActivityRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class Activity(_message.Message):
    __slots__ = ("agent_id", "last_activity_ms", "sessions")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_MS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    last_activity_ms: int
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, agent_id: _Optional[str] = ..., last_activity_ms: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class PreviewClaudeMdRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class FileBudget(_message.Message):
    __slots__ = ("name", "chars", "budget", "over_budget", "truncated", "shrunk", "problem", "present")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CHARS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    OVER_BUDGET_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    SHRUNK_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    PRESENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    chars: int
    budget: int
    over_budget: bool
    truncated: bool
    shrunk: bool
    problem: str
    present: bool
    def __init__(self, name: _Optional[str] = ..., chars: _Optional[int] = ..., budget: _Optional[int] = ..., over_budget: _Optional[bool] = ..., truncated: _Optional[bool] = ..., shrunk: _Optional[bool] = ..., problem: _Optional[str] = ..., present: _Optional[bool] = ...) -> None: ...

class PreviewClaudeMdResponse(_message.Message):
    __slots__ = ("agent_id", "content", "files", "budget_report")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    BUDGET_REPORT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    content: str
    files: _containers.RepeatedCompositeFieldContainer[FileBudget]
    budget_report: str
    def __init__(self, agent_id: _Optional[str] = ..., content: _Optional[str] = ..., files: _Optional[_Iterable[_Union[FileBudget, _Mapping]]] = ..., budget_report: _Optional[str] = ...) -> None: ...

class GetLineageRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class SourceOrigin(_message.Message):
    __slots__ = ("kind", "at_ms", "run_id", "description")
    KIND_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    kind: OriginKind
    at_ms: int
    run_id: str
    description: str
    def __init__(self, kind: _Optional[_Union[OriginKind, str]] = ..., at_ms: _Optional[int] = ..., run_id: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class SourceRevision(_message.Message):
    __slots__ = ("name", "sha256", "origin")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    sha256: str
    origin: SourceOrigin
    def __init__(self, name: _Optional[str] = ..., sha256: _Optional[str] = ..., origin: _Optional[_Union[SourceOrigin, _Mapping]] = ...) -> None: ...

class LineageComposition(_message.Message):
    __slots__ = ("id", "composed_at_ms", "claude_md_sha256", "sources")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPOSED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CLAUDE_MD_SHA256_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    id: int
    composed_at_ms: int
    claude_md_sha256: str
    sources: _containers.RepeatedCompositeFieldContainer[SourceRevision]
    def __init__(self, id: _Optional[int] = ..., composed_at_ms: _Optional[int] = ..., claude_md_sha256: _Optional[str] = ..., sources: _Optional[_Iterable[_Union[SourceRevision, _Mapping]]] = ...) -> None: ...

class SourceLineage(_message.Message):
    __slots__ = ("name", "revision", "today", "differs", "diff", "diff_truncated", "diff_unavailable")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    TODAY_FIELD_NUMBER: _ClassVar[int]
    DIFFERS_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    DIFF_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    DIFF_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    revision: SourceRevision
    today: SourceRevision
    differs: bool
    diff: str
    diff_truncated: bool
    diff_unavailable: str
    def __init__(self, name: _Optional[str] = ..., revision: _Optional[_Union[SourceRevision, _Mapping]] = ..., today: _Optional[_Union[SourceRevision, _Mapping]] = ..., differs: _Optional[bool] = ..., diff: _Optional[str] = ..., diff_truncated: _Optional[bool] = ..., diff_unavailable: _Optional[str] = ...) -> None: ...

class SessionLineage(_message.Message):
    __slots__ = ("session_id", "state", "composition", "sources")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    COMPOSITION_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    state: SessionState
    composition: LineageComposition
    sources: _containers.RepeatedCompositeFieldContainer[SourceLineage]
    def __init__(self, session_id: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ..., composition: _Optional[_Union[LineageComposition, _Mapping]] = ..., sources: _Optional[_Iterable[_Union[SourceLineage, _Mapping]]] = ...) -> None: ...

class Lineage(_message.Message):
    __slots__ = ("agent_id", "sessions", "compositions")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    COMPOSITIONS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    sessions: _containers.RepeatedCompositeFieldContainer[SessionLineage]
    compositions: _containers.RepeatedCompositeFieldContainer[LineageComposition]
    def __init__(self, agent_id: _Optional[str] = ..., sessions: _Optional[_Iterable[_Union[SessionLineage, _Mapping]]] = ..., compositions: _Optional[_Iterable[_Union[LineageComposition, _Mapping]]] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DreamSummary(_message.Message):
    __slots__ = ("known", "reason", "scheduled", "mode", "next_run_at", "last_run_id", "last_run_at", "last_status", "last_reason", "pending_proposals", "ops_applied", "ops_skipped", "ops_proposed", "failures_last_7_days", "last_failure_at", "last_failure_reason", "not_promoted", "promoted")
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_REASON_FIELD_NUMBER: _ClassVar[int]
    PENDING_PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    OPS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    OPS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    OPS_PROPOSED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_LAST_7_DAYS_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_REASON_FIELD_NUMBER: _ClassVar[int]
    NOT_PROMOTED_FIELD_NUMBER: _ClassVar[int]
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    known: bool
    reason: str
    scheduled: bool
    mode: str
    next_run_at: str
    last_run_id: str
    last_run_at: str
    last_status: str
    last_reason: str
    pending_proposals: int
    ops_applied: int
    ops_skipped: int
    ops_proposed: int
    failures_last_7_days: int
    last_failure_at: str
    last_failure_reason: str
    not_promoted: str
    promoted: int
    def __init__(self, known: _Optional[bool] = ..., reason: _Optional[str] = ..., scheduled: _Optional[bool] = ..., mode: _Optional[str] = ..., next_run_at: _Optional[str] = ..., last_run_id: _Optional[str] = ..., last_run_at: _Optional[str] = ..., last_status: _Optional[str] = ..., last_reason: _Optional[str] = ..., pending_proposals: _Optional[int] = ..., ops_applied: _Optional[int] = ..., ops_skipped: _Optional[int] = ..., ops_proposed: _Optional[int] = ..., failures_last_7_days: _Optional[int] = ..., last_failure_at: _Optional[str] = ..., last_failure_reason: _Optional[str] = ..., not_promoted: _Optional[str] = ..., promoted: _Optional[int] = ...) -> None: ...

class AgentSummary(_message.Message):
    __slots__ = ("agent_id", "writable", "files", "over_budget", "last_activity_ms", "sessions", "dream")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    OVER_BUDGET_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_MS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DREAM_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    writable: bool
    files: _containers.RepeatedCompositeFieldContainer[FileBudget]
    over_budget: bool
    last_activity_ms: int
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    dream: DreamSummary
    def __init__(self, agent_id: _Optional[str] = ..., writable: _Optional[bool] = ..., files: _Optional[_Iterable[_Union[FileBudget, _Mapping]]] = ..., over_budget: _Optional[bool] = ..., last_activity_ms: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., dream: _Optional[_Union[DreamSummary, _Mapping]] = ...) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents",)
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentSummary]
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentSummary, _Mapping]]] = ...) -> None: ...
