"""Fixtures shared by the integration tests; the helpers live in suite_support.py."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from suite_support import Suite, make_home


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """file API + watcher + KB + dreaming + REST shim on free ports, shared by one test module."""
    home, ports, http_port = make_home(tmp_path_factory.mktemp("gw"))
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api")
        running.start("watcher")
        running.start("kb")
        running.start("dreaming")
        running.start("http")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def http(suite: Suite) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=suite.base_url, timeout=10) as client:
        yield client


