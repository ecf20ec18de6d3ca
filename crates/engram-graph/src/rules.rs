//! The offline extractor: deterministic rules, no model, no network. Entities are proper-noun
//! phrases (runs of capitalised words, "of"/"de"-style connectors inside), quoted terms and
//! protected tokens (emails, URLs, ticket ids, error codes, versions), typed by rule from their
//! last word, a title or the word before them. Between two entities next to each other in a
//! sentence, a short run of words with a verb in it is a relation (raw and canonical predicate,
//! the sentence as evidence, the sentence's dates as `temporal_details`); other neighbours are
//! joined by a weak `RELATED_TO`. The item's title, when it reads as a name, is an entity every
//! passage mentions.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use async_trait::async_trait;
use engram_types::temporal;
use regex::Regex;
use unicode_segmentation::UnicodeSegmentation;

use crate::model::{
    canonical_predicate, truncate_chars, Entity, ItemGraph, Mention, Origin, Passage, Relation,
    MAX_CONTEXT_CHARS, MAX_ENTITIES, MAX_RELATIONS, MAX_RELATIONS_PER_ENTITY,
};
use crate::{ExtractRequest, GraphError, GraphExtractor};

/// Most words in one proper-noun phrase (longer runs are title-case headings, not names).
const MAX_PHRASE_WORDS: usize = 6;
/// Most words between two entities for the words to be read as their predicate.
const MAX_PREDICATE_WORDS: usize = 8;
/// Confidence of a relation read from a verb phrase, and of the weak same-sentence one.
const VERB_CONFIDENCE: f32 = 0.6;
const WEAK_CONFIDENCE: f32 = 0.3;
/// A title longer than this is a sentence, not a name.
const MAX_TITLE_WORDS: usize = 8;

/// The rule extractor (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleExtractor;

#[async_trait]
impl GraphExtractor for RuleExtractor {
    /// Runs off the async runtime (a large item's text takes milliseconds); a panic is a
    /// failed extraction.
    async fn extract(&self, request: &ExtractRequest<'_>) -> Result<ItemGraph, GraphError> {
        let title = request.title.to_owned();
        let passages: Vec<(u32, String)> = request
            .passages
            .iter()
            .map(|p| (p.position, p.text.to_owned()))
            .collect();
        tokio::task::spawn_blocking(move || RuleExtractor.graph(&title, &Passage::all(&passages)))
            .await
            .map_err(|e| GraphError::Failed(format!("the rule extractor stopped: {e}")))
    }

    fn extract_now(&self, request: &ExtractRequest<'_>) -> Option<ItemGraph> {
        Some(self.graph(request.title, request.passages))
    }
}

impl RuleExtractor {
    /// The graph of an item with `title` and `passages`.
    pub fn graph(&self, title: &str, passages: &[Passage<'_>]) -> ItemGraph {
        let mut known = HashSet::new();
        for passage in passages {
            known_names(passage.text, &mut known);
        }
        let mut graph = Builder {
            known,
            case: Case::of(passages),
            ..Builder::default()
        };
        let topic = title_entity(title).and_then(|e| graph.entity(e));
        for passage in passages {
            if let Some(topic) = topic {
                graph.mention(topic, passage.position);
            }
            for sentence in sentences(passage.text) {
                graph.sentence(sentence, passage.position);
            }
        }
        graph.finish()
    }

    /// The entities named in `text` (a query), each once, in order.
    pub fn entities(&self, text: &str) -> Vec<Entity> {
        let mut known = HashSet::new();
        known_names(text, &mut known);
        let mut seen = BTreeSet::new();
        sentences(text)
            .flat_map(|s| spans(s, &known, Case::Names))
            .map(|s| s.entity)
            .filter(|e| seen.insert(e.key.clone()))
            .collect()
    }
}

/// The sentences of a text: each line split at sentence boundaries (UAX #29), except after an
/// initial or an abbreviation ("George T. Solomon", "Dr. Ruiz", "Acme Inc. said").
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.lines().flat_map(|line| {
        let mut out = Vec::new();
        let mut start = 0;
        for (at, piece) in line.split_sentence_bound_indices() {
            let end = at + piece.len();
            if end < line.len() && ends_in_abbreviation(piece.trim_end()) {
                continue;
            }
            out.push(&line[start..end]);
            start = end;
        }
        out
    })
}

