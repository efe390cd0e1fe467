"""The shared vaults: notes, their index, names, near-duplicates, retirement, promotion and GC."""
