"""``gateway.grpc_server.claim_socket``: where a service's Unix socket goes before it listens there."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import structlog

from gateway.config_model import SOCKET_PATH_MAX
from gateway.grpc_server import claim_socket
from gateway.ports import BindError


def test_the_folder_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "run" / "kb.sock"
    assert claim_socket("kb", path) == path
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o700


def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "kb.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as left:
        left.bind(str(path))  # bound, never listening: what a killed server leaves
        assert claim_socket("kb", path) == path
    assert not path.exists()


def test_a_socket_another_server_listens_on_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kb.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(path))
        live.listen()
        with pytest.raises(BindError, match="another server is listening"):
            claim_socket("kb", path)
    assert path.is_socket()


def test_a_path_too_long_for_a_socket_is_said_once_and_left_to_tcp(tmp_path: Path) -> None:
    path = tmp_path / ("k" * (SOCKET_PATH_MAX - len(str(tmp_path)))) / "kb.sock"
    with structlog.testing.capture_logs() as logs:
        assert claim_socket("kb", path) is None
    assert [entry["event"] for entry in logs] == ["unix_socket_skipped"]
    assert not path.parent.exists()
