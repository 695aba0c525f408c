//! API errors and their `Status` representation: every failure is an
//! [`ApiError`], rendered as kube-apiserver renders it (a `v1` `Status` with
//! `status: Failure`, a `reason`, optional `details` and the matching HTTP
//! code).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A failed API request, convertible into a `Status` response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code (also the `code` field of the `Status`).
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`, `AlreadyExists`, `Conflict`.
    pub reason: &'static str,
    /// Human readable message.
    pub message: String,
    /// `Status.details.name`, when the error concerns one object.
    pub name: Option<String>,
    /// `Status.details.kind` (the resource plural, as the real server does).
    pub kind: Option<String>,
    /// `Status.details.causes`.
    pub causes: Vec<StatusCause>,
    /// `Status.details.retryAfterSeconds`.
    pub retry_after_seconds: Option<u16>,
}

/// One entry of `Status.details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCause {
    /// The machine-readable cause (JSON `reason`; Go's `StatusCause.Type`).
    pub reason: String,
    /// Human readable message.
    pub message: String,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            name: None,
            kind: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    fn about(mut self, plural: &str, name: &str) -> Self {
        self.kind = Some(plural.to_string());
        self.name = Some(name.to_string());
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{plural} \"{name}\" is forbidden: {why}"),
        )
        .about(plural, name)
    }

    /// 404 for a missing object.
    pub fn not_found(plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{plural} \"{name}\" not found")).about(plural, name)
    }

    /// 404 for a path the server does not serve.
    pub fn no_such_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource: {method}"),
        )
    }

    /// 409 AlreadyExists on create.
    pub fn already_exists(plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{plural} \"{name}\" already exists"),
        )
        .about(plural, name)
    }

    /// 409 Conflict on a stale resourceVersion or failed precondition.
    pub fn conflict(plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {plural} \"{name}\": {why}"),
        )
        .about(plural, name)
    }

    /// 409 Conflict with the standard "object has been modified" text.
    pub fn stale(plural: &str, name: &str) -> Self {
        Self::conflict(
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 410 Expired (too old resourceVersion, outdated continue token).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 for an unsupported patch or body type; `accepted` lists the
    /// media types the request could have used.
    pub fn unsupported_media_type(content_type: &str, accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {accepted} (got {content_type})"),
        )
    }

    /// 422 Invalid, in the real server's `Kind "name" is invalid: field: why` form.
    pub fn invalid(kind: &str, plural: &str, name: &str, field_error: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field_error}"),
        )
        .about(plural, name)
    }

    /// 422 Invalid for several field errors at once: one reads as with
    /// [`Self::invalid`], more as `[error, error]`, as `errors.NewInvalid`
    /// aggregates them.
    pub fn invalid_fields(kind: &str, plural: &str, name: &str, field_errors: &[String]) -> Self {
        let body = match field_errors {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Self::invalid(kind, plural, name, &body)
    }

    /// 422 for invalid list/watch options, in the form of apiserver's
    /// `errors.NewInvalid(ListOptions.meta.k8s.io, "", errs)`.
    pub fn invalid_list_options(field_errors: &[String]) -> Self {
        let body = match field_errors {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("ListOptions.meta.k8s.io \"\" is invalid: {body}"),
        );
        err.kind = Some("ListOptions".into());
        err
    }

    /// 500 InternalError (the apiserver's reason for a failure of its own).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 503 ServiceUnavailable (used while the server is paused).
    pub fn unavailable() -> Self {
        Self::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        )
    }

    /// 504 Timeout for a resourceVersion newer than the store, exactly as
    /// apiserver's `storage.NewTooLargeResourceVersionError` builds it: the
    /// `ResourceVersionTooLarge` cause client-go's `IsTooLargeResourceVersion`
    /// looks for, and a one-second retry hint.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut err = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        err.causes.push(StatusCause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
        });
        err.retry_after_seconds = Some(1);
        err
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(kind) = &self.kind {
            details.insert("kind".into(), json!(kind));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| json!({ "reason": c.reason, "message": c.message }))
                .collect();
            details.insert("causes".into(), json!(causes));
        }
        if let Some(secs) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json_response(code, &self.to_status());
        // Like apiserver's responsewriters: a retry hint is also a header.
        if let Some(secs) = self.retry_after_seconds {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        response
    }
}

/// A JSON response with `Content-Type: application/json`.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    json_bytes_response(code, serde_json::to_vec(body).unwrap_or_default())
}

/// A response with `bytes`, already JSON, as its body.
pub(crate) fn json_bytes_response(code: StatusCode, bytes: Vec<u8>) -> Response {
    (
        code,
        [(http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response()
}
