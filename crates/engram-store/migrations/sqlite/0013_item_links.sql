-- What an item declares for the graph at ingestion, kept with it: a client's own graph
-- (`graph_payload`, JSON; a re-ingestion without one keeps the one before), and its links to
-- other sources of its database and kind (`relations.ids`), replaced with the item and gone
-- with it. Links are looked up from either end: the linking item by key, the linked one by id.
ALTER TABLE items ADD COLUMN graph_payload TEXT;

CREATE TABLE item_links (
    item_key    INTEGER NOT NULL REFERENCES items (item_key) ON DELETE CASCADE,
    database_id TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('knowledge', 'memory')),
    target_id   TEXT NOT NULL,
    PRIMARY KEY (item_key, target_id)
);
CREATE INDEX item_links_target ON item_links (database_id, kind, target_id);
-- Links name items by id across a database's collections.
CREATE INDEX items_by_id ON items (database_id, id);
