from gateway.v1 import options_pb2 as _options_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RefreshRequest(_message.Message):
    __slots__ = ("agent_id", "wait")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    wait: bool
    def __init__(self, agent_id: _Optional[str] = ..., wait: _Optional[bool] = ...) -> None: ...

class RefreshResponse(_message.Message):
    __slots__ = ("agent_id", "generation", "queued")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    generation: int
    queued: bool
    def __init__(self, agent_id: _Optional[str] = ..., generation: _Optional[int] = ..., queued: _Optional[bool] = ...) -> None: ...
