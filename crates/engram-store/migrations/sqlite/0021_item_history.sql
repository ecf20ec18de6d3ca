-- An item's indexing history: each state it entered (an upsert starts it over at `queued`), when,
-- and the error it carried then. Written by triggers, so no write path can leave a step out; the
-- newest 50 entries of an item are kept; deleted with the item.
CREATE TABLE item_history (
    entry_key     INTEGER PRIMARY KEY,
    item_key      INTEGER NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    status        TEXT NOT NULL,
    error_code    TEXT NOT NULL DEFAULT '',
    error_message TEXT NOT NULL DEFAULT '',
    at            INTEGER NOT NULL
);
CREATE INDEX item_history_by_item ON item_history (item_key, entry_key);

CREATE TRIGGER item_history_on_insert
AFTER INSERT ON items
BEGIN
    INSERT INTO item_history (item_key, status, error_code, error_message, at)
    VALUES (new.item_key, new.status, new.error_code, new.error_message, new.updated_at);
END;

CREATE TRIGGER item_history_on_update
AFTER UPDATE OF status, version ON items
WHEN new.status <> old.status OR new.version <> old.version
BEGIN
    INSERT INTO item_history (item_key, status, error_code, error_message, at)
    VALUES (new.item_key, new.status, new.error_code, new.error_message, new.updated_at);
    DELETE FROM item_history
    WHERE item_key = new.item_key AND entry_key <= (
        SELECT entry_key FROM item_history WHERE item_key = new.item_key
        ORDER BY entry_key DESC LIMIT 1 OFFSET 50);
END;
