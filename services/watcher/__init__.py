"""Watcher service (gRPC :50052): file watch, CLAUDE.md composition, sessions."""
