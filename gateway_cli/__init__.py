"""The ``gateway`` command and the launcher: the entry points that start the services, the shim and the MCP server.

The one package that may import every other; none imports it (``gateway`` stays a library under everything).
"""
