-- 2: what the vault's GC needs: the retrieval log, each note's lifecycle, and the claim of each day's run.

-- Appended by the read path (search hits on the shared corpus, reads of one note), one row per retrieved
-- note under its live name (a hit on a retired twin counts for its name). The GC folds the log into
-- note_lifecycle with one DELETE ... RETURNING: the rows it sees are counted and gone in one transaction,
-- and rows other hosts commit meanwhile wait for the next fold (no id watermark, which concurrent
-- inserts would overtake).
CREATE TABLE retrieval_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    name text COLLATE "C" NOT NULL,
    entry_hash text NOT NULL,
    at timestamptz NOT NULL,
    kind text NOT NULL CHECK (kind IN ('search', 'get'))
);
CREATE INDEX retrieval_log_project ON retrieval_log (project, id);

-- One row per live name that was retrieved or retired by the GC. Apart from notes: folding the log never
-- bumps a note's version (a reader never conflicts with a writer), and the row outlives a retire and a
-- restore. retired_at: when the GC retired the note (NULL when it did not, or has restored it).
CREATE TABLE note_lifecycle (
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    name text COLLATE "C" NOT NULL,
    last_retrieved timestamptz,
    retrieval_count bigint NOT NULL DEFAULT 0 CHECK (retrieval_count >= 0),
    retired_at timestamptz,
    PRIMARY KEY (project, name)
);

-- The GC runs once per vault per day whichever host asks first: the day (a local date, YYYY-MM-DD) is
-- claimed by an UPDATE of this row before anything moves; last_report is that run's summary, which a
-- second call the same day answers with.
CREATE TABLE vault_gc (
    project text COLLATE "C" PRIMARY KEY REFERENCES vaults (project) ON DELETE CASCADE,
    day text NOT NULL CHECK (day ~ '^\d{4}-\d{2}-\d{2}$'),
    claimed_by text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    last_report jsonb
);
