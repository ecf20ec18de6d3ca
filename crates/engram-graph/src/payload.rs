//! Bring your own graph: a client's `graph_payload` for one source, checked against the
//! reference's limits at ingestion and turned into the source's [`ItemGraph`] once its chunks
//! exist (each relation tied to the chunk its evidence best matches).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::model::{
    canonical_predicate, display_name, truncate_chars, Entity, ItemGraph, Mention, Origin, Passage,
    Relation, MAX_CONTEXT_CHARS, MAX_ENTITIES, MAX_NAME_CHARS, MAX_RELATIONS,
    MAX_RELATIONS_PER_ENTITY,
};

/// The graph a client gives for one source: entities by the client's own keys, and relations
/// between them (`source` and `target` name an entity by key, or else by name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GraphPayload {
    pub entities: BTreeMap<String, PayloadEntity>,
    pub relations: Vec<PayloadRelation>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PayloadEntity {
    pub name: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PayloadRelation {
    pub source: String,
    pub target: String,
    pub predicate: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporal_details: Option<String>,
}

/// A payload after its check: the relations that can be stored (ends resolved to entity keys)
/// with the entities they use, and why each refused relation was refused.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckedPayload {
    pub payload: GraphPayload,
    pub refused: Vec<String>,
}

impl CheckedPayload {
    /// How many relations will be stored.
    pub fn relations_created(&self) -> u32 {
        u32::try_from(self.payload.relations.len()).unwrap_or(u32::MAX)
    }

    /// Why relations were refused, in one line (empty when none were): the count, then the
    /// first few reasons.
    pub fn relations_error(&self) -> String {
        const SHOWN: usize = 5;
        if self.refused.is_empty() {
            return String::new();
        }
        let mut text = format!(
            "{} relation(s) not created: {}",
            self.refused.len(),
            self.refused[..self.refused.len().min(SHOWN)].join("; ")
        );
        if self.refused.len() > SHOWN {
            text.push_str("; ...");
        }
        text
    }
}

impl GraphPayload {
    /// Checks the payload: over the entity or relation limit is an error for the whole source
    /// (nothing is worth storing); a relation with a missing field, an end that names no
    /// entity, an over-long predicate, name or context, or an entity over its share of
    /// relations is refused on its own. Entities no kept relation uses are dropped.
    pub fn check(self) -> Result<CheckedPayload, String> {
        if self.entities.len() > MAX_ENTITIES {
            return Err(format!(
                "{} entities; at most {MAX_ENTITIES} are allowed per source",
                self.entities.len()
            ));
        }
        if self.relations.len() > MAX_RELATIONS {
            return Err(format!(
                "{} relations; at most {MAX_RELATIONS} are allowed per source",
                self.relations.len()
            ));
        }
        let mut bad_entities: HashMap<&str, String> = HashMap::new();
        for (key, entity) in &self.entities {
            let name = entity.name.trim();
            let why = if name.is_empty() {
                Some(format!("entity `{key}` has no name"))
            } else if name.chars().count() > MAX_NAME_CHARS {
                Some(format!(
                    "entity `{key}` has a name over {MAX_NAME_CHARS} characters"
                ))
            } else if entity
                .kind
                .as_deref()
                .is_some_and(|t| t.chars().count() > MAX_NAME_CHARS)
            {
                Some(format!(
                    "entity `{key}` has a type over {MAX_NAME_CHARS} characters"
                ))
            } else {
                None
            };
            if let Some(why) = why {
                bad_entities.insert(key, why);
            }
        }
        // Ends are keys of `entities`, or else (case aside) an entity's name.
        let by_name: HashMap<String, &str> = self
            .entities
            .iter()
            .map(|(key, e)| (display_name(&e.name), key.as_str()))
            .collect();
        let resolve = |end: &str| -> Option<String> {
            if self.entities.contains_key(end) {
                Some(end.to_owned())
            } else {
                by_name.get(&display_name(end)).map(|k| (*k).to_owned())
            }
        };
        let mut uses: HashMap<String, usize> = HashMap::new();
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        for (i, r) in self.relations.iter().enumerate() {
            let refuse = |why: String| format!("relations[{i}]: {why}");
            if r.source.trim().is_empty() || r.target.trim().is_empty() {
                refused.push(refuse("`source` and `target` are required".into()));
                continue;
            }
            if r.predicate.trim().is_empty() {
                refused.push(refuse("`predicate` is required".into()));
                continue;
            }
            if r.predicate.chars().count() > MAX_NAME_CHARS {
                refused.push(refuse(format!(
                    "the predicate is over {MAX_NAME_CHARS} characters"
                )));
                continue;
            }
            if r.context
                .as_deref()
                .is_some_and(|c| c.chars().count() > MAX_CONTEXT_CHARS)
            {
                refused.push(refuse(format!(
                    "the context is over {MAX_CONTEXT_CHARS} characters"
                )));
                continue;
            }
            if r.temporal_details
                .as_deref()
                .is_some_and(|t| t.chars().count() > MAX_NAME_CHARS)
            {
                refused.push(refuse(format!(
                    "temporal_details is over {MAX_NAME_CHARS} characters"
                )));
                continue;
            }
            let (Some(source), Some(target)) = (resolve(&r.source), resolve(&r.target)) else {
                let missing = if resolve(&r.source).is_none() {
                    &r.source
                } else {
                    &r.target
                };
                refused.push(refuse(format!(
                    "`{missing}` names no entity of the payload"
                )));
                continue;
            };
            if let Some(why) = bad_entities
                .get(source.as_str())
                .or_else(|| bad_entities.get(target.as_str()))
            {
                refused.push(refuse(why.clone()));
                continue;
            }
            let over = [&source, &target]
                .into_iter()
                .find(|k| uses.get(k.as_str()).copied().unwrap_or(0) >= MAX_RELATIONS_PER_ENTITY);
            if let Some(key) = over {
                refused.push(refuse(format!(
                    "entity `{key}` is in more than {MAX_RELATIONS_PER_ENTITY} relations"
                )));
                continue;
            }
            *uses.entry(source.clone()).or_default() += 1;
            if target != source {
                *uses.entry(target.clone()).or_default() += 1;
            }
            kept.push(PayloadRelation {
                source,
                target,
                ..r.clone()
            });
        }
        let used: BTreeSet<&String> = kept.iter().flat_map(|r| [&r.source, &r.target]).collect();
        let entities = self
            .entities
            .iter()
            .filter(|(key, _)| used.contains(key))
            .map(|(key, e)| (key.clone(), e.clone()))
            .collect();
        Ok(CheckedPayload {
            payload: GraphPayload {
                entities,
                relations: kept,
            },
            refused,
        })
    }

