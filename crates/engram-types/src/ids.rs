//! Identifier newtypes. Names given by users are validated once, here, when they are built.

use serde::{Deserialize, Serialize};

use crate::limits;

/// Why a user-given name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most {0} characters")]
    TooLong(usize),
    #[error(
        "may contain only letters, digits, '-' and '_', and must start with a letter or digit"
    )]
    BadCharacters,
}

fn check_name(value: &str, max: usize) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty);
    }
    if value.chars().count() > max {
        return Err(NameError::TooLong(max));
    }
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(NameError::BadCharacters);
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps a user-given name.
            pub fn parse(value: impl Into<String>) -> Result<Self, NameError> {
                let value = value.into();
                check_name(&value, $max)?;
                Ok(Self(value))
            }

            /// Wraps a value read back from storage, where it was validated on the way in.
            pub fn from_trusted(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// An organization: the owner of API keys and databases. Nothing crosses organizations.
    OrgId,
    limits::ORG_ID_MAX
);
name_type!(
    /// A database (legacy: tenant) name, unique within its organization.
    DatabaseName,
    limits::DATABASE_NAME_MAX
);
name_type!(
    /// A collection (legacy: sub-tenant) name, unique within its database.
    CollectionName,
    limits::COLLECTION_NAME_MAX
);

/// The stable internal identifier of a database (`db_<hex>`). It differs from the name, and a
/// database re-created under the same name gets a new one, so nothing of the old one is reachable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DatabaseId(String);

impl DatabaseId {
    pub fn from_trusted(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DatabaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The public, non-secret part of an API key (`prefix` in `prefix.secret`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiKeyPrefix(String);

impl ApiKeyPrefix {
    pub fn from_trusted(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ApiKeyPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_validated() {
        assert!(DatabaseName::parse("acme-prod_1").is_ok());
        assert_eq!(DatabaseName::parse(""), Err(NameError::Empty));
        assert_eq!(
            DatabaseName::parse("a".repeat(26)),
            Err(NameError::TooLong(25))
        );
        assert_eq!(
            DatabaseName::parse("has space"),
            Err(NameError::BadCharacters)
        );
        assert_eq!(DatabaseName::parse("_lead"), Err(NameError::BadCharacters));
        assert_eq!(DatabaseName::parse("ünï"), Err(NameError::BadCharacters));
    }
}
