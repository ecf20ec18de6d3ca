-- The lexical index moves out of SQLite: BM25 with block-max WAND over an in-memory index per
-- database (tantivy), derived from `chunks` like the vector index. FTS5 scored every posting of
-- an OR query, which cost tens of milliseconds per query at 100k chunks.
DROP TRIGGER chunks_fts_insert;
DROP TRIGGER chunks_fts_delete;
DROP TRIGGER chunks_fts_update;
DROP TABLE chunks_fts;

-- Every change to a chunk's indexed fields, logged in the transaction that makes it (cascaded
-- deletes included), so the index can catch up with every write, whichever code path made it.
-- The store applies the log before a keyword search and empties it; on open the index is rebuilt
-- from `chunks` and the log emptied. A row names the chunk and the database it was (or is) in.
CREATE TABLE lexical_log (
    seq         INTEGER PRIMARY KEY,
    chunk_key   INTEGER NOT NULL,
    database_id TEXT NOT NULL
);
CREATE TRIGGER chunks_lexical_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO lexical_log (chunk_key, database_id) VALUES (new.chunk_key, new.database_id);
END;
CREATE TRIGGER chunks_lexical_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO lexical_log (chunk_key, database_id) VALUES (old.chunk_key, old.database_id);
END;
CREATE TRIGGER chunks_lexical_update AFTER UPDATE OF content, collection, kind, database_id ON chunks
BEGIN
    INSERT INTO lexical_log (chunk_key, database_id) VALUES (old.chunk_key, old.database_id);
    INSERT INTO lexical_log (chunk_key, database_id) VALUES (new.chunk_key, new.database_id);
END;
