"""Line-aligned chunking: boundaries, overlap carried forward, progress on a giant line."""

from __future__ import annotations

from services.kb.index.chunking import chunk_lines, segments_of, split_lines


def test_small_file_is_one_chunk() -> None:
    chunks = chunk_lines(["# Title", "", "- a", "- b"], chunk_tokens=400, chunk_overlap=80)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4)]
    assert chunks[0].text == "# Title\n\n- a\n- b"


def test_empty_file_has_no_chunks() -> None:
    assert chunk_lines([], 400, 80) == []


def test_boundaries_are_line_aligned_with_overlap() -> None:
    # 10 lines of 9 chars (+1 newline): a 10-token chunk holds 40 chars = 4 lines,
    # a 3-token overlap holds 12 chars = 1 line carried forward.
    lines = [f"line {n:04d}" for n in range(1, 11)]
    chunks = chunk_lines(lines, chunk_tokens=10, chunk_overlap=3)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4), (4, 7), (7, 10)]
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


def test_zero_overlap_tiles_the_file() -> None:
    lines = [f"line {n:04d}" for n in range(1, 11)]
    chunks = chunk_lines(lines, chunk_tokens=10, chunk_overlap=0)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4), (5, 8), (9, 10)]


def test_overlap_is_clamped_below_chunk_size_and_still_progresses() -> None:
    lines = [f"line {n:04d}" for n in range(1, 11)]
    chunks = chunk_lines(lines, chunk_tokens=10, chunk_overlap=500)
    starts = [c.start_line for c in chunks]
    assert starts == sorted(set(starts))  # strictly increasing
    assert chunks[-1].end_line == 10
    # Clamped to 9 tokens = 36 chars: three lines carried forward each time.
    assert [(c.start_line, c.end_line) for c in chunks[:2]] == [(1, 4), (2, 5)]


def test_giant_single_line_is_split_and_progresses() -> None:
    giant = "x" * 1000
    chunks = chunk_lines(["before", giant, "after"], chunk_tokens=10, chunk_overlap=5)
    assert chunks[0].start_line == 1
    giant_chunks = [c for c in chunks if c.start_line == 2 and c.end_line == 2]
    # One word longer than a chunk: cut at 40 characters, each segment starting half a chunk after the last.
    assert [c.text for c in giant_chunks] == [giant[n : n + 40] for n in range(0, 961, 20)]
    assert all(len(c.text) <= 40 for c in chunks)
    assert chunks[-1].end_line == 3
    assert len(chunks) == 51  # "before", 49 segments, "after"


def test_one_line_file_longer_than_a_chunk() -> None:
    chunks = chunk_lines(["y" * 95], chunk_tokens=10, chunk_overlap=9)
    assert [len(c.text) for c in chunks] == [40, 40, 40, 35]
    assert {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}


def test_a_long_line_is_cut_between_words() -> None:
    """A word no longer than a chunk is never cut; a longer one starts a segment of its own, and inside
    it segments overlap by half a chunk, so every stretch of up to half a chunk is whole in one."""
    line = "alpha beta " + "z" * 30 + " gamma"
    assert segments_of(line, 16) == ["alpha beta ", "z" * 16, "z" * 16, "z" * 14 + " ", "gamma"]
    assert segments_of("ab cd\tef gh", 6) == ["ab cd\t", "ef gh"]
    assert segments_of("abcdef gh", 6) == ["abcdef", " gh"]  # the break right after a chunk's length
    assert "".join(segments_of("word " * 100, 64)) == "word " * 100  # no long word: the segments tile the line


def test_split_lines_drops_trailing_newline_and_cr() -> None:
    assert split_lines("a\r\nb\n") == ["a", "b"]
    assert split_lines("a\n\nb") == ["a", "", "b"]
    assert split_lines("") == []
    assert split_lines("\n") == [""]


def test_first_line_numbers_the_chunks_as_in_the_file() -> None:
    """The indexer chunks the lines after the frontmatter: same chunks, shifted numbers (both chunking paths)."""
    cases = [
        ["# Title", "", "- a", "- b"],
        [f"line {n} " + "x" * (n % 17) for n in range(40)],
        ["before", "y" * 95, "after"],  # a giant line takes the general path
    ]
    for lines in cases:
        plain = chunk_lines(lines, 10, 3)
        shifted = chunk_lines(lines, 10, 3, first_line=6)
        assert shifted == [(start + 5, end + 5, text) for start, end, text in plain]


def test_a_segment_of_a_long_line_is_a_chunk_of_its_own() -> None:
    """The last segment is not joined to the lines after it, which would give a chunk that claims
    whole lines 2-4 and holds only the end of line 2."""
    chunks = chunk_lines(["ab", "x" * 20, "", "cd"], chunk_tokens=2, chunk_overlap=1)
    assert [(c.start_line, c.end_line, c.text) for c in chunks] == [
        (1, 1, "ab"), (2, 2, "x" * 8), (2, 2, "x" * 8), (2, 2, "x" * 8), (2, 2, "x" * 8), (3, 4, "\ncd"),
    ]
