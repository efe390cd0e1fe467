"""The shared vault's weekly reflection (docs/concepts/vault.md "Weekly reflection"): each vault's settings,
its weekly slot and scheduler, the reviewer's prompt and reply for one cluster, and the run through the KB's
planning and merge calls (a seam). The top wing: imports any wing, never the top floor."""
