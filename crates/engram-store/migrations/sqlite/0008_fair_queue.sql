-- A fair queue: work is handed out in turns, the organization served longest ago first, then
-- the database of that organization served longest ago. `served_turn` is the turn in which a
-- database last had an item claimed (a counter, not a time: ties within a millisecond still
-- rotate).
ALTER TABLE databases ADD COLUMN served_turn INTEGER NOT NULL DEFAULT 0;
CREATE INDEX databases_turns ON databases (org_id, served_turn);
-- A database's queue in order, and its items in flight (counted against its organization's
-- share of the workers).
CREATE INDEX items_queue ON items (database_id, run_after, item_key) WHERE status IN ('queued', 'processing');
CREATE INDEX items_in_flight ON items (database_id, lease_until) WHERE status = 'processing';
