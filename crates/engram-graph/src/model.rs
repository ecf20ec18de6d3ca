//! The graph of one item as an extractor gives it: entities, relations between them with their
//! evidence, and which passages mention which entity. Entities are resolved to a key here, so
//! the store can merge them across items by key alone.

use serde::{Deserialize, Serialize};

/// Most entities one item's graph keeps (the reference's bring-your-own-graph limit).
pub const MAX_ENTITIES: usize = 5_000;
/// Most relations one item's graph keeps.
pub const MAX_RELATIONS: usize = 10_000;
/// Most relations one entity may take part in within one item.
pub const MAX_RELATIONS_PER_ENTITY: usize = 500;
/// Longest entity name or predicate, in characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Longest relation context (the evidence), in characters.
pub const MAX_CONTEXT_CHARS: usize = 2_000;

/// Where a relation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Found in the item's text by an extractor.
    Extracted,
    /// Given by the client with the item (`graph_payload`).
    Byog,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Extracted => "extracted",
            Self::Byog => "byog",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "extracted" => Some(Self::Extracted),
            "byog" => Some(Self::Byog),
            _ => None,
        }
    }
}

/// One entity of an item's graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// What it is merged on across items: its identifier when it has one, else its
    /// normalised name (see [`entity_key`]).
    pub key: String,
    /// The name as shown: lowercased, whitespace collapsed.
    pub name: String,
    /// Free text, upper case: PERSON, ORGANIZATION, LOCATION, EMAIL, URL, TICKET, ...
    pub kind: String,
    pub namespace: String,
    /// An identifier that names it anywhere (an email address, a URL, a ticket id).
    pub identifier: Option<String>,
}

impl Entity {
    /// An entity named `name`, keyed by `identifier` when given, else by its name.
    pub fn new(name: &str, kind: &str, identifier: Option<String>) -> Self {
        let name = display_name(name);
        let key = match &identifier {
            Some(id) => format!("id:{}", id.to_lowercase()),
            None => entity_key(&name),
        };
        Self {
            key,
            name,
            kind: kind.to_owned(),
            namespace: "default".to_owned(),
            identifier,
        }
    }
}

/// One relation, `source -> predicate -> target`, with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Relation {
    /// Index into the graph's entities.
    pub source: usize,
    pub target: usize,
    /// The predicate as written ("is owned by").
    pub raw_predicate: String,
    /// The predicate in UPPER_SNAKE ("OWNED_BY").
    pub canonical_predicate: String,
    /// The verbatim evidence (the sentence).
    pub context: String,
    /// 0..=1.
    pub confidence: f32,
    pub temporal_details: Option<String>,
    /// Position of the passage (chunk) the evidence is in.
    pub passage: u32,
}

/// An entity named in a passage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mention {
    pub entity: usize,
    pub passage: u32,
}

/// The graph of one item.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemGraph {
    pub origin: Origin,
    pub entities: Vec<Entity>,
    pub relations: Vec<Relation>,
    pub mentions: Vec<Mention>,
    /// What a memory says about its user (memory inference); empty for everything else.
    pub facts: Vec<crate::Fact>,
}

impl ItemGraph {
    pub fn empty(origin: Origin) -> Self {
        Self {
            origin,
            entities: Vec::new(),
            relations: Vec::new(),
            mentions: Vec::new(),
            facts: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }
}

/// A passage (chunk) of an item, by its position.
#[derive(Debug, Clone, Copy)]
pub struct Passage<'a> {
    pub position: u32,
    pub text: &'a str,
}

impl<'a> Passage<'a> {
    /// The passages of `(position, text)` pairs, borrowed.
    pub fn all(owned: &'a [(u32, String)]) -> Vec<Self> {
        owned
            .iter()
            .map(|(position, text)| Passage {
                position: *position,
                text,
            })
            .collect()
    }
}

/// The name as shown: lowercased, whitespace collapsed, at most [`MAX_NAME_CHARS`].
pub fn display_name(name: &str) -> String {
    let lowered = name.to_lowercase();
    let collapsed = lowered.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate_chars(&collapsed, MAX_NAME_CHARS)
}

/// What entities of the same name are merged on: the display name without a leading article or
/// a trailing possessive, curly apostrophes straightened.
pub fn entity_key(name: &str) -> String {
    let name = display_name(name).replace('\u{2019}', "'");
    let name = name.strip_prefix("the ").map(str::to_owned).unwrap_or(name);
    let name = name.strip_suffix("'s").map(str::to_owned).unwrap_or(name);
    name.trim_matches(|c: char| !c.is_alphanumeric()).to_owned()
}

/// A predicate in UPPER_SNAKE: words of letters and digits, auxiliaries and articles dropped
/// ("is owned by" -> "OWNED_BY"); `RELATED_TO` when nothing is left.
pub fn canonical_predicate(raw: &str) -> String {
    const DROPPED: &[&str] = &[
        "a", "am", "an", "are", "be", "been", "being", "is", "its", "the", "their", "was", "were",
    ];
    let lowered: Vec<String> = raw
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    // `has` and the like before a participle are auxiliaries ("has been guiding", "had
    // acquired"); before anything else they are the verb ("has an office in").
    let auxiliary = |at: usize| {
        ["has", "have", "had"].contains(&lowered[at].as_str())
            && lowered
                .get(at + 1)
                .is_some_and(|next| next == "been" || next.ends_with("ed") || next.ends_with("en"))
    };
    let words: Vec<String> = (0..lowered.len())
        .filter(|&at| !DROPPED.contains(&lowered[at].as_str()) && !auxiliary(at))
        .map(|at| lowered[at].to_uppercase())
        .collect();
    if words.is_empty() {
        "RELATED_TO".to_owned()
    } else {
        truncate_chars(&words.join("_"), MAX_NAME_CHARS)
    }
}

/// At most `most` characters of `text`.
pub fn truncate_chars(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_merge_spellings_of_one_name() {
        assert_eq!(entity_key("The  Beatles"), "beatles");
        assert_eq!(entity_key("Acme Corp’s"), "acme corp");
        assert_eq!(entity_key("acme corp"), "acme corp");
        let by_id = Entity::new("Ana Ruiz", "EMAIL", Some("Ana@Example.com".into()));
        assert_eq!(by_id.key, "id:ana@example.com");
        assert_eq!(by_id.name, "ana ruiz");
    }

    #[test]
    fn predicates_are_upper_snake_without_auxiliaries() {
        assert_eq!(canonical_predicate("is owned by"), "OWNED_BY");
        assert_eq!(canonical_predicate("works for"), "WORKS_FOR");
        assert_eq!(canonical_predicate("was born in"), "BORN_IN");
        assert_eq!(canonical_predicate("is"), "RELATED_TO");
        assert_eq!(canonical_predicate("has been guiding"), "GUIDING");
        assert_eq!(canonical_predicate("had acquired"), "ACQUIRED");
        assert_eq!(canonical_predicate("has an office in"), "HAS_OFFICE_IN");
        assert_eq!(canonical_predicate(""), "RELATED_TO");
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_chars("ééé", 2), "éé");
        assert_eq!(truncate_chars("ab", 5), "ab");
    }
}
