-- Vectors a client computed itself, kept in an embeddings database (`is_embeddings_tenant`):
-- one row per chunk id, in the database's declared dimension, searched by exact cosine scan.
CREATE TABLE raw_embeddings (
    row_key     INTEGER PRIMARY KEY,
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection  TEXT NOT NULL,
    source_id   TEXT NOT NULL,
    chunk_id    TEXT NOT NULL,
    embedding   BLOB NOT NULL,
    metadata    TEXT NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL,
    UNIQUE (database_id, collection, chunk_id)
);
CREATE INDEX raw_embeddings_source ON raw_embeddings (database_id, collection, source_id);
