-- meshlink store schema v1 (PostgreSQL).
-- One global revision counter (a single row: its row lock serializes
-- writers, see src/postgres.rs); objects as of their last write; the change
-- feed keeps every write (no compaction yet). Keys use the "C" collation so
-- lists sort by bytes, exactly like the SQLite backend.
-- Bodies are TEXT, not JSONB: TEXT round-trips the JSON exactly (JSONB
-- rejects \u0000 in strings).
CREATE TABLE meshlink_meta (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    revision BIGINT  NOT NULL
);
INSERT INTO meshlink_meta (id, revision) VALUES (1, 0);

CREATE TABLE objects (
    kind            TEXT COLLATE "C" NOT NULL,
    mesh            TEXT COLLATE "C" NOT NULL,
    name            TEXT COLLATE "C" NOT NULL,
    labels          TEXT   NOT NULL,
    body            TEXT   NOT NULL,
    revision        BIGINT NOT NULL,
    create_revision BIGINT NOT NULL,
    PRIMARY KEY (kind, mesh, name)
);

CREATE TABLE changes (
    revision        BIGINT PRIMARY KEY,
    change_type     TEXT   NOT NULL CHECK (change_type IN ('created', 'updated', 'deleted')),
    kind            TEXT   NOT NULL,
    mesh            TEXT   NOT NULL,
    name            TEXT   NOT NULL,
    labels          TEXT   NOT NULL,
    body            TEXT   NOT NULL,
    create_revision BIGINT NOT NULL
);
