-- Ingested items and their chunks. Replaces the placeholder chunk table of 0001.
DROP TABLE chunks;

-- Every ingested item (a knowledge source or a memory): what was given, and its indexing state.
-- The row is also the item's job: `status`, `attempts`, `run_after` and the lease fields drive the
-- pipeline. `version` grows on every upsert, so a worker holding an older version cannot write.
CREATE TABLE items (
    item_key            INTEGER PRIMARY KEY,
    database_id         TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection          TEXT NOT NULL,
    id                  TEXT NOT NULL,
    kind                TEXT NOT NULL CHECK (kind IN ('knowledge', 'memory')),
    origin              TEXT NOT NULL CHECK (origin IN ('file', 'app', 'memory')),
    filename            TEXT NOT NULL DEFAULT '',
    media_type          TEXT NOT NULL DEFAULT '',
    title               TEXT NOT NULL DEFAULT '',
    source_type         TEXT NOT NULL DEFAULT '',
    description         TEXT NOT NULL DEFAULT '',
    note                TEXT NOT NULL DEFAULT '',
    url                 TEXT NOT NULL DEFAULT '',
    timestamp           TEXT NOT NULL DEFAULT '',
    text                TEXT,
    metadata            TEXT NOT NULL DEFAULT '{}',
    additional_metadata TEXT NOT NULL DEFAULT '{}',
    attachments         TEXT NOT NULL DEFAULT '[]',
    relations           TEXT NOT NULL DEFAULT '{}',
    user_name           TEXT NOT NULL DEFAULT '',
    infer               INTEGER NOT NULL DEFAULT 0,
    expires_at          INTEGER,
    version             INTEGER NOT NULL DEFAULT 1,
    status              TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'graph_creation', 'completed', 'errored')),
    error_code          TEXT NOT NULL DEFAULT '',
    error_message       TEXT NOT NULL DEFAULT '',
    attempts            INTEGER NOT NULL DEFAULT 0,
    run_after           INTEGER NOT NULL,
    lease_owner         TEXT,
    lease_until         INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (database_id, collection, id)
);
CREATE INDEX items_runnable ON items (run_after) WHERE status IN ('queued', 'processing');
CREATE INDEX items_listing ON items (database_id, kind, collection, created_at);
CREATE INDEX items_expiring ON items (expires_at) WHERE expires_at IS NOT NULL;

-- Raw bytes of uploaded files, kept apart so item rows stay small.
CREATE TABLE item_payloads (
    item_key INTEGER PRIMARY KEY REFERENCES items (item_key) ON DELETE CASCADE,
    bytes    BLOB NOT NULL
);

-- Indexed chunks; every row carries its database, collection and kind for scoped scans.
CREATE TABLE chunks (
    chunk_key   INTEGER PRIMARY KEY,
    chunk_id    TEXT NOT NULL UNIQUE,
    item_key    INTEGER NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    database_id TEXT NOT NULL,
    collection  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    position    INTEGER NOT NULL,
    content     TEXT NOT NULL,
    layout      TEXT NOT NULL DEFAULT '{}',
    embedding   BLOB,
    created_at  INTEGER NOT NULL
);
CREATE INDEX chunks_item ON chunks (item_key, position);
CREATE INDEX chunks_scope ON chunks (database_id, kind, collection);

-- The lexical index: BM25 over chunk text, kept in step with `chunks` by triggers, in the same
-- transactions (so it never needs catching up after a crash).
CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    content,
    content = 'chunks',
    content_rowid = 'chunk_key',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, content) VALUES (new.chunk_key, new.content);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content) VALUES ('delete', old.chunk_key, old.content);
END;
CREATE TRIGGER chunks_fts_update AFTER UPDATE OF content ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, content) VALUES ('delete', old.chunk_key, old.content);
    INSERT INTO chunks_fts (rowid, content) VALUES (new.chunk_key, new.content);
END;
