"""Kills injected into dreaming's writes: every rename or link into place, every removal and every
journal append of a workspace is a step, and a test dies just before one, just after it, or, for an
append, in its middle (a torn last line).

The kill is a BaseException (``Crash``) raised at a step, which nothing in dreaming catches, so what
is on disk then is what a kill -9 at that point leaves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.atomic import is_temp_name
from services.dreaming.records import jsonl


class Crash(BaseException):
    """The process dies here."""


@dataclass
class Steps:
    """The steps seen so far, and the one to die at: ``(index, "before" | "after" | "torn")``."""

    die_at: tuple[int, str] | None = None
    seen: list[str] = field(default_factory=list)

    def step(self, name: str, do: Callable[[], Any], tear: Callable[[], None] | None = None) -> Any:
        index = len(self.seen)
        self.seen.append(name)
        if self.die_at == (index, "before"):
            raise Crash
        result = do()
        if self.die_at == (index, "torn") and tear is not None:
            tear()
        if self.die_at is not None and self.die_at[0] == index:
            raise Crash
        return result


@contextmanager
def injected(monkeypatch: pytest.MonkeyPatch, ws: Path, steps: Steps) -> Iterator[Steps]:
    """Every rename or link into place, every removal and every journal append of ``ws`` is a step."""
    real_replace, real_link, real_unlink, real_append = os.replace, os.link, os.unlink, jsonl.append

    def name(path: Any) -> str:
        return os.path.relpath(os.fsdecode(path), ws)

    def replace(src: Any, dst: Any) -> None:
        steps.step(f"write {name(dst)}", lambda: real_replace(src, dst))

    def link(src: Any, dst: Any) -> None:
        steps.step(f"write {name(dst)}", lambda: real_link(src, dst))

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if is_temp_name(os.path.basename(os.fspath(path))):  # a temp file's clean-up is no step of its own
            real_unlink(path, *args, **kwargs)
            return
        steps.step(f"remove {name(path)}", lambda: real_unlink(path, *args, **kwargs))

    def append(path: Path, records: Any, **kwargs: Any) -> None:
        records = list(records)
        if not records:  # writes nothing
            real_append(path, records, **kwargs)
            return
        size = path.stat().st_size if path.exists() else 0

        def tear() -> None:  # the kernel ended the write early: half of it is there
            os.truncate(path, size + (path.stat().st_size - size) // 2)

        kinds = ",".join(sorted({str(r.get("kind")) for r in records}))
        steps.step(f"journal {kinds}", lambda: real_append(path, records, **kwargs), tear)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(jsonl, "append", append)
    try:
        yield steps
    finally:
        monkeypatch.undo()


def crash_points(count: int, names: list[str]) -> list[tuple[int, str]]:
    out = []
    for i in range(count):
        out += [(i, "before"), (i, "after")]
        if names[i].startswith("journal"):
            out.append((i, "torn"))
    return out


def killed_twice(monkeypatch: pytest.MonkeyPatch, fresh: Callable[[str], Path], write: Callable[[Path], Any],
                 start: Callable[[Path], Any], check: Callable[[Path], Any]) -> int:
    """``write`` killed at each of its steps, then ``start`` (the recovery) killed at each of its own
    steps, then ``start`` again and ``check``, each on a ``fresh(name)`` workspace. Returns how many
    pairs of kills were tried."""
    counting = fresh("count")
    with injected(monkeypatch, counting, Steps()) as counted:
        write(counting)
    tried = 0
    for n, point in enumerate(crash_points(len(counted.seen), counted.seen)):
        probe = fresh(f"p{n}")
        with injected(monkeypatch, probe, Steps(point)), pytest.raises(Crash):
            write(probe)
        with injected(monkeypatch, probe, Steps()) as recovery:
            start(probe)
        for m, again in enumerate(crash_points(len(recovery.seen), recovery.seen)):
            ws = fresh(f"r{n}-{m}")
            with injected(monkeypatch, ws, Steps(point)), pytest.raises(Crash):
                write(ws)
            with injected(monkeypatch, ws, Steps(again)), pytest.raises(Crash):
                start(ws)
            start(ws)
            check(ws)
            tried += 1
    return tried
