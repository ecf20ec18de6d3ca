//! The keyword side of a query: terms as the lexical index sees them (letters and digits,
//! lowercased), with common function words dropped from ranked queries.

use engram_store::{LexicalQuery, TermOperator};

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

/// The words of `text`: maximal runs of letters and digits, lowercased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
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
}
