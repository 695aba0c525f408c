//! The Go-style flags the operator docs cite exist. The docs write the
//! flags of skydns, exec-healthz and etcd Go style (`-nameservers`,
//! `-loop=exit`, `-max-txn-ops`) and kube2sky's GNU style (`--ttl`), so
//! every `` `-name` `` (or `` `-name=value` ``) in inline code of these docs
//! must be a flag that `skydns --help`, `exec-healthz -h` or `etcd --help`
//! lists. A flag that does not exist may be named only as
//! "no `-name` flag".

use anyhow::{ensure, Context, Result};
use std::collections::BTreeSet;
use std::process::Command;
use test_support::bins::built_binary;

/// The docs checked.
const DOCS: [&str; 5] = [
    "exec-healthz.md",
    "kube2sky.md",
    "monitoring.md",
    "security.md",
    "troubleshooting.md",
];

/// Placeholders the docs use for "any flag".
const PLACEHOLDERS: [&str; 1] = ["flag"];

/// The flag names a help text lists: `-name`, `--name`, `-x, --name` at the
/// start of an indented line.
fn listed_flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for line in help.lines().filter(|l| l.starts_with(' ')) {
        for word in line.trim_start().split(", ") {
            let Some(rest) = word.strip_prefix('-') else {
                break;
            };
            let name: String = rest
                .trim_start_matches('-')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !name.is_empty() {
                flags.insert(name);
            }
        }
    }
    flags
}

fn help_of(mut command: Command) -> Result<String> {
    let out = command.output().with_context(|| format!("{command:?}"))?;
    ensure!(out.status.success(), "{command:?}: {}", out.status);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(text)
}

/// The flags of skydns, exec-healthz and etcd.
fn known_flags() -> Result<BTreeSet<String>> {
    let mut skydns = Command::new(built_binary("skydns"));
    skydns.arg("--help");
    let mut healthz = Command::new(built_binary("exec-healthz"));
    healthz.arg("-h");
    let mut etcd = test_support::tools::command("etcd", "etcd-server")?;
    etcd.arg("--help");
    let mut known = BTreeSet::new();
    for command in [skydns, healthz, etcd] {
        let flags = listed_flags(&help_of(command)?);
        ensure!(flags.len() > 5, "only {flags:?} listed");
        known.extend(flags);
    }
    Ok(known)
}

/// Every `` `-name...` `` in inline code outside fenced blocks, with the
/// line number; those in "no `-name` flag" are left out.
fn cited_flags(text: &str) -> Vec<(usize, String)> {
    let mut cited = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (i, code) in line.split('`').enumerate().skip(1).step_by(2) {
            let Some(rest) = code.strip_prefix('-') else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let whole = name.len() == rest.len() || rest[name.len()..].starts_with('=');
            let letter = name.starts_with(|c: char| c.is_ascii_alphabetic());
            if !letter || !whole {
                continue; // `--gnu-style`, `-1`, `-x y` (a command) or none
            }
            let before = line.split('`').nth(i - 1).unwrap_or("");
            let after = line.split('`').nth(i + 1).unwrap_or("");
            if before.ends_with("no ") && after.starts_with(" flag") {
                continue;
            }
            cited.push((n + 1, name));
        }
    }
    cited
}

#[test]
fn every_go_style_flag_the_docs_cite_exists() -> Result<()> {
    let known = known_flags()?;
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/");
    let (mut problems, mut checked) = (Vec::new(), 0);
    for doc in DOCS {
        let text = std::fs::read_to_string(format!("{docs}{doc}")).context(doc)?;
        for (line, name) in cited_flags(&text) {
            checked += 1;
            if !known.contains(&name) && !PLACEHOLDERS.contains(&name.as_str()) {
                problems.push(format!("docs/{doc}:{line}: -{name}"));
            }
        }
    }
    ensure!(
        checked > 50,
        "only {checked} flags cited: is the parser broken?"
    );
    ensure!(
        problems.is_empty(),
        "flags no binary (skydns, exec-healthz, etcd) has:\n{}",
        problems.join("\n")
    );
    Ok(())
}

#[test]
fn the_parsers_read_what_they_are_for() {
    let help = "Usage:\n  -cmd string\n      --verbose[=<VERBOSE>]\n    \tthe command\n  -V, -version\n      --domain <DOMAIN>\n  -h, --help  Print help\n  --name 'default'\nOptions:\n";
    let want = [
        "cmd", "verbose", "V", "version", "domain", "h", "help", "name",
    ];
    assert_eq!(listed_flags(help), want.map(str::to_owned).into());
    let text = "`-loop=exit` and `--ttl`, `-1`, `kubectl -n x`, skydns has no `-ttl` flag\n\
                ```sh\nskydns `-fenced`\n```\n(its `-ttl`, 3600 s) `-V`\n";
    let cited: Vec<String> = cited_flags(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(cited, ["loop", "ttl", "V"]);
}
