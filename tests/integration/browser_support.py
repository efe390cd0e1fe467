"""The web console in a real browser (``test_console_browser.py``): Playwright driving the system's
Chromium, headless, and the page's helpers.

Playwright's own browser download cannot work on the suite's machines; ``make test`` installs
Debian's ``chromium`` when it is missing (the Makefile's ``browser`` target). Without it, or
without the playwright package, the browser tests' module skips whole, with the one line ``MISSING``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any


CHROMIUM = Path("/usr/bin/chromium")
MISSING = "the console's browser tests need Debian's chromium at /usr/bin/chromium and the playwright package: run make test (as root it installs chromium with apt-get)"


def available() -> bool:
    """Whether the playwright package and the system's Chromium are both there."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return os.access(CHROMIUM, os.X_OK)


def chromium() -> Generator[Any, None, None]:
    """A headless Chromium (a generator for a module fixture; check ``available()`` first)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()


class Tab:
    """One page of the console with what the tests watch: dialogs opened, console errors, requests."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 800})
        self.page = self.context.new_page()
        self.base_url = base_url
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.errors: list[str] = []  # the page's uncaught errors and console errors, for a failure's message
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        self.page.on("request", lambda request: self.requests.append(request.url))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, fragment: str = "") -> None:
        self.page.goto(f"{self.base_url}/ui/{fragment}")

    def sign_in(self, key: str) -> None:
        self.page.fill("#api-key", key)
        self.page.click("#sign-in-form button[type=submit]")

    def until(self, expression: str, arg: Any = None, timeout: float = 10.0) -> Any:
        """Poll ``expression`` (a JavaScript function of ``arg``) until it is truthy; its value.
        Playwright's own wait_for_function evaluates a string in the page, which the console's
        policy (no eval) forbids, so the polling is done from here."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.page.evaluate(expression, arg)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not true after {timeout} s: {expression}; page errors: {self.errors}")
            self.page.wait_for_timeout(100)

    def rows(self) -> list[str]:
        self.page.wait_for_selector("#agents-rows")
        return list(self.page.eval_on_selector_all("#agents-rows tr", "rows => rows.map(r => r.dataset.agent)"))

    def wait_rows(self, count: int) -> list[str]:
        self.until("n => document.querySelectorAll('#agents-rows tr').length === n", count)
        return self.rows()

    def screenshot(self, folder: Path, name: str) -> Path:
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


def assert_inert(tab: Tab) -> None:
    """No element was made from hostile text (an image, an inline script, a ``javascript:`` link),
    none of its scripts ran (they would set ``window.__pwned``), and no dialog opened."""
    made = tab.page.evaluate(
        "() => ({img: document.querySelectorAll('img').length, scripts: document.querySelectorAll('script:not([src])').length,"
        " js: [...document.querySelectorAll('a')].filter(a => a.href.startsWith('javascript:')).length,"
        " pwned: window.__pwned === undefined ? null : window.__pwned})")
    assert made == {"img": 0, "scripts": 0, "js": 0, "pwned": None}
    assert tab.dialogs == []
