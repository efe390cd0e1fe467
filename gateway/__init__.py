"""Shared library of the suite: config, auth, atomic writes, logging, metrics, gRPC plumbing, backup and restore.

It imports nothing of ours above it: no service, not the shim, the MCP server or ``gateway_cli``
(where the ``gateway`` command lives); every other package builds on it.
"""
