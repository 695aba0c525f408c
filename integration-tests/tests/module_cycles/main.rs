//! No import cycle between the modules of any crate of the workspace: a
//! module that imports another (directly or through others) is never
//! imported back by it, so each crate reads as layers, bottom up.
//!
//! A module is a source file of `src/` (tests left out: `tests.rs`, files
//! under `tests/`, and what follows `#[cfg(test)]`). It imports another
//! when a `use` statement or a path in its code (`crate::a::b`,
//! `super::x`, `self::y`, or a `use` of a child module by its name) names
//! that module or an item in it; comments do not count. A module taking
//! an item from one of its ancestors is part of that ancestor (a folder's
//! files use its face, `handler.rs` for `handler/`), so that is no edge.
//! docs/architecture.md ("Layers") says how a loop is untied.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path within its crate (`["handler", "pending"]`; the root is
/// empty).
type ModPath = Vec<String>;

/// One crate's modules and the edges between them, with the names that
/// make each edge (for the message).
#[derive(Default)]
struct Graph {
    files: BTreeMap<ModPath, PathBuf>,
    edges: BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<String>>>,
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let mut found = Vec::new();
    for krate in crates(&root) {
        let graph = graph_of(&krate.join("src"));
        for cycle in cycles(&graph) {
            found.push(describe(&krate, &graph, &cycle));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_a_cycle_and_ignores_what_is_no_import() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("handler")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\nmod handler;\npub struct Root;\n",
    );
    write("a.rs", "use crate::b::{B, more::{X}};\npub struct A;\n");
    write("b.rs", "pub struct B;\nfn f() { let _ = crate::a::A; }\n");
    // Comments, ancestors, tests and extern crates are no edges.
    write(
        "c.rs",
        "// crate::a::A\n/// [`crate::b::B`]\nuse std::sync::Arc;\nuse crate::Root;\n\
         #[cfg(test)]\nmod tests { use crate::a::A; }\n",
    );
    write(
        "handler.rs",
        "mod pending;\nuse pending::Route;\npub struct Inner;\n",
    );
    write(
        "handler/pending.rs",
        "use super::Inner;\npub enum Route {}\n",
    );
    let graph = graph_of(&src);
    let found: Vec<Vec<ModPath>> = cycles(&graph);
    assert_eq!(found, [vec![vec!["a".to_string()], vec!["b".to_string()]]]);
    let message = describe(dir.path(), &graph, &found[0]);
    assert!(
        message.contains("a -> b: B, more") || message.contains("a -> b: B"),
        "{message}"
    );
    assert!(message.contains("b -> a: A"), "{message}");
    assert!(graph
        .edges
        .get(&vec!["c".to_string()])
        .is_none_or(BTreeMap::is_empty));
}

/// The workspace's crates: each directory with a `src/` and a Cargo.toml.
fn crates(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src").is_dir())
        .collect();
    out.sort();
    assert!(out.len() >= 10, "the workspace's crates: {out:?}");
    out
}

/// The module graph of the crate whose sources are under `src`.
fn graph_of(src: &Path) -> Graph {
    let mut graph = Graph::default();
    for file in sources(src) {
        if let Some(module) = module_of(src, &file) {
            graph.files.insert(module, file);
        }
    }
    let modules: BTreeSet<ModPath> = graph.files.keys().cloned().collect();
    for (module, file) in &graph.files {
        let text = code_of(&std::fs::read_to_string(file).unwrap());
        for path in paths_in(&text) {
            let Some((target, name)) = resolve(&modules, module, &path) else {
                continue;
            };
            if target != *module && !module.starts_with(&target) {
                let names = graph.edges.entry(module.clone()).or_default();
                names.entry(target).or_default().insert(name);
            }
        }
    }
    graph
}

/// Every `.rs` file under `dir` but test files and binaries' own folders.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "tests" && name != "bin" {
                out.extend(sources(&path));
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
    out
}

/// The module a file is (`a/b.rs` and `a/b/mod.rs`: `a::b`); `main.rs` is
/// a root of its own, left out (it only wires the library together).
fn module_of(src: &Path, file: &Path) -> Option<ModPath> {
    let relative = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: ModPath = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    match parts.last().map(String::as_str) {
        Some("main") if parts.len() == 1 => return None,
        Some("lib") if parts.len() == 1 => parts.clear(),
        Some("mod") => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts)
}

/// A file's code: comments removed (strings kept: paths in them are rare
/// and harmless), and each item marked `#[cfg(test)]` left out.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("//").into_iter().chain(rest.find("/*")).min() {
        out.push_str(&rest[..start]);
        rest = if rest[start..].starts_with("//") {
            rest[start..]
                .find('\n')
                .map_or("", |end| &rest[start + end..])
        } else {
            rest[start..]
                .find("*/")
                .map_or("", |end| &rest[start + end + 2..])
        };
    }
    out.push_str(rest);
    without_test_items(&out)
}

