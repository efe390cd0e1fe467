"""``gateway.heap``: the C library is found without a subprocess, and ``give_back`` returns what
the heap holds free (glibc's ``malloc_trim``), each checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1].parent

SCRIPT = textwrap.dedent("""
    import json, sys
    from gateway import heap

    def anon_kib():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    libc = heap.c_library()
    blocks = [bytearray(1000) for _ in range(60_000)]  # ~60 MB of small blocks: the heap, not mappings
    del blocks[1:]  # freed into the heap, not at its top: kept there until trimmed
    before = anon_kib()
    heap.give_back()
    print(json.dumps({"trim": hasattr(libc, "malloc_trim"), "before": before, "after": anon_kib(),
                      "subprocess": "subprocess" in sys.modules}))
""")


def test_give_back_returns_the_free_heap_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    seen = json.loads(out.stdout)
    assert not seen["subprocess"]  # no ldconfig run to find the library
    if seen["trim"]:  # glibc: tens of MB of free heap pages given back
        assert seen["before"] - seen["after"] > 20_000, seen
