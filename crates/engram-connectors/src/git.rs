//! `git`: the files of a repository at a branch. A resource is a remote URL (`https://`,
//! `http://` or `git://`; `filters.branch`, default the remote's HEAD). The `git` program keeps a
//! bare mirror per connector and resource under the data directory and fetches into it each
//! sync. The first pass lists every file of the branch's tree (blob ids are the versions), so
//! files gone since leave engram; later passes read only `git diff` between the last synced
//! commit and the new one: added and changed files are dispatched, deleted ones removed. A
//! rewritten history (the old commit no longer an ancestor) falls back to a full listing.
//!
//! The remote's host is checked by the outbound policy before `git` runs; credentials go to
//! `git` as an HTTP header in its environment, never on its command line or in a URL.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Files listed per page of a full listing.
const PAGE: usize = 200;
/// A diff larger than this is read as a full listing instead.
const DIFF_MAX: usize = 5000;
const FETCH_TIMEOUT: Duration = Duration::from_secs(600);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

pub struct GitProvider {
    info: ProviderInfo,
    /// Where mirrors are kept.
    work_dir: PathBuf,
}

impl GitProvider {
    pub fn new(work_dir: PathBuf) -> Self {
        Self {
            info: ProviderInfo {
                provider: "git",
                category: "code",
                connector_type: "repository",
                rank: Some(5),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["file"],
                fields: vec![
                    FieldInfo {
                        name: "path",
                        data_type: "string",
                        description: "The file's path in the repository",
                        filter_key: Some("additional_metadata.path"),
                    },
                    FieldInfo {
                        name: "commit",
                        data_type: "string",
                        description: "The commit the file was read at",
                        filter_key: None,
                    },
                ],
                credential_schema: crate::http_credential_schema("repositories"),
                setup_guide: "Configure a resource per repository: its remote URL (https://, http:// or git://); \
                    `filters.branch` picks the branch (default: the remote's HEAD). Private repositories over \
                    HTTP take `username` and `password` (or an access token as the password), or a bearer `token`.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
            work_dir,
        }
    }
}

/// Runs `git` with `args` in `dir`, within `limit`; its standard output.
async fn git(
    dir: &Path,
    args: &[&str],
    auth: Option<&str>,
    limit: Duration,
) -> Result<Vec<u8>, ProviderError> {
    let mut command = tokio::process::Command::new("git");
    command
        .args(["-c", "core.askPass=", "-c", "credential.helper="])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env_remove("GIT_DIR")
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    if let Some(header) = auth {
        // An extra header from the environment: never on the command line (`ps` shows that).
        command
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env("GIT_CONFIG_VALUE_0", header);
    }
    let output = tokio::time::timeout(limit, command.output())
        .await
        .map_err(|_| ProviderError::Transient {
            message: format!("git {} took longer than {} s", args[0], limit.as_secs()),
            http_status: 0,
        })?
        .map_err(|e| ProviderError::Invalid(format!("the git program cannot run: {e}")))?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(git_failure(&String::from_utf8_lossy(&output.stderr)))
}

/// What a failed `git` said, as the connector must act on it.
fn git_failure(stderr: &str) -> ProviderError {
    let said = stderr
        .trim()
        .lines()
        .last()
        .unwrap_or("git failed")
        .to_owned();
    let lower = stderr.to_lowercase();
    if lower.contains("authentication failed")
        || lower.contains("could not read username")
        || lower.contains("403")
        || lower.contains("401")
    {
        ProviderError::Unauthorized {
            message: format!("the remote refused the credentials: {said}"),
            http_status: 401,
        }
    } else if lower.contains("not found")
        || lower.contains("not exported")
        || lower.contains("does not appear to be a git repository")
        || lower.contains("no such repository")
        || lower.contains("couldn't find remote ref")
    {
        ProviderError::Resource {
            message: format!("the repository or branch is gone: {said}"),
            http_status: 404,
        }
    } else {
        ProviderError::Transient {
            message: said,
            http_status: 0,
        }
    }
}

fn auth_header(access: &Access) -> Option<String> {
    crate::feed::auth_headers(&access.credentials)
        .into_iter()
        .next()
        .map(|(_, value)| format!("Authorization: {value}"))
}

impl GitProvider {
    /// The remote checked by the outbound policy.
    async fn remote(&self, access: &Access, resource: &str) -> Result<url::Url, ProviderError> {
        let url = url::Url::parse(resource)
            .map_err(|_| ProviderError::Invalid(format!("`{resource}` is not a repository URL")))?;
        let checkable = match url.scheme() {
            "https" | "http" => url.to_string(),
            "git" => format!(
                "https://{}:{}/",
                url.host_str().unwrap_or_default(),
                url.port().unwrap_or(9418)
            ),
            other => {
                return Err(ProviderError::Invalid(format!(
                    "`{resource}`: the scheme `{other}` is not served (https, http or git)"
                )))
            }
        };
        access
            .outbound
            .check_url(&checkable)
            .await
            .map_err(|e| ProviderError::Invalid(format!("repository `{resource}`: {e}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ProviderError::Invalid(
                "put credentials in `credentials`, not in the repository URL".into(),
            ));
        }
        Ok(url)
    }

