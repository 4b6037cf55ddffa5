//! Property tests and a fuzz-style test of selector → PromQL translation:
//! whatever the input, the output is a flat list of well-formed matchers
//! whose first (and only) namespace matcher is the request's namespace, so
//! no selector can change the query's structure or reach another namespace.

#![allow(clippy::unwrap_used)]

use gpuscale_adapter::config::MetricsConfig;
use gpuscale_adapter::metric_def::PodMetadata;
use gpuscale_adapter::presets;
use gpuscale_adapter::prometheus::join::{self, Matchers};
use gpuscale_adapter::prometheus::matchers::{names_matcher, to_matchers, translate};
use gpuscale_adapter::selector::{Requirement, parse, parse_kube, to_text};
use proptest::prelude::*;

/// Parse a matcher list as PromQL would: `name op "string"` separated by
/// commas. Returns (name, op, unescaped value) triples, or None if the text
/// is not exactly such a list.
fn parse_matchers(s: &str) -> Option<Vec<(String, String, String)>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let name = &s[start..i];
        if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
            return None;
        }
        let op = ["!~", "=~", "!=", "="]
            .into_iter()
            .find(|op| s[i..].starts_with(op))?;
        i += op.len();
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        let mut value = String::new();
        loop {
            match *b.get(i)? {
                b'"' => break,
                b'\\' => {
                    let c = *b.get(i + 1)?;
                    value.push(match c {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'\\' | b'"' => c as char,
                        _ => return None,
                    });
                    i += 2;
                }
                // PromQL strings are UTF-8.
                _ => {
                    let ch = s.get(i..)?.chars().next()?;
                    value.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        i += 1;
        out.push((name.to_string(), op.to_string(), value));
        match b.get(i) {
            None => return Some(out),
            Some(b',') => i += 1,
            Some(_) => return None,
        }
    }
}

fn assert_safe(ns: &str, matchers: &str) {
    assert_safe_on("namespace", ns, matchers);
}

/// [`assert_safe`] for a metric that pins the namespace on `label`.
fn assert_safe_on(label: &str, ns: &str, matchers: &str) {
    let parsed =
        parse_matchers(matchers).unwrap_or_else(|| panic!("not a flat matcher list: {matchers}"));
    assert_eq!(
        parsed[0],
        (label.to_string(), "=".to_string(), ns.to_string())
    );
    for (name, _, _) in &parsed[1..] {
        assert_ne!(name, "namespace", "{matchers}");
        assert_ne!(name, label, "{matchers}");
        assert!(!name.starts_with("__"), "{matchers}");
    }
}

fn evil_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range('a', 'z'),
        1 => Just('"'), 1 => Just('\\'), 1 => Just('}'), 1 => Just('{'),
        1 => Just(','), 1 => Just('='), 1 => Just('!'), 1 => Just('('),
        1 => Just(')'), 1 => Just(' '), 1 => Just('.'), 1 => Just('/'),
        1 => Just('\n'), 1 => Just('~'), 1 => Just('|'), 1 => Just('#'),
        1 => Just('-'), 1 => Just('_'), 1 => any::<char>(),
    ]
}

fn evil_string() -> impl Strategy<Value = String> {
    prop::collection::vec(evil_char(), 0..12).prop_map(|v| v.into_iter().collect())
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]([a-z0-9_]{0,7}[a-z0-9])?".prop_filter("keywords", |w| w != "in" && w != "notin"),
        // Pod metadata keys, which the join sends to the metadata series.
        1 => prop_oneof![Just("workload".to_string()), Just("workload_kind".to_string()), "label_[a-z]{1,6}"],
    ]
}

fn value() -> impl Strategy<Value = String> {
    "([a-zA-Z0-9]([a-zA-Z0-9._-]{0,6}[a-zA-Z0-9])?)?"
}

fn requirement() -> impl Strategy<Value = Requirement> {
    prop_oneof![
        (word(), value()).prop_map(|(k, v)| Requirement::Equals(k, v)),
        (word(), value()).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
        (word(), prop::collection::vec(value(), 1..4)).prop_map(|(k, v)| Requirement::In(k, v)),
        (word(), prop::collection::vec(value(), 1..4)).prop_map(|(k, v)| Requirement::NotIn(k, v)),
        word().prop_map(Requirement::Exists),
        word().prop_map(Requirement::DoesNotExist),
    ]
}

