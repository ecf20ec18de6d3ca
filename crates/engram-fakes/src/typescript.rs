//! What the fakes' conformance checks share on the TypeScript side: a published client's tables
//! read by a Node.js script, and a file of typed constants (one block of lines per checked
//! exchange) compiled by `tsc --strict` (the compiler `make setup-test` puts beside Notion's
//! client), each diagnostic handed back to the exchange whose block it concerns.
#![allow(clippy::unwrap_used)] // test code

use std::path::PathBuf;

use serde_json::Value;

/// The TypeScript compiler `make setup-test` installs.
pub fn tsc() -> PathBuf {
    crate::cache_dir().join("notion-api/typescript/bin/tsc")
}

/// The JSON a Node.js `script` (run with `node -e`, `args` after it) writes; `checks` names the
/// checks that need Node.js (`Notion`, `Atlassian`).
pub fn node_json(script: &str, args: &[PathBuf], checks: &str) -> Value {
    let out = std::process::Command::new("node")
        .args(["-e", script])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("node runs (Node.js is needed by the {checks} checks): {e:?}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A TypeScript file of checks: its head (imports and types) and a block of lines per checked
/// item (an exchange's index).
pub struct Checks {
    /// Ahead of every block; it may grow while blocks are added (imports a block needs).
    pub head: String,
    body: String,
    /// The item each line of the body checks.
    owners: Vec<usize>,
}

impl Checks {
    pub fn new(head: String) -> Self {
        Self {
            head,
            body: String::new(),
            owners: Vec::new(),
        }
    }

    /// Adds the block (whole lines) that checks item `item`.
    pub fn push(&mut self, item: usize, block: &str) {
        self.owners
            .extend(std::iter::repeat_n(item, block.lines().count()));
        self.body.push_str(block);
    }

    /// Writes the file as `file_name` in a temporary directory and compiles it with
    /// `tsc --noEmit --strict` (ES2020, CommonJS) and `options`; each error goes to `problems` of
    /// the item its line checks, with its explanation lines after ` / `. Panics on an error
    /// outside every block, and when tsc fails without a word.
    pub fn compile(self, file_name: &str, options: &[&str], problems: &mut [Vec<String>]) {
        let offset = self.head.lines().count();
        let ts = format!("{}{}", self.head, self.body);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(file_name);
        std::fs::write(&file, &ts).unwrap();
        let out = std::process::Command::new("node")
            .arg(tsc())
            .args([
                "--noEmit",
                "--strict",
                "--skipLibCheck",
                "--target",
                "es2020",
                "--lib",
                "es2020",
                "--module",
                "commonjs",
            ])
            .args(options)
            .args(["--pretty", "false"])
            .arg(&file)
            .output()
            .expect("node runs tsc");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut last: Option<usize> = None;
        for line in said.lines() {
            // `…/FILE.ts(LINE,COL): error TS…: message`, its explanation on indented lines.
            if line.starts_with(' ') {
                match last {
                    Some(i) => {
                        if let Some(problem) = problems[i].last_mut() {
                            problem.push_str(&format!(" / {}", line.trim()));
                        }
                    }
                    None => panic!("tsc: {line}\n{said}"),
                }
                continue;
            }
            let at = line
                .split_once(".ts(")
                .and_then(|(_, rest)| rest.split_once(','))
                .and_then(|(n, _)| n.parse::<usize>().ok());
            match at
                .and_then(|n| n.checked_sub(offset + 1))
                .and_then(|n| self.owners.get(n))
                .copied()
            {
                Some(i) if i < problems.len() => {
                    problems[i].push(line.to_owned());
                    last = Some(i);
                }
                Some(_) | None => panic!("tsc: {line}\n{ts}"),
            }
        }
        assert!(
            out.status.success() || !said.is_empty(),
            "tsc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
