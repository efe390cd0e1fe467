"""KB service (gRPC :50053): per-agent knowledge archives, the shared vaults and their graph reports."""
