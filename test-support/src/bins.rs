//! The workspace's own binaries, as tests that run them find them: next to the
//! test executable, in the profile's target directory (`scripts/test.sh` builds
//! them first). A binary older than any source it is built from fails the test
//! at once.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The directory holding the workspace's binaries for the running profile.
pub fn bin_dir() -> PathBuf {
    // target/<profile>/deps/<test executable> → target/<profile>
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("a target/<profile>/deps directory")
        .to_path_buf()
}

/// The path of binary `name`, failing with a hint when it was not built.
pub fn built_binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
                path.display()
            )
        });
    // Cargo's dep-info file lists every source file the binary was built
    // from; one newer than the binary means the build is stale.
    let dep_info = bin_dir().join(format!("{name}.d"));
    if let Some((newest, at)) = newest_source(&dep_info) {
        assert!(
            at <= built,
            "{} is older than {}: run `cargo build --workspace --bins` (scripts/test.sh does)",
            path.display(),
            newest.display()
        );
    }
    path
}

/// The most recently modified source file listed in a dep-info file
/// (`target: source source...`, spaces in paths escaped as `\ `).
fn newest_source(dep_info: &Path) -> Option<(PathBuf, SystemTime)> {
    let text = std::fs::read_to_string(dep_info).ok()?;
    let first = text.lines().next()?;
    let (_, sources) = first.split_once(": ")?;
    sources
        .replace("\\ ", "\u{0}")
        .split_whitespace()
        .map(|p| PathBuf::from(p.replace('\u{0}', " ")))
        .filter_map(|p| {
            let at = std::fs::metadata(&p).ok()?.modified().ok()?;
            Some((p, at))
        })
        .max_by_key(|(_, at)| *at)
}
