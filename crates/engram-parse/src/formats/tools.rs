//! Proven command-line tools run as subprocesses (Poppler's `pdftotext` and `pdftoppm`,
//! MuPDF's `mutool`, Tesseract): a hostile file can crash or stall only the child, which is
//! killed at its time-out, and whose output is capped. Paths come from `PATH` or `ENGRAM_<TOOL>` (for example
//! `ENGRAM_TESSERACT=/opt/bin/tesseract`).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Interrupt, ParseError};

/// A tool and the Debian package that provides it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tool {
    pub name: &'static str,
    pub package: &'static str,
}

pub(crate) const PDFTOTEXT: Tool = Tool {
    name: "pdftotext",
    package: "poppler-utils",
};
pub(crate) const PDFTOPPM: Tool = Tool {
    name: "pdftoppm",
    package: "poppler-utils",
};
/// MuPDF's tool, for right-to-left PDF pages (optional: Poppler reads them without it).
pub(crate) const MUTOOL: Tool = Tool {
    name: "mutool",
    package: "mupdf-tools",
};
pub(crate) const TESSERACT: Tool = Tool {
    name: "tesseract",
    package: "tesseract-ocr",
};

/// How long one tool run may take.
pub(crate) const TIME_OUT: Duration = Duration::from_secs(120);

/// What a finished run left: its exit status and standard output.
pub(crate) struct Run {
    pub success: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

fn program(tool: Tool) -> String {
    std::env::var(format!("ENGRAM_{}", tool.name.to_ascii_uppercase()))
        .unwrap_or_else(|_| tool.name.to_owned())
}

/// Runs `tool` with `args` (in `dir`), killing it after `TIME_OUT` or as soon as `interrupt`
/// says to stop; stdout is capped at `max_output` bytes (more is `TooLarge`).
pub(crate) fn run(
    tool: Tool,
    args: &[&std::ffi::OsStr],
    dir: &Path,
    max_output: usize,
    interrupt: &Interrupt,
) -> Result<Run, ParseError> {
    interrupt.check()?;
    let mut child = Command::new(program(tool))
        .args(args)
        .current_dir(dir)
        .env("OMP_THREAD_LIMIT", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ParseError::ToolMissing {
                tool: tool.name,
                package: tool.package,
            },
            _ => ParseError::Corrupt(format!("{} could not start: {e}", tool.name)),
        })?;
    let limit = u64::try_from(max_output)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(stdout) = stdout {
            let _ = stdout.take(limit).read_to_end(&mut out);
        }
        out
    });
    let stderr = child.stderr.take();
    let errors = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(stderr) = stderr {
            let _ = stderr.take(64 * 1024).read_to_end(&mut out);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| ParseError::Corrupt(format!("{}: {e}", tool.name)))?
        {
            break status;
        }
        if let Err(stop) = interrupt.check() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(stop);
        }
        if started.elapsed() > TIME_OUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ParseError::Corrupt(format!(
                "{} did not finish within {} s",
                tool.name,
                TIME_OUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = errors.join().unwrap_or_default();
    if stdout.len() > max_output {
        return Err(ParseError::TooLarge {
            what: "extracted text bytes",
            limit: max_output,
        });
    }
    Ok(Run {
        success: status.success(),
        stdout,
        stderr,
    })
}

/// Tesseract's text of one image file (English), or empty.
pub(crate) fn ocr(
    image: &Path,
    dir: &Path,
    max_output: usize,
    interrupt: &Interrupt,
) -> Result<String, ParseError> {
    let run = run(
        TESSERACT,
        &[
            image.as_os_str(),
            "stdout".as_ref(),
            "-l".as_ref(),
            "eng".as_ref(),
        ],
        dir,
        max_output,
        interrupt,
    )?;
    if !run.success {
        return Err(ParseError::Corrupt(format!(
            "tesseract could not read the image: {}",
            run.stderr.lines().last().unwrap_or_default()
        )));
    }
    Ok(String::from_utf8_lossy(&run.stdout).into_owned())
}
