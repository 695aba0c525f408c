//! The `kubectl exec` commands of the runbooks and the troubleshooting
//! guide use only what the images hold: skydns's and kube2sky's images are
//! distroless (the binary alone), etcd's has `etcdctl` but no shell, and
//! the `healthz` container is busybox, in the same network namespace as
//! skydns. So no command execs into `skydns` or `kube2sky`, one into etcd
//! runs `etcdctl`, and one into `healthz` a busybox applet. The
//! SkydnsNotReady runbook's `healthz` commands are run here with busybox
//! against a skydns that is not ready, and say what the runbook says they
//! say.

use anyhow::{ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use test_support::dead::closed_url;
use test_support::etcd::Api;
use test_support::skydns::{Launch, Ready};

/// Files whose commands are checked.
const FILES: [&str; 6] = [
    "docs/monitoring.md",
    "docs/troubleshooting.md",
    "docs/configuration.md",
    "deploy/monitoring/kube-dns-rs.rules.yaml",
    "deploy/monitoring/kube-dns-rs.prometheusrule.yaml",
    "deploy/monitoring/kube-dns-rs.rules.test.yaml",
];

/// The prefix of the runbook's commands in the `healthz` container.
const IN_HEALTHZ: &str = "kubectl -n kube-system exec \"$POD\" -c healthz -- ";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn busybox() -> Result<PathBuf> {
    test_support::tools::require("busybox", "busybox-static")
}

/// The applets busybox offers (`busybox --list`).
fn applets() -> Result<Vec<String>> {
    let out = Command::new(busybox()?).arg("--list").output()?;
    ensure!(out.status.success(), "busybox --list: {}", out.status);
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .map(str::to_owned)
        .collect())
}

/// Why the `kubectl ... exec ...` command in `line` cannot work, if it
/// cannot: (container or pod, first word of the command).
fn exec_problem(line: &str, applets: &[String]) -> Option<String> {
    let at = line.find("kubectl ")?;
    let line = &line[at..];
    if !line.split_whitespace().any(|w| w == "exec") {
        return None;
    }
    let (before, command) = line.split_once(" -- ")?;
    let words: Vec<&str> = before.split_whitespace().collect();
    let container = words
        .iter()
        .position(|w| *w == "-c")
        .and_then(|i| words.get(i + 1).copied());
    let pod = words.last().copied().unwrap_or("");
    let program = command.split_whitespace().next().unwrap_or("");
    let program = program.trim_matches(|c| c == '`' || c == '\\');
    match container {
        Some("skydns" | "kube2sky") => Some(format!(
            "-c {}: a distroless image, nothing to exec but the binary",
            container.unwrap_or_default()
        )),
        Some("etcd") if program != "etcdctl" => Some(format!(
            "{program} in etcd: its image has etcdctl, no shell"
        )),
        None if pod.starts_with("kube-dns-etcd-") && program != "etcdctl" => Some(format!(
            "{program} in an etcd member: it has etcdctl, no shell"
        )),
        Some("healthz") if !applets.iter().any(|a| a == program) => {
            Some(format!("{program} is no busybox applet"))
        }
        _ => None,
    }
}

/// The lines of `text` with each `\`-continued one joined to the next,
/// numbered by their first line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut continued = false;
    for (n, line) in text.lines().enumerate() {
        let (body, more) = match line.trim_end().strip_suffix('\\') {
            Some(body) => (body, true),
            None => (line, false),
        };
        match out.last_mut() {
            Some((_, last)) if continued => last.push_str(body.trim_start()),
            _ => out.push((n + 1, body.to_owned())),
        }
        continued = more;
    }
    out
}

