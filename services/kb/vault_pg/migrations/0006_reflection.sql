-- 6: the vault's weekly reflection (docs/concepts/vault.md "Weekly reflection").

-- One row per vault: the run holding the claim (the run lock across hosts: '' when none) and until when,
-- the clusters that run planned, the watermark (the vault's revision at the end of the last run that set
-- it) and the signatures of the clusters reviewed and left since. A claim is an UPDATE of this row under
-- its row lock, so of two hosts claiming at once exactly one holds it.
CREATE TABLE vault_reflection (
    project text COLLATE "C" PRIMARY KEY REFERENCES vaults (project) ON DELETE CASCADE,
    claim_run text NOT NULL DEFAULT '',
    claim_expires timestamptz NOT NULL DEFAULT 'epoch',
    plan jsonb NOT NULL DEFAULT '{}',
    watermark text NOT NULL DEFAULT '',
    reviewed jsonb NOT NULL DEFAULT '[]'
);

-- The reflection audit: one row per run (kind 'run': its counts, outcomes and proposals) and per revert.
CREATE TABLE reflection_audit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('run', 'revert')),
    run_id text NOT NULL,
    at timestamptz NOT NULL,
    record jsonb NOT NULL
);
CREATE INDEX reflection_audit_project ON reflection_audit (project, id);

-- The merge journal: one row per applied merge, with every touched note's bytes before and after, so a
-- revert puts back exactly what was there.
CREATE TABLE reflection_merges (
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    merge_id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    run_id text NOT NULL,
    at timestamptz NOT NULL,
    entry jsonb NOT NULL,
    PRIMARY KEY (project, merge_id)
);
CREATE INDEX reflection_merges_run ON reflection_merges (project, run_id, seq);