fn ends_in_abbreviation(piece: &str) -> bool {
    const SHORT: &[&str] = &[
        "Dr", "Jr", "Mr", "Mrs", "Ms", "No", "Prof", "Sr", "St", "vs",
    ];
    let Some(stem) = piece.strip_suffix('.') else {
        return false;
    };
    let last = stem
        .rsplit(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    is_initial(last) || SHORT.contains(&last)
}

/// Adds the words `text` capitalises other than first in a sentence (lowercased): a sentence's
/// capitalised first word is a name alone only when the text capitalises it elsewhere too.
fn known_names(text: &str, known: &mut HashSet<String>) {
    for sentence in sentences(text) {
        for word in sentence.unicode_words().skip(1) {
            if is_capitalised(word) {
                known.insert(word.to_lowercase());
            }
        }
    }
}

#[derive(Default)]
struct Builder {
    known: HashSet<String>,
    /// The text capitalises every noun (German): see [`Case`].
    case: Case,
    entities: Vec<Entity>,
    by_key: HashMap<String, usize>,
    relations: Vec<Relation>,
    mentions: BTreeSet<Mention>,
    relation_count: HashMap<usize, usize>,
}

impl Builder {
    fn entity(&mut self, entity: Entity) -> Option<usize> {
        if entity.key.is_empty() {
            return None;
        }
        if let Some(&at) = self.by_key.get(&entity.key) {
            if self.entities[at].kind == GENERIC && entity.kind != GENERIC {
                self.entities[at].kind = entity.kind;
            }
            return Some(at);
        }
        if self.entities.len() >= MAX_ENTITIES {
            return None;
        }
        self.by_key.insert(entity.key.clone(), self.entities.len());
        self.entities.push(entity);
        Some(self.entities.len() - 1)
    }

    fn mention(&mut self, entity: usize, passage: u32) {
        self.mentions.insert(Mention { entity, passage });
    }

    fn sentence(&mut self, sentence: &str, passage: u32) {
        let found = spans(sentence, &self.known, self.case);
        if found.is_empty() {
            return;
        }
        let mut placed: Vec<(Span, usize)> = Vec::with_capacity(found.len());
        for span in found {
            if let Some(at) = self.entity(span.entity.clone()) {
                self.mention(at, passage);
                placed.push((span, at));
            }
        }
        let context = truncate_chars(sentence.trim(), MAX_CONTEXT_CHARS);
        let temporal = dates(sentence);
        for pair in placed.windows(2) {
            let [(a, from), (b, to)] = pair else { continue };
            if from == to || self.relations.len() >= MAX_RELATIONS {
                continue;
            }
            let busy = |n: &HashMap<usize, usize>, e: &usize| {
                n.get(e).copied().unwrap_or(0) >= MAX_RELATIONS_PER_ENTITY
            };
            if busy(&self.relation_count, from) || busy(&self.relation_count, to) {
                continue;
            }
            let (raw, canonical, confidence) = predicate(&sentence[a.end..b.start]);
            self.relations.push(Relation {
                source: *from,
                target: *to,
                raw_predicate: raw,
                canonical_predicate: canonical,
                context: context.clone(),
                confidence,
                temporal_details: temporal.clone(),
                passage,
            });
            *self.relation_count.entry(*from).or_default() += 1;
            *self.relation_count.entry(*to).or_default() += 1;
        }
    }

    fn finish(self) -> ItemGraph {
        ItemGraph {
            origin: Origin::Extracted,
            entities: self.entities,
            relations: self.relations,
            mentions: self.mentions.into_iter().collect(),
            facts: Vec::new(),
        }
    }
}

/// The type of an entity no rule typed.
const GENERIC: &str = "ENTITY";

/// An entity found at `start..end` of a sentence.
#[derive(Debug, Clone)]
struct Span {
    start: usize,
    end: usize,
    entity: Entity,
}

/// The item's title as an entity when it reads as a name: a few words, one capitalised.
fn title_entity(title: &str) -> Option<Entity> {
    let title = title.trim();
    let words = title.unicode_words().count();
    let named = title.unicode_words().any(is_capitalised);
    (words > 0 && words <= MAX_TITLE_WORDS && named).then(|| Entity::new(title, "TOPIC", None))
}

static PROTECTED: LazyLock<Vec<(Regex, &'static str, bool)>> = LazyLock::new(|| {
    let rule = |pattern: &str, kind: &'static str, identifies: bool| {
        let re = Regex::new(pattern).unwrap_or_else(|e| panic!("rule pattern {pattern}: {e}"));
        (re, kind, identifies)
    };
    vec![
        rule(r#"https?://[^\s<>"'()\[\]{}]+"#, "URL", true),
        rule(
            r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            "EMAIL",
            true,
        ),
        rule(r"\b[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}\b", "TICKET", true),
        rule(
            r"\b(?:E|ERR|ERROR)[-_]?[0-9]{3,6}\b|\b[A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+\b|\b0x[0-9A-Fa-f]{4,16}\b",
            "ERROR_CODE",
            true,
        ),
        rule(
            r"\bv[0-9]+(?:\.[0-9]+)+\b|\b[0-9]+\.[0-9]+\.[0-9]+\b",
            "VERSION",
            false,
        ),
    ]
});

