//! Text analysis, one definition for indexing and querying: words are maximal runs of letters
//! and digits, lowercased (tantivy's simple tokenizer and lowercaser); the keyword index then
//! folds them to ASCII and stems them (Snowball English), and a query's words go through the
//! same [`analyzer`] before they meet the index. Ranked queries drop common function words.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    TextAnalyzer,
};

/// How the terms of a keyword query combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TermOperator {
    /// Any term matches; more and rarer terms rank higher.
    #[default]
    Or,
    /// Every term must occur.
    And,
    /// The terms must occur consecutively, in order.
    Phrase,
}

/// A keyword query: words (letters and digits, no syntax) and how they combine. A keyword index
/// builds its own query from it, so user text never reaches a query parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexicalQuery {
    pub terms: Vec<String>,
    pub operator: TermOperator,
}

impl LexicalQuery {
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Longest token kept, in bytes (longer ones are noise: hashes, base64, URLs without breaks).
const LONGEST_TOKEN: usize = 64;

/// The full analysis of indexed text and of query words: words, long tokens dropped, lowercased,
/// folded to ASCII, stemmed.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(LONGEST_TOKEN))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Function words that carry no topic. Dropped from `or` queries (they only add matches and
/// cost), kept in phrases (where they are part of what must match).
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we",
    "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you",
    "your",
];

pub fn is_stopword(term: &str) -> bool {
    STOPWORDS.binary_search(&term).is_ok()
}

/// The words of `text`: maximal runs of letters and digits, lowercased; the first stage of
/// [`analyzer`], with the same tokenizer and lowercaser.
pub fn words(text: &str) -> Vec<String> {
    let mut words = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(LowerCaser)
        .build();
    let mut stream = words.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// The terms that carry meaning: words less stopwords, each once, in order.
pub fn content_terms(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// The keyword query for `text`. `or` and `and` use the content terms (all words when the text
/// has nothing but stopwords); a phrase keeps every word in order.
pub fn keyword_query(text: &str, operator: TermOperator) -> LexicalQuery {
    let terms = match operator {
        TermOperator::Phrase => words(text),
        TermOperator::Or | TermOperator::And => {
            let content = content_terms(text);
            if content.is_empty() {
                let mut seen = std::collections::HashSet::new();
                words(text)
                    .into_iter()
                    .filter(|w| seen.insert(w.clone()))
                    .collect()
            } else {
                content
            }
        }
    };
    LexicalQuery { terms, operator }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn terms_drop_syntax_and_function_words() {
        assert_eq!(
            keyword_query("What is NEAR(\"x\" AND y*)?", TermOperator::Or).terms,
            ["near", "x", "y"]
        );
        assert_eq!(
            keyword_query("the the", TermOperator::Or).terms,
            ["the"],
            "a query of stopwords still searches"
        );
        assert_eq!(
            keyword_query("The Lazy dog", TermOperator::Phrase).terms,
            ["the", "lazy", "dog"]
        );
        assert_eq!(words("Café 1,000 naïve"), ["café", "1", "000", "naïve"]);
        assert!(keyword_query("?!", TermOperator::Or).is_empty());
    }

    proptest::proptest! {
        /// Whatever the text, a query holds only lowercase words of it: no syntax gets
        /// through, ranked queries drop function words unless nothing else is left, a phrase
        /// keeps every word in order.
        #[test]
        fn keyword_queries_are_words_of_the_text(text in "\\PC{0,80}") {
            let all = words(&text);
            for operator in [TermOperator::Or, TermOperator::And, TermOperator::Phrase] {
                let query = keyword_query(&text, operator);
                for term in &query.terms {
                    proptest::prop_assert!(!term.is_empty());
                    // Letters and digits (lowercasing may add a combining mark: `İ` is `i̇`),
                    // never syntax or spaces.
                    proptest::prop_assert!(
                        !term.chars().any(|c| c.is_whitespace() || c.is_ascii_punctuation()),
                        "{term:?}"
                    );
                    proptest::prop_assert!(all.contains(term), "{term:?} not in {all:?}");
                }
                if operator == TermOperator::Phrase {
                    proptest::prop_assert_eq!(&query.terms, &all);
                } else if all.iter().any(|w| !is_stopword(w)) {
                    proptest::prop_assert!(query.terms.iter().all(|t| !is_stopword(t)));
                }
            }
        }
    }

    fn analyzed(text: &str) -> Vec<String> {
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn query_words_meet_indexed_text_in_one_form() {
        assert_eq!(analyzed("ZEBRAS, Café"), ["zebra", "cafe"]);
        for text in [
            "Running dogs' naïve résumé: 3.14 meters",
            "Straße, ÉCOLE and the 2nd-order Kähler manifolds",
            "x".repeat(70).as_str(),
        ] {
            let from_words: Vec<String> = words(text).iter().flat_map(|w| analyzed(w)).collect();
            assert_eq!(from_words, analyzed(text), "{text}");
        }
    }
}
