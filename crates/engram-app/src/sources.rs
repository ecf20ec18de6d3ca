//! One source after ingestion: read it back (its text, its bytes, a download link that expires)
//! and edit its metadata in place.
//!
//! A download link carries what it opens and until when, signed with the service's own secret
//! (made once, kept in the store, so every instance on the store honours every link). It needs
//! no API key: whoever holds the link may download that one source until it expires, like a
//! presigned object-store URL.

use std::time::Duration;

use engram_store::{
    DatabaseRecord, DatabaseScope, ItemOrigin, ItemRecord, MetadataEdit, MetadataEditOutcome,
};
use engram_types::limits::{DOWNLOAD_LINK_DEFAULT_SECS, DOWNLOAD_LINK_MAX_SECS};
use engram_types::{CollectionName, DatabaseId, DatabaseName, OrgId, UnixMs};
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;

use crate::ingest::{check_item_limits, check_metadata, parse_collection};
use crate::{App, AppError, AppResult, Principal};
use engram_types::Scope;

/// The name of the service secret that signs download links.
const LINK_SECRET: &str = "download-links";

/// A source as stored, with its text and what to download it as.
#[derive(Debug, Clone)]
pub struct SourceView {
    pub database: DatabaseRecord,
    pub item: ItemRecord,
    /// The text engram indexed: given (app content, memories) or extracted (files); empty
    /// while a file is not indexed yet.
    pub content: String,
    /// The bytes a file was uploaded as; `None` for app content and memories.
    pub payload: Option<Vec<u8>>,
    /// A signed token opening the download of this source, and when it stops working.
    pub link: DownloadLink,
}

impl SourceView {
    /// The source's MIME type: a file's own, else `text/plain` (app content, memories).
    pub fn content_type(&self) -> &str {
        match self.item.origin {
            ItemOrigin::File if !self.item.fields.media_type.is_empty() => {
                &self.item.fields.media_type
            }
            ItemOrigin::File | ItemOrigin::App | ItemOrigin::Memory => "text/plain",
        }
    }

    /// Bytes of the source as given: the uploaded file, else its text.
    pub fn size_bytes(&self) -> u64 {
        let size = self.payload.as_ref().map_or(
            self.item.fields.text.as_ref().map_or(0, String::len),
            Vec::len,
        );
        size as u64
    }
}

#[derive(Debug, Clone)]
pub struct DownloadLink {
    pub token: String,
    pub expires_at: UnixMs,
}