    /// The mirror of `resource`, fetched now; its directory.
    async fn mirror(
        &self,
        access: &Access,
        resource: &ResourceRef,
        url: &url::Url,
    ) -> Result<PathBuf, ProviderError> {
        let dir = self.mirror_dir(access, resource);
        let auth = auth_header(access);
        if dir.join("HEAD").is_file() {
            git(
                &dir,
                &[
                    "fetch",
                    "--prune",
                    "--quiet",
                    "origin",
                    "+refs/heads/*:refs/heads/*",
                ],
                auth.as_deref(),
                FETCH_TIMEOUT,
            )
            .await?;
        } else {
            std::fs::create_dir_all(&self.work_dir)
                .map_err(|e| ProviderError::Invalid(format!("the git work directory: {e}")))?;
            let partial = dir.with_extension("partial");
            let _ = std::fs::remove_dir_all(&partial);
            let target = partial.to_string_lossy().into_owned();
            git(
                &self.work_dir,
                &["clone", "--bare", "--quiet", url.as_str(), &target],
                auth.as_deref(),
                FETCH_TIMEOUT,
            )
            .await?;
            std::fs::rename(&partial, &dir)
                .map_err(|e| ProviderError::Invalid(format!("the git work directory: {e}")))?;
        }
        Ok(dir)
    }
}

fn entry(path: &str, blob: &str, commit: &str, url: &url::Url) -> Entry {
    let name = path.rsplit('/').next().unwrap_or(path).to_owned();
    let mut fields = Map::new();
    fields.insert("path".into(), Value::from(path));
    fields.insert("commit".into(), Value::from(commit));
    fields.insert("repository".into(), Value::from(url.as_str()));
    Entry {
        native_id: path.to_owned(),
        version: blob.to_owned(),
        title: path.to_owned(),
        file_name: name,
        url: String::new(),
        modified_at: String::new(),
        fields,
        content: None,
        state: String::new(),
    }
}

/// `git ls-tree -r -z` output: (path, blob id) of each file, in path order.
fn tree_files(out: &[u8]) -> Vec<(String, String)> {
    out.split(|b| *b == 0)
        .filter_map(|record| {
            let record = String::from_utf8_lossy(record);
            let (meta, path) = record.split_once('\t')?;
            let mut parts = meta.split_whitespace();
            let (_mode, kind, blob) = (parts.next()?, parts.next()?, parts.next()?);
            (kind == "blob").then(|| (path.to_owned(), blob.to_owned()))
        })
        .collect()
}

/// `git diff --raw -z` output: changed files (path, new blob) and deleted paths.
fn diff_files(out: &[u8]) -> (Vec<(String, String)>, Vec<String>) {
    let mut fields = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let (mut changed, mut deleted) = (Vec::new(), Vec::new());
    while let Some(meta) = fields.next() {
        let parts: Vec<&str> = meta.trim_start_matches(':').split_whitespace().collect();
        if parts.len() < 5 {
            continue;
        }
        let (new_blob, status) = (parts[3].to_owned(), parts[4]);
        let Some(path) = fields.next() else { break };
        match status.chars().next() {
            Some('D') => deleted.push(path),
            Some('R' | 'C') => {
                let Some(to) = fields.next() else { break };
                if status.starts_with('R') {
                    deleted.push(path);
                }
                changed.push((to, new_blob));
            }
            _ => changed.push((path, new_blob)),
        }
    }
    (changed, deleted)
}

#[async_trait]
impl Provider for GitProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let mut found = Vec::new();
        for repository in crate::credential_list(access, "repositories") {
            let url = self.remote(access, &repository).await?;
            let auth = auth_header(access);
            let heads = git(
                &self.work_dir_or_tmp(),
                &["ls-remote", "--symref", url.as_str(), "HEAD"],
                auth.as_deref(),
                READ_TIMEOUT,
            )
            .await?;
            let head = String::from_utf8_lossy(&heads)
                .lines()
                .find_map(|l| {
                    l.strip_prefix("ref: ")
                        .and_then(|r| r.split('\t').next())
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            found.push(DiscoveredResource {
                name: url.path().trim_matches('/').to_owned(),
                id: url.to_string(),
                resource_type: "repository".to_owned(),
                metadata: json!({"url": url.as_str(), "head": head}),
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
        let url = self.remote(access, &resource.id).await?;
        let dir = self.mirror(access, resource, &url).await?;
        let branch = resource
            .filters
            .get("branch")
            .and_then(Value::as_str)
            .map_or_else(|| "HEAD".to_owned(), |b| format!("refs/heads/{b}"));
        let head = String::from_utf8_lossy(
            &git(
                &dir,
                &["rev-parse", "--verify", &format!("{branch}^{{commit}}")],
                None,
                READ_TIMEOUT,
            )
            .await?,
        )
        .trim()
        .to_owned();
        // `within` is "<commit> <last path>" while a full listing goes on.
        let (listing_commit, after) = position.within.split_once(' ').unwrap_or(("", ""));
        if position.within.is_empty() && !position.cursor.is_empty() && position.cursor != head {
            let ancestor = git(
                &dir,
                &["merge-base", "--is-ancestor", &position.cursor, &head],
                None,
                READ_TIMEOUT,
            )
            .await;
            if ancestor.is_ok() {
                let out = git(
                    &dir,
                    &[
                        "diff",
                        "--raw",
                        "-z",
                        "--no-abbrev",
                        "-M",
                        &position.cursor,
                        &head,
                    ],
                    None,
                    READ_TIMEOUT,
                )
                .await?;
                let (changed, deleted) = diff_files(&out);
                if changed.len() + deleted.len() <= DIFF_MAX {
                    return Ok(Page {
                        entries: changed
                            .iter()
                            .map(|(path, blob)| entry(path, blob, &head, &url))
                            .collect(),
                        deleted,
                        next: None,
                        cursor: head,
                        complete_listing: false,
                        ..Page::default()
                    });
                }
            }
        } else if position.within.is_empty() && position.cursor == head {
            // Nothing new since the last pass.
            return Ok(Page {
                cursor: head,
                ..Page::default()
            });
        }
        // A full listing of the tree at one commit (the one a resumed listing started at).
        let commit = if listing_commit.is_empty() {
            head.clone()
        } else {
            listing_commit.to_owned()
        };
        let out = git(
            &dir,
            &["ls-tree", "-r", "-z", "--full-tree", &commit],
            None,
            READ_TIMEOUT,
        )
        .await?;
        let files: Vec<(String, String)> = tree_files(&out)
            .into_iter()
            .filter(|(path, _)| after.is_empty() || path.as_str() > after)
            .take(PAGE + 1)
            .collect();
        let more = files.len() > PAGE;
        let entries: Vec<Entry> = files
            .iter()
            .take(PAGE)
            .map(|(path, blob)| entry(path, blob, &commit, &url))
            .collect();
        let next = more.then(|| {
            format!(
                "{commit} {}",
                entries.last().map_or("", |e| e.native_id.as_str())
            )
        });
        Ok(Page {
            entries,
            deleted: Vec::new(),
            next,
            cursor: commit,
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
        let dir = self.mirror_dir(access, resource);
        let size: usize = String::from_utf8_lossy(
            &git(
                &dir,
                &["cat-file", "-s", &entry.version],
                None,
                READ_TIMEOUT,
            )
            .await
            .map_err(|e| ProviderError::Object(e.to_string()))?,
        )
        .trim()
        .parse()
        .unwrap_or(usize::MAX);
        if size > max_bytes {
            return Err(ProviderError::Object(format!(
                "{} holds {size} bytes, more than the {max_bytes} a file may",
                entry.native_id
            )));
        }
        git(
            &dir,
            &["cat-file", "blob", &entry.version],
            None,
            READ_TIMEOUT,
        )
        .await
        .map(Content::File)
        .map_err(|e| ProviderError::Object(e.to_string()))
    }
}

impl GitProvider {
    /// The mirror of one connector's resource.
    fn mirror_dir(&self, access: &Access, resource: &ResourceRef) -> PathBuf {
        self.work_dir.join(crate::short_hash(
            format!("{}\u{0}{}", access.owner, resource.id).as_bytes(),
        ))
    }

    /// A directory to run `git ls-remote` in (it needs none of its own).
    fn work_dir_or_tmp(&self) -> PathBuf {
        if self.work_dir.is_dir() {
            self.work_dir.clone()
        } else {
            std::env::temp_dir()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_and_diffs_are_read_from_gits_own_output() {
        let tree = b"100644 blob aaa1\tREADME.md\x00040000 tree bbb2\tsrc\x00100644 blob ccc3\tsrc/main.rs\x00";
        assert_eq!(
            tree_files(tree),
            [
                ("README.md".to_owned(), "aaa1".to_owned()),
                ("src/main.rs".to_owned(), "ccc3".to_owned())
            ]
        );
        let diff = b":100644 100644 aaa1 aaa9 M\x00README.md\x00:100644 000000 ccc3 0000 D\x00old.txt\x00:100644 100644 ddd4 ddd4 R100\x00a.txt\x00b.txt\x00:000000 100644 0000 eee5 A\x00new.txt\x00";
        let (changed, deleted) = diff_files(diff);
        assert_eq!(
            changed,
            [
                ("README.md".to_owned(), "aaa9".to_owned()),
                ("b.txt".to_owned(), "ddd4".to_owned()),
                ("new.txt".to_owned(), "eee5".to_owned())
            ]
        );
        assert_eq!(deleted, ["old.txt".to_owned(), "a.txt".to_owned()]);
    }

    #[test]
    fn refusals_are_told_apart() {
        assert!(matches!(
            git_failure("fatal: Authentication failed for 'x'"),
            ProviderError::Unauthorized { .. }
        ));
        assert!(matches!(
            git_failure("fatal: remote error: access denied or repository not exported: /gone"),
            ProviderError::Resource { .. }
        ));
        assert!(matches!(
            git_failure("fatal: repository 'x' not found"),
            ProviderError::Resource { .. }
        ));
        assert!(matches!(
            git_failure("fatal: unable to connect to 127.0.0.1"),
            ProviderError::Transient { .. }
        ));
    }
}
