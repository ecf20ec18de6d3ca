-- A client's own graph per item and the items' declared links (see the SQLite migration 13).
ALTER TABLE items ADD COLUMN graph_payload TEXT;

CREATE TABLE item_links (
    item_key    BIGINT NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    database_id TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('knowledge', 'memory')),
    target_id   TEXT NOT NULL,
    PRIMARY KEY (item_key, target_id)
);
CREATE INDEX item_links_target ON item_links (database_id, kind, target_id);
-- Links name items by id across a database's collections.
CREATE INDEX items_by_id ON items (database_id, id);
