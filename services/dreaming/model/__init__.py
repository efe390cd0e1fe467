"""The values dreaming's steps hand each other (proposals, op results, a run's report, edits,
budgets) and the KB seam (``Index``) with what it answers; pure, no I/O.
The bottom wing: it imports nothing of dreaming."""
