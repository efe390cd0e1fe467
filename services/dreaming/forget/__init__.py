"""Forget on purpose, the workspace side (docs/concepts/forget.md): ``scan`` and ``apply`` over one
agent's identity files, ``memory/``, ``.dreaming/``, its dreaming state and (reported only) its
transcripts. What a target matches, its marker and the tombstones are ``gateway.forgetting``'s."""

from services.dreaming.forget.places import Place, WorkspaceReport
from services.dreaming.forget.workspace import apply, apply_agent, scan, scan_agent

__all__ = ["Place", "WorkspaceReport", "apply", "apply_agent", "scan", "scan_agent"]
