-- meshlink store schema v2 (SQLite): change-feed compaction.
-- The feed's compacted revision: every change up to and including it may
-- have been deleted, so a watcher resuming from an earlier revision is told
-- so (StoreError::Compacted) instead of silently missing changes. Kept in
-- its own row, apart from meshlink_meta, so that marking a compaction never
-- waits on (or holds up) the writers' revision counter.
CREATE TABLE feed_compaction (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);
INSERT INTO feed_compaction (id, revision) VALUES (1, 0);
