//! The documentation as a reader uses it: README.md and every `docs/*.md`.
//!
//! - Every relative link (`[text](path)`, `![alt](path)`, with an optional
//!   `#anchor`) names a file or directory that exists, and an anchor names a
//!   heading of the Markdown file it points into (GitHub's heading ids).
//! - Every fenced code block tagged `sh` runs as written: one
//!   `bash -euo pipefail` script per block, from the repository root, with
//!   the workspace's binaries first on `PATH`, exiting 0 within a minute.
//! - Blocks tagged `sh-long` (runs here, but long or installing packages)
//!   and `sh-cluster` (needs a cluster, a registry, the network or root) are
//!   not run; every repository script they name must exist.
//! - A block tagged `bash`, `shell`, `console` or `zsh` is an error: each
//!   command says whether it is run.
//! - The log lines docs/troubleshooting.md lists are in the sources of the
//!   binary it names.
//!
//! docs/testing.md ("The documentation") describes the convention. The
//! parser is line-based Markdown: fences open with three backticks or
//! tildes and a tag, links are looked for outside fences and inline code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::bins::{bin_dir, built_binary};

/// How long one `sh` block may run.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(60);
/// Fence tags that mean "a shell command" without saying whether it runs.
const AMBIGUOUS_TAGS: [&str; 4] = ["bash", "shell", "console", "zsh"];
/// Where repository scripts live, for the existence check of blocks not run.
const SCRIPT_DIRS: [&str; 5] = [
    "deploy/",
    "scripts/",
    "integration-tests/bench/",
    "fuzz/",
    ".ci/",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests lives in the workspace")
        .to_path_buf()
}

/// README.md, the READMEs one directory down (kube2sky/, deploy/, ...) and
/// docs/*.md, sorted.
fn doc_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut readmes: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the repository root")
        .map(|e| e.expect("entry").path().join("README.md"))
        .filter(|p| p.is_file() && !p.starts_with(root.join("target")))
        .collect();
    readmes.sort();
    files.extend(readmes);
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ holds no .md file");
    files.extend(docs);
    files
}

/// A fenced code block.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    /// The tag after the opening fence (`sh`, `yaml`, ...), may be empty.
    tag: String,
    /// The lines between the fences.
    body: String,
    /// 1-based line of the opening fence.
    line: usize,
}

/// A link target found in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    target: String,
    line: usize,
}

/// What a Markdown file holds for these checks.
#[derive(Debug, Default)]
struct Parsed {
    blocks: Vec<Block>,
    links: Vec<Link>,
    /// GitHub ids of the headings (outside fences).
    anchors: BTreeSet<String>,
}

fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut open: Option<(String, Block)> = None; // (fence, block)
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if let Some((fence, block)) = &mut open {
            if trimmed.starts_with(fence.as_str())
                && trimmed.trim_matches(&['`', '~'][..]).trim().is_empty()
            {
                parsed.blocks.push(block.clone());
                open = None;
            } else {
                block.body.push_str(line);
                block.body.push('\n');
            }
            continue;
        }
        for fence in ["```", "~~~"] {
            if let Some(rest) = trimmed.strip_prefix(fence) {
                let tag = rest.trim_start_matches(&['`', '~'][..]).trim();
                let tag = tag.split_whitespace().next().unwrap_or("").to_owned();
                open = Some((
                    fence.to_owned(),
                    Block {
                        tag,
                        body: String::new(),
                        line: n,
                    },
                ));
                break;
            }
        }
        if open.is_some() {
            continue;
        }
        if let Some(heading) = heading_text(line) {
            parsed.anchors.insert(github_id(&heading));
        }
        for target in link_targets(&strip_inline_code(line)) {
            parsed.links.push(Link { target, line: n });
        }
    }
    if let Some((_, block)) = open {
        panic!("a fence opened at line {} is never closed", block.line);
    }
    parsed
}

/// `## Title` → `Title`.
fn heading_text(line: &str) -> Option<String> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = &line[hashes..];
    rest.starts_with(' ')
        .then(|| rest.trim().trim_end_matches('#').trim().to_owned())
}

/// GitHub's heading id: lower case; letters, digits, `-` and `_` kept,
/// spaces become `-`, everything else (punctuation, backticks) dropped.
fn github_id(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The line without its `inline code` spans.
fn strip_inline_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of `[text](target)` and `![alt](target)` on one line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].trim();
        // `[text](target "title")`
        let target = target.split_whitespace().next().unwrap_or("");
        if !target.is_empty() {
            targets.push(target.to_owned());
        }
        rest = &after[end..];
    }
    targets
}

