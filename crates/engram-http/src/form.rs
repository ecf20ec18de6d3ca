//! Multipart forms and the JSON-encoded string fields they carry (`document_metadata`,
//! `app_knowledge`, `memories`). A JSON body with the same fields is accepted too, in which case
//! those fields must still be JSON strings: an array or object there is 422 `VALIDATION_ERROR`.

use std::collections::HashMap;

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header::CONTENT_TYPE;
use engram_app::{App, UploadedFile};
use engram_types::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// A form as read from multipart or JSON. A multipart field may come several times: a repeated
/// single-value field is refused (400 naming it), the parts of a repeated JSON array field are
/// concatenated in order, and repeated file fields are the files in order.
#[derive(Debug, Default)]
pub(crate) struct Form {
    fields: HashMap<String, Vec<FieldValue>>,
    pub files: Vec<(String, UploadedFile)>,
    /// The upload slot this request holds until it is done (`ingest.concurrent_uploads`).
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

#[derive(Debug)]
enum FieldValue {
    /// A multipart text part, or a JSON string.
    Text(String),
    /// A JSON body's non-string value.
    Json(Value),
}

impl FromRequest<App> for Form {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &App) -> Result<Self, Self::Rejection> {
        let slot = state.upload_slot().await.ok_or_else(|| {
            ApiError::new(
                ErrorCode::ServiceUnavailable,
                "too many uploads are being received at once; retry shortly",
            )
            .retry_after(state.config().ingest.upload_wait.as_secs().max(1))
        })?;
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if content_type.starts_with("application/json") {
            let crate::extract::Json(body) =
                crate::extract::Json::<serde_json::Map<String, Value>>::from_request(req, state)
                    .await?;
            let fields = body
                .into_iter()
                .map(|(k, v)| match v {
                    Value::String(s) => (k, vec![FieldValue::Text(s)]),
                    other => (k, vec![FieldValue::Json(other)]),
                })
                .collect();
            return Ok(Self {
                fields,
                files: Vec::new(),
                _slot: Some(slot),
            });
        }
        if !content_type.starts_with("multipart/form-data") {
            return Err(ApiError::invalid(
                "send a multipart/form-data body (or application/json)",
            ));
        }
        // The upload limit holds whatever the body limit (at least the JSON one): refused on a
        // declared length before anything is read, else as soon as the parts read pass it.
        let most = state.config().ingest.max_upload_bytes;
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|length| length > most as u64) {
            return Err(too_large(most));
        }
        let mut multipart = Multipart::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        let mut form = Self {
            _slot: Some(slot),
            ..Self::default()
        };
        let mut read = 0usize;
        while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
            let name = field.name().unwrap_or_default().to_owned();
            let mut bytes = Vec::new();
            while let Some(piece) = field.chunk().await.map_err(multipart_error)? {
                read += piece.len();
                if read > most {
                    return Err(too_large(most));
                }
                bytes.extend_from_slice(&piece);
            }
            if let Some(filename) = field.file_name().map(str::to_owned) {
                let media_type = field.content_type().map(str::to_owned);
                form.files.push((
                    name,
                    UploadedFile {
                        filename,
                        media_type,
                        bytes,
                    },
                ));
            } else {
                let text = String::from_utf8(bytes).map_err(|_| {
                    ApiError::invalid(format!("multipart field `{name}` is not UTF-8 text"))
                })?;
                form.fields
                    .entry(name)
                    .or_default()
                    .push(FieldValue::Text(text));
            }
        }
        Ok(form)
    }
}

fn too_large(most: usize) -> ApiError {
    ApiError::new(
        ErrorCode::FileTooLarge,
        format!(
            "request body exceeds the upload size limit of {most} bytes (ingest.max_upload_bytes)"
        ),
    )
}

fn multipart_error(err: axum::extract::multipart::MultipartError) -> ApiError {
    if err.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            ErrorCode::FileTooLarge,
            "request body exceeds the upload size limit (ingest.max_upload_bytes)",
        )
    } else {
        ApiError::invalid(format!("malformed multipart body: {}", err.body_text()))
    }
}

