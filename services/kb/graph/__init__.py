"""The graph layer: a vault's notes compiled, without an LLM, into link, contradiction and staleness reports.

It imports only ``index`` (the frontmatter reader): never ``archive``, ``vault``, ``resources`` or the top floor.
"""
