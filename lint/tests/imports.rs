//! Imports run one way: no two modules of a crate use each other, directly
//! or round a loop. A module may use its parent's items and declare its
//! children (Rust's own tree); every other `crate::` or `super::` path is an
//! edge between the siblings that hold its two ends, and each level's
//! sibling graph must have no cycle. Every crate of the workspace is read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path below the crate root (`["auth", "authn"]`).
type Module = Vec<String>;

/// `from` uses `to`, first seen at `site` (file:line).
struct Edge {
    from: Module,
    to: Module,
    site: String,
}

/// Loops known today while they are being broken, as `crate: a ⇄ b`. An
/// entry that no longer loops fails the test, so the list only shrinks.
const KNOWN: &[&str] = &[];

#[test]
fn exporter_modules_import_one_way() {
    assert_no_cycles("exporter");
}

#[test]
fn adapter_modules_import_one_way() {
    assert_no_cycles("adapter");
}

#[test]
fn adapter_signals_modules_import_one_way() {
    assert_no_cycles("adapter/signals");
}

#[test]
fn adapter_decide_modules_import_one_way() {
    assert_no_cycles("adapter/decide");
}

#[test]
fn scale_to_zero_modules_import_one_way() {
    assert_no_cycles("adapter/scale-to-zero");
}

#[test]
fn keda_modules_import_one_way() {
    assert_no_cycles("adapter/keda");
}

#[test]
fn nvml_sim_modules_import_one_way() {
    assert_no_cycles("nvml-sim");
}

#[test]
fn dcgm_sim_modules_import_one_way() {
    assert_no_cycles("dcgm-sim");
    assert_no_cycles("dcgm-abi");
}

#[test]
fn replay_modules_import_one_way() {
    assert_no_cycles("replay");
}

#[test]
fn advisor_modules_import_one_way() {
    assert_no_cycles("advisor");
}

#[test]
fn activator_modules_import_one_way() {
    assert_no_cycles("activator");
}

#[test]
fn conn_modules_import_one_way() {
    assert_no_cycles("conn");
}

#[test]
fn sim_modules_import_one_way() {
    assert_no_cycles("sim");
}

#[test]
fn util_modules_import_one_way() {
    assert_no_cycles("util");
}

#[test]
fn top_modules_import_one_way() {
    assert_no_cycles("top");
}

#[test]
fn a_two_way_import_is_found() {
    let files = BTreeMap::from([
        (vec!["a".into()], "use crate::b::Thing;\n".to_string()),
        (
            vec!["b".into()],
            "pub fn f() { crate::a::g() }\n".to_string(),
        ),
        (vec!["c".into()], "use super::a;\n".to_string()),
    ]);
    let cycles = cycles(&edges(&files));
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].0, "a ⇄ b");
    assert!(cycles[0].1.contains("a → b (a:1)") && cycles[0].1.contains("b → a (b:1)"));
}

fn assert_no_cycles(krate: &str) {
    let src = gpuscale_lint::repo_root().join(krate).join("src");
    let files = sources(&src);
    assert!(!files.is_empty(), "{}: no modules read", src.display());
    let found = cycles(&edges(&files));
    let known: Vec<&str> = KNOWN
        .iter()
        .filter_map(|k| k.strip_prefix(&format!("{krate}: ")))
        .collect();
    let new: Vec<&str> = found
        .iter()
        .filter(|(name, _)| !known.contains(&name.as_str()))
        .map(|(_, steps)| steps.as_str())
        .collect();
    assert!(
        new.is_empty(),
        "{krate}: modules that import each other (move the shared items into a module both can use):\n{}",
        new.join("\n")
    );
    for k in known {
        assert!(
            found.iter().any(|(name, _)| name == k),
            "{krate}: {k} no longer loops: remove it from KNOWN"
        );
    }
}

