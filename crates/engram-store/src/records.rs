//! Records as the store reads and writes them. Times are Unix milliseconds.

use engram_types::schema::MetadataSchema;
use std::collections::BTreeMap;

use engram_types::{ApiKeyPrefix, CollectionName, DatabaseId, DatabaseName, OrgId, Scopes, UnixMs};
use serde_json::{json, Map, Value};

/// A stored API key: the prefix is public, the secret is kept only as a hash.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyRecord {
    pub prefix: ApiKeyPrefix,
    pub secret_hash: Vec<u8>,
    pub org: OrgId,
    pub name: String,
    /// Databases the key may use; empty means every database of its organization.
    pub databases: Vec<DatabaseName>,
    /// What the key may do (closed under implication).
    pub scopes: Scopes,
    pub created_at: UnixMs,
    pub expires_at: Option<UnixMs>,
    pub revoked_at: Option<UnixMs>,
}

impl ApiKeyRecord {
    /// `revoked`, `expired` (at `now`) or `active`.
    pub fn status(&self, now: UnixMs) -> &'static str {
        if self.revoked_at.is_some() {
            "revoked"
        } else if self.expires_at.is_some_and(|at| at <= now) {
            "expired"
        } else {
            "active"
        }
    }
}

/// Lifecycle of a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseState {
    Provisioning,
    Ready,
    Deleting,
}

impl DatabaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "provisioning",
            Self::Ready => "ready",
            Self::Deleting => "deleting",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "provisioning" => Some(Self::Provisioning),
            "ready" => Some(Self::Ready),
            "deleting" => Some(Self::Deleting),
            _ => None,
        }
    }
}

/// Readiness of the parts a database needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfraFlags {
    pub scheduler: bool,
    pub graph: bool,
    pub knowledge_vectors: bool,
    pub memory_vectors: bool,
}

impl InfraFlags {
    pub const READY: Self = Self {
        scheduler: true,
        graph: true,
        knowledge_vectors: true,
        memory_vectors: true,
    };

    pub fn all_ready(self) -> bool {
        self == Self::READY
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseRecord {
    pub id: DatabaseId,
    pub org: OrgId,
    pub name: DatabaseName,
    pub state: DatabaseState,
    pub schema: MetadataSchema,
    pub embeddings_dimension: u32,
    pub is_embeddings_tenant: bool,
    pub infra: InfraFlags,
    /// The collection a call that names none uses: named after the database at creation, and
    /// kept when the database is renamed.
    pub default_collection: CollectionName,
    pub instructions: Instructions,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

impl DatabaseRecord {
    /// The dimension of the database's vectors: the raw embeddings' for a raw-embeddings
    /// database, the embedding model's otherwise (whatever an older engram stored for it).
    pub fn vector_dimension(&self) -> u32 {
        if self.is_embeddings_tenant {
            self.embeddings_dimension
        } else {
            engram_types::limits::DEFAULT_EMBEDDING_DIMENSION
        }
    }

    /// The scope that every read and write of this database's data carries.
    pub fn scope(&self) -> DatabaseScope {
        DatabaseScope {
            org: self.org.clone(),
            id: self.id.clone(),
        }
    }
}

/// A database as addressed by data operations: always with its organization.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DatabaseScope {
    pub org: OrgId,
    pub id: DatabaseId,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewDatabase {
    pub id: DatabaseId,
    pub org: OrgId,
    pub name: DatabaseName,
    pub default_collection: engram_types::CollectionName,
    pub schema: MetadataSchema,
    pub embeddings_dimension: u32,
    pub is_embeddings_tenant: bool,
    pub created_at: UnixMs,
}

/// Object counts of one database.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseCounts {
    pub collections: u64,
    pub knowledge_chunks: u64,
    pub memory_chunks: u64,
    /// The bytes the live chunks' text and vectors take in the store.
    pub stored_bytes: u64,
}

/// The store's key of a chunk: what the derived indexes hold and every retrieval read names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey(pub i64);

/// Custom ingestion instructions of a database: its own, and each collection's on top of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Instructions {
    pub custom_instructions: String,
    pub collections: BTreeMap<String, String>,
}

/// A change of instructions: `Some("")` clears the database's; a collection mapped to `None` or
/// `""` is cleared, one absent is left as it is (two people editing different collections never
/// undo each other's work).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstructionsUpdate {
    pub custom_instructions: Option<String>,
    pub collections: BTreeMap<String, Option<String>>,
}

impl Instructions {
    /// The instructions an item of `collection` gets, with its own appended: database first,
    /// then the collection's, then the item's, one paragraph each.
    pub fn for_item(&self, collection: &str, own: &str) -> String {
        [
            self.custom_instructions.as_str(),
            self.collections.get(collection).map_or("", String::as_str),
            own,
        ]
        .into_iter()
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
    }

    pub fn apply(&mut self, update: &InstructionsUpdate) {
        if let Some(text) = &update.custom_instructions {
            self.custom_instructions = text.clone();
        }
        for (collection, text) in &update.collections {
            match text.as_deref() {
                None | Some("") => {
                    self.collections.remove(collection);
                }
                Some(text) => {
                    self.collections.insert(collection.clone(), text.to_owned());
                }
            }
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"custom_instructions": self.custom_instructions, "collections": self.collections})
    }

    /// Reads the stored form; missing parts are empty.
    pub fn from_json(value: &Value) -> Self {
        Self {
            custom_instructions: value["custom_instructions"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            collections: value["collections"]
                .as_object()
                .map(|map| {
                    map.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// A merge of new metadata values into one item: each key given is set, a key given as `null`
/// is removed, others are kept (JSON merge patch, one level).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetadataEdit {
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
}

impl MetadataEdit {
    /// Applies the edit to an item's current `metadata` and `additional_metadata` objects.
    pub fn apply(&self, metadata: &mut Map<String, Value>, additional: &mut Map<String, Value>) {
        for (patch, target) in [
            (&self.metadata, metadata),
            (&self.additional_metadata, additional),
        ] {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    target.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

/// What a metadata edit did.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataEditOutcome {
    /// Written; the item's values now, and how many chunks it has.
    Edited {
        metadata: Map<String, Value>,
        additional_metadata: Map<String, Value>,
        chunks: u64,
    },
    /// The check refused the merged values; nothing was written.
    Refused(String),
    /// No live item with that id in that collection.
    NotFound,
}

/// Feedback about an earlier answer, kept against that answer's request id.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedbackRecord {
    pub feedback_id: String,
    pub org: OrgId,
    pub request_id: String,
    /// The database and collection it was given for; empty when none was named.
    pub database: String,
    pub collection: String,
    /// What was said: rating, comment, ground truth, source, metadata.
    pub body: Value,
    pub created_at: UnixMs,
}

/// Service-wide counts for metrics: across organizations, with no item ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceCounts {
    /// Items by indexing state (`queued`, `processing`, ...).
    pub items_by_state: Vec<(String, u64)>,
    /// Stored chunks by database id.
    pub chunks_by_database: Vec<(DatabaseId, u64)>,
    /// Webhook deliveries by state (`pending`, `delivered`, ...).
    pub deliveries_by_state: Vec<(String, u64)>,
}