/// Selector text that parses often enough to reach the translation: valid
/// requirements, some of them replaced by attack strings.
fn selector_shaped() -> impl Strategy<Value = String> {
    let part = prop_oneof![3 => requirement().prop_map(|r| render(&r)), 1 => evil_string()];
    prop::collection::vec(part, 1..6).prop_map(|parts| parts.join(","))
}

fn render(r: &Requirement) -> String {
    match r {
        Requirement::Equals(k, v) => format!("{k}={v}"),
        Requirement::NotEquals(k, v) => format!("{k}!={v}"),
        Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
        Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
        Requirement::Exists(k) => k.clone(),
        Requirement::DoesNotExist(k) => format!("!{k}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Fuzz: arbitrary bytes never panic, and anything accepted is safe.
    #[test]
    fn arbitrary_bytes_are_refused_or_safe(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(m) = translate("inference", &text) {
            assert_safe("inference", &m);
        }
    }

    /// Fuzz: selector-shaped text full of PromQL metacharacters.
    #[test]
    fn selector_shaped_attacks_are_refused_or_safe(text in selector_shaped(), ns in "[a-z]{1,8}") {
        if let Ok(m) = translate(&ns, &text) {
            assert_safe(&ns, &m);
        }
    }

    /// Valid selectors from the grammar are accepted, keep every key, and
    /// values come back unchanged (regex alternatives unescaped).
    #[test]
    fn valid_selectors_translate_faithfully(reqs in prop::collection::vec(requirement(), 0..5)) {
        let reqs: Vec<Requirement> = reqs.into_iter().filter(|r| !matches!(r, Requirement::Equals(k, _) | Requirement::NotEquals(k, _) | Requirement::In(k, _) | Requirement::NotIn(k, _) | Requirement::Exists(k) | Requirement::DoesNotExist(k) if k == "namespace")).collect();
        let text = reqs.iter().map(render).collect::<Vec<_>>().join(",");
        let m = translate("ns-1", &text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_safe("ns-1", &m);
        let parsed = parse_matchers(&m).expect("matchers");
        for r in &reqs {
            let key = render(r).trim_start_matches('!').split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next().unwrap_or("").to_string();
            prop_assert!(parsed.iter().any(|(n, _, _)| *n == key), "{key} missing in {m}");
        }
        prop_assert_eq!(to_matchers("ns-1", &parse(&text).expect("parse")).expect("matchers"), m);
    }

    /// Whatever is accepted, every preset's query keeps its structure with
    /// either pod metadata source: the selector only ever lands inside
    /// `{...}`, and every `{...}` is a flat matcher list, namespace first.
    #[test]
    fn presets_keep_their_structure(text in selector_shaped()) {
        let Ok(reqs) = parse(&text) else { return Ok(()) };
        let config = MetricsConfig::presets();
        for name in presets::NAMES {
            for source in [PodMetadata::Exporter, PodMetadata::KubeStateMetrics] {
                let mut def = (**config.get(name).expect("preset")).clone();
                def.pod_metadata = source;
                let safe = join::render(&def, "inference", &[]).expect("render");
                let Ok(q) = join::render(&def, "inference", &reqs) else {
                    // Only a selector naming the metric's own namespace label is refused.
                    prop_assert!(reqs.iter().any(|r| r.key() == def.namespace_label));
                    continue;
                };
                prop_assert_eq!(structure(&q), structure(&safe));
                for block in blocks(&q) {
                    assert_safe_on(&def.namespace_label, "inference", block);
                }
            }
        }
    }

    /// Both matcher sets of a join are safe, and together they hold every
    /// requirement: none is dropped by the split.
    #[test]
    fn the_join_split_is_safe_and_complete(reqs in prop::collection::vec(requirement(), 0..5)) {
        let text = reqs.iter().map(render).collect::<Vec<_>>().join(",");
        let parsed = parse(&text).expect("valid selector");
        for source in [PodMetadata::Exporter, PodMetadata::KubeStateMetrics] {
            let m = Matchers::new("ns-1", &parsed, source).expect("matchers");
            for list in [&m.all, &m.series, &m.pod] {
                assert_safe("ns-1", list);
            }
            for block in blocks(&m.pods) {
                assert_safe("ns-1", block);
            }
            let count = |s: &str| parse_matchers(s).map_or(0, |v| v.len() - 1);
            prop_assert_eq!(count(&m.series) + count(&m.pod), count(&m.all));
        }
    }
}

/// The `{...}` matcher blocks of a query (values never hold braces: the
/// label-value syntax has none).
fn blocks(q: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = q;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        out.push(&rest[start + 1..start + end]);
        rest = &rest[start + end + 1..];
    }
    out
}

/// The query with string contents blanked and every matcher block as `M`.
fn structure(q: &str) -> String {
    let mut out = strip_strings(q);
    let mut at = 0;
    while let Some(start) = out[at..].find('{').map(|i| i + at) {
        let Some(end) = out[start..].find('}').map(|i| i + start) else {
            break;
        };
        out.replace_range(start + 1..end, "M");
        at = start + 2;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Custom metrics: whatever the metric selector and the object names
    /// (pod names come from the Kubernetes API, service names from the
    /// path), the matchers stay a flat list, the namespace first, and each
    /// name matches only itself.
    #[test]
    fn object_matchers_are_safe(text in selector_shaped(), names in prop::collection::vec(evil_string().prop_filter("non-empty", |s| !s.is_empty()), 1..4)) {
        let Ok(mut m) = translate("inference", &text) else { return Ok(()) };
        m.push(',');
        m.push_str(&names_matcher("pod", &names));
        assert_safe("inference", &m);
        let parsed = parse_matchers(&m).expect("matchers");
        let (label, op, value) = parsed.last().expect("pod matcher");
        prop_assert_eq!(label, "pod");
        if op == "=" {
            prop_assert_eq!(value, &names[0]);
        } else {
            prop_assert_eq!(op, "=~");
            prop_assert_eq!(regex_alternatives(value), names);
        }
    }

    /// The pod selector an HPA sends: refused or re-rendered to text that
    /// parses back to the same requirements (what the pod-list cache keys on
    /// and what the Kubernetes API receives).
    #[test]
    fn pod_selectors_are_refused_or_canonical(text in selector_shaped()) {
        if let Ok(r) = parse_kube(&text) {
            prop_assert_eq!(parse_kube(&to_text(&r)).expect("canonical text parses"), r);
        }
    }
}

/// The literal alternatives of an escaped `a|b\\.c` regex.
fn regex_alternatives(re: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.last_mut().expect("one").extend(chars.next()),
            '|' => out.push(String::new()),
            c => {
                assert!(!"\\.+*?()|[]{}^$".contains(c), "unescaped {c:?} in {re}");
                out.last_mut().expect("one").push(c);
            }
        }
    }
    out
}

/// Blank out the contents of double-quoted strings.
fn strip_strings(s: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut esc = false;
    for c in s.chars() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
                out.push('"');
            }
        } else {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    out
}