/// What a download link opens.
#[derive(Debug, Clone)]
pub struct Download {
    pub filename: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// One metadata edit as a client sends it.
#[derive(Debug, Clone, Default)]
pub struct MetadataEditRequest {
    pub collection: Option<String>,
    /// Schema values to merge into `metadata` (null removes a key).
    pub metadata: Map<String, Value>,
    /// Free-form values to merge into `additional_metadata` (null removes a key).
    pub additional_metadata: Map<String, Value>,
    /// A new access rule replacing the source's (`additional_metadata.acl`); `None`: unchanged.
    pub acl: Option<Vec<String>>,
}

/// The outcome of a metadata edit.
#[derive(Debug, Clone)]
pub struct MetadataEdited {
    pub database: DatabaseRecord,
    pub collection: CollectionName,
    pub id: String,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub chunks: u64,
}

impl App {
    /// One source with its text, its bytes and a download link valid for `expiry_secs`
    /// (default one hour, at most seven days). `SOURCE_NOT_FOUND` when there is no such live
    /// source in the collection.
    pub async fn inspect_source(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        id: &str,
        expiry_secs: Option<i64>,
        acl: &[String],
    ) -> AppResult<SourceView> {
        who.require(Scope::Read)?;
        if id.is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required parameter `id`".into(),
            ));
        }
        let expiry = match expiry_secs {
            None => DOWNLOAD_LINK_DEFAULT_SECS,
            Some(secs) => u64::try_from(secs)
                .ok()
                .filter(|s| (1..=DOWNLOAD_LINK_MAX_SECS).contains(s))
                .ok_or_else(|| {
                    AppError::InvalidParameters(format!(
                        "`expiry_seconds` must be between 1 and {DOWNLOAD_LINK_MAX_SECS}"
                    ))
                })?,
        };
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let collection = parse_collection(&db, collection, "collection")?;
        let (scope, now) = (db.scope(), self.now());
        let source = self
            .store()
            .item_source(&scope, &collection, id, now)
            .await?
            // A source the principals may not read is not there for them.
            .filter(|s| crate::filters::may_read(&s.item.fields.additional_metadata, acl))
            .ok_or_else(|| AppError::SourceNotFound(id.to_owned()))?;
        // Files get their extracted text when indexed; before that there is none.
        let content = source.item.fields.text.clone().unwrap_or_default();
        let expires_at = now.after(Duration::from_secs(expiry));
        let token = self
            .sign_link(&LinkClaims {
                org: scope.org.clone(),
                database: scope.id.clone(),
                collection: collection.clone(),
                id: id.to_owned(),
                expires_at,
            })
            .await?;
        Ok(SourceView {
            database: db,
            item: source.item,
            content,
            payload: source.payload,
            link: DownloadLink { token, expires_at },
        })
    }

    /// What a download link opens, while it has not expired and the source still exists.
    /// A link that is malformed, forged or expired is `FORBIDDEN`.
    pub async fn download(&self, token: &str) -> AppResult<Download> {
        let claims = self.verify_link(token).await?;
        if claims.expires_at <= self.now() {
            return Err(AppError::Forbidden("this download link has expired".into()));
        }
        let scope = DatabaseScope {
            org: claims.org,
            id: claims.database,
        };
        let source = self
            .store()
            .item_source(&scope, &claims.collection, &claims.id, self.now())
            .await?
            .ok_or_else(|| AppError::SourceNotFound(claims.id.clone()))?;
        let item = source.item;
        Ok(match source.payload {
            Some(bytes) => Download {
                filename: item.fields.filename,
                media_type: item.fields.media_type,
                bytes,
            },
            None => Download {
                filename: format!("{}.txt", claims.id),
                media_type: "text/plain; charset=utf-8".into(),
                bytes: item.fields.text.unwrap_or_default().into_bytes(),
            },
        })
    }

    /// Merges new metadata into one source: schema values into `metadata`, free-form values
    /// into `additional_metadata` (a key sent as null is removed). The merged values are
    /// checked as at ingestion; filters see them from the next query on.
    pub async fn edit_source_metadata(
        &self,
        who: &Principal,
        database: &DatabaseName,
        id: &str,
        request: MetadataEditRequest,
    ) -> AppResult<MetadataEdited> {
        who.require(Scope::Write)?;
        let mut request = request;
        if let Some(acl) = request.acl.take() {
            if request
                .additional_metadata
                .contains_key(crate::filters::ACL_FIELD)
            {
                return Err(AppError::InvalidParameters(
                    "send the access rule as `acl`, not as `additional_metadata.acl` too".into(),
                ));
            }
            let rule = crate::filters::access_rule("acl", acl)?;
            request
                .additional_metadata
                .insert(crate::filters::ACL_FIELD.to_owned(), Value::from(rule));
        }
        if request.metadata.is_empty() && request.additional_metadata.is_empty() {
            return Err(AppError::InvalidParameters(
                "send `database_metadata`, `additional_metadata`, `acl` or a mix".into(),
            ));
        }
        let db = self.authorize_database(who, database, Scope::Write).await?;
        let collection = parse_collection(&db, request.collection.as_deref(), "collection")?;
        let edit = MetadataEdit {
            metadata: request.metadata,
            additional_metadata: request.additional_metadata,
        };
        let whose = format!("source `{id}`");
        let check = |metadata: &Map<String, Value>, additional: &Map<String, Value>| {
            check_item_limits(&whose, "", metadata, additional)
                .and_then(|()| check_metadata(&db, metadata, &format!("{whose}: metadata")))
                .map_err(|e| e.to_string())
        };
        let outcome = self
            .store()
            .edit_item_metadata(&db.scope(), &collection, id, &edit, &check, self.now())
            .await?;
        match outcome {
            MetadataEditOutcome::Edited {
                metadata,
                additional_metadata,
                chunks,
            } => Ok(MetadataEdited {
                database: db.clone(),
                collection,
                id: id.to_owned(),
                metadata,
                additional_metadata,
                chunks,
            }),
            MetadataEditOutcome::Refused(reason) => Err(AppError::Validation(reason)),
            MetadataEditOutcome::NotFound => Err(AppError::SourceNotFound(format!(
                "{id}` in collection `{collection}"
            ))),
        }
    }

    async fn link_secret(&self) -> AppResult<Vec<u8>> {
        let candidate: [u8; 32] = rand::random();
        Ok(self
            .store()
            .service_secret(LINK_SECRET, &candidate, self.now())
            .await?)
    }

    async fn sign_link(&self, claims: &LinkClaims) -> AppResult<String> {
        let body = hex::encode(claims.encode());
        let signature = engram_outbound::sign_sha256(&self.link_secret().await?, body.as_bytes());
        Ok(format!(
            "{body}.{}",
            signature.trim_start_matches("sha256=")
        ))
    }

    async fn verify_link(&self, token: &str) -> AppResult<LinkClaims> {
        let forged = || AppError::Forbidden("this download link is not valid".into());
        let (body, signature) = token.split_once('.').ok_or_else(forged)?;
        let expected = engram_outbound::sign_sha256(&self.link_secret().await?, body.as_bytes());
        let expected = expected.trim_start_matches("sha256=");
        if !bool::from(expected.as_bytes().ct_eq(signature.as_bytes())) {
            return Err(forged());
        }
        hex::decode(body)
            .ok()
            .and_then(|raw| String::from_utf8(raw).ok())
            .and_then(|text| LinkClaims::decode(&text))
            .ok_or_else(forged)
    }
}

