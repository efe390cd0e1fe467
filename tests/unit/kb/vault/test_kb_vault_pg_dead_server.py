"""The vault pool's connections give up on a server that stops answering within seconds (TCP keepalives and
``tcp_user_timeout``), unless the DSN sets its own; tests/integration/test_vault_pg_partition.py cuts a real
link."""

from __future__ import annotations

from gateway.config_model import VaultPostgresSettings
from services.kb.vault_pg import pool


def parameters(dsn: str) -> dict[str, str]:
    opened = pool.open_pool(VaultPostgresSettings(dsn=dsn, min_size=1, max_size=1))
    try:
        with opened.connection() as conn:
            return conn.info.get_parameters()
    finally:
        pool.close_pools()


def test_a_connection_gives_up_on_a_silent_server_in_about_five_seconds(pg_dsn: str) -> None:
    given = parameters(pg_dsn)
    assert {k: given.get(k) for k in pool.DEAD_SERVER} == {k: str(v) for k, v in pool.DEAD_SERVER.items()}


def test_the_dsns_own_keepalive_settings_win(pg_dsn: str) -> None:
    given = parameters(f"{pg_dsn} keepalives_idle=30 tcp_user_timeout=60000")
    assert (given["keepalives_idle"], given["tcp_user_timeout"], given["keepalives_count"]) == ("30", "60000", "3")
