from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from gateway.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetFileRequest(_message.Message):
    __slots__ = ("agent_id", "filename")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    filename: str
    def __init__(self, agent_id: _Optional[str] = ..., filename: _Optional[str] = ...) -> None: ...

class GetFileResponse(_message.Message):
    __slots__ = ("filename", "content", "sha256")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    filename: str
    content: str
    sha256: str
    def __init__(self, filename: _Optional[str] = ..., content: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class PutFileRequest(_message.Message):
    __slots__ = ("agent_id", "filename", "content", "expected_sha256")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    filename: str
    content: str
    expected_sha256: str
    def __init__(self, agent_id: _Optional[str] = ..., filename: _Optional[str] = ..., content: _Optional[str] = ..., expected_sha256: _Optional[str] = ...) -> None: ...

class PutFileResponse(_message.Message):
    __slots__ = ("filename", "message", "sha256", "warnings")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    filename: str
    message: str
    sha256: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, filename: _Optional[str] = ..., message: _Optional[str] = ..., sha256: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...
