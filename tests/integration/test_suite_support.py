"""The integration helpers' own promises, where a broken one would make other tests flaky."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from suite_support import free_ports


def test_free_ports_asked_side_by_side_are_never_the_same() -> None:
    # homes started side by side in threads each ask for ports before any server binds them: a
    # port told to two of them once let one home's clients reach the other home's KB
    with ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(lambda _: free_ports(7), range(64)))
    handed = [port for batch in batches for port in batch]
    assert len(handed) == len(set(handed)) == 64 * 7
