"""A stand-in for grpc.aio.ServicerContext in in-process servicer tests: the caller's metadata, and
``abort`` recording the status before it raises as a real server's does."""

from __future__ import annotations

import grpc


class Context:
    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata
        self.aborted: list[tuple[grpc.StatusCode, str]] = []

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted.append((code, details))
        raise grpc.aio.AbortError()
