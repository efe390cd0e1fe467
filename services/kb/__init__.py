"""KB service (gRPC :50053): per-agent archives and the shared vault. Not built yet (issues 4, 5)."""
