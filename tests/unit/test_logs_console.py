"""Lines for a person on a terminal (gateway.logs ``Console``), the flags that choose them, and the JSON line kept as it was."""

from __future__ import annotations

import io
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog

from gateway import logs
from gateway.logs import Console
from gateway_cli import cli, log_options

COLOUR = re.compile(rb"\x1b\[[0-9;]*m")
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[(\w+)\s*\] (\S+)\s+\[(\w+)\] ?(.*)$")


class Stdout(io.BytesIO):
    @property
    def text(self) -> str:
        return self.getvalue().decode()


Configure = Callable[..., Stdout]


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Configure]:
    """``configure`` as a process of the suite runs it, writing to a buffer; undone afterwards."""
    saved = structlog.get_config()
    processors = list(saved["processors"])
    for name in ("_stdout", "_chain", "_level"):
        monkeypatch.setattr(logs, name, getattr(logs, name))

    def configure(service: str, level: int = logging.INFO, console: Console | None = None) -> Stdout:
        buffer = Stdout()
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buffer))
        logs.configure(service, level, console=console)
        return buffer

    yield configure
    structlog.configure(**{**saved, "processors": processors})


def test_the_json_line_is_as_it_was(configured: Configure) -> None:
    # Outside checks parse these bytes: the keys, their order, the stamp.
    out = configured("file_api")
    fields = {"method": "GetFile", "agent": "alfred", "key": "ops", "code": "OK", "ms": 0.02}
    structlog.get_logger().info("rpc", **fields, **{logs.STAMP_AT: 1_796_170_000.25})
    logs._log_lines([("rpc", fields, 1_796_170_000.25)])
    line = (b'{"method":"GetFile","agent":"alfred","key":"ops","code":"OK","ms":0.02,"event":"rpc",'
            b'"service":"file_api","level":"info","timestamp":"2026-12-02T00:06:40.250000Z"}\n')
    assert out.getvalue() == line * 2


def test_a_console_line_reads_time_level_event_service_then_fields(configured: Configure) -> None:
    out = configured("kb", console=Console())
    log = structlog.get_logger()
    log.info("listening", address="127.0.0.1:50053", loop="uvloop")
    log.warning("config_mode", detail="it is now 0600")
    assert [LINE.match(line).groups() for line in out.text.splitlines()] == [  # type: ignore[union-attr]
        ("info", "listening", "kb", "address=127.0.0.1:50053 loop=uvloop"),  # in the order they were logged
        ("warning", "config_mode", "kb", "detail='it is now 0600'"),
    ]
    assert not COLOUR.search(out.getvalue())


def test_a_console_batch_is_stamped_with_its_moment_in_local_time(configured: Configure) -> None:
    out = configured("http", console=Console(verbose=True))
    logs._log_lines([("http", {"status": 200}, 1_796_170_000.25)] * 2)
    stamp = time.strftime(logs.CONSOLE_TIME, time.localtime(1_796_170_000.25))
    assert [line.startswith(f"{stamp} [info") and line.endswith("[http] status=200") for line in out.text.splitlines()] == [True, True]


@pytest.mark.parametrize("verbose", [False, True])
def test_a_terminal_drops_the_per_request_and_stopping_lines_unless_verbose(configured: Configure, verbose: bool) -> None:
    out = configured("file_api", console=Console(verbose=verbose))
    log = structlog.get_logger()
    log.info("rpc", method="GetFile")  # as the watcher's stream logs it, directly
    logs._log_lines([("rpc", {"method": "GetFile"}, 1.0), ("composed", {"agent": "alfred"}, 1.0)])  # as the batch does
    log.info("stopping", grace_s=5)
    log.info("stopped")
    events = [LINE.match(line).group(2) for line in out.text.splitlines()]  # type: ignore[union-attr]
    if verbose:
        assert events == ["rpc", "rpc", "composed", "stopping", "stopped"]
    else:
        assert events == ["composed", "stopped"]


def test_console_colours_only_when_asked(configured: Configure) -> None:
    out = configured("kb", console=Console(colors=True))
    structlog.get_logger().info("listening")
    assert COLOUR.search(out.getvalue())


def test_a_console_exception_is_a_plain_traceback_without_local_variables(configured: Configure) -> None:
    out = configured("kb", console=Console())
    log = structlog.get_logger()

    def fails(api_key: str) -> None:
        raise ValueError("bad")

    key = "gw_" + "secret_value"  # in no source line the traceback quotes
    try:
        fails(key)
    except ValueError:
        log.exception("rpc_failed", method="GetFile")
    text = out.text
    assert "Traceback (most recent call last):" in text and "ValueError: bad" in text
    assert key not in text


class Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.parametrize(
    ("log_format", "terminal", "env", "expected"),
    [
        ("auto", True, {}, Console(colors=True)),
        ("auto", True, {"NO_COLOR": "1"}, Console(colors=False)),
        ("auto", True, {"NO_COLOR": ""}, Console(colors=True)),  # no-color.org: set and not empty
        ("auto", False, {}, None),
        ("json", True, {}, None),
        ("console", False, {}, Console(colors=False)),
    ],
)
def test_the_format_is_chosen_by_the_flag_then_the_stream(log_format: str, terminal: bool, env: dict[str, str], expected: Any) -> None:
    assert log_options.console_for(log_format, False, Stream(terminal), env) == expected


def test_a_stream_that_cannot_say_is_no_terminal() -> None:
    closed = io.StringIO()
    closed.close()
    assert log_options.console_for("auto", False, closed, {}) is None


def test_up_passes_its_choice_to_every_child() -> None:
    assert log_options.child_arguments(None) == ["--log-format", "json"]
    assert log_options.child_arguments(Console(colors=True)) == ["--log-format", "console"]
    assert log_options.child_arguments(Console(verbose=True)) == ["--log-format", "console", "--verbose"]


@pytest.mark.parametrize("command", [["up"], ["serve", "kb"]])
def test_up_and_serve_take_the_log_flags(command: list[str]) -> None:
    parser = cli._parser()
    assert (parser.parse_args(command).log_format, parser.parse_args(command).verbose) == ("auto", False)
    args = parser.parse_args([*command, "--log-format", "json", "--verbose"])
    assert (args.log_format, args.verbose) == ("json", True)
    with pytest.raises(SystemExit):
        parser.parse_args([*command, "--log-format", "yaml"])
