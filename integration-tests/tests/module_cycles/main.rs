//! No import loop between the modules of any crate of the workspace, so
//! each crate reads as layers, bottom up; how the check reads the code and
//! how a loop is untied: docs/architecture.md, "Layers".

mod graph;
mod parse;

use graph::{loops, read_crate, Crate, Loop, ModPath};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[test]
fn no_crate_has_an_import_loop_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let mut found = Vec::new();
    for krate in crates(&root) {
        for found_loop in loops(&read_crate(&krate.join("src"))) {
            found.push(format!(
                "{}:\n  {}",
                krate.display(),
                found_loop.imports.join("\n  ")
            ));
        }
    }
    assert!(found.is_empty(), "import loops:\n{}", found.join("\n"));
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

/// A crate written for the test: file name → text.
fn made_up(files: &[(&str, &str)]) -> (tempfile::TempDir, Crate) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join("src").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let krate = read_crate(&dir.path().join("src"));
    (dir, krate)
}

fn m(path: &str) -> ModPath {
    path.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn targets(krate: &Crate, from: &str) -> BTreeMap<String, BTreeSet<String>> {
    let edges = krate.edges.get(&m(from)).cloned().unwrap_or_default();
    edges
        .into_iter()
        .map(|(to, names)| (to.join("::"), names))
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_check_reads_uses_paths_reexports_and_leaves_out_what_is_no_import() {
    let (_dir, krate) = made_up(&[
        (
            "lib.rs",
            "mod a; mod b; mod c; mod d; pub use b::B;\npub struct Root;\n",
        ),
        (
            "a.rs",
            "use crate::b::{\n    B,\n    more::{X as Y},\n};\npub struct A;\n",
        ),
        ("b.rs", "pub struct B;\nfn f() { let _ = crate::a::A; }\n"),
        (
            "c.rs",
            "// crate::a::A\n/* crate::b::B /* nested */ crate::a::A */\n/// [`crate::b::B`]\n\
             const S: &str = \"crate::a::A /*\";\nconst R: &str = r#\"crate::a::A\"#;\n\
             use std::sync::Arc;\nuse crate::Root;\n\
             #[cfg(test)]\nfn t(x: [u8; 4]) { let _ = crate::a::A; }\n\
             #[cfg(test)]\nmod tests { use crate::a::A; }\n#[cfg(test)]\nmod helpers;\n\
             fn g() -> char { '{' }\n",
        ),
        ("c/helpers.rs", "use crate::b::B;\n"),
        ("c/tests.rs", "use crate::b::B;\n"),
        // Through the root's re-export: d takes B from b.
        (
            "d.rs",
            "#[allow(unused)]use crate::B;\nuse super::a::{self};\n",
        ),
    ]);
    assert_eq!(
        targets(&krate, "a"),
        BTreeMap::from([("b".into(), names(&["B", "more"]))])
    );
    assert_eq!(
        targets(&krate, "b"),
        BTreeMap::from([("a".into(), names(&["A"]))])
    );
    assert_eq!(
        targets(&krate, "c"),
        BTreeMap::new(),
        "comments, literals, tests"
    );
    assert!(
        !krate.files.contains_key(&m("c::helpers")),
        "a test module's file"
    );
    assert_eq!(
        targets(&krate, "d"),
        BTreeMap::from([("a".into(), names(&["a"])), ("b".into(), names(&["B"]))])
    );
    let found: Vec<Vec<ModPath>> = loops(&krate).into_iter().map(|l| l.modules).collect();
    assert_eq!(found, [vec![m("a"), m("b")]]);
}

#[test]
fn the_check_finds_loops_through_reexports_and_between_folders() {
    let (_dir, krate) = made_up(&[
        (
            "lib.rs",
            "mod e; mod f; mod handler; mod store; pub use f::F;\n",
        ),
        // e and f import each other only through the root's re-export.
        ("e.rs", "use crate::F;\npub struct E;\n"),
        ("f.rs", "pub struct F;\nfn f() -> crate::e::E { todo!() }\n"),
        // store imports the handler, the handler a file in store's folder.
        ("store.rs", "mod paths;\nuse crate::handler::Shared;\n"),
        ("store/paths.rs", "pub fn read() {}\n"),
        (
            "handler.rs",
            "mod pending;\nuse pending::Route;\npub type Shared = ();\n\
             fn h() { crate::store::paths::read() }\n",
        ),
        (
            "handler/pending.rs",
            "use super::Shared;\npub enum Route {}\n",
        ),
    ]);
    // The child named by itself is an edge; taking from the parent is not.
    assert_eq!(
        targets(&krate, "handler"),
        BTreeMap::from([
            ("handler::pending".into(), names(&["Route"])),
            ("store::paths".into(), names(&["read"])),
        ])
    );
    assert_eq!(targets(&krate, "handler::pending"), BTreeMap::new());
    let found = loops(&krate);
    let modules: Vec<&Vec<ModPath>> = found.iter().map(|l| &l.modules).collect();
    assert_eq!(
        modules,
        [&vec![m("e"), m("f")], &vec![m("handler"), m("store")]]
    );
    let Loop { imports, .. } = &found[1];
    assert_eq!(
        imports,
        &["handler -> store::paths: read", "store -> handler: Shared"]
    );
}
