//! `scripts/kube-tools.sh`, the build of the tests' real control plane: the
//! bad states a machine can be in each stop it with a message naming the
//! fix, and none of them leaves a cache that passes for built. Nothing is
//! built here (each case fails before the build, or reads the cache only).

use super::*;
use std::process::Output;

/// Runs kube-tools.sh with `args`, its cache in `cache` and `path` as PATH.
fn kube_tools(cache: &std::path::Path, path: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/kube-tools.sh"))
        .args(args)
        .env("KUBE_TOOLS_CACHE", cache)
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .expect("running bash scripts/kube-tools.sh")
}

/// The machine's PATH.
fn path() -> String {
    std::env::var("PATH").unwrap_or_default()
}

/// A directory holding a `go` that prints `version` for `go env GOVERSION`
/// and writes the `GOTOOLCHAIN` it was run with to `toolchain` beside it.
fn fake_go(version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "#!/bin/sh\necho \"$GOTOOLCHAIN\" > {}/toolchain\necho {version}\n",
        dir.path().display()
    );
    std::fs::write(&go, script).unwrap();
    std::fs::set_permissions(&go, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

/// A directory with only the tools the script needs before it looks for
/// Go (a machine's `/usr/bin` may hold Debian's own, older `go`).
fn without_go() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for tool in ["bash", "dirname"] {
        let found = test_support::tools::require(tool, "coreutils").unwrap();
        std::os::unix::fs::symlink(found, dir.path().join(tool)).unwrap();
    }
    dir
}

#[test]
fn without_go_it_says_to_install_go_1_26() {
    let cache = tempfile::tempdir().unwrap();
    let tools = without_go();
    let out = kube_tools(cache.path(), &tools.path().to_string_lossy(), &[], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("Go is missing"), "{err}");
    assert!(err.contains("install Go 1.26"), "{err}");
    assert_eq!(
        std::fs::read_dir(cache.path()).unwrap().count(),
        0,
        "wrote to the cache"
    );
}

#[test]
fn an_older_go_is_refused_without_fetching_a_toolchain() {
    let cache = tempfile::tempdir().unwrap();
    let go = fake_go("go1.22.1");
    let path = format!("{}:/usr/bin:/bin", go.path().display());
    let out = kube_tools(cache.path(), &path, &[("GOTOOLCHAIN", "auto")], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Go 1.22.1 is older than tools/kube/go.mod's go 1.26.0"),
        "{err}"
    );
    assert!(err.contains("no toolchain is downloaded"), "{err}");
    // Go was asked with toolchain switching off, whatever the caller's.
    let asked = std::fs::read_to_string(go.path().join("toolchain")).unwrap();
    assert_eq!(asked.trim(), "local");
}

#[test]
fn an_unreachable_module_proxy_is_named() {
    let cache = tempfile::tempdir().unwrap();
    let modules = tempfile::tempdir().unwrap();
    // An empty module cache and a proxy nobody listens on: the download
    // fails at once, before any build.
    let dead = test_support::dead::closed_url();
    let env = [
        ("GOMODCACHE", modules.path().to_str().unwrap()),
        ("GOPROXY", dead.as_str()),
    ];
    let out = kube_tools(cache.path(), &path(), &env, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("downloading the modules of tools/kube failed"),
        "{err}"
    );
    assert!(
        err.contains(&format!("The Go module proxy ({dead}) must be reachable")),
        "{err}"
    );
    // Nothing that passes for built.
    let check = kube_tools(cache.path(), &path(), &env, &["--check"]);
    assert!(!check.status.success());
}

#[test]
fn a_half_built_cache_does_not_pass_for_built() {
    let cache = tempfile::tempdir().unwrap();
    // The pin's directory as a build killed midway leaves it: binaries,
    // no `.complete` stamp.
    let out = kube_tools(cache.path(), &path(), &[], &["--print-dir"]);
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && dir.starts_with(&*cache.path().to_string_lossy()),
        "{out:?}"
    );
    std::fs::create_dir_all(&dir).unwrap();
    for binary in [
        "kube-apiserver",
        "kube-controller-manager",
        "etcd",
        "coredns",
        "helm",
        "actionlint",
    ] {
        let file = std::path::Path::new(&dir).join(binary);
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let check = kube_tools(cache.path(), &path(), &[], &["--check"]);
    assert!(!check.status.success(), "a half-built cache passed --check");
    // With the stamp it is built.
    std::fs::write(std::path::Path::new(&dir).join(".complete"), "").unwrap();
    let check = kube_tools(cache.path(), &path(), &[], &["--check"]);
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), dir);
}
