//! The text report's sections and the JSON document.

use super::*;
use crate::translate::LeftOut;
use std::collections::BTreeMap;

fn sample() -> Translation {
    Translation {
        skydns: vec!["-addr=0.0.0.0:53".into(), "-ns-probe-name=odd: name".into()],
        kube2sky: vec!["--domain=cluster.local".into()],
        config_map: Some(KubeDnsConfigMap {
            stub_domains: BTreeMap::from([(
                "consul.local".to_owned(),
                vec!["10.150.0.1".to_owned()],
            )]),
            upstream_nameservers: vec!["172.16.0.1".into(), "10.0.0.2:5353".into()],
        }),
        config_key: serde_json::json!({"min_ttl": 30}).as_object().cloned(),
        left_out: vec![LeftOut {
            block: ".:53".into(),
            file: "Corefile".into(),
            line: 7,
            text: "rewrite name a b".into(),
            reason: "rewriting names is not available".into(),
        }],
        notes: vec!["a note".into()],
    }
}

#[test]
fn text_has_each_section_in_order() {
    let want = "\
# skydns args (the skydns container's args)
- -addr=0.0.0.0:53
- \"-ns-probe-name=odd: name\"

# kube2sky args (the kube2sky container's args)
- --domain=cluster.local

# kube-dns ConfigMap (kubectl apply -f -)
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-dns
  namespace: kube-system
data:
  stubDomains: |
    {\"consul.local\":[\"10.150.0.1\"]}
  upstreamNameservers: |
    [\"172.16.0.1\",\"10.0.0.2:5353\"]

# /skydns/config (etcd key)
{\"min_ttl\":30}
# etcdctl put /skydns/config '<the JSON above>' (in every pod's etcd in the single-pod layouts)

# notes
- a note

# left out
- [.:53] Corefile:7: rewrite name a b
  why: rewriting names is not available
";
    assert_eq!(text(&sample()), want);
}

#[test]
fn text_says_when_nothing_was_left_out_and_skips_empty_sections() {
    let t = Translation {
        skydns: vec!["-addr=0.0.0.0:53".into()],
        ..Translation::default()
    };
    let out = text(&t);
    assert!(
        out.ends_with("# left out\n(nothing: every plugin and option was carried over)\n"),
        "{out}"
    );
    assert!(
        !out.contains("ConfigMap") && !out.contains("/skydns/config"),
        "{out}"
    );
}

#[test]
fn json_holds_the_same_content() {
    let doc: serde_json::Value = serde_json::from_str(&json(&sample())).expect("JSON");
    assert_eq!(doc["flags"]["skydns"][1], "-ns-probe-name=odd: name");
    assert_eq!(doc["flags"]["kube2sky"][0], "--domain=cluster.local");
    assert_eq!(doc["configmap"]["metadata"]["name"], "kube-dns");
    assert_eq!(
        doc["configmap"]["data"]["stubDomains"],
        r#"{"consul.local":["10.150.0.1"]}"#
    );
    assert_eq!(
        doc["configmap"]["data"]["upstreamNameservers"],
        r#"["172.16.0.1","10.0.0.2:5353"]"#
    );
    assert_eq!(doc["config_key"]["min_ttl"], 30);
    assert_eq!(
        doc["left_out"][0],
        serde_json::json!({"block": ".:53", "file": "Corefile", "line": 7, "text": "rewrite name a b", "reason": "rewriting names is not available"})
    );
    assert_eq!(doc["notes"][0], "a note");
    let empty: serde_json::Value =
        serde_json::from_str(&json(&Translation::default())).expect("JSON");
    assert_eq!(
        (empty["configmap"].is_null(), empty["config_key"].is_null()),
        (true, true)
    );
}
