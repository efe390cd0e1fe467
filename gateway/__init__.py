"""Shared library of the suite: config, auth, atomic writes, logging, metrics, gRPC plumbing, backup and restore.

The ``gateway`` command itself lives in ``gateway_cli``, above this package.
"""