    /// The source's graph from a checked payload: each relation in the passage its evidence
    /// (its context, else its ends and predicate) shares the most words with (the first of
    /// equals), each entity mentioned there and in every passage that names it.
    pub fn to_graph(&self, passages: &[Passage<'_>]) -> ItemGraph {
        let mut graph = ItemGraph::empty(Origin::Byog);
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (key, e) in &self.entities {
            let kind = e
                .kind
                .as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map_or_else(|| "ENTITY".to_owned(), str::to_uppercase);
            let identifier = e
                .identifier
                .as_deref()
                .map(str::trim)
                .filter(|i| !i.is_empty())
                .map(|i| truncate_chars(i, MAX_NAME_CHARS));
            let mut entity = Entity::new(&e.name, &kind, identifier);
            if let Some(ns) = e.namespace.as_deref().filter(|n| !n.trim().is_empty()) {
                entity.namespace = truncate_chars(ns.trim(), MAX_NAME_CHARS);
            }
            index.insert(key.as_str(), graph.entities.len());
            graph.entities.push(entity);
        }
        let passage_words: Vec<HashSet<String>> = passages.iter().map(|p| words(p.text)).collect();
        let lowered: Vec<String> = passages.iter().map(|p| p.text.to_lowercase()).collect();
        let mut mentions = BTreeSet::new();
        for (at, entity) in graph.entities.iter().enumerate() {
            if entity.name.chars().count() < 3 {
                continue;
            }
            for (p, text) in passages.iter().zip(&lowered) {
                if text.contains(&entity.name) {
                    mentions.insert(Mention {
                        entity: at,
                        passage: p.position,
                    });
                }
            }
        }
        for r in &self.relations {
            let (Some(&source), Some(&target)) =
                (index.get(r.source.as_str()), index.get(r.target.as_str()))
            else {
                continue;
            };
            let evidence = match r.context.as_deref().filter(|c| !c.trim().is_empty()) {
                Some(context) => context.to_owned(),
                None => format!(
                    "{} {} {}",
                    graph.entities[source].name, r.predicate, graph.entities[target].name
                ),
            };
            let wanted = words(&evidence);
            let passage = passages
                .iter()
                .zip(&passage_words)
                .map(|(p, have)| (wanted.intersection(have).count(), p.position))
                .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
                .map_or(0, |(_, position)| position);
            graph.relations.push(Relation {
                source,
                target,
                raw_predicate: truncate_chars(r.predicate.trim(), MAX_NAME_CHARS),
                canonical_predicate: canonical_predicate(&r.predicate),
                context: truncate_chars(&evidence, MAX_CONTEXT_CHARS),
                confidence: 1.0,
                temporal_details: r
                    .temporal_details
                    .as_deref()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
                passage,
            });
        }
        graph.mentions = mentions.into_iter().collect();
        graph
    }
}

/// The lowercased words of a text (letters and digits, two characters or more).
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(json: serde_json::Value) -> GraphPayload {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn relations_are_tied_to_the_passage_their_evidence_matches() {
        let checked = payload(serde_json::json!({
            "entities": {
                "ana": {"name": "Ana Ruiz", "type": "person", "identifier": "ana@acme.io"},
                "acme": {"name": "Acme Corp", "type": "ORGANIZATION"},
                "unused": {"name": "Nobody"}
            },
            "relations": [
                {"source": "ana", "target": "acme", "predicate": "works for",
                 "context": "Ana Ruiz joined Acme Corp in 2021", "temporal_details": "since 2021"}
            ]
        }))
        .check()
        .unwrap();
        assert!(checked.refused.is_empty());
        assert_eq!(checked.relations_created(), 1);
        assert_eq!(
            checked.payload.entities.len(),
            2,
            "unused entities are dropped"
        );
        let passages = [
            Passage {
                position: 0,
                text: "Quarterly numbers for the northern region.",
            },
            Passage {
                position: 1,
                text: "Ana Ruiz joined Acme Corp in 2021 as an engineer.",
            },
        ];
        let graph = checked.payload.to_graph(&passages);
        assert_eq!(graph.origin, Origin::Byog);
        assert_eq!(graph.relations.len(), 1);
        let r = &graph.relations[0];
        assert_eq!(r.passage, 1);
        assert_eq!(r.canonical_predicate, "WORKS_FOR");
        assert_eq!(r.raw_predicate, "works for");
        assert_eq!(r.temporal_details.as_deref(), Some("since 2021"));
        let ana = &graph.entities[r.source];
        assert_eq!(ana.kind, "PERSON");
        assert_eq!(ana.key, "id:ana@acme.io");
        assert_eq!(graph.entities[r.target].name, "acme corp");
        assert!(graph.mentions.contains(&Mention {
            entity: r.target,
            passage: 1
        }));
    }

    #[test]
    fn bad_relations_are_refused_one_by_one_and_limits_refuse_the_source() {
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        let checked = payload(serde_json::json!({
            "entities": {"a": {"name": "Alpha"}, "b": {"name": "Beta"}, "e": {"name": ""}},
            "relations": [
                {"source": "a", "target": "b", "predicate": "feeds"},
                {"source": "Alpha", "target": "BETA", "predicate": "watches"},
                {"source": "a", "target": "zeta", "predicate": "feeds"},
                {"source": "a", "target": "b", "predicate": ""},
                {"source": "a", "target": "b", "predicate": long},
                {"source": "a", "target": "e", "predicate": "names"},
                {"source": "a", "target": "b", "predicate": "p", "context": "c".repeat(MAX_CONTEXT_CHARS + 1)}
            ]
        }))
        .check()
        .unwrap();
        assert_eq!(checked.relations_created(), 2, "{:?}", checked.refused);
        assert_eq!(
            checked.payload.relations[1].source, "a",
            "names resolve to keys"
        );
        assert_eq!(checked.refused.len(), 5);
        let error = checked.relations_error();
        assert!(error.starts_with("5 relation(s) not created"), "{error}");
        assert!(
            error.contains("relations[2]: `zeta` names no entity"),
            "{error}"
        );

        let many: BTreeMap<String, PayloadEntity> = (0..=MAX_ENTITIES)
            .map(|i| {
                (
                    format!("e{i}"),
                    PayloadEntity {
                        name: format!("n{i}"),
                        ..Default::default()
                    },
                )
            })
            .collect();
        let err = GraphPayload {
            entities: many,
            relations: Vec::new(),
        }
        .check()
        .unwrap_err();
        assert!(err.contains("at most 5000"), "{err}");
    }

    #[test]
    fn an_entity_takes_part_in_a_bounded_number_of_relations() {
        let relations = (0..=MAX_RELATIONS_PER_ENTITY)
            .map(|i| PayloadRelation {
                source: "hub".into(),
                target: format!("t{}", i % 3),
                predicate: "links".into(),
                ..Default::default()
            })
            .collect();
        let mut entities = BTreeMap::new();
        for key in ["hub", "t0", "t1", "t2"] {
            entities.insert(
                key.to_owned(),
                PayloadEntity {
                    name: key.to_owned(),
                    ..Default::default()
                },
            );
        }
        let checked = GraphPayload {
            entities,
            relations,
        }
        .check()
        .unwrap();
        assert_eq!(checked.payload.relations.len(), MAX_RELATIONS_PER_ENTITY);
        assert_eq!(checked.refused.len(), 1);
    }
}
