-- An item's indexing history: each state it entered (an upsert starts it over at `queued`), when,
-- and the error it carried then. Written by triggers, so no write path can leave a step out; the
-- newest 50 entries of an item are kept; deleted with the item.
CREATE TABLE item_history (
    entry_key     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_key      BIGINT NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    status        TEXT NOT NULL,
    error_code    TEXT NOT NULL DEFAULT '',
    error_message TEXT NOT NULL DEFAULT '',
    at            BIGINT NOT NULL
);
CREATE INDEX item_history_by_item ON item_history (item_key, entry_key);

CREATE FUNCTION item_history_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status OR NEW.version <> OLD.version THEN
        INSERT INTO item_history (item_key, status, error_code, error_message, at)
        VALUES (NEW.item_key, NEW.status, NEW.error_code, NEW.error_message, NEW.updated_at);
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM item_history
            WHERE item_key = NEW.item_key AND entry_key <= (
                SELECT entry_key FROM item_history WHERE item_key = NEW.item_key
                ORDER BY entry_key DESC LIMIT 1 OFFSET 50);
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER item_history_on_insert AFTER INSERT ON items
    FOR EACH ROW EXECUTE FUNCTION item_history_record();
CREATE TRIGGER item_history_on_update AFTER UPDATE OF status, version ON items
    FOR EACH ROW EXECUTE FUNCTION item_history_record();