static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""([^"\n]{2,80})"|“([^”\n]{2,80})”"#).unwrap_or_else(|e| panic!("{e}"))
});

/// The date phrases a sentence names ("in 2021", "8 May 2023", "last Friday"), each once,
/// joined; `None` when it names none. Only the phrases are kept, so the anchor that relative
/// phrases would resolve against does not matter here.
fn dates(sentence: &str) -> Option<String> {
    let anchor = time::Date::from_calendar_date(2000, time::Month::January, 1).ok()?;
    let mut found: Vec<String> = Vec::new();
    for mention in temporal::mentions(sentence, anchor) {
        if !found.contains(&mention.phrase) {
            found.push(mention.phrase);
        }
    }
    (!found.is_empty()).then(|| found.join(", "))
}

/// What capitals mark in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Case {
    /// Names (English and most languages written in Latin letters): a capitalised word is a
    /// name unless it opens the sentence.
    #[default]
    Names,
    /// Every noun (German: `Die Bundesregierung hat neue Regeln für den Datenschutz`): a name is
    /// two capitalised words or more after any article (`Olaf Scholz`, `Deutsche Bank`); one
    /// capitalised word is any noun.
    Nouns,
}

/// German words that open a noun phrase, capitalised at a sentence's start.
const GERMAN_ARTICLES: &[&str] = &[
    "das", "dem", "den", "der", "des", "die", "ein", "eine", "einem", "einen", "einer", "eines",
];

/// German's commonest words, in lower case.
const GERMAN_COMMON: &[&str] = &[
    "auf", "das", "dass", "dem", "den", "der", "die", "ein", "eine", "für", "ist", "mit", "nicht",
    "sich", "und", "von", "wird", "zu",
];

/// Characters of an item's text read to tell its language.
const LANGUAGE_SAMPLE_CHARS: usize = 1_024;

