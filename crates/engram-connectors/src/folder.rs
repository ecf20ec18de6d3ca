//! `folder`: the files under a directory of the engram host, offered only under roots the
//! operator configures (`connectors.folder_roots`). A resource is a directory under a root; a
//! pass walks it in path order (hidden files and directories skipped), a page at a time, and
//! lists every file, so files that left the folder leave engram. Nothing outside a root is
//! read: a resource, or a symbolic link inside one, that resolves outside every root is
//! refused.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::path::{Component, Path, PathBuf};

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Files listed per page.
const PAGE: usize = 200;

pub struct FolderProvider {
    info: ProviderInfo,
    roots: Vec<PathBuf>,
}

impl FolderProvider {
    pub fn new(roots: Vec<PathBuf>) -> Self {
        Self {
            info: ProviderInfo {
                provider: "folder",
                category: "files",
                connector_type: "filesystem",
                rank: Some(1),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["file"],
                fields: vec![
                    FieldInfo {
                        name: "path",
                        data_type: "string",
                        description: "The file's absolute path on the engram host",
                        filter_key: Some("additional_metadata.path"),
                    },
                    FieldInfo {
                        name: "relative_path",
                        data_type: "string",
                        description: "The file's path under the synced folder",
                        filter_key: Some("additional_metadata.relative_path"),
                    },
                    FieldInfo {
                        name: "modified_at",
                        data_type: "datetime",
                        description: "When the file last changed",
                        filter_key: None,
                    },
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {},
                    "additionalProperties": false
                }),
                setup_guide: "Folders under the roots the operator lists in `connectors.folder_roots` can be synced. \
                    Configure a resource per folder (its absolute path, from discovery).",
                interval: IntervalBounds {
                    min_s: 10,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
            roots: roots
                .into_iter()
                .filter_map(|root| root.canonicalize().ok())
                .collect(),
        }
    }

    /// The resource's directory, resolved, when it lies under a root.
    fn directory(&self, resource: &str) -> Result<(PathBuf, PathBuf), ProviderError> {
        let asked = Path::new(resource);
        if !asked.is_absolute() || asked.components().any(|c| c == Component::ParentDir) {
            return Err(ProviderError::Invalid(format!(
                "folder `{resource}` must be an absolute path without `..`"
            )));
        }
        let resolved = match asked.canonicalize() {
            Ok(path) => path,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(ProviderError::Resource {
                    message: format!("folder `{resource}` does not exist (removed at the source?)"),
                    http_status: 404,
                })
            }
            Err(err) => {
                return Err(ProviderError::Resource {
                    message: format!("folder `{resource}` cannot be read: {err}"),
                    http_status: 403,
                })
            }
        };
        let root = self
            .roots
            .iter()
            .find(|root| resolved.starts_with(root))
            .ok_or_else(|| {
                ProviderError::Invalid(format!(
                    "folder `{resource}` is outside the folders this server may sync"
                ))
            })?;
        if !resolved.is_dir() {
            return Err(ProviderError::Resource {
                message: format!("`{resource}` is not a folder"),
                http_status: 404,
            });
        }
        Ok((resolved, root.clone()))
    }
}

fn hidden(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_none_or(|n| n.starts_with('.'))
}

