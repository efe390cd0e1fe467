"""The web console's files under /ui/ (gateway_http.console_files), through the shim in process."""

from __future__ import annotations

import asyncio
import fnmatch
import tomllib
from pathlib import Path

import httpx
import pytest

from gateway_http.app import ShimApp
from gateway_http.console_files import CONSOLE_DIR, CSP, Console, load_assets

BACKENDS = {name: "127.0.0.1:9" for name in ("file_api", "watcher", "kb", "dreaming")}


def get_all(paths: list[str], app: ShimApp | None = None, headers: dict[str, str] | None = None,
            method: str = "GET") -> list[httpx.Response]:
    shim = app or ShimApp(BACKENDS)

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=shim), base_url="http://shim") as client:
            return [await client.request(method, p, headers=headers) for p in paths]

    return asyncio.run(main())


def assert_secured(reply: httpx.Response) -> None:
    assert reply.headers["content-security-policy"] == CSP
    assert reply.headers["x-content-type-options"] == "nosniff"
    assert reply.headers["referrer-policy"] == "no-referrer"


def test_the_policy_allows_nothing_inline_and_nothing_foreign() -> None:
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    for rule in ("default-src 'self'", "frame-ancestors 'none'", "script-src 'self'", "style-src 'self'",
                 "img-src 'self' data:", "connect-src 'self'"):
        assert rule in CSP


def test_the_page_and_its_files_are_served_with_their_types_and_headers() -> None:
    index, css, js = get_all(["/ui/", "/ui/console.css", "/ui/js/main.js"])
    assert index.status_code == 200 and index.headers["content-type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="js/main.js">' in index.content
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    for reply in (index, css, js):
        assert_secured(reply)
        assert reply.headers["cache-control"] == "no-cache" and reply.headers["etag"].startswith('"')


def test_ui_redirects_to_ui_slash() -> None:
    [reply] = get_all(["/ui"])
    assert reply.status_code == 308 and reply.headers["location"] == "/ui/"
    assert_secured(reply)


def test_an_unchanged_file_is_a_304() -> None:
    [first] = get_all(["/ui/console.css"])
    [again] = get_all(["/ui/console.css"], headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert_secured(again)


@pytest.mark.parametrize("path", [
    "/ui/../gateway_http/app.py", "/ui/%2e%2e/app.py", "/ui/js/../../console_files.py", "/ui/..%2fapp.py",
    "/ui/%2e%2e%2f%2e%2e%2fpyproject.toml", "/ui//etc/passwd", "/ui/js/%2e%2e/index.html", "/ui/nothing.js",
    "/ui/..\\app.py", "/ui/js/", "/ui/%00",
])
def test_no_path_reaches_a_file_outside_the_console(path: str) -> None:
    [reply] = get_all([path])
    assert reply.status_code in (400, 404)
    assert b"import" not in reply.content and b"root:" not in reply.content
    if reply.request.url.path.startswith("/ui/"):  # httpx itself resolves a plain "/ui/../x"
        assert_secured(reply)


def test_only_files_in_the_table_are_answered(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<p>hi</p>")
    (tmp_path / "secret.txt").write_text("no type: never served")
    (tmp_path / "link.js").symlink_to(tmp_path / "secret.txt")
    assert sorted(load_assets(tmp_path)) == ["index.html"]
    app = ShimApp(BACKENDS, console=Console(load_assets(tmp_path)))
    ok, secret, link = get_all(["/ui/", "/ui/secret.txt", "/ui/link.js"], app)
    assert ok.content == b"<p>hi</p>" and secret.status_code == 404 and link.status_code == 404


def test_a_write_method_is_405() -> None:
    [reply] = get_all(["/ui/"], method="POST")
    assert reply.status_code == 405 and reply.headers["allow"] == "GET, HEAD"
    assert_secured(reply)


def test_the_shipped_files_use_no_html_parsing_of_data() -> None:
    for path in CONSOLE_DIR.rglob("*.js"):
        text = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in text, f"{path.name} uses {sink}"
    assert "style=" not in (CONSOLE_DIR / "index.html").read_text()


def test_the_shipped_files_keep_nothing_in_the_browser_and_log_nothing() -> None:
    """What the page shows and what is typed into it (a text to forget, docs/how-to/console.md
    "Forget a text") is never kept by the browser: the key alone goes to sessionStorage, nothing
    to localStorage, IndexedDB or a cookie, and nothing to the browser's console."""
    stored = []
    for path in CONSOLE_DIR.rglob("*.js"):
        text = path.read_text()
        for sink in ("localStorage", "indexedDB", "document.cookie", "console.", "caches."):
            assert sink not in text, f"{path.name} uses {sink}"
        stored += [path.name for _ in range(text.count("sessionStorage."))]
    assert stored == ["api.js"] * 3  # the key's get, set and remove


def test_every_console_file_is_package_data() -> None:
    """An installed wheel serves the same page: pyproject's package data names every file served."""
    pyproject = tomllib.loads((CONSOLE_DIR.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["gateway_http"]
    for name in load_assets():
        path = f"console/{name}"
        assert any(fnmatch.fnmatchcase(path, p) and p.count("/") == path.count("/") for p in patterns), path


def test_a_head_answers_the_gets_headers_and_length_with_no_body() -> None:
    [got] = get_all(["/ui/js/main.js"])
    [head] = get_all(["/ui/js/main.js"], method="HEAD")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(got.content)) == got.headers["content-length"]
    assert head.headers["etag"] == got.headers["etag"] and head.headers["content-type"] == got.headers["content-type"]
    assert_secured(head)
