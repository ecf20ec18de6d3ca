//! Text analysis, one definition for indexing and querying: words are maximal runs of letters
//! and digits with their marks ([`WordTokenizer`]: Chinese, Japanese, Korean, Thai and other
//! unspaced scripts give overlapping pairs of letters; optional Arabic, Hebrew and Latin marks
//! are left out), lowercased; the keyword index then folds them to ASCII and stems them (Snowball
//! English), and a query's words go through the same [`analyzer`] before they meet the index.
//! Ranked queries drop common function words.

use std::iter::Peekable;
use std::str::CharIndices;

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, Stemmer, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// Words: maximal runs of letters and digits (as tantivy's simple tokenizer), with the
/// combining marks written on them, except for the scripts written without spaces between
/// words. A run of Han, kana, Hangul, Thai, Lao, Khmer or Myanmar letters gives its overlapping
/// pairs of letters (each with its marks; a run of one, that letter), as Lucene's and
/// Elasticsearch's `cjk` analyzers do: `東京都` gives `東京` and `京都`, so a query for `東京`
/// finds it. Without it a whole sentence was one token, found only by the same sentence, and
/// dropped as too long past 21 characters.
///
/// A mark continues its word: the virama of `हिन्दी` and the tone mark of `ไม่` parted them.
/// The marks a reader may leave out are left out: Arabic harakat and tatweel, Hebrew points,
/// and Latin combining accents (folded away like precomposed ones), so `كَتَبَ` is found by `كتب`.
#[derive(Clone, Default)]
pub struct WordTokenizer {
    token: Token,
}

/// Letters of the scripts read in pairs: Chinese, Japanese, Thai, Lao, Khmer and Myanmar are
/// written without spaces between words ([`is_unspaced`]); Korean is spaced, but its words
/// carry particles (`서울에서`) that pairs see through. Letters, not punctuation (`・`, `゠`),
/// digits or marks.
fn is_paired(c: char) -> bool {
    c >= '\u{0E00}' && (is_unspaced(c) || is_hangul(c))
}

/// Letters of the scripts that put no space between words, so a line break between two of them
/// (text wrapped by a PDF or an editor) parts no words either.
fn is_unspaced(c: char) -> bool {
    c >= '\u{0E00}'
        && matches!(c,
            '\u{0E00}'..='\u{0EFF}'     // Thai, Lao
            | '\u{1000}'..='\u{109F}'   // Myanmar
            | '\u{1780}'..='\u{17FF}'   // Khmer
            | '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
            | '\u{31F0}'..='\u{31FF}'   // Katakana phonetic extensions
            | '\u{3400}'..='\u{4DBF}'   // CJK extension A
            | '\u{4E00}'..='\u{9FFF}'   // CJK unified ideographs
            | '\u{F900}'..='\u{FAFF}'   // CJK compatibility ideographs
            | '\u{FF66}'..='\u{FF9F}'   // halfwidth Katakana
            | '\u{20000}'..='\u{3FFFF}' // CJK extensions B and later
        )
        && c.is_alphabetic()
        && !is_combining_mark(c)
}

fn is_hangul(c: char) -> bool {
    matches!(c,
        '\u{1100}'..='\u{11FF}'   // Hangul Jamo
        | '\u{3130}'..='\u{318F}' // Hangul compatibility Jamo
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
    ) && c.is_alphabetic()
}

/// Marks a reader may write or leave out, left out of words: Latin combining accents (as
/// folding leaves out precomposed ones), Hebrew points and cantillation, Arabic harakat,
/// Quranic marks and tatweel (the stretching stroke).
fn is_dropped(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}'
        | '\u{0591}'..='\u{05BD}'
        | '\u{05BF}'
        | '\u{05C1}'..='\u{05C2}'
        | '\u{05C4}'..='\u{05C5}'
        | '\u{05C7}'
        | '\u{0610}'..='\u{061A}'
        | '\u{0640}'
        | '\u{064B}'..='\u{065F}'
        | '\u{0670}'
        | '\u{06D6}'..='\u{06DC}'
        | '\u{06DF}'..='\u{06E4}'
        | '\u{06E7}'..='\u{06E8}'
        | '\u{06EA}'..='\u{06ED}'
    )
}

