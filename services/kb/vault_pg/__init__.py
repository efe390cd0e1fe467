"""The shared vault on PostgreSQL: its schema, versioned migrations, search statements, connection pool, the
store (``store.PostgresVaultStore``) that implements the vault's store interface on them, and the registry
of the agents' vaults on it (``registry.PostgresVaults``).

It imports the vault's store interface, names and registry base (``services.kb.vault``), the index's hit
and frontmatter readers (``services.kb.index``), the graph's report type (``services.kb.graph``) and the
retrieval log's row type (``services.kb.archive``), so a hit or a retrieval reads the same on both
backends; the vault never imports it: the KB's start-up (``services.kb.main``) chooses the backend
(docs/concepts/vault.md "PostgreSQL backend").
"""
