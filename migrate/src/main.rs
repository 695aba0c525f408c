//! `kube-dns-migrate`: reads the input (a file or standard input), files
//! for a raw Corefile's imports and the environment, and prints the
//! translation; the exit status says whether anything was left out.

use clap::{Parser, ValueEnum};
use kube_dns_migrate::corefile::{glob_match, Files, Source};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const ABOUT: &str = "Checks what a CoreDNS Corefile becomes in kube-dns-rs";

const LONG_ABOUT: &str = "\
Checks what a CoreDNS Corefile becomes in kube-dns-rs, and prints it:
  - the skydns args (Go style -flag=value) and the kube2sky args
    (--flag=value), one per line as YAML list items, ready for a
    manifest's args; they state every setting the Corefile decides,
    including the features it leaves off (-autopath=false, -rcache=0),
    so they replace the same flags of the manifest;
  - the kube-dns ConfigMap (kube-system/kube-dns: stubDomains,
    upstreamNameservers), when the Corefile has stub domains or upstreams
    of its own (kube2sky --config-map=kube-dns reads it);
  - the /skydns/config etcd key, when a setting has no flag (min_ttl);
  - notes, and each plugin or option that cannot be carried over: its
    server block, file and line, the line, and why.

INPUT is a Corefile, or the YAML of the coredns ConfigMap (one document,
several, or a List, as `kubectl get -o yaml` prints it), or - for standard
input. In a ConfigMap, data.Corefile is the Corefile, and an import glob's
last path element is matched against the data keys of every ConfigMap in
the input (AKS: kubectl -n kube-system get configmap coredns coredns-custom
-o yaml). A raw Corefile's imports are files relative to its directory
(the current one for standard input). {$VAR} and {%VAR%} are taken from
the environment; an unset variable is an error (CoreDNS puts an empty
string there).

Exit status: 0 when everything was carried over, 1 when something was left
out (everything else is printed all the same), 2 on malformed input (the
error names the file and line; nothing is printed on standard output) or a
usage error.";

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// Sections for people.
    Text,
    /// One JSON document: flags, configmap, config_key, left_out, notes.
    Json,
}

#[derive(Debug, Parser)]
#[command(name = "kube-dns-migrate", version, about = ABOUT, long_about = LONG_ABOUT,
    after_help = "Documentation: docs/migrate-check.md.")]
struct Args {
    /// The Corefile or the coredns ConfigMap's YAML; - reads standard input.
    input: String,
    /// How to print the result.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let (label, dir, text) = match read(&args.input) {
        Ok(read) => read,
        Err(e) => return fail(&e),
    };
    let files = DiskFiles { dir };
    let env = |name: &str| std::env::var(name).ok();
    let translation = match kube_dns_migrate::check(&label, &text, &files, &env) {
        Ok(t) => t,
        Err(e) => return fail(&e.to_string()),
    };
    let out = match args.format {
        Format::Text => kube_dns_migrate::output::text(&translation),
        Format::Json => kube_dns_migrate::output::json(&translation),
    };
    if let Err(e) = std::io::stdout().lock().write_all(out.as_bytes()) {
        return fail(&format!("cannot write the result: {e}"));
    }
    ExitCode::from(kube_dns_migrate::exit_code(&translation))
}

fn fail(message: &str) -> ExitCode {
    eprintln!("kube-dns-migrate: {message}");
    ExitCode::from(2)
}

/// The input's label, the directory its imports are relative to, its text.
fn read(input: &str) -> Result<(String, PathBuf, String), String> {
    if input == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        return Ok(("<stdin>".to_owned(), PathBuf::from("."), text));
    }
    let text = std::fs::read_to_string(input).map_err(|e| format!("cannot read {input}: {e}"))?;
    let dir = Path::new(input)
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok((input.to_owned(), dir, text))
}

/// Import globs against the disk, relative to the Corefile's directory;
/// only the last path element may hold wildcards.
struct DiskFiles {
    dir: PathBuf,
}

impl Files for DiskFiles {
    fn glob(&self, pattern: &str) -> Result<Vec<Source>, String> {
        let path = self.dir.join(pattern);
        let parent = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut paths: Vec<PathBuf> = if name.contains(['*', '?', '[']) {
            let entries = std::fs::read_dir(&parent).into_iter().flatten().flatten();
            (entries.map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| glob_match(&name, &n.to_string_lossy()))
                })
                .collect()
        } else {
            vec![path.clone()]
                .into_iter()
                .filter(|p| p.exists())
                .collect()
        };
        paths.sort();
        (paths.into_iter())
            .map(|p| {
                let label = p.display().to_string();
                std::fs::read_to_string(&p)
                    .map(|text| Source {
                        label: label.clone(),
                        text,
                    })
                    .map_err(|e| format!("cannot read {label}: {e}"))
            })
            .collect()
    }
}
