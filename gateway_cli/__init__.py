"""The ``gateway`` command and the launcher: the one package that may import every other.

``gateway`` stays a library under everything; the entry points that start the
services, the shim and the MCP server live here, above them all.
"""
