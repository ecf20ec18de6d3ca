-- A database's items counted by indexing state (the console's counts) read this index alone:
-- the state and the expiry (expired items are not counted) are in it.
CREATE INDEX items_by_status ON items (database_id, status, expires_at);
