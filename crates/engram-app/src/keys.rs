//! API keys: `prefix.secret`. The prefix is public and identifies the key; the secret is shown
//! once at creation and stored only as a SHA-256 hash (it is 256 random bits, so a slow hash
//! adds nothing), compared in constant time.

use engram_store::ApiKeyRecord;
use engram_types::limits::{KEY_DATABASES_MAX, KEY_EXPIRES_IN_MAX_SECS, KEY_NAME_MAX_CHARS};
use engram_types::{ApiKeyPrefix, DatabaseName, OrgId, Scope, Scopes};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::time::Duration;
use subtle::ConstantTimeEq;

use crate::{App, AppError, AppResult, Principal};

/// What a new key may do.
#[derive(Debug, Clone, Default)]
pub struct KeySpec {
    pub org: String,
    pub name: String,
    /// Databases the key is restricted to; empty for every database of the organization.
    pub databases: Vec<String>,
    /// `read`, `write`, `admin` (each bringing the ones before it); empty for all three.
    pub scopes: Vec<String>,
    pub expires_in_secs: Option<u64>,
}

/// A key just created: the only time its secret exists outside the caller's hands.
#[derive(Debug, Clone)]
pub struct CreatedKey {
    pub record: ApiKeyRecord,
    /// The full `prefix.secret` to hand to the user.
    pub token: String,
}

const PREFIX_TAG: &str = "egk_";

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn hash_secret(prefix: &str, secret: &str) -> Vec<u8> {
    let mut hasher = Sha256::new();
    hasher.update(prefix.as_bytes());
    hasher.update(b".");
    hasher.update(secret.as_bytes());
    hasher.finalize().to_vec()
}

/// Splits `prefix.secret`; `None` when the token does not have that form.
pub(crate) fn split_token(token: &str) -> Option<(&str, &str)> {
    let (prefix, secret) = token.split_once('.')?;
    let well_formed = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    (well_formed(prefix) && well_formed(secret)).then_some((prefix, secret))
}

/// Constant-time comparison of a presented secret with a stored hash.
pub(crate) fn secret_matches(prefix: &str, secret: &str, stored: &[u8]) -> bool {
    hash_secret(prefix, secret).ct_eq(stored).into()
}

impl App {
    /// Creates a key and returns its token; the secret is not kept.
    pub async fn create_key(&self, spec: KeySpec) -> AppResult<CreatedKey> {
        let org = OrgId::parse(spec.org).map_err(|reason| AppError::InvalidName {
            field: "org",
            reason,
        })?;
        if spec.name.chars().count() > KEY_NAME_MAX_CHARS {
            return Err(AppError::InvalidParameters(format!(
                "`name` is longer than {KEY_NAME_MAX_CHARS} characters"
            )));
        }
        if spec.databases.len() > KEY_DATABASES_MAX {
            return Err(AppError::InvalidParameters(format!(
                "`databases` names more than {KEY_DATABASES_MAX} databases"
            )));
        }
        if spec
            .expires_in_secs
            .is_some_and(|secs| secs == 0 || secs > KEY_EXPIRES_IN_MAX_SECS)
        {
            return Err(AppError::InvalidParameters(format!(
                "`expires_in` must be between 1 and {KEY_EXPIRES_IN_MAX_SECS} seconds"
            )));
        }
        let scopes = parse_scopes(&spec.scopes)?;
        let mut databases = spec
            .databases
            .into_iter()
            .map(|d| {
                DatabaseName::parse(d).map_err(|reason| AppError::InvalidName {
                    field: "database",
                    reason,
                })
            })
            .collect::<AppResult<Vec<_>>>()?;
        databases.sort();
        databases.dedup();
        let now = self.now();
        let expires_at = spec
            .expires_in_secs
            .map(|secs| now.after(Duration::from_secs(secs)));
        let prefix = format!("{PREFIX_TAG}{}", random_hex(8));
        let secret = random_hex(32);
        let record = ApiKeyRecord {
            prefix: ApiKeyPrefix::from_trusted(&prefix),
            secret_hash: hash_secret(&prefix, &secret),
            org,
            name: spec.name,
            databases,
            scopes,
            created_at: now,
            expires_at,
            revoked_at: None,
        };
        self.store().insert_key(&record).await?;
        Ok(CreatedKey {
            record,
            token: format!("{prefix}.{secret}"),
        })
    }

    /// Every key (never their secrets), optionally of one organization.
    pub async fn list_keys(&self, org: Option<&str>) -> AppResult<Vec<ApiKeyRecord>> {
        let org = org.map(OrgId::from_trusted);
        Ok(self.store().list_keys(org.as_ref()).await?)
    }

