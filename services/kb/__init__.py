"""KB service (gRPC :50053): per-agent knowledge archives, the shared vaults and their graph reports.

The top floor (servicer, vault_servicer, main, file_watch, metrics, rest_hints) stands on six wings (``index``, ``graph``,
``resources``, ``archive``, ``vault``, ``vault_pg``: the vault's PostgreSQL schema); no wing imports servicer or main, and no module imports another service.
"""
