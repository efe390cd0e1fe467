"""The shared vaults: notes, their index, names, near-duplicates, retirement, promotion and GC.

It imports ``index``, ``graph``, ``resources``, ``archive`` (the retrieval log) and ``file_watch``: never the
servicer, main or ``metrics``.
"""
