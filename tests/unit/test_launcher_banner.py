"""What ``gateway up`` prints on a terminal once the suite is ready (gateway_cli.launcher.banner)."""

from __future__ import annotations

import os
from pathlib import Path

from gateway_cli.launcher import banner

URL = "http://127.0.0.1:10850"


def test_a_first_run_shows_the_key_once_and_where_it_is_kept(tmp_path: Path) -> None:
    (tmp_path / "admin-key.txt").write_text("# header\ngw_new\n")
    lines = banner(URL, tmp_path, "gw_new").splitlines()
    assert lines == [
        f"ready {URL}",
        f"  home       {tmp_path}",
        "  admin key  gw_new (shown only this once; config.json keeps its SHA-256)",
        f"             also in {tmp_path / 'admin-key.txt'} until you run: gateway keys confirm --home {tmp_path}",
        f"  stop       Ctrl-C (or: kill {os.getpid()})",
    ]


def test_a_later_run_says_where_the_unconfirmed_key_is(tmp_path: Path) -> None:
    (tmp_path / "admin-key.txt").write_text("# header\ngw_old\n")
    lines = banner(URL, tmp_path, None).splitlines()
    assert lines[2] == f"  admin key  in {tmp_path / 'admin-key.txt'} until you run: gateway keys confirm --home {tmp_path}"
    assert "gw_old" not in "\n".join(lines)


def test_once_confirmed_the_banner_does_not_mention_the_key(tmp_path: Path) -> None:
    assert [line.split()[0] for line in banner(URL, tmp_path, None).splitlines()] == ["ready", "home", "stop"]
