//! Flag parsing, etcd config merging and defaults.

use super::*;
use crate::forward::NsPolicy;
use std::time::Duration;

fn flags(args: &[&str]) -> Flags {
    let argv = std::iter::once("skydns")
        .chain(args.iter().copied())
        .map(OsString::from);
    parse_args(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn config(args: &[&str]) -> Result<Config, ConfigError> {
    let f = flags(args);
    Settings::from_flags(&f).finish(&f, || Ok(vec!["192.0.2.1:53".parse().unwrap()]))
}

#[test]
fn the_pod_arguments_of_kubernetes_1_2_parse() {
    let c = config(&[
        "-machines=http://127.0.0.1:4001",
        "-addr=0.0.0.0:53",
        "-ns-rotate=false",
        "-domain=cluster.local.",
    ])
    .unwrap();
    assert_eq!(c.zone.domain, "cluster.local.");
    assert_eq!(c.addr, "0.0.0.0:53".parse().unwrap());
    assert!(!(c.handler.forward.relay.policy == NsPolicy::RequestId) && c.handler.round_robin);
    assert_eq!(c.etcd.endpoints, ["http://127.0.0.1:4001"]);
    assert_eq!(c.zone.hostmaster, "hostmaster.skydns.local.");
    assert_eq!(
        (
            c.zone.ttl,
            c.zone.min_ttl,
            c.zone.priority,
            c.handler.forward.ndots
        ),
        (3600, 60, 10, 2)
    );
    assert_eq!(c.handler.forward.relay.timeout, Duration::from_secs(2));
    assert_eq!(
        c.handler.forward.nameservers,
        ["192.0.2.1:53".parse().unwrap()]
    );
}

#[test]
fn defaults_match_skydns() {
    let c = config(&[]).unwrap();
    assert_eq!(c.zone.domain, "skydns.local.");
    assert_eq!(c.addr, "127.0.0.1:53".parse().unwrap());
    assert_eq!(c.etcd.endpoints, ["http://127.0.0.1:2379"]);
    assert_eq!(c.zone.prefix.as_str(), "skydns");
}

#[test]
fn gnu_style_and_bare_booleans_work_too() {
    let c = config(&[
        "--domain",
        "Cluster.Local",
        "--no-rec",
        "-round-robin=false",
        "--rtimeout=1m30s",
    ])
    .unwrap();
    assert_eq!(c.zone.domain, "cluster.local.");
    assert!(c.handler.forward.no_rec && !c.handler.round_robin);
    assert_eq!(c.handler.forward.relay.timeout, Duration::from_secs(90));
}

#[test]
fn bad_values_name_the_flag() {
    let err = config(&["-addr=localhost:53"]).unwrap_err().to_string();
    assert!(
        err.contains("addr is invalid") && err.contains("localhost:53"),
        "{err}"
    );
    let err = config(&["-addr=127.0.0.1:0"]).unwrap_err().to_string();
    assert!(err.contains("addr"), "{err}");
    let err = config(&["-nameservers=8.8.8.8"]).unwrap_err().to_string();
    assert!(
        err.contains("nameserver is invalid") && err.contains("8.8.8.8"),
        "{err}"
    );
    let argv = ["skydns", "-rtimeout=soon"].map(OsString::from);
    let err = parse_args(argv).unwrap_err().to_string();
    assert!(err.contains("rtimeout") && err.contains("soon"), "{err}");
    let argv = ["skydns", "-ns-rotate=maybe"].map(OsString::from);
    assert!(parse_args(argv)
        .unwrap_err()
        .to_string()
        .contains("ns-rotate"));
    let argv = ["skydns", "-no-such-flag=1"].map(OsString::from);
    assert!(parse_args(argv).is_err());
    let err = config(&["-dnssec=/nonexistent/Kexample"])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("skydns: -dnssec /nonexistent/Kexample: /nonexistent/Kexample.key: "),
        "{err}"
    );
}

#[test]
fn dnssec_reads_the_key_from_the_flag_or_the_etcd_config_key() {
    let key = crate::dnssec::tests::ecdsa();
    let flag = format!("-dnssec={}", key.base);
    let c = config(&["-domain=cluster.local.", &flag, "-scache=0"]).unwrap();
    let d = c.handler.dnssec.clone().expect("signing on");
    assert_eq!(d.key_tag(), key.tag);
    assert_eq!(c.handler.dnssec, Some(d));
    assert!(config(&["-domain=cluster.local."])
        .unwrap()
        .handler
        .dnssec
        .is_none());
    // The key belongs to cluster.local.: another domain is refused.
    let err = config(&["-domain=example.org.", &flag])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("-dnssec") && err.contains("example.org."),
        "{err}"
    );

    let f = flags(&["-domain=cluster.local."]);
    let mut s = Settings::from_flags(&f);
    let json = serde_json::json!({ "dnssec": key.base, "scache": 5 }).to_string();
    s.merge_json(json.as_bytes()).unwrap();
    let c = s.finish(&f, || Ok(Vec::new())).unwrap();
    assert_eq!(c.handler.dnssec.map(|d| d.key_tag()), Some(key.tag));
    let mut s = Settings::from_flags(&f);
    s.merge_json(br#"{"dnssec": "/nonexistent/K"}"#).unwrap();
    let err = s.finish(&f, || Ok(Vec::new())).unwrap_err().to_string();
    assert!(
        err.contains("dnssec (etcd config key) /nonexistent/K"),
        "{err}"
    );
}

#[test]
fn etcd_config_json_overrides_present_keys_only() {
    let f = flags(&["-domain=cluster.local.", "-ns-rotate=false"]);
    let mut s = Settings::from_flags(&f);
    s.merge_json(br#"{"ttl": 120, "min_ttl": 10, "hostmaster": "ops@example.org", "nameservers": ["10.1.1.1:53"], "whatever": 1}"#).unwrap();
    let c = s.finish(&f, || Err("must not be read".into())).unwrap();
    assert_eq!(c.zone.domain, "cluster.local.");
    assert_eq!((c.zone.ttl, c.zone.min_ttl), (120, 10));
    assert_eq!(c.zone.hostmaster, "ops.example.org.");
    assert_eq!(
        c.handler.forward.nameservers,
        ["10.1.1.1:53".parse().unwrap()]
    );
    assert!(!(c.handler.forward.relay.policy == NsPolicy::RequestId));
}

#[test]
fn bad_etcd_config_json_is_an_error() {
    let f = flags(&[]);
    let mut s = Settings::from_flags(&f);
    assert!(s
        .merge_json(b"{")
        .unwrap_err()
        .to_string()
        .contains("etcd config"));
    let err = s.merge_json(br#"{"ttl": "long"}"#).unwrap_err().to_string();
    assert!(err.contains("etcd config"), "{err}");
}

#[test]
fn resolv_conf_nameservers_are_read() {
    let dir = std::env::temp_dir().join(format!("skydns-resolv-{}", std::process::id()));
    std::fs::write(&dir, "search x\nnameserver 10.9.8.7\nnameserver ::1\n").unwrap();
    let ns = nameservers_from_resolv_conf(&dir).unwrap();
    std::fs::remove_file(&dir).unwrap();
    assert_eq!(
        ns,
        ["10.9.8.7:53".parse().unwrap(), "[::1]:53".parse().unwrap()]
    );
    assert!(
        nameservers_from_resolv_conf(std::path::Path::new("/nonexistent/resolv.conf"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn rtimeout_takes_go_durations_and_names_a_bad_value() {
    // The parser is gocompat's, tested against Go's own tables there.
    assert_eq!(
        flags(&["-rtimeout=1h2m3.5s"]).forward.rtimeout,
        Duration::from_millis(3_723_500)
    );
    let err = parse_args(["skydns", "-rtimeout=99999999999999999h"].map(OsString::from))
        .expect_err("out of range");
    assert!(err.to_string().contains("--rtimeout"), "{err}");
}

#[test]
fn no_rec_still_reads_resolv_conf_for_lookups_and_hostmaster_keeps_its_case() {
    let f = flags(&["-no-rec", "-hostmaster=DNS@Example.org"]);
    let c = Settings::from_flags(&f)
        .finish(&f, || Ok(vec!["192.0.2.9:53".parse().unwrap()]))
        .unwrap();
    assert_eq!(
        c.handler.forward.nameservers,
        ["192.0.2.9:53".parse().unwrap()]
    );
    assert_eq!(c.zone.hostmaster, "DNS.Example.org.");
}

#[test]
fn local_systemd_and_discover_from_flags_and_the_etcd_config_key() {
    let c = config(&["-local=Host1.Example.ORG", "-systemd", "-discover"]).unwrap();
    assert_eq!(c.handler.local.as_deref(), Some("host1.example.org."));
    assert!(c.systemd && flags(&["-discover"]).store.discover);
    let c = config(&[]).unwrap();
    assert_eq!((c.handler.local, c.systemd), (None, false));
    assert!(!flags(&[]).store.discover);
    // The etcd `config` key overrides the flags, as in SkyDNS.
    let f = flags(&["-local=a.example."]);
    let mut settings = Settings::from_flags(&f);
    settings
        .merge_json(br#"{"local":"b.example.","systemd":true}"#)
        .unwrap();
    let c = settings
        .finish(&f, || Ok(vec!["192.0.2.1:53".parse().unwrap()]))
        .unwrap();
    assert_eq!(c.handler.local.as_deref(), Some("b.example."));
    assert!(c.systemd);
    // A name that cannot be one is refused, naming the key.
    let err = config(&["-local=a..b"]).unwrap_err().to_string();
    assert!(err.contains("local") && err.contains("a..b"), "{err}");
    let err = config(&["-local=a/b"]).unwrap_err().to_string();
    assert!(err.contains("local"), "{err}");
}

#[test]
fn lifecycle_flags_and_the_lameduck_config_key() {
    let c = config(&[]).unwrap();
    assert_eq!(
        (
            c.lifecycle.lameduck,
            c.lifecycle.startup_wait,
            c.lifecycle.ready_store_timeout
        ),
        (
            Duration::ZERO,
            Duration::from_secs(5),
            Duration::from_secs(60)
        )
    );
    let c = config(&[
        "-lameduck=7s",
        "-startup-wait=250ms",
        "-ready-store-timeout=0",
    ])
    .unwrap();
    assert_eq!(
        (
            c.lifecycle.lameduck,
            c.lifecycle.startup_wait,
            c.lifecycle.ready_store_timeout
        ),
        (
            Duration::from_secs(7),
            Duration::from_millis(250),
            Duration::ZERO
        )
    );
    // The etcd config key: nanoseconds as Go marshals a Duration, or text.
    let f = flags(&["-lameduck=7s"]);
    for (json, want) in [
        (&br#"{"lameduck": 3000000000}"#[..], Duration::from_secs(3)),
        (&br#"{"lameduck": "1m30s"}"#[..], Duration::from_secs(90)),
    ] {
        let mut s = Settings::from_flags(&f);
        s.merge_json(json).unwrap();
        let c = s.finish(&f, || Ok(Vec::new())).unwrap();
        assert_eq!(c.lifecycle.lameduck, want);
    }
    let mut s = Settings::from_flags(&f);
    let err = s.merge_json(br#"{"lameduck": "soon"}"#).unwrap_err();
    assert!(err.to_string().contains("soon"), "{err}");
    let mut s = Settings::from_flags(&f);
    s.merge_json(br#"{"lameduck": -1}"#).unwrap();
    let err = s.finish(&f, || Ok(Vec::new())).unwrap_err().to_string();
    assert!(err.contains("lameduck must not be negative"), "{err}");
    let argv = ["skydns", "-lameduck=forever"].map(OsString::from);
    let err = parse_args(argv).unwrap_err().to_string();
    assert!(err.contains("lameduck") && err.contains("forever"), "{err}");
    let err = config(&["-prometheus-path=/ready"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("/ready"), "{err}");
}

#[test]
fn each_features_default_settings_are_what_the_default_flags_build() {
    let f = flags(&[]);
    let c = Settings::from_flags(&f)
        .finish(&f, || Ok(Vec::new()))
        .unwrap();
    assert_eq!(c.handler, crate::handler::Settings::default());
    assert_eq!(c.handler.forward, crate::forward::Settings::default());
    assert_eq!(c.handler.cache, crate::response_cache::Settings::default());
}
