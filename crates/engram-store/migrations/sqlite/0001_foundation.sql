-- API keys: the secret is stored only as a SHA-256 hash; the prefix is public.
CREATE TABLE api_keys (
    prefix      TEXT PRIMARY KEY,
    secret_hash BLOB NOT NULL,
    org_id      TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    databases   TEXT NOT NULL DEFAULT '[]', -- JSON array of database names; empty = all
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    revoked_at  INTEGER
);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at);

-- Databases (tenants). A deleting database keeps its row until purged, but frees its name.
CREATE TABLE databases (
    id                      TEXT PRIMARY KEY,
    org_id                  TEXT NOT NULL,
    name                    TEXT NOT NULL,
    state                   TEXT NOT NULL CHECK (state IN ('provisioning', 'ready', 'deleting')),
    metadata_schema         TEXT NOT NULL DEFAULT '[]',
    embeddings_dimension    INTEGER NOT NULL,
    is_embeddings_tenant    INTEGER NOT NULL DEFAULT 0,
    scheduler_ready         INTEGER NOT NULL DEFAULT 0,
    graph_ready             INTEGER NOT NULL DEFAULT 0,
    knowledge_vectors_ready INTEGER NOT NULL DEFAULT 0,
    memory_vectors_ready    INTEGER NOT NULL DEFAULT 0,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,
    deletion_requested_at   INTEGER
);
CREATE UNIQUE INDEX databases_live_name ON databases (org_id, name) WHERE state <> 'deleting';
CREATE INDEX databases_by_name ON databases (name) WHERE state <> 'deleting';
CREATE INDEX databases_needing_work ON databases (state) WHERE state <> 'ready';

-- Collections (sub-tenants), created on first use.
CREATE TABLE collections (
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (database_id, name)
) WITHOUT ROWID;

-- Indexed chunks of knowledge and memories; every row carries its database and collection.
CREATE TABLE chunks (
    chunk_id    TEXT PRIMARY KEY,
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection  TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('knowledge', 'memory')),
    source_id   TEXT NOT NULL,
    position    INTEGER NOT NULL,
    content     TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX chunks_scope ON chunks (database_id, kind, collection, source_id, position);
