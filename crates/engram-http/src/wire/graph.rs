//! The graph's wire shapes, both generations: entities, relation evidence and the relations of
//! one (source, target) pair with all their evidence.

use engram_app::{EntityRecord, RelationRecord};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// An entity.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct EntityDto {
    /// Lowercased.
    pub name: String,
    /// PERSON, ORGANIZATION, LOCATION, EMAIL, URL, TICKET, ERROR_CODE, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub namespace: String,
    pub entity_id: String,
    /// An email address, URL or id that names the entity anywhere; null when it has none.
    pub identifier: Option<String>,
}

impl From<&EntityRecord> for EntityDto {
    fn from(e: &EntityRecord) -> Self {
        Self {
            name: e.name.clone(),
            kind: e.kind.clone(),
            namespace: e.namespace.clone(),
            entity_id: e.entity_id(),
            identifier: e.identifier.clone(),
        }
    }
}

/// One piece of evidence for a relation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RelationEvidenceDto {
    /// UPPER_SNAKE: OWNED_BY, WORKS_FOR, RELATED_TO ...
    pub canonical_predicate: String,
    /// As written ("is owned by"); empty for a relation read from two names in one sentence.
    pub raw_predicate: String,
    /// The verbatim evidence.
    pub context: String,
    /// 0 to 1.
    pub confidence: f32,
    /// Dates the evidence names.
    pub temporal_details: Option<String>,
    /// When the relation was stored: RFC 3339 on `/context/relations`, epoch seconds elsewhere.
    #[schema(value_type = Object)]
    pub timestamp: Value,
    pub relationship_id: String,
    /// The chunk the evidence is in.
    pub chunk_id: String,
    pub source_entity_id: String,
    pub target_entity_id: String,
    /// `byog` for relations the client supplied; absent for extracted ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// The relations between one source and one target entity.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RelationGroupDto {
    pub source: EntityDto,
    pub target: EntityDto,
    pub relations: Vec<RelationEvidenceDto>,
    /// The chunk of the strongest evidence.
    pub chunk_id: String,
}

/// How a relation's `timestamp` is written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Timestamps {
    Rfc3339,
    EpochSeconds,
}

/// One group per (source, target) pair, strongest evidence first within a group and groups by
/// their strongest evidence (ties keep stored order).
pub(crate) fn relation_groups(
    records: &[RelationRecord],
    timestamps: Timestamps,
) -> Vec<RelationGroupDto> {
    let mut groups: Vec<(i64, i64, Vec<&RelationRecord>)> = Vec::new();
    for r in records {
        let pair = (r.source.entity_key, r.target.entity_key);
        match groups.iter_mut().find(|g| (g.0, g.1) == pair) {
            Some(group) => group.2.push(r),
            None => groups.push((pair.0, pair.1, vec![r])),
        }
    }
    for group in &mut groups {
        group
            .2
            .sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    }
    groups.sort_by(|a, b| b.2[0].confidence.total_cmp(&a.2[0].confidence));
    groups
        .into_iter()
        .map(|(_, _, evidence)| {
            let first = evidence[0];
            RelationGroupDto {
                source: EntityDto::from(&first.source),
                target: EntityDto::from(&first.target),
                chunk_id: first.chunk_id.clone(),
                relations: evidence
                    .into_iter()
                    .map(|r| evidence_dto(r, timestamps))
                    .collect(),
            }
        })
        .collect()
}

pub(crate) fn evidence_dto(r: &RelationRecord, timestamps: Timestamps) -> RelationEvidenceDto {
    let timestamp = match timestamps {
        Timestamps::Rfc3339 => Value::String(r.created_at.rfc3339()),
        Timestamps::EpochSeconds => serde_json::json!(r.created_at.as_millis() as f64 / 1000.0),
    };
    RelationEvidenceDto {
        canonical_predicate: r.canonical_predicate.clone(),
        raw_predicate: r.raw_predicate.clone(),
        context: r.context.clone(),
        confidence: r.confidence,
        temporal_details: r.temporal_details.clone(),
        timestamp,
        relationship_id: r.relationship_id(),
        chunk_id: r.chunk_id.clone(),
        source_entity_id: r.source.entity_id(),
        target_entity_id: r.target.entity_id(),
        origin: (r.origin.as_str() == "byog").then(|| "byog".to_owned()),
    }
}
