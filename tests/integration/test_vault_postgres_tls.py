"""The PostgreSQL vault over TLS with verification (``sslmode=verify-full``): a cluster of its own that admits
TLS connections only, with a server certificate for ``localhost`` signed by a CA the test makes
(``tls_support``). The real suite whose DSN (in a ``dsnFile``, as on Kubernetes) names that CA and host
works, over TLS; one whose CA is another, or whose host name is not the certificate's, answers 503 naming
the vault and saying TLS verification failed, and neither the answer nor the KB's log holds the DSN or
its password (docs/operations.md "PostgreSQL for the shared vault")."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from pg_support import Cluster, start_cluster
from suite_support import ADMIN_KEY, Suite, make_home
from tls_support import authority

pytestmark = pytest.mark.integration

HEADERS = {"X-Api-Key": ADMIN_KEY}
NOTES = "/api/v1/agents/alfred/shared/notes"
PASSWORD = "tls-test-pw-4417"  # trust authentication ignores it: it is there to be never shown


@dataclass
class Server:
    cluster: Cluster
    database: str
    ca: Path  # the CA that signed the server's certificate
    other_ca: Path  # a CA that did not

    def dsn(self, host: str, ca: Path) -> str:
        return (f"host={host} hostaddr=127.0.0.1 port={self.cluster.port} dbname={self.database} user=postgres "
                f"password={PASSWORD} sslmode=verify-full sslrootcert={ca}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("tls")
    ca = authority("gateway vault test CA")
    cluster = start_cluster(tls=ca.server("localhost"))
    try:
        cluster.create_database("tls_vault")
        yield Server(cluster, "tls_vault", ca.write(folder / "ca.crt"), authority("another CA").write(folder / "other.crt"))
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


def start(tmp: Path, dsn: str, connect_timeout_s: float = 5) -> Suite:
    """The KB and the REST shim of a home whose vault's DSN is in a file, as the Kubernetes Secret mounts it."""
    (tmp / "postgres").mkdir(parents=True)
    (tmp / "postgres" / "dsn").write_text(dsn + "\n")
    shared = {"backend": "postgres", "postgres": {"dsnFile": str(tmp / "postgres" / "dsn"),
                                                  "connectTimeoutS": connect_timeout_s}}
    home, ports, http_port = make_home(tmp, knowledge={"shared": shared})
    suite = Suite(home, http_port, ports)
    suite.start("kb", "http")
    return suite


def test_a_verified_server_serves_the_vault_over_tls(server: Server, tmp_path: Path) -> None:
    suite = start(tmp_path, server.dsn("localhost", server.ca))
    try:
        with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
            made = http.post(NOTES, json={"name": "kiln", "content": "# Kiln\nThe kiln fires at noon.\n"})
            assert made.status_code == 200 and made.json().get("created") is True, made.text
            assert http.get(f"{NOTES}/kiln").json()["content"] == "# Kiln\nThe kiln fires at noon.\n"
        with psycopg.connect(server.dsn("localhost", server.ca)) as conn:
            kb = conn.execute("SELECT bool_and(s.ssl), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                              "WHERE a.application_name = 'gateway-kb'").fetchone()
        assert kb is not None and kb[0] is True and kb[1] >= 1  # every KB connection is TLS
    finally:
        suite.stop_all()
    assert PASSWORD not in suite.log_path("kb").read_text()


@pytest.mark.parametrize(("host", "which", "says"), [
    ("localhost", "other", "TLS verification failed: the server's certificate is not signed by the CA in sslrootcert "
                           "(or it has expired)"),
    ("vault.invalid", "ca", "TLS verification failed: the server's certificate is for 'localhost', not for "
                            "'vault.invalid', the host the DSN connects to"),
])
def test_a_server_that_fails_verification_is_a_503_saying_so(server: Server, tmp_path: Path,
                                                            host: str, which: str, says: str) -> None:
    suite = start(tmp_path, server.dsn(host, server.other_ca if which == "other" else server.ca), connect_timeout_s=2)
    try:
        with httpx.Client(base_url=suite.base_url, headers=HEADERS, timeout=30) as http:
            refused = http.post(NOTES, json={"name": "kiln", "content": "# Kiln\nThe kiln fires at noon.\n"})
        assert refused.status_code == 503, refused.text
        message = refused.json()["message"]
        assert message == f"the shared vault of project 'global' is unavailable: {says}"
        assert PASSWORD not in refused.text and "sslrootcert=" not in refused.text
    finally:
        suite.stop_all()
    lines = suite.log_lines("kb")
    assert [line["reason"] for line in lines if line.get("event") == "vault_postgres_connect_failed"] == [says]
    log = suite.log_path("kb").read_text()
    assert PASSWORD not in log and "sslrootcert=" not in log and "error connecting" not in log  # psycopg's own: kept out
