"""Worker processes that parse sources for a large bulk refresh, so parsing gets cores of its own.

Python parsing (``indexer_parse``) and SQLite's writing are the two halves of a
full index; threads cannot overlap them well (the parser holds the GIL, and every
row the writer binds needs it back). A ``ParseWorker`` is one process that runs
``indexer_parse.parse_batches`` over one or more *parts* (runs of consecutive
sources) and streams the outcome batches back, part after part, while the
caller writes earlier ones. When it is done it sends the lifecycle rows of all
its parts (``lifecycle_json``).

- The process is *spawned*: a fresh interpreter (``sys.executable``), never a
  fork of the caller (the KB service is an asyncio gRPC process with threads). It
  is started with ``subprocess`` rather than a multiprocessing context on purpose:
  a multiprocessing "spawn" child first re-imports the caller's ``__main__``
  module, so a script without an ``if __name__ == "__main__"`` guard that
  refreshes an archive would run again in the child (and a child that dies there
  leaves the parent blocked writing the arguments). This child imports only the
  lean parsing modules; the caller's ``sys.path``, then the job, go over its stdin.
- Messages come back over its stdout as length-prefixed pickles; the child's own
  ``sys.stdout`` is pointed at its stderr, so a stray print cannot corrupt them.
- It runs at a lower priority (``WORKER_NICENESS``): the caller's writer is the
  critical path, and the service's other requests stay responsive meanwhile.
- It never outlives the caller: ``close`` (the caller's ``finally``) kills it
  unless it finished; if the caller dies, the pipe breaks and the worker exits at
  its next send, and it checks that its parent is still its parent before each
  batch.
- Errors propagate: an exception in the worker arrives as ``ParseWorkerError``
  carrying the worker's traceback, and a worker that dies (killed, crashed)
  raises ``ParseWorkerError`` with its exit status; the caller's transaction
  then rolls back like after any other failure.

A sender thread in the worker sends batches as they are ready and keeps the rest
queued, so the worker never waits for the caller: a caller reading another
worker's slice first finds this one's batches ready.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from services.kb.index.indexer_parse import LifecycleRow, Outcome, SourceFile, lifecycle_json, parse_batches

_LENGTH: Final = struct.Struct("<Q")
_STOP_SECONDS: Final = 5.0
WORKER_NICENESS: Final = 10  # added to the worker's nice value (os.nice)
# The child's first statement: the caller's sys.path (so the job unpickles as it would here), then main().
_BOOT: Final = "import pickle, sys; sys.path[:0] = pickle.load(sys.stdin.buffer); " f"from {__name__} import main; main()"

# parse_batches' signature: a module-level function, so that it pickles by name.
Batches = Callable[..., Iterator[list[Outcome]]]


class ParseWorkerError(RuntimeError):
    """A parse worker failed: the message holds its traceback, or how it exited."""


class ParseWorker:
    """One spawned process parsing ``files`` (with the default reader); read its batches
    with ``batches()``, then ``lifecycle``; always ``close()`` it."""

    def __init__(
        self,
        root: Path,
        files: list[SourceFile],
        chunk_tokens: int,
        chunk_overlap: int,
        batch_chunks: int,
        batches: Batches = parse_batches,
        parts: list[int] | None = None,
    ) -> None:
        """Start the process; OSError when it cannot be started. ``parts``: the lengths of
        the consecutive runs ``files`` is made of (one run by default); ``batches()`` yields
        those of one part per call, their positions counted from the part's first file."""
        if not sys.executable:  # an embedded interpreter: nothing to spawn
            raise OSError("no sys.executable to start a parse worker with")
        self.lifecycle: str | None = None  # the slice's lifecycle rows (lifecycle_json), once done
        self._done = False
        self._process = subprocess.Popen(
            [sys.executable, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True
        )
        assert self._process.stdin is not None
        job = (os.fspath(root), files, parts or [len(files)], chunk_tokens, chunk_overlap, batch_chunks, batches)
        try:
            # A worker that died before reading the job breaks the pipe: batches() reports how.
            with contextlib.suppress(BrokenPipeError), self._process.stdin:
                self._process.stdin.write(pickle.dumps(sys.path) + pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        except BaseException:
            self.close()
            raise

    def batches(self) -> Iterator[list[Outcome]]:
        """The outcome batches of the next part, in file order; ParseWorkerError if the worker fails."""
        while (message := self._receive())[0] == "batch":
            yield message[1]
        if message[0] != "end":
            raise ParseWorkerError(f"the parse worker sent {message[0]!r} where a part should end")

    def finish(self) -> str:
        """After the last part: the lifecycle rows of every part (``lifecycle_json``)."""
        kind, payload = self._receive()
        if kind != "done" or not isinstance(payload, str):
            raise ParseWorkerError(f"the parse worker sent {kind!r} after its last part")
        self.lifecycle, self._done = payload, True
        return payload

    def _receive(self) -> tuple[str, Any]:
        stdout = self._process.stdout
        assert stdout is not None
        head = stdout.read(_LENGTH.size)
        size = _LENGTH.unpack(head)[0] if len(head) == _LENGTH.size else -1
        data = stdout.read(size) if size >= 0 else b""
        if len(data) != size:
            raise ParseWorkerError(f"the parse worker exited early (exit status {self._status()})")
        kind, payload = pickle.loads(data)
        if kind == "error":
            raise ParseWorkerError(f"the parse worker failed:\n{payload}")
        return kind, payload

    def close(self) -> None:
        """Let a worker that finished exit; kill any other (a worker still sending gets a broken pipe)."""
        assert self._process.stdout is not None
        self._process.stdout.close()
        if not (self._done and self._status() is not None):
            self._process.kill()
            self._process.wait()

    def _status(self) -> int | None:
        try:
            return self._process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            return None


def serve(out: IO[bytes], source: IO[bytes]) -> None:
    """The worker's work: read the job from ``source``; per part, send ("batch", outcomes)
    messages to ``out`` and then ("end", None); then ("done", lifecycle rows). Or
    ("error", traceback) when anything raised."""
    parent = os.getppid()
    outbox: queue.Queue[bytes | None] = queue.Queue()

    def send() -> None:
        try:
            while (data := outbox.get()) is not None:
                out.write(_LENGTH.pack(len(data)))
                out.write(data)
                out.flush()
        except OSError:  # the caller closed its end or is gone: nobody wants the rest
            os._exit(1)

    sender = threading.Thread(target=send, name="kb-index-send", daemon=True)
    sender.start()
    try:
        root, files, parts, chunk_tokens, chunk_overlap, batch_chunks, batches = pickle.load(source)
        lifecycle: list[LifecycleRow] = []
        first = 0
        for length in parts:
            part = files[first : first + length]
            first += length
            for batch in batches(Path(root), part, chunk_tokens, chunk_overlap, batch_chunks, lifecycle=lifecycle):
                if os.getppid() != parent:  # orphaned: the caller died without closing the pipe yet
                    os._exit(1)
                outbox.put(pickle.dumps(("batch", batch), protocol=pickle.HIGHEST_PROTOCOL))
            outbox.put(pickle.dumps(("end", None), protocol=pickle.HIGHEST_PROTOCOL))
        message: tuple[str, str] = ("done", lifecycle_json(lifecycle))
    except BaseException:  # noqa: BLE001 - everything goes to the caller, which rolls back
        message = ("error", traceback.format_exc())
    outbox.put(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
    outbox.put(None)
    sender.join()


def main() -> None:
    """The worker's entry point (``_BOOT``): the job on stdin, messages on stdout."""
    gc.disable()  # short-lived and acyclic: collections would only rescan what parsing keeps
    # Below the caller's priority: the caller's writer is the critical path of a bulk refresh
    # (it waits on no one once batches are ready), and the service's other work stays responsive.
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # prints go to stderr, never into the messages
    serve(out, sys.stdin.buffer)
    out.close()
