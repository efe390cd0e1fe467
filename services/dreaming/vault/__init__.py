"""The shared vault through the KB: promotion of applied durable adds, its undo on a revert, and the
vault's GC after a run. Imports no wing above ``passes`` (never history or the top floor)."""