fn rfc3339(time: std::time::SystemTime) -> String {
    time::OffsetDateTime::from(time)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The page of files after `after` (a path under `dir`, compared by components, which is the
/// order of a walk sorted by name), skipping whole directories that lie before it.
fn walk_page(dir: &Path, root: &Path, after: &str) -> Result<Page, ProviderError> {
    let after = PathBuf::from(after);
    let mut entries = Vec::new();
    let mut walk = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter();
    let mut last = None;
    while let Some(next) = walk.next() {
        let item = match next {
            Ok(item) => item,
            Err(err) => {
                tracing::warn!(error = %err, "folder connector: skipped an unreadable entry");
                continue;
            }
        };
        if hidden(item.file_name()) {
            if item.file_type().is_dir() {
                walk.skip_current_dir();
            }
            continue;
        }
        let relative = item
            .path()
            .strip_prefix(dir)
            .unwrap_or(item.path())
            .to_path_buf();
        if !after.as_os_str().is_empty() && relative <= after {
            if item.file_type().is_dir() && !after.starts_with(&relative) {
                walk.skip_current_dir();
            }
            continue;
        }
        if item.file_type().is_dir() {
            continue;
        }
        // A link is followed only when it resolves to a file under the root.
        let path = if item.path_is_symlink() {
            match item.path().canonicalize() {
                Ok(target) if target.starts_with(root) && target.is_file() => target,
                _ => continue,
            }
        } else {
            item.path().to_path_buf()
        };
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().ok();
        let mtime = modified
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let name = item.file_name().to_string_lossy().into_owned();
        let shown = item.path().to_string_lossy().into_owned();
        let mut fields = Map::new();
        fields.insert("path".into(), Value::from(shown.clone()));
        fields.insert(
            "relative_path".into(),
            Value::from(relative.to_string_lossy().into_owned()),
        );
        entries.push(Entry {
            native_id: shown.clone(),
            version: format!("{}-{mtime}", meta.len()),
            title: name.clone(),
            file_name: name,
            url: format!("file://{shown}"),
            modified_at: modified.map(rfc3339).unwrap_or_default(),
            fields,
            content: None,
            state: String::new(),
        });
        last = Some(relative);
        if entries.len() == PAGE {
            break;
        }
    }
    let next = (entries.len() == PAGE)
        .then(|| last.map(|p| p.to_string_lossy().into_owned()))
        .flatten();
    Ok(Page {
        entries,
        deleted: Vec::new(),
        next,
        cursor: String::new(),
        complete_listing: true,
        ..Page::default()
    })
}

#[async_trait]
impl Provider for FolderProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, _access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let roots = self.roots.clone();
        let found = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            for root in roots {
                found.push(root.clone());
                let Ok(children) = std::fs::read_dir(&root) else {
                    continue;
                };
                let mut dirs: Vec<PathBuf> = children
                    .filter_map(Result::ok)
                    .filter(|c| c.file_type().is_ok_and(|t| t.is_dir()) && !hidden(&c.file_name()))
                    .map(|c| c.path())
                    .collect();
                dirs.sort();
                found.extend(dirs);
            }
            found
        })
        .await
        .map_err(|e| ProviderError::Transient {
            message: format!("listing folders failed: {e}"),
            http_status: 0,
        })?;
        Ok(found
            .into_iter()
            .map(|path| {
                let shown = path.to_string_lossy().into_owned();
                DiscoveredResource {
                    name: path
                        .file_name()
                        .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned()),
                    id: shown.clone(),
                    resource_type: "folder".to_owned(),
                    metadata: json!({ "path": shown }),
                }
            })
            .collect())
    }

    async fn list(
        &self,
        _access: &Access,
        resource: &ResourceRef,
        position: &Position,
        _known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let (dir, root) = self.directory(&resource.id)?;
        let after = position.within.clone();
        tokio::task::spawn_blocking(move || walk_page(&dir, &root, &after))
            .await
            .map_err(|e| ProviderError::Transient {
                message: format!("walking the folder failed: {e}"),
                http_status: 0,
            })?
    }

    async fn fetch(
        &self,
        _access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let (_, root) = self.directory(&resource.id)?;
        let path = PathBuf::from(&entry.native_id);
        tokio::task::spawn_blocking(move || {
            let resolved = path
                .canonicalize()
                .map_err(|e| ProviderError::Object(format!("{}: {e}", path.display())))?;
            if !resolved.starts_with(&root) {
                return Err(ProviderError::Object(format!(
                    "{} resolves outside the folder",
                    path.display()
                )));
            }
            let len = std::fs::metadata(&resolved)
                .map_err(|e| ProviderError::Object(format!("{}: {e}", path.display())))?
                .len();
            if len > max_bytes as u64 {
                return Err(ProviderError::Object(format!(
                    "{} holds {len} bytes, more than the {max_bytes} a file may",
                    path.display()
                )));
            }
            std::fs::read(&resolved)
                .map(Content::File)
                .map_err(|e| ProviderError::Object(format!("{}: {e}", path.display())))
        })
        .await
        .map_err(|e| ProviderError::Transient {
            message: format!("reading the file failed: {e}"),
            http_status: 0,
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        crate::test_access(serde_json::json!({}))
    }

    fn resource(path: &Path) -> ResourceRef {
        ResourceRef {
            id: path.to_string_lossy().into_owned(),
            resource_type: "folder".into(),
            filters: Value::Null,
            provider_metadata: Value::Null,
        }
    }

    async fn pass(provider: &FolderProvider, dir: &Path) -> Vec<String> {
        let mut position = Position::default();
        let mut seen = Vec::new();
        loop {
            let page = provider
                .list(&access(), &resource(dir), &position, &crate::NothingKnown)
                .await
                .unwrap();
            seen.extend(
                page.entries
                    .iter()
                    .map(|e| e.fields["relative_path"].as_str().unwrap().to_owned()),
            );
            match page.next {
                Some(next) => position.within = next,
                None => return seen,
            }
        }
    }

    #[tokio::test]
    async fn a_pass_lists_every_file_once_in_pages_and_never_leaves_the_root() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "outside").unwrap();
        let docs = root.path().join("docs");
        let mut expected = Vec::new();
        for d in ["a", "a.b", "b", "a/deep"] {
            std::fs::create_dir_all(docs.join(d)).unwrap();
        }
        for i in 0..450 {
            let dir = ["a", "a.b", "b", "a/deep", ""][i % 5];
            let name = format!("{dir}{}f{i:03}.txt", if dir.is_empty() { "" } else { "/" });
            std::fs::write(docs.join(&name), format!("file {i}")).unwrap();
            expected.push(name);
        }
        std::fs::create_dir_all(docs.join(".git")).unwrap();
        std::fs::write(docs.join(".git/config"), "hidden").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), docs.join("link.txt"))
            .unwrap();
        let provider = FolderProvider::new(vec![root.path().to_path_buf()]);
        let mut seen = pass(&provider, &docs).await;
        let listed = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), listed, "no file listed twice across pages");
        expected.sort();
        assert_eq!(
            seen, expected,
            "every file, no hidden one, no link out of the root"
        );

        let discovered = provider.discover(&access()).await.unwrap();
        assert!(discovered.iter().any(|r| r.id == docs.to_string_lossy()));
        // Outside the roots, or climbing out of them, is refused.
        let refused = provider
            .list(
                &access(),
                &resource(outside.path()),
                &Position::default(),
                &crate::NothingKnown,
            )
            .await;
        assert!(
            matches!(refused, Err(ProviderError::Invalid(_))),
            "{refused:?}"
        );
        let climbing = docs.join("../../");
        let refused = provider
            .list(
                &access(),
                &resource(&climbing),
                &Position::default(),
                &crate::NothingKnown,
            )
            .await;
        assert!(
            matches!(refused, Err(ProviderError::Invalid(_))),
            "{refused:?}"
        );
        // A folder removed at the source is a resource failure.
        let gone = provider
            .list(
                &access(),
                &resource(&root.path().join("gone")),
                &Position::default(),
                &crate::NothingKnown,
            )
            .await;
        assert!(
            matches!(
                gone,
                Err(ProviderError::Resource {
                    http_status: 404,
                    ..
                })
            ),
            "{gone:?}"
        );
        // Content, bounded.
        let page = provider
            .list(
                &access(),
                &resource(&docs),
                &Position::default(),
                &crate::NothingKnown,
            )
            .await
            .unwrap();
        let entry = &page.entries[0];
        let content = provider
            .fetch(&access(), &resource(&docs), entry, 1024)
            .await
            .unwrap();
        assert!(matches!(content, Content::File(ref b) if b.starts_with(b"file ")));
        let too_big = provider.fetch(&access(), &resource(&docs), entry, 3).await;
        assert!(matches!(too_big, Err(ProviderError::Object(_))));
    }
}
