"""What a run leaves about itself: the journal of every op (reverts read it), audit.jsonl and
DREAMS.md, the run metrics. Imports only ``model``."""
