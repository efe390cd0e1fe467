"""The machinery of test_docs_examples.py: the pages' fenced blocks, the two suites a reader's
checkout runs, and a ``Tour`` that runs a block as the pages say and compares what it prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreaming_support import far_slot
from suite_support import START_DEADLINE_S, Suite, free_ports, grpc_serving, wait_until

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/getting-started.md", *sorted(f"docs/how-to/{p.name}" for p in (ROOT / "docs" / "how-to").glob("*.md")))
DOC_PORT = "10850"
SERVICES = ("file_api", "watcher", "kb", "dreaming", "http")
BLOCK_TIMEOUT_S = 120
BASE_PATH = "/usr/bin:/bin"  # curl, jq, less, seq; never the gateway command nor claude
# Stand-ins for the viewers the pages pipe into, where the machine has none (a fresh machine may lack
# jq and less): jq with no filter pretty-prints the JSON it reads, less not on a terminal copies.
STAND_INS = {
    "jq": f"#!/bin/sh\nexec \"{sys.executable}\" -c 'import json, sys; print(json.dumps(json.load(sys.stdin), indent=2))'\n",
    "less": "#!/bin/sh\nexec cat \"$@\"\n",
}


# --- the pages' fenced blocks -------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    text: str  # without the fence's indentation

    @property
    def checked(self) -> bool:
        """A block that must be run or skipped: a command, an MCP set-up, or one that says nothing of what it is."""
        return self.lang in ("", "sh", "bash", "shell", "console") or (self.lang == "json" and "mcpServers" in self.text)


FENCE = re.compile(r"^( *)```(\S*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)


def blocks(page: str) -> list[Block]:
    source = (ROOT / page).read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(source):
        indent = len(m.group(1))
        text = "".join(line[indent:] if line[:indent].isspace() else line for line in m.group(3).splitlines(keepends=True))
        found.append(Block(page, source.count("\n", 0, m.start()) + 1, m.group(2), text))
    return found


# --- the checkout, its two homes and their suites -----------------------------------------------


def place_on_free_ports(home: Path) -> None:
    """Rewrite the home's config.json for free ports and no scheduled dream while the test runs."""
    raw: dict[str, Any] = json.loads((home / "config.json").read_text())
    picked = free_ports(10)
    gateway = raw.setdefault("gateway", {})
    gateway["grpc"] = {"host": "127.0.0.1", **dict(zip(("fileApi", "watcher", "kb", "dreaming"), picked[:4], strict=True))}
    gateway.setdefault("api", {})["port"] = picked[4]
    gateway["metrics"] = {"host": "127.0.0.1", **dict(zip(("fileApi", "watcher", "kb", "dreaming", "http"), picked[5:], strict=True))}
    gateway.setdefault("dreaming", {}).update({"enabled": True, **far_slot()})
    (home / "config.json").write_text(json.dumps(raw, indent=2))
    os.chmod(home / "config.json", 0o600)


def suite_of(home: Path) -> Suite:
    gateway = json.loads((home / "config.json").read_text())["gateway"]
    ports = {k: v for k, v in gateway["grpc"].items() if k != "host"}
    return Suite(home, gateway["api"]["port"], ports)


def launch(suites: list[Suite]) -> None:
    """Start every process of every suite at once, then wait for each to answer its health check."""
    for suite in suites:
        for name in SERVICES:
            with open(suite.log_path(name), "ab") as log:
                suite.procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "gateway_cli.cli", "serve", name, "--home", str(suite.home)],
                    cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    for suite in suites:
        for name in SERVICES:
            if name == "http":
                wait_until(suite._http_up, START_DEADLINE_S, f"the REST shim of {suite.home.name}")
            else:
                wait_until(lambda: grpc_serving(suite.address(name)), START_DEADLINE_S, f"{name} of {suite.home.name}")


@dataclass
class Tour:
    """A repo checkout with var/demo (``make demo``) and var/gateway (``make up``) running."""

    repo: Path
    tmp: Path
    demo: Suite
    gw: Suite
    admin_key: str  # var/gateway's, from its admin-key.txt
    state: dict[str, Any] = field(default_factory=dict)
    base_path: str = BASE_PATH  # with the stand-ins' folder first when the machine needed one

    def env(self, suite: Suite | None = None, **extra: str) -> dict[str, str]:
        """The environment of a second terminal; with ``suite``, GATEWAY_HOME and PATH set as the pages say."""
        env = {"PATH": self.base_path, "HOME": str(self.tmp), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        if suite is not None:
            env.update(GATEWAY_HOME=str(suite.home), PATH=f"{self.repo}/.venv/bin:{self.base_path}")
        env.update(extra)
        return env

    def sh(self, text: str, suite: Suite | None, env: dict[str, str] | None = None) -> str:
        """Run a ``sh`` block from the repo root against ``suite``'s port; its stdout (the block must succeed)."""
        if suite is not None:
            text = text.replace(DOC_PORT, str(suite.http_port))
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=self.repo, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT_S, env=env if env is not None else self.env())
        assert done.returncode == 0, f"exit {done.returncode}\n--- block\n{text}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        return done.stdout

    def console(self, text: str, env: dict[str, str], paths: dict[str, str]) -> None:
        """Run each ``$`` line of a ``console`` block; what it prints must be the lines shown under it."""
        for command, shown in session(text):
            expected = shown
            for doc_path, real in paths.items():
                expected = expected.replace(doc_path, real)
            done = subprocess.run(["bash", "-c", command], cwd=self.repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=BLOCK_TIMEOUT_S, env=env)
            assert like(expected).fullmatch(done.stdout.rstrip("\n")), f"$ {command}\n--- shown\n{expected}\n--- printed\n{done.stdout}"


def session(text: str) -> list[tuple[str, str]]:
    """A console block's commands, each with the output shown under it."""
    pairs: list[tuple[str, list[str]]] = []
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        else:
            assert pairs, f"output before the first command: {line!r}"
            pairs[-1][1].append(line)
    return [(command, "\n".join(out)) for command, out in pairs]


ANY = {"key": r"gw_[A-Za-z0-9_-]{43}", "time": r"\d{8}T\d{6}", "lines": r"[\s\S]*?"}
VARIABLE = re.compile(r"(?P<key>gw_[A-Za-z0-9_-]{43})|(?P<time>\b\d{8}T\d{6}\b)|(?P<lines>^…$)", re.M)


def like(shown: str) -> re.Pattern[str]:
    """A pattern for output shown in a page: literal, but for a key, a timestamp or a line ``…``."""
    parts, pos = [], 0
    for m in VARIABLE.finditer(shown):
        parts += [re.escape(shown[pos:m.start()]), ANY[m.lastgroup or ""]]
        pos = m.end()
    return re.compile("".join([*parts, re.escape(shown[pos:])]))


def json_values(out: str) -> list[Any]:
    """Every JSON value printed one after the other (curl -s without a newline, jq's pretty print)."""
    decoder, values, pos = json.JSONDecoder(), [], 0
    while True:
        while pos < len(out) and out[pos].isspace():
            pos += 1
        if pos == len(out):
            return values
        value, pos = decoder.raw_decode(out, pos)
        values.append(value)


def shown_answers(text: str) -> list[Any]:
    """The answers a block shows as comments: each line ``# {…}``."""
    return [json.loads(line[2:]) for line in text.splitlines() if line.startswith("# {")]


def memory(suite: Suite, agent: str = "alfred") -> str:
    path = suite.home / "agents" / agent / "workspace" / "MEMORY.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""
