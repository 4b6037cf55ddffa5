//! `metav1.Status` error bodies.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use super::quantity::QuantityError;
use crate::provider::ProviderError;

/// The reason Kubernetes gives for a status code.
pub fn reason(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    }
}

/// A `Status` response with `code` and `message`.
pub fn status(code: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason(code),
        "code": code.as_u16(),
    });
    json_response(code, &body)
}

/// The `Status` for a provider's refusal: an unknown metric is a 404, a
/// selector that cannot be served a 400, missing data a 503.
pub fn provider_error(e: &ProviderError) -> Response<Full<Bytes>> {
    let code = match e {
        ProviderError::UnknownMetric(_) => StatusCode::NOT_FOUND,
        ProviderError::BadRequest(_) => StatusCode::BAD_REQUEST,
        ProviderError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    status(code, &e.to_string())
}

/// The 503 for a value that is not a quantity (NaN, ±Inf, out of range):
/// such a value is never sent as a number. `what` names the value.
pub fn not_a_quantity(what: &str, e: &QuantityError) -> Response<Full<Bytes>> {
    status(StatusCode::SERVICE_UNAVAILABLE, &format!("{what}: {e}"))
}

/// A JSON response.
pub fn json_response(code: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// A plain-text response.
pub fn text(code: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
