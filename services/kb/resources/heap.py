"""The KB's C heap: where SQLite's page buffers live (giving freed memory back is ``gateway.heap``).

SQLite allocates each page of a page cache with ``malloc`` (16 KiB pages, so a little over 16 KiB
each) and frees it when a cache is emptied: after every write (``PRAGMA shrink_memory``), at every
commit of another connection (a reader's cache), at a close. Under glibc, in the heap's arenas,
the small allocations made between those buffers pin the space they free: left there, under
steady traffic the heap's free space grows by about a megabyte a minute that ``malloc_trim`` does
not return (docs/capacity.md "Where the KB's memory goes"). ``keep_pages_off_heap`` sets glibc's
mmap threshold to 16 KiB at start, so each such buffer is a mapping of its own, returned to the
system when freed. The threshold set by hand also turns off glibc's sliding threshold, which
otherwise rises to the largest block ever freed. Elsewhere (another C library) both are no-ops.
"""

from __future__ import annotations

from typing import Final

from gateway.heap import c_library

M_MMAP_THRESHOLD: Final = -3  # glibc's mallopt parameter
PAGE_BUFFER_THRESHOLD: Final = 16 * 1024  # a 16 KiB page's buffer and above: a mapping each


def keep_pages_off_heap() -> bool:
    """Allocations of ``PAGE_BUFFER_THRESHOLD`` and more get mappings of their own; whether the C
    library took it (glibc's ``mallopt``)."""
    libc = c_library()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    return bool(mallopt is not None and mallopt(M_MMAP_THRESHOLD, PAGE_BUFFER_THRESHOLD) == 1)

