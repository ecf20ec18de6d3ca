-- engram's schema on PostgreSQL (15+, with pgvector 0.8+): the same tables, keys and rules as
-- the embedded SQLite store after its migrations 1-10, in PostgreSQL's types. Times are Unix
-- milliseconds and every integer is BIGINT (the backend reads them as i64, as on SQLite);
-- free-form objects are JSONB (filters match them with operators GIN indexes serve); vectors are
-- pgvector's `vector`, undimensioned (each database declares its dimension).
CREATE EXTENSION IF NOT EXISTS vector;

-- API keys: the secret only as a SHA-256 hash.
CREATE TABLE api_keys (
    prefix      TEXT PRIMARY KEY,
    secret_hash BYTEA NOT NULL,
    org_id      TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    databases   JSONB NOT NULL DEFAULT '[]', -- database names; empty = all
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at);

-- Databases (tenants). A deleting database keeps its row until purged but frees its name.
CREATE TABLE databases (
    id                      TEXT PRIMARY KEY,
    org_id                  TEXT NOT NULL,
    name                    TEXT NOT NULL,
    state                   TEXT NOT NULL CHECK (state IN ('provisioning', 'ready', 'deleting')),
    metadata_schema         JSONB NOT NULL DEFAULT '[]',
    embeddings_dimension    BIGINT NOT NULL,
    is_embeddings_tenant    BOOLEAN NOT NULL DEFAULT FALSE,
    scheduler_ready         BOOLEAN NOT NULL DEFAULT FALSE,
    graph_ready             BOOLEAN NOT NULL DEFAULT FALSE,
    knowledge_vectors_ready BOOLEAN NOT NULL DEFAULT FALSE,
    memory_vectors_ready    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at              BIGINT NOT NULL,
    updated_at              BIGINT NOT NULL,
    deletion_requested_at   BIGINT,
    -- The fair queue's turn in which the database last had an item claimed.
    served_turn             BIGINT NOT NULL DEFAULT 0,
    default_collection      TEXT NOT NULL,
    instructions            JSONB NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX databases_live_name ON databases (org_id, name) WHERE state <> 'deleting';
CREATE INDEX databases_needing_work ON databases (state) WHERE state <> 'ready';
CREATE INDEX databases_turns ON databases (org_id, served_turn);

-- Collections (sub-tenants), created on first use.
CREATE TABLE collections (
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (database_id, name)
);

-- Every ingested item and its indexing job (status, attempts, run_after, lease); `version`
-- grows on every upsert so a worker holding an older one cannot write.
CREATE TABLE items (
    item_key            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    database_id         TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection          TEXT NOT NULL,
    id                  TEXT NOT NULL,
    kind                TEXT NOT NULL CHECK (kind IN ('knowledge', 'memory')),
    origin              TEXT NOT NULL CHECK (origin IN ('file', 'app', 'memory')),
    filename            TEXT NOT NULL DEFAULT '',
    media_type          TEXT NOT NULL DEFAULT '',
    title               TEXT NOT NULL DEFAULT '',
    title_key           TEXT NOT NULL DEFAULT '',
    source_type         TEXT NOT NULL DEFAULT '',
    description         TEXT NOT NULL DEFAULT '',
    note                TEXT NOT NULL DEFAULT '',
    url                 TEXT NOT NULL DEFAULT '',
    timestamp           TEXT NOT NULL DEFAULT '',
    text                TEXT,
    metadata            JSONB NOT NULL DEFAULT '{}',
    additional_metadata JSONB NOT NULL DEFAULT '{}',
    attachments         JSONB NOT NULL DEFAULT '[]',
    relations           JSONB NOT NULL DEFAULT '{}',
    user_name           TEXT NOT NULL DEFAULT '',
    infer               BOOLEAN NOT NULL DEFAULT FALSE,
    instructions        TEXT NOT NULL DEFAULT '',
    expires_at          BIGINT,
    version             BIGINT NOT NULL DEFAULT 1,
    status              TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'graph_creation', 'completed', 'errored')),
    error_code          TEXT NOT NULL DEFAULT '',
    error_message       TEXT NOT NULL DEFAULT '',
    attempts            BIGINT NOT NULL DEFAULT 0,
    run_after           BIGINT NOT NULL,
    lease_owner         TEXT,
    lease_until         BIGINT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (database_id, collection, id)
);
CREATE INDEX items_listing ON items (database_id, kind, collection, created_at);
CREATE INDEX items_expiring ON items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX items_queue ON items (database_id, run_after, item_key) WHERE status IN ('queued', 'processing');
CREATE INDEX items_in_flight ON items (database_id, lease_until) WHERE status = 'processing';
CREATE INDEX items_conversation ON items (database_id, collection, user_name, title, item_key)
    WHERE kind = 'memory' AND title <> '';
CREATE INDEX items_metadata ON items USING GIN (metadata jsonb_path_ops);
CREATE INDEX items_additional_metadata ON items USING GIN (additional_metadata jsonb_path_ops);

-- Raw bytes of uploaded files, kept apart so item rows stay small.
CREATE TABLE item_payloads (
    item_key BIGINT PRIMARY KEY REFERENCES items (item_key) ON DELETE CASCADE,
    bytes    BYTEA NOT NULL
);

