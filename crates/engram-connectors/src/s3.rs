//! `s3`: the objects of an S3-compatible bucket (AWS, MinIO, Ceph, rclone, …). A resource is a
//! bucket, or `bucket/prefix`. A pass lists the bucket with `ListObjectsV2` a page at a time
//! (the continuation token is the pass position), each object's `ETag` is its version, so only
//! changed objects are read, and objects gone since leave engram. Requests are signed with
//! AWS Signature V4 (`rusty-s3` presigns them) and sent through the outbound client.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::time::Duration;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a presigned request stays valid.
const SIGNED_FOR: Duration = Duration::from_secs(600);
const LISTING_MAX_BYTES: usize = 16 * 1024 * 1024;

pub struct S3Provider {
    info: ProviderInfo,
}

impl Default for S3Provider {
    fn default() -> Self {
        Self::new()
    }
}

impl S3Provider {
    pub fn new() -> Self {
        Self {
            info: ProviderInfo {
                provider: "s3",
                category: "files",
                connector_type: "object_storage",
                rank: Some(7),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["object"],
                fields: vec![
                    FieldInfo {
                        name: "key",
                        data_type: "string",
                        description: "The object's key",
                        filter_key: Some("additional_metadata.key"),
                    },
                    FieldInfo {
                        name: "bucket",
                        data_type: "string",
                        description: "The object's bucket",
                        filter_key: Some("additional_metadata.bucket"),
                    },
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {
                        "access_key_id": {"type": "string", "minLength": 1},
                        "secret_access_key": {"type": "string", "minLength": 1},
                        "endpoint": {"type": "string", "pattern": "^https?://"},
                        "region": {"type": "string", "minLength": 1},
                        "buckets": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 100}
                    },
                    "required": ["access_key_id", "secret_access_key"],
                    "additionalProperties": false
                }),
                setup_guide: "Give an access key with read access (`access_key_id`, `secret_access_key`), the \
                    `region` (default us-east-1) and, for a service other than AWS, its `endpoint` \
                    (path-style requests). Configure a resource per bucket, or `bucket/prefix`; \
                    `credentials.buckets` lists buckets for discovery.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

fn text<'a>(access: &'a Access, key: &str) -> Option<&'a str> {
    access.credentials.get(key).and_then(Value::as_str)
}

/// The bucket of `resource` (`bucket` or `bucket/prefix`), its prefix, and the credentials.
fn bucket(
    access: &Access,
    resource: &str,
) -> Result<(rusty_s3::Bucket, String, rusty_s3::Credentials), ProviderError> {
    let (name, prefix) = resource.split_once('/').unwrap_or((resource, ""));
    let region = text(access, "region").unwrap_or("us-east-1").to_owned();
    let (endpoint, style) = match text(access, "endpoint") {
        Some(endpoint) => (endpoint.to_owned(), rusty_s3::UrlStyle::Path),
        None => (
            format!("https://s3.{region}.amazonaws.com"),
            rusty_s3::UrlStyle::VirtualHost,
        ),
    };
    let endpoint = url::Url::parse(&endpoint)
        .map_err(|_| ProviderError::Invalid(format!("`{endpoint}` is not an endpoint URL")))?;
    let bucket = rusty_s3::Bucket::new(endpoint, style, name.to_owned(), region)
        .map_err(|e| ProviderError::Invalid(format!("bucket `{name}`: {e}")))?;
    let credentials = rusty_s3::Credentials::new(
        text(access, "access_key_id").unwrap_or_default(),
        text(access, "secret_access_key").unwrap_or_default(),
    );
    Ok((bucket, prefix.to_owned(), credentials))
}

/// What an S3 error answer means for the connector.
fn s3_failure(status: u16, body: &[u8], what: &str) -> ProviderError {
    let body = String::from_utf8_lossy(body);
    let code = body
        .split("<Code>")
        .nth(1)
        .and_then(|rest| rest.split("</Code>").next())
        .unwrap_or("")
        .to_owned();
    match (status, code.as_str()) {
        (_, "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "AccessDenied") | (401 | 403, _) => {
            ProviderError::Unauthorized {
                message: format!("{what}: {status} {code}"),
                http_status: status,
            }
        }
        (_, "NoSuchBucket") | (404, _) => ProviderError::Resource {
            message: format!("{what}: {status} {code} (removed at the source?)"),
            http_status: status,
        },
        _ => crate::http_failure(status, what, false).unwrap_or(ProviderError::Transient {
            message: format!("{what}: {status} {code}"),
            http_status: status,
        }),
    }
}

