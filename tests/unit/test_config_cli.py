"""``gateway config get|set|show`` through the CLI on a temp home: paths, defaults, refusals, secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_config
from gateway.home import ensure_home
from gateway_cli.cli import main
from gateway_cli.config_paths import MASK, AgentRef, parse_path

PLAIN_KEY = "plain-key-for-bob-0001"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The first-start home (alfred, the hashed admin key), plus bob with a plain key and an override."""
    home = tmp_path / "home"
    ensure_home(home)
    raw = json.loads((home / "config.json").read_text())
    raw["agents"].append({"id": "bob", "dreaming": {"mode": "propose"}})
    raw["gateway"]["api"]["keys"].append({"name": "bob", "key": PLAIN_KEY, "agents": ["bob"]})
    (home / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    os.chmod(home / "config.json", 0o600)
    return home


def gateway(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--home", str(home)])
    out = capsys.readouterr()
    return code, out.out, out.err


def config_of(home: Path) -> dict[str, Any]:
    return json.loads((home / "config.json").read_text())


# --- paths ---------------------------------------------------------------------------------


def test_paths_name_keys_positions_and_agents_by_id() -> None:
    assert parse_path("gateway.dreaming.reviewerCommand") == ["gateway", "dreaming", "reviewerCommand"]
    assert parse_path("gateway.api.keys[1].name") == ["gateway", "api", "keys", 1, "name"]
    assert parse_path("agents[0].dreaming.mode") == ["agents", 0, "dreaming", "mode"]
    assert parse_path("agents.alfred.dreaming.mode") == ["agents", AgentRef("alfred"), "dreaming", "mode"]
    assert parse_path("agents[alfred.v2].workspace") == ["agents", AgentRef("alfred.v2"), "workspace"]


# --- get -----------------------------------------------------------------------------------


def test_get_prints_the_file_value_as_json(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gateway(capsys, home, "config", "get", "gateway.memory.writeRouting") == (0, "true\n", "")
    assert gateway(capsys, home, "config", "get", "agents.bob.dreaming.mode") == (0, '"propose"\n', "")
    code, out, _ = gateway(capsys, home, "config", "get", "agents[0].workspace")
    assert (code, out) == (0, '"agents/alfred/workspace"\n')


def test_get_of_a_key_not_in_the_file_prints_its_default_and_says_so(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gateway(capsys, home, "config", "get", "gateway.dreaming.reviewerCommand")
    assert code == 0 and json.loads(out) == ["claude", "-p", "--output-format", "json"]
    assert err == f"gateway: gateway.dreaming.reviewerCommand is not set in {home / 'config.json'}; this is the default\n"
    code, out, err = gateway(capsys, home, "config", "get", "gateway.grpc.kb")
    assert (code, out) == (0, "50053\n") and "the default" in err
    code, out, err = gateway(capsys, home, "config", "get", "agents.alfred.dreaming.maxChangesPerRun")
    assert (code, out) == (0, "3\n") and "the default" in err


def test_get_of_an_agent_key_set_for_the_gateway_says_it_is_inherited(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gateway(capsys, home, "config", "get", "agents.alfred.memory.writeRouting")
    assert (code, out) == (0, "true\n")
    assert err.endswith("this is inherited from gateway.memory.writeRouting\n")


def test_get_masks_secrets(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gateway(capsys, home, "config", "get", "gateway.api.keys")
    keys = json.loads(out)
    assert code == 0 and [k["name"] for k in keys] == ["admin", "bob"]
    assert keys[0]["keySha256"] == MASK and keys[1]["key"] == MASK
    assert PLAIN_KEY not in out + err and config_of(home)["gateway"]["api"]["keys"][0]["keySha256"] not in out + err
    code, out, _ = gateway(capsys, home, "config", "get", "gateway.api.keys[1].key")
    assert (code, out) == (0, f'"{MASK}"\n')


def test_get_of_an_unknown_key_names_it_and_what_is_there(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gateway(capsys, home, "config", "get", "gateway.dreaming.reviewerComand")
    assert code == 2 and out == ""
    assert err.startswith("gateway: gateway.dreaming.reviewerComand: no such key in config.json (gateway.dreaming has ")
    assert "reviewerCommand" in err and err.count("\n") == 1
    code, _, err = gateway(capsys, home, "config", "get", "agents.carol.dreaming.mode")
    assert code == 2 and "agents.carol is not in config.json" in err


# --- set -----------------------------------------------------------------------------------


def test_set_writes_one_key_validated_atomically_and_keeps_0600(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.chmod(home / "config.json", 0o644)  # even a file that was widened comes back private
    before = config_of(home)
    code, out, err = gateway(capsys, home, "config", "set", "gateway.dreaming.reviewerCommand", '["gateway","reviewer","stand-in"]')
    assert code == 0, err
    assert out == f'set gateway.dreaming.reviewerCommand to ["gateway", "reviewer", "stand-in"] in {home / "config.json"}\n'
    assert "a running suite picks this up within a second" in err
    after = config_of(home)
    assert after["gateway"]["dreaming"] == {"reviewerCommand": ["gateway", "reviewer", "stand-in"]}
    del after["gateway"]["dreaming"]
    assert after == before  # nothing else changed, key order kept
    assert list(config_of(home)) == list(before)
    assert (home / "config.json").stat().st_mode & 0o777 == 0o600
    assert load_config(home).dreaming.reviewer_command == ("gateway", "reviewer", "stand-in")
    assert not [p for p in home.iterdir() if p.name.endswith(".gwtmp")]


def test_set_reads_json_when_it_parses_else_a_string(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gateway(capsys, home, "config", "set", "agents.alfred.dreaming.mode", "propose")[0] == 0
    assert gateway(capsys, home, "config", "set", "agents[0].dreaming.maxChangesPerRun", "7")[0] == 0
    assert gateway(capsys, home, "config", "set", "gateway.knowledge.shared.graph", "true")[0] == 0
    assert gateway(capsys, home, "config", "set", "gateway.knowledge.shared.project", '"2026"')[0] == 0
    raw = config_of(home)
    assert raw["agents"][0]["dreaming"] == {"mode": "propose", "maxChangesPerRun": 7}
    assert raw["gateway"]["knowledge"] == {"shared": {"graph": True, "project": "2026"}}


@pytest.mark.parametrize(("path", "value", "named"), [
    ("gateway.dreaming.mode", "sometimes", "gateway.dreaming.mode: 'sometimes' is not one of ['auto', 'propose']"),
    ("gateway.dreaming.reviewerCommand", "[]", "gateway.dreaming.reviewerCommand: [] is too short"),
    ("agents.alfred.dreaming.dreamHour", "25", "agents[0].dreaming.dreamHour: 25 is greater than the maximum of 23"),
    ("gateway.api.port", "50051", "gateway.api.port: port 50051 is also gateway.grpc.fileApi's"),
])
def test_set_of_an_invalid_value_is_refused_naming_the_key_and_writes_nothing(
        home: Path, capsys: pytest.CaptureFixture[str], path: str, value: str, named: str) -> None:
    before = (home / "config.json").read_bytes()
    code, out, err = gateway(capsys, home, "config", "set", path, value)
    assert code == 2 and out == ""
    assert err.startswith(f"gateway: refused: the change would make config.json in {home} invalid; nothing was written:\n")
    assert named in err, err
    assert (home / "config.json").read_bytes() == before


@pytest.mark.parametrize(("path", "value", "says"), [
    ("gateway.dreaming.reviewerComand", '["x"]', "no such key in config.json"),
    ("gateway.api.keys[0].keySha256", "0" * 64, "API keys are managed with gateway keys add"),
    ("gateway.api.keys", "[]", "API keys are managed with gateway keys add"),
    ("gateway.api.keys[1].agents", "*", "API keys are managed with gateway keys add"),
    ("agents", "[]", "agents are added with gateway agents add"),
    ("agents.carol.dreaming.mode", "auto", "no agent 'carol' in config.json (agents: alfred, bob); add it with: gateway agents add carol"),
    ("configVersion", "1.0.30", "gateway config migrate"),
    ("gateway.dreaming.reviewerCommand", '["gateway", "reviewer"', "starts like JSON but does not parse"),
])
def test_set_refusals_say_why_and_write_nothing(home: Path, capsys: pytest.CaptureFixture[str], path: str, value: str, says: str) -> None:
    before = (home / "config.json").read_bytes()
    code, out, err = gateway(capsys, home, "config", "set", path, value)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert says in err, err
    assert (home / "config.json").read_bytes() == before


def test_set_says_when_an_agent_override_wins_and_when_a_restart_is_needed(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = gateway(capsys, home, "config", "set", "gateway.dreaming.mode", "propose")
    assert code == 0 and "agent bob sets its own agents.bob.dreaming.mode, which wins for it" in err
    code, _, err = gateway(capsys, home, "config", "set", "gateway.api.port", "10999")
    assert code == 0 and "restart it for gateway.api.port" in err


def test_set_on_a_home_without_config_says_where_to_look(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = gateway(capsys, tmp_path / "none", "config", "set", "gateway.dreaming.mode", "propose")
    assert code == 2 and "no config.json in" in err
    assert not (tmp_path / "none").exists()


# --- show ----------------------------------------------------------------------------------


def test_show_prints_the_effective_config_with_every_default_and_no_secret(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gateway(capsys, home, "config", "show")
    assert code == 0 and err == ""
    shown = json.loads(out)
    gw = shown["gateway"]
    assert gw["grpc"] == {"host": "127.0.0.1", "transport": "unix", "fileApi": 50051, "watcher": 50052, "kb": 50053, "dreaming": 50054}
    assert gw["api"]["port"] == 10850 and gw["api"]["host"] == "127.0.0.1"
    assert gw["metrics"]["host"] == "127.0.0.1" and gw["metrics"]["http"] == 50065
    assert gw["dreaming"]["reviewerCommand"] == ["claude", "-p", "--output-format", "json"]
    assert gw["knowledge"]["archive"]["tokenizer"] == "unicode61"  # a setting, not a secret
    assert [k["write"] for k in gw["api"]["keys"]] == [True, False]  # write's default filled in
    assert PLAIN_KEY not in out and config_of(home)["gateway"]["api"]["keys"][0]["keySha256"] not in out
    alfred, bob = shown["agents"]
    assert alfred["workspace"] == "agents/alfred/workspace" and alfred["transcriptsDir"] == "agents/alfred/sessions"
    assert alfred["dreaming"]["mode"] == "auto" and bob["dreaming"]["mode"] == "propose"
    assert bob["dreaming"]["lookbackDays"] == 3 and bob["memory"]["writeRouting"] is True


def test_set_can_repair_an_invalid_file_but_never_writes_an_invalid_one(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = config_of(home)
    raw["gateway"]["dreaming"] = {"mode": "sometimes"}
    raw["gateway"]["memory"]["memoryBudgetChars"] = -5
    (home / "config.json").write_text(json.dumps(raw))
    before = (home / "config.json").read_bytes()
    code, out, err = gateway(capsys, home, "config", "set", "gateway.dreaming.mode", "auto")
    assert code == 2 and out == "" and (home / "config.json").read_bytes() == before
    assert err == (f"gateway: refused: config.json in {home} would still be invalid after this change; nothing was written:\n"
                   "  gateway.memory.memoryBudgetChars: -5 is less than the minimum of 0\n")
    assert gateway(capsys, home, "config", "show")[0] == 2  # no effective config of an invalid file
    assert gateway(capsys, home, "config", "get", "gateway.dreaming.mode")[1] == '"sometimes"\n'  # what is there
    assert gateway(capsys, home, "config", "set", "gateway.memory.memoryBudgetChars", "8000")[0] == 2
    raw["gateway"]["memory"]["memoryBudgetChars"] = 8000
    (home / "config.json").write_text(json.dumps(raw))
    code, out, _ = gateway(capsys, home, "config", "set", "gateway.dreaming.mode", "auto")
    assert code == 0 and out.endswith("; it is valid again\n")
    assert load_config(home).dreaming.mode == "auto"
