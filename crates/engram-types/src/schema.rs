//! The database (tenant) metadata schema: typed fields declared at creation, immutable
//! afterwards except for adding fields.

use serde::{Deserialize, Serialize};

use crate::limits;

/// The type of one metadata field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FieldType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Float,
    Double,
    Varchar,
    Json,
    Array,
}

impl FieldType {
    pub const NAMES: &'static str =
        "BOOL, INT8, INT16, INT32, INT64, FLOAT, DOUBLE, VARCHAR, JSON, ARRAY";

    /// Parses a wire name (case-insensitive).
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value.to_ascii_uppercase().as_str() {
            "BOOL" => Self::Bool,
            "INT8" => Self::Int8,
            "INT16" => Self::Int16,
            "INT32" => Self::Int32,
            "INT64" => Self::Int64,
            "FLOAT" => Self::Float,
            "DOUBLE" => Self::Double,
            "VARCHAR" => Self::Varchar,
            "JSON" => Self::Json,
            "ARRAY" => Self::Array,
            _ => return None,
        })
    }

    /// Inclusive integer bounds of the integer types.
    pub fn int_bounds(self) -> Option<(i64, i64)> {
        match self {
            Self::Int8 => Some((i8::MIN.into(), i8::MAX.into())),
            Self::Int16 => Some((i16::MIN.into(), i16::MAX.into())),
            Self::Int32 => Some((i32::MIN.into(), i32::MAX.into())),
            Self::Int64 => Some((i64::MIN, i64::MAX)),
            Self::Bool | Self::Float | Self::Double | Self::Varchar | Self::Json | Self::Array => {
                None
            }
        }
    }
}

/// One declared metadata field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaField {
    pub name: String,
    pub data_type: FieldType,
    pub max_length: u32,
    pub enable_match: bool,
    pub enable_dense_embedding: bool,
    pub enable_sparse_embedding: bool,
    pub nullable: bool,
}

impl SchemaField {
    pub const DEFAULT_MAX_LENGTH: u32 = 1024;
}

/// A validated schema: field names unique, every field well-formed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MetadataSchema {
    fields: Vec<SchemaField>,
}

/// Why a schema or a schema change was refused. The message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("metadata schema field {index}: name must not be empty")]
    EmptyName { index: usize },
    #[error("metadata schema field `{name}`: name must be at most {max} characters of letters, digits and '_'")]
    BadName { name: String, max: usize },
    #[error("metadata schema field `{name}` is declared twice")]
    Duplicate { name: String },
    #[error("metadata schema field `{name}` already exists; existing fields cannot be changed or removed")]
    AlreadyExists { name: String },
    #[error("metadata schema field `{name}`: max_length must be between 1 and {max}")]
    BadMaxLength { name: String, max: u32 },
    #[error("metadata schema field `{name}`: enable_dense_embedding and enable_sparse_embedding need VARCHAR")]
    EmbeddingNeedsText { name: String },
    #[error("metadata schema may declare at most {max} fields")]
    TooManyFields { max: usize },
}

impl MetadataSchema {
    /// Validates a list of fields as a whole schema.
    pub fn new(fields: Vec<SchemaField>) -> Result<Self, SchemaError> {
        let mut schema = Self::default();
        schema.add(fields)?;
        Ok(schema)
    }

    pub fn fields(&self) -> &[SchemaField] {
        &self.fields
    }

    pub fn field(&self, name: &str) -> Option<&SchemaField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Adds new fields; refuses any that exist already (fields are immutable once declared).
    /// Either all fields are added or none.
    pub fn add(&mut self, fields: Vec<SchemaField>) -> Result<(), SchemaError> {
        let mut next = self.fields.clone();
        for (index, field) in fields.into_iter().enumerate() {
            validate_field(index, &field)?;
            if self.field(&field.name).is_some() {
                return Err(SchemaError::AlreadyExists { name: field.name });
            }
            if next.iter().any(|f| f.name == field.name) {
                return Err(SchemaError::Duplicate { name: field.name });
            }
            next.push(field);
        }
        if next.len() > limits::SCHEMA_FIELDS_MAX {
            return Err(SchemaError::TooManyFields {
                max: limits::SCHEMA_FIELDS_MAX,
            });
        }
        self.fields = next;
        Ok(())
    }
}

/// Why a metadata value was refused. The message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("metadata field `{0}` is not declared in the database metadata schema")]
    Undeclared(String),
    #[error("metadata field `{name}` must be {expected}")]
    WrongType { name: String, expected: String },
    #[error("metadata field `{name}` is longer than its max_length {max}")]
    TooLong { name: String, max: u32 },
    #[error("metadata field `{0}` is not nullable")]
    Null(String),
}

