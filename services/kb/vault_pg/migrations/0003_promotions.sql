-- 3: what nightly promotion and its undo record.

-- One row per promotion request, keyed by the request id dreaming sends with it: a request retried after
-- an outage, or by another host, finds its row and gets the first answer back instead of landing twice.
-- outcome: created, merged, updated, unchanged or declined; note: the note written (NULL when none);
-- write: the PromotionWrite record (gateway.promotion_write: kind, splice, block, hashes, folded twin)
-- that an undo needs, NULL when nothing was written. An undo sets undone_at and undo_outcome (undone,
-- gone or left), so undoing twice does nothing the second time.
CREATE TABLE promotions (
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    request_id text NOT NULL CHECK (request_id <> ''),
    agent_id text NOT NULL,
    run_id text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('created', 'merged', 'updated', 'unchanged', 'declined')),
    note text COLLATE "C",
    write jsonb,
    promoted_at timestamptz NOT NULL DEFAULT now(),
    undone_at timestamptz,
    undo_outcome text CHECK (undo_outcome IN ('undone', 'gone', 'left')),
    PRIMARY KEY (project, request_id),
    CONSTRAINT promotions_undone_when CHECK ((undone_at IS NULL) = (undo_outcome IS NULL))
);
CREATE INDEX promotions_run ON promotions (project, agent_id, run_id);
