"""Client side of gRPC: channels with explicit limits and fast reconnects.

Every client call in the suite passes a deadline (``DEFAULT_DEADLINE_S``
unless it has a better one). Reconnect backoff is capped at one second so a
restarted backend is reached again quickly instead of after minutes.
"""

from __future__ import annotations

import grpc

# The largest message either side of any call sends or takes, the servers' (gateway.grpc_server) too.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
DEFAULT_DEADLINE_S = 10.0
HEALTH_DEADLINE_S = 1.0
# A dreaming run (RunNow, AcceptProposals) waits for its reviewer (reviewerTimeoutSeconds,
# 120 s by default), the KB's refresh and a free place among the runs.
DREAM_RUN_DEADLINE_S = 3600.0
# A forget (Forget, and the KB's ForgetText it calls) rewrites, reindexes and VACUUMs the agent's
# archive and, shared, the vault: minutes for a large one. The caller's deadline is the longer.
KB_FORGET_DEADLINE_S = 600.0
FORGET_DEADLINE_S = KB_FORGET_DEADLINE_S + 60.0

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 0),
]


def aio_channel(address: str) -> grpc.aio.Channel:
    """An asyncio channel to ``host:port`` with the suite's options."""
    return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)


def sync_channel(address: str) -> grpc.Channel:
    """A blocking channel to ``host:port`` with the suite's options."""
    return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
