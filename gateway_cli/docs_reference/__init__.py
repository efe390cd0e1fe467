"""The reference pages of the documentation site, generated from the code (docs/reference/).

One module per page; ``pages`` lists them and writes or checks them all
(``python -m gateway_cli.docs_reference [--check]``, ``make reference``). A page says
only what the code it is generated from says: routes and comments from the protos'
descriptors, tools from the MCP server, keys from config_schema.json, commands from the
argument parser, metrics from the Prometheus registry.
"""
