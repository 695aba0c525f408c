//! A crate's modules and the imports between them, and the loops in them:
//! between files, and between the files and folders of each folder.

use super::parse::{self, Named};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path within its crate (`["handler", "pending"]`; the root
/// is empty).
pub(crate) type ModPath = Vec<String>;

/// For each module, the modules it imports and the names it takes.
pub(crate) type Edges = BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<String>>>;

/// A crate as the check sees it.
#[derive(Default)]
pub(crate) struct Crate {
    pub(crate) files: BTreeMap<ModPath, PathBuf>,
    pub(crate) edges: Edges,
}

/// A loop: the modules in it (files, or the folders and files of one
/// folder) and the imports between files that make it.
#[derive(Debug, PartialEq)]
pub(crate) struct Loop {
    pub(crate) modules: Vec<ModPath>,
    pub(crate) imports: Vec<String>,
}

/// The crate whose sources are under `src`.
pub(crate) fn read_crate(src: &Path) -> Crate {
    let mut files = BTreeMap::new();
    for file in sources(src) {
        if let Some(module) = module_of(src, &file) {
            files.insert(module, file);
        }
    }
    let mut named: BTreeMap<ModPath, Named> = files
        .iter()
        .map(|(m, f)| (m.clone(), parse::read(&std::fs::read_to_string(f).unwrap())))
        .collect();
    // Test modules in files of their own are test code.
    let tests: Vec<ModPath> = named
        .iter()
        .flat_map(|(m, n)| n.test_modules.iter().map(move |t| child(m, t)))
        .collect();
    files.retain(|m, _| !tests.iter().any(|t| m.starts_with(t)));
    named.retain(|m, _| files.contains_key(m));
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    let reexports = reexports(&modules, &named);
    let mut edges = Edges::new();
    for (module, named) in &named {
        let uses = named.uses.iter().map(|u| &u.path);
        for path in uses.chain(&named.paths) {
            let Some((target, name)) = resolve(&modules, &reexports, module, path) else {
                continue;
            };
            // Taking from an ancestor is taking from the folder one is in.
            if target != *module && !module.starts_with(&target) {
                let names = edges.entry(module.clone()).or_default();
                names.entry(target).or_default().insert(name);
            }
        }
    }
    Crate { files, edges }
}

fn child(module: &ModPath, name: &str) -> ModPath {
    let mut out = module.clone();
    out.push(name.to_string());
    out
}

/// Names that modules re-export (`pub use b::B` in `a`): `(a, "B")` → `b`.
fn reexports(
    modules: &BTreeSet<ModPath>,
    named: &BTreeMap<ModPath, Named>,
) -> BTreeMap<(ModPath, String), ModPath> {
    let none = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (module, named) in named {
        for u in named.uses.iter().filter(|u| u.public) {
            let (Some(binds), Some((target, _))) =
                (&u.binds, resolve(modules, &none, module, &u.path))
            else {
                continue;
            };
            if target != *module {
                out.insert((module.clone(), binds.clone()), target);
            }
        }
    }
    out
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

/// The module `path` (named in `from`) lands in, the longest known one,
/// and the name it takes from there, through re-exports; `None` for
/// another crate's path.
fn resolve(
    modules: &BTreeSet<ModPath>,
    reexports: &BTreeMap<(ModPath, String), ModPath>,
    from: &ModPath,
    path: &[String],
) -> Option<(ModPath, String)> {
    let (mut base, rest) = start_of(modules, from, path)?;
    let mut name = String::new();
    for segment in rest {
        let deeper = child(&base, segment);
        if modules.contains(&deeper) {
            base = deeper;
            continue;
        }
        name = segment.clone();
        // A re-exported name leads to where it is defined.
        let mut hops = 0;
        while let Some(target) = reexports.get(&(base.clone(), name.clone())) {
            base = target.clone();
            hops += 1;
            if hops > 8 {
                break;
            }
        }
        break;
    }
    if name.is_empty() {
        name = base.last().cloned().unwrap_or_default();
    }
    Some((base, name))
}

/// Where a path starts (`crate`, `self`, `super`s, or a child module named
/// by itself) and its segments after that.
fn start_of<'p>(
    modules: &BTreeSet<ModPath>,
    from: &ModPath,
    path: &'p [String],
) -> Option<(ModPath, &'p [String])> {
    match path.first().map(String::as_str)? {
        "crate" => Some((Vec::new(), &path[1..])),
        "self" => Some((from.clone(), &path[1..])),
        "super" => {
            let mut base = from.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            Some((base, rest))
        }
        first => modules
            .contains(&child(from, first))
            .then(|| (from.clone(), path)),
    }
}

/// Every loop of `krate`: between its files, and, in each folder, between
/// its files and sub-folders taken whole (a file importing a module in a
/// folder imports the folder).
pub(crate) fn loops(krate: &Crate) -> Vec<Loop> {
    let mut found: Vec<Loop> = Vec::new();
    let mut seen: BTreeSet<Vec<ModPath>> = BTreeSet::new();
    let files: Vec<ModPath> = krate.files.keys().cloned().collect();
    let mut levels: Vec<Option<ModPath>> = vec![None, Some(Vec::new())];
    levels.extend(files.iter().map(|f| Some(f.clone())));
    for level in levels {
        // `None`: files as they are; `Some(folder)`: the folder's children.
        let node = |m: &ModPath| -> Option<ModPath> {
            match &level {
                None => Some(m.clone()),
                Some(folder) if m.len() > folder.len() && m.starts_with(folder) => {
                    Some(m[..=folder.len()].to_vec())
                }
                Some(_) => None,
            }
        };
        let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (from, targets) in &krate.edges {
            for to in targets.keys() {
                if let (Some(a), Some(b)) = (node(from), node(to)) {
                    if a != b {
                        graph.entry(a).or_default().insert(b);
                    }
                }
            }
        }
        for component in components(&graph) {
            if seen.insert(component.clone()) {
                let imports = imports_within(krate, &component, &node);
                found.push(Loop {
                    modules: component,
                    imports,
                });
            }
        }
    }
    found
}

/// The file imports that run between the members of a loop.
fn imports_within(
    krate: &Crate,
    component: &[ModPath],
    node: &dyn Fn(&ModPath) -> Option<ModPath>,
) -> Vec<String> {
    let name = |m: &ModPath| {
        if m.is_empty() {
            "crate".into()
        } else {
            m.join("::")
        }
    };
    let mut out = Vec::new();
    for (from, targets) in &krate.edges {
        for (to, names) in targets {
            let (Some(a), Some(b)) = (node(from), node(to)) else {
                continue;
            };
            if a != b && component.contains(&a) && component.contains(&b) {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                out.push(format!(
                    "{} -> {}: {}",
                    name(from),
                    name(to),
                    names.join(", ")
                ));
            }
        }
    }
    out
}

/// The strongly connected components of more than one node (Tarjan).
fn components(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
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
        for t in w.graph.get(v).into_iter().flatten() {
            if !w.index.contains_key(t) {
                visit(w, t);
                let low = w.index[t].1.min(w.index[v].1);
                w.index.get_mut(v).unwrap().1 = low;
            } else if w.on_stack.contains(t) {
                let low = w.index[t].0.min(w.index[v].1);
                w.index.get_mut(v).unwrap().1 = low;
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
    let nodes: BTreeSet<&ModPath> = graph.keys().chain(graph.values().flatten()).collect();
    for v in nodes {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}
