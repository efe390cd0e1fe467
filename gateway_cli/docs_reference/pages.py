"""The generated reference pages: which file each is, writing them all, and finding stale ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gateway_cli.docs_reference import cli_page, config_page, grpc_page, mcp_page, metrics_page, rest_page

# File name under docs/reference/ → the function that renders it.
PAGES: dict[str, Callable[[], str]] = {
    "cli.md": cli_page.render,
    "config.md": config_page.render,
    "grpc.md": grpc_page.render,
    "mcp.md": mcp_page.render,
    "metrics.md": metrics_page.render,
    "rest.md": rest_page.render,
}
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "docs" / "reference"
COMMAND = "python -m gateway_cli.docs_reference"


def stale(folder: Path = REFERENCE_DIR) -> list[str]:
    """The pages whose file in ``folder`` is missing or differs from what the code renders now."""
    out = []
    for name, render in PAGES.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render():
            out.append(name)
    return out


def write(folder: Path = REFERENCE_DIR) -> list[str]:
    """Render every page into ``folder``; the names of the files that changed."""
    folder.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, render in PAGES.items():
        path = folder / name
        text = render()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed
