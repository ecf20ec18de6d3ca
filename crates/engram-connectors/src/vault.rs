//! Credentials sealed at rest: AES-256-GCM (ring) under a key from the configuration, or one
//! generated once into the data directory, readable by its owner only. Each sealed value is
//! bound to its connector (the connector id is the associated data), so a sealed value copied
//! onto another connector does not open.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::path::Path;

/// The first byte of every sealed value: the format.
const FORMAT: u8 = 1;
/// The file a generated key is kept in, under the data directory.
pub const KEY_FILE: &str = "connector-credentials.key";

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the credentials key must be 64 hexadecimal characters (32 bytes)")]
    BadKey,
    #[error("the credentials key file {0}: {1}")]
    KeyFile(String, std::io::Error),
    #[error("the sealed credentials do not open with this instance's key")]
    Open,
    #[error("no randomness available")]
    Random,
}

/// Seals and opens credentials.
pub struct Sealer {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<key>)")
    }
}

impl Sealer {
    /// The key given (64 hex characters), else the one in `data_dir`, generated when missing.
    pub fn load(configured: Option<&str>, data_dir: &Path) -> Result<Self, SealError> {
        let bytes = match configured.filter(|k| !k.is_empty()) {
            Some(hex) => decode_hex(hex.trim()).ok_or(SealError::BadKey)?,
            None => key_file(&data_dir.join(KEY_FILE))?,
        };
        Self::from_key(&bytes)
    }

    pub fn from_key(bytes: &[u8]) -> Result<Self, SealError> {
        let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| SealError::BadKey)?;
        Ok(Self {
            key: LessSafeKey::new(key),
            random: SystemRandom::new(),
        })
    }

    /// Seals `plain` for the connector `owner`.
    pub fn seal(&self, owner: &str, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(owner.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SealError::Random)?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Opens what [`Sealer::seal`] sealed for `owner`.
    pub fn open(&self, owner: &str, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let (&format, rest) = sealed.split_first().ok_or(SealError::Open)?;
        if format != FORMAT || rest.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(owner.as_bytes()), &mut body)
            .map_err(|_| SealError::Open)?;
        Ok(plain.to_vec())
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// Reads the key file, or writes a new random key there (owner-only) when there is none.
fn key_file(path: &Path) -> Result<Vec<u8>, SealError> {
    let shown = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) if bytes.len() == 32 => return Ok(bytes),
        Ok(_) => return Err(SealError::BadKey),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(SealError::KeyFile(shown, err)),
    }
    let mut key = [0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| SealError::Random)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| SealError::KeyFile(shown.clone(), e))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => {
            std::io::Write::write_all(&mut file, &key)
                .and_then(|()| file.sync_all())
                .map_err(|e| SealError::KeyFile(shown, e))?;
            Ok(key.to_vec())
        }
        // Another process wrote it first: use theirs.
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::read(path).map_err(|e| SealError::KeyFile(shown, e))
        }
        Err(err) => Err(SealError::KeyFile(shown, err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_credentials_open_only_for_their_connector_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = Sealer::load(None, dir.path()).unwrap();
        let sealed = sealer.seal("con_1", b"{\"token\":\"s3cret\"}").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"s3cret"));
        assert_eq!(
            sealer.open("con_1", &sealed).unwrap(),
            b"{\"token\":\"s3cret\"}"
        );
        assert!(
            sealer.open("con_2", &sealed).is_err(),
            "bound to its connector"
        );
        // The generated key is kept, owner-only, and used again.
        let again = Sealer::load(None, dir.path()).unwrap();
        assert!(again.open("con_1", &sealed).is_ok());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let other = Sealer::load(Some(&"ab".repeat(32)), dir.path()).unwrap();
        assert!(other.open("con_1", &sealed).is_err());
        assert!(Sealer::load(Some("short"), dir.path()).is_err());
    }
}
