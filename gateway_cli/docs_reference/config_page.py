"""docs/reference/config.md: every config.json key, from gateway/config_schema.json.

The table is ``gateway.config_docs.reference_table`` (the schema's own descriptions and
defaults); this page is its one home in the documentation.
"""

from __future__ import annotations

from gateway.config import schema
from gateway.config_docs import reference_table
from gateway_cli.docs_reference.markdown import heading, page, prose


def render() -> str:
    """The whole page."""
    about = schema()
    intro = [
        f"{prose(about.get('description', ''))} "
        "config.json lives in the gateway home (`--home`, else `$GATEWAY_HOME`, else `~/.claude-gateway`); "
        "every process reads it at start and follows later edits, but for the keys whose meaning says they need a restart. "
        "`gateway config check` validates it, `gateway config migrate` brings an older file up to "
        "`configVersion` ([CLI](cli.md)).",
        "",
        "A key written `a.b[]` is a field of each element of the array `a.b`. "
        "An empty default means the key has none of its own (an object, or a key that is optional).",
    ]
    body = [*heading(2, "Keys", "keys"), reference_table(), ""]
    return page("config.json", "`gateway/config_schema.json`", intro, body)
