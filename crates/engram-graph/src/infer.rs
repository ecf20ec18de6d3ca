//! Memory inference by rules: what a user says about themselves in the first person ("I
//! prefer…", "I moved to…", "my X is…") as statements about the user, each in a slot, so that a
//! later statement in the same slot with another value supersedes it. Only the user's own words
//! are read: assistant turns (which may repeat what was recalled) never are.

use std::sync::OnceLock;

use regex::Regex;

use crate::model::truncate_chars;

/// Longest value a fact keeps, in characters.
const VALUE_MAX_CHARS: usize = 120;
/// Most facts one memory gives.
pub const FACTS_PER_MEMORY_MAX: usize = 50;

/// A preference, trait or fact about the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// What it is about; a user has one current value per slot (`lives_in`,
    /// `attribute:favorite color`, `taste:green tea`, ...).
    pub slot: String,
    /// The value, lowercased, for comparison (`lisbon`, `likes`).
    pub value: String,
    /// The fact as a sentence about the user ("Ana lives in Lisbon.").
    pub statement: String,
}

/// How one rule reads a clause: its pattern (a named group `v`, and `k` for attributes) and
/// what it makes of the match.
struct Rule {
    pattern: &'static str,
    make: fn(user: &str, key: &str, value: &str) -> (String, String, String),
}

fn taste(v: &str, verdict: &str, verb: &str, user: &str) -> (String, String, String) {
    (
        format!("taste:{}", v.to_lowercase()),
        verdict.to_owned(),
        format!("{user} {verb} {v}."),
    )
}

const RULES: &[Rule] = &[
    Rule {
        pattern: r"^i (?:really |much |strongly )?(?:prefer|favou?r) (?P<v>.+)$",
        make: |user, _, v| taste(v, "likes", "prefers", user),
    },
    Rule {
        pattern: r"^i (?:really |absolutely |just |do )?(?:love|like|enjoy|adore) (?P<v>.+)$",
        make: |user, _, v| taste(v, "likes", "likes", user),
    },
    Rule {
        pattern: r"^i (?:really |absolutely |just )?(?:hate|dislike|detest|can't stand|cannot stand|don't like|do not like|don't enjoy|do not enjoy) (?P<v>.+)$",
        make: |user, _, v| taste(v, "dislikes", "dislikes", user),
    },
    Rule {
        pattern: r"^i (?:just |recently |have |'ve )?(?:moved|relocated) (?:back )?to (?P<v>.+)$",
        make: |user, _, v| lives_in(user, v),
    },
    Rule {
        pattern: r"^i (?:now |currently )?(?:live|reside|am living|'m living) in (?P<v>.+)$",
        make: |user, _, v| lives_in(user, v),
    },
    Rule {
        pattern: r"^i(?: am|'m) (?:now |currently )?based in (?P<v>.+)$",
        make: |user, _, v| lives_in(user, v),
    },
    Rule {
        pattern: r"^i (?:now |currently )?(?:work|am working|'m working) (?:at|for) (?P<v>.+)$",
        make: |user, _, v| {
            (
                "works_for".into(),
                v.to_lowercase(),
                format!("{user} works for {v}."),
            )
        },
    },
    Rule {
        pattern: r"^i (?:now |currently )?(?:work|am working|'m working) as (?:an? )?(?P<v>.+)$",
        make: |user, _, v| {
            (
                "occupation".into(),
                v.to_lowercase(),
                format!("{user} works as {v}."),
            )
        },
    },
    Rule {
        pattern: r"^i(?: am|'m) (?P<v>vegetarian|vegan|pescatarian|lactose intolerant|gluten intolerant|left-handed|right-handed|married|single|divorced|engaged|retired|pregnant)$",
        make: |user, _, v| {
            (
                format!("trait:{}", v.to_lowercase()),
                "yes".into(),
                format!("{user} is {v}."),
            )
        },
    },
    Rule {
        pattern: r"^i(?: am|'m) allergic to (?P<v>.+)$",
        make: |user, _, v| {
            (
                format!("allergy:{}", v.to_lowercase()),
                "yes".into(),
                format!("{user} is allergic to {v}."),
            )
        },
    },
    Rule {
        pattern: r"^i (?:always|usually|often|never|rarely) (?P<v>.+)$",
        make: |user, _, v| habit(user, v),
    },
    Rule {
        pattern: r"^(?:please )?call me (?P<v>.+)$",
        make: |user, _, v| attribute(user, "name", v),
    },
    Rule {
        pattern: r"^my (?P<k>[\p{L}\p{N}' -]{1,40}?) (?:is|are|was) (?P<v>.+)$",
        make: |user, k, v| attribute(user, k, v),
    },
];