/// A mark (general category M): it belongs to the letter before it.
fn is_combining_mark(c: char) -> bool {
    !c.is_ascii() && unicode_normalization::char::is_combining_mark(c)
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        self.token.reset();
        WordStream {
            text,
            chars: text.char_indices().peekable(),
            run: None,
            token: &mut self.token,
        }
    }
}

/// The previous letter of a paired run (its byte range, marks included), and whether it is the
/// run's only one so far (a run of one gives that letter).
#[derive(Clone, Copy)]
struct Run {
    start: usize,
    end: usize,
    alone: bool,
}

pub struct WordStream<'a> {
    text: &'a str,
    chars: Peekable<CharIndices<'a>>,
    run: Option<Run>,
    token: &'a mut Token,
}

impl WordStream<'_> {
    /// Ends the token with `text[from..to]`; it spans `start..to` of the text.
    fn emit(&mut self, from: usize, to: usize, start: usize) -> bool {
        self.token.offset_from = start;
        self.token.offset_to = to;
        self.token.text.push_str(&self.text[from..to]);
        true
    }

    /// Takes the marks written on the letter ending at `end`; where they end.
    fn marks_after(&mut self, mut end: usize) -> usize {
        while let Some(&(at, c)) = self.chars.peek() {
            if !is_combining_mark(c) {
                break;
            }
            self.chars.next();
            end = at + c.len_utf8();
        }
        end
    }

    /// The word starting at `at`: letters, digits and their marks, less the marks left out.
    /// False when nothing is left of it (a lone tatweel).
    fn word(&mut self, at: usize) -> bool {
        let (mut from, mut to) = (at, at);
        while let Some(&(next, c)) = self.chars.peek() {
            if c.is_ascii() {
                if !c.is_ascii_alphanumeric() {
                    break;
                }
                self.chars.next();
                to = next + 1;
                continue;
            }
            if !is_combining_mark(c) && (!c.is_alphanumeric() || is_paired(c)) {
                break;
            }
            self.chars.next();
            if is_dropped(c) {
                self.token.text.push_str(&self.text[from..next]);
                from = next + c.len_utf8();
            }
            to = next + c.len_utf8();
        }
        if from < to {
            self.token.text.push_str(&self.text[from..to]);
        }
        self.token.offset_from = at;
        self.token.offset_to = to;
        !self.token.text.is_empty()
    }
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        self.token.text.clear();
        self.token.position = self.token.position.wrapping_add(1);
        while let Some(&(at, c)) = self.chars.peek() {
            if is_paired(c) {
                self.chars.next();
                let end = self.marks_after(at + c.len_utf8());
                let previous = self.run.replace(Run {
                    start: at,
                    end,
                    alone: self.run.is_none(),
                });
                if let Some(previous) = previous {
                    // The pair's two letters (a line break between them left out).
                    self.token
                        .text
                        .push_str(&self.text[previous.start..previous.end]);
                    return self.emit(at, end, previous.start);
                }
                continue;
            }
            // A line break inside text of an unspaced script continues the run.
            if let Some(run) = self.run {
                if matches!(c, '\n' | '\r')
                    && self.text[run.start..]
                        .chars()
                        .next()
                        .is_some_and(is_unspaced)
                {
                    let rest = &self.text[at..];
                    let skip = if rest.starts_with("\r\n") { 2 } else { 1 };
                    if rest[skip..].chars().next().is_some_and(is_unspaced) {
                        for _ in 0..skip {
                            self.chars.next();
                        }
                        continue;
                    }
                }
            }
            // A run ends: one letter alone is a word.
            if let Some(run) = self.run.take() {
                if run.alone {
                    return self.emit(run.start, run.end, run.start);
                }
            }
            if c.is_alphanumeric() && !is_combining_mark(c) {
                if self.word(at) {
                    return true;
                }
                continue;
            }
            self.chars.next();
        }
        match self.run.take() {
            Some(run) if run.alone => self.emit(run.start, run.end, run.start),
            _ => false,
        }
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

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
    TextAnalyzer::builder(WordTokenizer::default())
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

