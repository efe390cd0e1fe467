"""The suite's exception hierarchy. Each class knows its gRPC status code.

Domain code raises these; one decorator per server (``gateway.rpc``) turns
them into gRPC status, and the REST shim turns status into HTTP in one place.
Domain code never imports grpc, so the codes are plain names here.
"""

from __future__ import annotations

from pathlib import Path


class GatewayError(Exception):
    """Base of every error the suite reports to a caller.

    ``code`` is the name of a ``grpc.StatusCode`` member; ``message`` is safe
    to show to the caller (it never contains a key or an internal path).
    """

    code = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(GatewayError):
    code = "INVALID_ARGUMENT"


class Unauthenticated(GatewayError):
    code = "UNAUTHENTICATED"


class PermissionDenied(GatewayError):
    code = "PERMISSION_DENIED"


class NotFound(GatewayError):
    code = "NOT_FOUND"


class AlreadyExists(GatewayError):
    code = "ALREADY_EXISTS"


class Aborted(GatewayError):
    """A concurrent operation is in the way (e.g. a run of the same agent); try again later."""

    code = "ABORTED"


class FailedPrecondition(GatewayError):
    code = "FAILED_PRECONDITION"


class ResourceExhausted(GatewayError):
    code = "RESOURCE_EXHAUSTED"


class Unavailable(GatewayError):
    code = "UNAVAILABLE"


class ConfigError(Exception):
    """config.json is unusable. ``problems`` holds one line per error (key: reason)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class ConfigNotFound(ConfigError):
    """There is no config.json at ``path``: a missing file, not an invalid one."""

    def __init__(self, path: Path) -> None:
        super().__init__([f"{path}: not found"])
        self.path = path


class InvalidEdit(ConfigError):
    """A command's change would make config.json invalid (``problems``); nothing was written."""


class CommandError(Exception):
    """A ``gateway`` command refused to act; ``str()`` is one line for the operator (exit 2)."""


def shown(value: str) -> str:
    """``value`` as an error message quotes it: its repr, cut at 40 characters (a bad id or mode is named,
    never echoed whole)."""
    return repr(value if len(value) <= 40 else value[:40] + "…")
