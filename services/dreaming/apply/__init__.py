"""Writing memory behind the guards: selection, sections and pinned rules, the applier, the commit
(pruned archive, backup, compare-and-swap), the recall check and its restore. Imports no wing above ``review``."""
