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
    valid_until BIGINT,
    -- The memory whose fact superseded this one.
    superseded_by BIGINT
);
CREATE INDEX memory_facts_user ON memory_facts (database_id, collection, user_name, slot);
CREATE INDEX memory_facts_item ON memory_facts (item_key);
CREATE INDEX memory_facts_superseded ON memory_facts (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE FUNCTION memory_fact_superseder_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_facts SET valid_until = NULL, superseded_by = NULL
    WHERE superseded_by = OLD.item_key;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_fact_superseder_gone AFTER DELETE ON memory_facts
    FOR EACH ROW EXECUTE FUNCTION memory_fact_superseder_gone();

