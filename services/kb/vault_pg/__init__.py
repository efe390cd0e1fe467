"""The shared vault on PostgreSQL: its schema, versioned migrations, search statements, connection pool and
the store (``store.PostgresVaultStore``) that implements the vault's store interface on them.

It imports the vault's store interface and names (``services.kb.vault.store``, ``names``), the index's hit
and frontmatter readers (``services.kb.index``) and the retrieval log's row type (``services.kb.archive``),
so a hit or a retrieval reads the same on both backends; the vault never imports it: the KB's start-up
(``services.kb.main``) chooses the backend (docs/concepts/vault.md "PostgreSQL schema").
"""
