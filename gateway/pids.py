"""Whether a process id names a live process: the one test the services make of another's pid."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists now (one owned by another user counts: it is there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
