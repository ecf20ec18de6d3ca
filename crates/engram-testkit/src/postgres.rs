//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary directory, started on a
//! free port with `fsync` off, stopped (immediately) and removed when dropped. Needs PostgreSQL
//! 15 with pgvector (`make setup-test` installs both). As root (CI), the server runs as the
//! `postgres` system user, since PostgreSQL refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where PostgreSQL 15's server programs live (Debian's layout).
const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";

/// A running throwaway cluster.
pub struct TempPostgres {
    dir: tempfile::TempDir,
    port: u16,
    /// The server's options, given again on a restart.
    options: String,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a server program, as `postgres` when we are root.
fn run(program: &str, args: &[&str]) -> std::io::Result<std::process::Output> {
    let path = Path::new(BIN_DIR).join(program);
    let mut command = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&path);
        c
    } else {
        Command::new(&path)
    };
    command.args(args).stdin(Stdio::null()).output()
}

impl TempPostgres {
    /// Starts a cluster; panics with what to do when PostgreSQL is not installed. Commits are
    /// asynchronous (`synchronous_commit=off`), fast for tests but not durable across a crash
    /// of the server: see [`TempPostgres::start_durable`].
    pub fn start() -> Self {
        Self::start_with_commits(false)
    }

    /// A cluster whose answered commits survive a crash of the server (`pg_ctl restart -m
    /// immediate`), as a production server's do: for tests that crash it.
    pub fn start_durable() -> Self {
        Self::start_with_commits(true)
    }

    fn start_with_commits(durable: bool) -> Self {
        assert!(
            Path::new(BIN_DIR).join("initdb").exists(),
            "PostgreSQL 15 is not installed: run `make setup-test`"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        if is_root() {
            let owned = Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(owned.success(), "chown postgres {}", dir.path().display());
        }
        let data = dir.path().join("data");
        let data_arg = data.display().to_string();
        let init = run(
            "initdb",
            &[
                "-D",
                &data_arg,
                "-A",
                "trust",
                "-U",
                "engram",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )
        .expect("initdb");
        assert!(init.status.success(), "initdb: {init:?}");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // `fsync=off` loses nothing when only the server crashes (the operating system still
        // holds what it wrote); `synchronous_commit=off` does lose the last commits.
        let commits = if durable {
            "-c synchronous_commit=on"
        } else {
            "-c synchronous_commit=off"
        };
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off {commits} -c full_page_writes=off",
            dir.path().display()
        );
        let log = dir.path().join("postgres.log").display().to_string();
        let started = run(
            "pg_ctl",
            &["-D", &data_arg, "-o", &options, "-l", &log, "-w", "start"],
        )
        .expect("pg_ctl start");
        assert!(
            started.status.success(),
            "pg_ctl start: {started:?}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Self { dir, port, options }
    }

    /// Restarts the server with `pg_ctl restart -m mode` (`fast`: clients are disconnected and
    /// transactions rolled back; `immediate`: as a crash, with recovery at start), waiting until
    /// it accepts connections again.
    pub fn restart(&self, mode: &str) {
        let data = self.dir.path().join("data").display().to_string();
        let log = self.dir.path().join("postgres.log").display().to_string();
        let restarted = run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-m",
                mode,
                "-o",
                &self.options,
                "-l",
                &log,
                "-w",
                "restart",
            ],
        )
        .expect("pg_ctl restart");
        assert!(restarted.status.success(), "pg_ctl restart: {restarted:?}");
    }

    /// A connection URL to the cluster's `postgres` database as the superuser `engram`.
    pub fn url(&self) -> String {
        format!("postgres://engram@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the cluster (its log is `postgres.log` there).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// Runs SQL with `psql` and returns its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        let output = Command::new("psql")
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
                &self.url(),
            ])
            .output()
            .expect("psql");
        assert!(output.status.success(), "psql {sql}: {output:?}");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data").display().to_string();
        let _ = run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throwaway_cluster_has_pgvector_0_8() {
        let pg = TempPostgres::start();
        pg.psql("CREATE EXTENSION vector");
        let version = pg.psql("SELECT extversion FROM pg_extension WHERE extname = 'vector'");
        let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
        assert!(parts >= vec![0, 8, 0], "pgvector {version}");
        let distance = pg.psql("SELECT round(('[1,0]'::vector <=> '[0,1]'::vector)::numeric, 3)");
        assert_eq!(distance, "1.000");
    }
}
