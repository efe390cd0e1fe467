"""The archive index: sources, entries and chunks in SQLite FTS5, how they are indexed, queried and shown.

The bottom wing: it imports no other wing of the KB and nothing of its top floor.
"""