fn lives_in(user: &str, v: &str) -> (String, String, String) {
    (
        "lives_in".into(),
        v.to_lowercase(),
        format!("{user} lives in {v}."),
    )
}

fn habit(user: &str, v: &str) -> (String, String, String) {
    // "I always take the train": the whole clause is the habit, kept as said.
    (
        format!("habit:{}", v.to_lowercase()),
        "yes".into(),
        format!("{user} {v}."),
    )
}

fn attribute(user: &str, key: &str, v: &str) -> (String, String, String) {
    let key = key.trim().to_lowercase();
    (
        format!("attribute:{key}"),
        v.to_lowercase(),
        format!("{user}'s {key} is {v}."),
    )
}

fn compiled() -> &'static [Regex] {
    static COMPILED: OnceLock<Vec<Regex>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        RULES
            .iter()
            .map(|r| Regex::new(&format!("(?i){}", r.pattern)).expect("inference rules compile"))
            .collect()
    })
}

fn sentence_ends() -> &'static Regex {
    static ENDS: OnceLock<Regex> = OnceLock::new();
    ENDS.get_or_init(|| Regex::new(r"[.!;\n]+\s*").expect("sentence ends compile"))
}

fn joins() -> &'static Regex {
    static JOINS: OnceLock<Regex> = OnceLock::new();
    // `and`/`but`/`so`/`also` before a new first-person subject starts a new clause.
    JOINS.get_or_init(|| {
        Regex::new(r"(?i),?\s+(?:and|but|so|also)\s+((?:i|my|i'm|i've)\b)")
            .expect("clause joins compile")
    })
}

/// The clauses of a text: its sentences, each cut before a joined first-person subject.
fn clauses(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for sentence in sentence_ends().split(text) {
        let mut start = 0;
        for found in joins().captures_iter(sentence) {
            let (Some(join), Some(subject)) = (found.get(0), found.get(1)) else {
                continue;
            };
            out.push(&sentence[start..join.start()]);
            start = subject.start();
        }
        out.push(&sentence[start..]);
    }
    out
}

fn lead_in() -> &'static Regex {
    static LEAD_IN: OnceLock<Regex> = OnceLock::new();
    LEAD_IN.get_or_init(|| {
        Regex::new(r"(?i)^(?:(?:so|also|actually|well|oh|btw|now|and|but|yes|yeah|honestly|by the way)[, ]+)+")
            .expect("lead-ins compile")
    })
}

fn tail() -> &'static Regex {
    static TAIL: OnceLock<Regex> = OnceLock::new();
    // Where a value ends: a comma, a reason, or a time phrase after it.
    TAIL.get_or_init(|| {
        Regex::new(r"(?i)(?:,|\s+(?:because|since|as of|when|while|though|although|these days|nowadays|right now|lately|last (?:week|month|year)|this (?:week|month|year)|yesterday|today|recently|in (?:january|february|march|april|may|june|july|august|september|october|november|december|\d{4}))\b).*$")
            .expect("value tails compile")
    })
}

fn trailer() -> &'static Regex {
    static TRAILER: OnceLock<Regex> = OnceLock::new();
    // Words that end a value without belonging to it: "I live in Porto now".
    TRAILER.get_or_init(|| {
        Regex::new(r"(?i)(?:\s+(?:now|anymore|any more|again|too|as well|then))+$")
            .expect("value trailers compile")
    })
}

