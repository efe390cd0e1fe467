"""The file API's answer to a PUT holding a secret (services/file_api/servicer.py ``secret_warnings``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from secret_samples import AWS_KEY, SECRETS
from structlog.testing import capture_logs

from services.file_api import servicer


def test_each_secret_is_one_warning_and_one_log_line_without_the_value() -> None:
    text = f"# User\n{SECRETS['AWS Access Key']}\n{SECRETS['GitHub Token']}\n"
    with capture_logs() as logs:
        warnings = servicer.secret_warnings("alfred", "USER.md", text, "admin")
    assert [w.split(": this file")[0] for w in warnings] == ["line 2: AWS Access Key", "line 3: GitHub Token"]
    assert all("gateway doctor secrets alfred" in w and AWS_KEY not in w for w in warnings)
    assert [(e["event"], e["key"], e["line"], e["detector"]) for e in logs] == [
        ("put_holds_secret", "admin", 2, "AWS Access Key"), ("put_holds_secret", "admin", 3, "GitHub Token")]
    assert AWS_KEY not in repr(logs)


def test_a_scanner_that_fails_warns_of_nothing_and_is_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(text: str) -> list[object]:
        raise RuntimeError("the scanner broke")

    monkeypatch.setattr(servicer, "find_secrets", broken)
    with capture_logs() as logs:
        assert servicer.secret_warnings("alfred", "USER.md", SECRETS["AWS Access Key"], "admin") == []
    assert [(e["event"], e["error"]) for e in logs] == [("put_secret_scan_failed", "RuntimeError: the scanner broke")]


def test_a_put_of_forgotten_text_is_one_warning_and_log_line_per_forget_without_the_text(tmp_path: Path) -> None:
    from gateway.config import build
    from gateway.forgetting import Tombstones

    agent = build({"agents": [{"id": "alfred"}]}, tmp_path).agents[0]
    text = "# Memory\n- Dana Whitlock's locker code is 4471\n"
    assert servicer.forgotten_warnings(agent, "MEMORY.md", text, "admin") == []
    Tombstones(tmp_path).add("F-0a1b", ["Dana Whitlock's locker code is 4471"], scope="alfred", at="t", by="k", places=1)
    with capture_logs() as logs:
        warnings = servicer.forgotten_warnings(agent, "MEMORY.md", text, "admin")
    assert len(warnings) == 1 and "(F-0a1b)" in warnings[0] and "4471" not in warnings[0]
    assert [(e["event"], e["file"], e["key"], e["tombstone"]) for e in logs] == [
        ("put_holds_forgotten_text", "MEMORY.md", "admin", "F-0a1b")]
    assert "4471" not in repr(logs)
