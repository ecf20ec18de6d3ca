//! The PostgreSQL schema (`migrations/postgres`) applied to a throwaway cluster with pgvector:
//! it loads, keeps the chunk change feed by trigger, cascades deletes, forgets a deleted
//! memory as its successor's context, and orders vectors by cosine distance.

use engram_testkit::TempPostgres;

const SCHEMA: &str = include_str!("../migrations/postgres/0001_schema.sql");

#[test]
fn the_postgres_schema_loads_and_keeps_its_rules() {
    let pg = TempPostgres::start();
    pg.psql(SCHEMA);
    pg.psql(
        "INSERT INTO databases (id, org_id, name, state, embeddings_dimension, default_collection, created_at, updated_at)
         VALUES ('db_1', 'org', 'docs', 'ready', 384, 'docs', 1, 1)",
    );
    let zeros = |hot: usize| {
        let values: Vec<String> = (0..384)
            .map(|i| if i == hot { "1".into() } else { "0".into() })
            .collect();
        format!("[{}]", values.join(","))
    };
    for (key, title) in [("m1", "chat"), ("m2", "chat")] {
        pg.psql(&format!(
            "INSERT INTO items (database_id, collection, id, kind, origin, title, status, run_after, created_at, updated_at)
             VALUES ('db_1', 'docs', '{key}', 'memory', 'memory', '{title}', 'completed', 0, 1, 1)"
        ));
    }
    pg.psql(&format!(
        "INSERT INTO chunks (chunk_id, item_key, database_id, collection, kind, position, content, context, embedding, created_at)
         SELECT 'c-' || id, item_key, database_id, collection, kind, 0, 'text of ' || id,
                CASE WHEN id = 'm2' THEN 'text of m1' ELSE '' END,
                CASE WHEN id = 'm1' THEN '{}'::vector ELSE '{}'::vector END, 1
         FROM items",
        zeros(0),
        zeros(1)
    ));
    assert_eq!(
        pg.psql("SELECT count(*) FROM chunk_log"),
        "2",
        "inserts are logged"
    );
    let nearest = pg.psql(&format!(
        "SELECT chunk_id FROM chunks ORDER BY embedding <=> '{}'::vector LIMIT 1",
        zeros(1)
    ));
    assert_eq!(nearest, "c-m2");

    pg.psql("DELETE FROM items WHERE id = 'm1'");
    assert_eq!(
        pg.psql("SELECT count(*) FROM chunks WHERE chunk_id = 'c-m1'"),
        "0",
        "chunks go with their item"
    );
    assert_eq!(
        pg.psql("SELECT context FROM chunks WHERE chunk_id = 'c-m2'"),
        "",
        "the next memory forgets the deleted one"
    );
    // The delete of c-m1 and the context update of c-m2 (old and new row) are logged.
    assert_eq!(pg.psql("SELECT count(*) FROM chunk_log"), "5");
    pg.psql("DELETE FROM databases WHERE id = 'db_1'");
    assert_eq!(
        pg.psql("SELECT count(*) FROM items"),
        "0",
        "items go with their database"
    );
}
