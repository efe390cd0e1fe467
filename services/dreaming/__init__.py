"""Dreaming service (gRPC :50054): nightly memory consolidation of each agent's MEMORY.md and USER.md.

A run's deterministic passes (compactor, staleness GC, route-out), the reviewer's proposals
applied behind guards, shared promotion and the vault GC, with an audit and a journal to revert by.
The top floor (servicer, main, dreamer, nightly: the run's order) calls nine wings, bottom up
model, records, schedule, review, apply, passes, vault, history, forget (docs/architecture.md "Dreaming's wings").
"""
