//! Extractors: the authenticated caller, JSON bodies and query strings. Every rejection is an
//! [`ApiError`] with the spec's code and a message naming the offending field.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use engram_app::{App, AppError, Principal};
use engram_types::ErrorCode;
use serde::de::DeserializeOwned;
use utoipa::IntoParams;

use crate::error::ApiError;
use crate::wire::Ignored;

/// The authenticated caller. Exactly one `Authorization: Bearer <prefix.secret>` header.
pub(crate) struct Auth(pub Principal);

impl FromRequestParts<App> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Self::Rejection> {
        let token = bearer_token(parts).map_err(|m| ApiError::from(AppError::Unauthorized(m)))?;
        let mut who = app.authenticate(token).await?;
        if let Some(id) = parts.extensions.get::<crate::context::RequestId>() {
            who.request_id.clone_from(&id.0);
        }
        Ok(Self(who))
    }
}

fn bearer_token(parts: &Parts) -> Result<&str, &'static str> {
    let mut values = parts.headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err("send exactly one `Authorization: Bearer <API_KEY>` header");
    };
    let value = value
        .to_str()
        .map_err(|_| "malformed Authorization header")?;
    let (scheme, token) = value
        .split_at_checked(7)
        .ok_or("malformed Authorization header; expected `Bearer <API_KEY>`")?;
    if !scheme.eq_ignore_ascii_case("bearer ")
        || token.is_empty()
        || token.contains(char::is_whitespace)
    {
        return Err(
            "malformed Authorization header; expected `Bearer <API_KEY>` with exactly one space",
        );
    }
    Ok(token)
}

/// A JSON body. Malformed JSON and values of the wrong type or out of range are 400
/// `INVALID_PARAMETERS` with the path of the field; an empty body reads as `{}`.
pub(crate) struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let code = crate::error::code_for_status(e.status());
            let message = if code == ErrorCode::FileTooLarge {
                "request body exceeds the size limit (ingest.max_upload_bytes)".to_owned()
            } else {
                e.body_text()
            };
            ApiError::new(code, message)
        })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                ApiError::invalid(format!("malformed JSON body: {inner}"))
            } else if path == "." {
                ApiError::invalid(format!("invalid body: {inner}"))
            } else {
                ApiError::invalid(format!("invalid `{path}`: {inner}"))
            }
        })?;
        de.end()
            .map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))?;
        Ok(Self(value))
    }
}

/// A query string; repeated keys fill lists (`ids=a&ids=b`).
pub(crate) struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_html_form::Deserializer::from_bytes(query.as_bytes());
        let value = serde_path_to_error::deserialize(de).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if path == "." {
                ApiError::invalid(format!("invalid query string: {inner}"))
            } else {
                ApiError::invalid(format!("invalid query parameter `{path}`: {inner}"))
            }
        })?;
        Ok(Self(value))
    }
}

/// A current route's query string with the parameters it does not know noted for
/// `meta.ignored_parameters`: known are the parameters `T` documents (its `IntoParams`) and the
/// scope's (`database`, `collection` and their aliases), so the list never drifts from the
/// OpenAPI document.
pub(crate) struct NotedQuery<T>(pub T, pub Ignored);

impl<T: DeserializeOwned + IntoParams, S: Send + Sync> FromRequestParts<S> for NotedQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(value) = Query::<T>::from_request_parts(parts, state).await?;
        let known: Vec<String> = T::into_params(|| None)
            .into_iter()
            .map(|p| p.name)
            .chain(["database", "tenant_id", "collection", "sub_tenant_id"].map(str::to_owned))
            .collect();
        let query = parts.uri.query().unwrap_or_default();
        let mut ignored = Ignored::default();
        let mut seen = std::collections::BTreeSet::new();
        let pairs: Vec<(String, String)> = serde_html_form::from_str(query).unwrap_or_default();
        for (name, _) in pairs {
            if !known.contains(&name) && seen.insert(name.clone()) {
                ignored.note(name, "not a parameter of this route");
            }
        }
        Ok(Self(value, ignored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_with(values: &[&str]) -> Parts {
        let mut builder = axum::http::Request::builder();
        for v in values {
            builder = builder.header(AUTHORIZATION, *v);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn only_one_well_formed_bearer_header_is_accepted() {
        assert_eq!(bearer_token(&parts_with(&["Bearer a.b"])), Ok("a.b"));
        assert_eq!(bearer_token(&parts_with(&["bearer a.b"])), Ok("a.b"));
        for bad in [
            &[][..],
            &["Bearer a.b", "Bearer a.b"],
            &["Bearer  a.b"],
            &["Bearer"],
            &["Bearer "],
            &["Basic a.b"],
            &["Bearer a.b c"],
            &["Bearer\ta.b"],
        ] {
            assert!(bearer_token(&parts_with(bad)).is_err(), "{bad:?}");
        }
    }
}
