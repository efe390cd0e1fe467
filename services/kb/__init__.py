"""KB service (gRPC :50053): per-agent knowledge archives (and, later, the shared vault)."""
