//! Authentication (who is calling), authorization (may they touch this database) and the
//! per-key rate limit, applied to every authenticated request.

use engram_store::DatabaseRecord;
use engram_types::{ApiKeyPrefix, DatabaseName, OrgId, Scope, Scopes};

use crate::keys::{secret_matches, split_token};
use crate::{App, AppError, AppResult};

/// An authenticated caller: the key, its organization and what it may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub key: ApiKeyPrefix,
    pub org: OrgId,
    /// Databases the key is restricted to; `None` for every database of the organization.
    pub databases: Option<Vec<DatabaseName>>,
    /// What the key may do.
    pub scopes: Scopes,
    /// When the key stops working, if ever.
    pub expires_at: Option<engram_types::UnixMs>,
    /// The id of the request acting (its `X-Request-Id`), carried into the work it queues so
    /// that work's log lines name it; empty outside a request.
    pub request_id: String,
}

impl Principal {
    /// 403 unless the key holds `scope`. Every operation of [`App`] that acts for a caller
    /// calls this (directly or through [`App::authorize_database`]) before it reads or
    /// changes anything, so the HTTP routes of both generations and MCP's tools get the same
    /// answer.
    pub fn require(&self, scope: Scope) -> AppResult<()> {
        if self.scopes.grants(scope) {
            return Ok(());
        }
        Err(AppError::Forbidden(format!(
            "this API key has scopes [{}]; this operation needs `{scope}`",
            self.scopes
        )))
    }

    /// Whether the key may use the database of that name (it may still not exist).
    pub fn may_use(&self, name: &DatabaseName) -> bool {
        self.databases
            .as_ref()
            .is_none_or(|allowed| allowed.contains(name))
    }
}

const MISSING: &str = "missing or invalid API key";
const EXPIRED: &str = "API key expired";
const REVOKED: &str = "API key revoked";

impl App {
    /// Authenticates the token of an `Authorization: Bearer <token>` header, then takes one
    /// request from the key's rate limit.
    pub async fn authenticate(&self, token: &str) -> AppResult<Principal> {
        let Some((prefix, secret)) = split_token(token) else {
            return Err(AppError::Unauthorized(MISSING));
        };
        let record = self
            .store()
            .find_key(&ApiKeyPrefix::from_trusted(prefix))
            .await?;
        let Some(record) = record else {
            // Same work as a known key, so timing does not tell which prefixes exist.
            let _ = secret_matches(prefix, secret, &[0u8; 32]);
            return Err(AppError::Unauthorized(MISSING));
        };
        if !secret_matches(prefix, secret, &record.secret_hash) {
            return Err(AppError::Unauthorized(MISSING));
        }
        if record.revoked_at.is_some() {
            return Err(AppError::Unauthorized(REVOKED));
        }
        if record.expires_at.is_some_and(|at| at <= self.now()) {
            return Err(AppError::Unauthorized(EXPIRED));
        }
        self.inner.limiter.check(&record.prefix, self.now()).await?;
        Ok(Principal {
            key: record.prefix,
            org: record.org,
            databases: (!record.databases.is_empty()).then_some(record.databases),
            scopes: record.scopes,
            expires_at: record.expires_at,
            request_id: String::new(),
        })
    }

    /// The live database `name` as the caller may see it for an operation that needs `scope`:
    /// 403 when the key lacks the scope or is restricted to other databases, 404 when the
    /// organization has no such database. Names are per organization, so another
    /// organization's database of that name is simply absent: the answer gives no key a way to
    /// learn which names other tenants use.
    pub(crate) async fn authorize_database(
        &self,
        who: &Principal,
        name: &DatabaseName,
        scope: Scope,
    ) -> AppResult<DatabaseRecord> {
        who.require(scope)?;
        if !who.may_use(name) {
            return Err(AppError::Forbidden(format!(
                "this API key may not use database `{name}`"
            )));
        }
        if let Some(db) = self.store().find_database(&who.org, name).await? {
            return Ok(db);
        }
        Err(AppError::DatabaseNotFound(name.to_string()))
    }
}