/// Problems with the relative links of `file` (`text` is its content).
fn broken_links(file: &Path, text: &str) -> Vec<String> {
    let parsed = parse(text);
    let dir = file.parent().expect("a file in a directory");
    let mut problems = Vec::new();
    for Link { target, line } in &parsed.links {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let where_ = format!("{}:{line}: {target}", file.display());
        let anchors = if path.is_empty() {
            parsed.anchors.clone()
        } else {
            let resolved = dir.join(path);
            if !resolved.exists() {
                problems.push(format!("{where_}: {} does not exist", resolved.display()));
                continue;
            }
            if anchor.is_none() || resolved.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let linked = std::fs::read_to_string(&resolved)
                .unwrap_or_else(|e| panic!("reading {}: {e}", resolved.display()));
            parse(&linked).anchors
        };
        if let Some(anchor) = anchor {
            if !anchors.contains(anchor) {
                problems.push(format!("{where_}: no heading with the id #{anchor}"));
            }
        }
    }
    problems
}

/// Repository scripts a command names (`deploy/render.sh`, `scripts/test.sh`).
fn named_scripts(body: &str) -> Vec<String> {
    body.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ';' || c == '|')
        .map(|w| w.trim_matches(&['"', '\'', '`'][..]))
        .filter(|w| w.ends_with(".sh") && SCRIPT_DIRS.iter().any(|d| w.starts_with(d)))
        .map(str::to_owned)
        .collect()
}

/// Runs one `sh` block; `Err` says why it failed.
fn run_block(block: &Block, path: &str) -> Result<(), String> {
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block.body])
        .current_dir(repo_root())
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start bash: {e}"))?;
    // Read the pipes on threads so a chatty block cannot fill them and hang.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > BLOCK_TIMEOUT {
            child.kill().ok();
            child.wait().ok();
            return Err(format!("still running after {BLOCK_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{status}\nstdout:\n{out}\nstderr:\n{err}"))
    }
}

