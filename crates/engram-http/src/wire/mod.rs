//! Wire types both generations share: schema fields, deprecated aliases, the item types of
//! ingestion, listing and deletion, and what retrieval shares. Each generation's own wire types
//! live in its folder.

pub(crate) mod graph;
pub(crate) mod items;
pub(crate) mod query;

use engram_app::SchemaFieldSpec;
use engram_types::schema::SchemaField;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::envelope::Deprecation;
use crate::error::ApiError;

/// One metadata schema field, as sent at creation and as returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FieldDto {
    /// Field name: letters, digits and `_`.
    pub name: String,
    /// `BOOL|INT8|INT16|INT32|INT64|FLOAT|DOUBLE|VARCHAR|JSON|ARRAY`, default `VARCHAR`.
    #[serde(default)]
    pub data_type: Option<String>,
    /// Default 1024.
    #[serde(default)]
    pub max_length: Option<u32>,
    /// Whether `metadata_filters` may match this field. Default false.
    #[serde(default)]
    pub enable_match: Option<bool>,
    #[serde(default)]
    pub enable_dense_embedding: Option<bool>,
    #[serde(default)]
    pub enable_sparse_embedding: Option<bool>,
    /// Default true.
    #[serde(default)]
    pub nullable: Option<bool>,
    /// Keys a field does not have: reported in `meta.ignored_parameters`.
    #[serde(flatten, default, skip_serializing)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

impl FieldDto {
    /// Notes, for each field of a schema sent as `parameter`, what of it is stored and not acted
    /// on: keys a field does not have, and the embedding flags (kept with the schema, but a
    /// field's values are matched by filters, never embedded into chunk text nor indexed as
    /// keywords).
    pub(crate) fn note_inert(fields: &[FieldDto], parameter: &str, ignored: &mut Ignored) {
        for (i, field) in fields.iter().enumerate() {
            for key in field.unknown.keys() {
                ignored.note(
                    format!("{parameter}[{i}].{key}"),
                    "not a key of a schema field",
                );
            }
            for (flag, set) in [
                ("enable_dense_embedding", field.enable_dense_embedding),
                ("enable_sparse_embedding", field.enable_sparse_embedding),
            ] {
                ignored.note_if(
                    set == Some(true),
                    &format!("{parameter}[{i}].{flag}"),
                    "stored with the schema; a field's values are matched by metadata_filters, \
                     not embedded into chunk text nor indexed as keywords",
                );
            }
        }
    }
}

impl From<FieldDto> for SchemaFieldSpec {
    fn from(f: FieldDto) -> Self {
        Self {
            name: f.name,
            data_type: f.data_type,
            max_length: f.max_length,
            enable_match: f.enable_match,
            enable_dense_embedding: f.enable_dense_embedding,
            enable_sparse_embedding: f.enable_sparse_embedding,
            nullable: f.nullable,
        }
    }
}

impl From<&SchemaField> for FieldDto {
    fn from(f: &SchemaField) -> Self {
        let data_type = serde_json::to_value(f.data_type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned));
        Self {
            name: f.name.clone(),
            data_type,
            max_length: Some(f.max_length),
            enable_match: Some(f.enable_match),
            enable_dense_embedding: Some(f.enable_dense_embedding),
            enable_sparse_embedding: Some(f.enable_sparse_embedding),
            nullable: Some(f.nullable),
            unknown: serde_json::Map::new(),
        }
    }
}

/// Deprecated aliases a request used, reported in `meta.deprecation`.
#[derive(Debug, Default)]
pub(crate) struct Deprecations(Vec<Deprecation>);

impl Deprecations {
    /// Resolves a field that may also arrive under its deprecated alias. Both present with
    /// different values is 400; the alias alone works and is reported.
    pub(crate) fn pick<T: PartialEq>(
        &mut self,
        current: Option<T>,
        alias: Option<T>,
        current_name: &'static str,
        alias_name: &'static str,
    ) -> Result<Option<T>, ApiError> {
        match (current, alias) {
            (Some(c), Some(a)) if c != a => Err(ApiError::invalid(format!(
                "`{current_name}` and its deprecated alias `{alias_name}` were both given with different values"
            ))),
            (Some(c), _) => Ok(Some(c)),
            (None, Some(a)) => {
                if self.0.iter().any(|d| d.deprecated_field == alias_name) {
                    return Ok(Some(a));
                }
                self.0.push(Deprecation {
                    deprecated: true,
                    deprecated_field: alias_name.into(),
                    preferred_field: current_name.into(),
                    deprecated_since: "2".into(),
                    message: format!("`{alias_name}` is deprecated; use `{current_name}`"),
                });
                Ok(Some(a))
            }
            (None, None) => Ok(None),
        }
    }

