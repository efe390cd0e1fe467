"""Dreaming service (gRPC :50054): nightly memory consolidation. Not built yet."""
