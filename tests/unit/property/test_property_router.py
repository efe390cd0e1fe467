"""The router tries a path only against the routes that fit its length: the answer of a full scan."""

from __future__ import annotations

from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from gateway_http.descriptors import all_routes
from gateway_http.router import BadPath, Match, Router, _match_one, split_path

ROUTER = Router(all_routes())
LITERALS = sorted({seg.literal for r in ROUTER.routes for seg in r.segments if seg.literal is not None})
VERBS = sorted({seg.verb for r in ROUTER.routes for seg in r.segments if seg.verb is not None})
METHODS = sorted({r.http_method for r in ROUTER.routes} | {"HEAD", "OPTIONS"})


def full_scan(method: str, segments: list[str]) -> tuple[Match | None, list[str]]:
    allowed: list[str] = []
    for route in ROUTER.routes:
        params = _match_one(route, segments)
        if params is None:
            continue
        if route.http_method == method:
            return Match(route, params), []
        allowed.append(route.http_method)
    return None, sorted(set(allowed))


SEGMENT = st.one_of(
    st.sampled_from(LITERALS),
    st.text(min_size=0, max_size=8),
    st.builds(lambda name, verb: f"{name}:{verb}", st.text(max_size=6), st.sampled_from(VERBS or ["x"])),
)


@given(st.sampled_from(METHODS), st.lists(SEGMENT, max_size=12))
def test_the_router_answers_as_a_full_scan_does(method: str, segments: list[str]) -> None:
    assert ROUTER.match(method, segments) == full_scan(method, segments)


@given(st.sampled_from(METHODS), st.lists(st.sampled_from(LITERALS), max_size=9), st.lists(st.text(max_size=4), max_size=3))
def test_paths_made_of_the_templates_own_words_match_as_a_full_scan_does(method: str, words: list[str], values: list[str]) -> None:
    segments = words + values
    assert ROUTER.match(method, segments) == full_scan(method, segments)


def split_every_segment(raw: bytes) -> list[str] | str:
    """The rule of split_path, decoding every segment: the segments, or the refusal's text."""
    parts = raw.decode("ascii").split("/")[1:]
    if parts and parts[-1] == "":
        parts = parts[:-1]
    out = []
    for part in parts:
        segment = unquote(part, errors="strict")
        if segment in (".", "..") or "\x00" in segment:
            return f"request path has a forbidden segment {segment!r}"
        out.append(segment)
    return out


ASCII_SEGMENT = st.one_of(st.sampled_from([".", "..", "", "a\x00b", "%41", "%2F"]), st.text(st.characters(codec="ascii", exclude_characters="/"), max_size=6))


@given(st.lists(ASCII_SEGMENT, max_size=8), st.booleans())
def test_split_path_answers_as_decoding_every_segment_does(segments: list[str], trailing_slash: bool) -> None:
    raw = ("/" + "/".join(segments) + ("/" if trailing_slash else "")).encode("ascii")
    try:
        expected = split_every_segment(raw)
    except UnicodeDecodeError:
        return  # a bad escape: refused by both, tested in test_shim_routes
    try:
        got: list[str] | str = split_path(raw)
    except BadPath as exc:
        got = str(exc)
    assert got == expected
