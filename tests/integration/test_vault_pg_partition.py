"""Host A, host B and the PostgreSQL server each in a network namespace of its own (``ip netns``), joined
by a bridge at private addresses (no loopback between them); the server's link cut while both hosts create
notes, then brought back: every answer meanwhile is a 200 or a 503, no acknowledged note is lost or torn,
and both hosts create again by themselves. Unlike a killed server, a cut link answers nothing (no reset):
what a host sees is a connect that times out and a query whose reply does not come.

Network namespaces need root, which the PostgreSQL tests have here anyway (pg_support runs the server
as ``nobody`` then); without root the test is skipped, saying so.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pg_support import Cluster, running_cluster
from two_host_support import Host, running_hosts, through_an_outage

pytestmark = pytest.mark.integration

MEMBERS = ("db", "a", "b")  # a namespace each, at .2, .3 and .4 of the network


@dataclass(frozen=True)
class Net:
    """A bridge in this namespace (at ``.1`` of a /24) and a namespace per member, each on the bridge by a
    veth pair whose inside end is ``inside(member)``."""

    tag: str
    prefix: str  # "10.x.y."

    @property
    def bridge(self) -> str:
        return f"gwbr{self.tag}"

    @property
    def network(self) -> str:
        return f"{self.prefix}0/24"

    def netns(self, member: str) -> str:
        return f"gw{member}{self.tag}"

    def inside(self, member: str) -> str:
        return f"gwi{member}{self.tag}"

    def outside(self, member: str) -> str:
        return f"gwo{member}{self.tag}"

    def address(self, member: str) -> str:
        return f"{self.prefix}{MEMBERS.index(member) + 2}"

    def wrap(self, member: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.netns(member))

    def link(self, member: str, state: str) -> None:
        ip("-n", self.netns(member), "link", "set", self.inside(member), state)

    def build(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.prefix}1/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for member in MEMBERS:
            ns, inside, outside = self.netns(member), self.inside(member), self.outside(member)
            ip("netns", "add", ns)
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            ip("link", "set", outside, "master", self.bridge, "up")
            ip("link", "set", inside, "netns", ns)
            ip("-n", ns, "addr", "add", f"{self.address(member)}/24", "dev", inside)
            ip("-n", ns, "link", "set", "lo", "up")
            self.link(member, "up")

    def tear_down(self) -> None:
        for args in (*(("netns", "del", self.netns(m)) for m in MEMBERS), ("link", "del", self.bridge)):
            subprocess.run(["ip", *args], capture_output=True, check=False)


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()}"


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    if os.geteuid() != 0:
        pytest.fail("network namespaces (ip netns) need root: run make test as root, as CI does", pytrace=False)
    if shutil.which("ip") is None:
        pytest.fail("the ip command (iproute2) is missing: apt-get install iproute2", pytrace=False)
    used = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    prefix = next(p for p in (f"10.{random.randrange(64, 250)}.{random.randrange(256)}." for _ in range(50))
                  if p not in used)
    made = Net(str(os.getpid() % 100000), prefix)
    try:
        made.build()
        yield made
    finally:
        made.tear_down()


@pytest.fixture(scope="module")
def cluster(net: Net) -> Iterator[Cluster]:
    with running_cluster({"listen_addresses": net.address("db"), "synchronous_commit": "on"},
                         netns=net.netns("db"), trusted=(net.network,)) as started:
        yield started


@pytest.fixture(scope="module")
def database(cluster: Cluster) -> str:
    return cluster.create_database("partition")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, net: Net, database: str) -> Iterator[dict[str, Host]]:
    def place(label: str) -> dict[str, Any]:
        return {"address": net.address(label.lower()), "wrap": net.wrap(label.lower())}

    with running_hosts(tmp_path_factory, database, place) as started:
        yield started


def test_the_databases_link_cut_mid_traffic_loses_nothing_and_both_hosts_recover(
        hosts: dict[str, Host], net: Net, database: str) -> None:
    summary = through_an_outage(hosts, database, lambda: net.link("db", "down"), lambda: net.link("db", "up"))
    print(f"\nthe database's link cut: {summary}")
