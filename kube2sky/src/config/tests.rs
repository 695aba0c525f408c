//! Flag parsing as kube2sky 1.2's: the defaults, Go and pflag spellings,
//! glog flags, Go booleans and durations, master URL and kubeconfig, etcd
//! servers and TLS pairs, `-h`, and leader election's timings.

use super::*;

fn args(list: &[&str]) -> Vec<String> {
    std::iter::once("kube2sky")
        .chain(list.iter().copied())
        .map(String::from)
        .collect()
}

fn parse(list: &[&str]) -> Flags {
    Flags::parse_from_go_style(args(list)).expect("flags parse")
}

#[test]
fn defaults_match_the_reference() {
    let config = parse(&[]).into_config().expect("valid");
    assert_eq!(config.domain, "cluster.local.");
    assert_eq!(
        config.etcd.endpoints,
        vec!["http://127.0.0.1:4001".to_string()]
    );
    assert_eq!(config.mutation_timeout, Duration::from_secs(10));
    assert_eq!(config.healthz_port, 8081);
    assert_eq!(config.kube, KubeSource::InCluster);
    assert_eq!(config.features, Features::default());
}

#[test]
fn underscore_and_single_dash_spellings_are_accepted() {
    let flags = parse(&[
        "--kube_master_url=http://10.0.0.1:8080",
        "-etcd_mutation_timeout=3s",
        "--healthz_port",
        "9090",
        "--domain=example.org.",
    ]);
    assert_eq!(flags.kube_master_url, "http://10.0.0.1:8080");
    assert_eq!(flags.etcd_mutation_timeout, Duration::from_secs(3));
    assert_eq!(flags.healthz_port, 9090);
    let config = flags.into_config().expect("valid");
    assert_eq!(config.domain, "example.org.");
    assert_eq!(config.kube, KubeSource::Url("http://10.0.0.1:8080".into()));
}

#[test]
fn glog_flags_are_accepted_and_v_maps_to_a_level() {
    let flags = parse(&[
        "--v=2",
        "--logtostderr",
        "--alsologtostderr=false",
        "--log_dir=/tmp",
    ]);
    assert_eq!(flags.log_level(), "kube2sky=debug,skydns=debug,info");
    assert_eq!(
        parse(&["--v=5"]).log_level(),
        "kube2sky=trace,skydns=trace,info"
    );
    assert_eq!(parse(&[]).log_level(), "info");
}

#[test]
fn boolean_switches_take_go_syntax() {
    let features = parse(&["--pods=false", "--reverse=false", "--atomic-updates"])
        .into_config()
        .expect("valid")
        .features;
    assert!(!features.pods);
    assert!(!features.reverse);
    assert!(features.atomic_updates);
    assert!(features.remove_stale);
}

#[test]
fn several_etcd_servers() {
    let config = parse(&[
        "--etcd-server=http://a:2379,http://b:2379",
        "--etcd-server",
        "http://c:2379",
    ])
    .into_config()
    .expect("valid");
    assert_eq!(
        config.etcd.endpoints,
        ["http://a:2379", "http://b:2379", "http://c:2379"]
    );
}

#[test]
fn master_url_env_vars_are_expanded_and_validated() {
    let lookup = |k: &str| (k == "HOST").then(|| "10.1.2.3".to_string());
    assert_eq!(
        expand_env("http://$HOST:8080", lookup),
        "http://10.1.2.3:8080"
    );
    assert_eq!(
        expand_env("http://${HOST}:8080/$NOPE", lookup),
        "http://10.1.2.3:8080/"
    );
    assert_eq!(expand_env("a$", lookup), "a$");
    let err = parse(&["--kube-master-url=10.0.0.1"])
        .into_config()
        .expect_err("no scheme");
    assert!(err.to_string().contains("--kube-master-url"), "{err}");
    assert!(parse(&["--kube-master-url=http://:"])
        .into_config()
        .is_err());
}

#[test]
fn kubeconfig_with_url_override() {
    let config = parse(&["--kubecfg-file=/k", "--kube-master-url=https://x:6443"])
        .into_config()
        .expect("valid");
    assert_eq!(
        config.kube,
        KubeSource::Kubeconfig {
            path: "/k".into(),
            url: Some("https://x:6443".into())
        }
    );
}

#[test]
fn duration_flags_take_go_durations_and_name_a_bad_value() {
    // The parser is skydns's `go_duration`, tested there.
    assert_eq!(
        parse(&["--etcd-mutation-timeout=1m30s"]).etcd_mutation_timeout,
        Duration::from_secs(90)
    );
    let err = Flags::parse_from_go_style(args(&["--etcd-mutation-timeout=ten"])).expect_err("bad");
    assert!(err.to_string().contains("ten"), "{err}");
}

#[test]
fn a_lowered_transaction_size_is_retried_after_ten_minutes_by_default() {
    let config = |list: &[&str]| parse(list).into_config().expect("valid");
    assert_eq!(config(&[]).max_txn_ops_retry, Duration::from_secs(600));
    assert_eq!(
        config(&["--etcd-max-txn-ops-retry=0s"]).max_txn_ops_retry,
        Duration::ZERO
    );
    let err =
        Flags::parse_from_go_style(args(&["--etcd-max-txn-ops-retry=soon"])).expect_err("bad");
    let text = err.to_string();
    assert!(
        text.contains("soon") && text.contains("--etcd-max-txn-ops-retry"),
        "{text}"
    );
}

#[test]
fn loss_check_zero_disables() {
    assert_eq!(
        parse(&["--etcd-loss-check-interval=0s"])
            .into_config()
            .expect("valid")
            .loss_check,
        None
    );
}

