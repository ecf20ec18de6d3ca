-- Listings filter one database and order by creation; an index leading with the collection
-- competed with the unique key (database_id, collection, id) for lookups of ids, and won while
-- the table's statistics were those of a small table (a scan of the collection per id).
DROP INDEX items_listing;
CREATE INDEX items_listing ON items (database_id, created_at DESC, item_key DESC);
