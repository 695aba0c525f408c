//! The workspace's own binaries, as tests that run them find them.
//!
//! Integration tests of this crate can only name their own package's
//! binaries through `CARGO_BIN_EXE_*`; the others (skydns, kube2sky,
//! exec-healthz) are found next to the test executable, in the profile's
//! target directory. `scripts/test.sh` builds them first with
//! `cargo build --workspace --bins`.

use std::path::PathBuf;

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
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}
