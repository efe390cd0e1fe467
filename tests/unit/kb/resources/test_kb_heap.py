"""``services.kb.resources.heap``: with the threshold set, a page-sized buffer is a mapping of its own (given
back to the system when freed); without it, the same buffers come from the heap. Each case runs in a
child process: the setting is for a process's life."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or "libc.so.6" not in str(ctypes.util.find_library("c")),
    reason="glibc's mallopt and mallinfo2 only",
)

CHILD = """
import ctypes, json, sys
from services.kb.resources.heap import keep_pages_off_heap
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
took = keep_pages_off_heap() if sys.argv[1] == "set" else None
before = libc.mallinfo2().hblks
buffers = [libc.malloc(16384 + 200) for _ in range(50)]  # a 16 KiB page with SQLite's header
during = libc.mallinfo2().hblks
for b in buffers:
    libc.free(b)
print(json.dumps({"took": took, "mapped": during - before, "after": libc.mallinfo2().hblks - before}))
"""


def run(mode: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def test_page_buffers_are_mappings_of_their_own_and_go_back_when_freed() -> None:
    seen = run("set")
    # A few may reuse a free block of that size the heap already had (from the interpreter's start).
    assert seen["took"] is True and 40 <= int(str(seen["mapped"])) <= 50 and seen["after"] == 0, seen


def test_without_it_they_come_from_the_heap() -> None:
    assert run("unset") == {"took": None, "mapped": 0, "after": 0}
