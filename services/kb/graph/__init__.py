"""The graph layer: a vault's notes compiled, without an LLM, into link, contradiction and staleness reports."""