impl MetadataSchema {
    /// Checks values given for schema fields (`tenant_metadata`): every key declared, every value
    /// of its field's type.
    pub fn check_values(
        &self,
        values: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), ValueError> {
        use serde_json::Value;
        for (name, value) in values {
            let field = self
                .field(name)
                .ok_or_else(|| ValueError::Undeclared(name.clone()))?;
            let wrong = |expected: &str| ValueError::WrongType {
                name: name.clone(),
                expected: expected.to_owned(),
            };
            match (field.data_type, value) {
                (_, Value::Null) if field.nullable => {}
                (_, Value::Null) => return Err(ValueError::Null(name.clone())),
                (FieldType::Bool, Value::Bool(_))
                | (FieldType::Json, _)
                | (FieldType::Array, Value::Array(_)) => {}
                (FieldType::Float | FieldType::Double, Value::Number(_)) => {}
                (FieldType::Varchar, Value::String(s)) => {
                    if s.chars().count() > field.max_length as usize {
                        return Err(ValueError::TooLong {
                            name: name.clone(),
                            max: field.max_length,
                        });
                    }
                }
                (
                    t @ (FieldType::Int8 | FieldType::Int16 | FieldType::Int32 | FieldType::Int64),
                    v,
                ) => {
                    let (lo, hi) = t.int_bounds().unwrap_or((i64::MIN, i64::MAX));
                    if !v.as_i64().is_some_and(|n| (lo..=hi).contains(&n)) {
                        return Err(wrong(&format!("an integer between {lo} and {hi}")));
                    }
                }
                (FieldType::Bool, _) => return Err(wrong("a boolean")),
                (FieldType::Float | FieldType::Double, _) => return Err(wrong("a number")),
                (FieldType::Varchar, _) => return Err(wrong("a string")),
                (FieldType::Array, _) => return Err(wrong("an array")),
            }
        }
        Ok(())
    }
}

fn validate_field(index: usize, field: &SchemaField) -> Result<(), SchemaError> {
    if field.name.is_empty() {
        return Err(SchemaError::EmptyName { index });
    }
    let well_formed = field.name.len() <= limits::SCHEMA_FIELD_NAME_MAX
        && field
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !field.name.starts_with(|c: char| c.is_ascii_digit());
    if !well_formed {
        return Err(SchemaError::BadName {
            name: field.name.clone(),
            max: limits::SCHEMA_FIELD_NAME_MAX,
        });
    }
    if field.max_length == 0 || field.max_length > limits::SCHEMA_VARCHAR_MAX_LENGTH {
        return Err(SchemaError::BadMaxLength {
            name: field.name.clone(),
            max: limits::SCHEMA_VARCHAR_MAX_LENGTH,
        });
    }
    if (field.enable_dense_embedding || field.enable_sparse_embedding)
        && field.data_type != FieldType::Varchar
    {
        return Err(SchemaError::EmbeddingNeedsText {
            name: field.name.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, data_type: FieldType) -> SchemaField {
        SchemaField {
            name: name.into(),
            data_type,
            max_length: SchemaField::DEFAULT_MAX_LENGTH,
            enable_match: true,
            enable_dense_embedding: false,
            enable_sparse_embedding: false,
            nullable: true,
        }
    }

    #[test]
    fn duplicates_and_changes_are_refused() {
        let mut schema = MetadataSchema::new(vec![field("team", FieldType::Varchar)]).unwrap();
        assert_eq!(
            schema.add(vec![field("team", FieldType::Int32)]),
            Err(SchemaError::AlreadyExists {
                name: "team".into()
            })
        );
        assert_eq!(
            MetadataSchema::new(vec![
                field("a", FieldType::Bool),
                field("a", FieldType::Bool)
            ]),
            Err(SchemaError::Duplicate { name: "a".into() })
        );
        // A refused batch adds nothing.
        assert!(schema
            .add(vec![
                field("b", FieldType::Bool),
                field("team", FieldType::Bool)
            ])
            .is_err());
        assert_eq!(schema.fields().len(), 1);
        schema.add(vec![field("b", FieldType::Bool)]).unwrap();
        assert_eq!(schema.fields().len(), 2);
    }

    #[test]
    fn values_must_match_their_declared_types() {
        let mut short = field("code", FieldType::Varchar);
        short.max_length = 3;
        let schema = MetadataSchema::new(vec![
            field("flag", FieldType::Bool),
            field("n", FieldType::Int8),
            field("x", FieldType::Double),
            short,
            field("tags", FieldType::Array),
        ])
        .unwrap();
        let ok = serde_json::json!({"flag": true, "n": -128, "x": 1.5, "code": "abc", "tags": [1], "n2": null});
        let mut ok = ok.as_object().unwrap().clone();
        ok.remove("n2");
        assert_eq!(schema.check_values(&ok), Ok(()));
        for (bad, why) in [
            (serde_json::json!({"flag": "yes"}), "bool"),
            (serde_json::json!({"n": 128}), "int8 range"),
            (serde_json::json!({"n": 1.5}), "integer"),
            (serde_json::json!({"x": "1"}), "number"),
            (serde_json::json!({"code": "abcd"}), "max_length"),
            (serde_json::json!({"tags": "a"}), "array"),
            (serde_json::json!({"other": 1}), "undeclared"),
        ] {
            assert!(
                schema.check_values(bad.as_object().unwrap()).is_err(),
                "{why}"
            );
        }
    }

    #[test]
    fn type_names_parse_case_insensitively() {
        assert_eq!(FieldType::parse("varchar"), Some(FieldType::Varchar));
        assert_eq!(FieldType::parse("INT64"), Some(FieldType::Int64));
        assert_eq!(FieldType::parse("STRING"), None);
    }
}
