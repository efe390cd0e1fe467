"""Run the reviewer command and read its reply (the reviewer protocol, docs/concepts/reviewer.md "The reviewer").

``run_reviewer`` starts ``reviewerCommand`` with the prompt on stdin and turns
whatever happens into a ``ReviewerOutcome``; it never raises for what the
reviewer does (a missing executable, a crash, a timeout, a flood of output, a
reply of the wrong shape all give ``ok=False``, zero proposals and a one-line
``reason``), because a failed reviewer must never fail a dreaming run.

The child:

- is started with ``create_subprocess_exec`` (never a shell) in its own
  session, so its process group is its own: a timeout or an output flood kills
  the whole group (SIGKILL), grandchildren included, and reaps the leader. The
  group is also killed when the reviewer ends, so nothing it started outlives
  the call;
- gets exactly the environment ``env`` the caller passes. ``reviewer_environment``
  builds the usual one from the gateway's environment (read once, in the entry
  point): an allowlist of what a CLI needs to run and authenticate (PATH, HOME,
  locale, temp dir, proxies and CA files, ``ANTHROPIC_*`` / ``CLAUDE_*``); the
  gateway's own settings and every other variable stay out. Without ``env``
  the child gets only a default PATH and a UTF-8 locale: the gateway's
  environment is never inherited by accident;
- has its stdout read incrementally and capped (``max_stdout``) and its stderr
  drained concurrently into a short tail (for the reason), so neither pipe can
  block it or us.

A first element ``gateway`` is this installation's own command, and a command
that cannot start gets a reason with the fix (``reviewer_command``).

Its stdout is read by ``reply.parse_reply``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from services.dreaming.model.values import (
    ReviewerOutcome,
    ReviewerReply,
)
from services.dreaming.review.reply import REASON_CAP, ReplyError, one_line, parse_reply
from services.dreaming.review.reviewer_command import resolve_command, start_failure

STDERR_TAIL: Final = 4096  # bytes of stderr kept for the reason
SETTLE_S: Final = 2.0  # seconds to wait for the pipes' EOF once the group is dead
_CHUNK: Final = 65536


_PASSED_NAMES: Final = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
})
_PASSED_PREFIXES: Final = ("LC_", "ANTHROPIC_", "CLAUDE_")
_DEFAULT_ENV: Final = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def reviewer_environment(source: Mapping[str, str]) -> dict[str, str]:
    """The reviewer's environment built from ``source`` (the gateway's, read by the entry point).

    Keeps only the allowlist of the module docstring; PATH and LANG default to
    a system PATH and ``C.UTF-8`` when ``source`` lacks them.
    """
    kept = {k: v for k, v in source.items() if k in _PASSED_NAMES or k.startswith(_PASSED_PREFIXES)}
    return {**_DEFAULT_ENV, **kept}


class _TooMuchOutput(Exception):
    """The reviewer wrote more than the stdout cap."""


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the reviewer's group; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the prompt and close stdin. A reviewer that exits without reading it is not an error."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.close()
        await stdin.wait_closed()


async def _read_capped(stdout: asyncio.StreamReader, limit: int, into: bytearray) -> None:
    """Read stdout to EOF into ``into``; raise _TooMuchOutput as soon as it passes ``limit`` bytes."""
    while chunk := await stdout.read(_CHUNK):
        into += chunk
        if len(into) > limit:
            raise _TooMuchOutput


async def _drain_tail(stderr: asyncio.StreamReader, into: bytearray) -> None:
    """Read stderr to EOF, keeping only its last ``STDERR_TAIL`` bytes."""
    while chunk := await stderr.read(_CHUNK):
        into += chunk
        del into[:-STDERR_TAIL]


async def _exchange(proc: asyncio.subprocess.Process, data: bytes, limit: int, out: bytearray) -> int:
    """Feed stdin while reading stdout (a large prompt must not deadlock), then wait for the exit."""
    assert proc.stdin is not None and proc.stdout is not None
    feeder = asyncio.create_task(_feed(proc.stdin, data))
    try:
        await _read_capped(proc.stdout, limit, out)
        return await proc.wait()
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)


async def _discard(stream: asyncio.StreamReader) -> None:
    while await stream.read(_CHUNK):
        continue  # read and dropped: a full pipe would block the reviewer


async def _settle(proc: asyncio.subprocess.Process, drainer: asyncio.Task[None]) -> None:
    """Read both pipes to EOF, so their transports close and no fd is left behind.

    The group is dead, so EOF comes at once; the bound is for a process that
    left the group (setsid) still holding a pipe: then the transport is closed
    directly (asyncio has no public way to give up on a child's pipes).
    """
    assert proc.stdout is not None
    rest = asyncio.create_task(_discard(proc.stdout))
    _done, pending = await asyncio.wait({drainer, rest}, timeout=SETTLE_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    transport = getattr(proc, "_transport", None)
    if pending and transport is not None:
        transport.close()


def _stderr_hint(tail: bytearray) -> str:
    text = one_line(tail.decode("utf-8", errors="replace"))
    return f": {text[-REASON_CAP:]}" if text else ""


@dataclass(frozen=True)
class CommandOutcome:
    """What the reviewer process did: its stdout when it exited 0 in time (``ok``), else the
    one-line ``reason``; ``seconds`` it took and the bytes it wrote to stdout."""

    ok: bool
    stdout: str = ""
    reason: str = ""
    seconds: float = 0.0
    nbytes: int = 0


async def run_command(
    command: Sequence[str],
    prompt: str,
    timeout_s: float,
    *,
    max_stdout: int = 1 << 20,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandOutcome:
    """Run ``command`` with ``prompt`` on stdin for at most ``timeout_s`` seconds: its stdout, or why
    not. The process rules of the module docstring; never raises for what the reviewer does.
    Cancelling the call kills the group too. ``run_reviewer`` reads the nightly reply from it; the
    vault's reflection reads its own."""
    started = time.monotonic()

    def outcome(ok: bool, reason: str = "", stdout: str = "", nbytes: int = 0) -> CommandOutcome:
        return CommandOutcome(ok, stdout, reason, round(time.monotonic() - started, 3), nbytes)

    if not command:
        return outcome(False, "the reviewer command is empty")
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *resolve_command(command),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else dict(_DEFAULT_ENV),
        start_new_session=True,  # its own process group, so a kill reaches its children
    ))
    cancelled = False
    while True:
        # The child runs before asyncio has connected its pipes: a cancel in between must wait
        # for the spawn, so that the group is killed below (not left running, nor waited for).
        try:
            proc = await asyncio.shield(spawn)
            break
        except asyncio.CancelledError:
            cancelled = True
        except OSError as exc:
            if cancelled:
                raise asyncio.CancelledError from None
            return outcome(False, start_failure(command, exc, env if env is not None else _DEFAULT_ENV))

    assert proc.stderr is not None
    out = bytearray()
    err = bytearray()
    drainer = asyncio.create_task(_drain_tail(proc.stderr, err))
    failure = ""
    code: int | None = None
    try:
        if cancelled:
            raise asyncio.CancelledError  # cancelled while spawning: the group goes at once
        data = prompt.encode("utf-8", errors="replace")
        code = await asyncio.wait_for(_exchange(proc, data, max_stdout, out), timeout_s)
    except TimeoutError:
        failure = f"timed out after {timeout_s:g} s"
    except _TooMuchOutput:
        failure = f"more than {_size(max_stdout)} on stdout"
    finally:
        # Whatever happened, nothing the reviewer started outlives the call.
        _kill_group(proc.pid)
        # Pipes first: asyncio's wait() returns only once every pipe is closed, and a
        # pipe left unread (after a flood) would never close.
        await _settle(proc, drainer)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), SETTLE_S)
    nbytes = len(out)
    if failure:
        return outcome(False, failure + _stderr_hint(err), nbytes=nbytes)
    if code != 0:
        status = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        return outcome(False, status + _stderr_hint(err), nbytes=nbytes)
    return outcome(True, stdout=out.decode("utf-8", errors="replace"), nbytes=nbytes)


