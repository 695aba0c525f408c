//! The built `kube-dns-migrate` on each fixture of tests/fixtures/: its exit
//! status, the lines it prints, and that skydns's and kube2sky's own flag
//! parsers take the args it prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_kube-dns-migrate");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary in the fixtures directory (so files are named as given).
fn run(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(fixtures())
        .env_remove("KUBE_DNS_MIGRATE_UNSET_UPSTREAM")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kube-dns-migrate starts");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .expect("stdin written");
    drop(input);
    let out = child.wait_with_output().expect("kube-dns-migrate ends");
    Run {
        code: out.status.code().expect("an exit status"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8"),
    }
}

/// The lines of section `# <title>...` of the text report.
fn section(out: &str, title: &str) -> Vec<String> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with(&format!("# {title}")));
    assert!(lines.next().is_some(), "no section {title:?} in:\n{out}");
    lines
        .take_while(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The args of a section, without their `- `.
fn args(out: &str, title: &str) -> Vec<String> {
    (section(out, title).iter())
        .map(|l| l.strip_prefix("- ").expect("a list item").to_owned())
        .collect()
}

fn has(lines: &[String], want: &[&str]) {
    for w in want {
        assert!(
            lines.iter().any(|l| l == w),
            "{w:?} missing from {lines:#?}"
        );
    }
}

/// skydns's parser and validation, as its main runs them.
fn skydns_accepts(args: &[String]) -> skydns::config::Config {
    let argv = std::iter::once("skydns".to_owned())
        .chain(args.iter().cloned())
        .map(std::ffi::OsString::from);
    let flags =
        skydns::config::parse_args(argv).unwrap_or_else(|e| panic!("skydns refuses {args:?}: {e}"));
    skydns::config::Settings::from_flags(&flags)
        .finish(&flags, || Ok(vec![]))
        .unwrap_or_else(|e| panic!("skydns refuses {args:?}: {e}"))
}

fn kube2sky_accepts(args: &[String]) -> kube2sky::config::Config {
    let argv = std::iter::once("kube2sky".to_owned()).chain(args.iter().cloned());
    let flags = kube2sky::config::Flags::parse_from_go_style(argv)
        .unwrap_or_else(|e| panic!("kube2sky refuses {args:?}: {e}"));
    flags
        .into_config()
        .unwrap_or_else(|e| panic!("kube2sky refuses {args:?}: {e}"))
}

/// Runs a fixture, checks its exit status, and that both parsers take the
/// args; returns the report.
fn check(fixture: &str, code: i32) -> String {
    let r = run(&[fixture], None);
    assert_eq!(
        r.code, code,
        "{fixture}: stdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    assert_eq!(r.stderr, "", "{fixture}");
    skydns_accepts(&args(&r.stdout, "skydns args"));
    kube2sky_accepts(&args(&r.stdout, "kube2sky args"));
    r.stdout
}

const KUBEADM_SKYDNS: &[&str] = &[
    "-addr=0.0.0.0:53",
    "-domain=cluster.local.",
    "-ns-policy=random",
    "-max-pending-forwards=1000",
    "-rcache=19968",
    "-rcache-ttl=30",
    "-rcache-stale=0s",
    "-rcache-prefetch=0",
    "-pods=insecure",
    "-autopath=false",
    "-round-robin=true",
    "-loop=exit",
    "-lameduck=5s",
    "-metrics-addr=0.0.0.0:9153",
];

const NOTHING_LEFT_OUT: &str = "(nothing: every plugin and option was carried over)";

#[test]
fn kubeadm_s_corefile_carries_over_whole_and_its_flags_parse() {
    let out = check("kubeadm-v1.30.Corefile", 0);
    assert_eq!(args(&out, "skydns args"), KUBEADM_SKYDNS);
    assert_eq!(
        args(&out, "kube2sky args"),
        ["--domain=cluster.local", "--ttl=30", "--reverse=true"]
    );
    assert_eq!(section(&out, "/skydns/config")[0], r#"{"min_ttl":30}"#);
    assert_eq!(section(&out, "left out"), [NOTHING_LEFT_OUT]);
    assert!(!out.contains("# kube-dns ConfigMap"), "{out}");
    has(
        &section(&out, "notes"),
        &[
            "- kubeadm-v1.30.Corefile:8 health: skydns serves /health on -metrics-addr (0.0.0.0:9153), not on :8080: point the livenessProbe there",
            "- kubeadm-v1.30.Corefile:11 ready: skydns serves /ready on -metrics-addr (0.0.0.0:9153), not on :8181: point the readinessProbe there",
        ],
    );
    let skydns = skydns_accepts(&args(&out, "skydns args"));
    assert_eq!(skydns.addr, "0.0.0.0:53".parse().expect("addr"));
    assert_eq!(skydns.zone.domain, "cluster.local.");
    assert_eq!(skydns.handler.pods, skydns::pods::PodMode::Insecure);
    assert!(skydns.handler.round_robin && skydns.handler.autopath.is_none());
    let kube2sky = kube2sky_accepts(&args(&out, "kube2sky args"));
    assert_eq!(
        (
            kube2sky.domain.as_str(),
            kube2sky.features.ttl,
            kube2sky.features.reverse
        ),
        ("cluster.local.", 30, true)
    );
}

#[test]
fn kubeadm_s_config_map_on_standard_input_gives_the_same() {
    let yaml =
        std::fs::read_to_string(fixtures().join("kubeadm-v1.30-configmap.yaml")).expect("fixture");
    let r = run(&["-"], Some(&yaml));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(args(&r.stdout, "skydns args"), KUBEADM_SKYDNS);
    assert_eq!(
        args(&r.stdout, "kube2sky args"),
        ["--domain=cluster.local", "--ttl=30", "--reverse=true"]
    );
    assert_eq!(section(&r.stdout, "left out"), [NOTHING_LEFT_OUT]);
    has(&section(&r.stdout, "notes"), &["- <stdin>[coredns:Corefile]:3 health: skydns serves /health on -metrics-addr (0.0.0.0:9153), not on :8080: point the livenessProbe there"]);
    let file = check("kubeadm-v1.30-configmap.yaml", 0);
    assert_eq!(args(&file, "skydns args"), KUBEADM_SKYDNS);
}

#[test]
fn kubeadm_s_latest_corefile_disables_caching_the_cluster_domain_as_skydns_does() {
    let out = check("kubeadm-latest.Corefile", 0);
    assert_eq!(args(&out, "skydns args"), KUBEADM_SKYDNS);
    assert_eq!(section(&out, "left out"), [NOTHING_LEFT_OUT]);
    has(
        &section(&out, "notes"),
        &[
            "- kubeadm-latest.Corefile:21 disable: skydns never caches the cluster's names: carried over as it is",
            "- kubeadm-latest.Corefile:22 disable: skydns never caches the cluster's names: carried over as it is",
        ],
    );
}

#[test]
fn eks_s_corefile_carries_over_with_coredns_s_defaults() {
    let out = check("eks.yaml", 0);
    let skydns = args(&out, "skydns args");
    has(
        &skydns,
        &[
            "-max-pending-forwards=0",
            "-lameduck=5s",
            "-pods=insecure",
            "-rcache=19968",
            "-loop=exit",
        ],
    );
    assert_eq!(
        args(&out, "kube2sky args"),
        ["--domain=cluster.local", "--ttl=5", "--reverse=true"]
    );
    assert_eq!(section(&out, "/skydns/config")[0], r#"{"min_ttl":5}"#);
    assert_eq!(section(&out, "left out"), [NOTHING_LEFT_OUT]);
}

#[test]
fn aks_s_imports_read_coredns_custom_and_its_templates_are_left_out() {
    let out = check("aks.yaml", 1);
    has(
        &args(&out, "skydns args"),
        &["-stubzones=true", "-log-queries=all", "-lameduck=5s"],
    );
    has(
        &args(&out, "kube2sky args"),
        &["--ttl=30", "--config-map=kube-dns"],
    );
    assert_eq!(
        section(&out, "kube-dns ConfigMap"),
        [
            "apiVersion: v1",
            "kind: ConfigMap",
            "metadata:",
            "  name: kube-dns",
            "  namespace: kube-system",
            "data:",
            "  stubDomains: |",
            r#"    {"puglife.local":["192.11.0.1"]}"#,
        ]
    );
    assert_eq!(
        section(&out, "left out"),
        [
            "- [.:53] aks.yaml[coredns-custom:test.override]:1: hosts {",
            "  why: static host entries are not available in kube-dns-rs (a Service, or an ExternalName one, can stand for a name)",
            "- [.:53] aks.yaml[coredns:Corefile]:19: template ANY ANY internal.cloudapp.net {",
            "  why: answers made from templates are not available in kube-dns-rs",
            "- [.:53] aks.yaml[coredns:Corefile]:24: template ANY ANY reddog.microsoft.com {",
            "  why: answers made from templates are not available in kube-dns-rs",
        ]
    );
}

#[test]
fn the_kubernetes_docs_stub_domain_and_upstream_carry_over() {
    let out = check("k8s-docs-custom-dns.yaml", 0);
    has(
        &args(&out, "skydns args"),
        &[
            "-nameservers=172.16.0.1:53",
            "-stubzones=true",
            "-lameduck=0s",
        ],
    );
    assert_eq!(
        args(&out, "kube2sky args"),
        [
            "--domain=cluster.local",
            "--ttl=5",
            "--reverse=true",
            "--config-map=kube-dns"
        ]
    );
    assert_eq!(
        section(&out, "kube-dns ConfigMap")[6..],
        [
            "  stubDomains: |",
            r#"    {"consul.local":["10.150.0.1"]}"#,
            "  upstreamNameservers: |",
            r#"    ["172.16.0.1"]"#,
        ]
    );
    let skydns = skydns_accepts(&args(&out, "skydns args"));
    assert!(skydns.handler.stubzones);
    let kube2sky = kube2sky_accepts(&args(&out, "kube2sky args"));
    assert_eq!(
        kube2sky.config_map,
        Some(("kube-system".to_owned(), "kube-dns".to_owned()))
    );
    assert_eq!(section(&out, "left out"), [NOTHING_LEFT_OUT]);
}

#[test]
fn the_kubernetes_docs_kube_dns_equivalent_loses_federation_and_a_stub_in_the_cluster_domain() {
    let out = check("k8s-docs-kube-dns-equivalent.Corefile", 1);
    has(
        &args(&out, "skydns args"),
        &["-nameservers=8.8.8.8:53,8.8.4.4:53"],
    );
    assert_eq!(
        section(&out, "left out"),
        [
            "- [.:53] k8s-docs-kube-dns-equivalent.Corefile:12: federation cluster.local {",
            "  why: kube-dns federations are not available in kube-dns-rs",
            "- [my.cluster.local:53] k8s-docs-kube-dns-equivalent.Corefile:27: forward . 2.3.4.5",
            "  why: stub domain my.cluster.local: kube2sky refuses a stub domain at, inside or above the cluster domain (skydns asks stub zones before its own records, so it would forward the cluster's names)",
        ]
    );
}

#[test]
fn unsupported_plugins_are_left_out_with_their_line_and_the_rest_is_printed() {
    let out = check("unsupported.Corefile", 1);
    assert_eq!(
        section(&out, "left out"),
        [
            "- [.:53] unsupported.Corefile:10: rewrite name exact api.example.com api.default.svc.cluster.local",
            "  why: rewriting names is not available in kube-dns-rs: skydns answers names as asked",
            "- [.:53] unsupported.Corefile:11: hosts {",
            "  why: static host entries are not available in kube-dns-rs (a Service, or an ExternalName one, can stand for a name)",
            "- [.:53] unsupported.Corefile:17: namespaces default kube-system",
            "  why: kube2sky writes the records of every namespace",
            "- [.:53] unsupported.Corefile:19: template IN A example.net {",
            "  why: answers made from templates are not available in kube-dns-rs",
            "- [.:53] unsupported.Corefile:29: denial 1000 60",
            "  why: a denial TTL (60) apart from the success TTL (300): skydns has one TTL cap",
            "- [.:53] unsupported.Corefile:35: .:53 {",
            "  why: key .:53: zone . is already served by another block (nothing of this block is carried over)",
            "- [.:53] unsupported.Corefile:36: view internal {",
            "  why: answering by client address or query (views) is not available in kube-dns-rs",
            "- [.:53] unsupported.Corefile:39: forward . 10.0.0.53",
            "  why: its server block (line 35) is not carried over",
        ]
    );
    assert_eq!(
        args(&out, "skydns args"),
        [
            "-addr=0.0.0.0:53",
            "-domain=cluster.local.",
            "-nameservers=10.0.0.2:53,10.0.0.3:5353",
            "-ns-policy=sequential",
            "-ns-transport=tcp",
            "-ns-probe-interval=1s",
            "-ns-probe-name=example.org",
            "-max-pending-forwards=0",
            "-rcache=6000",
            "-rcache-ttl=300",
            "-rcache-stale=30m",
            "-rcache-prefetch=10",
            "-rcache-prefetch-percent=20",
            "-pods=verified",
            "-autopath=false",
            "-round-robin=false",
            "-loop=exit",
            "-lameduck=0s",
            "-metrics-addr=0.0.0.0:9153",
        ]
    );
    assert_eq!(
        section(&out, "kube-dns ConfigMap")[7],
        r#"    ["10.0.0.2","10.0.0.3:5353"]"#
    );
}

#[test]
fn imports_of_a_raw_corefile_are_files_beside_it() {
    let out = check("with-imports/Corefile", 0);
    has(
        &args(&out, "skydns args"),
        &["-log-queries=denial,error", "-stubzones=true"],
    );
    assert_eq!(
        section(&out, "kube-dns ConfigMap")[7],
        r#"    {"a.example":["10.0.0.2"],"b.example":["10.0.0.3:5353"]}"#
    );
    has(&section(&out, "notes"), &["- with-imports/Corefile:6: import custom/*.missing matched no file (CoreDNS skips it too)"]);
}

#[test]
fn json_holds_the_same_content() {
    let r = run(&["--format", "json", "unsupported.Corefile"], None);
    assert_eq!(r.code, 1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    let text = run(&["unsupported.Corefile"], None).stdout;
    let skydns: Vec<String> =
        serde_json::from_value(doc["flags"]["skydns"].clone()).expect("a list");
    assert_eq!(skydns, args(&text, "skydns args"));
    assert_eq!(
        doc["configmap"]["data"]["upstreamNameservers"],
        r#"["10.0.0.2","10.0.0.3:5353"]"#
    );
    assert_eq!(doc["config_key"]["min_ttl"], 5);
    assert_eq!(doc["left_out"].as_array().map(Vec::len), Some(8));
    assert_eq!(
        doc["left_out"][0],
        serde_json::json!({
            "block": ".:53",
            "file": "unsupported.Corefile",
            "line": 10,
            "text": "rewrite name exact api.example.com api.default.svc.cluster.local",
            "reason": "rewriting names is not available in kube-dns-rs: skydns answers names as asked",
        })
    );
    let ok = run(&["--format", "json", "kubeadm-v1.30.Corefile"], None);
    assert_eq!(ok.code, 0);
    let doc: serde_json::Value = serde_json::from_str(&ok.stdout).expect("JSON");
    assert_eq!(
        (doc["left_out"].clone(), doc["configmap"].clone()),
        (serde_json::json!([]), serde_json::Value::Null)
    );
}

#[test]
fn malformed_input_exits_2_naming_the_line_with_nothing_on_stdout() {
    for (fixture, error) in [
        ("malformed-unclosed.Corefile", "malformed-unclosed.Corefile:2: this '{' of \".:53\" is never closed"),
        ("malformed-quote.Corefile", "malformed-quote.Corefile:5: unterminated quoted string"),
        (
            "malformed-outside.Corefile",
            "malformed-outside.Corefile:5: \"forward\" is outside any server block (a directive after a block's '}', or a server block without '{': only a file's only block may omit its braces)",
        ),
        (
            "malformed-deep.Corefile",
            "malformed-deep.Corefile:4: a block nested deeper than allowed: a plugin's options take no block of their own",
        ),
        (
            "malformed-env.Corefile",
            "malformed-env.Corefile:3: environment variable KUBE_DNS_MIGRATE_UNSET_UPSTREAM is not set (CoreDNS would put an empty string there; set it, or write the value)",
        ),
        ("nonexistent.Corefile", "cannot read nonexistent.Corefile: No such file or directory (os error 2)"),
        ("/dev/null", "/dev/null:1: no server block: nothing to check (an empty input?)"),
    ] {
        let r = run(&[fixture], None);
        assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{fixture}");
        assert_eq!(r.stderr, format!("kube-dns-migrate: {error}\n"), "{fixture}");
    }
    let r = run(&["--format", "json", "malformed-configmap.yaml"], None);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""));
    assert!(
        r.stderr
            .starts_with("kube-dns-migrate: malformed-configmap.yaml:10: not valid YAML: "),
        "{}",
        r.stderr
    );
}

#[test]
fn usage_errors_exit_2_and_help_explains_the_exit_status() {
    for (bad, says) in [
        (
            &[][..],
            "error: the following required arguments were not provided:",
        ),
        (
            &["--format", "yaml", "x"][..],
            "error: invalid value 'yaml' for '--format <FORMAT>'",
        ),
        (&["a", "b"][..], "error: unexpected argument 'b' found"),
    ] {
        let r = run(bad, None);
        assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{bad:?}");
        assert!(
            r.stderr.lines().any(|l| l == says),
            "{says:?} not in:\n{}",
            r.stderr
        );
    }
    let help = run(&["--help"], None);
    assert_eq!(help.code, 0);
    for line in [
        "Exit status: 0 when everything was carried over, 1 when something was left",
        "INPUT is a Corefile, or the YAML of the coredns ConfigMap (one document,",
        "      --format <FORMAT>",
    ] {
        assert!(
            help.stdout.lines().any(|l| l == line),
            "{line:?} not in:\n{}",
            help.stdout
        );
    }
}
