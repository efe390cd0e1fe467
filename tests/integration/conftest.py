"""Fixtures shared by the integration tests; the helpers live in suite_support.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import Tab, chromium
from suite_support import ADMIN_KEY, Suite, make_home


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


# --- the console's browser tests: each module defines ``console_suite`` and skips first without a browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for the module (``browser_support``)."""
    yield from chromium()


@pytest.fixture
def tab(browser: Any, console_suite: Suite) -> Iterator[Tab]:
    """A fresh browser context on the module's ``console_suite``, closed after the test."""
    opened = Tab(browser, console_suite.base_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Path:
    """Where a browser test keeps its screenshots, as the test run's artifacts:
    ``build/test-artifacts/console/<test module>/`` in the checkout, or under ``$CONSOLE_SHOTS``."""
    root = Path(os.environ.get("CONSOLE_SHOTS") or Path(__file__).resolve().parents[2] / "build" / "test-artifacts" / "console")
    folder = root / request.module.__name__.rsplit(".", 1)[-1]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def admin_http(console_suite: Suite) -> Iterator[httpx.Client]:
    """A client of the module's ``console_suite`` with the admin key: the writes made outside the page."""
    with httpx.Client(base_url=console_suite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as client:
        yield client
