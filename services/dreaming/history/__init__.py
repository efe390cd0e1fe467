"""What past runs did, read back and undone: pending proposals (status, accept), revert, and an
entry's history (explain). The top wing: imports any wing, never the top floor."""
