//! Metadata filters as callers give them (JSON objects of exact matches), checked once for
//! queries and listings: valid keys, and a bound on keys and values so that no filter grows
//! past what the store can evaluate.

use engram_store::FilterValue;
use engram_types::limits::{FILTER_KEYS_MAX, FILTER_VALUES_MAX};
use serde_json::Value;

use crate::{AppError, AppResult};

/// Counts a request's filter keys and values against the limits as conditions are added.
#[derive(Debug, Default)]
pub(crate) struct FilterBudget {
    keys: usize,
    values: usize,
}

impl FilterBudget {
    /// Checks one condition `key` (found under `path`) and its `value`, and counts them.
    pub(crate) fn condition(
        &mut self,
        path: &str,
        key: &str,
        value: Value,
    ) -> AppResult<FilterValue> {
        if key.is_empty() || key.contains('"') {
            return Err(AppError::InvalidParameters(format!(
                "`{path}` key `{key}` is not a valid field name"
            )));
        }
        self.keys += 1;
        if self.keys > FILTER_KEYS_MAX {
            return Err(AppError::InvalidParameters(format!(
                "at most {FILTER_KEYS_MAX} filter keys may be given"
            )));
        }
        let value = match value {
            Value::Array(values) => FilterValue::In(values),
            other => FilterValue::Eq(other),
        };
        self.values += match &value {
            FilterValue::In(values) => values.len(),
            FilterValue::Readable(principals) => principals.len(),
            FilterValue::Eq(_) => 1,
        };
        if self.values > FILTER_VALUES_MAX {
            return Err(AppError::InvalidParameters(format!(
                "filters may hold at most {FILTER_VALUES_MAX} values in all"
            )));
        }
        Ok(value)
    }
}

/// Where a synced source's access rule is kept (`additional_metadata.acl`).
pub(crate) const ACL_FIELD: &str = "acl";
/// A principal every caller is: a rule naming it is readable by all.
pub(crate) const PUBLIC: &str = "__public__";

/// The condition an `acl` of principals puts on sources: readable by one of them (or public,
/// or without a rule). `None` when the list is empty or `["*"]` (no filtering).
pub(crate) fn readable_by(acl: &[String]) -> AppResult<Option<(String, FilterValue)>> {
    if acl.is_empty() || acl.iter().any(|p| p == "*") {
        return Ok(None);
    }
    if acl.len() > FILTER_VALUES_MAX || acl.iter().any(|p| p.is_empty() || p.len() > 320) {
        return Err(AppError::InvalidParameters(format!(
            "`acl` holds at most {FILTER_VALUES_MAX} principals of 1 to 320 characters"
        )));
    }
    let mut principals = acl.to_vec();
    principals.push(PUBLIC.to_owned());
    Ok(Some((
        ACL_FIELD.to_owned(),
        FilterValue::Readable(principals),
    )))
}

/// An access rule as stored, checked: at most 1000 principals of 1 to 320 characters;
/// `__public__` dominates, an empty list is readable by nobody (`__private__`), duplicates go.
pub(crate) fn access_rule(field: &str, principals: Vec<String>) -> AppResult<Vec<String>> {
    if principals.len() > 1000 || principals.iter().any(|p| p.is_empty() || p.len() > 320) {
        return Err(AppError::InvalidParameters(format!(
            "`{field}` holds at most 1000 principals of 1 to 320 characters"
        )));
    }
    Ok(normalized(principals))
}

/// `__public__` dominates, an empty list is `__private__`, sorted, duplicates gone.
fn normalized(mut principals: Vec<String>) -> Vec<String> {
    if principals.iter().any(|p| p == PUBLIC) {
        return vec![PUBLIC.to_owned()];
    }
    if principals.is_empty() {
        return vec!["__private__".to_owned()];
    }
    principals.sort();
    principals.dedup();
    principals
}

/// The rule a connector's source gave an object (`engram_connectors::set_readers`), as stored:
/// principals of 1 to 320 characters (others dropped), `__public__` dominating, an empty list
/// readable by nobody, sorted and without duplicates. `None` (no rule of its own) for anything
/// but a list of strings. Unlike [`access_rule`] it takes any number of principals: a source's
/// group may be large, and refusing it would leave the object readable by all.
pub(crate) fn source_rule(readers: &Value) -> Option<Vec<String>> {
    let principals = readers
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .filter(|p| !p.is_empty() && p.len() <= 320)
        .map(str::to_owned)
        .collect();
    Some(normalized(principals))
}

/// Whether a source's access rule (`additional_metadata.acl`) lets one of `acl` read it: the
/// same rule as [`readable_by`]'s filter in the store, for one source already read.
pub(crate) fn may_read(additional_metadata: &Value, acl: &[String]) -> bool {
    if acl.is_empty() || acl.iter().any(|p| p == "*") {
        return true;
    }
    match additional_metadata.get(ACL_FIELD) {
        Some(Value::Array(rule)) if !rule.is_empty() => rule.iter().any(|p| {
            p.as_str()
                .is_some_and(|p| p == PUBLIC || acl.iter().any(|a| a == p))
        }),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn keys_and_values_are_bounded() {
        let mut budget = FilterBudget::default();
        for i in 0..FILTER_KEYS_MAX {
            budget.condition("f", &format!("k{i}"), json!(1)).unwrap();
        }
        let err = budget.condition("f", "one_more", json!(1)).unwrap_err();
        assert!(err.to_string().contains("256 filter keys"), "{err}");

        let mut budget = FilterBudget::default();
        let many = Value::Array(vec![json!("v"); FILTER_VALUES_MAX]);
        budget.condition("f", "list", many).unwrap();
        let err = budget.condition("f", "next", json!("v")).unwrap_err();
        assert!(err.to_string().contains("1024 values"), "{err}");
    }

    #[test]
    fn a_source_is_read_under_its_rule() {
        let ruled = json!({"acl": ["alice@example.com"]});
        let alice = vec!["alice@example.com".to_owned()];
        let eve = vec!["eve@example.com".to_owned()];
        assert!(may_read(&ruled, &alice));
        assert!(!may_read(&ruled, &eve));
        assert!(may_read(&ruled, &[]), "no principals: no filtering");
        assert!(may_read(&ruled, &["*".to_owned()]));
        assert!(may_read(&json!({"acl": ["__public__"]}), &eve));
        assert_eq!(
            source_rule(&json!(["b@x.org", "a@x.org", "b@x.org", "", 7])),
            Some(vec!["a@x.org".to_owned(), "b@x.org".to_owned()])
        );
        assert_eq!(
            source_rule(&json!(["a@x.org", "__public__"])),
            Some(vec!["__public__".to_owned()])
        );
        assert_eq!(
            source_rule(&json!([])),
            Some(vec!["__private__".to_owned()])
        );
        assert_eq!(source_rule(&json!("a@x.org")), None);
        assert!(may_read(&json!({}), &eve), "no rule");
        assert!(
            may_read(&json!({"acl": []}), &eve),
            "an empty list is no rule"
        );
    }

    #[test]
    fn keys_must_be_field_names() {
        let mut budget = FilterBudget::default();
        for bad in ["", "a\"b"] {
            let err = budget
                .condition("metadata_filters", bad, json!(1))
                .unwrap_err();
            assert!(matches!(err, AppError::InvalidParameters(_)), "{err}");
        }
    }
}
