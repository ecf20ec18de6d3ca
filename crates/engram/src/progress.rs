//! Progress of long commands (eval, bench): a bar with rate and ETA when stderr is a terminal,
//! else a plain line every few seconds (and one at the end), so logs of a CI run show progress
//! too. stdout keeps the results.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a plain (non-terminal) progress line is written.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    total: u64,
    position: u64,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    /// Progress of `label` towards `total` units.
    pub(crate) fn new(label: &str, total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} {per_sec} ETA {eta} ({elapsed})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_message(label.to_owned());
            bar
        });
        let now = Instant::now();
        Self {
            bar,
            label: label.to_owned(),
            total,
            position: 0,
            started: now,
            last_line: now,
        }
    }

    /// Sets how many units are done.
    pub(crate) fn set(&mut self, position: u64) {
        self.position = position.min(self.total);
        match &self.bar {
            Some(bar) => bar.set_position(self.position),
            None if self.last_line.elapsed() >= PLAIN_EVERY => {
                self.last_line = Instant::now();
                eprintln!("{}", self.line());
            }
            None => {}
        }
    }

    /// Adds `n` done units.
    pub(crate) fn inc(&mut self, n: u64) {
        self.set(self.position + n);
    }

    fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = self.position as f64 / secs.max(1e-9);
        let left = self.total.saturating_sub(self.position) as f64;
        let eta = if rate > 0.0 { left / rate } else { f64::NAN };
        format!(
            "{}: {}/{} ({rate:.1}/s, {secs:.0} s, ETA {eta:.0} s)",
            self.label, self.position, self.total
        )
    }

    /// Ends the progress (a last plain line off a terminal).
    pub(crate) fn finish(self) {
        match &self.bar {
            Some(bar) => bar.finish(),
            None => eprintln!("{}", self.line()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_say_position_rate_and_eta() {
        let mut progress = Progress::new("indexed", 10);
        progress.bar = None;
        progress.set(20);
        assert_eq!(progress.position, 10, "never past the total");
        let line = progress.line();
        assert!(line.starts_with("indexed: 10/10 ("), "{line}");
        assert!(line.contains("/s,") && line.contains("ETA 0 s"), "{line}");
    }
}
