"""The frames between the shim and its MCP child (``gateway.mcp_frames``): what goes in comes out,
and a frame over its limit, torn, or not a JSON object is refused as a whole."""

from __future__ import annotations

import asyncio

import pytest

from gateway import mcp_frames
from gateway.mcp_frames import FrameError


def read_all(data: bytes, max_body_bytes: int = 1024) -> list[tuple[dict[str, object], bytes] | None]:
    """Every frame ``read`` finds in ``data``, then its None at the end."""

    async def main() -> list[tuple[dict[str, object], bytes] | None]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        out: list[tuple[dict[str, object], bytes] | None] = []
        while True:
            frame = await mcp_frames.read(reader, max_body_bytes)
            out.append(frame)
            if frame is None:
                return out

    return asyncio.run(main())


def test_frames_come_out_as_they_went_in() -> None:
    headers = [(b"content-type", b"application/json"), (b"x-odd", bytes(range(128, 256)))]
    meta = {"id": 7, "t": "start", "headers": mcp_frames.headers_out(headers)}
    data = mcp_frames.encode(meta, b"\x00body\xff") + mcp_frames.encode({"id": 8, "t": "body", "more": False})
    first, second, end = read_all(data)
    assert first == (meta, b"\x00body\xff") and second == ({"id": 8, "t": "body", "more": False}, b"") and end is None
    assert mcp_frames.headers_in(first[0]["headers"]) == headers  # type: ignore[arg-type]


def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    data = mcp_frames.encode({"id": 1}, b"x" * 1025)
    with pytest.raises(FrameError, match="over the limit"):
        read_all(data, max_body_bytes=1024)
    assert read_all(data, max_body_bytes=1025)[0] == ({"id": 1}, b"x" * 1025)


def test_meta_over_the_limit_is_refused() -> None:
    head = mcp_frames.HEADER.pack(mcp_frames.MAX_META_BYTES + 1, 0)
    with pytest.raises(FrameError, match="over the limit"):
        read_all(head)


@pytest.mark.parametrize("cut", [3, 8, 12])  # inside the header, after it, inside the meta
def test_a_torn_frame_is_refused(cut: int) -> None:
    with pytest.raises(FrameError, match="the stream ended inside"):
        read_all(mcp_frames.encode({"id": 1, "t": "body"}, b"abc")[:cut])


@pytest.mark.parametrize("meta", [b"[1, 2]", b"{not json"])
def test_meta_that_is_not_a_json_object_is_refused(meta: bytes) -> None:
    with pytest.raises(FrameError, match="meta is not"):
        read_all(mcp_frames.HEADER.pack(len(meta), 0) + meta)
