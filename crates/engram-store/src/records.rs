//! Records as the store reads and writes them. Times are Unix milliseconds.

use engram_types::schema::MetadataSchema;
use engram_types::{ApiKeyPrefix, DatabaseId, DatabaseName, OrgId};

/// A stored API key: the prefix is public, the secret is kept only as a hash.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyRecord {
    pub prefix: ApiKeyPrefix,
    pub secret_hash: Vec<u8>,
    pub org: OrgId,
    pub name: String,
    /// Databases the key may use; empty means every database of its organization.
    pub databases: Vec<DatabaseName>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
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
    pub created_at: i64,
    pub updated_at: i64,
}

impl DatabaseRecord {
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
    pub created_at: i64,
}

/// Object counts of one database.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseCounts {
    pub collections: u64,
    pub knowledge_chunks: u64,
    pub memory_chunks: u64,
}

/// The store's key of a chunk: what the derived indexes hold and every retrieval read names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey(pub i64);
