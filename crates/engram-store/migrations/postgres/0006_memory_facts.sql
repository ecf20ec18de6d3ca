-- Memory inference's facts per database, collection and user (see the SQLite migration 14).
ALTER TABLE items ADD COLUMN inferred_content TEXT NOT NULL DEFAULT '';

CREATE TABLE memory_facts (
    fact_key    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_key    BIGINT NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    database_id TEXT NOT NULL,
    collection  TEXT NOT NULL,
    user_name   TEXT NOT NULL,
    slot        TEXT NOT NULL,
    value       TEXT NOT NULL,
    statement   TEXT NOT NULL,
    valid_from  BIGINT NOT NULL,
    valid_until BIGINT
);
CREATE INDEX memory_facts_user ON memory_facts (database_id, collection, user_name, slot);
CREATE INDEX memory_facts_item ON memory_facts (item_key);