/// The user's own words in a memory: every line but the assistant's turns (`Assistant:` up to
/// the next `User:`), the `User:` marks dropped.
fn user_words(text: &str) -> String {
    let mut words = String::new();
    let mut assistant = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let lower = trimmed.get(..10).unwrap_or(trimmed).to_lowercase();
        if lower.starts_with("assistant:") {
            assistant = true;
            continue;
        }
        let line = if lower.starts_with("user:") {
            assistant = false;
            &trimmed[5..]
        } else {
            line
        };
        if !assistant {
            words.push_str(line);
            words.push('\n');
        }
    }
    words
}

/// The kinds of fact inference makes, as ingestion instructions name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Taste,
    Place,
    Work,
    Trait,
    Health,
    Habit,
    Detail,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Taste,
        Kind::Place,
        Kind::Work,
        Kind::Trait,
        Kind::Health,
        Kind::Habit,
        Kind::Detail,
    ];

    /// Word stems that name the kind in instructions.
    fn stems(self) -> &'static [&'static str] {
        match self {
            Kind::Taste => &[
                "prefer", "taste", "like", "dislike", "food", "drink", "favou", "favor",
            ],
            Kind::Place => &[
                "location", "where", "live", "living", "city", "cities", "address", "home", "move",
                "moving", "relocat", "resid",
            ],
            Kind::Work => &[
                "work",
                "job",
                "employ",
                "career",
                "occupation",
                "profession",
                "compan",
            ],
            Kind::Trait => &["trait", "personalit", "character"],
            Kind::Health => &["allerg", "health", "medical", "diet"],
            Kind::Habit => &["habit", "routine"],
            Kind::Detail => &["detail", "attribute", "birthday", "email", "phone"],
        }
    }

    fn of_slot(slot: &str) -> Kind {
        match slot.split(':').next().unwrap_or_default() {
            "taste" => Kind::Taste,
            "lives_in" => Kind::Place,
            "works_for" | "works_as" => Kind::Work,
            "trait" => Kind::Trait,
            "allergy" => Kind::Health,
            "habit" => Kind::Habit,
            _ => Kind::Detail,
        }
    }
}

/// What of a memory's facts its ingestion instructions (`custom_instructions`, with the
/// database's and the collection's) let inference keep, as far as rules can read them: a
/// sentence saying "only" keeps only the kinds of fact it names ("Only remember food
/// preferences and where the user lives"); a sentence saying "don't", "do not", "never",
/// "ignore", "skip", "exclude", "avoid" or "no" leaves out the kinds it names ("Never store
/// health details"). Kinds: tastes, places, work, traits, health, habits, other details.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Focus {
    only: Vec<Kind>,
    never: Vec<Kind>,
}

impl Focus {
    pub fn of(instructions: &str) -> Self {
        let mut focus = Focus::default();
        let lower = instructions.to_lowercase().replace('\u{2019}', "'");
        for sentence in lower.split(['.', ';', '\n', '!']) {
            let words: Vec<&str> = sentence
                .split(|c: char| !(c.is_alphanumeric() || c == '\''))
                .filter(|w| !w.is_empty())
                .collect();
            let named: Vec<Kind> = Kind::ALL
                .into_iter()
                .filter(|kind| {
                    words
                        .iter()
                        .any(|w| kind.stems().iter().any(|stem| w.starts_with(stem)))
                })
                .collect();
            if named.is_empty() {
                continue;
            }
            let negated = words.iter().any(|w| {
                matches!(
                    *w,
                    "don't"
                        | "dont"
                        | "not"
                        | "never"
                        | "ignore"
                        | "skip"
                        | "exclude"
                        | "avoid"
                        | "no"
                        | "without"
                )
            });
            let target = if negated {
                &mut focus.never
            } else if words.contains(&"only") {
                &mut focus.only
            } else {
                continue;
            };
            for kind in named {
                if !target.contains(&kind) {
                    target.push(kind);
                }
            }
        }
        focus
    }

    /// Whether a fact in `slot` is kept.
    pub fn keeps(&self, slot: &str) -> bool {
        let kind = Kind::of_slot(slot);
        !self.never.contains(&kind) && (self.only.is_empty() || self.only.contains(&kind))
    }
}

