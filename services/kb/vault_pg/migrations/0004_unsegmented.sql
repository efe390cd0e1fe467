-- 4: which notes hold CJK, Thai (or Lao, Khmer, Myanmar, Hangul) text, for the trigram path's short words.
-- A word of one or two such characters has no trigram for notes_trigram to serve, so its LIKE read every
-- note's body; a note can only hold it if it holds such text at all. unsegmented is that, computed with
-- the characters of services.kb.index.query.UNSEGMENTED (a test compares the two), and the partial index
-- lists a project's notes that have it. Adding the stored column rewrites the table once.
ALTER TABLE notes ADD COLUMN unsegmented boolean NOT NULL GENERATED ALWAYS AS (
    body ~ '[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3005\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f\U00020000-\U0003134f]'
) STORED;
CREATE INDEX notes_unsegmented ON notes (project) WHERE unsegmented;
