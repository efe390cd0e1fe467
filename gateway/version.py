"""The suite's version: the installed distribution's, as pip recorded it from pyproject.toml."""

from __future__ import annotations

from functools import cache
from importlib import metadata
from typing import Final

DISTRIBUTION: Final = "claude-gateway"
UNKNOWN: Final = "0+unknown"  # a PEP 440 local version: the code runs from a tree pip never installed


@cache
def package_version() -> str:
    """``claude-gateway``'s version (``0.1.0``), or ``0+unknown`` when the distribution is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN
