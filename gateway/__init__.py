"""Shared library of the suite: config, auth, atomic writes, logging, gRPC plumbing, the CLI."""
