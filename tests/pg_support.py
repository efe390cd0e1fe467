"""A throwaway PostgreSQL cluster for the tests: initdb and pg_ctl on a temp directory and a free port.

The server binaries are Debian's (``postgresql``, which ``make postgres`` installs when they are missing):
``initdb`` on PATH, else the newest ``/usr/lib/postgresql/<major>/bin``. Without them the fixture fails
with one line saying what to install; it never skips (CI must run these tests).

initdb and the postmaster refuse to run as root: when the tests run as root (CI here does), both run as
``nobody`` (``subprocess``'s ``user``/``group``, no extra groups), and the cluster lives in a directory
of ``/tmp`` that belongs to ``nobody`` (pytest's own ``tmp_path`` is root's, mode 0700, out of its
reach). The unix socket goes in that directory too; clients connect over TCP to 127.0.0.1 as the
superuser ``postgres`` with trust authentication, which only that address accepts.

With ``tls`` (a certificate and key, e.g. from ``tls_support``) the server offers TLS only: its
pg_hba.conf admits TCP connections with ``hostssl`` and rejects plain ones, so a client must use TLS
(``sslmode=verify-full sslrootcert=<the CA>`` to check the server, or libpq's default ``prefer``).

The cluster runs without durability (``fsync``, ``synchronous_commit`` and ``full_page_writes`` off):
a crash loses it, and it is deleted at the end of the session anyway. A test that kills the postmaster
and counts acknowledged commits starts a cluster of its own with ``synchronous_commit`` on
(``start_cluster(settings)``): a commit is then in the kernel's page cache before it is acknowledged,
which a killed process cannot lose (``fsync`` matters only when the machine itself goes down). Each test gets a database of its
own (``fresh_database``), created from ``template0`` in UTF-8 with the ``C.UTF-8`` locale.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

MISSING = (
    "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: run `make postgres` as root "
    "(apt-get install postgresql), or put initdb on PATH"
)
RUN_AS = "nobody"
START_TIMEOUT_S = 60
LOCALE = "C.UTF-8"
DEBIAN_ROOT = Path("/usr/lib/postgresql")
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
}
# PostgreSQL's own defaults for durability, for a benchmark that must pay what a production server pays.
DURABLE_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
TLS_HBA = "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n"
_names = itertools.count(1)


@dataclass(frozen=True)
class ServerTls:
    """The server's certificate chain and private key, PEM."""

    cert: bytes
    key: bytes