/// `code` without the items that follow `#[cfg(test)]` (to their `;`, or
/// the `}` that closes their first `{`).
fn without_test_items(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(open)) if semi < open => semi + 1,
            (_, Some(open)) => closing_brace(item, open),
            (Some(semi), None) => semi + 1,
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Just past the `}` that closes the `{` at `open`.
fn closing_brace(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Every path a file's code names: each leaf of each `use` tree, and each
/// `crate::`, `super::` or `self::` path elsewhere.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut other = String::new();
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        other.push_str(&rest[..at]);
        let tail = &rest[at + 4..];
        let end = tail.find(';').unwrap_or(tail.len());
        let tree = &tail[..end];
        // A `use` tree is names, `::`, braces, commas and `as`; anything
        // else is the word "use" in a string.
        let path_chars = |c: char| c.is_alphanumeric() || "_:{},* \n\t\r".contains(c);
        if tree.chars().all(path_chars) {
            out.extend(expand_use(tree));
            rest = &tail[end..];
        } else {
            other.push_str("use ");
            rest = tail;
        }
    }
    other.push_str(rest);
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = other[from..].find(start) {
            let begin = from + at;
            from = begin + start.len();
            let before = other[..begin].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // the end of a longer path or name
            }
            let path: String = other[begin..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(segments(&path));
        }
    }
    out
}

/// Where the next `use` statement's keyword is.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let before = code[..at].chars().last();
        if before.is_none_or(|c| c.is_whitespace() || c == ';' || c == '}' || c == ')') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// The leaf paths of a `use` tree (`a::{b, c::{d, self}}`: `a::b`,
/// `a::c::d`, `a::c`).
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    expand(&tree, &[], &mut out);
    out
}

fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        let mut full = prefix.to_vec();
        let leaf = segments(path);
        full.extend(
            leaf.into_iter()
                .filter(|s| s != "self" || prefix.is_empty()),
        );
        out.push(full);
        return;
    };
    let mut base = prefix.to_vec();
    base.extend(segments(&tree[..open]));
    let close = tree
        .rfind('}')
        .filter(|close| *close > open)
        .unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&inner[start..i], &base, out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        expand(&inner[start..], &base, out);
    }
}

/// `a :: b::c` as `["a", "b", "c"]` (a glob's `*` left out).
fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(|s| s.trim().trim_start_matches("r#"))
        .filter(|s| !s.is_empty() && *s != "*")
        .map(str::to_string)
        .collect()
}

/// The module `path` (named in `from`) lands in, the longest known one,
/// and the name it takes from there; `None` for another crate's path.
fn resolve(
    modules: &BTreeSet<ModPath>,
    from: &ModPath,
    path: &[String],
) -> Option<(ModPath, String)> {
    let mut base: ModPath;
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &rest[1..];
        }
        Some("self") => {
            base = from.clone();
            rest = &rest[1..];
        }
        Some("super") => {
            base = from.clone();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module named by itself (`mod x; use x::Y;`).
            let mut child = from.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            base = from.clone();
        }
        None => return None,
    }
    let mut name = String::new();
    for segment in rest {
        let mut deeper = base.clone();
        deeper.push(segment.clone());
        if modules.contains(&deeper) {
            base = deeper;
        } else {
            name = segment.clone();
            break;
        }
    }
    if name.is_empty() {
        name = base.last().cloned().unwrap_or_default();
    }
    Some((base, name))
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a ModPath, (usize, usize)>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a ModPath) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        w.on_stack.insert(v);
        if let Some(targets) = w.graph.edges.get(v) {
            for t in targets.keys() {
                if !w.index.contains_key(t) {
                    visit(w, t);
                    let low = w.index[t].1.min(w.index[v].1);
                    w.index.get_mut(v).unwrap().1 = low;
                } else if w.on_stack.contains(t) {
                    let low = w.index[t].0.min(w.index[v].1);
                    w.index.get_mut(v).unwrap().1 = low;
                }
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let mut component = Vec::new();
            while let Some(top) = w.stack.pop() {
                w.on_stack.remove(top);
                component.push(top.clone());
                if top == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.found.push(component);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.files.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}

/// A cycle as the lines that make it: `a -> b: names`.
fn describe(krate: &Path, graph: &Graph, cycle: &[ModPath]) -> String {
    let name = |m: &ModPath| {
        if m.is_empty() {
            "crate".to_string()
        } else {
            m.join("::")
        }
    };
    let mut lines = vec![format!("{}:", krate.display())];
    for from in cycle {
        for (to, names) in graph.edges.get(from).into_iter().flatten() {
            if cycle.contains(to) {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                lines.push(format!(
                    "  {} -> {}: {}",
                    name(from),
                    name(to),
                    names.join(", ")
                ));
            }
        }
    }
    lines.join("\n")
}
