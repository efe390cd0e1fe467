"""The deterministic passes before the reviewer: the compactor, the route-out and the staleness GC,
each moving entries through ``relocate``. Imports no wing above ``apply`` (never vault, history, the top floor)."""
