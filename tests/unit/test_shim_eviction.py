"""Which connection the REST shim closes at its connection cap (``gateway_http.eviction``).

Connections are plain strings and moments plain numbers: the choice depends on nothing else.
The real sockets are in tests/integration/test_shim_slow_clients.py.
"""

from __future__ import annotations

from gateway_http.eviction import WaitingConnections


def test_the_connection_that_has_waited_longest_goes_first() -> None:
    waiting: WaitingConnections[str] = WaitingConnections()
    for moment, connection in enumerate(("silent", "trickling", "idle keep-alive")):
        waiting.wait(connection, float(moment))
    assert [waiting.evict() for _ in range(3)] == ["silent", "trickling", "idle keep-alive"]
    assert len(waiting) == 0


def test_none_is_evicted_when_none_waits() -> None:
    waiting: WaitingConnections[str] = WaitingConnections()
    assert waiting.evict() is None
    waiting.wait("a", 1.0)
    waiting.done("a")  # its headers are whole: its request is being handled
    assert waiting.evict() is None


def test_a_connection_whose_request_is_being_handled_is_never_chosen() -> None:
    waiting: WaitingConnections[str] = WaitingConnections()
    waiting.wait("oldest, now mid-request", 1.0)
    waiting.wait("younger, idle", 2.0)
    waiting.done("oldest, now mid-request")
    assert waiting.evict() == "younger, idle"
    assert waiting.evict() is None


def test_sending_bytes_while_waiting_does_not_make_a_connection_younger() -> None:
    waiting: WaitingConnections[str] = WaitingConnections()
    waiting.wait("attacker", 1.0)
    waiting.wait("prompt", 2.0)
    waiting.wait("attacker", 3.0)  # a byte of its headers: it still waits since 1.0
    assert waiting.evict() == "attacker"


def test_a_connection_answered_waits_again_from_its_answer() -> None:
    waiting: WaitingConnections[str] = WaitingConnections()
    waiting.wait("kept alive", 1.0)
    waiting.wait("newer", 2.0)
    waiting.done("kept alive")  # a request, answered at 3.0: idle from then on
    waiting.wait("kept alive", 3.0)
    assert waiting.evict() == "newer"
    assert waiting.evict() == "kept alive"


def test_done_for_a_connection_that_does_not_wait_is_harmless() -> None:
    waiting: WaitingConnections[str] = WaitingConnections()
    waiting.done("never waited")
    waiting.wait("a", 1.0)
    waiting.done("a")
    waiting.done("a")  # closing after its headers were whole
    assert len(waiting) == 0
