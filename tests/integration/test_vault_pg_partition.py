"""The PostgreSQL server in a network namespace of its own (``ip netns``, reached at a private address
over a veth pair, not over loopback), its link cut while both hosts create notes and brought back: every
answer meanwhile is a 200 or a 503, no acknowledged note is lost or torn, and both hosts create again by
themselves. Unlike a killed server, a cut link answers nothing (no reset): what a host sees is a connect
that times out and a query whose reply does not come.

Network namespaces need root, which the PostgreSQL tests have here anyway (pg_support runs the server
as ``nobody`` then); without root the test is skipped, saying so. The hosts stay in the tests' namespace:
the suites' health checks and the tests' clients reach them on 127.0.0.1.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pg_support import Cluster, start_cluster
from two_host_support import Host, start_host, through_an_outage

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Link:
    """Namespace ``netns`` joined to this one by a veth pair: ``outside`` here at ``.1``, ``inside`` there at
    ``.2`` of ``network`` (a /30)."""

    netns: str
    outside: str
    inside: str
    network: str

    @property
    def server(self) -> str:
        return self.network.removesuffix("0/30") + "2"

    def set(self, state: str) -> None:
        ip("-n", self.netns, "link", "set", self.inside, state)


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()}"


def taken_networks() -> str:
    return subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def link() -> Iterator[Link]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces (ip netns) need root")
    if shutil.which("ip") is None:
        pytest.fail("the ip command (iproute2) is missing: apt-get install iproute2", pytrace=False)
    tag = f"{os.getpid() % 100000}"
    used = taken_networks()
    prefix = next(p for p in (f"10.{random.randrange(64, 250)}.{random.randrange(256)}." for _ in range(50))
                  if p not in used)
    made = Link(f"gwdb{tag}", f"gwo{tag}", f"gwi{tag}", f"{prefix}0/30")
    ip("netns", "add", made.netns)
    try:
        ip("link", "add", made.outside, "type", "veth", "peer", "name", made.inside)
        ip("link", "set", made.inside, "netns", made.netns)
        ip("addr", "add", f"{prefix}1/30", "dev", made.outside)
        ip("link", "set", made.outside, "up")
        ip("-n", made.netns, "addr", "add", f"{prefix}2/30", "dev", made.inside)
        ip("-n", made.netns, "link", "set", "lo", "up")
        made.set("up")
        yield made
    finally:
        subprocess.run(["ip", "link", "del", made.outside], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", made.netns], capture_output=True, check=False)


@pytest.fixture(scope="module")
def cluster(link: Link) -> Iterator[Cluster]:
    started = start_cluster({"listen_addresses": link.server, "synchronous_commit": "on"}, netns=link.netns,
                            trusted=(link.network,))
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(started.root, ignore_errors=True)


@pytest.fixture(scope="module")
def database(cluster: Cluster) -> str:
    return cluster.create_database("partition")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, database: str) -> Iterator[dict[str, Host]]:
    started: dict[str, Host] = {}
    try:
        for label in ("A", "B"):
            started[label] = start_host(tmp_path_factory.mktemp(f"cut{label}"), label, database)
        yield started
    finally:
        for host in started.values():
            host.suite.stop_all()


def test_the_databases_link_cut_mid_traffic_loses_nothing_and_both_hosts_recover(
        hosts: dict[str, Host], link: Link, database: str) -> None:
    summary = through_an_outage(hosts, database, lambda: link.set("down"), lambda: link.set("up"))
    print(f"\nthe database's link cut: {summary}")
