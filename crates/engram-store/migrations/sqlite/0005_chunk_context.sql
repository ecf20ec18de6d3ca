-- Text indexed with a chunk but not part of it: for a memory that continues a conversation (the
-- same collection, user and title), the memory before it. Keyword and vector search see it, so a
-- turn that only makes sense after the previous one ("Yes, in June") is found by what that turn
-- was about; results still show the chunk's own content.
ALTER TABLE chunks ADD COLUMN context TEXT NOT NULL DEFAULT '';

DROP TRIGGER chunks_lexical_update;
CREATE TRIGGER chunks_lexical_update
AFTER UPDATE OF content, context, collection, kind, database_id ON chunks
BEGIN
    INSERT INTO lexical_log (chunk_key, database_id) VALUES (old.chunk_key, old.database_id);
    INSERT INTO lexical_log (chunk_key, database_id) VALUES (new.chunk_key, new.database_id);
END;
