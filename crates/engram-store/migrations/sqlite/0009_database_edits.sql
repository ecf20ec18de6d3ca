-- A database keeps the name of its default collection when it is renamed (the collection is
-- named after the database at creation; its chunks and indexes carry that name).
ALTER TABLE databases ADD COLUMN default_collection TEXT NOT NULL DEFAULT '';
UPDATE databases SET default_collection = name;
-- Custom ingestion instructions: `{"custom_instructions": "...", "collections": {"name": "..."}}`.
ALTER TABLE databases ADD COLUMN instructions TEXT NOT NULL DEFAULT '{}';
-- The instructions in force when an item was accepted (database, then collection, then its own).
ALTER TABLE items ADD COLUMN instructions TEXT NOT NULL DEFAULT '';
-- The title lowercased (Unicode, by engram at write time) for case-insensitive title filters;
-- rows from before get SQLite's ASCII lowercase.
ALTER TABLE items ADD COLUMN title_key TEXT NOT NULL DEFAULT '';
UPDATE items SET title_key = lower(title);

-- Feedback on earlier answers, by the request id those answers carried.
CREATE TABLE feedback (
    feedback_id  TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    database     TEXT NOT NULL DEFAULT '',
    collection   TEXT NOT NULL DEFAULT '',
    body         TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX feedback_by_request ON feedback (org_id, request_id, created_at);

-- Secrets the service makes for itself (for example the key signing download links), shared by
-- every instance on the same store.
CREATE TABLE service_secrets (
    name       TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