impl S3Provider {
    async fn list_page(
        &self,
        access: &Access,
        resource: &str,
        token: &str,
        limit: usize,
    ) -> Result<rusty_s3::actions::ListObjectsV2Response, ProviderError> {
        let (bucket, prefix, credentials) = bucket(access, resource)?;
        let mut action = bucket.list_objects_v2(Some(&credentials));
        if !prefix.is_empty() {
            action.with_prefix(prefix);
        }
        if !token.is_empty() {
            action.with_continuation_token(token.to_owned());
        }
        action.with_max_keys(limit);
        let url = rusty_s3::S3Action::sign(&action, SIGNED_FOR);
        access
            .outbound
            .check_url(url.as_str())
            .await
            .map_err(|e| ProviderError::Invalid(format!("bucket `{resource}`: {e}")))?;
        let fetched = access
            .outbound
            .get_read(&url, &[], TIMEOUT, LISTING_MAX_BYTES)
            .await
            .map_err(|e| ProviderError::Transient {
                message: format!("bucket `{resource}`: {e}"),
                http_status: 0,
            })?;
        if !(200..300).contains(&fetched.status) {
            return Err(s3_failure(
                fetched.status,
                &fetched.body,
                &format!("bucket `{resource}`"),
            ));
        }
        let body = String::from_utf8_lossy(&fetched.body);
        rusty_s3::actions::ListObjectsV2::parse_response(&body).map_err(|e| {
            ProviderError::Resource {
                message: format!("bucket `{resource}`: the listing cannot be read: {e}"),
                http_status: fetched.status,
            }
        })
    }
}

#[async_trait]
impl Provider for S3Provider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let mut found = Vec::new();
        for name in crate::credential_list(access, "buckets") {
            let page = self.list_page(access, &name, "", 1).await?;
            found.push(DiscoveredResource {
                id: name.clone(),
                name: name.clone(),
                resource_type: "bucket".to_owned(),
                metadata: json!({"bucket": name, "empty": page.contents.is_empty()}),
            });
        }
        Ok(found)
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        _known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let page = self
            .list_page(access, &resource.id, &position.within, 1000)
            .await?;
        let bucket_name = resource
            .id
            .split('/')
            .next()
            .unwrap_or(&resource.id)
            .to_owned();
        let entries = page
            .contents
            .iter()
            .filter(|object| !object.key.ends_with('/'))
            .map(|object| {
                let mut fields = Map::new();
                fields.insert("key".into(), Value::from(object.key.clone()));
                fields.insert("bucket".into(), Value::from(bucket_name.clone()));
                Entry {
                    native_id: format!("{bucket_name}/{}", object.key),
                    version: format!(
                        "{}|{}",
                        object.etag.as_deref().unwrap_or_default(),
                        object.size.unwrap_or_default()
                    ),
                    title: object.key.clone(),
                    file_name: object
                        .key
                        .rsplit('/')
                        .next()
                        .unwrap_or(&object.key)
                        .to_owned(),
                    url: String::new(),
                    modified_at: object.last_modified.clone().unwrap_or_default(),
                    fields,
                    content: None,
                    state: String::new(),
                }
            })
            .collect();
        Ok(Page {
            entries,
            deleted: Vec::new(),
            next: page.next_continuation_token.filter(|t| !t.is_empty()),
            cursor: String::new(),
            complete_listing: true,
            ..Page::default()
        })
    }

    async fn fetch(
        &self,
        access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let (bucket, _, credentials) =
            bucket(access, &resource.id).map_err(|e| ProviderError::Object(e.to_string()))?;
        let key = entry
            .fields
            .get("key")
            .and_then(Value::as_str)
            .ok_or_else(|| ProviderError::Object(format!("{} has no key", entry.native_id)))?;
        let action = bucket.get_object(Some(&credentials), key);
        let url = rusty_s3::S3Action::sign(&action, SIGNED_FOR);
        let fetched = access
            .outbound
            .get_read(&url, &[], TIMEOUT, max_bytes)
            .await
            .map_err(|e| ProviderError::Object(format!("{}: {e}", entry.native_id)))?;
        if (200..300).contains(&fetched.status) {
            Ok(Content::File(fetched.body))
        } else {
            Err(ProviderError::Object(
                s3_failure(fetched.status, &fetched.body, &entry.native_id).to_string(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_errors_say_what_to_do() {
        let denied = b"<Error><Code>SignatureDoesNotMatch</Code></Error>";
        assert!(matches!(
            s3_failure(403, denied, "b"),
            ProviderError::Unauthorized { .. }
        ));
        let gone = b"<Error><Code>NoSuchBucket</Code></Error>";
        assert!(matches!(
            s3_failure(404, gone, "b"),
            ProviderError::Resource { .. }
        ));
        assert!(matches!(
            s3_failure(503, b"", "b"),
            ProviderError::Transient { .. }
        ));
    }
}
