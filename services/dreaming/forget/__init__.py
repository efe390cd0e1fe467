"""Forget on purpose, the workspace side (docs/concepts/forget.md): ``scan`` and ``apply`` over one agent's files,
its dreaming state and (reported only) its transcripts. The top wing: imports any wing, never the top floor."""

from services.dreaming.forget.places import Place, WorkspaceReport
from services.dreaming.forget.workspace import apply, apply_agent, scan, scan_agent

__all__ = ["Place", "WorkspaceReport", "apply", "apply_agent", "scan", "scan_agent"]
