"""Matching a request path against the route templates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple
from urllib.parse import unquote

from gateway_http.descriptors import Route


class BadPath(ValueError):
    """The path itself is unacceptable (bad escapes, dot segments)."""


class Match(NamedTuple):
    route: Route
    params: dict[str, str]


def split_path(raw_path: bytes) -> list[str]:
    """Percent-decoded segments of a raw request path.

    Decoding happens per segment, after the split, so an encoded ``/`` stays
    inside its segment (and is then refused by the field's own validation).
    Raises BadPath for ``.``/``..`` segments, NUL, or bytes that are not UTF-8.
    """
    try:
        text = raw_path.decode("ascii")
    except UnicodeDecodeError:
        raise BadPath("request path must be ASCII (percent-encode other characters)") from None
    parts = text.split("/")[1:]
    if parts and parts[-1] == "":
        parts = parts[:-1]  # tolerate one trailing slash
    if "%" not in text and "." not in parts and ".." not in parts and "\x00" not in text:
        return parts  # nothing to decode, nothing to refuse: what the loop below would return
    out = []
    for part in parts:
        try:
            segment = unquote(part, errors="strict")
        except UnicodeDecodeError:
            raise BadPath("request path has percent-escapes that are not UTF-8") from None
        if segment in (".", "..") or "\x00" in segment:
            raise BadPath(f"request path has a forbidden segment {segment!r}")
        out.append(segment)
    return out


def _match_one(route: Route, segments: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    pattern = route.segments
    for i, seg in enumerate(pattern):
        if seg.rest:
            if i >= len(segments):
                return None
            params[seg.field or ""] = "/".join(segments[i:])
            return params
        if i >= len(segments):
            return None
        if seg.literal is not None:
            if seg.literal != segments[i]:
                return None
        else:
            value = segments[i]
            if seg.verb is not None:
                suffix = ":" + seg.verb
                if not value.endswith(suffix):
                    return None
                value = value[: -len(suffix)]
            if value == "":
                return None
            params[seg.field or ""] = value
    return params if len(segments) == len(pattern) else None


def _may_fit(route: Route, count: int) -> bool:
    """Whether ``route`` can match a path of ``count`` segments."""
    for i, seg in enumerate(route.segments):
        if seg.rest:
            return count > i  # {field=**} takes at least one segment
    return count == len(route.segments)


class Router:
    """The routes, tried in order; a path is tried only against the routes that can fit its length."""

    def __init__(self, routes: Iterable[Route]) -> None:
        # Routes whose last segment has a :verb are tried first, so
        # ``notes/x:retire`` is the custom method, not a note named "x:retire".
        self._routes = tuple(sorted(routes, key=lambda r: not any(s.verb for s in r.segments)))
        # A path longer than every template can only meet the ``**`` routes: one bucket for all such lengths.
        self._past_longest = max((len(r.segments) for r in self._routes), default=0) + 1
        self._by_count: dict[int, tuple[Route, ...]] = {}

    @property
    def routes(self) -> tuple[Route, ...]:
        return self._routes

    def _candidates(self, count: int) -> tuple[Route, ...]:
        count = min(count, self._past_longest)
        found = self._by_count.get(count)
        if found is None:  # in the routes' own order, so the first match is the one a full scan finds
            found = self._by_count[count] = tuple(r for r in self._routes if _may_fit(r, count))
        return found

    def match(self, http_method: str, segments: list[str]) -> tuple[Match | None, list[str]]:
        """``(match, allowed methods)``. No match with methods allowed means 405."""
        allowed: list[str] = []
        for route in self._candidates(len(segments)):
            params = _match_one(route, segments)
            if params is None:
                continue
            if route.http_method == http_method:
                return Match(route, params), []
            allowed.append(route.http_method)
        return None, sorted(set(allowed))