/// The facts a memory's text states about its user (`user`, as the statements name them), in
/// the order said, the kinds its `instructions` leave out dropped (see [`Focus`]); a later fact
/// in a slot replaces an earlier one of the same memory. Questions are not statements.
pub fn infer(text: &str, user: &str, instructions: &str) -> Vec<Fact> {
    let focus = Focus::of(instructions);
    let user = user_label(user);
    let words = user_words(text);
    let mut facts: Vec<Fact> = Vec::new();
    for sentence in split_keeping_questions(&words) {
        if sentence.trim_end().ends_with('?') {
            continue;
        }
        for clause in clauses(sentence) {
            let clause = lead_in().replace(clause.trim(), "");
            let clause = clause.trim().trim_end_matches(['.', '!', ',', ';', ' ']);
            if clause.is_empty() {
                continue;
            }
            let clause = clause.replace('\u{2019}', "'");
            for (rule, pattern) in RULES.iter().zip(compiled()) {
                let Some(found) = pattern.captures(&clause) else {
                    continue;
                };
                let value = found.name("v").map_or("", |m| m.as_str());
                let value = tail().replace(value, "");
                let value = trailer().replace(&value, "");
                let value = truncate_chars(
                    value.trim().trim_end_matches(['.', '!', ',']),
                    VALUE_MAX_CHARS,
                );
                if value.is_empty() {
                    break;
                }
                let key = found.name("k").map_or("", |m| m.as_str());
                let (slot, value, statement) = (rule.make)(user, key, &value);
                if !focus.keeps(&slot) {
                    break;
                }
                facts.retain(|f| f.slot != slot);
                facts.push(Fact {
                    slot,
                    value,
                    statement,
                });
                break;
            }
        }
        if facts.len() >= FACTS_PER_MEMORY_MAX {
            facts.truncate(FACTS_PER_MEMORY_MAX);
            break;
        }
    }
    facts
}

/// The name statements give the user: `user`, or `User` when none is known.
pub fn user_label(user: &str) -> &str {
    if user.trim().is_empty() {
        "User"
    } else {
        user.trim()
    }
}

/// The words of a memory the user said (assistant turns left out), which inference reads.
pub fn said_by_user(text: &str) -> String {
    user_words(text)
}

/// One fact as a model gives it, made the way the rules make theirs (the same slots, values and
/// statements, so the two supersede each other alike): `kind` is `preference` (`value`
/// `likes` or `dislikes` of `about`), `lives_in`, `works_for`, `occupation` (`value`), `trait`,
/// `allergy`, `habit` (`about`), or `attribute` (`about` = `value`). `None` for an unknown kind
/// or an empty field.
pub fn fact_of(kind: &str, about: &str, value: &str, user: &str) -> Option<Fact> {
    let (about, value) = (
        truncate_chars(
            about.trim().trim_end_matches(['.', '!', ',']),
            VALUE_MAX_CHARS,
        ),
        truncate_chars(
            value.trim().trim_end_matches(['.', '!', ',']),
            VALUE_MAX_CHARS,
        ),
    );
    let needs = |field: &str| (!field.is_empty()).then_some(());
    let user = user_label(user);
    let (slot, value, statement) = match kind {
        "preference" => {
            needs(&about)?;
            if ["dislikes", "dislike", "hates", "hate"]
                .iter()
                .any(|v| value.eq_ignore_ascii_case(v))
            {
                taste(&about, "dislikes", "dislikes", user)
            } else {
                taste(&about, "likes", "prefers", user)
            }
        }
        "lives_in" => {
            needs(&value)?;
            lives_in(user, &value)
        }
        "works_for" => {
            needs(&value)?;
            (
                "works_for".into(),
                value.to_lowercase(),
                format!("{user} works for {value}."),
            )
        }
        "occupation" => {
            needs(&value)?;
            (
                "occupation".into(),
                value.to_lowercase(),
                format!("{user} works as {value}."),
            )
        }
        "trait" => {
            needs(&about)?;
            (
                format!("trait:{}", about.to_lowercase()),
                "yes".into(),
                format!("{user} is {about}."),
            )
        }
        "allergy" => {
            needs(&about)?;
            (
                format!("allergy:{}", about.to_lowercase()),
                "yes".into(),
                format!("{user} is allergic to {about}."),
            )
        }
        "habit" => {
            needs(&about)?;
            habit(user, &about)
        }
        "attribute" => {
            needs(&about)?;
            needs(&value)?;
            attribute(user, &about, &value)
        }
        _ => return None,
    };
    Some(Fact {
        slot,
        value,
        statement,
    })
}