#[test]
fn every_relative_link_points_to_an_existing_file_and_heading() {
    let mut problems = Vec::new();
    let mut links = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("readable");
        links += parse(&text).links.len();
        problems.extend(broken_links(&file, &text));
    }
    assert!(
        links > 20,
        "only {links} links found: is the parser broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_sh_block_runs_as_written() {
    // The workspace's binaries, not stale, first on PATH.
    for bin in ["skydns", "kube2sky", "exec-healthz"] {
        built_binary(bin);
    }
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("readable");
        for block in parse(&text).blocks.iter().filter(|b| b.tag == "sh") {
            ran += 1;
            if let Err(why) = run_block(block, &path) {
                failures.push(format!(
                    "{}:{}:\n{}-> {why}",
                    file.display(),
                    block.line,
                    block.body
                ));
            }
        }
    }
    assert!(
        ran >= 5,
        "only {ran} sh blocks found: is the parser broken?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn blocks_not_run_name_existing_scripts_and_every_shell_block_is_tagged() {
    let root = repo_root();
    let mut problems = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("readable");
        for block in parse(&text).blocks {
            let at = format!("{}:{}", file.display(), block.line);
            if AMBIGUOUS_TAGS.contains(&block.tag.as_str()) {
                problems.push(format!(
                    "{at}: tag {:?}: use sh (run by this test), sh-long or sh-cluster",
                    block.tag
                ));
            }
            if block.tag.starts_with("sh") {
                for script in named_scripts(&block.body) {
                    if !root.join(&script).is_file() {
                        problems.push(format!("{at}: {script} does not exist"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The literal pieces of a documented log line: `<...>`, `...`, `…` and
/// single capitals (`N`, `S`, `M`) stand for values; pieces shorter than 6
/// characters say too little to be looked for.
fn log_line_pieces(line: &str) -> Vec<String> {
    let mut text = String::new();
    let mut depth = 0;
    for c in line.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => {
                depth -= 1;
                text.push('\u{0}');
            }
            _ if depth > 0 => {}
            _ => text.push(c),
        }
    }
    let text = text.replace("...", "\u{0}").replace('…', "\u{0}");
    let words: Vec<String> = text
        .split(' ')
        .map(|w| {
            let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
            if bare.len() == 1 && bare.chars().all(|c| c.is_ascii_uppercase()) {
                "\u{0}".to_owned()
            } else {
                w.to_owned()
            }
        })
        .collect();
    words
        .join(" ")
        .split('\u{0}')
        .map(str::trim)
        .filter(|p| p.len() >= 6)
        .map(str::to_owned)
        .collect()
}

/// The Rust sources of `dirs` (relative to the repository), concatenated.
fn sources(dirs: &[&str]) -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).expect("a source directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).expect("readable"));
            }
        }
    }
    let mut out = String::new();
    for dir in dirs {
        walk(&repo_root().join(dir), &mut out);
    }
    out
}

/// docs/troubleshooting.md, "Log lines": each line in the table is printed
/// by the binary it names (every literal piece of it is in that binary's
/// sources), so the table cannot drift from what the logs say.
#[test]
fn documented_log_lines_are_printed_by_the_code() {
    let text = std::fs::read_to_string(repo_root().join("docs/troubleshooting.md"))
        .expect("docs/troubleshooting.md");
    let table = text
        .split("\n## Log lines\n")
        .nth(1)
        .expect("a Log lines section");
    let source_of = |binary: &str| match binary {
        "kube2sky" => sources(&["kube2sky/src", "etcd-access/src"]),
        "skydns" => sources(&["skydns/src", "etcd-access/src"]),
        "exec-healthz" => sources(&["healthz/src"]),
        other => panic!("docs/troubleshooting.md: unknown binary {other:?}"),
    };
    let mut missing = Vec::new();
    let mut checked = 0;
    for row in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| binary"))
    {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (binary, lines) = (cells[0].trim_start_matches("| "), cells[1]);
        let source = source_of(binary);
        for (i, quoted) in lines.split('`').enumerate() {
            if i % 2 == 0 {
                continue; // outside backticks
            }
            for piece in log_line_pieces(quoted) {
                checked += 1;
                if !source.contains(&piece) {
                    missing.push(format!("{binary}: {piece:?} (from `{quoted}`)"));
                }
            }
        }
    }
    assert!(
        checked > 30,
        "only {checked} pieces checked: is the table there?"
    );
    assert!(
        missing.is_empty(),
        "log lines in docs/troubleshooting.md that the code does not print:\n{}",
        missing.join("\n")
    );
}

/// The checks above can fail: a broken link, a missing heading, a script
/// that does not exist, an ambiguous tag and a failing command are caught.
#[test]
fn the_checks_catch_what_they_are_for() {
    let file = repo_root().join("docs").join("example.md");
    let text = "# Title\n\n## A `code` heading: 1.2\n\n\
        [ok](install.md) [ok](#title) [ok](#a-code-heading-12) [ok](../README.md#kube-dns-rs)\n\
        `[not a link](nowhere.md)`\n\
        [gone](no-such-file.md) [bad anchor](install.md#no-such-heading) [bad local](#nope)\n\
        ```sh\n[inside a fence](nowhere-either.md)\n```\n";
    let problems = broken_links(&file, text);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("no-such-file.md does not exist"));
    assert!(problems[1].contains("#no-such-heading"));
    assert!(problems[2].contains("#nope"));

    let parsed =
        parse("```sh\necho a \\\n  b\n```\n\n~~~sh-cluster\nkubectl apply\n~~~\n```\nplain\n```\n");
    let tags: Vec<&str> = parsed.blocks.iter().map(|b| b.tag.as_str()).collect();
    assert_eq!(tags, ["sh", "sh-cluster", ""]);
    assert_eq!(parsed.blocks[0].body, "echo a \\\n  b\n");

    assert_eq!(
        named_scripts("X=1 deploy/render.sh kubernetes | kubectl apply -f -\n(scripts/test.sh)"),
        ["deploy/render.sh", "scripts/test.sh"]
    );
    assert!(!root_has("deploy/no-such-script.sh"));

    let path = std::env::var("PATH").unwrap_or_default();
    let failing = Block {
        tag: "sh".into(),
        body: "true\nfalse\ntrue\n".into(),
        line: 1,
    };
    assert!(
        run_block(&failing, &path).is_err(),
        "set -e: a failing line fails the block"
    );
    let piped = Block {
        tag: "sh".into(),
        body: "false | cat\n".into(),
        line: 1,
    };
    assert!(run_block(&piped, &path).is_err(), "pipefail");
    assert_eq!(
        log_line_pieces("[Attempt: N] Attempting access to etcd after S second sleep"),
        [
            "[Attempt:",
            "Attempting access to etcd after",
            "second sleep"
        ]
    );
    assert_eq!(
        log_line_pieces("Not writing <key>: it holds a record ..."),
        ["Not writing", ": it holds a record"]
    );
    let kube2sky = sources(&["kube2sky/src"]);
    assert!(!kube2sky.contains("Not writing anything at all, ever"));
    assert_eq!(github_id("5. Check"), "5-check");
    assert_eq!(
        github_id("skydns: differences from SkyDNS 2.5.2c"),
        "skydns-differences-from-skydns-252c"
    );
}

fn root_has(rel: &str) -> bool {
    repo_root().join(rel).is_file()
}
