"""gateway.knowledge.shared.backend and .postgres: defaults, validation, a DSN never shown, and a KB that
refuses a backend it does not have (docs/architecture.md "The vault store")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gateway.config import build, validate
from gateway.config_migrations import CURRENT_VERSION
from gateway.errors import CommandError, ConfigError
from gateway.home import ensure_home
from gateway_cli.cli import main
from services.kb.vault.store import require_built_in

PASSWORD = "hunter2-not-for-logs"
DSN = f"postgresql://vault:{PASSWORD}@db.internal:5432/vault?sslmode=verify-full"


def config(shared: dict[str, Any] | None = None, agent: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"configVersion": CURRENT_VERSION, "gateway": {"knowledge": {"shared": shared or {}}},
            "agents": [{"id": "alfred", **(agent or {})}]}


def test_the_backend_defaults_to_sqlite_with_a_documented_pool() -> None:
    shared = build(config(), Path("/h")).knowledge.shared
    assert shared.backend == "sqlite"
    pg = shared.postgres
    assert (pg.dsn, pg.dsn_file, pg.dsn_env) == (None, None, None)
    assert (pg.min_size, pg.max_size, pg.connect_timeout_s, pg.statement_timeout_ms) == (1, 10, 5.0, 15_000)
    assert pg.tombstones_every_s == 60.0


def test_the_kb_checks_the_vaults_tombstones_on_a_timer_only_on_postgres_with_a_vault_shared() -> None:
    """docs/concepts/forget.md "Shared tombstones across hosts": other hosts write a PostgreSQL vault, so its
    tombstones are checked every tombstonesEveryS; a SQLite vault is this host's alone (no timer at rest)."""
    from services.kb.main import mirror_every_s

    assert mirror_every_s(build(config(), Path("/h"))) is None
    on_pg = {"backend": "postgres", "postgres": {"dsnEnv": "VAULT_DSN", "tombstonesEveryS": 5}}
    assert mirror_every_s(build(config(on_pg), Path("/h"))) == 5.0
    assert mirror_every_s(build(config(on_pg, {"knowledge": {"shared": {"enabled": False}}}), Path("/h"))) is None
    assert any(p.startswith("gateway.knowledge.shared.postgres.tombstonesEveryS") for p in validate(
        config({"backend": "postgres", "postgres": {"dsnEnv": "V", "tombstonesEveryS": 0}})))


def test_postgres_takes_one_dsn_source_and_the_pool() -> None:
    pool = {"minSize": 2, "maxSize": 4, "connectTimeoutS": 2.5, "statementTimeoutMs": 0}
    built = build(config({"backend": "postgres", "postgres": {"dsnFile": "secrets/dsn", **pool}}), Path("/h"))
    pg = built.knowledge.shared.postgres
    assert built.knowledge.shared.backend == "postgres" and built.agents[0].knowledge.shared.backend == "postgres"
    assert (pg.dsn_file, pg.min_size, pg.max_size, pg.connect_timeout_s, pg.statement_timeout_ms) == (
        Path("/h/secrets/dsn"), 2, 4, 2.5, 0)
    assert build(config({"backend": "postgres", "postgres": {"dsnEnv": "VAULT_DSN"}}), Path("/h")).knowledge.shared.postgres.dsn_env == "VAULT_DSN"


@pytest.mark.parametrize(("postgres", "says"), [
    ({}, 'gateway.knowledge.shared.postgres: backend is "postgres" but none of dsn, dsnFile or dsnEnv is set; give exactly one'),
    ({"dsn": DSN, "dsnEnv": "VAULT_DSN"},
     "gateway.knowledge.shared.postgres: dsn and dsnEnv are both set; give exactly one of dsn, dsnFile or dsnEnv"),
    ({"dsn": DSN, "dsnFile": "f", "dsnEnv": "V"},
     "gateway.knowledge.shared.postgres: dsn and dsnFile and dsnEnv are all set; give exactly one of dsn, dsnFile or dsnEnv"),
    ({"dsnEnv": "V", "minSize": 5, "maxSize": 3}, "gateway.knowledge.shared.postgres: minSize 5 is over maxSize 3"),
    ({"dsnEnv": "1-not-a-name"}, "gateway.knowledge.shared.postgres.dsnEnv: '1-not-a-name' does not match"),
    ({"dsn": DSN, "user": "x"}, "gateway.knowledge.shared.postgres: unknown key"),
])
def test_a_bad_postgres_block_is_one_line_naming_the_keys(postgres: dict[str, Any], says: str) -> None:
    problems = validate(config({"backend": "postgres", "postgres": postgres}))
    assert any(p.startswith(says) for p in problems), problems
    assert not any(PASSWORD in p for p in problems)


