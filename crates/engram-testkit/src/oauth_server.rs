//! A real OAuth 2.0 authorization server for tests: npm's oidc-provider (OpenID certified), run
//! by `scripts/oauth-server/server.mjs` from the cache `make setup-test` fills
//! (`.cache/oauth-server` at the workspace root, or under `ENGRAM_CACHE_DIR`). Without Node.js or
//! the package, starting it fails saying what to run: the tests that need it are never skipped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How the one client of the server is registered.
#[derive(Debug, Clone)]
pub struct OAuthServerOptions {
    pub client_id: String,
    pub client_secret: String,
    pub redirect_uri: String,
    /// `client_secret_basic` or `client_secret_post`.
    pub auth_method: String,
    /// Lifetime of access tokens, seconds.
    pub access_ttl: u64,
}

/// A running oidc-provider, killed when dropped. Its test routes (`/test/authorize`,
/// `/test/revoke`, `/test/fail`) are described in `server.mjs`.
pub struct OAuthServer {
    child: Child,
    /// `http://127.0.0.1:PORT`; its discovery document is at
    /// `/.well-known/openid-configuration`.
    pub issuer: String,
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cache_dir() -> PathBuf {
    std::env::var_os("ENGRAM_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".cache"))
}

impl OAuthServer {
    /// Starts a server on a free port; panics (saying what to install) when it cannot.
    pub fn start(options: &OAuthServerOptions) -> Self {
        let dir = cache_dir().join("oauth-server");
        let script = dir.join("server.mjs");
        assert!(
            dir.join("node_modules/oidc-provider/package.json")
                .is_file()
                && script.is_file(),
            "oidc-provider is not installed under {}: run `make setup-test` (scripts/setup.sh \
             with --test installs it from scripts/oauth-server's lockfile; it needs Node.js 20.19 \
             or later and npm)",
            dir.display()
        );
        let source = workspace().join("scripts/oauth-server");
        for file in ["server.mjs", "package-lock.json"] {
            assert!(
                std::fs::read(dir.join(file)).ok() == std::fs::read(source.join(file)).ok(),
                "{} differs from scripts/oauth-server/{file}: run `make setup-test` again",
                dir.join(file).display()
            );
        }
        let mut child = Command::new("node")
            .arg(&script)
            .args(["--port", "0", "--client-id", &options.client_id])
            .args(["--client-secret", &options.client_secret])
            .args(["--redirect-uri", &options.redirect_uri])
            .args(["--auth-method", &options.auth_method])
            .args(["--access-ttl", &options.access_ttl.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "Node.js (`node` on PATH) cannot be run ({e}): the OAuth tests need Node.js \
                     20.19 or later, which `make setup-test` expects"
                )
            });
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // Its warnings about Node's version and the in-memory store are expected.
                if !line.starts_with("oidc-provider WARNING") {
                    eprintln!("oauth-server: {line}");
                }
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().and_then(Result::ok).unwrap_or_default();
            let _ = tx.send(first.trim().to_owned());
            // Read on to its end: the server logs notices to stdout, and a closed pipe would
            // kill it (EPIPE).
            for line in lines.map_while(Result::ok) {
                eprintln!("oauth-server: {line}");
            }
        });
        let issuer = rx
            .recv_timeout(Duration::from_secs(60))
            .ok()
            .filter(|l| l.starts_with("http://"))
            .expect("the OAuth server prints its issuer");
        Self { child, issuer }
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
