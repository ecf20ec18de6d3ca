//! What both backends' migration runners share: a numbered, checksummed migration and the rules
//! for applying one (an edited shipped migration, or a store from a newer engram, is refused).

use sha2::{Digest, Sha256};

use crate::{StoreError, StoreResult};

pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

impl Migration {
    pub(crate) fn checksum(&self) -> Vec<u8> {
        Sha256::digest(self.sql.as_bytes()).to_vec()
    }

    /// Refuses an applied migration whose text has changed since.
    pub(crate) fn check_applied(&self, stored: &[u8], store: &str) -> StoreResult<()> {
        if stored == self.checksum() {
            Ok(())
        } else {
            Err(StoreError::Migration(format!(
                "migration {} ({}) differs from the one applied to this {store}",
                self.version, self.name
            )))
        }
    }
}

/// Refuses a store migrated by a newer engram than this one.
pub(crate) fn check_not_newer(
    migrations: &[Migration],
    newest_applied: Option<i64>,
    store: &str,
) -> StoreResult<()> {
    let known = migrations.last().map_or(0, |m| m.version);
    let newest = newest_applied.unwrap_or(0);
    if newest > known {
        return Err(StoreError::Migration(format!(
            "the {store} is at schema version {newest}, newer than this engram knows ({known}); use a newer engram"
        )));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) fn assert_numbered_in_order(migrations: &[Migration]) {
    for (i, m) in migrations.iter().enumerate() {
        assert_eq!(
            m.version,
            i as i64 + 1,
            "migration {} is out of order",
            m.name
        );
    }
}
