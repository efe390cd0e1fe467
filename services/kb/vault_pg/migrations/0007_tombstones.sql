-- 7: the vault's tombstones (docs/concepts/forget.md "Shared tombstones across hosts").

-- One row per tombstone of a shared forget (scope "*"), written by the host that made the forget and
-- mirrored by every host's KB into its home: the salted digest of the text's normalized words and the
-- salt beside it (the tombstone's own, never a home's), the lead of its first word, how many words, when,
-- by which key, how many places the forget changed. Never the text. A lift sets lifted_at ('' while the
-- tombstone holds) and keeps the row, so a host's cheap check (how many rows, how many lifted) sees it.
CREATE TABLE vault_tombstones (
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    id text COLLATE "C" NOT NULL,
    digest text NOT NULL,
    salt text NOT NULL,
    lead text NOT NULL DEFAULT '',
    words integer NOT NULL CHECK (words > 0),
    at text NOT NULL,
    by text NOT NULL DEFAULT '',
    places bigint NOT NULL DEFAULT 0,
    lifted_at text NOT NULL DEFAULT '',
    PRIMARY KEY (project, id)
);
