"""Servers a process needs but does not run (the KB's PostgreSQL vault), and whether each can be reached now.

docs/operations.md "When PostgreSQL is down":

- **Learnt from the calls.** A call that could not reach the server marks its dependency down
  (``Dependency.failed``, with the reason it answered), a call that reached it marks it up
  (``succeeded``). Nothing polls while the process is idle.
- **Checked when asked.** When health is asked and the last news is older than ``PROBE_CACHE_S``, the
  dependency's probe runs once (callers asking meanwhile share it), for at most ``PROBE_WAIT_S``: a
  probe still running then leaves the last news standing and finishes on its own.
- **Degraded, not down.** A dependency down makes the process *degraded*: its gRPC health service
  answers NOT_SERVING for ``DEPENDENCIES_SERVICE`` (and ``DEPENDENCIES_SERVICE/<name>``) with the
  reasons in the trailing metadata ``REASON_METADATA``, while its own service stays SERVING, since it
  still answers every call that does not need the server. The REST shim's ``/healthz`` and
  ``gateway health`` read it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

DEPENDENCIES_SERVICE: Final = "gateway.dependencies"
REASON_METADATA: Final = "x-gateway-dependency-bin"  # one value per dependency down: "label: reason", UTF-8
PROBE_CACHE_S: Final = 2.0
PROBE_WAIT_S: Final = 0.5  # well under the shim's 1 s health deadline and the CLI's 3 s

Probe = Callable[[], "str | None"]  # why the server cannot be reached now; None when it can


class Dependency:
    """One server the process needs: ``name`` (in a health service name), ``label`` (in a message),
    and what the calls and ``probe`` last learnt of it."""

    def __init__(self, name: str, label: str, probe: Probe | None = None, *,
                 clock: Callable[[], float] = time.monotonic, cache_s: float = PROBE_CACHE_S) -> None:
        self.name = name
        self.label = label
        self._probe = probe
        self._clock = clock
        self._cache_s = cache_s
        self._reason: str | None = None
        self._at = float("-inf")  # when the last news came
        self._lock = threading.Lock()
        self._probing: Future[None] | None = None

    def failed(self, reason: str) -> None:
        """A call could not reach the server, for ``reason``."""
        self._reason, self._at = reason, self._clock()

    def succeeded(self) -> None:
        """A call reached the server."""
        self._reason, self._at = None, self._clock()

    @property
    def reason(self) -> str | None:
        """Why the server could not be reached at the last news (None: it could), probing nothing."""
        return self._reason

    def check(self, wait_s: float = PROBE_WAIT_S) -> str | None:
        """Why the server cannot be reached (None: it can): the last news when fresh, else the probe's
        answer if it comes within ``wait_s``, else the last news."""
        if self._probe is None or self._clock() - self._at < self._cache_s:
            return self._reason
        with self._lock:
            running = self._probing
            if running is None:
                running = self._probing = Future()
                threading.Thread(target=self._run_probe, args=(running,), name=f"probe-{self.name}", daemon=True).start()
        _wait(running, wait_s)
        return self._reason

    def _run_probe(self, done: Future[None]) -> None:
        assert self._probe is not None
        try:
            found = self._probe()
            self._reason, self._at = found, self._clock()
        except Exception as exc:  # noqa: BLE001 - a probe that breaks says the server cannot be reached
            self._reason, self._at = f"its check failed ({type(exc).__name__})", self._clock()
        finally:
            with self._lock:
                self._probing = None
            done.set_result(None)

    def describe(self, reason: str) -> str:
        return f"{self.label}: {reason}"


def _wait(running: Future[None], wait_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        running.result(timeout=wait_s)


class Dependencies:
    """The process's dependencies, by name."""

    def __init__(self) -> None:
        self._all: dict[str, Dependency] = {}

    def add(self, dependency: Dependency) -> None:
        self._all[dependency.name] = dependency

    def remove(self, name: str) -> None:
        self._all.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._all)

    def down(self, name: str | None = None) -> list[str]:
        """``label: reason`` of each dependency (or of ``name`` alone) that cannot be reached now
        (``Dependency.check``: may wait up to ``PROBE_WAIT_S``); KeyError for an unknown name."""
        chosen = list(self._all.values()) if name is None else [self._all[name]]
        found = [(d, d.check()) for d in chosen]
        return [d.describe(reason) for d, reason in found if reason is not None]


DEPENDENCIES = Dependencies()  # the process's own (the KB adds its PostgreSQL vault's)
