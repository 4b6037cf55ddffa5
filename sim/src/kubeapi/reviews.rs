//! The reviews an aggregated API server asks for: TokenReview (against the
//! cluster's tokens) and SubjectAccessReview (the cluster's policy).
//! Nothing else is authorized: RBAC is not enforced.

use serde_json::{Value, json};

use super::failures::bad_request;
use super::request::Request;
use super::store::State;

pub(crate) fn token(req: &Request, st: &mut State) -> (u16, Value) {
    let body = match req.json() {
        Ok(b) => b,
        Err(e) => return bad_request(&e),
    };
    let token = body["spec"]["token"].as_str().unwrap_or("");
    let result = match st.cluster.tokens.get(token) {
        Some((user, groups)) => {
            json!({"authenticated": true, "user": {"username": user, "uid": "u-1", "groups": groups}})
        }
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    review(&body, result, st)
}

pub(crate) fn access(req: &Request, st: &mut State) -> (u16, Value) {
    let body = match req.json() {
        Ok(b) => b,
        Err(e) => return bad_request(&e),
    };
    let (allowed, reason) = (st.cluster.sar)(&body["spec"]);
    review(&body, json!({"allowed": allowed, "reason": reason}), st)
}

fn review(body: &Value, result: Value, st: &mut State) -> (u16, Value) {
    let mut out = body.clone();
    out["status"] = result;
    out["metadata"] = json!({});
    st.remember_review(out.clone());
    (201, out)
}
