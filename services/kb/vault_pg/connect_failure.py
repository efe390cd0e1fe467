"""Why a connection to the vault's PostgreSQL server failed, in one line an operator can act on
(docs/operations.md "PostgreSQL for the shared vault": TLS).

libpq's message is read, never repeated whole: it is classified into a fixed sentence, keeping at most
the host names a certificate check compared (no DSN, no password, no file content). A failed TLS check
(``sslmode=verify-full``: a certificate not signed by the CA of ``sslrootcert``, or one for another host
name, or no CA file to check against) says "TLS verification failed".
"""

from __future__ import annotations

import re
from typing import Final

TLS: Final = "TLS verification failed"
_HOST_MISMATCH = re.compile(r'server certificate for "([^"]*)"(?: \(and \d+ other names?\))? does not match host name "([^"]*)"')
_HBA: Final = "the server's pg_hba.conf does not admit this connection (its role, database, address or TLS)"
_REASONS: Final = (  # (a fragment of libpq's message, what it means), the first match wins
    ("certificate verify failed", f"{TLS}: the server's certificate is not signed by the CA in sslrootcert "
                                  "(or it has expired)"),
    ("root certificate file", f"{TLS}: the CA file that sslrootcert names (or ~/.postgresql/root.crt) cannot be read"),
    ("does not support SSL", "the server does not offer TLS, and the DSN's sslmode requires it"),
    ("password authentication failed", "the server refused the role's password"),
    ("no pg_hba.conf entry", _HBA),
    ("pg_hba.conf rejects", _HBA),
    ("Connection refused", "its PostgreSQL server refused the connection (is it running, on that port?)"),
    ("timeout expired", "its PostgreSQL server did not answer within connectTimeoutS"),
    ("could not translate host name", "the server's host name does not resolve"),
)


def connect_failure(message: str) -> str:
    """The reason for libpq's failure ``message``, as a fixed sentence ("" when it is none of the known)."""
    mismatch = _HOST_MISMATCH.search(message)
    if mismatch:
        return (f"{TLS}: the server's certificate is for {mismatch.group(1)!r}, not for {mismatch.group(2)!r}, the "
                "host the DSN connects to")
    return next((reason for fragment, reason in _REASONS if fragment in message), "")
