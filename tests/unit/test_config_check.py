"""``gateway config check`` through the CLI: the mistakes it names, as errors or as warnings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_config
from gateway.config_migrations import CURRENT_VERSION
from gateway.errors import ConfigError
from gateway_cli.cli import main

ADMIN = {"name": "admin", "keySha256": hashlib.sha256(b"admin-key-456").hexdigest(), "agents": "*", "write": True}


def home_with(tmp_path: Path, config: dict[str, Any]) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"configVersion": CURRENT_VERSION, **config}))
    return tmp_path


def check(home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], list[str]]:
    code = main(["config", "check", "--home", str(home)])
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err.splitlines()


def test_a_key_scoped_to_an_agent_that_does_not_exist_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path, {"gateway": {"api": {"keys": [ADMIN, {"name": "c", "key": "carol-key-000000", "agents": ["alfred", "carol"]}]}},
                                "agents": [{"id": "alfred"}]})
    code, out, err = check(home, capsys)
    assert code == 2 and out == []
    assert err == [
        f"gateway: config.json in {home} is invalid:",
        "  gateway.api.keys[1].agents: agent 'carol' is not configured (add it with: gateway agents add carol)",
    ]
    # start-up still accepts it: such a key gets 403 for carol at runtime (pre-provisioning)
    assert [k.label for k in load_config(home).api.keys] == ["admin", "c"]


@pytest.mark.parametrize(
    ("gateway", "line"),
    [
        ({"grpc": {"kb": 50052}}, "gateway.grpc.kb: port 50052 is also gateway.grpc.watcher's; two services cannot listen on one port"),
        ({"api": {"port": 50051}}, "gateway.api.port: port 50051 is also gateway.grpc.fileApi's; two services cannot listen on one port"),
        ({"grpc": {"host": "0.0.0.0", "dreaming": 9000}, "api": {"port": 9000}},
         "gateway.api.port: port 9000 is also gateway.grpc.dreaming's; two services cannot listen on one port"),
    ],
    ids=["two gRPC services", "shim on a gRPC default", "wildcard host"],
)
def test_two_services_on_one_port_is_an_error_that_also_stops_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gateway: dict[str, Any], line: str
) -> None:
    home = home_with(tmp_path, {"gateway": gateway})
    code, _, err = check(home, capsys)
    assert code == 2 and err == [f"gateway: config.json in {home} is invalid:", f"  {line}"]
    with pytest.raises(ConfigError) as info:
        load_config(home)
    assert info.value.problems == [line]


def test_one_port_on_two_different_hosts_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path, {"gateway": {"grpc": {"host": "127.0.0.1"}, "api": {"host": "192.0.2.7", "port": 50051}}})
    assert check(home, capsys)[0] == 0


def test_an_unknown_over_budget_value_is_a_warning_and_check_still_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path, {"gateway": {"memory": {"overBudget": "eror"}},
                                "agents": [{"id": "alfred"}, {"id": "bob", "memory": {"overBudget": "loud"}}]})
    code, out, err = check(home, capsys)
    assert code == 0
    assert out == [f"ok: {home / 'config.json'} (2 warnings)"]
    assert err == [
        "warning: gateway.memory.overBudget: 'eror' is neither 'warn' nor 'error'; it acts as 'warn'",
        "warning: agents[1].memory.overBudget: 'loud' is neither 'warn' nor 'error'; it acts as 'warn'",
    ]
    assert load_config(home).memory.over_budget == "warn"  # and it starts


def test_errors_and_warnings_are_reported_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path, {"gateway": {"memory": {"overBudget": "eror", "memoryBudgetChars": -1}}})
    code, out, err = check(home, capsys)
    assert code == 2 and out == []
    assert err[1].startswith("  gateway.memory.memoryBudgetChars: -1 is less than the minimum of 0")
    assert err[-1].startswith("warning: gateway.memory.overBudget: 'eror'")


def test_length_errors_name_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path, {"gateway": {"grpc": {"host": ""}, "api": {"keys": [{"key": "abc", "agents": "*"}]},
                                            "dreaming": {"reviewerCommand": []}}})
    code, _, err = check(home, capsys)
    assert code == 2
    assert set(err[1:]) == {
        "  gateway.api.keys[0].key: the key (not shown) is too short: at least 8 characters",
        "  gateway.dreaming.reviewerCommand: [] is too short: at least 1 item",
        "  gateway.grpc.host: '' is too short: at least 1 character",
    }
    assert "abc" not in "\n".join(err)  # a key, even a bad one, is never echoed


def test_a_plain_key_pasted_into_key_sha256_is_not_echoed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path, {"gateway": {"api": {"keys": [{"keySha256": "gw_my-real-secret-key", "agents": "*"}]}}})
    code, _, err = check(home, capsys)
    assert code == 2 and "my-real-secret" not in "\n".join(err)
    assert err[1] == "  gateway.api.keys[0].keySha256: the value (not shown) is not a SHA-256 in hex (64 characters 0-9, a-f)"
