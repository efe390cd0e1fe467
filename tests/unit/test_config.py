"""config.json: defaults, overrides, validation messages, migrations, first run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gateway.atomic import is_temp_name
from gateway.config import build, content_digest, load_config, validate
from gateway.config_migrations import CURRENT_VERSION, migrate
from gateway.errors import ConfigError
from gateway.home import ensure_home, read_internal_token, resolve_home
from gateway_cli.cli import main


def problems_of(raw: dict) -> list[str]:  # type: ignore[type-arg]
    with pytest.raises(ConfigError) as info:
        build(raw, Path("/h"))
    return info.value.problems


def test_empty_config_takes_every_default() -> None:
    config = build({}, Path("/h"))
    assert config.grpc.address("file_api") == "unix:/h/run/file_api.sock"
    assert config.grpc.bind_address("file_api") == "127.0.0.1:50051"
    assert (config.grpc.kb, config.grpc.watcher, config.grpc.dreaming) == (50053, 50052, 50054)
    assert config.api.port == 10850
    assert config.memory.memory_budget_chars == 8000 and config.memory.user_budget_chars == 3000
    assert config.memory.over_budget == "warn" and config.memory.write_routing is False
    assert config.dreaming.staleness.stale_ttl_days == 90
    assert config.dreaming.reviewer_command == ("claude", "-p", "--output-format", "json")
    assert config.knowledge.archive.tokenizer == "unicode61"
    assert config.knowledge.shared.vault_dir == Path("/h/shared/kb/global")
    assert config.agents == ()


def test_agent_overrides_merge_over_gateway_settings() -> None:
    raw = {
        "gateway": {"memory": {"memoryBudgetChars": 6000}, "dreaming": {"staleness": {"staleTtlDays": 30}}},
        "agents": [
            {"id": "alfred", "memory": {"userBudgetChars": 100}, "dreaming": {"staleness": {"keepImportance": 9}},
             "knowledge": {"shared": {"project": "team-a"}}},
            {"id": "bob", "workspace": "/srv/bob"},
        ],
    }
    config = build(raw, Path("/h"))
    alfred, bob = config.agents
    assert (alfred.memory.memory_budget_chars, alfred.memory.user_budget_chars) == (6000, 100)
    assert (alfred.dreaming.staleness.stale_ttl_days, alfred.dreaming.staleness.keep_importance) == (30, 9)
    assert alfred.knowledge.shared.vault_dir == Path("/h/shared/kb/team-a")
    assert alfred.workspace == Path("/h/agents/alfred/workspace")
    assert bob.workspace == Path("/srv/bob") and bob.memory.user_budget_chars == 3000
    assert config.agent("bob") is bob and config.agent("nobody") is None


def test_the_vault_gc_settings_default_safely_and_merge_per_agent() -> None:
    """New keys with defaults: an older file needs no migration step to get them."""
    config = build({"configVersion": "1.0.26", "agents": [
        {"id": "alfred"}, {"id": "bob", "knowledge": {"shared": {"gc": {"enabled": False}}}}]}, Path("/h"))
    gc = config.knowledge.shared.gc
    assert (gc.enabled, gc.stale_days, gc.max_retirements_per_run) == (True, 180, 50)
    assert config.agents[0].knowledge.shared.gc == gc
    assert config.agents[1].knowledge.shared.gc == dataclasses.replace(gc, enabled=False)
    assert any("staleDays" in p for p in problems_of({"gateway": {"knowledge": {"shared": {"gc": {"staleDays": 0}}}}}))
    assert any("gc" in p for p in problems_of({"gateway": {"knowledge": {"shared": {"gc": {"ttl": 3}}}}}))


def test_clamps_and_normalisations() -> None:
    raw = {"gateway": {"memory": {"overBudget": "loud"}, "dreaming": {"staggerWindowMinutes": 90},
                       "knowledge": {"archive": {"chunkTokens": 100, "chunkOverlap": 500}}}}
    config = build(raw, Path("/h"))
    assert config.memory.over_budget == "warn"  # an unknown value falls back to warn
    assert config.dreaming.stagger_window_minutes == 55
    assert config.knowledge.archive.chunk_overlap == 99


def test_each_problem_is_one_line_naming_the_key() -> None:
    problems = problems_of(
        {
            "gateway": {
                "memory": {"memoryBudgetChars": -1, "bogus": True},
                "api": {"port": 70000, "keys": [{"agents": "*"}, {"key": "short", "agents": 3}]},
                "knowledge": {"shared": {"project": ".."}},
            },
            "agents": [{"id": "a/b"}, {"id": "x"}, {"id": "x"}],
            "extra": 1,
        }
    )
    assert all("\n" not in p for p in problems)
    expected_prefixes = [
        "gateway.memory.memoryBudgetChars:",
        "gateway.memory: unknown key",
        "gateway.api.port:",
        "gateway.api.keys[0]: needs exactly one of key or keySha256",
        "gateway.api.keys[1].key:",
        "gateway.api.keys[1].agents:",
        "gateway.knowledge.shared.project:",
        "agents[0].id:",
        "agents[2].id: duplicate agent id 'x'",
        "(top level): unknown key",
    ]
    for prefix in expected_prefixes:
        assert any(p.startswith(prefix) for p in problems), (prefix, problems)


@pytest.mark.parametrize("project", ["", ".", "..", "a/b", "x" * 65, "sp ace"])
def test_shared_project_must_be_one_safe_segment(project: str) -> None:
    problems = problems_of({"gateway": {"knowledge": {"shared": {"project": project}}}})
    assert any(p.startswith("gateway.knowledge.shared.project:") for p in problems)


def test_keys_hold_only_digests() -> None:
    config = build({"gateway": {"api": {"keys": [{"key": "plain-key-1", "agents": ["a"], "write": True},
                                                  {"keySha256": "ab" * 32, "agents": "*"}]}}}, Path("/h"))
    first, second = config.api.keys
    assert first.digest == hashlib.sha256(b"plain-key-1").digest()
    assert first.covers("a") and not first.covers("b") and first.write
    assert second.agents is None and second.covers("anyone") and not second.write
    assert "plain-key-1" not in repr(config)


# --- migrations --------------------------------------------------------------


def test_migration_from_an_unversioned_file_injects_every_block() -> None:
    raw = {"gateway": {"api": {"port": 9999}}, "agents": [{"id": "a"}]}
    out, applied = migrate(raw)
    assert applied == ["1.0.19", "1.0.21", "1.0.26"]
    assert out["configVersion"] == CURRENT_VERSION
    assert out["gateway"]["memory"]["memoryBudgetChars"] == 8000
    assert out["gateway"]["knowledge"]["archive"] == {"enabled": True, "tokenizer": "unicode61", "chunkTokens": 400, "chunkOverlap": 80}
    assert out["gateway"]["dreaming"]["staleness"]["maxInvalidationsPerRun"] == 50
    assert "configVersion" not in raw  # the input is not changed


@pytest.mark.parametrize(("version", "applied"), [("1.0.19", ["1.0.21", "1.0.26"]), ("1.0.21", ["1.0.26"]), ("1.0.26", [])])
def test_migration_applies_only_newer_steps(version: str, applied: list[str]) -> None:
    out, done = migrate({"configVersion": version})
    assert done == applied
    assert "memory" not in out.get("gateway", {})  # 1.0.19's block is not re-injected
    assert ("archive" in out.get("gateway", {}).get("knowledge", {})) == ("1.0.21" in applied)


def test_migration_keeps_values_the_user_wrote() -> None:
    out, _ = migrate({"configVersion": "1.0.0", "gateway": {"memory": {"memoryBudgetChars": 1234}}})
    assert out["gateway"]["memory"]["memoryBudgetChars"] == 1234
    assert out["gateway"]["memory"]["userBudgetChars"] == 3000


@pytest.mark.parametrize("version", ["9.0.0", "1.0.27", "one", "1.0"])
def test_newer_or_bad_versions_are_refused(version: str) -> None:
    with pytest.raises(ValueError, match="configVersion"):
        migrate({"configVersion": version})


def test_config_migrate_rewrites_with_a_backup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = {"configVersion": "1.0.19", "gateway": {"memory": {"memoryBudgetChars": 5000}}, "agents": [{"id": "a"}]}
    (tmp_path / "config.json").write_text(json.dumps(original))
    assert main(["config", "check", "--home", str(tmp_path)]) == 0
    assert "migrations pending: 1.0.21, 1.0.26" in capsys.readouterr().out
    assert main(["config", "migrate", "--home", str(tmp_path)]) == 0
    backups = list(tmp_path.glob("config.json.bak-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == original
    upgraded = json.loads((tmp_path / "config.json").read_text())
    assert upgraded["configVersion"] == CURRENT_VERSION
    assert upgraded["gateway"]["memory"]["memoryBudgetChars"] == 5000
    assert upgraded["gateway"]["knowledge"]["archive"]["chunkTokens"] == 400
    assert main(["config", "migrate", "--home", str(tmp_path)]) == 0  # idempotent: no second backup
    assert len(list(tmp_path.glob("config.json.bak-*"))) == 1


def test_config_migrate_leaves_an_invalid_file_untouched(tmp_path: Path) -> None:
    text = json.dumps({"configVersion": "1.0.0", "gateway": {"memory": {"overBudget": 3}}})
    (tmp_path / "config.json").write_text(text)
    assert main(["config", "migrate", "--home", str(tmp_path)]) == 2
    assert (tmp_path / "config.json").read_text() == text
    assert not list(tmp_path.glob("config.json.bak-*"))


def test_load_config_reports_bad_json_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"gateway": {,}}')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert len(info.value.problems) == 1 and "line 1 column" in info.value.problems[0]


# --- first run ---------------------------------------------------------------


def test_first_run_writes_hashed_admin_key_and_token(tmp_path: Path) -> None:
    key = ensure_home(tmp_path)
    assert key is not None and key.startswith("gw_") and len(key) > 30
    raw = (tmp_path / "config.json").read_text()
    assert key not in raw
    config = load_config(tmp_path)
    assert [a.id for a in config.agents] == ["alfred"]
    assert config.memory.write_routing is True  # a new home's template turns routing on
    assert config.api.keys[0].digest == hashlib.sha256(key.encode()).digest()
    assert len(read_internal_token(tmp_path)) >= 32
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == 0o600
    assert ensure_home(tmp_path) is None  # shown once


def test_concurrent_first_runs_make_exactly_one_key(tmp_path: Path) -> None:
    results: list[str | None] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_home(tmp_path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = [k for k in results if k]
    assert len(keys) == 1
    assert load_config(tmp_path).api.keys[0].digest == hashlib.sha256(keys[0].encode()).digest()
    assert (tmp_path / "admin-key.txt").read_text().splitlines()[1] == keys[0]  # the file holds the key in force
    assert not [p for p in tmp_path.iterdir() if is_temp_name(p.name) or p.name.endswith(".tmp")]


def test_processes_starting_at_once_on_an_empty_home_agree_on_one_config_and_one_key(tmp_path: Path) -> None:
    script = "import sys; from pathlib import Path; from gateway.home import ensure_home; print(ensure_home(Path(sys.argv[1])) or '')"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True) for _ in range(6)]
    keys = [k for k in (p.communicate(timeout=60)[0].strip() for p in procs) if k]
    assert len(keys) == 1
    assert load_config(tmp_path).api.keys[0].digest == hashlib.sha256(keys[0].encode()).digest()
    assert (tmp_path / "admin-key.txt").read_text().splitlines()[1] == keys[0]


def test_the_first_start_writes_admin_key_txt_at_0600(tmp_path: Path) -> None:
    key = ensure_home(tmp_path)
    path = tmp_path / "admin-key.txt"
    assert path.stat().st_mode & 0o777 == 0o600
    header, stored = path.read_text().splitlines()
    assert stored == key
    assert header.startswith("# claude-gateway admin key") and f"gateway keys confirm --home {tmp_path}" in header
    path.unlink()
    assert ensure_home(tmp_path) is None and not path.exists()  # a later start makes no new key


def test_a_home_whose_config_was_deleted_gets_a_new_key_and_a_new_admin_key_txt(tmp_path: Path) -> None:
    old = ensure_home(tmp_path)
    (tmp_path / "config.json").unlink()
    new = ensure_home(tmp_path)
    assert new is not None and new != old
    assert (tmp_path / "admin-key.txt").read_text().splitlines()[1] == new


def test_home_resolution_order(tmp_path: Path) -> None:
    assert resolve_home(str(tmp_path / "a"), {"GATEWAY_HOME": str(tmp_path / "b")}) == tmp_path / "a"
    assert resolve_home(None, {"GATEWAY_HOME": str(tmp_path / "b")}) == tmp_path / "b"
    assert resolve_home(None, {}) == Path("~/.claude-gateway").expanduser()


@pytest.mark.parametrize("bad", ["alfred\n", "alfred\n\n"])
def test_a_pattern_matches_the_whole_value_not_up_to_a_final_newline(bad: str) -> None:
    problems = validate({"agents": [{"id": bad}]})
    assert any(p.startswith("agents[0].id:") for p in problems), problems
    assert validate({"agents": [{"id": "alfred"}]}) == []


TRUST_PROBE = """
import sys
from gateway.config import content_digest, trust, validate
good, bad = {"agents": [{"id": "alfred"}]}, {"agents": [{"id": "Not an id"}]}
trust(content_digest(good))
assert validate(good) == [] and "jsonschema" not in sys.modules
assert validate(bad)[0].startswith("agents[0].id:") and "jsonschema" in sys.modules
"""


def test_a_content_the_launcher_validated_is_trusted_and_any_other_is_checked() -> None:
    # A child of gateway up is handed the digest of what its launcher validated: no jsonschema until the file changes.
    subprocess.run([sys.executable, "-c", TRUST_PROBE], cwd=Path(__file__).resolve().parents[2], check=True, timeout=60)
    raw = {"agents": [{"id": "alfred"}]}
    assert build(raw, Path("/h")).digest == content_digest({"agents": [{"id": "alfred"}]})
