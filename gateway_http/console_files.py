"""The web console's static files, served by the shim under ``/ui/`` (docs/how-to/console.md).

The files ship in the package (``gateway_http/console/``) and are read once, at start, into a
table of name → bytes: a request is answered only for a name in that table, so no path a client
sends can reach another file (``..``, encoded slashes, links are never looked up on disk).

Every answer under ``/ui`` carries the console's security headers: a Content-Security-Policy
that allows only the page's own files and API (no inline script or style, no eval), no framing,
``nosniff`` and no referrer. Files are revalidated on each load (``no-cache`` with an ETag): a
new version of the suite is seen at once, and an unchanged file costs a 304.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

PREFIX = "/ui"
CONSOLE_DIR = Path(__file__).parent / "console"
INDEX = "index.html"

CSP = (
    "default-src 'self'; frame-ancestors 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@dataclass(frozen=True)
class Answer:
    """What to send for one request under ``/ui``: status, extra headers, body."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    length: int | None = None  # Content-Length when not len(body): a HEAD's, which is the GET's


def load_assets(folder: Path = CONSOLE_DIR) -> dict[str, Asset]:
    """Every servable file of ``folder`` by its name under ``/ui/`` (``js/app.js``); regular files
    with a known type only, links skipped."""
    assets = {}
    for path in sorted(folder.rglob("*")):
        content_type = CONTENT_TYPES.get(path.suffix)
        if content_type is None or path.is_symlink() or not path.is_file():
            continue
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        assets[path.relative_to(folder).as_posix()] = Asset(body, content_type, etag)
    return assets


def is_console_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class Console:
    """The answers of ``/ui`` and everything under it, from the files loaded at start."""

    def __init__(self, assets: dict[str, Asset] | None = None) -> None:
        self._assets = load_assets() if assets is None else assets

    def answer(self, method: str, path: str, if_none_match: str | None) -> Answer:
        """The answer to ``method path`` (a path for which ``is_console_path`` holds)."""
        if method not in ("GET", "HEAD"):
            return _text(405, f"method {method} not allowed here; allowed: GET, HEAD", ((b"allow", b"GET, HEAD"),))
        if path == PREFIX:
            return Answer(308, (*SECURITY_HEADERS, (b"location", b"/ui/"), (b"cache-control", b"no-cache")), b"")
        name = path[len(PREFIX) + 1:] or INDEX
        asset = self._assets.get(name)
        if asset is None:
            return _text(404, f"no console file {name[:200]!r}")
        cached = (b"etag", asset.etag.encode()), (b"cache-control", b"no-cache")
        if if_none_match is not None and asset.etag in (tag.strip() for tag in if_none_match.split(",")):
            return Answer(304, (*SECURITY_HEADERS, *cached), b"")
        headers = (*SECURITY_HEADERS, (b"content-type", asset.content_type.encode()), *cached)
        if method == "HEAD":
            return Answer(200, headers, b"", length=len(asset.body))
        return Answer(200, headers, asset.body)


def _text(status: int, message: str, extra: tuple[tuple[bytes, bytes], ...] = ()) -> Answer:
    headers = (*SECURITY_HEADERS, (b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store"), *extra)
    return Answer(status, headers, message.encode())
