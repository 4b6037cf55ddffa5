//! Allowlisted pod labels → Prometheus label names (`label_<sanitized>`).

/// A pod label to copy onto metrics: the Kubernetes key and its metric label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLabel {
    pub key: String,
    /// `label_` + the key with every character outside `[A-Za-z0-9_]`
    /// replaced by `_`. Interned once at start-up (bounded by the flags).
    pub name: &'static str,
}

/// `app.kubernetes.io/name` → `label_app_kubernetes_io_name`.
pub fn sanitize(key: &str) -> String {
    let mut name = String::with_capacity(key.len() + 6);
    name.push_str("label_");
    name.extend(key.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    name
}

/// Checks a `--pod-label` value: a Kubernetes label key (`[prefix/]name`,
/// name ≤ 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends).
pub fn parse_pod_label(key: &str) -> Result<String, String> {
    let name = key.rsplit_once('/').map_or(key, |(prefix, name)| {
        if prefix.is_empty() || prefix.len() > 253 {
            ""
        } else {
            name
        }
    });
    let ends_ok = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    if name.is_empty()
        || name.len() > 63
        || !ends_ok(name)
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(format!(
            "{key:?} is not a Kubernetes label key (e.g. team, app.kubernetes.io/name)"
        ));
    }
    Ok(key.to_owned())
}

/// Interns the label names; two keys that sanitize to the same name are an
/// error, since their series would collide.
pub fn intern(keys: &[String]) -> Result<Vec<PodLabel>, String> {
    let mut out: Vec<PodLabel> = Vec::with_capacity(keys.len());
    for key in keys {
        if out.iter().any(|l| &l.key == key) {
            continue;
        }
        let name = sanitize(key);
        if let Some(other) = out.iter().find(|l| l.name == name) {
            return Err(format!(
                "pod labels {:?} and {key:?} both become {name}",
                other.key
            ));
        }
        out.push(PodLabel {
            key: key.clone(),
            name: Box::leak(name.into_boxed_str()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_to_valid_names() {
        assert_eq!(sanitize("team"), "label_team");
        assert_eq!(
            sanitize("app.kubernetes.io/name"),
            "label_app_kubernetes_io_name"
        );
        assert_eq!(sanitize("x-y.z"), "label_x_y_z");
    }

    #[test]
    fn validates_keys() {
        assert!(parse_pod_label("team").is_ok());
        assert!(parse_pod_label("app.kubernetes.io/name").is_ok());
        for bad in ["", "-x", "x-", "a b", "/x", "x/", "é"] {
            assert!(parse_pod_label(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn collisions_are_errors_duplicates_are_not() {
        let ok = intern(&[
            "team".into(),
            "team".into(),
            "app.kubernetes.io/name".into(),
        ]);
        assert_eq!(ok.map(|v| v.len()), Ok(2));
        assert!(intern(&["a.b".into(), "a-b".into()]).is_err());
    }
}