/// Sentences with their end mark, so questions can be told apart.
fn split_keeping_questions(text: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if matches!(c, '?' | '\n') {
            let end = at + c.len_utf8();
            sentences.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        sentences.push(&text[start..]);
    }
    sentences
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str) -> Vec<(String, String, String)> {
        infer(text, "Ana", "")
            .into_iter()
            .map(|f| (f.slot, f.value, f.statement))
            .collect()
    }

    fn fact(slot: &str, value: &str, statement: &str) -> (String, String, String) {
        (slot.into(), value.into(), statement.into())
    }

    /// `custom_instructions` keep or leave out kinds of fact; what rules cannot read of them
    /// changes nothing.
    #[test]
    fn instructions_name_the_kinds_of_fact_kept() {
        let text = "I love green tea. I live in Lisbon. I am allergic to peanuts. I work at Acme.";
        let slots = |instructions: &str| -> Vec<String> {
            infer(text, "Ana", instructions)
                .into_iter()
                .map(|f| f.slot)
                .collect()
        };
        let all = [
            "taste:green tea",
            "lives_in",
            "allergy:peanuts",
            "works_for",
        ];
        assert_eq!(slots(""), all);
        assert_eq!(slots("Be concise. Write in English."), all);
        assert_eq!(slots("Only remember where the user lives."), ["lives_in"]);
        assert_eq!(
            slots("Only keep food preferences and the user's job."),
            ["taste:green tea", "works_for"]
        );
        assert_eq!(
            slots("Never store health details; ignore what they like.\nDon't note employers."),
            ["lives_in"]
        );
        assert_eq!(
            slots("Only remember preferences and allergies. Do not keep allergies."),
            ["taste:green tea"],
            "leaving out wins"
        );
    }

    #[test]
    fn first_person_statements_become_facts_about_the_user() {
        assert_eq!(
            said("I moved to Lisbon in March and I love green tea."),
            [
                fact("lives_in", "lisbon", "Ana lives in Lisbon."),
                fact("taste:green tea", "likes", "Ana likes green tea."),
            ]
        );
        assert_eq!(
            said("Actually, I prefer dark mode. My favorite color is teal!"),
            [
                fact("taste:dark mode", "likes", "Ana prefers dark mode."),
                fact(
                    "attribute:favorite color",
                    "teal",
                    "Ana's favorite color is teal."
                ),
            ]
        );
        assert_eq!(
            said("I can’t stand cilantro, it tastes like soap. I'm vegetarian."),
            [
                fact("taste:cilantro", "dislikes", "Ana dislikes cilantro."),
                fact("trait:vegetarian", "yes", "Ana is vegetarian."),
            ]
        );
        assert_eq!(
            said("I work at Acme Corp since 2020; I'm allergic to peanuts"),
            [
                fact("works_for", "acme corp", "Ana works for Acme Corp."),
                fact("allergy:peanuts", "yes", "Ana is allergic to peanuts."),
            ]
        );
    }

    #[test]
    fn assistant_turns_questions_and_other_people_are_not_read() {
        let pairs =
            "User: What is my sister's name?\nAssistant: Your sister is Rita. I love helping.\n\n\
                     User: Thanks! My sister's name is Rita\nAssistant: I prefer tea.";
        assert_eq!(
            said(pairs),
            [fact(
                "attribute:sister's name",
                "rita",
                "Ana's sister's name is Rita."
            )]
        );
        assert!(said("Do I like jazz? She loves jazz. We moved to Oslo.").is_empty());
        assert_eq!(
            infer("I live in Porto", " ", "")[0].statement,
            "User lives in Porto."
        );
    }

    #[test]
    fn a_later_statement_in_a_slot_wins_within_a_memory() {
        assert_eq!(
            said("I live in Porto. Now I live in Braga too."),
            [fact("lives_in", "braga", "Ana lives in Braga.")]
        );
    }
}
