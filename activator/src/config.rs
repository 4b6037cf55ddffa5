//! The routes file: which requests go to which model Service, and which
//! workload to wake when that Service has no Ready endpoint.
//!
//! ```yaml
//! routes:
//!   - name: chat
//!     host: chat.example.com      # optional: the Host header, without port
//!     pathPrefix: /v1             # optional, default "/"
//!     model: llama-3-8b           # optional: the JSON body's "model"
//!     service: {namespace: inference, name: chat, port: 8000}
//!     target: {kind: Deployment, name: chat}
//!     wakeReplicas: 1
//!     upstreamProtocol: http1     # or h2c (HTTP/2, prior knowledge)
//!     upstreamTtfbTimeout: 10m    # optional: overrides --upstream-ttfb-timeout
//!     sleep: {}                   # optional: its pods may sleep (vLLM sleep mode)
//! ```

use std::collections::BTreeSet;

use serde::Deserialize;

/// Keys of a route, for the docs test.
pub const ROUTE_KEYS: &[&str] = &[
    "name",
    "host",
    "pathPrefix",
    "model",
    "service",
    "target",
    "wakeReplicas",
    "upstreamProtocol",
    "upstreamTtfbTimeout",
    "sleep",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub routes: Vec<RouteSpec>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RouteSpec {
    pub name: String,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default = "root")]
    pub path_prefix: String,
    #[serde(default)]
    pub model: Option<String>,
    pub service: ServiceRef,
    pub target: TargetRef,
    #[serde(default = "one")]
    pub wake_replicas: i32,
    #[serde(default)]
    pub upstream_protocol: Protocol,
    /// This route's bound on its upstream's response head; default
    /// `--upstream-ttfb-timeout`.
    #[serde(default, deserialize_with = "ttfb")]
    pub upstream_ttfb_timeout: Option<std::time::Duration>,
    /// The pods may sleep: woken with `POST /wake_up` (`crate::sleep`).
    #[serde(default)]
    pub sleep: Option<crate::sleep_spec::SleepSpec>,
}

/// What the activator speaks to the model's endpoints.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 with keep-alive (vLLM, TGI, SGLang, Triton's HTTP port).
    #[default]
    Http1,
    /// Cleartext HTTP/2 with prior knowledge (gRPC and h2 model servers).
    H2c,
}

/// A duration with its unit, above zero, as the flag it overrides.
fn ttfb<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<std::time::Duration>, D::Error> {
    let s = String::deserialize(d)?;
    let bad = |msg: String| serde::de::Error::custom(format!("upstreamTtfbTimeout: {msg}"));
    match gpuscale_util::duration::parse(&s) {
        Ok(v) if v.is_zero() => Err(bad(format!("{s:?} must be above zero"))),
        Ok(v) => Ok(Some(v)),
        Err(e) => Err(bad(e.to_string())),
    }
}

fn root() -> String {
    "/".into()
}

fn one() -> i32 {
    1
}

/// The model Service: its EndpointSlices say where to forward.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    /// The endpoint port: a number, or the name of a port in the slices.
    pub port: Port,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Port {
    Number(u16),
    Name(String),
}

/// The workload woken through its `scale` subresource (in the Service's
/// namespace): any kind that has one (a Deployment, a StatefulSet, an Argo
/// Rollout, a CRD's kind), found by discovery.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TargetRef {
    /// The kind's `group/version` (`v1` for the core group).
    #[serde(rename = "apiVersion", default = "apps_v1")]
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

fn apps_v1() -> String {
    "apps/v1".into()
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {msg}")]
    Read { path: String, msg: String },
    #[error("{path}: route {route:?}: {msg}")]
    Route {
        path: String,
        route: String,
        msg: String,
    },
}

/// Reads and validates a routes file.
pub fn load(path: &std::path::Path) -> Result<File, ConfigError> {
    let shown = path.display().to_string();
    let read = |msg: String| ConfigError::Read {
        path: shown.clone(),
        msg,
    };
    let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
    let file = parse(&text).map_err(|e| match e {
        (Some(route), msg) => ConfigError::Route {
            path: shown.clone(),
            route,
            msg,
        },
        (None, msg) => read(msg),
    })?;
    validate(&file).map_err(|(route, msg)| ConfigError::Route {
        path: shown.clone(),
        route,
        msg,
    })?;
    if file.routes.is_empty() {
        return Err(read("no routes".into()));
    }
    Ok(file)
}

