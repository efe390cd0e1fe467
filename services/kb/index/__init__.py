"""The archive index: sources, entries and chunks in SQLite FTS5, how they are indexed, queried and shown."""
