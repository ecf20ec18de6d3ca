-- The id of the request that queued an item (its latest upsert), so the log lines of its
-- indexing carry it; empty for items queued by engram itself (connector syncs, older items).
ALTER TABLE items ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
