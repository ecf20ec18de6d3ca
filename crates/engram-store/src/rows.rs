//! Records read out of rows, once for both backends. A backend says how it reads a column of
//! each kind ([`Columns`]: JSON is text on SQLite and JSONB on PostgreSQL, a vector is a blob on
//! one and pgvector's `vector` on the other); which columns make which record is said here.

use engram_types::{
    ApiKeyPrefix, CollectionName, DatabaseId, DatabaseName, DeliveryStatus, IndexingStatus,
    ItemKind, OrgId, UnixMs,
};
use serde_json::Value;

use crate::error::corrupt;
use crate::{
    ApiKeyRecord, ChunkHit, ChunkKey, ClaimedItem, DatabaseRecord, DatabaseState, DeliveryRecord,
    FeedbackRecord, IndexedChunk, InfraFlags, Instructions, ItemFields, ItemOrigin, ItemRecord,
    ItemStatus, RawVector, StoreResult, WebhookRecord,
};

/// How a backend reads one column of each kind, by name.
pub(crate) trait Columns {
    fn text(&self, column: &str) -> StoreResult<String>;
    fn opt_text(&self, column: &str) -> StoreResult<Option<String>>;
    fn int(&self, column: &str) -> StoreResult<i64>;
    fn opt_int(&self, column: &str) -> StoreResult<Option<i64>>;
    fn time(&self, column: &str) -> StoreResult<UnixMs> {
        self.int(column).map(UnixMs::from_millis)
    }
    fn opt_time(&self, column: &str) -> StoreResult<Option<UnixMs>> {
        Ok(self.opt_int(column)?.map(UnixMs::from_millis))
    }
    fn flag(&self, column: &str) -> StoreResult<bool>;
    fn real(&self, column: &str) -> StoreResult<f64>;
    fn bytes(&self, column: &str) -> StoreResult<Vec<u8>>;
    fn opt_bytes(&self, column: &str) -> StoreResult<Option<Vec<u8>>>;
    fn json(&self, column: &str) -> StoreResult<Value>;
    /// A stored vector; empty when the column is NULL.
    fn vector(&self, column: &str) -> StoreResult<Vec<f32>>;
}

/// The [`Columns`] methods whose SQL types both backends decode alike.
macro_rules! plain_columns {
    () => {
        fn text(&self, column: &str) -> $crate::StoreResult<String> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn opt_text(&self, column: &str) -> $crate::StoreResult<Option<String>> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn int(&self, column: &str) -> $crate::StoreResult<i64> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn opt_int(&self, column: &str) -> $crate::StoreResult<Option<i64>> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn flag(&self, column: &str) -> $crate::StoreResult<bool> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn real(&self, column: &str) -> $crate::StoreResult<f64> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn bytes(&self, column: &str) -> $crate::StoreResult<Vec<u8>> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
        fn opt_bytes(&self, column: &str) -> $crate::StoreResult<Option<Vec<u8>>> {
            Ok(sqlx::Row::try_get(self, column)?)
        }
    };
}
pub(crate) use plain_columns;

fn parsed<T>(row: &impl Columns, column: &str, parse: fn(&str) -> Option<T>) -> StoreResult<T> {
    let value = row.text(column)?;
    parse(&value).ok_or_else(|| corrupt(column, value))
}

fn from_json<T: serde::de::DeserializeOwned>(row: &impl Columns, column: &str) -> StoreResult<T> {
    serde_json::from_value(row.json(column)?).map_err(|e| corrupt(column, e))
}

/// A JSON object column (anything else reads as an empty object).
fn object(row: &impl Columns, column: &str) -> StoreResult<serde_json::Map<String, Value>> {
    Ok(row.json(column)?.as_object().cloned().unwrap_or_default())
}

fn count<T: TryFrom<i64>>(row: &impl Columns, column: &str) -> StoreResult<T>
where
    T::Error: std::fmt::Display,
{
    T::try_from(row.int(column)?).map_err(|e| corrupt(column, e))
}

pub(crate) fn kind(row: &impl Columns) -> StoreResult<ItemKind> {
    parsed(row, "kind", ItemKind::parse)
}

pub(crate) fn origin(row: &impl Columns) -> StoreResult<ItemOrigin> {
    parsed(row, "origin", ItemOrigin::parse)
}

