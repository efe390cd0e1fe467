"""The shared vault on PostgreSQL: its schema, versioned migrations and search statements.

Beside the embedded SQLite vault (``services.kb.vault``), never importing it: the two backends keep the
same things (docs/concepts/vault.md "PostgreSQL schema"). It imports no other part of the KB.
"""