def bin_dir() -> Path | None:
    """Where initdb, pg_ctl and postgres are: initdb on PATH (its real directory), else the newest Debian one."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    majors = sorted(DEBIAN_ROOT.glob("*/bin/initdb"), key=lambda p: _major(p.parent.parent.name))
    return majors[-1].parent if majors else None


def _major(name: str) -> int:
    return int(name) if re.fullmatch(r"\d+", name) else -1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running cluster: ``root`` holds its data directory, its socket and its log."""

    bin: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None  # who runs it; None: this process's user
    settings: dict[str, str] = field(default_factory=lambda: dict(SERVER_SETTINGS))
    netns: str | None = None  # the network namespace (``ip netns``) its server runs in; None: this one
    tls: ServerTls | None = None  # TLS only (``install_tls``)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        host = self.settings["listen_addresses"]
        return f"host={host} port={self.port} user={user} dbname={dbname} connect_timeout=10"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a server binary as the cluster's user, in its directory (and network namespace); its output in
        the exception when it fails."""
        argv = [str(self.bin / args[0]), *args[1:]]
        as_user: dict[str, Any] = {}
        if self.user is not None and self.netns is None:
            as_user = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        elif self.user is not None:  # entering the namespace needs root: the user changes after it
            argv = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--clear-groups", *argv]
        if self.netns is not None:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin", "LC_ALL": LOCALE, "TZ": "UTC"}
        done = subprocess.run(argv, cwd=self.root, env=env, capture_output=True, text=True,
                              timeout=START_TIMEOUT_S, **as_user)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done

    def init(self) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                 f"--locale={LOCALE}", "--no-sync")

    def start(self) -> None:
        """Start the server on its port and wait until it accepts connections (after a crash: once it has
        recovered)."""
        options = " ".join(f"-c {k}={v}" for k, v in self.settings.items())
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(START_TIMEOUT_S),
                 "-o", f"-p {self.port} -k {self.root} {options}", "start")

    def stop(self, mode: str = "immediate") -> None:
        """``pg_ctl stop -m mode`` (smart, fast or immediate); nothing when it is not running."""
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def install_tls(self) -> None:
        """With ``tls``: its files in the data directory (the key 0600, both the server's user's, as the
        postmaster requires), pg_hba.conf made TLS-only, and the settings that turn it on."""
        if self.tls is None:
            return
        for name, data in (("server.crt", self.tls.cert), ("server.key", self.tls.key), ("pg_hba.conf", TLS_HBA.encode())):
            path = self.data / name
            path.write_bytes(data)
            path.chmod(0o600)
            if self.user is not None:
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self.settings.update({"ssl": "on", "ssl_cert_file": "server.crt", "ssl_key_file": "server.key"})

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def kill_postmaster(self) -> None:
        """``kill -9`` of the postmaster; returns once it and every server process it had started have exited
        (they do by themselves on its death), so that ``start`` finds the shared memory free. A dead postmaster
        that nobody has reaped yet still answers ``kill(pid, 0)``: its lock files go, or ``start`` would take
        it for a running server."""
        pid = self.postmaster_pid()
        children = [p for p in _pids() if _parent(p) == pid]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while any(_alive(p) for p in (pid, *children)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server processes of {self.data} outlived the postmaster's kill")
            time.sleep(0.02)
        for lock in (self.data / "postmaster.pid", self.root / f".s.PGSQL.{self.port}.lock"):
            lock.unlink(missing_ok=True)

    def psql_file(self, path: Path, dbname: str) -> str:
        """Run the SQL file ``path`` with psql on database ``dbname`` as the superuser, stopping at its first
        error (RuntimeError with psql's output); what psql printed."""
        done = subprocess.run([str(self.bin / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-f", str(path), self.dsn(dbname)],
                              capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"psql -f {path.name} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def create_database(self, name: str) -> str:
        """A new empty database ``name``; its DSN."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LOCALE {}").format(
                sql.Identifier(name), sql.Literal(LOCALE)))
        return self.dsn(name)


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name; [] when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return []


def _parent(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[1]) if fields else 0


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def start_cluster(settings: dict[str, str] | None = None, netns: str | None = None,
                  trusted: tuple[str, ...] = (), tls: ServerTls | None = None) -> Cluster:
    """Start a cluster (``SERVER_SETTINGS`` with ``settings`` over them) in network namespace ``netns``,
    trusting clients from the ``trusted`` networks (CIDR) besides 127.0.0.1, TLS-only with ``tls``;
    pytest.fail with ``MISSING`` when there are no server binaries."""
    found = bin_dir()
    if found is None or not (found / "pg_ctl").exists():
        pytest.fail(MISSING, pytrace=False)
    user = pwd.getpwnam(RUN_AS) if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster = Cluster(found, root, free_port(), user, {**SERVER_SETTINGS, **(settings or {})}, netns, tls)
    try:
        cluster.init()
        cluster.install_tls()
        with (cluster.data / "pg_hba.conf").open("a") as hba:
            hba.writelines(f"host all all {network} trust\n" for network in trusted)
        cluster.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


@contextlib.contextmanager
def running_cluster(settings: dict[str, str] | None = None, netns: str | None = None,
                    trusted: tuple[str, ...] = ()) -> Iterator[Cluster]:
    """``start_cluster``'s cluster, stopped and deleted at the end."""
    cluster = start_cluster(settings, netns, trusted)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """One cluster for the session, stopped and deleted at its end."""
    started = time.monotonic()
    with running_cluster() as cluster:
        print(f"\npg_support: PostgreSQL on port {cluster.port} started in {time.monotonic() - started:.2f} s")
        yield cluster


@pytest.fixture
def fresh_database(postgres: Cluster) -> str:
    """The DSN of a new, empty database of the session's cluster, for this test alone."""
    return postgres.create_database(f"test_{os.getpid()}_{next(_names)}")