pub(crate) fn api_key(row: &impl Columns) -> StoreResult<ApiKeyRecord> {
    let databases: Vec<String> = from_json(row, "databases")?;
    let scopes: Vec<String> = from_json(row, "scopes")?;
    Ok(ApiKeyRecord {
        prefix: ApiKeyPrefix::from_trusted(row.text("prefix")?),
        secret_hash: row.bytes("secret_hash")?,
        org: OrgId::from_trusted(row.text("org_id")?),
        name: row.text("name")?,
        databases: databases
            .into_iter()
            .map(DatabaseName::from_trusted)
            .collect(),
        // Stored scopes are read strictly: empty grants nothing, and an unknown name (a newer
        // version's scope) is a record this version cannot read (the request fails; it never
        // grants more).
        scopes: engram_types::Scopes::from_stored(&scopes)
            .map_err(|name| corrupt("scopes", format!("unknown scope `{name}`")))?,
        created_at: row.time("created_at")?,
        expires_at: row.opt_time("expires_at")?,
        revoked_at: row.opt_time("revoked_at")?,
    })
}

/// The columns [`database`] reads.
pub(crate) const DATABASE_COLUMNS: &str = "id, org_id, name, state, metadata_schema, embeddings_dimension, is_embeddings_tenant, \
     scheduler_ready, graph_ready, knowledge_vectors_ready, memory_vectors_ready, default_collection, instructions, \
     created_at, updated_at";

