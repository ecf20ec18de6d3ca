//! Hostile input through the public API: nothing panics, nothing hangs, limits hold.

use std::time::{Duration, Instant};

use engram_parse::{detect, extract, Format, Limits, ParseError};

/// Generous: these are debug builds on a shared 2-core machine; a quadratic path takes hours.
const BUDGET: Duration = Duration::from_secs(60);

fn run(bytes: &[u8], name: &str) -> (Result<Format, String>, Option<Result<usize, ParseError>>) {
    let start = Instant::now();
    let format = detect(bytes, name, None).map_err(|e| e.to_string());
    let extracted = format
        .as_ref()
        .ok()
        .map(|&f| extract(bytes, f, &Limits::default()).map(|d| d.blocks.len()));
    assert!(start.elapsed() < BUDGET, "{name}: {:?}", start.elapsed());
    (format, extracted)
}

#[test]
fn ten_megabyte_single_line_in_every_text_format() {
    let line = "word ".repeat(2 * 1024 * 1024);
    for name in ["a.txt", "a.md", "a.csv", "a.tsv", "a.html", "a.json"] {
        let (format, extracted) = run(line.as_bytes(), name);
        assert!(format.is_ok(), "{name}: {format:?}");
        assert!(
            matches!(extracted, Some(Ok(n)) if n >= 1),
            "{name}: {extracted:?}"
        );
    }
    let commas = ",x".repeat(5 * 1024 * 1024);
    let (_, extracted) = run(commas.as_bytes(), "wide.csv");
    assert!(matches!(extracted, Some(Ok(1))), "{extracted:?}");
    let json = format!("{{\"text\": \"{}\"}}", "a".repeat(10 * 1024 * 1024));
    assert!(matches!(
        run(json.as_bytes(), "big.json"),
        (Ok(Format::Json), Some(Ok(1)))
    ));
}

#[test]
fn deeply_nested_json_is_text_to_detect_and_corrupt_to_extract() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(
        detect(deep.as_bytes(), "deep.json", None),
        Ok(Format::PlainText)
    );
    assert_eq!(detect(deep.as_bytes(), "deep", None), Ok(Format::PlainText));
    assert!(matches!(
        extract(deep.as_bytes(), Format::Json, &Limits::default()),
        Err(ParseError::Corrupt(_))
    ));
    let objects = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    assert!(matches!(
        extract(objects.as_bytes(), Format::Json, &Limits::default()),
        Err(ParseError::Corrupt(_))
    ));
    // As plain text it is one paragraph, and no stack is at risk.
    assert!(matches!(run(deep.as_bytes(), "deep.json").1, Some(Ok(1))));
}

#[test]
fn nul_bytes_and_invalid_utf16_are_refused_at_detect() {
    let mut bytes = b"looks like text".repeat(1000);
    bytes[500] = 0;
    assert_eq!(
        detect(&bytes, "a.txt", None).unwrap_err().to_string(),
        "binary data (NUL bytes)"
    );
    // Not UTF-8, but a fine legacy encoding (Windows-1252 reads it as "Ã("): text.
    assert!(detect(b"valid then \xC3\x28 invalid", "a.md", None).is_ok());
    assert!(detect(&[0xFE, 0xFF, 0xD8, 0x00], "a.txt", None).is_err());
}

#[test]
fn deep_markup_is_linear() {
    for (unit, name) in [
        ("<div>", "a.html"),
        ("<ul><li>", "a.html"),
        ("<table><tr><td>", "a.html"),
        ("<h1>", "a.html"),
        ("> ", "a.md"),
        ("- ", "a.md"),
        ("[", "a.md"),
    ] {
        let text = format!("{}deep text", unit.repeat(100_000));
        let (format, extracted) = run(text.as_bytes(), name);
        assert!(format.is_ok() && extracted.is_some(), "{unit}");
    }
}

#[test]
fn limits_turn_expansion_into_too_large() {
    let limits = Limits {
        max_blocks: 10,
        ..Limits::default()
    };
    let text = "paragraph\n\n".repeat(100);
    assert_eq!(
        extract(text.as_bytes(), Format::PlainText, &limits),
        Err(ParseError::TooLarge {
            what: "blocks",
            limit: 10
        })
    );
    // A wide header repeated over many blocks.
    let limits = Limits {
        max_text_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let mut csv = format!(
        "{}\n",
        (0..2000)
            .map(|i| format!("column {i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    csv.push_str(&"1\n".repeat(5000));
    assert!(matches!(
        extract(csv.as_bytes(), Format::Csv, &limits),
        Err(ParseError::TooLarge {
            what: "extracted text bytes",
            ..
        })
    ));
    let limits = Limits {
        max_bytes: 10,
        ..Limits::default()
    };
    assert!(matches!(
        extract(&[b'a'; 11], Format::PlainText, &limits),
        Err(ParseError::TooLarge {
            what: "file bytes",
            ..
        })
    ));
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A small deterministic fuzz over every format: random bytes, random text, truncated
    // signatures.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b"<>/=\"' \n\t#|-*`[]{}:,.\\&;!abcPK%PDF";
    for round in 0..2000 {
        let len = (next() % 300) as usize;
        let bytes: Vec<u8> = if round % 2 == 0 {
            (0..len).map(|_| next() as u8).collect()
        } else {
            (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect()
        };
        let _ = detect(&bytes, "x", None);
        for &format in Format::ALL {
            let _ = extract(&bytes, format, &Limits::default());
        }
    }
    for magic in [
        &b"PK\x03\x04"[..],
        b"PK\x03\x04\x14\0\0\0\0\0\0\0\0\0\0\0\0\0\xFF\xFF\xFF\xFF\0\0\0\0\0\0\0\0mimetype",
        b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1",
        b"RIFF",
        b"\0\0\0\0ftyp",
        b"%PDF",
    ] {
        for cut in 0..=magic.len() {
            let _ = detect(&magic[..cut], "x.docx", None);
        }
    }
}
