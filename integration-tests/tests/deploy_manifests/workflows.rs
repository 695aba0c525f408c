//! `.github/workflows/`: linted by actionlint (built by
//! `scripts/kube-tools.sh` from `tools/release/go.mod`), which fails on a
//! broken workflow; `ci.yml` runs the README's test command on pull
//! requests; `release.yml`, on a version tag, tests first and then pushes
//! both architectures' images with `deploy/build-images.sh` and attaches the
//! binaries, the rendered manifests of every flavour and the chart.

use super::*;
use serde_yaml::Value;

/// actionlint on `files`.
fn actionlint(files: &[&Path]) -> std::process::Output {
    let binary = test_support::control_plane::binaries()
        .expect("scripts/kube-tools.sh (builds actionlint)")
        .join("actionlint");
    Command::new(binary)
        .arg("-no-color")
        .args(files)
        .current_dir(repo_root())
        .output()
        .expect("running actionlint")
}

fn workflow(name: &str) -> Value {
    serde_yaml::from_str(&read(&format!(".github/workflows/{name}")))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every `run:` script of a workflow's jobs, joined.
fn runs(w: &Value) -> String {
    let mut all = String::new();
    for (_, job) in w["jobs"].as_mapping().expect("jobs") {
        for step in job["steps"].as_sequence().into_iter().flatten() {
            if let Some(run) = step["run"].as_str() {
                all.push_str(run);
                all.push('\n');
            }
        }
    }
    all
}

#[test]
fn the_workflows_lint_clean_and_a_broken_one_does_not() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "ci.yml and release.yml: {files:?}");
    let out = actionlint(&files.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "actionlint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The same workflow with an expression that names no context field.
    let dir = tempfile::tempdir().unwrap();
    let workflows = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    let broken = read(".github/workflows/ci.yml").replace(
        "group: ci-${{ github.ref }}",
        "group: ci-${{ github.no_such_field }}",
    );
    std::fs::write(workflows.join("ci.yml"), broken).unwrap();
    let out = actionlint(&[&workflows.join("ci.yml")]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a broken workflow passed");
    assert!(printed.contains("no_such_field"), "{printed}");
}

#[test]
fn ci_runs_the_test_command_on_pull_requests() {
    let ci = workflow("ci.yml");
    assert!(ci["on"].get("pull_request").is_some(), "on pull_request");
    assert!(
        ci["on"].get("workflow_call").is_some(),
        "the release calls it"
    );
    assert!(
        runs(&ci).lines().any(|l| l.trim() == ".ci/run"),
        "runs .ci/run"
    );
    assert!(read(".ci/run").contains("exec scripts/test.sh"));
    assert!(
        read("README.md").contains("\nscripts/test.sh "),
        "README's test command"
    );
}

#[test]
fn a_version_tag_tests_then_publishes_images_binaries_manifests_and_the_chart() {
    let release = workflow("release.yml");
    let tags = &release["on"]["push"]["tags"];
    assert_eq!(tags, &Value::from(vec!["v*"]), "on a version tag");
    assert_eq!(
        release["jobs"]["test"]["uses"].as_str(),
        Some("./.github/workflows/ci.yml")
    );
    assert_eq!(release["jobs"]["release"]["needs"].as_str(), Some("test"));
    let perms = &release["jobs"]["release"]["permissions"];
    assert_eq!(perms["packages"].as_str(), Some("write"), "pushes to GHCR");

    let script = runs(&release);
    assert!(script.contains("prefix=\"ghcr.io/"), "{script}");
    assert!(
        script.contains("deploy/build-images.sh --tool docker \"$prefix\""),
        "both architectures (build-images.sh's default), pushed"
    );
    // The targets and the cross-compiling tools build-release.sh needs.
    assert!(
        script.contains("rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl")
    );
    let pins = read("scripts/build-release.sh");
    let pip = script
        .lines()
        .find(|l| l.trim().starts_with("pip install"))
        .expect("pip install");
    assert!(
        pins.contains(pip.trim()),
        "the pins build-release.sh names: {pip}"
    );
    assert!(
        script.contains("for arch in amd64 arm64; do") && script.contains("target/images/$arch"),
        "both architectures' binaries attached"
    );
    let flavours = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("for flavour in "))
        .and_then(|l| l.strip_suffix("; do"))
        .expect("a loop over the flavours");
    let mut flavours: Vec<&str> = flavours.split_whitespace().collect();
    flavours.sort();
    let mut all = ALL_FLAVOURS.to_vec();
    all.sort();
    assert_eq!(flavours, all, "every flavour's manifests attached");
    assert!(script
        .contains("IMAGE_PREFIX=\"$PREFIX\" DNS_SERVER_IP=\"$ip\" deploy/render.sh \"$flavour\""));
    assert!(script.contains("helm package charts/kube-dns-rs"));
    assert!(script.contains("sha256sum"));
    assert!(script.contains("gh release create \"$VERSION\""));
}