/// Parses the file; an error in a route names it (its `name`, else its
/// `host`, else its position) besides the path of the key at fault.
fn parse(text: &str) -> Result<File, (Option<String>, String)> {
    #[derive(Deserialize)]
    struct Raw {
        routes: Vec<yaml_serde::Value>,
    }
    let whole = match yaml_serde::from_str::<File>(text) {
        Ok(f) => return Ok(f),
        Err(e) => e.to_string(),
    };
    let Ok(raw) = yaml_serde::from_str::<Raw>(text) else {
        return Err((None, whole));
    };
    let bad = raw.routes.into_iter().enumerate().find_map(|(i, v)| {
        let key = |k: &str| {
            v.get(k)
                .and_then(yaml_serde::Value::as_str)
                .map(String::from)
        };
        let label = key("name")
            .or_else(|| key("host").map(|h| format!("host {h}")))
            .unwrap_or_else(|| format!("routes[{i}]"));
        yaml_serde::from_value::<RouteSpec>(v).err().map(|_| label)
    });
    Err((bad, whole))
}

fn validate(file: &File) -> Result<(), (String, String)> {
    let mut names = BTreeSet::new();
    let mut matches = BTreeSet::new();
    for r in &file.routes {
        let fail = |msg: &str| Err((r.name.clone(), msg.to_string()));
        if r.name.is_empty()
            || !r
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return fail("name must be non-empty letters, digits, '-', '_' or '.'");
        }
        if !names.insert(r.name.clone()) {
            return fail("a second route has this name");
        }
        if !r.path_prefix.starts_with('/') {
            return fail("pathPrefix must start with '/'");
        }
        if r.host
            .as_deref()
            .is_some_and(|h| h.is_empty() || h.contains(['/', ' ']))
        {
            return fail("host must be a host name without scheme, path or spaces");
        }
        if r.model.as_deref().is_some_and(str::is_empty) {
            return fail("model must not be empty");
        }
        if r.service.namespace.is_empty()
            || r.service.name.is_empty()
            || r.target.name.is_empty()
            || r.target.kind.is_empty()
            || r.target.api_version.is_empty()
        {
            return fail(
                "service namespace and name, and target apiVersion, kind and name, must not be empty",
            );
        }
        if matches!(&r.service.port, Port::Number(0))
            || matches!(&r.service.port, Port::Name(n) if n.is_empty())
        {
            return fail("service port must be a port number or a port name");
        }
        if r.wake_replicas < 1 {
            return fail("wakeReplicas must be at least 1");
        }
        let key = (r.host.clone(), r.path_prefix.clone(), r.model.clone());
        if !matches.insert(key) {
            return fail("another route matches the same host, pathPrefix and model");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<File, String> {
        let dir = std::env::temp_dir().join(format!("activator-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let path = dir.join(format!("{}.yaml", text.len()));
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        load(&path).map_err(|e| e.to_string())
    }

    const OK: &str = "routes:\n- name: chat\n  model: m\n  service: {namespace: a, name: chat, port: 8000}\n  target: {kind: Deployment, name: chat}\n";

    #[test]
    fn a_route_parses_with_defaults() {
        let f = parse(OK).unwrap();
        assert_eq!(f.routes[0].path_prefix, "/");
        assert_eq!(f.routes[0].wake_replicas, 1);
        assert_eq!(f.routes[0].service.port, Port::Number(8000));
        assert_eq!(f.routes[0].upstream_protocol, Protocol::Http1);
        let h2 = parse(&format!("{OK}  upstreamProtocol: h2c\n")).unwrap();
        assert_eq!(h2.routes[0].upstream_protocol, Protocol::H2c);
        assert_eq!(f.routes[0].upstream_ttfb_timeout, None);
        let long = parse(&format!("{OK}  upstreamTtfbTimeout: 10m\n")).unwrap();
        let ten_min = std::time::Duration::from_secs(600);
        assert_eq!(long.routes[0].upstream_ttfb_timeout, Some(ten_min));
    }

    #[test]
    fn bad_routes_name_the_problem() {
        let dup = format!("{OK}{}", OK.trim_start_matches("routes:\n"));
        assert!(parse(&dup).unwrap_err().contains("second route"));
        let e = parse(&OK.replace("port: 8000", "port: 0")).unwrap_err();
        assert!(e.contains("port"), "{e}");
        // Any kind parses (discovery says at the first wake whether it has
        // a scale subresource); an empty one does not.
        let e = parse(&OK.replace("kind: Deployment", "kind: \"\"")).unwrap_err();
        assert!(e.contains("kind"), "{e}");
        let e = parse(&OK.replace("model: m", "modle: m")).unwrap_err();
        assert!(e.contains("modle"), "{e}");
        assert!(parse("routes: []\n").unwrap_err().contains("no routes"));
        let e = parse(&OK.replace("  service: {namespace: a, name: chat, port: 8000}\n", ""))
            .unwrap_err();
        assert!(e.contains("route \"chat\"") && e.contains("service"), "{e}");
        for bad in ["600", "0s", "ten minutes"] {
            let e = parse(&format!("{OK}  upstreamTtfbTimeout: {bad}\n")).unwrap_err();
            assert!(e.contains("upstreamTtfbTimeout"), "{bad}: {e}");
        }
        let e = parse(&format!("{OK}  upstreamProtocol: h3\n")).unwrap_err();
        assert!(e.contains("h3") && e.contains("upstreamProtocol"), "{e}");
    }
}
