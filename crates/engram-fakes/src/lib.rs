//! Stateful fakes of the hosted services engram's connectors read (GitHub, Notion, Linear, Slack,
//! Confluence and Jira, Google Drive and Gmail), for the tests and `engram bench connectors`:
//! each serves the part of its provider's API the connector uses on a loopback port, keeps
//! users, objects, edits, deletions, pagination, rate limits and token expiry, logs every
//! exchange, and holds itself to its provider's published description of that API
//! (`assert_conforms` in each module; the descriptions are what `make setup-test` fetches).
//!
//! They are test doubles of remote services, never of engram's own code: the fakes serve
//! without it; only the conformance checks read what a provider says it sends
//! (`engram-connectors`' tables of methods, queries and credential schemas) to hold those calls
//! to the same published description.

pub mod atlassian;
pub mod github;
pub mod google;
pub mod linear;
pub mod notion;
pub mod serve;
pub mod slack;
pub mod typescript;

use std::path::{Path, PathBuf};

/// Where `make setup-test` keeps the published descriptions and their tools (`.cache` at the
/// repository's root, or the cache directory the tests are given).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ENGRAM_EMBEDDING__CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache"))
}
