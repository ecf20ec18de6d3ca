-- Memory inference: the facts each memory states about its user (`infer: true`), kept per
-- database, collection and user. A fact a later memory contradicts (same slot, another value)
-- is kept with the time it stopped holding (`valid_until`); a fact goes with its memory. The
-- memory's inferred statements are also on the item, to list and inspect.
ALTER TABLE items ADD COLUMN inferred_content TEXT NOT NULL DEFAULT '';

CREATE TABLE memory_facts (
    fact_key    INTEGER PRIMARY KEY,
    item_key    INTEGER NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    database_id TEXT NOT NULL,
    collection  TEXT NOT NULL,
    user_name   TEXT NOT NULL,
    slot        TEXT NOT NULL,
    value       TEXT NOT NULL,
    statement   TEXT NOT NULL,
    valid_from  INTEGER NOT NULL,
    valid_until INTEGER
);
CREATE INDEX memory_facts_user ON memory_facts (database_id, collection, user_name, slot);
CREATE INDEX memory_facts_item ON memory_facts (item_key);