/// The words of `text` ([`WordTokenizer`]), lowercased; the first stage of [`analyzer`], with
/// the same tokenizer and lowercaser.
pub fn words(text: &str) -> Vec<String> {
    let mut words = TextAnalyzer::builder(WordTokenizer::default())
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
    }

    /// A mark belongs to its letter; marks a reader may leave out are left out, so vocalized
    /// Arabic and pointed Hebrew meet the plain spelling, and decomposed accents the
    /// precomposed ones.
    #[test]
    fn marks_stay_with_their_letters_or_are_left_out() {
        assert_eq!(words("हिन्दी भाषा"), ["हिन्दी", "भाषा"]);
        assert_eq!(words("ক্ষমা தமிழ்"), ["ক্ষমা", "தமிழ்"]);
        assert_eq!(words("كَتَبَ الوَلَدُ الدَّرْسَ"), ["كتب", "الولد", "الدرس"]);
        assert_eq!(words("العـــربية"), ["العربية"]);
        assert_eq!(words("שָׁלוֹם עולם"), ["שלום", "עולם"]);
        assert_eq!(analyzed("cafe\u{301} naïve"), analyzed("café naive"));
        // A mark on no letter, and a lone tatweel, are nothing.
        assert_eq!(words("\u{301} \u{640} x"), ["x"]);
    }

    /// Thai, Lao, Khmer and Myanmar are written without spaces: pairs of letters, each with its
    /// marks (`ไม่` is `ไ`, `ม่`).
    #[test]
    fn thai_gives_pairs_of_letters_with_their_marks() {
        assert_eq!(words("ไม่มี"), ["ไม่", "ม่มี"]);
        assert_eq!(words("ภาษา ไทย"), ["ภา", "าษ", "ษา", "ไท", "ทย"]);
        // Thai digits are digits.
        assert_eq!(words("๒๕๖๗"), ["๒๕๖๗"]);
    }

    /// Chinese and Japanese are written without spaces and Korean words carry particles: their
    /// text gives overlapping pairs, a lone character itself, and spaced scripts their words.
    #[test]
    fn cjk_text_gives_pairs_of_characters() {
        assert_eq!(words("東京都"), ["東京", "京都"]);
        assert_eq!(
            words("Mitchell的Foundations，第3章"),
            ["mitchell", "的", "foundations", "第", "3", "章"]
        );
        assert_eq!(
            words("サッカー・ワールドカップ"),
            [
                "サッ", "ッカ", "カー", "ワー", "ール", "ルド", "ドカ", "カッ", "ップ"
            ]
        );
        assert_eq!(
            words("서울에서 만나요"),
            ["서울", "울에", "에서", "만나", "나요"]
        );
        // A line wrapped inside Chinese or Japanese text parts no word; in Korean (spaced) it
        // does, and so does a blank line.
        assert_eq!(words("机器学\n习"), ["机器", "器学", "学习"]);
        assert_eq!(words("東京\r\n大阪"), ["東京", "京大", "大阪"]);
        assert_eq!(words("東京\n\n大阪"), ["東京", "大阪"]);
        assert_eq!(words("한국\n사람"), ["한국", "사람"]);
        assert_eq!(words("東\nx"), ["東", "x"]);
        // A sentence past the longest token is still indexed, pair by pair.
        let sentence = "机器学习是人工智能的一个分支它使计算机能够从数据中学习而无需明确编程";
        assert_eq!(analyzed(sentence).len(), sentence.chars().count() - 1);
        // Pairs take consecutive positions, so a phrase of pairs matches.
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream("在東京都 x");
        let mut positions = Vec::new();
        while stream.advance() {
            positions.push((stream.token().text.clone(), stream.token().position));
        }
        assert_eq!(
            positions,
            [
                ("在東".into(), 0),
                ("東京".into(), 1),
                ("京都".into(), 2),
                ("x".to_string(), 3)
            ]
        );
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
            "東京都の天気は晴れ、서울에서 日本語 a 字",
            "हिन्दी كَتَبَ ไม่มี שָׁלוֹם e\u{301}\u{640}",
        ] {
            let from_words: Vec<String> = words(text).iter().flat_map(|w| analyzed(w)).collect();
            assert_eq!(from_words, analyzed(text), "{text}");
        }
    }
}