    /// Revokes a key at once; requests with it fail with 401 from then on.
    pub async fn revoke_key(&self, prefix: &str) -> AppResult<()> {
        let prefix = ApiKeyPrefix::from_trusted(prefix);
        // Revoking an already revoked key is not an error; an unknown prefix is.
        let revoked_now = self.store().revoke_key(&prefix, self.now()).await?;
        if revoked_now || self.store().find_key(&prefix).await?.is_some() {
            Ok(())
        } else {
            Err(AppError::KeyNotFound(prefix.to_string()))
        }
    }
}

fn parse_scopes(names: &[String]) -> AppResult<Scopes> {
    Scopes::from_names(names).map_err(|name| {
        AppError::InvalidParameters(format!(
            "unknown scope `{name}`; the scopes are read, write and admin"
        ))
    })
}

/// Whether `key` gives no more than `who` holds: its scopes within the caller's, and, for a
/// caller restricted to some databases, restricted to some of those.
fn within(who: &Principal, scopes: Scopes, databases: &[DatabaseName]) -> bool {
    let databases_within = match &who.databases {
        None => true,
        Some(allowed) => !databases.is_empty() && databases.iter().all(|d| allowed.contains(d)),
    };
    who.scopes.covers(scopes) && databases_within
}

impl App {
    /// `POST /keys`: a key of the caller's organization, never more than the caller holds
    /// (403 otherwise: a key restricted to some databases makes keys restricted to some of
    /// them). Needs `admin`.
    pub async fn create_key_as(&self, who: &Principal, spec: KeySpec) -> AppResult<CreatedKey> {
        who.require(Scope::Admin)?;
        let asked = parse_scopes(&spec.scopes)?;
        let databases: Vec<DatabaseName> = spec
            .databases
            .iter()
            .filter_map(|d| DatabaseName::parse(d).ok())
            .collect();
        if !within(who, asked, &databases) {
            return Err(AppError::Forbidden(
                "a key can make keys with at most its own scopes and databases".into(),
            ));
        }
        if let Some(own) = who.expires_at {
            let until = spec
                .expires_in_secs
                .map(|secs| self.now().after(Duration::from_secs(secs)));
            if until.is_none_or(|until| until > own) {
                return Err(AppError::Forbidden(
                    "this API key expires: the keys it makes must expire no later (expires_in)"
                        .into(),
                ));
            }
        }
        let created = self
            .create_key(KeySpec {
                org: who.org.to_string(),
                ..spec
            })
            .await?;
        tracing::info!(org = %who.org, key = %created.record.prefix, by = %who.key, "api key created");
        Ok(created)
    }

    /// `GET /keys`: the organization's keys that the caller could have made (all of them for
    /// an unrestricted key), oldest first, never their secrets. Needs `admin`.
    pub async fn keys_of(&self, who: &Principal) -> AppResult<Vec<ApiKeyRecord>> {
        who.require(Scope::Admin)?;
        let all = self.store().list_keys(Some(&who.org)).await?;
        Ok(all
            .into_iter()
            .filter(|k| within(who, k.scopes, &k.databases))
            .collect())
    }

    /// `DELETE /keys/{prefix}`: revokes one of [`App::keys_of`]; another organization's key,
    /// or one wider than the caller, is 404 like an unknown prefix. Needs `admin`.
    pub async fn revoke_key_as(&self, who: &Principal, prefix: &str) -> AppResult<ApiKeyRecord> {
        who.require(Scope::Admin)?;
        let prefix = ApiKeyPrefix::from_trusted(prefix);
        let visible = |k: &ApiKeyRecord| k.org == who.org && within(who, k.scopes, &k.databases);
        match self.store().find_key(&prefix).await? {
            Some(key) if visible(&key) => {
                self.store().revoke_key(&prefix, self.now()).await?;
                tracing::info!(org = %who.org, key = %prefix, by = %who.key, "api key revoked");
                Ok(self.store().find_key(&prefix).await?.unwrap_or(key))
            }
            _ => Err(AppError::KeyNotFound(prefix.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_only_in_the_documented_form() {
        assert_eq!(split_token("egk_ab.cd"), Some(("egk_ab", "cd")));
        for bad in ["", ".", "a.", ".b", "a.b.c", "a b.c", "a.b c", "ab"] {
            assert_eq!(split_token(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn secrets_match_only_their_own_hash() {
        let stored = hash_secret("p", "s3cret");
        assert!(secret_matches("p", "s3cret", &stored));
        assert!(!secret_matches("p", "s3cres", &stored));
        assert!(
            !secret_matches("q", "s3cret", &stored),
            "the prefix is bound into the hash"
        );
    }
}