    /// Like [`Self::pick`] for a required field.
    pub(crate) fn require<T: PartialEq>(
        &mut self,
        current: Option<T>,
        alias: Option<T>,
        current_name: &'static str,
        alias_name: &'static str,
    ) -> Result<T, ApiError> {
        self.pick(current, alias, current_name, alias_name)?
            .ok_or_else(|| ApiError::invalid(format!("missing required field `{current_name}`")))
    }

    /// Resolves the database (required) and collection of a scoped call from their current
    /// names or deprecated aliases.
    pub(crate) fn scope(
        &mut self,
        database: Option<String>,
        tenant_id: Option<String>,
        collection: Option<String>,
        sub_tenant_id: Option<String>,
    ) -> Result<(engram_types::DatabaseName, Option<String>), ApiError> {
        let database = self.require(database, tenant_id, "database", "tenant_id")?;
        let database = engram_app::parse_database_name("database", &database)?;
        let collection = self.pick(collection, sub_tenant_id, "collection", "sub_tenant_id")?;
        Ok((database, collection))
    }

    /// [`Deprecations::scope`] of a query string's scope.
    pub(crate) fn scope_params(
        &mut self,
        params: ScopeParams,
    ) -> Result<(engram_types::DatabaseName, Option<String>), ApiError> {
        self.scope(
            params.database,
            params.tenant_id,
            params.collection,
            params.sub_tenant_id,
        )
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The deprecated names used, for the legacy generation's `Deprecation` header.
    pub(crate) fn fields(&self) -> Vec<&str> {
        self.0.iter().map(|d| d.deprecated_field.as_str()).collect()
    }

    pub(crate) fn into_vec(self) -> Vec<Deprecation> {
        self.0
    }
}

/// Reads an enumerated field the way clients write it: trimmed, in any case; empty is absent.
/// Use with `#[serde(default, deserialize_with = ..)]` on an `Option` of a wire enum.
pub(crate) fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<String>::deserialize(deserializer)?.map_or(Ok(None), |raw| {
        parse_enum(&raw).map_err(serde::de::Error::custom)
    })
}

/// [`lenient`] for a value read outside serde (a multipart form field).
pub(crate) fn parse_enum<T: serde::de::DeserializeOwned>(
    raw: &str,
) -> Result<Option<T>, serde::de::value::Error> {
    let value = raw.trim().to_ascii_lowercase();
    if value.is_empty() {
        return Ok(None);
    }
    T::deserialize(serde::de::value::StrDeserializer::new(&value)).map(Some)
}

/// Request fields accepted and not acted on, each with the reason: reported in
/// `meta.ignored_parameters`, so that no parameter is dropped silently.
#[derive(Debug, Default)]
pub(crate) struct Ignored(Vec<(String, String)>);

impl Ignored {
    pub(crate) fn note(&mut self, parameter: impl Into<String>, reason: impl Into<String>) {
        self.0.push((parameter.into(), reason.into()));
    }

    /// Notes `parameter` when it was sent.
    pub(crate) fn note_if(&mut self, sent: bool, parameter: &str, reason: &str) {
        if sent {
            self.note(parameter, reason);
        }
    }

    /// Notes every field of a body that its route does not know.
    pub(crate) fn unknown_fields(&mut self, unknown: &serde_json::Map<String, serde_json::Value>) {
        for field in unknown.keys() {
            self.note(field.clone(), "not a field of this route");
        }
    }

    /// The unknown fields of a body, noted.
    pub(crate) fn of_unknown(unknown: &serde_json::Map<String, serde_json::Value>) -> Self {
        let mut ignored = Self::default();
        ignored.unknown_fields(unknown);
        ignored
    }