impl Case {
    /// What capitals mark in the passages: `Nouns` where they are German, reliably told
    /// (whatlang, over the first few thousand characters).
    fn of(passages: &[Passage<'_>]) -> Self {
        let mut sample = String::new();
        for passage in passages {
            let room = LANGUAGE_SAMPLE_CHARS.saturating_sub(sample.len());
            if room == 0 {
                break;
            }
            let end = passage
                .text
                .char_indices()
                .map(|(at, c)| at + c.len_utf8())
                .take_while(|&end| end <= room)
                .last()
                .unwrap_or(0);
            sample.push_str(&passage.text[..end]);
            sample.push('\n');
        }
        // Identification costs about a third of the rules' time: a text without two of German's
        // commonest words is not asked about.
        let german_words: HashSet<&str> = sample
            .split_whitespace()
            .filter(|w| GERMAN_COMMON.contains(w))
            .collect();
        if german_words.len() < 2 {
            return Self::Names;
        }
        match whatlang::detect(&sample) {
            Some(info) if info.lang() == whatlang::Lang::Deu && info.is_reliable() => Self::Nouns,
            _ => Self::Names,
        }
    }
}

/// The entities of one sentence, in order, not overlapping.
fn spans(sentence: &str, known: &HashSet<String>, case: Case) -> Vec<Span> {
    let mut taken: Vec<Span> = Vec::new();
    let free = |taken: &[Span], start: usize, end: usize| {
        taken.iter().all(|s| end <= s.start || start >= s.end)
    };
    for (re, kind, identifies) in PROTECTED.iter() {
        for m in re.find_iter(sentence) {
            let text = m.as_str().trim_end_matches(['.', ',', ';', ':', '!', '?']);
            let (start, end) = (m.start(), m.start() + text.len());
            if text.is_empty() || !free(&taken, start, end) {
                continue;
            }
            let identifier = identifies.then(|| text.to_owned());
            taken.push(Span {
                start,
                end,
                entity: Entity::new(text, kind, identifier),
            });
        }
    }
    for c in QUOTED.captures_iter(sentence) {
        let Some(inner) = c.get(1).or_else(|| c.get(2)) else {
            continue;
        };
        let words = inner.as_str().unicode_words().count();
        if (1..=MAX_PHRASE_WORDS).contains(&words) && free(&taken, inner.start(), inner.end()) {
            taken.push(Span {
                start: inner.start(),
                end: inner.end(),
                entity: Entity::new(inner.as_str(), "CONCEPT", None),
            });
        }
    }
    let found = phrases(sentence, &taken, known, case);
    taken.extend(found);
    taken.sort_by_key(|s| s.start);
    taken
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Word,
    Space,
    Joiner,
    Break,
}

/// Proper-noun phrases outside the `taken` spans: runs of capitalised words (a number may end
/// one: "Apollo 13"), with lower-case connectors ("of", "de") or joiners ("-", "&") between two
/// of them.
fn phrases(sentence: &str, taken: &[Span], known: &HashSet<String>, case: Case) -> Vec<Span> {
    let segments: Vec<(usize, &str, Class)> = sentence
        .split_word_bound_indices()
        .map(|(at, text)| {
            let end = at + text.len();
            let class = if taken.iter().any(|s| at < s.end && end > s.start) {
                Class::Break
            } else if text.chars().any(char::is_alphanumeric) {
                Class::Word
            } else if text.chars().all(char::is_whitespace) {
                Class::Space
            } else if matches!(text, "-" | "&" | "'" | "\u{2019}") {
                Class::Joiner
            } else {
                Class::Break
            };
            (at, text, class)
        })
        .collect();
    let first_word = segments.iter().position(|s| s.2 == Class::Word);
    let mut out = Vec::new();
    // Indexes (into `segments`) of the phrase's words, and connectors waiting for a next word.
    let mut words: Vec<usize> = Vec::new();
    let mut pending = 0usize;
    let mut numbered = false;
    let close = |words: &mut Vec<usize>, out: &mut Vec<Span>| {
        if let Some(span) = phrase(sentence, &segments, words, first_word, known, case) {
            out.push(span);
        }
        words.clear();
    };
    for (i, &(_, text, class)) in segments.iter().enumerate() {
        match class {
            Class::Space => {}
            Class::Word if is_capitalised(text) => {
                if numbered {
                    close(&mut words, &mut out);
                    numbered = false;
                }
                words.push(i);
                pending = 0;
            }
            Class::Word
                if !words.is_empty()
                    && pending == 0
                    && !numbered
                    && text.chars().all(|c| c.is_ascii_digit()) =>
            {
                words.push(i);
                numbered = true;
            }
            Class::Word if !words.is_empty() && pending < 2 && CONNECTORS.contains(&text) => {
                pending += 1;
            }
            Class::Joiner if !words.is_empty() && pending < 2 => pending += 1,
            // An initial's full stop ("George T. Solomon") stays inside the name.
            Class::Break
                if text == "."
                    && pending == 0
                    && words.last().is_some_and(|&w| is_initial(segments[w].1)) => {}
            Class::Word | Class::Joiner | Class::Break => {
                close(&mut words, &mut out);
                pending = 0;
                numbered = false;
            }
        }
    }
    close(&mut words, &mut out);
    out
}

/// The phrase made of `words` (segment indexes), after the rules that make it a name.
fn phrase(
    sentence: &str,
    segments: &[(usize, &str, Class)],
    words: &[usize],
    first_word: Option<usize>,
    known: &HashSet<String>,
    case: Case,
) -> Option<Span> {
    let mut words = words;
    if case == Case::Nouns {
        while let Some((&first, rest)) = words.split_first() {
            if !GERMAN_ARTICLES.contains(&segments[first].1.to_lowercase().as_str()) {
                break;
            }
            words = rest;
        }
        if words.len() < 2 {
            return None;
        }
    }
    // A sentence's first word is capitalised anyway: it starts a name only when the text
    // capitalises it elsewhere, or when it is not a common word or an adverb and more follow.
    // Titles ("Dr") are dropped and type what follows.
    while let Some((&first, rest)) = words.split_first() {
        let word = segments[first].1;
        let lowered = word.to_lowercase();
        let opener = Some(first) == first_word
            && !known.contains(&lowered)
            && (is_common(&lowered) || lowered.ends_with("ly") || rest.is_empty());
        let function_word = is_common(&lowered) && lowered != "the";
        if opener || function_word || HONORIFICS.contains(&word) {
            words = rest;
        } else {
            break;
        }
    }
    let (&first, &last) = (words.first()?, words.last()?);
    if words.len() > MAX_PHRASE_WORDS {
        return None;
    }
    let start = segments[first].0;
    let end = segments[last].0 + segments[last].1.len();
    let text = &sentence[start..end];
    let lowered = text.to_lowercase();
    let all_dates = words.iter().all(|&w| {
        let word = segments[w].1.to_lowercase();
        DATE_WORDS.contains(&word.as_str()) || word.chars().all(|c| c.is_ascii_digit())
    });
    if all_dates
        || (words.len() == 1 && (is_common(&lowered) || text.chars().count() < 2))
        || !words.iter().any(|&w| is_capitalised(segments[w].1))
    {
        return None;
    }
    let before = segments[..first]
        .iter()
        .rev()
        .find(|s| s.2 == Class::Word)
        .map(|s| s.1);
    Some(Span {
        start,
        end,
        entity: Entity::new(text, kind_of(text, before), None),
    })
}

/// A type by rule: the phrase's last word, then any of its words, a title before it, or
/// "in"/"near" before it.
fn kind_of(text: &str, before: Option<&str>) -> &'static str {
    let words: Vec<String> = text.unicode_words().map(str::to_lowercase).collect();
    let last = words.last().map(String::as_str).unwrap_or_default();
    let any = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if ORGANIZATION_WORDS.contains(&last) {
        "ORGANIZATION"
    } else if LOCATION_WORDS.contains(&last) {
        "LOCATION"
    } else if any(ORGANIZATION_WORDS) {
        "ORGANIZATION"
    } else if any(LOCATION_WORDS) {
        "LOCATION"
    } else if before.is_some_and(|b| HONORIFICS.contains(&b)) {
        "PERSON"
    } else if before.is_some_and(|b| matches!(b, "in" | "near")) {
        "LOCATION"
    } else {
        GENERIC
    }
}

