//! Prints what engram makes of files: `cargo run -p engram-parse --example dump -- FILE… [--json]`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let mut status = ExitCode::SUCCESS;
    for path in args.iter().filter(|a| *a != "--json") {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("{path}: {e}");
                status = ExitCode::FAILURE;
                continue;
            }
        };
        let format = match engram_parse::detect(&bytes, path, None) {
            Ok(format) => format,
            Err(unsupported) => {
                println!("{path}: E1002 unsupported: {unsupported}");
                continue;
            }
        };
        match engram_parse::extract(&bytes, format, &engram_parse::Limits::default()) {
            Ok(doc) if json => {
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default())
            }
            Ok(doc) => {
                println!("{path}: {format}, {} blocks", doc.blocks.len());
                for block in &doc.blocks {
                    let layout = serde_json::to_string(&block.layout).unwrap_or_default();
                    println!("--- {:?} {layout}\n{}", block.kind, block.text);
                }
            }
            Err(e) => println!("{path}: {} {e}", engram_parse::error_code(&e)),
        }
    }
    status
}