    /// `parameter (reason); …` for a legacy `Warning` header: at most 20 entries (then how many
    /// more), visible ASCII only (anything else as `?`); `None` when nothing was ignored.
    pub(crate) fn summary(&self) -> Option<String> {
        const MOST: usize = 20;
        (!self.0.is_empty()).then(|| {
            let mut text = self
                .0
                .iter()
                .take(MOST)
                .map(|(parameter, reason)| {
                    let parameter: String = parameter.chars().take(100).collect();
                    format!("{parameter} ({reason})")
                })
                .collect::<Vec<_>>()
                .join("; ");
            if self.0.len() > MOST {
                text.push_str(&format!("; and {} more", self.0.len() - MOST));
            }
            text.chars()
                .map(|c| match c {
                    '"' => '\'',
                    c if c == ' ' || c.is_ascii_graphic() => c,
                    _ => '?',
                })
                .collect()
        })
    }

    /// `[{parameter, reason}]`; `None` when nothing was ignored.
    pub(crate) fn to_json(&self) -> Option<serde_json::Value> {
        (!self.0.is_empty()).then(|| {
            self.0
                .iter()
                .map(|(parameter, reason)| serde_json::json!({"parameter": parameter, "reason": reason}))
                .collect()
        })
    }
}

/// The scope of a current-generation call made with a query string: the database (required) and
/// its collection, each also accepted under its deprecated alias. Flattened into the query types.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ScopeParams {
    /// Database name.
    #[serde(default, deserialize_with = "present")]
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    #[serde(default, deserialize_with = "present")]
    pub tenant_id: Option<String>,
    /// Collection (the default collection when omitted).
    #[serde(default, deserialize_with = "present")]
    pub collection: Option<String>,
    /// Deprecated alias of `collection`.
    #[serde(default, deserialize_with = "present")]
    pub sub_tenant_id: Option<String>,
}

/// The scope of a current-generation call: the database (required) and its collection, each
/// also accepted under its deprecated alias. Flattened into the request types.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub(crate) struct ScopeDto {
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    pub tenant_id: Option<String>,
    pub collection: Option<String>,
    /// Deprecated alias of `collection`.
    pub sub_tenant_id: Option<String>,
}

impl ScopeDto {
    /// The database and collection named, aliases reported in `deprecations`.
    pub(crate) fn resolve(
        self,
        deprecations: &mut Deprecations,
    ) -> Result<(engram_types::DatabaseName, Option<String>), ApiError> {
        deprecations.scope(
            self.database,
            self.tenant_id,
            self.collection,
            self.sub_tenant_id,
        )
    }
}

/// Deserializes a query parameter that is present as `Some`, even when empty (the form decoder
/// would otherwise read `name=` as absent). Use with `#[serde(default, deserialize_with = ..)]`.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    String::deserialize(deserializer).map(Some)
}

/// Deserializes a JSON field that is present as `Some`, null included (`Some(Value::Null)`), so
/// "absent" and "set to null" differ. Use with `#[serde(default, deserialize_with = ..)]`.
pub(crate) fn present_value<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumerated_fields_are_read_as_clients_write_them() {
        use crate::wire::items::ItemKindDto;
        let read = |raw: &str| parse_enum::<ItemKindDto>(raw);
        assert_eq!(read(" Memory ").unwrap(), Some(ItemKindDto::Memory));
        assert_eq!(read("MEMORIES").unwrap(), Some(ItemKindDto::Memory));
        assert_eq!(read("knowledge").unwrap(), Some(ItemKindDto::Knowledge));
        assert_eq!(read("  ").unwrap(), None, "empty is absent");
        let refused = read("videos").unwrap_err().to_string();
        assert!(
            refused.contains("videos")
                && refused.contains("knowledge")
                && refused.contains("memory"),
            "{refused}"
        );
    }

    #[test]
    fn aliases_resolve_and_are_reported() {
        let mut d = Deprecations::default();
        assert_eq!(
            d.pick(Some(1), None, "database", "tenant_id").unwrap(),
            Some(1)
        );
        assert!(d.0.is_empty());
        assert_eq!(
            d.pick(None, Some(2), "database", "tenant_id").unwrap(),
            Some(2)
        );
        assert_eq!(d.0.len(), 1);
        assert_eq!(
            d.pick(Some(3), Some(3), "database", "tenant_id").unwrap(),
            Some(3)
        );
        assert!(d.pick(Some(3), Some(4), "database", "tenant_id").is_err());
        assert!(d
            .require::<i32>(None, None, "database", "tenant_id")
            .is_err());
    }
}
