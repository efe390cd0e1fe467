"""A certificate authority of a test's own, and server certificates it signs (the ``cryptography`` package):
what a TLS test of the PostgreSQL vault needs to check ``sslmode=verify-full`` both ways. Keys are
ECDSA P-256 (fast to make); certificates are valid from a minute ago for a day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pg_support import ServerTls


@dataclass(frozen=True)
class Authority:
    """A self-signed CA: its certificate and key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, path: Path) -> Path:
        """The CA's certificate written to ``path`` (a client's ``sslrootcert``)."""
        path.write_bytes(self.pem)
        return path

    def server(self, host: str) -> ServerTls:
        """A server certificate for the DNS name ``host`` (its only name), signed by this CA, and its key."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (_builder(host, key, self.cert.subject)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(self.key, hashes.SHA256()))
        pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return ServerTls(cert.public_bytes(serialization.Encoding.PEM), pem_key)


def authority(name: str) -> Authority:
    """A new CA called ``name``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (_builder(name, key, subject)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return Authority(cert, key)


def _builder(name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name) -> x509.CertificateBuilder:
    now = datetime.now(UTC)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=1))
            .not_valid_after(now + timedelta(days=1)))