/// What a download link names: one source of one database, until a time.
#[derive(Debug, Clone, PartialEq)]
struct LinkClaims {
    org: OrgId,
    database: DatabaseId,
    collection: CollectionName,
    id: String,
    expires_at: UnixMs,
}

impl LinkClaims {
    /// Lines: organization, database id, collection, item id, expiry (none of them can hold a
    /// line break: names and ids refuse control characters).
    fn encode(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}",
            self.org.as_str(),
            self.database.as_str(),
            self.collection.as_str(),
            self.id,
            self.expires_at.as_millis()
        )
    }

    fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split('\n');
        let claims = Self {
            org: OrgId::from_trusted(parts.next()?),
            database: DatabaseId::from_trusted(parts.next()?),
            collection: CollectionName::from_trusted(parts.next()?),
            id: parts.next()?.to_owned(),
            expires_at: UnixMs::from_millis(parts.next()?.parse().ok()?),
        };
        parts.next().is_none().then_some(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_claims_round_trip_and_refuse_extra_lines() {
        let claims = LinkClaims {
            org: OrgId::from_trusted("org"),
            database: DatabaseId::from_trusted("db_1"),
            collection: CollectionName::from_trusted("c"),
            id: "doc 1".into(),
            expires_at: UnixMs::from_millis(42),
        };
        assert_eq!(LinkClaims::decode(&claims.encode()), Some(claims.clone()));
        assert_eq!(
            LinkClaims::decode(&format!("{}\nmore", claims.encode())),
            None
        );
        assert_eq!(LinkClaims::decode("org\ndb"), None);
    }
}