impl Form {
    /// The form as the console's upload sends it, for the database `database`: what a browser
    /// sends for a field left blank (an empty text part, a file part with no name and no bytes)
    /// is dropped, and `database` set.
    pub(crate) fn console_upload(mut self, database: &str) -> Self {
        self.fields.retain(|_, values| {
            values.retain(|v| !matches!(v, FieldValue::Text(t) if t.trim().is_empty()));
            !values.is_empty()
        });
        self.files
            .retain(|(_, file)| !(file.filename.is_empty() && file.bytes.is_empty()));
        self.fields.insert(
            "database".to_owned(),
            vec![FieldValue::Text(database.to_owned())],
        );
        self
    }

    /// The uploaded files of the given field names, in order.
    /// The names of every field and file part sent, each once, in name order.
    pub(crate) fn names(&self) -> std::collections::BTreeSet<&str> {
        self.fields
            .keys()
            .map(String::as_str)
            .chain(self.files.iter().map(|(name, _)| name.as_str()))
            .collect()
    }

    /// Whether `name` was sent as a text part (or a JSON field).
    pub(crate) fn has_text(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    pub(crate) fn files_named(&self, names: &[&str]) -> Vec<UploadedFile> {
        self.files
            .iter()
            .filter(|(name, _)| names.contains(&name.as_str()))
            .map(|(_, file)| file.clone())
            .collect()
    }

    /// The one value of a single-value field; 400 when it was sent more than once.
    fn single(&self, name: &str) -> Result<Option<&FieldValue>, ApiError> {
        match self.fields.get(name).map(Vec::as_slice) {
            None | Some([]) => Ok(None),
            Some([value]) => Ok(Some(value)),
            Some(values) => Err(ApiError::invalid(format!(
                "`{name}` was sent {} times; send it once",
                values.len()
            ))),
        }
    }

    /// A plain text field.
    pub(crate) fn text(&self, name: &str) -> Result<Option<String>, ApiError> {
        match self.single(name)? {
            None => Ok(None),
            Some(FieldValue::Text(s)) => Ok(Some(s.clone())),
            Some(FieldValue::Json(Value::Bool(b))) => Ok(Some(b.to_string())),
            Some(FieldValue::Json(Value::Null)) => Ok(None),
            Some(FieldValue::Json(_)) => {
                Err(ApiError::invalid(format!("`{name}` must be a string")))
            }
        }
    }

    /// A boolean field (`true`/`false`), with its default.
    pub(crate) fn flag(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        match self.text(name)?.as_deref().map(str::trim) {
            None | Some("") => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => Ok(false),
            Some(v) => Err(ApiError::invalid(format!(
                "`{name}` must be true or false, not `{v}`"
            ))),
        }
    }

    /// A JSON-encoded string field holding a JSON array of `T`; the arrays of a field sent
    /// several times are concatenated in order.
    pub(crate) fn json_array<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<Vec<T>>, ApiError> {
        self.json_items(name, false)
    }

    /// Like [`Self::json_array`], also taking one JSON-encoded object as an array of one (as
    /// legacy clients send `app_sources`).
    pub(crate) fn json_array_or_object<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<Vec<T>>, ApiError> {
        self.json_items(name, true)
    }

    fn json_items<T: DeserializeOwned>(
        &self,
        name: &str,
        single_ok: bool,
    ) -> Result<Option<Vec<T>>, ApiError> {
        let mut all: Option<Vec<T>> = None;
        for part in self.fields.get(name).into_iter().flatten() {
            if let Some(items) = Self::json_array_part(name, part, single_ok)? {
                all.get_or_insert_with(Vec::new).extend(items);
            }
        }
        Ok(all)
    }

    fn json_array_part<T: DeserializeOwned>(
        name: &str,
        part: &FieldValue,
        single_ok: bool,
    ) -> Result<Option<Vec<T>>, ApiError> {
        let text = match part {
            FieldValue::Json(Value::Null) => return Ok(None),
            FieldValue::Json(_) => {
                return Err(ApiError::new(
                    ErrorCode::ValidationError,
                    format!(
                        "`{name}` must be sent as a JSON-encoded string, not as an object or array"
                    ),
                ))
            }
            FieldValue::Text(text) => text,
        };
        if text.trim().is_empty() {
            return Ok(None);
        }
        let mut value: Value = serde_json::from_str(text).map_err(|e| {
            ApiError::new(
                ErrorCode::ValidationError,
                format!("`{name}` is not valid JSON: {e}"),
            )
        })?;
        if single_ok && value.is_object() {
            value = Value::Array(vec![value]);
        }
        if !value.is_array() {
            return Err(ApiError::new(
                ErrorCode::ValidationError,
                format!("`{name}` must be a JSON-encoded array, not an object or scalar"),
            ));
        }
        let items: Vec<T> = serde_path_to_error::deserialize(value).map_err(|e| {
            ApiError::new(
                ErrorCode::ValidationError,
                format!(
                    "invalid `{name}{}`: {}",
                    bracket_path(&e.path().to_string()),
                    e.inner()
                ),
            )
        })?;
        Ok(Some(items))
    }
}

fn bracket_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else if path.starts_with('[') {
        path.to_owned()
    } else {
        format!(".{path}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::body::Body;

    use super::*;

    const BOUNDARY: &str = "X-ENGRAM-TEST";

    /// An app over a temporary store (no models: forms need none), with `uploads` slots.
    async fn app(uploads: usize) -> (App, engram_testkit::TempStore, tempfile::TempDir) {
        let kit = engram_testkit::TempStore::new().await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = engram_config::Config {
            data_dir: dir.path().to_owned(),
            ..engram_config::Config::default()
        };
        config.ingest.concurrent_uploads = uploads;
        config.ingest.upload_wait = std::time::Duration::from_millis(50);
        let app = App::with_store(
            config,
            kit.store.clone(),
            std::sync::Arc::new(engram_types::SystemClock),
            None,
        )
        .unwrap();
        (app, kit, dir)
    }

    fn request(fields: &[(&str, &str)]) -> Request {
        let mut body = String::new();
        for (name, value) in fields {
            body.push_str(&format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            ));
        }
        body.push_str(&format!("--{BOUNDARY}--\r\n"));
        Request::builder()
            .method("POST")
            .header(
                CONTENT_TYPE,
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(Body::from(body))
            .unwrap()
    }

    /// A multipart request of text `fields` (name, value) in order.
    async fn form(fields: &[(&str, &str)]) -> Form {
        let (app, _kit, _dir) = app(4).await;
        Form::from_request(request(fields), &app).await.unwrap()
    }

    #[tokio::test]
    async fn uploads_past_the_concurrent_limit_wait_then_answer_503() {
        let (app, _kit, _dir) = app(1).await;
        let first = Form::from_request(request(&[("database", "a")]), &app)
            .await
            .unwrap();
        let refused = Form::from_request(request(&[("database", "b")]), &app)
            .await
            .unwrap_err();
        assert_eq!(refused.0.code, ErrorCode::ServiceUnavailable);
        assert_eq!(refused.0.retry_after_secs, Some(1));
        drop(first);
        let second = Form::from_request(request(&[("database", "b")]), &app)
            .await
            .unwrap();
        assert_eq!(second.text("database").unwrap().as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn a_repeated_single_value_field_is_refused_naming_it() {
        let form = form(&[("database", "a"), ("database", "b")]).await;
        let err = form.text("database").unwrap_err();
        assert_eq!(err.0.code, ErrorCode::InvalidParameters);
        assert!(
            err.0.message.contains("`database` was sent 2 times"),
            "{err:?}"
        );
        assert!(form.flag("upsert", false).is_ok(), "absent fields are fine");
    }

    #[tokio::test]
    async fn repeated_json_array_fields_are_concatenated_in_order() {
        let form = form(&[
            ("app_knowledge", r#"[{"id": "a"}, {"id": "b"}]"#),
            ("database", "db"),
            ("app_knowledge", r#"[{"id": "c"}]"#),
        ])
        .await;
        let items: Vec<Value> = form.json_array("app_knowledge").unwrap().unwrap();
        let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(form.text("database").unwrap().as_deref(), Some("db"));
    }
}
