"""What past runs did, read back and undone: pending proposals (status, accept), revert, and an
entry's history (explain). Imports the wings below it, never the top floor."""
