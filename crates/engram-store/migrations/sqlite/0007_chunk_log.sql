-- One change feed for every derived index (keyword and vector), replacing `lexical_log`.
-- The index owner (`engram-index`) keeps a cursor into it and trims what it has applied, so
-- sequence numbers must never be reused once trimmed: AUTOINCREMENT guarantees that (a plain
-- INTEGER PRIMARY KEY restarts below the cursor when the table empties).
DROP TRIGGER chunks_lexical_insert;
DROP TRIGGER chunks_lexical_delete;
DROP TRIGGER chunks_lexical_update;
DROP TABLE lexical_log;

-- Every change to a chunk's indexed fields, logged in the transaction that makes it (cascaded
-- deletes included), whichever code path made it. A row names the chunk and the database it was
-- (or is) in; readers take the chunk's current row from `chunks`.
CREATE TABLE chunk_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_key   INTEGER NOT NULL,
    database_id TEXT NOT NULL
);
CREATE TRIGGER chunks_log_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunk_log (chunk_key, database_id) VALUES (new.chunk_key, new.database_id);
END;
CREATE TRIGGER chunks_log_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunk_log (chunk_key, database_id) VALUES (old.chunk_key, old.database_id);
END;
CREATE TRIGGER chunks_log_update
AFTER UPDATE OF content, context, collection, kind, database_id, embedding ON chunks
BEGIN
    INSERT INTO chunk_log (chunk_key, database_id) VALUES (old.chunk_key, old.database_id);
    INSERT INTO chunk_log (chunk_key, database_id) VALUES (new.chunk_key, new.database_id);
END;