pub(crate) fn database(row: &impl Columns) -> StoreResult<DatabaseRecord> {
    Ok(DatabaseRecord {
        id: DatabaseId::from_trusted(row.text("id")?),
        org: OrgId::from_trusted(row.text("org_id")?),
        name: DatabaseName::from_trusted(row.text("name")?),
        state: parsed(row, "state", DatabaseState::parse)?,
        schema: from_json(row, "metadata_schema")?,
        embeddings_dimension: count(row, "embeddings_dimension")?,
        is_embeddings_tenant: row.flag("is_embeddings_tenant")?,
        infra: InfraFlags {
            scheduler: row.flag("scheduler_ready")?,
            graph: row.flag("graph_ready")?,
            knowledge_vectors: row.flag("knowledge_vectors_ready")?,
            memory_vectors: row.flag("memory_vectors_ready")?,
        },
        default_collection: CollectionName::from_trusted(row.text("default_collection")?),
        instructions: Instructions::from_json(&row.json("instructions")?),
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn item(row: &impl Columns) -> StoreResult<ItemRecord> {
    Ok(ItemRecord {
        id: row.text("id")?,
        collection: CollectionName::from_trusted(row.text("collection")?),
        kind: kind(row)?,
        origin: origin(row)?,
        fields: ItemFields {
            filename: row.text("filename")?,
            media_type: row.text("media_type")?,
            title: row.text("title")?,
            source_type: row.text("source_type")?,
            description: row.text("description")?,
            note: row.text("note")?,
            url: row.text("url")?,
            timestamp: row.text("timestamp")?,
            text: row.opt_text("text")?,
            metadata: row.json("metadata")?,
            additional_metadata: row.json("additional_metadata")?,
            attachments: row.json("attachments")?,
            relations: row.json("relations")?,
            user_name: row.text("user_name")?,
            infer: row.flag("infer")?,
            expires_at: row.opt_time("expires_at")?,
            instructions: row.text("instructions")?,
            inferred_content: row.text("inferred_content")?,
            // Read where the query selects it (the claim's columns); listings leave it out.
            request_id: row
                .opt_text("request_id")
                .ok()
                .flatten()
                .unwrap_or_default(),
        },
        status: parsed(row, "status", IndexingStatus::parse)?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn item_status(row: &impl Columns) -> StoreResult<ItemStatus> {
    Ok(ItemStatus {
        id: row.text("id")?,
        kind: kind(row)?,
        status: parsed(row, "status", IndexingStatus::parse)?,
        error_code: row.text("error_code")?,
        error_message: row.text("error_message")?,
    })
}

/// The chunk columns of a [`chunk_hit`] (beside every item column but the full text, which a
/// hit does not need); `NULL_TEXT` is the backend's typed NULL for `text`.
pub(crate) fn chunk_hit_columns(null_text: &str) -> String {
    format!(
        "c.chunk_key, c.chunk_id, c.position, c.content, c.layout, c.embedding,
             c.created_at AS chunk_created_at,
             i.id, i.collection, i.kind, i.origin, i.filename, i.media_type, i.title, i.source_type,
             i.description, i.note, i.url, i.timestamp, {null_text} AS text, i.metadata, i.additional_metadata,
             i.attachments, i.relations, i.user_name, i.infer, i.expires_at, i.instructions,
             i.inferred_content, i.status, i.created_at,
             i.updated_at"
    )
}

pub(crate) fn chunk_hit(row: &impl Columns) -> StoreResult<ChunkHit> {
    Ok(ChunkHit {
        chunk_key: ChunkKey(row.int("chunk_key")?),
        chunk_id: row.text("chunk_id")?,
        position: count(row, "position")?,
        content: row.text("content")?,
        layout: row.json("layout")?,
        embedding: row.vector("embedding")?,
        created_at: row.time("chunk_created_at")?,
        item: item(row)?,
    })
}

/// The columns [`indexed_chunk`] reads, of `chunks c` joined with [`INDEXED_JOIN`].
pub(crate) const INDEXED_COLUMNS: &str =
    "c.chunk_key, c.database_id, c.collection, c.kind, c.content, c.context, c.embedding,
     COALESCE(CASE WHEN i.title <> '' THEN i.title ELSE i.filename END, '') AS title,
     i.origin AS origin, i.metadata AS metadata, i.additional_metadata AS additional_metadata";

/// What [`INDEXED_COLUMNS`] and [`VECTOR_COLUMNS`] read beside `chunks c`: the chunk's item.
pub(crate) const INDEXED_JOIN: &str = " JOIN items i ON i.item_key = c.item_key";

/// [`INDEXED_COLUMNS`] for a scan of vectors ([`crate::ChunkScan::Vectors`]): the text fields
/// empty; the item's filtered fields kept (the indexes filter by them).
pub(crate) const VECTOR_COLUMNS: &str =
    "c.chunk_key, c.database_id, c.collection, c.kind, '' AS content, '' AS context, c.embedding,
     '' AS title, i.origin AS origin, i.metadata AS metadata,
     i.additional_metadata AS additional_metadata";

/// The columns a scan reads.
pub(crate) fn scan_columns(scan: crate::ChunkScan) -> &'static str {
    match scan {
        crate::ChunkScan::Full => INDEXED_COLUMNS,
        crate::ChunkScan::Vectors => VECTOR_COLUMNS,
    }
}

pub(crate) fn indexed_chunk(row: &impl Columns) -> StoreResult<IndexedChunk> {
    Ok(IndexedChunk {
        chunk_key: ChunkKey(row.int("chunk_key")?),
        database_id: DatabaseId::from_trusted(row.text("database_id")?),
        collection: CollectionName::from_trusted(row.text("collection")?),
        kind: kind(row)?,
        content: row.text("content")?,
        context: row.text("context")?,
        title: row.text("title")?,
        embedding: row.vector("embedding")?,
        facets: crate::ItemFacets {
            origin: Some(origin(row)?),
            metadata: object(row, "metadata")?,
            additional_metadata: object(row, "additional_metadata")?,
        },
    })
}

/// The columns a claim returns of the item it leased (`RETURNING`).
pub(crate) const CLAIMED_COLUMNS: &str =
    "item_key, version, database_id, collection, id, kind, origin, title, filename,
             media_type, text, graph_payload, user_name, infer, instructions, attempts, status,
             request_id, (SELECT org_id FROM databases WHERE databases.id = items.database_id) AS org_id";

/// Whether a claimed item ends a light batch: a file, or given text over `light_bytes`.
pub(crate) fn ends_light_batch(row: &impl Columns, light_bytes: Option<u64>) -> bool {
    light_bytes.is_some_and(|most| {
        let text = row.opt_text("text").ok().flatten();
        origin(row).map_or(true, |o| o == ItemOrigin::File)
            || text.map_or(0, |t| t.len() as u64) > most
    })
}

pub(crate) fn claimed_item(
    row: &impl Columns,
    owner: &str,
    payload: Option<Vec<u8>>,
) -> StoreResult<ClaimedItem> {
    Ok(ClaimedItem {
        item_key: row.int("item_key")?,
        version: row.int("version")?,
        lease_owner: owner.to_owned(),
        org: OrgId::from_trusted(row.text("org_id")?),
        database_id: DatabaseId::from_trusted(row.text("database_id")?),
        collection: CollectionName::from_trusted(row.text("collection")?),
        id: row.text("id")?,
        kind: kind(row)?,
        origin: origin(row)?,
        title: row.text("title")?,
        filename: row.text("filename")?,
        media_type: row.text("media_type")?,
        text: row.opt_text("text")?,
        payload,
        graph_payload: row.opt_text("graph_payload")?,
        user_name: row.text("user_name")?,
        infer: row.flag("infer")?,
        instructions: row.text("instructions")?,
        attempts: u32::try_from(row.int("attempts")?).unwrap_or(u32::MAX),
        stage: match row.text("status")?.as_str() {
            "graph_creation" => crate::Stage::Graph,
            _ => crate::Stage::Index,
        },
        request_id: row.text("request_id")?,
    })
}

pub(crate) fn webhook(row: &impl Columns) -> StoreResult<WebhookRecord> {
    Ok(WebhookRecord {
        org: OrgId::from_trusted(row.text("org_id")?),
        url: row.text("url")?,
        event_types: from_json(row, "event_types")?,
        signing_secret: row.opt_text("signing_secret")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn delivery(row: &impl Columns) -> StoreResult<DeliveryRecord> {
    Ok(DeliveryRecord {
        key: row.int("delivery_key")?,
        delivery_id: row.text("delivery_id")?,
        org: OrgId::from_trusted(row.text("org_id")?),
        database_id: DatabaseId::from_trusted(row.text("database_id")?),
        database_name: row.text("database_name")?,
        collection: row.text("collection")?,
        item_id: row.text("item_id")?,
        event_type: row.text("event_type")?,
        indexing_status: parsed(row, "indexing_status", IndexingStatus::parse)?,
        item_error_code: row.text("item_error_code")?,
        item_error_message: row.text("item_error_message")?,
        status: parsed(row, "status", DeliveryStatus::parse)?,
        attempts: u32::try_from(row.int("attempts")?).unwrap_or(0),
        next_attempt_at: row.time("next_attempt_at")?,
        last_status_code: row
            .opt_int("last_status_code")?
            .and_then(|c| u16::try_from(c).ok()),
        error_code: row.opt_text("error_code")?,
        error_message: row.opt_text("error_message")?,
        webhook_url: row.text("webhook_url")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn raw_vector(row: &impl Columns) -> StoreResult<RawVector> {
    Ok(RawVector {
        source_id: row.text("source_id")?,
        chunk_id: row.text("chunk_id")?,
        embedding: row.vector("embedding")?,
        metadata: row.json("metadata")?,
    })
}

pub(crate) fn feedback(row: &impl Columns) -> StoreResult<FeedbackRecord> {
    Ok(FeedbackRecord {
        feedback_id: row.text("feedback_id")?,
        org: OrgId::from_trusted(row.text("org_id")?),
        request_id: row.text("request_id")?,
        database: row.text("database")?,
        collection: row.text("collection")?,
        body: row.json("body")?,
        created_at: row.time("created_at")?,
    })
}

/// The fields [`relation`] reads, of a relation `r`, its chunk `c` and its entities `s`, `t`.
pub(crate) const RELATION_FIELDS: &str = "r.relation_key, r.raw_predicate, r.canonical_predicate,
    r.context, r.confidence, r.temporal_details, r.origin, r.created_at, c.chunk_id, c.chunk_key,
    s.entity_key AS s_key, s.name AS s_name, s.type AS s_type, s.namespace AS s_namespace,
    s.identifier AS s_identifier,
    t.entity_key AS t_key, t.name AS t_name, t.type AS t_type, t.namespace AS t_namespace,
    t.identifier AS t_identifier";

fn entity(row: &impl Columns, end: &str) -> StoreResult<crate::EntityRecord> {
    Ok(crate::EntityRecord {
        entity_key: row.int(&format!("{end}_key"))?,
        name: row.text(&format!("{end}_name"))?,
        kind: row.text(&format!("{end}_type"))?,
        namespace: row.text(&format!("{end}_namespace"))?,
        identifier: row.opt_text(&format!("{end}_identifier"))?,
    })
}

pub(crate) fn relation(row: &impl Columns) -> StoreResult<crate::RelationRecord> {
    Ok(crate::RelationRecord {
        relation_key: row.int("relation_key")?,
        source: entity(row, "s")?,
        target: entity(row, "t")?,
        raw_predicate: row.text("raw_predicate")?,
        canonical_predicate: row.text("canonical_predicate")?,
        context: row.text("context")?,
        confidence: row.real("confidence")? as f32,
        temporal_details: row.opt_text("temporal_details")?,
        origin: parsed(row, "origin", engram_graph::Origin::parse)?,
        chunk_id: row.text("chunk_id")?,
        created_at: row.time("created_at")?,
    })
}