def test_two_dsn_sources_are_refused_whatever_the_backend_and_a_backend_is_gateway_wide() -> None:
    assert validate(config({"postgres": {"dsn": DSN, "dsnFile": "f"}})) == [
        "gateway.knowledge.shared.postgres: dsn and dsnFile are both set; give exactly one of dsn, dsnFile or dsnEnv"]
    assert validate(config(agent={"knowledge": {"shared": {"backend": "postgres", "postgres": {"dsnEnv": "V"}}}})) == [
        "agents[0].knowledge.shared.backend: the vault's backend is gateway-wide only (set gateway.knowledge.shared.backend)",
        "agents[0].knowledge.shared.postgres: the vault's backend is gateway-wide only (set gateway.knowledge.shared.postgres)",
    ]
    assert validate(config({"backend": "mysql"}))[0].startswith("gateway.knowledge.shared.backend: 'mysql' is not one of")


def test_a_dsn_is_never_echoed_by_a_validation_error_nor_a_repr() -> None:
    with pytest.raises(ConfigError) as caught:
        build(config({"backend": "postgres", "postgres": {"dsn": 5432}}), Path("/h"))
    assert caught.value.problems == ["gateway.knowledge.shared.postgres.dsn: the value (not shown) does not fit the schema (type 'string')"]
    built = build(config({"backend": "postgres", "postgres": {"dsn": DSN}}), Path("/h"))
    assert built.knowledge.shared.postgres.dsn == DSN
    assert PASSWORD not in repr(built) and PASSWORD not in repr(built.knowledge.shared)


def test_config_show_and_get_mask_every_dsn_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    ensure_home(home)
    raw = json.loads((home / "config.json").read_text())
    raw["gateway"].setdefault("knowledge", {})["shared"] = {"backend": "postgres", "postgres": {"dsn": DSN}}
    (home / "config.json").write_text(json.dumps(raw))
    os.chmod(home / "config.json", 0o600)
    assert main(["config", "show", "--home", str(home)]) == 0
    out = capsys.readouterr()
    shown = json.loads(out.out)["gateway"]["knowledge"]["shared"]
    assert shown["backend"] == "postgres" and shown["postgres"]["dsn"] == "<masked>" and shown["postgres"]["maxSize"] == 10
    assert PASSWORD not in out.out + out.err
    assert main(["config", "get", "gateway.knowledge.shared.postgres", "--home", str(home)]) == 0
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err and '"dsn": "<masked>"' in out.out


def test_the_kb_refuses_to_start_on_a_backend_it_does_not_have() -> None:
    require_built_in("sqlite")
    require_built_in("postgres")
    with pytest.raises(CommandError) as caught:
        require_built_in("cockroach")
    assert str(caught.value) == (
        "kb: gateway.knowledge.shared.backend is 'cockroach', but the cockroach vault backend is not built in this "
        "version (built in: sqlite, postgres); the KB does not start")


def test_config_set_takes_where_the_dsn_is_but_never_the_dsn_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    ensure_home(home)
    block = "gateway.knowledge.shared.postgres"
    assert main(["config", "set", f"{block}.dsnFile", "/etc/gateway/postgres/dsn", "--home", str(home)]) == 0
    assert main(["config", "set", "gateway.knowledge.shared.backend", "postgres", "--home", str(home)]) == 0
    shared = json.loads((home / "config.json").read_text())["gateway"]["knowledge"]["shared"]
    assert shared == {"postgres": {"dsnFile": "/etc/gateway/postgres/dsn"}, "backend": "postgres"}
    assert main(["config", "get", f"{block}.dsnFile", "--home", str(home)]) == 0
    assert '"/etc/gateway/postgres/dsn"' in capsys.readouterr().out  # a path, not a secret
    before = (home / "config.json").read_bytes()
    for path, value in ((f"{block}.dsn", DSN), (block, json.dumps({"dsn": DSN}))):
        assert main(["config", "set", path, value, "--home", str(home)]) != 0
        out = capsys.readouterr()
        assert "not set from the command line" in out.err and "dsnFile" in out.err
        assert PASSWORD not in out.out + out.err
    assert (home / "config.json").read_bytes() == before
