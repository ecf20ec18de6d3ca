-- A database's items counted by indexing state (the console's counts) read this index alone.
CREATE INDEX items_by_status ON items (database_id, status);