#[test]
fn known_attacks() {
    for bad in [
        r#"app="x"}) or vector(1) #"#,
        "app=x} or up{",
        "app=x,namespace=kube-system",
        "app in (a)) or (b",
        "app=\\\"",
        "__name__=up",
        "app=x\nnamespace=y",
    ] {
        assert!(translate("inference", bad).is_err(), "{bad:?} accepted");
    }
    assert!(translate("kube-system\"}", "").is_err());
}

/// The attack properties above prove something only for inputs that get
/// through the parser: a meaningful share of what they generate must, and
/// some must not (the attack strings are there).
#[test]
fn attack_inputs_often_reach_the_translation() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let n = 1000;
    let texts: Vec<String> = (0..n)
        .map(|_| {
            let tree = selector_shaped().new_tree(&mut runner);
            tree.expect("generate").current()
        })
        .collect();
    let share = |accepts: &dyn Fn(&str) -> bool| texts.iter().filter(|t| accepts(t)).count();
    for (what, accepted) in [
        ("translate", share(&|t| translate("inference", t).is_ok())),
        ("parse_kube", share(&|t| parse_kube(t).is_ok())),
    ] {
        eprintln!("{what}: {accepted} of {n} accepted");
        assert!(
            (n * 30 / 100..n * 95 / 100).contains(&accepted),
            "{what}: {accepted} of {n} generated selectors accepted (want 30-95 %)"
        );
    }
}
