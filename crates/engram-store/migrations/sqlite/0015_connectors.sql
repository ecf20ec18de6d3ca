-- Connectors (issue 17): an organization's connections to external providers, what each syncs
-- (resources), what each has synced (objects: the dedupe key is provider + account scope +
-- native id, held as a deterministic item id), and a record of every run.
--
-- Scheduling: a connector is due when `next_sync_at` has passed; a sync is claimed by setting
-- `run_id` and a short `lease_until`, renewed while it runs, so a dead instance's sync is taken
-- over when its lease lapses. Every progress write checks the lease (`run_id`), so a sync that
-- lost its lease writes nothing. Progress is saved per page (`pass_position`), so a taken-over
-- sync resumes where the dead one stopped.
--
-- The same text serves PostgreSQL (migration 7 there, with BIGINT and BYTEA): flags are
-- integers, JSON is text.
CREATE TABLE connectors (
    connector_id             TEXT PRIMARY KEY,
    org_id                   TEXT NOT NULL,
    provider                 TEXT NOT NULL,
    name                     TEXT NOT NULL DEFAULT '',
    auth_type                TEXT NOT NULL DEFAULT '',
    database_id              TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection               TEXT NOT NULL,
    account_scope            TEXT NOT NULL DEFAULT '',
    custom_instructions      TEXT NOT NULL DEFAULT '',
    sync_interval_s          INTEGER NOT NULL,
    -- Sealed (AEAD) credentials: never returned but through the vault's reveal.
    credentials              BLOB,
    credentials_updated_at   INTEGER,
    documents_dispatched     INTEGER NOT NULL DEFAULT 0,
    first_data_dispatched_at INTEGER,
    first_sync_at            INTEGER,
    last_attempted_sync_at   INTEGER,
    last_successful_sync_at  INTEGER,
    next_sync_at             INTEGER,
    last_error               TEXT NOT NULL DEFAULT '',
    error_action             TEXT NOT NULL DEFAULT '',
    failures                 INTEGER NOT NULL DEFAULT 0,
    paused_at                INTEGER,
    needs_reauth_at          INTEGER,
    needs_reauth_reason      TEXT NOT NULL DEFAULT '',
    sync_blocked_at          INTEGER,
    sync_blocked_reason      TEXT NOT NULL DEFAULT '',
    capped_at                INTEGER,
    plan_cap                 TEXT NOT NULL DEFAULT '',
    run_id                   TEXT,
    lease_until              INTEGER,
    requested_run_id         TEXT,
    created_at               INTEGER NOT NULL,
    updated_at               INTEGER NOT NULL,
    UNIQUE (org_id, provider, account_scope)
);
CREATE INDEX connectors_due ON connectors (next_sync_at) WHERE next_sync_at IS NOT NULL;
CREATE INDEX connectors_by_database ON connectors (database_id);

CREATE TABLE connector_resources (
    connector_id        TEXT NOT NULL REFERENCES connectors (connector_id) ON DELETE CASCADE,
    resource_id         TEXT NOT NULL,
    resource_type       TEXT NOT NULL DEFAULT '',
    display_name        TEXT NOT NULL DEFAULT '',
    database_override   TEXT NOT NULL DEFAULT '',
    collection_override TEXT NOT NULL DEFAULT '',
    custom_instructions TEXT NOT NULL DEFAULT '',
    metadata            TEXT NOT NULL DEFAULT '{}',
    additional_metadata TEXT NOT NULL DEFAULT '{}',
    filters             TEXT NOT NULL DEFAULT '{}',
    -- JSON array of principals; NULL when the resource has no access rule.
    acl                 TEXT,
    sync_mode           TEXT NOT NULL DEFAULT 'rescan',
    provider_metadata   TEXT NOT NULL DEFAULT '{}',
    -- The provider's position after the last completed pass; empty before the first.
    provider_cursor     TEXT NOT NULL DEFAULT '',
    -- The pass in progress: its id (marks the objects it saw) and where it has got to.
    pass_id             TEXT NOT NULL DEFAULT '',
    pass_position       TEXT NOT NULL DEFAULT '',
    status              TEXT NOT NULL DEFAULT 'checking',
    last_row_count      INTEGER NOT NULL DEFAULT 0,
    message             TEXT NOT NULL DEFAULT '',
    retryable           INTEGER NOT NULL DEFAULT 1,
    http_status         INTEGER NOT NULL DEFAULT 0,
    checked_at          INTEGER,
    action              TEXT NOT NULL DEFAULT '',
    sync_blocked_reason TEXT NOT NULL DEFAULT '',
    acl_warning         TEXT NOT NULL DEFAULT '',
    backfill_oldest     INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (connector_id, resource_id)
);

CREATE TABLE connector_objects (
    connector_id TEXT NOT NULL REFERENCES connectors (connector_id) ON DELETE CASCADE,
    resource_id  TEXT NOT NULL,
    native_id    TEXT NOT NULL,
    item_id      TEXT NOT NULL,
    database_id  TEXT NOT NULL,
    collection   TEXT NOT NULL,
    version      TEXT NOT NULL,
    pass_id      TEXT NOT NULL,
    synced_at    INTEGER NOT NULL,
    PRIMARY KEY (connector_id, resource_id, native_id)
);
CREATE INDEX connector_objects_by_pass ON connector_objects (connector_id, resource_id, pass_id);

CREATE TABLE connector_runs (
    run_id       TEXT PRIMARY KEY,
    connector_id TEXT NOT NULL REFERENCES connectors (connector_id) ON DELETE CASCADE,
    trigger      TEXT NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'abandoned')),
    queued_at    INTEGER NOT NULL,
    started_at   INTEGER,
    finished_at  INTEGER,
    added        INTEGER NOT NULL DEFAULT 0,
    updated      INTEGER NOT NULL DEFAULT 0,
    deleted      INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    error        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX connector_runs_by_connector ON connector_runs (connector_id, queued_at);
