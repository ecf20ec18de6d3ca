//! What the crate's tests share.

#![allow(clippy::unwrap_used)] // test helpers

use std::path::Path;

use engram_config::Config;
use engram_store::DatabaseRecord;

use crate::{App, CreateDatabase, KeySpec, Principal};

/// A configuration over `dir` with the model `make setup` fetched.
pub(crate) fn config_with_model(dir: &Path) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        embedding: engram_config::EmbeddingConfig {
            cache_dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache"),
            ..Default::default()
        },
        ..Config::default()
    }
}

/// A key of organization `acme` and its new database `docs`.
pub(crate) async fn acme_docs(app: &App) -> (Principal, DatabaseRecord) {
    let spec = KeySpec {
        org: "acme".into(),
        ..Default::default()
    };
    let key = app.create_key(spec).await.unwrap();
    let who = app.authenticate(&key.token).await.unwrap();
    let request = CreateDatabase {
        name: "docs".into(),
        ..Default::default()
    };
    let db = app.create_database(&who, request).await.unwrap();
    (who, db)
}
