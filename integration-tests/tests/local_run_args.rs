//! `deploy/local/run.sh` settles its arguments before it installs, builds
//! or starts anything: `--help` prints its header comment and exits 0, a
//! bad argument exits 2, both without side effects. And it installs only
//! its own packages: `scripts/install-deps.sh --local` asks apt for what
//! the local run needs, the plain call (scripts/test.sh's) for the whole
//! test suite's.
//!
//! The scripts run with a `PATH` of their own: bash's usual tools, and
//! stand-ins that log their calls for everything that installs, builds or
//! starts (`apt-get`, `sudo`, `cargo`, `etcd`, ...). For install-deps only
//! `apt-get` and `sudo` stand in: the packages' own commands (`protoc`,
//! `etcd`, `dig`, ...) are missing from that `PATH`, so it asks for them.

use anyhow::{ensure, Context, Result};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Tools the scripts may use to parse their arguments and print help.
const TOOLS: [&str; 9] = [
    "bash", "awk", "sed", "dirname", "cat", "id", "env", "mktemp", "grep",
];
/// Stand-ins that must not be called by `run.sh --help`; each logs a line.
const LOGGED: [&str; 9] = [
    "apt-get", "sudo", "cargo", "etcd", "etcdctl", "curl", "go", "kubectl", "tail",
];
/// What the local run needs (deploy/local/run.sh).
const LOCAL: [&str; 5] = [
    "protobuf-compiler",
    "etcd-server",
    "etcd-client",
    "dnsutils",
    "curl",
];
/// Packages only the test suite needs.
const SUITE_ONLY: [&str; 8] = [
    "qemu-user-static",
    "bind9-utils",
    "bind9-dnsutils",
    "dnsmasq-base",
    "dnsperf",
    "prometheus",
    "iproute2",
    "openssl",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A directory for `PATH`: links to [`TOOLS`], logging stand-ins named
/// `stubs` (their calls go to `calls.log` beside it).
fn sandbox(stubs: &[&str]) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin)?;
    for tool in TOOLS {
        let path = test_support::tools::require(tool, "coreutils")?;
        std::os::unix::fs::symlink(path, bin.join(tool))?;
    }
    let log = dir.path().join("calls.log");
    for name in stubs {
        let stub = bin.join(name);
        let script = format!(
            "#!{}\necho \"{name} $*\" >> '{}'\n",
            bin.join("bash").display(),
            log.display()
        );
        std::fs::write(&stub, script)?;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(dir)
}

fn calls(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default()
}

fn run(dir: &Path, script: &str, args: &[&str]) -> Result<Output> {
    let out = Command::new(dir.join("bin/bash"))
        .arg(root().join(script))
        .args(args)
        .env_clear()
        .env("PATH", dir.join("bin"))
        .env("HOME", dir)
        .current_dir(dir)
        .output()
        .with_context(|| format!("{script} {args:?}"))?;
    Ok(out)
}

/// The header comment: the lines after the shebang up to the first one
/// that is not a comment, without their `# `.
fn header(script: &str) -> Result<String> {
    let text = std::fs::read_to_string(root().join(script))?;
    let mut out = String::new();
    for line in text.lines().skip(1).take_while(|l| l.starts_with('#')) {
        let line = line.strip_prefix('#').unwrap_or(line);
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    Ok(out)
}

#[test]
fn run_sh_help_prints_the_header_and_does_nothing_else() -> Result<()> {
    let want = header("deploy/local/run.sh")?;
    ensure!(want.contains("Environment: DNS_PORT"), "{want}");
    for flag in ["--help", "-h"] {
        let dir = sandbox(&LOGGED)?;
        let out = run(dir.path(), "deploy/local/run.sh", &[flag, "--bogus"])?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(out.status.success(), "{flag}: {:?}\n{stderr}", out.status);
        ensure!(
            stdout == want,
            "{flag} printed\n{stdout}\nnot the header\n{want}"
        );
        ensure!(stderr.is_empty(), "{flag}: {stderr}");
        ensure!(
            calls(dir.path()).is_empty(),
            "{flag} ran {}",
            calls(dir.path())
        );
    }
    Ok(())
}

#[test]
fn run_sh_refuses_a_bad_argument_before_anything_else() -> Result<()> {
    for args in [&["--bogus"][..], &["--etcd-api"], &["--etcd-api=v4"]] {
        let dir = sandbox(&LOGGED)?;
        let out = run(dir.path(), "deploy/local/run.sh", args)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.code() == Some(2),
            "{args:?}: {:?} {stderr}",
            out.status
        );
        ensure!(out.stdout.is_empty(), "{args:?}");
        ensure!(
            calls(dir.path()).is_empty(),
            "{args:?} ran {}",
            calls(dir.path())
        );
    }
    Ok(())
}

/// The packages `scripts/install-deps.sh args` asks apt-get to install.
fn requested(args: &[&str]) -> Result<BTreeSet<String>> {
    // apt-get logs, every package's own command is missing; so do the
    // arm64 cross build's installers (rustup, pip through python3).
    let dir = sandbox(&["apt-get", "sudo", "rustup", "python3", "cargo-zigbuild"])?;
    let out = run(dir.path(), "scripts/install-deps.sh", args)?;
    ensure!(
        out.status.success(),
        "install-deps {args:?}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = calls(dir.path());
    let mut packages = BTreeSet::new();
    for line in calls.lines().filter(|l| l.contains("apt-get install")) {
        let words = line.split_whitespace().skip_while(|w| *w != "install");
        packages.extend(
            words
                .skip(1)
                .filter(|w| !w.starts_with('-'))
                .map(str::to_owned),
        );
    }
    Ok(packages)
}

#[test]
fn install_deps_local_asks_only_for_the_local_runs_packages() -> Result<()> {
    let local = requested(&["--local"])?;
    let want: BTreeSet<String> = LOCAL.map(str::to_owned).into();
    // libprotobuf-dev is asked for by a file's absence, not a command's.
    let mut at_most = want.clone();
    at_most.insert("libprotobuf-dev".to_owned());
    ensure!(
        local.is_superset(&want) && local.is_subset(&at_most),
        "--local asked for {local:?}, want {want:?}"
    );
    let all = requested(&[])?;
    ensure!(all.is_superset(&want), "{all:?}");
    for package in SUITE_ONLY {
        ensure!(
            all.contains(package),
            "the plain call leaves out {package}: {all:?}"
        );
    }
    Ok(())
}

#[test]
fn the_header_reader_reads_what_it_is_for() -> Result<()> {
    let text = header("scripts/install-deps.sh")?;
    ensure!(text.starts_with("Installs the system packages"), "{text}");
    ensure!(!text.contains("set -euo"), "{text}");
    Ok(())
}