-- Indexed chunks; every row carries its database, collection and kind for scoped reads. The
-- embedding is the model's (all-MiniLM-L6-v2, 384 dimensions); NULL when none was stored.
CREATE TABLE chunks (
    chunk_key   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chunk_id    TEXT NOT NULL UNIQUE,
    item_key    BIGINT NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    database_id TEXT NOT NULL,
    collection  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    position    BIGINT NOT NULL,
    content     TEXT NOT NULL,
    context     TEXT NOT NULL DEFAULT '',
    layout      JSONB NOT NULL DEFAULT '{}',
    embedding   vector,
    created_at  BIGINT NOT NULL
);
CREATE INDEX chunks_item ON chunks (item_key, position);
CREATE INDEX chunks_scope ON chunks (database_id, kind, collection);

-- The chunk change feed the derived indexes follow: every insert, delete and indexed-column
-- update of a chunk. Sequence numbers are handed out in commit order: every transaction that
-- writes chunks takes the feed's transaction lock first (the backend does so before its first
-- statement; the trigger takes it too, for any other path), so a reader following `seq` never
-- sees a later number commit before an earlier one and skips it. Several instances read the
-- feed, each at its own pace: each records how far it has applied it (`chunk_feed_readers`),
-- and the feed is trimmed through the slowest reader heard from lately. `chunk_log_trimmed`
-- holds the highest sequence number ever trimmed; a reader that comes back behind it rebuilds.
CREATE TABLE chunk_log (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chunk_key   BIGINT NOT NULL,
    database_id TEXT NOT NULL
);
CREATE TABLE chunk_log_trimmed (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    through BIGINT NOT NULL
);
INSERT INTO chunk_log_trimmed (through) VALUES (0);
CREATE TABLE chunk_feed_readers (
    reader  TEXT PRIMARY KEY,
    through BIGINT NOT NULL,
    seen_at BIGINT NOT NULL
);
CREATE FUNCTION chunks_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7405, 1);
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO chunk_log (chunk_key, database_id) VALUES (OLD.chunk_key, OLD.database_id);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO chunk_log (chunk_key, database_id) VALUES (NEW.chunk_key, NEW.database_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_log_insert_delete AFTER INSERT OR DELETE ON chunks
    FOR EACH ROW EXECUTE FUNCTION chunks_log();
CREATE TRIGGER chunks_log_update
    AFTER UPDATE OF content, context, collection, kind, database_id, embedding ON chunks
    FOR EACH ROW EXECUTE FUNCTION chunks_log();

-- A memory continuing a conversation is indexed with the one before it; when that one is
-- deleted or replaced, the next memory of the conversation forgets it.
CREATE FUNCTION items_forget_as_context() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.kind = 'memory' AND OLD.title <> ''
       AND (TG_OP = 'DELETE' OR NEW.version <> OLD.version) THEN
        UPDATE chunks SET context = ''
        WHERE context <> '' AND item_key = (
            SELECT item_key FROM items
            WHERE database_id = OLD.database_id AND collection = OLD.collection
              AND kind = 'memory' AND title <> '' AND user_name = OLD.user_name
              AND title = OLD.title AND item_key > OLD.item_key
            ORDER BY item_key LIMIT 1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER items_forget_as_context_on_delete AFTER DELETE ON items
    FOR EACH ROW EXECUTE FUNCTION items_forget_as_context();
CREATE TRIGGER items_forget_as_context_on_replace AFTER UPDATE OF version ON items
    FOR EACH ROW EXECUTE FUNCTION items_forget_as_context();

-- Webhooks: one per organization, and the outbox of deliveries (the row is the job).
CREATE TABLE webhooks (
    org_id         TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    event_types    JSONB NOT NULL DEFAULT '["indexing.status_changed"]',
    signing_secret TEXT,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
CREATE TABLE webhook_deliveries (
    delivery_key       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id        TEXT NOT NULL UNIQUE,
    org_id             TEXT NOT NULL,
    database_id        TEXT NOT NULL,
    database_name      TEXT NOT NULL,
    collection         TEXT NOT NULL,
    item_id            TEXT NOT NULL,
    event_type         TEXT NOT NULL,
    indexing_status    TEXT NOT NULL CHECK (indexing_status IN ('completed', 'errored')),
    item_error_code    TEXT NOT NULL DEFAULT '',
    item_error_message TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL CHECK (status IN ('pending', 'sweeping', 'delivered', 'failed', 'permanently_failed')),
    attempts           BIGINT NOT NULL DEFAULT 0,
    next_attempt_at    BIGINT NOT NULL,
    lease_owner        TEXT,
    lease_until        BIGINT,
    last_status_code   BIGINT,
    error_code         TEXT,
    error_message      TEXT,
    webhook_url        TEXT NOT NULL DEFAULT '',
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status IN ('pending', 'sweeping', 'failed');
CREATE INDEX webhook_deliveries_history ON webhook_deliveries (org_id, delivery_key);
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (org_id, status, delivery_key);

-- Feedback on earlier answers, by their request id.
CREATE TABLE feedback (
    feedback_id TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    database    TEXT NOT NULL DEFAULT '',
    collection  TEXT NOT NULL DEFAULT '',
    body        JSONB NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX feedback_by_request ON feedback (org_id, request_id, created_at);

-- Secrets the service makes for itself, shared by every instance on the store.
CREATE TABLE service_secrets (
    name       TEXT PRIMARY KEY,
    value      BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);

-- Client-computed vectors of embeddings databases, in each database's own dimension.
CREATE TABLE raw_embeddings (
    row_key     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection  TEXT NOT NULL,
    source_id   TEXT NOT NULL,
    chunk_id    TEXT NOT NULL,
    embedding   vector NOT NULL,
    metadata    JSONB NOT NULL DEFAULT '{}',
    created_at  BIGINT NOT NULL,
    UNIQUE (database_id, collection, chunk_id)
);
CREATE INDEX raw_embeddings_source ON raw_embeddings (database_id, collection, source_id);
