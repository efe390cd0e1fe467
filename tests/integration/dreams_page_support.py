"""Helpers of the Dreams page's browser tests (``test_console_dreams_*``): opening the page signed
in, Run now, and waiting until an action's answer is shown and the page has read everything again."""

from __future__ import annotations

from browser_support import Tab

RUN_TIMEOUT_S = 30.0


def settled(tab: Tab, message_js: str, arg: object = None, timeout: float = 10.0) -> None:
    """Wait until ``message_js`` (a JavaScript function of the page's message element and ``arg``)
    is true and the page has read everything again after its last action (no ``data-busy``)."""
    tab.until(f"a => !document.getElementById('dreams').dataset.busy && ({message_js})("
              "document.getElementById('dream-message'), a)", arg, timeout=timeout)


def open_dreams(tab: Tab, key: str, agent: str = "alfred") -> None:
    tab.open(f"#/agents/{agent}/dreams")
    tab.sign_in(key)
    tab.until("() => document.querySelector('#dream-history h3') !== null")


def run_now(tab: Tab, mode: str) -> None:
    """Run now in ``mode`` and wait for the run's report."""
    tab.page.select_option("#dream-mode", mode)
    tab.page.click("#dream-run")
    settled(tab, "m => m.textContent.startsWith('run ')", timeout=RUN_TIMEOUT_S)
