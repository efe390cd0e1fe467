"""``gateway keys add|list|revoke`` and ``gateway agents add|list``, through the CLI on a temp home."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_config
from gateway.home import ensure_home
from gateway_cli.cli import main


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    assert ensure_home(home) is not None  # the first-start config: alfred and the admin key
    return home


def gateway(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--home", str(home)])
    out = capsys.readouterr()
    return code, out.out, out.err


def config_of(home: Path) -> dict[str, Any]:
    return json.loads((home / "config.json").read_text())


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


# --- keys add ----------------------------------------------------------------


def test_keys_add_prints_the_key_once_and_stores_only_its_hash(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gateway(capsys, home, "keys", "add", "ci", "--agents", "alfred", "--write")
    assert code == 0
    [key] = out.splitlines()
    assert key.startswith("gw_") and len(key) >= 40
    assert "shown only this once" in err and key not in err
    text = (home / "config.json").read_text()
    assert key not in text
    entry = config_of(home)["gateway"]["api"]["keys"][-1]
    assert entry == {"name": "ci", "keySha256": hashlib.sha256(key.encode()).hexdigest(), "agents": ["alfred"], "write": True}
    [ci] = [k for k in load_config(home).api.keys if k.label == "ci"]
    assert ci.digest == hashlib.sha256(key.encode()).digest() and ci.covers("alfred") and not ci.covers("bob")


def test_keys_add_keeps_the_rest_of_the_file_and_writes_0600(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = config_of(home)
    before["gateway"]["memory"]["memoryBudgetChars"] = 1234
    before = {"agents": before["agents"], **before}  # the user's own key order: agents first
    (home / "config.json").write_text(json.dumps(before))
    os.chmod(home / "config.json", 0o644)
    assert gateway(capsys, home, "keys", "add", "reader", "--agents", "*")[0] == 0
    after = config_of(home)
    assert list(after) == list(before)  # key order as the user wrote it
    assert after["gateway"]["memory"] == {"writeRouting": True, "memoryBudgetChars": 1234}
    assert after["gateway"]["api"]["keys"][:-1] == before["gateway"]["api"]["keys"]
    assert after["gateway"]["api"]["keys"][-1]["agents"] == "*" and after["gateway"]["api"]["keys"][-1]["write"] is False
    assert mode_of(home / "config.json") == 0o600


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["admin", "--agents", "*"], "a key named 'admin' exists already; pick another name, or first: gateway keys revoke admin"),
        (["bad name", "--agents", "*"], "'bad name' is not a key name"),
        (["../x", "--agents", "*"], "'../x' is not a key name"),
        (["ci\n", "--agents", "*"], "'ci\\n' is not a key name"),
        (["ci", "--agents", "alfred,carol"], "agent 'carol' is not configured (add it with: gateway agents add carol); no key was added"),
        (["ci", "--agents", "alfred,*"], "--agents '*' means every agent and stands alone"),
        (["ci", "--agents", " , "], "--agents needs agent ids"),
    ],
    ids=["duplicate", "space", "path", "newline", "unknown agent", "star in a list", "empty"],
)
def test_keys_add_refuses_and_changes_nothing(home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    before = (home / "config.json").read_bytes()
    code, out, err = gateway(capsys, home, "keys", "add", *argv)
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"gateway: {message}"), line
    assert (home / "config.json").read_bytes() == before


def test_keys_add_from_several_processes_at_once_loses_none(home: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-m", "gateway_cli.cli", "keys", "add", f"k{i}", "--agents", "alfred", "--home", str(home)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(6)
    ]
    printed = {}
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        printed[f"k{i}"] = out.strip()
    stored = {k["name"]: k["keySha256"] for k in config_of(home)["gateway"]["api"]["keys"]}
    for name, key in printed.items():
        assert stored[name] == hashlib.sha256(key.encode()).hexdigest()


# --- keys list / revoke ------------------------------------------------------


def test_keys_list_shows_names_and_scopes_never_keys_or_hashes(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = config_of(home)
    raw["gateway"]["api"]["keys"].append({"key": "plain-key-1234", "agents": ["alfred"]})
    (home / "config.json").write_text(json.dumps(raw))
    code, out, _ = gateway(capsys, home, "keys", "list")
    assert code == 0
    assert out.splitlines() == [
        "NAME     AGENTS  ACCESS  STORED",
        "admin    *       write   sha256",
        "keys[1]  alfred  read    plain text",
    ]
    assert raw["gateway"]["api"]["keys"][0]["keySha256"] not in out and "plain-key-1234" not in out


def test_keys_revoke_removes_by_name_and_says_when_no_admin_is_left(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gateway(capsys, home, "keys", "add", "ci", "--agents", "alfred")
    code, out, err = gateway(capsys, home, "keys", "revoke", "ci")
    assert (code, out, err) == (0, "revoked key 'ci' (read, agents alfred)\n", "")
    code, out, err = gateway(capsys, home, "keys", "revoke", "admin")
    assert code == 0 and out == "revoked key 'admin' (write, agents *)\n"
    assert err == "gateway: no key left can write every agent; make one with: gateway keys add NAME --agents '*' --write\n"
    assert config_of(home)["gateway"]["api"]["keys"] == []
    assert load_config(home).api.keys == ()  # still a valid config: the CLI can always add a key


def test_keys_revoke_of_an_unknown_name_is_an_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (home / "config.json").read_bytes()
    code, out, err = gateway(capsys, home, "keys", "revoke", "nope")
    assert code == 2 and out == ""
    assert err == f"gateway: no key named 'nope' in {home / 'config.json'} (keys: admin)\n"
    assert (home / "config.json").read_bytes() == before


def test_an_unnamed_key_is_revoked_by_the_label_keys_list_shows(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = config_of(home)
    raw["gateway"]["api"]["keys"].append({"key": "plain-key-1234", "agents": "*"})
    (home / "config.json").write_text(json.dumps(raw))
    assert gateway(capsys, home, "keys", "revoke", "keys[1]")[0] == 0
    assert [k.get("name") for k in config_of(home)["gateway"]["api"]["keys"]] == ["admin"]


# --- agents ------------------------------------------------------------------


def test_agents_add_writes_the_entry_and_creates_its_folders(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = gateway(capsys, home, "agents", "add", "bob")
    assert code == 0
    assert out == f"added agent 'bob': workspace {home}/agents/bob/workspace, sessions {home}/agents/bob/sessions\n"
    assert config_of(home)["agents"][-1] == {"id": "bob", "workspace": "agents/bob/workspace", "transcriptsDir": "agents/bob/sessions"}
    assert (home / "agents/bob/workspace").is_dir() and (home / "agents/bob/sessions").is_dir()
    assert mode_of(home / "config.json") == 0o600
    # and now a key can be scoped to bob
    assert gateway(capsys, home, "keys", "add", "bob-writer", "--agents", "bob", "--write")[0] == 0


def test_agents_add_workspace_is_relative_to_the_home(home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not the home: the path must not be taken from here
    assert gateway(capsys, home, "agents", "add", "cleo", "--workspace", "spaces/cleo")[0] == 0
    assert (home / "spaces/cleo").is_dir() and not (tmp_path / "spaces").exists()
    code, out, _ = gateway(capsys, home, "agents", "list")
    assert code == 0
    assert out.splitlines() == [
        "ID      WORKSPACE",
        f"alfred  {home}/agents/alfred/workspace",
        f"cleo    {home}/spaces/cleo",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["alfred"], "agent 'alfred' exists already"),
        (["a/b"], "'a/b' is not an agent id: one safe path segment matching ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"),
        ([".hidden"], "'.hidden' is not an agent id"),
        (["bob\n"], "'bob\\n' is not an agent id"),
    ],
)
def test_agents_add_refuses_and_changes_nothing(home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    before = (home / "config.json").read_bytes()
    code, _, err = gateway(capsys, home, "agents", "add", *argv)
    assert code == 2 and err.startswith(f"gateway: {message}"), err
    assert (home / "config.json").read_bytes() == before


def test_an_edit_that_would_make_the_config_invalid_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (home / "config.json").read_bytes()
    code, _, err = gateway(capsys, home, "agents", "add", "dan", "--workspace", "")
    assert code == 2
    assert err.splitlines() == [
        f"gateway: refused: the change would make config.json in {home} invalid; nothing was written:",
        "  agents[1].workspace: '' is too short: at least 1 character",
    ]
    assert (home / "config.json").read_bytes() == before
    assert not (home / "agents" / "dan").exists()


def test_an_invalid_config_is_not_edited(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = config_of(home)
    raw["gateway"]["memory"]["memoryBudgetChars"] = -5
    (home / "config.json").write_text(json.dumps(raw))
    before = (home / "config.json").read_bytes()
    code, out, err = gateway(capsys, home, "keys", "add", "ci", "--agents", "*")
    assert code == 2 and out == ""  # no key printed: none was stored
    assert err.splitlines()[0] == f"gateway: config.json in {home} is invalid:"
    assert (home / "config.json").read_bytes() == before


def test_keys_and_agents_commands_on_a_home_without_config_say_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["keys", "list"], ["keys", "add", "x", "--agents", "*"], ["keys", "revoke", "x"], ["agents", "list"], ["agents", "add", "x"]):
        code, _, err = gateway(capsys, tmp_path, *argv)
        assert code == 2 and err.startswith(f"gateway: no config.json in {tmp_path} (not found)"), (argv, err)


# --- agents add, many at once --------------------------------------------------

# Runs the CLI in a process of its own that counts, with an audit hook, every rename or
# link that puts a file named config.json in place: how many times the command wrote it.
COUNT_WRITES = """
import os, sys
writes = []
def hook(event, args):
    if event in ("os.rename", "os.link") and os.path.basename(os.fsdecode(args[1])) == "config.json":
        writes.append(args[1])