/// Every module's code (test modules left out: they may reach anywhere).
fn sources(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    for path in rs_files(src) {
        let rel = path.strip_prefix(src).expect("below src");
        let mut module: Module = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        match module.last().map(String::as_str) {
            Some("main") if module.len() == 1 => continue, // another crate
            _ if module.first().is_some_and(|m| m == "bin") => continue, // crates too
            Some("tests") => continue,                     // a test module file
            Some("lib" | "mod") => {
                module.pop();
            }
            _ => {}
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        out.insert(module, code.to_string());
    }
    out
}

/// Every `.rs` file below `dir`.
pub(crate) fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(rs_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The sibling edges of every `crate::`/`super::` path in the code.
fn edges(files: &BTreeMap<Module, String>) -> Vec<Edge> {
    let known: BTreeSet<&Module> = files.keys().collect();
    let mut out = Vec::new();
    for (module, code) in files {
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            for path in paths(line, module) {
                let target = deepest_known(&path, &known);
                if let Some((from, to)) = siblings(module, &target) {
                    let site = format!("{}:{}", module.join("::"), n + 1);
                    out.push(Edge { from, to, site });
                }
            }
        }
    }
    out
}

/// Absolute module paths named on a line: `crate::a::b`, `super::c`, and
/// each branch of a `use crate::{a, b::c}` group.
fn paths(line: &str, module: &Module) -> Vec<Module> {
    let mut out = Vec::new();
    for (start, root) in roots(line, module) {
        let rest = &line[start..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or("");
            for branch in group.split(',') {
                out.push([root.clone(), idents(branch.trim())].concat());
            }
        } else {
            out.push([root, idents(rest)].concat());
        }
    }
    out
}

/// Where each `crate::`/`super::` path starts on the line, and the module
/// it is relative to.
fn roots(line: &str, module: &Module) -> Vec<(usize, Module)> {
    let mut out = Vec::new();
    for (i, _) in line.match_indices("crate::") {
        let before = line[..i].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            out.push((i + "crate::".len(), Vec::new()));
        }
    }
    for (i, _) in line.match_indices("super::") {
        if line[..i].ends_with("super::") {
            continue; // counted from the first `super::`
        }
        let mut base = module.clone();
        let mut at = i;
        while line[at..].starts_with("super::") {
            base.pop();
            at += "super::".len();
        }
        out.push((at, base));
    }
    out
}

/// The leading `a::b::c` of a path.
fn idents(s: &str) -> Module {
    s.split("::")
        .map(|seg| {
            seg.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|seg| !seg.is_empty())
        .collect()
}

fn deepest_known(path: &Module, known: &BTreeSet<&Module>) -> Module {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
        .unwrap_or_default()
}

/// The two children of the common ancestor that hold `from` and `to`;
/// `None` when one holds the other (a parent and its child, or itself).
fn siblings(from: &Module, to: &Module) -> Option<(Module, Module)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].to_vec(), to[..=common].to_vec()))
}

/// Each loop of modules: its members (`a ⇄ b`, sorted) and every step of
/// it with where it is written.
fn cycles(edges: &[Edge]) -> Vec<(String, String)> {
    let mut graph: BTreeMap<&Module, BTreeMap<&Module, &str>> = BTreeMap::new();
    for e in edges {
        graph
            .entry(&e.from)
            .or_default()
            .entry(&e.to)
            .or_insert(&e.site);
    }
    let mut found = Vec::new();
    let mut reported: BTreeSet<BTreeSet<&Module>> = BTreeSet::new();
    for &start in graph.keys() {
        if let Some(path) = loop_from(start, &graph)
            && reported.insert(path.iter().copied().collect())
        {
            let steps: Vec<String> = path
                .iter()
                .zip(path.iter().cycle().skip(1))
                .map(|(a, b)| format!("  {} → {} ({})", a.join("::"), b.join("::"), graph[a][b]))
                .collect();
            let mut names: Vec<String> = path.iter().map(|m| m.join("::")).collect();
            names.sort();
            found.push((names.join(" ⇄ "), steps.join("\n")));
        }
    }
    found
}

/// A loop through `start` (breadth first, so the shortest), as its modules.
fn loop_from<'a>(
    start: &'a Module,
    graph: &BTreeMap<&'a Module, BTreeMap<&'a Module, &str>>,
) -> Option<Vec<&'a Module>> {
    let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for &next in graph.get(at).into_iter().flat_map(|m| m.keys()) {
            if next == start {
                let mut path = vec![at];
                while let Some(&prev) = path.last().and_then(|p| came_from.get(p)) {
                    path.push(prev);
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(next) && next != start {
                came_from.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}