#[test]
fn exec_commands_use_what_the_images_hold() -> Result<()> {
    let applets = applets()?;
    let (mut problems, mut execs) = (Vec::new(), 0);
    for file in FILES {
        let text = std::fs::read_to_string(root().join(file)).context(file)?;
        for (n, line) in logical_lines(&text) {
            if line.contains("kubectl") && line.contains(" exec ") {
                execs += 1;
            }
            if let Some(why) = exec_problem(&line, &applets) {
                problems.push(format!("{file}:{n}: {why}\n  {line}"));
            }
        }
    }
    ensure!(
        execs >= 10,
        "only {execs} exec commands: is the reader broken?"
    );
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// The commands the SkydnsNotReady runbook runs in `healthz`.
fn skydns_not_ready_commands() -> Result<Vec<String>> {
    let text = std::fs::read_to_string(root().join("docs/monitoring.md"))?;
    let (_, section) = text
        .split_once("\n### SkydnsNotReady\n")
        .context("no SkydnsNotReady runbook")?;
    let section = section.split("\n### ").next().unwrap_or_default();
    Ok(section
        .lines()
        .filter_map(|l| l.strip_prefix(IN_HEALTHZ))
        .map(str::to_owned)
        .collect())
}

/// A directory of links to busybox named as `applets`: the userland of
/// the healthz image.
fn busybox_path(dir: &Path, applets: &[&str]) -> Result<()> {
    let busybox = busybox()?;
    for applet in applets {
        std::os::unix::fs::symlink(&busybox, dir.join(applet))?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skydns_not_ready_runbook_prints_the_status_and_the_reason() -> Result<()> {
    let commands = skydns_not_ready_commands()?;
    ensure!(
        commands.iter().any(|c| c.starts_with("wget "))
            && commands.iter().any(|c| c.contains("| nc ")),
        "want a wget and an nc command in healthz: {commands:?}"
    );
    // etcd out of reach: alive, not ready, the reason in /ready's body.
    let skydns = Launch::new(&closed_url(), Api::V3)
        .ready(Ready::Health)
        .start()
        .await?;
    let dir = tempfile::tempdir()?;
    busybox_path(dir.path(), &["sh", "wget", "nc", "printf", "cat"])?;
    let reason = "records not loaded from the store yet";
    for command in &commands {
        let here = command.replace("9153", &skydns.metrics_port.to_string());
        let out = Command::new("/bin/bash")
            .args(["-c", &here])
            .env("PATH", dir.path())
            .output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if command.starts_with("wget ") {
            // busybox's wget: the status line of an error, not its body.
            ensure!(!out.status.success(), "{command}: {text}");
            ensure!(
                text.contains("server returned error: HTTP/1.1 503 Service Unavailable"),
                "{command}: {text}"
            );
            ensure!(!text.contains(reason), "{command}: {text}");
        } else {
            ensure!(out.status.success(), "{command}: {text}");
            ensure!(
                text.contains(" 503 ") && text.contains(reason),
                "{command}: {text}"
            );
        }
    }
    Ok(())
}

#[test]
fn the_exec_reader_reads_what_it_is_for() {
    let applets = ["wget".to_owned(), "sh".to_owned()];
    let bad = [
        "`kubectl exec ... -c skydns -- wget -qO- localhost:9153/ready`",
        "kubectl -n kube-system exec \"$POD\" -c kube2sky -- ls",
        "kubectl -n kube-system exec \"$POD\" -c etcd -- sh -c 'etcdctl get /'",
        "kubectl -n kube-system exec kube-dns-etcd-0-0 -- cat /x",
        "kubectl -n kube-system exec \"$POD\" -c healthz -- curl -s x",
    ];
    for line in bad {
        assert!(exec_problem(line, &applets).is_some(), "{line}");
    }
    let good = [
        "kubectl -n kube-system exec \"$POD\" -c healthz -- wget -qO- http://127.0.0.1:9153/ready",
        "kubectl -n kube-system exec \"$POD\" -c etcd -- etcdctl get /skydns --prefix",
        "kubectl -n kube-system exec kube-dns-etcd-0-0 -- etcdctl put /skydns/config '{}'",
        "kubectl -n kube-system logs \"$POD\" -c skydns --previous",
        "kubectl exec dnsutils -- dig @\"$POD_IP\" example.com A",
    ];
    for line in good {
        assert_eq!(exec_problem(line, &applets), None, "{line}");
    }
    let joined = logical_lines("a \\\n  b\nc\n");
    assert_eq!(joined, [(1, "a b".to_owned()), (3, "c".to_owned())]);
}
