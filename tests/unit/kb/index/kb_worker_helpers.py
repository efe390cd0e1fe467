"""Stand-ins for ``indexer_parse.parse_batches`` that fail inside a parse worker process.

They must be module-level functions of an importable module: a worker receives them
pickled by name and imports this module (the test dir is on the sys.path it is given)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.kb.index.indexer_parse import Outcome, parse_batches


def crashing_batches(root: Path, files: list[Any], *args: Any, **kwargs: Any) -> Iterator[list[Outcome]]:
    """Raises after its first batch."""
    for number, batch in enumerate(parse_batches(root, files, *args, **kwargs)):
        if number == 1:
            raise RuntimeError("simulated crash in the parse worker")
        yield batch


def dying_batches(root: Path, files: list[Any], *args: Any, **kwargs: Any) -> Iterator[list[Outcome]]:
    """The process is killed (SIGKILL) after its first batch."""
    for number, batch in enumerate(parse_batches(root, files, *args, **kwargs)):
        if number == 1:
            time.sleep(0.2)  # let the first batch reach the caller
            os.kill(os.getpid(), signal.SIGKILL)
        yield batch


def endless_batches(root: Path, files: list[Any], *args: Any, **kwargs: Any) -> Iterator[list[Outcome]]:
    """The first batch, then the same batch again every 10 ms, forever."""
    first = next(iter(parse_batches(root, files, *args, **kwargs)))
    while True:
        yield first
        time.sleep(0.01)
