-- The organization's indexing webhook (one per organization). The signing secret must be kept
-- as given (it keys the HMAC of every delivery); it is never returned by any read.
CREATE TABLE webhooks (
    org_id         TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    event_types    TEXT NOT NULL DEFAULT '["indexing.status_changed"]',
    signing_secret TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);

-- The outbox: one row per event, written in the transaction that stores the item's terminal
-- state, so an event is never lost nor sent for a state that was not stored. The row is also the
-- delivery's job: `status`, `attempts`, `next_attempt_at` and the lease drive the dispatcher and
-- the sweeper. Rows copy the names they report, so the history outlives the database.
CREATE TABLE webhook_deliveries (
    delivery_key       INTEGER PRIMARY KEY,
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
    attempts           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at    INTEGER NOT NULL,
    lease_owner        TEXT,
    lease_until        INTEGER,
    last_status_code   INTEGER,
    error_code         TEXT,
    error_message      TEXT,
    webhook_url        TEXT NOT NULL DEFAULT '',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status IN ('pending', 'sweeping', 'failed');
CREATE INDEX webhook_deliveries_history ON webhook_deliveries (org_id, delivery_key);
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (org_id, status, delivery_key);
