-- 5: word search no longer reads a GIN pending list. With fastupdate (PostgreSQL's default) a GIN index
-- queues new entries in an unsorted pending list that every search scans until VACUUM merges it; after a
-- few hundred creates (1.3 MB pending) a word search took 2 to 20 times as long. notes_search now takes
-- each note's words at insert (about 1 ms more a create, measured at 2,000 notes); notes_trigram, whose
-- thousand-odd trigrams a note would cost about 6 ms at insert, keeps its pending list but merges it at
-- 256 kB instead of 4 MB, so a substring search scans at most that much. Both lists are merged now.
ALTER INDEX notes_search SET (fastupdate = off);
ALTER INDEX notes_trigram SET (gin_pending_list_limit = 256);
SELECT gin_clean_pending_list('notes_search');
SELECT gin_clean_pending_list('notes_trigram');
