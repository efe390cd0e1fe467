"""libpq's connection failures as the one fixed line a vault call answers with (``vault_pg.connect_failure``):
a failed TLS check says so and which host names it compared, nothing else of the message is kept."""

from __future__ import annotations

import pytest

from services.kb.vault_pg.connect_failure import connect_failure

ATTEMPT = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: '


@pytest.mark.parametrize(("message", "says"), [
    (ATTEMPT + "SSL error: certificate verify failed",
     "TLS verification failed: the server's certificate is not signed by the CA in sslrootcert"),
    (ATTEMPT + 'server certificate for "localhost" does not match host name "127.0.0.1"',
     "TLS verification failed: the server's certificate is for 'localhost', not for '127.0.0.1'"),
    (ATTEMPT + 'server certificate for "db" (and 2 other names) does not match host name "db.internal"',
     "TLS verification failed: the server's certificate is for 'db', not for 'db.internal'"),
    (ATTEMPT + 'root certificate file "/nowhere/ca.crt" does not exist\nEither provide the file...',
     "TLS verification failed: the CA file that sslrootcert names"),
    (ATTEMPT + 'FATAL:  password authentication failed for user "gateway_kb"', "refused the role's password"),
    (ATTEMPT + "Connection refused\n\tIs the server running on that host?", "refused the connection"),
    ('connection failed: connection to server at "::1", port 5432 failed: Connection refused\n'
     "Multiple connection attempts failed. All failures were:\n- host: 'localhost', hostaddr: '127.0.0.1': "
     "SSL error: certificate verify failed", "TLS verification failed"),
])
def test_a_failure_is_one_fixed_line(message: str, says: str) -> None:
    reason = connect_failure(message)
    assert says in reason and "\n" not in reason and "5432" not in reason and "/nowhere" not in reason


def test_an_unknown_failure_is_no_reason() -> None:
    assert connect_failure("something else entirely, password=hush") == ""
