-- Conversations: the memories of one user in one collection that share a non-empty title, in
-- item_key order. The index finds a memory's neighbours (its context when it is indexed, its
-- successor when it goes).
CREATE INDEX items_conversation ON items (database_id, collection, user_name, title, item_key)
    WHERE kind = 'memory' AND title <> '';

-- A memory that goes (deleted, purged on expiry, or its database purged) or is replaced
-- (upsert: a new version) stops being its successor's context at once: that text leaves the
-- keyword index through the chunks_lexical_update trigger. No write path can forget it.
CREATE TRIGGER items_forget_as_context_on_delete
AFTER DELETE ON items
WHEN old.kind = 'memory' AND old.title <> ''
BEGIN
    UPDATE chunks SET context = ''
    WHERE context <> '' AND item_key = (
        SELECT item_key FROM items
        WHERE database_id = old.database_id AND collection = old.collection
          AND kind = 'memory' AND title <> '' AND user_name = old.user_name AND title = old.title
          AND item_key > old.item_key
        ORDER BY item_key LIMIT 1);
END;

CREATE TRIGGER items_forget_as_context_on_replace
AFTER UPDATE OF version ON items
WHEN old.kind = 'memory' AND old.title <> '' AND new.version <> old.version
BEGIN
    UPDATE chunks SET context = ''
    WHERE context <> '' AND item_key = (
        SELECT item_key FROM items
        WHERE database_id = old.database_id AND collection = old.collection
          AND kind = 'memory' AND title <> '' AND user_name = old.user_name AND title = old.title
          AND item_key > old.item_key
        ORDER BY item_key LIMIT 1);
END;
