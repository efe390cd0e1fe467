-- 1: the vaults and their notes, with the full-text (tsvector, GIN) and trigram (pg_trgm, GIN) indexes.
-- Runs in one transaction with search_path set to the vault's schema (then public): names are unqualified.

-- pg_trgm is a trusted extension: a role with CREATE on the database may add it; otherwise the database's
-- owner adds it beforehand (docs/operations.md "PostgreSQL for the shared vault") and this does nothing.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- One row per project that has a vault. tokenizer: the vault's search path ("unicode61": words, with
-- CJK/Thai queries going to the trigram index; "trigram": every query term through the trigram index).
CREATE TABLE vaults (
    project text COLLATE "C" PRIMARY KEY CHECK (project <> ''),
    tokenizer text NOT NULL DEFAULT 'unicode61' CHECK (tokenizer IN ('unicode61', 'trigram')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per note. A note and its retired twin (stale__<name> in the API and the SQLite vault) are two
-- rows of one name, retired false and true: the unique constraint gives one winner to concurrent creates
-- of a name, and a retire never overwrites a twin. Names compare and sort by code point (COLLATE "C").
-- The note's content is head || body: head is its frontmatter block verbatim ('' when none), body the
-- rest; frontmatter is head parsed (for provenance and title). version: compare-and-swap, bumped by
-- every write. created_*: the write that created it through the API (NULL for imported notes);
-- changed_*: the latest (agent, key label, dream run or '').
CREATE TABLE notes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project text COLLATE "C" NOT NULL REFERENCES vaults (project) ON DELETE CASCADE,
    name text COLLATE "C" NOT NULL CHECK (name <> '' AND name NOT LIKE 'stale\_\_%'),
    retired boolean NOT NULL DEFAULT false,
    retired_at timestamptz,
    retired_reason text,
    head text NOT NULL DEFAULT '',
    body text NOT NULL,
    frontmatter jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(frontmatter) = 'object'),
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    created_agent text,
    created_key text,
    created_run text,
    changed_agent text,
    changed_key text,
    changed_run text,
    -- 'simple': lowercased words, no stemming, no stop words (the SQLite vault's unicode61). The body only:
    -- frontmatter is not searched. A tsvector holds at most 1 MiB: a longer note is indexed by its first
    -- 262,144 characters (the vault's notes are at most 100 KB; one imported from elsewhere may not be).
    search tsvector GENERATED ALWAYS AS (to_tsvector('simple', left(body, 262144))) STORED,
    CONSTRAINT notes_one_per_state UNIQUE (project, name, retired),
    CONSTRAINT notes_retired_when CHECK (retired = (retired_at IS NOT NULL))
);
CREATE INDEX notes_search ON notes USING gin (search);
CREATE INDEX notes_trigram ON notes USING gin (body gin_trgm_ops);