async def run_reviewer(
    command: Sequence[str],
    prompt: str,
    timeout_s: float,
    *,
    max_stdout: int = 1 << 20,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ReviewerOutcome:
    """Run ``command`` with ``prompt`` on stdin for at most ``timeout_s`` seconds and parse its reply.

    ``env`` is the child's whole environment (see ``reviewer_environment``);
    None gives only a default PATH and LANG. A first element ``gateway`` is
    this installation's command (``resolve_command``). ``cwd`` is its working folder
    (None: ours). More than ``max_stdout`` bytes on stdout, or the timeout,
    kill the whole process group. Never raises for what the reviewer does
    (rules in the module docstring); ``ok`` is true only for a zero exit whose
    output ``parse_reply`` accepts. Cancelling the call kills the group too.
    """
    done = await run_command(command, prompt, timeout_s, max_stdout=max_stdout, cwd=cwd, env=env)
    if not done.ok:
        return ReviewerOutcome(ReviewerReply(), False, done.reason, done.seconds, done.nbytes)
    try:
        reply = parse_reply(done.stdout)
    except ReplyError as exc:
        return ReviewerOutcome(ReviewerReply(), False, str(exc), done.seconds, done.nbytes)
    return ReviewerOutcome(reply, True, "", done.seconds, done.nbytes)
