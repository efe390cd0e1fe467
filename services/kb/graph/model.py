"""What a graph build finds: the nodes, edges and findings ``build`` computes and ``reports`` renders.

The dataclasses live apart from both, so the builder and the renderer each import
them and neither imports the other's module for its types.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.kb.graph.parse import Claim


@dataclass(frozen=True)
class Node:
    name: str
    title: str | None
    retired: bool
    skipped: bool  # too large or unreadable: a node without facts


@dataclass(frozen=True)
class Edge:
    source: str
    target: str  # the resolved note name, or the target as written when dangling
    dangling: bool


@dataclass(frozen=True)
class Contradiction:
    claim_id: str
    diverges: tuple[str, ...]  # "text", "status" or both
    claims: tuple[Claim, ...]  # every occurrence of the id, sorted by note


@dataclass(frozen=True)
class StalePage:
    note: str
    updated_at: datetime
    source: str  # "updatedAt" or "file mtime"
    age_days: int


@dataclass(frozen=True)
class LowConfidence:
    note: str
    confidence: float
    claim_id: str | None  # None for the page's own confidence
    text: str | None


@dataclass(frozen=True)
class Problem:
    note: str
    message: str


@dataclass
class GraphReport:
    nodes: list[Node]
    edges: list[Edge]  # dangling ones included
    dangling: list[Edge]
    contradictions: list[Contradiction]
    stale: list[StalePage]
    low_confidence: list[LowConfidence]
    problems: list[Problem]
    written: list[str]  # report file names rewritten by this build (unchanged ones are not)
    seconds: float