sys.addaudithook(hook)
from gateway_cli.cli import main
code = main(sys.argv[1:])
print(f"config.json writes: {len(writes)}", file=sys.stderr)
sys.exit(code)
"""


def gateway_process(home: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", COUNT_WRITES, *argv, "--home", str(home)], input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


def test_agents_add_takes_many_ids_and_a_file_in_one_config_write(home: Path, tmp_path: Path) -> None:
    listing = tmp_path / "agents.txt"
    listing.write_text("# the night shift\nnell\n\n  otto  \n# retired: pia\nquinn\n")
    done = gateway_process(home, "agents", "add", "kai", "lena", "--from-file", str(listing))
    assert done.returncode == 0, done.stderr
    added = ["kai", "lena", "nell", "otto", "quinn"]
    assert done.stdout.splitlines() == [
        f"added agent {a!r}: workspace {home}/agents/{a}/workspace, sessions {home}/agents/{a}/sessions" for a in added
    ]
    assert done.stderr.splitlines() == [
        f"gateway: added 5 agents to {home / 'config.json'} in one write", "config.json writes: 1",
    ]
    assert [a["id"] for a in config_of(home)["agents"]] == ["alfred", *added]
    assert all((home / "agents" / a / "workspace").is_dir() and (home / "agents" / a / "sessions").is_dir() for a in added)
    assert mode_of(home / "config.json") == 0o600


def test_agents_add_reads_ids_from_stdin(home: Path) -> None:
    ids = "".join(f"r{n:03d}\n" for n in range(300))
    done = gateway_process(home, "agents", "add", "--from-file", "-", stdin=ids)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "config.json writes: 1"
    assert len(config_of(home)["agents"]) == 301 and len(load_config(home).agents) == 301


def test_a_batch_with_any_bad_id_is_refused_whole_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    listing = tmp_path / "agents.txt"
    listing.write_text("sam\nbad/id\ntia\nsam\nalfred\n")
    before = (home / "config.json").read_bytes()
    done = gateway_process(home, "agents", "add", "uma", "uma", "--from-file", str(listing))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "gateway: refused: 4 problems in the 7 ids; no agent was added, nothing was written:",
        "  'uma' is given twice (first on the command line)",
        f"  {listing}:2: 'bad/id' is not an agent id: one safe path segment matching ^[A-Za-z0-9][A-Za-z0-9._-]{{0,63}}$",
        f"  {listing}:4: 'sam' is given twice (first on {listing}:1)",
        f"  {listing}:5: agent 'alfred' exists already in {home / 'config.json'}",
        "config.json writes: 0",
    ]
    assert (home / "config.json").read_bytes() == before
    assert sorted(p.name for p in (home / "agents").iterdir()) == ["alfred"]  # no folder made either


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["vic", "wes", "--workspace", "spaces/x"], "--workspace names one agent's folder; it cannot go with 2 ids"),
        ([], "no agent id given: pass IDs, or --from-file FILE with one id per line (- for stdin)"),
        (["--from-file", "no-such-file.txt"], "cannot read no-such-file.txt (No such file or directory); no agent was added"),
    ],
)
def test_agents_add_batch_misuse_is_one_line(home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    before = (home / "config.json").read_bytes()
    code, _, err = gateway(capsys, home, "agents", "add", *argv)
    assert code == 2 and err.startswith(f"gateway: {message}"), err
    assert (home / "config.json").read_bytes() == before
