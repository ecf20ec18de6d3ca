//! The int8 ONNX model against the f32 reference (`tests/fixtures/golden.json`, written by
//! `scripts/golden_embeddings.py`), and the properties callers rely on: unit vectors, input
//! order, vectors that do not depend on the other texts of a call, paraphrases closer than
//! unrelated text.

mod common;

use std::sync::OnceLock;

use engram_embed::{cosine, EmbedError, Embedder, LocalEmbedder, LocalEmbedderOptions};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    dimension: usize,
    max_tokens: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    token_ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        serde_json::from_str(include_str!("fixtures/golden.json")).expect("golden.json parses")
    })
}

fn case(name: &str) -> &'static Case {
    fixture()
        .cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("golden.json has no case {name}"))
}

/// One embedder with the default options for the whole binary (loading takes a fraction of a
/// second per session).
fn embedder() -> &'static LocalEmbedder {
    static EMBEDDER: OnceLock<LocalEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| {
        common::embedder(
            engram_embed::DEFAULT_THREADS,
            engram_embed::DEFAULT_SESSIONS,
            engram_embed::DEFAULT_MAX_BATCH,
        )
    })
}

fn texts() -> Vec<&'static str> {
    fixture().cases.iter().map(|c| c.text.as_str()).collect()
}

#[test]
fn matches_the_f32_reference() {
    let embedder = embedder();
    assert_eq!(embedder.dimension(), fixture().dimension);
    assert_eq!(engram_embed::MAX_TOKENS, fixture().max_tokens);
    let vectors = embedder.embed(&texts()).unwrap();
    assert_eq!(vectors.len(), fixture().cases.len());
    for (case, vector) in fixture().cases.iter().zip(&vectors) {
        assert_eq!(vector.len(), 384, "{}", case.name);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{}: norm {norm}", case.name);
        let similarity = cosine(vector, &case.embedding);
        println!("{}: cosine to f32 reference {similarity:.5}", case.name);
        assert!(
            similarity >= 0.99,
            "{}: cosine {similarity} < 0.99",
            case.name
        );
    }
}

#[test]
fn tokenizes_like_the_reference() {
    for case in &fixture().cases {
        let ids = embedder().token_ids(&case.text).unwrap();
        assert_eq!(ids, case.token_ids, "{}", case.name);
    }
    assert_eq!(
        case("long").token_ids.len(),
        256,
        "the long case is truncated"
    );
}

#[test]
fn paraphrase_is_closer_than_unrelated_text() {
    let [a, b, unrelated] =
        ["paraphrase_a", "paraphrase_b", "unrelated"].map(|n| case(n).text.as_str());
    let vectors = embedder().embed(&[a, b, unrelated]).unwrap();
    let paraphrase = cosine(&vectors[0], &vectors[1]);
    let other = cosine(&vectors[0], &vectors[2]);
    println!("paraphrase {paraphrase:.3}, unrelated {other:.3}");
    assert!(
        paraphrase > other + 0.3,
        "paraphrase {paraphrase}, unrelated {other}"
    );
}

#[test]
fn other_texts_and_order_do_not_change_vectors() {
    let texts = texts();
    let together = embedder().embed(&texts).unwrap();
    // In reverse order on three sessions at once: the runs finish in any order.
    let three = common::embedder(1, 3, 1);
    let reversed: Vec<&str> = texts.iter().rev().copied().collect();
    let mut apart = three.embed(&reversed).unwrap();
    apart.reverse();
    for (i, text) in texts.iter().enumerate() {
        let alone = embedder().embed(&[text]).unwrap();
        assert_eq!(alone[0], together[i], "text {i} alone vs with the others");
        assert_eq!(apart[i], together[i], "text {i} on three sessions");
    }
}

#[test]
fn batches_of_several_texts_stay_close() {
    // Activations are quantized per model run, so a text run in a padded batch of four comes
    // out slightly different from the same text run alone, but not by much.
    let texts = texts();
    let alone = embedder().embed(&texts).unwrap();
    let batched = common::embedder(1, 2, 4).embed(&texts).unwrap();
    for (i, (a, b)) in alone.iter().zip(&batched).enumerate() {
        let similarity = cosine(a, b);
        println!("text {i}: cosine {similarity:.5} in a batch of 4 to alone");
        assert!(
            similarity > 0.99,
            "text {i}: cosine {similarity} in a batch of 4"
        );
    }
}

#[test]
fn empty_input_and_empty_text() {
    assert!(embedder().embed(&[]).unwrap().is_empty());
    let vectors = embedder().embed(&["", "x"]).unwrap();
    assert_eq!(vectors.len(), 2);
    let norm = vectors[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4);
}

#[test]
fn missing_files_say_how_to_get_them() {
    let options = LocalEmbedderOptions::new("/nonexistent/model", "/nonexistent/libonnxruntime.so");
    let error = LocalEmbedder::new(&options).err().expect("no model there");
    assert!(matches!(error, EmbedError::MissingFile { .. }), "{error:?}");
    assert!(error.to_string().contains("make setup"), "{error}");
}

#[test]
fn zero_threads_sessions_or_batch_is_refused() {
    for (threads, sessions, max_batch) in [(0, 1, 32), (1, 0, 32), (2, 1, 0)] {
        let error = LocalEmbedder::new(&common::options(threads, sessions, max_batch)).err();
        assert!(
            matches!(error, Some(EmbedError::InvalidOptions(_))),
            "{error:?}"
        );
    }
}

#[test]
fn token_spans_size_word_aligned_pieces_as_counting_them_alone_does() {
    use engram_embed::TokenCounter;
    let text = "Engram's chunker sizes pieces: naïve café-owners in São Paulo wrote 1,234 \
                unbelievably long sentences, e.g. «Übermäßig» and 東京タワー, about PD-L1 \
                inhibitors (IC50 = 3.2 nM).\n\nA second paragraph follows here.";
    let spans = embedder().token_spans(text).unwrap();
    assert_eq!(spans.len(), embedder().count_tokens(text));
    // Pieces between word boundaries: the tokens they overlap are the tokens they have alone.
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices(char::is_whitespace).map(|(at, _)| at))
        .chain(std::iter::once(text.len()))
        .collect();
    for (n, &start) in bounds.iter().enumerate() {
        for &end in &bounds[n + 1..] {
            let piece = &text[start..end];
            let counted = engram_embed::tokens_in(&spans, start, end);
            assert_eq!(counted, embedder().count_tokens(piece), "{piece:?}");
        }
    }
}
