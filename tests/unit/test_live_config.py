"""The shared config-reload mechanism (gateway.live_config), in process with a real file."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
import structlog

from gateway.config import Config
from gateway.config_model import SOCKET_PATH_MAX
from gateway.errors import ConfigError
from gateway.home import ensure_home
from gateway.live_config import ConfigChange, LiveConfig, diff, loader

KEY = "first-key-123"


def base(**extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "configVersion": "1.0.26",
        "gateway": {"api": {"keys": [{"name": "first", "key": KEY, "agents": ["alfred"], "write": True}]}},
        "agents": [{"id": "alfred"}],
    }
    raw.update(extra)
    return raw


def write(home: Path, raw: dict[str, Any] | str) -> None:
    """Replace config.json the way an editor or the CLI does: temp file, then rename."""
    tmp = home / ".config.json.edit"
    tmp.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    os.replace(tmp, home / "config.json")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    write(tmp_path, base())
    ensure_home(tmp_path)
    return tmp_path


def test_diff_names_agents_and_keys_by_label_never_by_value(home: Path) -> None:
    old = loader(home, {})()
    raw = base()
    raw["agents"].append({"id": "dave"})
    raw["gateway"]["api"]["keys"] = [
        {"name": "first", "key": KEY, "agents": ["alfred", "dave"], "write": True},
        {"name": "dave-key", "key": "dave-secret-999", "agents": ["dave"]},
    ]
    write(home, raw)
    change = diff(old, loader(home, {})())
    assert change.agents_added == ("dave",)
    assert change.keys_added == ("dave-key",)
    assert change.keys_changed == ("first",)  # its scope grew
    assert change.agents_removed == change.keys_removed == () and not change.needs_restart
    assert "dave-secret-999" not in json.dumps(change.log_fields())


def test_a_valid_edit_is_swapped_in_with_its_keys(home: Path) -> None:
    live = LiveConfig(loader(home, {}))
    seen: list[tuple[Config, ConfigChange]] = []
    live.subscribe(lambda config, change: seen.append((config, change)))
    raw = base()
    raw["agents"].append({"id": "dave"})
    raw["gateway"]["api"]["keys"].append({"name": "dave-key", "key": "dave-secret-999", "agents": ["dave"]})
    write(home, raw)
    change = live.reload()
    assert change is not None and change.agents_added == ("dave",)
    assert live.current.agent("dave") is not None
    caller = live.auth.identify([("x-api-key", "dave-secret-999")])
    assert caller.label == "dave-key"
    config, auth = live.snapshot()
    assert config is live.current and auth is live.auth
    assert [c.agents_added for _, c in seen] == [("dave",)]


def test_an_invalid_edit_keeps_the_running_config_and_says_why_once(home: Path) -> None:
    live = LiveConfig(loader(home, {}))
    before = live.current
    with structlog.testing.capture_logs() as logs:
        write(home, "{ not json")
        assert live.reload() is None
        assert live.reload() is None  # the same broken file: not logged again
        write(home, {**base(), "agents": [{"id": "../escape"}]})
        assert live.reload() is None
    assert live.current is before
    assert live.auth.identify([("x-api-key", KEY)]).label == "first"
    rejected = [entry for entry in logs if entry["event"] == "config_reload_rejected"]
    assert len(rejected) == 2
    assert "invalid JSON" in rejected[0]["problems"][0]
    assert any("agents[0].id" in p for p in rejected[1]["problems"])


def test_listen_and_dial_addresses_keep_their_running_values(home: Path) -> None:
    live = LiveConfig(loader(home, {}))
    port = live.current.grpc.kb
    write(home, {**base(), "gateway": {**base()["gateway"], "grpc": {"kb": port + 1000}, "api": {"port": 19999, "keys": []}}})
    change = live.reload()
    assert change is not None
    assert change.needs_restart == ("gateway.grpc.kb", "gateway.api.port")
    assert change.keys_removed == ("first",)
    assert live.current.grpc.kb == port and live.current.api.port == 10850
    assert live.current.api.keys == ()


def test_deployment_overrides_and_the_port_flag_survive_a_reload(home: Path) -> None:
    env = {"GATEWAY_BIND_HOST": "0.0.0.0", "GATEWAY_KB_HOST": "kb"}
    live = LiveConfig(loader(home, env, service="kb", port=4444))
    assert live.current.grpc.bind_address("kb") == "0.0.0.0:4444"
    raw = base()
    raw["agents"].append({"id": "dave"})
    write(home, raw)
    change = live.reload()
    assert change is not None and not change.needs_restart
    assert live.current.grpc.bind_address("kb") == "0.0.0.0:4444"
    assert live.current.grpc.address("kb") == "kb:4444"


def test_local_peers_are_reached_on_unix_sockets_unless_the_transport_is_tcp(home: Path) -> None:
    grpc = loader(home, {"GATEWAY_KB_HOST": "kb"})().grpc
    assert grpc.address("file_api") == f"unix:{home}/run/file_api.sock"
    assert grpc.address("kb") == f"kb:{grpc.kb}"  # a peer named by the deployment: TCP
    assert grpc.bind_address("file_api") == f"127.0.0.1:{grpc.file_api}"  # the port is listened on either way
    assert loader(home, {"GATEWAY_TRANSPORT": "tcp"})().grpc.address("file_api") == f"127.0.0.1:{grpc.file_api}"
    with pytest.raises(ConfigError, match="GATEWAY_TRANSPORT"):
        loader(home, {"GATEWAY_TRANSPORT": "udp"})()
    write(home, base(gateway={"grpc": {"transport": "tcp"}, "api": base()["gateway"]["api"]}))
    assert loader(home, {})().grpc.unix_socket("kb") is None
    assert loader(home, {"GATEWAY_TRANSPORT": "unix"})().grpc.unix_socket("kb") == home / "run" / "kb.sock"


def test_a_home_too_deep_for_a_socket_path_stays_on_tcp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * (SOCKET_PATH_MAX - len(str(tmp_path)) - len("/run/kb.sock")))
    deep.mkdir()
    write(deep, base())
    ensure_home(deep)
    grpc = loader(deep, {})().grpc
    assert len(str(grpc.unix_socket("kb"))) == SOCKET_PATH_MAX + 1
    assert grpc.address("kb") == f"127.0.0.1:{grpc.kb}"


def test_a_bad_config_at_start_raises(home: Path) -> None:
    write(home, "[]")
    with pytest.raises(ConfigError):
        LiveConfig(loader(home, {}))


def test_a_failing_listener_does_not_stop_the_swap_or_the_others(home: Path) -> None:
    live = LiveConfig(loader(home, {}))
    calls: list[str] = []

    def broken(config: Config, change: ConfigChange) -> None:
        raise RuntimeError("listener bug")

    live.subscribe(broken)
    live.subscribe(lambda config, change: calls.append("second"))
    raw = base()
    raw["agents"].append({"id": "dave"})
    write(home, raw)
    with structlog.testing.capture_logs() as logs:
        live.reload()
    assert calls == ["second"] and live.current.agent("dave") is not None
    assert any(entry["event"] == "config_listener_failed" for entry in logs)


def test_follow_picks_up_edits_by_rename_and_in_place(home: Path) -> None:
    live = LiveConfig(loader(home, {}))

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(live.follow(stop))
        try:
            raw = base()
            raw["agents"].append({"id": "dave"})
            write(home, raw)  # rename into place
            await until(lambda: live.current.agent("dave") is not None)
            raw["agents"].append({"id": "erin"})
            (home / "config.json").write_text(json.dumps(raw))  # in place
            await until(lambda: live.current.agent("erin") is not None)
        finally:
            stop.set()
            await asyncio.wait_for(task, 5)

    asyncio.run(scenario())



def test_follow_checks_once_a_second_when_no_watch_can_be_set(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_watch(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr("gateway.live_config.batches", no_watch)
    live = LiveConfig(loader(home, {}))

    async def scenario() -> None:
        stop = asyncio.Event()
        with structlog.testing.capture_logs() as logs:
            task = asyncio.ensure_future(live.follow(stop))
            try:
                raw = base()
                raw["agents"].append({"id": "dave"})
                write(home, raw)
                await until(lambda: live.current.agent("dave") is not None)
            finally:
                stop.set()
                await asyncio.wait_for(task, 5)
        assert [entry["fallback"] for entry in logs if entry["event"] == "config_watch_error"] == ["polling every second"]

    asyncio.run(scenario())

async def until(predicate: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the reload")
        await asyncio.sleep(0.02)
