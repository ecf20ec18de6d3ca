-- The knowledge graph (see the SQLite migration 12 for the design): entities per database,
-- collection and kind merged on a key; mentions and relations hang off chunks and go with them;
-- an entity goes with its last mention.
CREATE TABLE graph_entities (
    entity_key  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    collection  TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('knowledge', 'memory')),
    key         TEXT NOT NULL,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    namespace   TEXT NOT NULL DEFAULT 'default',
    identifier  TEXT,
    UNIQUE (database_id, collection, kind, key)
);
-- Query-time lookups name keys across a database's collections (covering, so SQLite takes it
-- over the unique key).
CREATE INDEX graph_entities_key ON graph_entities (key, database_id, kind);

CREATE TABLE graph_mentions (
    entity_key BIGINT NOT NULL REFERENCES graph_entities (entity_key) ON DELETE CASCADE,
    chunk_key  BIGINT NOT NULL REFERENCES chunks (chunk_key) ON DELETE CASCADE,
    PRIMARY KEY (entity_key, chunk_key)
);
CREATE INDEX graph_mentions_chunk ON graph_mentions (chunk_key);

CREATE TABLE graph_relations (
    relation_key        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chunk_key           BIGINT NOT NULL REFERENCES chunks (chunk_key) ON DELETE CASCADE,
    item_key            BIGINT NOT NULL,
    source_key          BIGINT NOT NULL REFERENCES graph_entities (entity_key) ON DELETE CASCADE,
    target_key          BIGINT NOT NULL REFERENCES graph_entities (entity_key) ON DELETE CASCADE,
    raw_predicate       TEXT NOT NULL,
    canonical_predicate TEXT NOT NULL,
    context             TEXT NOT NULL,
    confidence          DOUBLE PRECISION NOT NULL,
    temporal_details    TEXT,
    origin              TEXT NOT NULL CHECK (origin IN ('extracted', 'byog')),
    created_at          BIGINT NOT NULL
);
CREATE INDEX graph_relations_item ON graph_relations (item_key, relation_key);
CREATE INDEX graph_relations_chunk ON graph_relations (chunk_key);
CREATE INDEX graph_relations_source ON graph_relations (source_key);
CREATE INDEX graph_relations_target ON graph_relations (target_key);

CREATE FUNCTION graph_entity_unmentioned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM graph_entities e
    WHERE e.entity_key = OLD.entity_key
      AND NOT EXISTS (SELECT 1 FROM graph_mentions m WHERE m.entity_key = OLD.entity_key);
    RETURN NULL;
END $$;
CREATE TRIGGER graph_entity_unmentioned AFTER DELETE ON graph_mentions
    FOR EACH ROW EXECUTE FUNCTION graph_entity_unmentioned();

DROP INDEX items_queue;
CREATE INDEX items_queue ON items (database_id, run_after, item_key)
    WHERE status IN ('queued', 'processing', 'graph_creation');
-- Claims count the workers holding an organization's items, graph_creation ones included.
DROP INDEX items_in_flight;
CREATE INDEX items_in_flight ON items (database_id, lease_until)
    WHERE status IN ('processing', 'graph_creation');
