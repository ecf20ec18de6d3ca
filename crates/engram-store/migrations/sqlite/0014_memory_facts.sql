-- Memory inference: the facts each memory states about its user (`infer: true`), kept per
-- database, collection and user. A fact a later memory contradicts (same slot, another value)
-- is kept with the time it stopped holding (`valid_until`) and the memory that superseded it;
-- a fact goes with its memory. The
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
    valid_until INTEGER,
    -- The memory whose fact superseded this one.
    superseded_by INTEGER
);
CREATE INDEX memory_facts_user ON memory_facts (database_id, collection, user_name, slot);
CREATE INDEX memory_facts_item ON memory_facts (item_key);
CREATE INDEX memory_facts_superseded ON memory_facts (superseded_by) WHERE superseded_by IS NOT NULL;
-- A fact a memory superseded holds again when that memory's facts go (it is deleted, stored
-- again, or expires and is purged).
CREATE TRIGGER memory_fact_superseder_gone AFTER DELETE ON memory_facts
BEGIN
    UPDATE memory_facts SET valid_until = NULL, superseded_by = NULL
    WHERE superseded_by = OLD.item_key;
END;

