"""Forget on purpose (docs/concepts/forget.md): ``scan`` and ``apply`` over one agent's files, its dreaming state and
(reported only) its transcripts; ``run``, a whole forget with the KB's part through a seam, and its ``report``.
The top wing: imports any wing, never the top floor."""

from services.dreaming.forget.places import Place, WorkspaceReport
from services.dreaming.forget.workspace import apply, apply_agent, scan, scan_agent

__all__ = ["Place", "WorkspaceReport", "apply", "apply_agent", "scan", "scan_agent"]
