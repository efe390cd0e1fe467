"""KB processes forked from one that has already imported the KB, for a test that starts the KB many
times: a start without an interpreter's start-up and imports, which are nine tenths of a KB start's CPU.

``ForkServer()`` runs this file as a child process. It imports ``gateway_cli.cli`` and what
``gateway serve kb`` imports, then, for each home sent on its stdin, forks a process that runs
``gateway serve kb --home HOME`` (``gateway_cli.cli.main``) with its output in the log given, and
answers with that process's id. It makes no thread, channel or event loop before it forks: each
forked process starts them as a KB started from a shell does, on its own home.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import NoReturn

READY = "ready"
# What ``gateway serve kb`` imports: once here, not in every forked process.
PRELOADED = ("gateway_cli.cli", "gateway.event_loop", "gateway.live_config", "gateway.logs", "gateway.resources",
             "gateway.temp_sweep", "services.kb.main")


class Forked:
    """A KB forked by the server: what a test does with a ``Popen`` (signal, wait, kill)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float = 60.0) -> None:
        """Return once the process is gone (the server's kernel reaps it); TimeoutExpired after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kb {self.pid}", timeout)
            time.sleep(0.01)


class ForkServer:
    """The forking process; ``start_kb`` may be called from several threads."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._lock = threading.Lock()
        said = self._read()
        if said != READY:
            raise RuntimeError(f"the KB fork server did not start: {said!r}")

    def _read(self) -> str:
        assert self._proc.stdout is not None
        return self._proc.stdout.readline().strip()

    def start_kb(self, home: Path, log: Path) -> Forked:
        """A new ``gateway serve kb --home home`` writing to ``log``."""
        assert self._proc.stdin is not None
        with self._lock:
            self._proc.stdin.write(json.dumps([str(home), str(log)]) + "\n")
            self._proc.stdin.flush()
            return Forked(int(self._read()))

    def close(self) -> None:
        """End the server (its end of input); the KBs it forked are the caller's to stop."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(15)
        self._proc.stdout.close()


def _serve_kb(home: str, log: str) -> NoReturn:
    """In the forked process: ``gateway serve kb --home home``, its output in ``log``; never returns."""
    from gateway_cli.cli import main

    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the KB waits for its own parse workers
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(nothing)
        code = main(["serve", "kb", "--home", home])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception:  # noqa: BLE001 - into its log, as the interpreter would print it
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve_forks() -> None:
    for name in PRELOADED:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forked processes
    print(READY, flush=True)
    for line in sys.stdin:
        home, log = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _serve_kb(home, log)
        print(pid, flush=True)


if __name__ == "__main__":
    _serve_forks()
