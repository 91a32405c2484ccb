-- meshlink store schema v1 (SQLite).
-- One global revision counter; objects as of their last write; the change
-- feed keeps every write (no compaction yet).
CREATE TABLE meshlink_meta (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);
INSERT INTO meshlink_meta (id, revision) VALUES (1, 0);

CREATE TABLE objects (
    kind            TEXT    NOT NULL,
    mesh            TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    labels          TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    revision        INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    PRIMARY KEY (kind, mesh, name)
);

CREATE TABLE changes (
    revision        INTEGER PRIMARY KEY,
    change_type     TEXT    NOT NULL CHECK (change_type IN ('created', 'updated', 'deleted')),
    kind            TEXT    NOT NULL,
    mesh            TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    labels          TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    create_revision INTEGER NOT NULL
);
