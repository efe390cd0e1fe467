"""Whether a TCP address is free to listen on and, when it is not, who is listening there.

The launcher asks before it starts anything, so a port held by another suite
(or any other program) is reported in one line instead of a child's failure
half-way through start-up. The owner is looked up in Linux's ``/proc`` (the
listening socket's inode, then the process holding it); elsewhere, or without
the rights to read other processes, the line simply names the address.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

PROC = Path("/proc")
TCP_LISTEN = "0A"  # st column of /proc/net/tcp{,6}


class BindError(RuntimeError):
    """A process could not listen on one of its addresses (its gRPC port, its metrics port, the shim's port)."""


def listen_problem(host: str, port: int) -> str | None:
    """None when ``host:port`` can be bound now; else one line saying why (and who holds it)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        return f"cannot listen on {host}:{port}: {host!r} does not resolve ({exc.strerror})"
    with socket.socket(family, kind, proto) as sock:
        # As the servers do: a port left in TIME_WAIT by an earlier run can be bound again.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                holder = listener_of(port)
                return f"{host}:{port} is already in use" + (f" ({holder})" if holder else "")
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def _address(hex_address: str) -> str:
    """``0100007F`` → ``127.0.0.1``; 32 hex digits → an IPv6 address (words in host order)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return "[" + socket.inet_ntop(socket.AF_INET6, words) + "]"


def _listening_sockets(port: int) -> dict[str, str]:
    """Socket inode → ``address:port`` of every TCP socket listening on ``port``."""
    out: dict[str, str] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != TCP_LISTEN:
                continue
            hex_address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) == port:
                out[fields[9]] = f"{_address(hex_address)}:{port}"
    return out


def _command_line(pid: str) -> str:
    try:
        args = (PROC / pid / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [" ".join(a.decode(errors="replace").split()) for a in args if a]
    if words:
        words[0] = os.path.basename(words[0])  # "python3 -m gateway_cli.cli serve kb --home …" reads better
    text = " ".join(words)
    return text if len(text) <= 200 else text[:197] + "..."


def listener_of(port: int) -> str | None:
    """``"0.0.0.0:50051 is listening there, pid 123: python -m …"`` for ``port``, or None when unknown."""
    sockets = _listening_sockets(port)
    if not sockets:
        return None
    wanted = {f"socket:[{inode}]": address for inode, address in sockets.items()}
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            fds = os.listdir(PROC / pid / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(PROC / pid / "fd" / fd)
            except OSError:
                continue
            if target in wanted:
                return f"{wanted[target]} is listening there, pid {pid}: {_command_line(pid)}"
    return f"{next(iter(sockets.values()))} is listening there"
