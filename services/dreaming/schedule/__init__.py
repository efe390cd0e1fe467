"""When a run is due and may go: the nightly scheduler, its slot arithmetic, the quiet window, the
per-agent state file and run lock. Imports only ``model`` and ``records``."""
