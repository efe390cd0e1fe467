"""Fixtures shared by the integration tests; the helpers live in suite_support.py."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
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
        running.start("file_api", "watcher", "kb", "dreaming", "http")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def http(suite: Suite) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=suite.base_url, timeout=10) as client:
        yield client


# --- the console's browser tests: each module defines ``console_suite`` and skips first without a browser


class SharedBrowser:
    """One headless Chromium (``browser_support``) for the browser modules that run one after another.
    Closed before any other test runs: between its calls Playwright's sync API marks its event loop
    as running in this thread, and ``asyncio.run`` then refuses to start."""

    def __init__(self) -> None:
        self._running: Generator[Any, None, None] | None = None
        self._browser: Any = None

    def get(self) -> Any:
        if self._running is None:
            self._running = chromium()
            self._browser = next(self._running)
        return self._browser

    def close(self) -> None:
        if self._running is not None:
            self._running.close()
        self._running = self._browser = None


_SHARED_BROWSER = SharedBrowser()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test's teardown: the shared browser closes unless the next test uses it too."""
    try:
        return (yield)
    finally:
        if nextitem is None or "browser" not in getattr(nextitem, "fixturenames", ()):
            _SHARED_BROWSER.close()


@pytest.fixture(scope="module")
def browser() -> Any:
    """The shared Chromium; each test has a context of its own (``tab``)."""
    return _SHARED_BROWSER.get()


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