#[test]
fn etcd_tls_flags_reach_the_etcd_options_and_come_in_pairs() {
    let config = parse(&[
        "--etcd-certfile=/c.crt",
        "--etcd-keyfile=/c.key",
        "--etcd-cafile=/ca.crt",
    ])
    .into_config()
    .expect("valid");
    assert_eq!(config.etcd.tls_cert, Some(PathBuf::from("/c.crt")));
    assert_eq!(config.etcd.tls_key, Some(PathBuf::from("/c.key")));
    assert_eq!(config.etcd.ca_cert, Some(PathBuf::from("/ca.crt")));
    let alone = parse(&["--etcd-certfile=/c.crt"])
        .into_config()
        .unwrap_err();
    assert_eq!(
        alone.to_string(),
        "--etcd-certfile and --etcd-keyfile must be given together"
    );
}

#[test]
fn dash_h_is_help_as_in_pflag() {
    // `-h` once became `--h`, an unknown flag.
    let err = Flags::parse_from_go_style(args(&["-h"])).expect_err("help");
    assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
}

#[test]
fn leader_election_is_off_by_default_and_checks_its_timings() {
    assert_eq!(
        parse(&[]).into_config().expect("valid").leader_election,
        None
    );
    let on = parse(&["--leader-elect", "--leader-elect-identity=k2s-1"])
        .into_config()
        .expect("valid")
        .leader_election
        .expect("on");
    assert_eq!(
        on,
        crate::leader::Election {
            namespace: "kube-system".into(),
            name: "kube2sky".into(),
            identity: "k2s-1".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    );
    let host = parse(&["--leader-elect=true"])
        .into_config()
        .expect("valid");
    assert!(!host.leader_election.expect("on").identity.is_empty());
    for bad in [
        &["--leader-elect", "--leader-elect-renew-deadline=20s"][..],
        &["--leader-elect", "--leader-elect-retry-period=10s"],
        &["--leader-elect", "--leader-elect-retry-period=0s"],
    ] {
        let err = parse(bad)
            .into_config()
            .expect_err("bad timings")
            .to_string();
        assert!(err.contains("--leader-elect-renew-deadline"), "{err}");
    }
    let err = parse(&[
        "--leader-elect",
        "--leader-elect-resource-namespace=Kube_System",
    ])
    .into_config()
    .expect_err("bad namespace")
    .to_string();
    assert!(
        err.contains("--leader-elect-resource-namespace \"Kube_System\""),
        "{err}"
    );
    // The timings are not checked when the flag is off.
    assert!(parse(&["--leader-elect-renew-deadline=20s"])
        .into_config()
        .is_ok());
}

#[test]
fn ttl_is_30_by_default_and_names_a_bad_value() {
    let features = |list: &[&str]| parse(list).into_config().expect("valid").features;
    assert_eq!(features(&[]).ttl, 30);
    assert_eq!(features(&["--ttl=5"]).ttl, 5);
    assert_eq!(features(&["--ttl=2147483647"]).ttl, 2_147_483_647);
    for bad in ["0", "-1", "2147483648", "ten"] {
        let err = Flags::parse_from_go_style(args(&[&format!("--ttl={bad}")])).expect_err(bad);
        assert!(
            err.to_string().contains("--ttl") && err.to_string().contains(bad),
            "{err}"
        );
    }
}

#[test]
fn the_config_map_is_not_followed_by_default_and_a_bad_name_is_named() {
    let config_map = |list: &[&str]| parse(list).into_config().map(|c| c.config_map);
    assert_eq!(config_map(&[]).expect("valid"), None);
    assert_eq!(
        config_map(&["--config-map=kube-dns"]).expect("valid"),
        Some(("kube-system".into(), "kube-dns".into()))
    );
    assert_eq!(
        config_map(&["-config-map=dns", "--config-map-namespace=dns"]).expect("valid"),
        Some(("dns".into(), "dns".into()))
    );
    let err = config_map(&["--config-map=Kube_DNS"]).expect_err("bad name");
    assert!(
        err.to_string().contains("--config-map \"Kube_DNS\""),
        "{err}"
    );
    let err =
        config_map(&["--config-map=kube-dns", "--config-map-namespace=a.b"]).expect_err("bad ns");
    assert!(
        err.to_string().contains("--config-map-namespace \"a.b\""),
        "{err}"
    );
}

#[test]
fn the_log_format_is_text_or_json_and_underscored_flags_are_kept_for_the_log() {
    assert_eq!(parse(&[]).log_format, logging::LogFormat::Text);
    let flags = parse(&["--log-format=json", "--kube_master_url=http://k:8080"]);
    assert_eq!(flags.log_format, logging::LogFormat::Json);
    assert_eq!(
        flags.deprecated_spellings,
        ["WARNING: kube_master_url is deprecated, use kube-master-url instead"]
    );
    let err = Flags::parse_from_go_style(args(&["--log-format=yaml"])).unwrap_err();
    assert!(err.to_string().contains("--log-format"), "{err}");
}

#[test]
fn the_flags_name_a_config_map_or_nothing() {
    assert_eq!(config_map_flags("kube-system", "").expect("off"), None);
    assert_eq!(
        config_map_flags("kube-system", "kube-dns").expect("valid"),
        Some(("kube-system".into(), "kube-dns".into()))
    );
    let error = config_map_flags("kube-system", "a/b").expect_err("not a name");
    assert!(error.0.contains("--config-map \"a/b\""), "{error}");
    let error = config_map_flags("Kube", "kube-dns").expect_err("not a namespace");
    assert!(
        error.0.contains("--config-map-namespace \"Kube\""),
        "{error}"
    );
}
