//! What an API key may do. Three scopes, each implying the ones before it: `read` (query, list,
//! status, fetch, chunks: nothing changes), `write` (ingest, edit and delete content, feedback),
//! `admin` (databases, webhooks, connectors, the credential vault, keys). A key made without
//! scopes has all three.

use std::fmt;

/// One scope an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Read,
    Write,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// This scope and every scope it implies.
    fn with_implied(self) -> u8 {
        Self::ALL
            .into_iter()
            .filter(|s| *s <= self)
            .fold(0, |bits, s| bits | s.bit())
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scopes a key holds, closed under implication (`write` brings `read` along).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// Every scope: what a key made without scopes holds.
    pub fn all() -> Self {
        Self(Scope::Admin.with_implied())
    }

    /// The scopes named, with what they imply; empty names give [`Scopes::all`]. An unknown
    /// name is returned as the error.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        if names.is_empty() {
            return Ok(Self::all());
        }
        names.iter().try_fold(Self(0), |held, name| {
            let name = name.as_ref();
            Scope::parse(name)
                .map(|s| Self(held.0 | s.with_implied()))
                .ok_or_else(|| name.to_owned())
        })
    }

    /// Scopes as stored (already closed under implication): empty grants nothing; an unknown
    /// name is returned as the error.
    pub fn from_stored<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        names.iter().try_fold(Self(0), |held, name| {
            let name = name.as_ref();
            Scope::parse(name)
                .map(|s| Self(held.0 | s.with_implied()))
                .ok_or_else(|| name.to_owned())
        })
    }

    pub fn grants(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// Whether every scope of `other` is held here too.
    pub fn covers(self, other: Scopes) -> bool {
        self.0 & other.0 == other.0
    }

    /// The scopes held, in order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.grants(*s))
    }

    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Scope::as_str).collect()
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_bring_what_they_imply_and_none_means_all() {
        let read = Scopes::from_names(&["read"]).unwrap();
        assert_eq!(read.names(), ["read"]);
        let write = Scopes::from_names(&["write"]).unwrap();
        assert_eq!(write.names(), ["read", "write"]);
        assert!(write.covers(read) && !read.covers(write));
        let admin = Scopes::from_names(&["admin", "read"]).unwrap();
        assert_eq!(admin, Scopes::all());
        assert_eq!(Scopes::from_names::<&str>(&[]).unwrap(), Scopes::all());
        assert_eq!(Scopes::from_names(&["read", "owner"]), Err("owner".into()));
        assert!(!read.grants(Scope::Write) && read.grants(Scope::Read));
        let none = Scopes::from_stored::<&str>(&[]).unwrap();
        assert!(
            Scope::ALL.iter().all(|s| !none.grants(*s)),
            "stored empty grants nothing"
        );
    }
}