/// The predicate between two entities of a sentence: `(raw, canonical, confidence)`.
fn predicate(between: &str) -> (String, String, f32) {
    let mut words: Vec<&str> = between.unicode_words().collect();
    while words.last().is_some_and(|w| HONORIFICS.contains(w)) {
        words.pop();
    }
    let weak = || (String::new(), "RELATED_TO".to_owned(), WEAK_CONFIDENCE);
    if words.is_empty() || words.len() > MAX_PREDICATE_WORDS || between.contains([';', '(', ')']) {
        return weak();
    }
    let lowered: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    if matches!(lowered[0].as_str(), "and" | "or" | "nor" | "but" | "while") {
        return weak();
    }
    if !lowered.iter().any(|w| is_verb_like(w)) {
        return weak();
    }
    let raw = lowered.join(" ");
    let canonical = match canonical_predicate(&raw).as_str() {
        "RELATED_TO" => "IS_A".to_owned(),
        other => other.to_owned(),
    };
    (raw, canonical, VERB_CONFIDENCE)
}

fn is_capitalised(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    first.is_uppercase() && word != "I"
}

fn is_initial(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase) && chars.next().is_none()
}

fn is_verb_like(word: &str) -> bool {
    if VERBS.contains(&word) {
        return true;
    }
    if is_common(word) || word.len() < 4 {
        return false;
    }
    word.ends_with("ed")
        || word.ends_with("ing")
        || (word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us"))
}

fn is_common(word: &str) -> bool {
    COMMON.binary_search(&word).is_ok()
}

/// Whether `word` (any case) is a function word or a frequent sentence opener: never a name
/// alone.
pub(crate) fn is_function_word(word: &str) -> bool {
    is_common(&word.to_lowercase())
}

/// Lower-case words that may join two capitalised words of one name.
const CONNECTORS: &[&str] = &[
    "of", "de", "del", "della", "der", "des", "di", "da", "du", "la", "le", "van", "von", "y",
    "the", "for",
];

const HONORIFICS: &[&str] = &[
    "Mr",
    "Mrs",
    "Ms",
    "Dr",
    "Prof",
    "Sir",
    "Dame",
    "Lord",
    "Lady",
    "President",
    "Senator",
    "Judge",
    "Captain",
];

const ORGANIZATION_WORDS: &[&str] = &[
    "agency",
    "airlines",
    "association",
    "bank",
    "club",
    "co",
    "college",
    "committee",
    "company",
    "corp",
    "corporation",
    "council",
    "department",
    "fc",
    "foundation",
    "gmbh",
    "group",
    "hospital",
    "inc",
    "institute",
    "labs",
    "league",
    "llc",
    "ltd",
    "ministry",
    "museum",
    "network",
    "party",
    "plc",
    "press",
    "records",
    "school",
    "society",
    "studios",
    "systems",
    "team",
    "technologies",
    "university",
];

const LOCATION_WORDS: &[&str] = &[
    "airport",
    "avenue",
    "bay",
    "beach",
    "bridge",
    "canyon",
    "city",
    "coast",
    "county",
    "desert",
    "district",
    "falls",
    "forest",
    "hills",
    "island",
    "islands",
    "kingdom",
    "lake",
    "mountain",
    "mountains",
    "ocean",
    "park",
    "peninsula",
    "province",
    "region",
    "republic",
    "river",
    "road",
    "sea",
    "square",
    "state",
    "station",
    "street",
    "valley",
];

const DATE_WORDS: &[&str] = &[
    "april",
    "august",
    "december",
    "february",
    "friday",
    "january",
    "july",
    "june",
    "march",
    "may",
    "monday",
    "november",
    "october",
    "saturday",
    "september",
    "sunday",
    "thursday",
    "tuesday",
    "wednesday",
];

/// Words that are verbs whatever their ending.
const VERBS: &[&str] = &[
    "are", "became", "become", "becomes", "began", "begin", "begins", "bought", "brought", "built",
    "buy", "came", "come", "did", "do", "does", "drove", "feel", "felt", "found", "gave", "give",
    "go", "goes", "got", "grew", "had", "has", "have", "held", "hold", "holds", "is", "join",
    "joins", "keep", "kept", "know", "knew", "lead", "leads", "led", "left", "made", "make",
    "makes", "married", "meet", "met", "own", "owns", "paid", "pay", "ran", "run", "runs", "said",
    "saw", "see", "sees", "sell", "sells", "sent", "sold", "spoke", "took", "use", "uses", "visit",
    "was", "went", "were", "won", "work", "works", "wrote",
];

/// Function words and frequent sentence openers, sorted (binary search): never a name alone.
const COMMON: &[&str] = &[
    "a",
    "about",
    "above",
    "according",
    "across",
    "after",
    "afterwards",
    "again",
    "against",
    "all",
    "also",
    "although",
    "always",
    "am",
    "among",
    "an",
    "and",
    "another",
    "any",
    "anyway",
    "are",
    "around",
    "as",
    "at",
    "back",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "besides",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "currently",
    "despite",
    "did",
    "do",
    "does",
    "during",
    "each",
    "earlier",
    "either",
    "even",
    "eventually",
    "every",
    "finally",
    "first",
    "following",
    "for",
    "from",
    "further",
    "furthermore",
    "had",
    "has",
    "have",
    "he",
    "hello",
    "her",
    "here",
    "hers",
    "hey",
    "hi",
    "him",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "including",
    "indeed",
    "instead",
    "into",
    "is",
    "it",
    "its",
    "just",
    "last",
    "later",
    "let",
    "like",
    "many",
    "may",
    "maybe",
    "me",
    "meanwhile",
    "might",
    "more",
    "moreover",
    "most",
    "much",
    "must",
    "my",
    "never",
    "new",
    "next",
    "no",
    "nor",
    "not",
    "note",
    "now",
    "of",
    "often",
    "oh",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "our",
    "out",
    "over",
    "perhaps",
    "please",
    "see",
    "she",
    "should",
    "since",
    "so",
    "some",
    "sometimes",
    "still",
    "such",
    "sure",
    "than",
    "thanks",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "therefore",
    "these",
    "they",
    "this",
    "those",
    "though",
    "thus",
    "to",
    "today",
    "tomorrow",
    "too",
    "two",
    "under",
    "unlike",
    "until",
    "up",
    "upon",
    "us",
    "usually",
    "very",
    "was",
    "we",
    "well",
    "were",
    "what",
    "whatever",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yeah",
    "yes",
    "yesterday",
    "yet",
    "you",
    "your",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(text: &str) -> ItemGraph {
        RuleExtractor.graph("", &[Passage { position: 0, text }])
    }

    fn names(g: &ItemGraph) -> Vec<(&str, &str)> {
        g.entities
            .iter()
            .map(|e| (e.name.as_str(), e.kind.as_str()))
            .collect()
    }

    fn triples(g: &ItemGraph) -> Vec<(String, String, String)> {
        g.relations
            .iter()
            .map(|r| {
                (
                    g.entities[r.source].name.clone(),
                    r.canonical_predicate.clone(),
                    g.entities[r.target].name.clone(),
                )
            })
            .collect()
    }

    /// German capitalises every noun: its names are the runs of two capitalised words or more
    /// (after any article), never one noun alone; protected tokens stay.
    #[test]
    fn german_nouns_are_not_taken_for_names() {
        let g = graph(
            "Die Bundesregierung hat am Montag neue Regeln für den Datenschutz beschlossen. \
             Bundeskanzler Olaf Scholz sagte, dass die Unternehmen ihre Kunden besser \
             informieren müssen. Die Deutsche Bank prüft den Entwurf bis zum 1. März, \
             Rückfragen an presse@example.de.",
        );
        let found: Vec<&str> = g.entities.iter().map(|e| e.name.as_str()).collect();
        assert!(found.contains(&"bundeskanzler olaf scholz"), "{found:?}");
        assert!(found.contains(&"deutsche bank"), "{found:?}");
        assert!(found.contains(&"presse@example.de"), "{found:?}");
        for noun in [
            "Bundesregierung",
            "Montag",
            "Regeln",
            "Datenschutz",
            "Kunden",
            "Entwurf",
        ] {
            assert!(
                !found.iter().any(|name| name.contains(&noun.to_lowercase())),
                "{noun}: {found:?}"
            );
        }
        // English text of the same shape keeps its one-word names.
        let g = graph("The minister met Siemens in Berlin on Monday.");
        assert_eq!(
            names(&g).iter().map(|n| n.0).collect::<Vec<_>>(),
            ["siemens", "berlin"]
        );
    }

    #[test]
    fn the_common_word_lists_are_sorted() {
        assert!(COMMON.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn proper_nouns_become_typed_entities_related_by_their_verbs() {
        let g = graph(
            "The Payments Service is owned by Acme Corp. In 2021 Ana Ruiz moved to Lisbon City.",
        );
        assert_eq!(
            names(&g),
            [
                ("payments service", "ENTITY"),
                ("acme corp", "ORGANIZATION"),
                ("ana ruiz", "ENTITY"),
                ("lisbon city", "LOCATION"),
            ]
        );
        assert_eq!(
            triples(&g),
            [
                (
                    "payments service".into(),
                    "OWNED_BY".into(),
                    "acme corp".into()
                ),
                ("ana ruiz".into(), "MOVED_TO".into(), "lisbon city".into()),
            ]
        );
        let moved = &g.relations[1];
        assert_eq!(moved.raw_predicate, "moved to");
        assert_eq!(moved.temporal_details.as_deref(), Some("In 2021"));
        assert_eq!(moved.context, "In 2021 Ana Ruiz moved to Lisbon City.");
        assert!(g.relations[0].confidence > WEAK_CONFIDENCE);
    }

    #[test]
    fn connectors_join_one_name_and_sentence_openers_are_dropped() {
        let g = graph(
            "However, the Bank of America met with Dr Smith on Monday and George T. Solomon.",
        );
        assert_eq!(
            names(&g),
            [
                ("bank of america", "ORGANIZATION"),
                ("smith", "PERSON"),
                ("george t. solomon", "ENTITY")
            ]
        );
        assert_eq!(triples(&g)[0].1, "MET_WITH");
    }

    #[test]
    fn protected_tokens_carry_identifiers_and_merge_across_spellings() {
        let g = graph(
            "Ticket PAY-1234 reports E1002 for ana@example.com; see https://status.example.com/x. \
             Later ANA@example.com saw SOURCE_NOT_FOUND in v2.3.1.",
        );
        let kinds: Vec<&str> = g.entities.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "TICKET",
                "ERROR_CODE",
                "EMAIL",
                "URL",
                "ERROR_CODE",
                "VERSION"
            ]
        );
        let email = g.entities.iter().find(|e| e.kind == "EMAIL").unwrap();
        assert_eq!(email.key, "id:ana@example.com");
        assert_eq!(email.identifier.as_deref(), Some("ana@example.com"));
        assert_eq!(g.entities[3].name, "https://status.example.com/x");
    }

    #[test]
    fn neighbours_without_a_verb_get_a_weak_relation() {
        let g = graph("Yesterday Alice and Bob founded Initech together.");
        let t = triples(&g);
        assert_eq!(t[0], ("alice".into(), "RELATED_TO".into(), "bob".into()));
        assert_eq!(t[1], ("bob".into(), "FOUNDED".into(), "initech".into()));
        assert_eq!(g.relations[0].confidence, WEAK_CONFIDENCE);
    }

    #[test]
    fn a_title_is_mentioned_by_every_passage_and_quotes_are_concepts() {
        let passages = [
            Passage {
                position: 0,
                text: "It was called \"dark mode\" by users.",
            },
            Passage {
                position: 3,
                text: "nothing named here",
            },
        ];
        let g = RuleExtractor.graph("Night Theme", &passages);
        assert_eq!(
            names(&g),
            [("night theme", "TOPIC"), ("dark mode", "CONCEPT")]
        );
        let at: Vec<(usize, u32)> = g.mentions.iter().map(|m| (m.entity, m.passage)).collect();
        assert_eq!(at, [(0, 0), (0, 3), (1, 0)]);
    }

    #[test]
    fn dates_headings_and_limits() {
        assert!(graph("Meet me on Monday in June.").entities.is_empty());
        assert!(graph("Seven Capitalised Words In A Long Title Here")
            .entities
            .is_empty());
        let many: String = (0..6_000)
            .map(|i| format!("Name{i} met Other{i}. "))
            .collect();
        let g = graph(&many);
        assert_eq!(g.entities.len(), MAX_ENTITIES);
        assert!(g.relations.len() <= MAX_RELATIONS);
    }

    #[test]
    fn extraction_is_deterministic_and_query_entities_are_unique() {
        let text = "Paris is the capital of France. Many visit Paris. France borders Spain.";
        assert_eq!(graph(text), graph(text));
        let q: Vec<String> = RuleExtractor
            .entities("Who founded Initech and when did Initech move to Austin?")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(q, ["initech", "austin"]);
        assert_eq!(triples(&graph(text))[0].1, "CAPITAL_OF");
    }
}
