//! `--record`: the bench and eval commands write their own history. Every report line they
//! print (through `report!`) is also kept, and with `--record` the report is inserted into
//! BENCHMARKS.md as the newest entry, with the date, the command, the commit and the machine,
//! so a figure in the history is never retyped by hand.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context as _;

/// Where the history's entries start, newest first.
pub(crate) const MARKER: &str =
    "<!-- records: newest first; engram --record inserts below this line -->";

/// The report lines printed so far.
static REPORT: Mutex<String> = Mutex::new(String::new());

/// Prints a report line and keeps it for `--record`.
pub(crate) fn line(text: &str) {
    println!("{text}");
    let mut report = REPORT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    report.push_str(text);
    report.push('\n');
}

/// `--record` and where to.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct RecordArgs {
    /// Insert this run's report into the benchmark history (BENCHMARKS.md) as its newest entry,
    /// with the date, the command, the commit and the machine.
    #[arg(long, global = true)]
    record: bool,
    /// The history file `--record` writes.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "BENCHMARKS.md",
        global = true
    )]
    record_to: PathBuf,
}

impl RecordArgs {
    /// After a command succeeded: with `--record`, its report goes into the history as `what`.
    pub(crate) fn finish(&self, what: &str) -> anyhow::Result<()> {
        if !self.record {
            return Ok(());
        }
        let report = std::mem::take(&mut *REPORT.lock().unwrap_or_else(|p| p.into_inner()));
        let command = std::env::args()
            .map(|arg| {
                if arg.contains(char::is_whitespace) {
                    format!("'{arg}'")
                } else {
                    arg
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        let entry = Entry {
            date: today(),
            what: what.to_owned(),
            commit: commit(),
            machine: machine(),
            command,
            report,
        };
        let history = match std::fs::read_to_string(&self.record_to) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(e).with_context(|| format!("reading {}", self.record_to.display()))
            }
        };
        write_atomically(&self.record_to, &insert(&history, &entry.render()))?;
        eprintln!("recorded in {}", self.record_to.display());
        Ok(())
    }
}

/// One entry of the history.
struct Entry {
    date: String,
    what: String,
    commit: String,
    machine: String,
    command: String,
    report: String,
}

impl Entry {
    fn render(&self) -> String {
        format!(
            "## {} · {} · {}\n\nMachine: {}.\n\n```sh\n{}\n```\n\n```text\n{}\n```\n",
            self.date,
            self.what,
            self.commit,
            self.machine,
            self.command,
            self.report.trim_end()
        )
    }
}

/// `history` with `entry` first under the marker (the marker and the entry are appended when
/// the history has no marker yet).
fn insert(history: &str, entry: &str) -> String {
    match history.find(MARKER) {
        Some(at) => {
            let after = at + MARKER.len();
            let rest = history[after..].trim_start_matches('\n');
            format!("{}\n\n{entry}\n{rest}", &history[..after])
        }
        None if history.trim().is_empty() => {
            format!("# Benchmarks\n\n{MARKER}\n\n{entry}")
        }
        None => format!("{}\n\n{MARKER}\n\n{entry}", history.trim_end()),
    }
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let staged = path.with_extension("md.recording");
    std::fs::write(&staged, text).with_context(|| format!("writing {}", staged.display()))?;
    std::fs::rename(&staged, path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

fn today() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

/// The commit the binary runs from, as git names it where it runs (`+changes` when the work
/// tree differs from it); `unknown` outside a checkout.
fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short=7", "HEAD"]) {
        None => "unknown".into(),
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{head}+changes"),
            _ => head,
        },
    }
}

/// Cores and processor, as Linux tells them.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZeroUsize::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    format!("{cores} cores, {model}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_goes_first_under_the_marker_and_keeps_the_rest() {
        let history = format!("# Benchmarks\n\nIntro.\n\n{MARKER}\n\n## older\n\ntext\n");
        let once = insert(&history, "## newer\n\nfigures\n");
        assert_eq!(
            once,
            format!(
                "# Benchmarks\n\nIntro.\n\n{MARKER}\n\n## newer\n\nfigures\n\n## older\n\ntext\n"
            )
        );
        let twice = insert(&once, "## newest\n");
        let order: Vec<&str> = twice.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(order, ["## newest", "## newer", "## older"]);
    }

    #[test]
    fn a_history_without_a_marker_gets_one() {
        assert_eq!(
            insert("", "## first\n"),
            format!("# Benchmarks\n\n{MARKER}\n\n## first\n")
        );
        assert_eq!(
            insert("# Notes\n", "## first\n"),
            format!("# Notes\n\n{MARKER}\n\n## first\n")
        );
    }

    #[test]
    fn an_entry_names_its_date_commit_machine_and_command() {
        let entry = Entry {
            date: "2026-11-28".into(),
            what: "eval beir".into(),
            commit: "abc1234".into(),
            machine: "2 cores, x".into(),
            command: "engram eval beir dir --record".into(),
            report: "nDCG@10 0.7\n".into(),
        }
        .render();
        assert!(entry.starts_with("## 2026-11-28 · eval beir · abc1234\n"));
        assert!(entry.contains("```sh\nengram eval beir dir --record\n```"));
        assert!(entry.contains("```text\nnDCG@10 0.7\n```"));
    }
}
