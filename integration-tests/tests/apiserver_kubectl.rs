//! kubectl against the API test server: create, get and delete services,
//! endpoints and pods, plus the `kube-api-test-server` binary with the demo
//! seed. kubectl runs with a throw-away kubeconfig and cache directory, so
//! the machine's own configuration is never read.
//!
//! kubectl must be installed; without it these tests fail with
//! instructions rather than pass silently. kubectl blocks, so the tests run
//! on a multi-threaded runtime and the in-process server answers meanwhile.

mod apiserver_support;

use std::path::{Path, PathBuf};
use test_support::kubectl::Kubectl;

use apiserver_support::{binary_server, start, start_default};
use kube_api_test_server::Config;
use serde_json::json;

/// Whether kubectl succeeded, and what it said on stderr.
fn outcome(out: std::process::Output) -> (bool, String) {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SVC: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  selector:\n    app: web\n  ports:\n  - name: http\n    port: 80\n    protocol: TCP\n";
const EP: &str = "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: web\nsubsets:\n- addresses:\n  - ip: 10.244.1.6\n  ports:\n  - name: http\n    port: 80\n";
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    app: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_and_deletes_services() {
    let server = start_default().await;
    let k = Kubectl::new(&server.url()).unwrap();
    let svc = k.file("svc.yaml", SVC).unwrap();
    let out = k
        .run(&["create", "-f", svc.to_str().unwrap(), "--validate=false"])
        .unwrap();
    assert!(out.contains("service/web created"), "{out}");
    let (ok, err) = outcome(
        k.output(&["create", "-f", svc.to_str().unwrap(), "--validate=false"])
            .unwrap(),
    );
    assert!(
        !ok && (err.contains("AlreadyExists") || err.contains("already exists")),
        "{err}"
    );

    let table = k.run(&["get", "services", "-A"]).unwrap();
    let line = table
        .lines()
        .find(|l| l.contains("web"))
        .unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        (cols[0], cols[1], cols[2]),
        ("default", "web", "ClusterIP"),
        "{table}"
    );
    assert!(
        cols[3].starts_with("10.0.0.") && cols[5] == "80/TCP",
        "{table}"
    );

    let obj = k.json(&["get", "svc", "web"]).unwrap();
    assert_eq!(obj["spec"]["ports"][0]["name"], "http");
    let listed = k.json(&["get", "services", "-l", "app!=none"]).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);

    let out = k.run(&["delete", "service", "web"]).unwrap();
    assert!(out.contains("service \"web\" deleted"), "{out}");
    let (ok, err) = outcome(k.output(&["get", "service", "web"]).unwrap());
    assert!(
        !ok && (err.contains("NotFound") || err.contains("not found")),
        "{err}"
    );
}

/// `kubectl create namespace|service` and `kubectl run` send protobuf bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_typed_generators_send_protobuf_that_is_decoded() {
    let server = start_default().await;
    let k = Kubectl::new(&server.url()).unwrap();
    let out = k.run(&["create", "namespace", "x"]).unwrap();
    assert!(out.contains("namespace/x created"), "{out}");
    let out = k
        .run(&["create", "service", "clusterip", "demo", "--tcp=80:80"])
        .unwrap();
    assert!(out.contains("service/demo created"), "{out}");
    let out = k
        .run(&["run", "p", "--image=busybox", "--port=8080", "--env=A=1"])
        .unwrap();
    assert!(out.contains("pod/p created"), "{out}");

    let ns = k.json(&["get", "namespace", "x"]).unwrap();
    assert_eq!(ns["status"]["phase"], "Active");
    let svc = k.json(&["get", "service", "demo"]).unwrap();
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["selector"], json!({ "app": "demo" }));
    assert_eq!(
        svc["spec"]["ports"][0],
        json!({ "name": "80-80", "port": 80, "protocol": "TCP", "targetPort": 80 })
    );
    assert!(svc["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .starts_with("10.0.0."));
    let pod = k.json(&["get", "pod", "p"]).unwrap();
    let c = &pod["spec"]["containers"][0];
    assert_eq!(
        (c["name"].as_str(), c["image"].as_str()),
        (Some("p"), Some("busybox"))
    );
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert_eq!(c["env"], json!([{ "name": "A", "value": "1" }]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_and_deletes_endpoints_and_pods() {
    let server = start_default().await;
    let k = Kubectl::new(&server.url()).unwrap();
    let ep = k.file("ep.yaml", EP).unwrap();
    let pod = k.file("pod.yaml", POD).unwrap();
    k.run(&["create", "-f", ep.to_str().unwrap(), "--validate=false"])
        .unwrap();
    k.run(&["create", "-f", pod.to_str().unwrap(), "--validate=false"])
        .unwrap();

    let eps = k.run(&["get", "endpoints"]).unwrap();
    assert!(eps.contains("10.244.1.6:80"), "{eps}");
    let pods = k.run(&["get", "pods", "--all-namespaces"]).unwrap();
    assert!(
        pods.lines()
            .any(|l| l.starts_with("default") && l.contains(" p ")),
        "{pods}"
    );
    let obj = k.json(&["get", "pod", "p"]).unwrap();
    assert_eq!(obj["status"]["phase"], "Pending");

    k.run(&["delete", "pod", "p"]).unwrap();
    k.run(&["delete", "endpoints", "web"]).unwrap();
    let left = k.json(&["get", "pods,endpoints"]).unwrap();
    assert_eq!(left["items"].as_array().unwrap().len(), 0, "{left}");
}

/// client-go only sends kubeconfig credentials over TLS, so against this
/// plain-HTTP server kubectl never authenticates: a token-protected server
/// must answer it with a 401 Status that kubectl reports as such. (Bearer
/// tokens over HTTP are covered with kube-rs in `apiserver_api`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_401_from_token_protected_server() {
    let server = start(Config {
        token: Some("tok".into()),
        ..Config::default()
    })
    .await;
    let (ok, err) = outcome(
        Kubectl::with_token(&server.url(), Some("tok"))
            .unwrap()
            .output(&["get", "namespaces"])
            .unwrap(),
    );
    assert!(
        !ok && err.contains("You must be logged in to the server"),
        "{err}"
    );
}

/// The insecure port (kube-apiserver's 127.0.0.1:8080 of 1.2) serves
/// kubectl without a token while the main address still demands one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_insecure_port_serves_kubectl_without_a_token() {
    let server = start(Config {
        token: Some("tok".into()),
        insecure_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Config::default()
    })
    .await;
    let insecure = server.insecure_url().expect("an insecure port");
    assert_ne!(insecure, server.url());
    let k = Kubectl::new(&insecure).unwrap();
    k.run(&["create", "service", "clusterip", "web", "--tcp=80"])
        .unwrap();
    let svc = k.json(&["get", "service", "web"]).unwrap();
    assert_eq!(svc["spec"]["ports"][0]["port"], 80, "{svc}");
    // The main address still answers kubectl (no token over HTTP) with 401.
    let (ok, err) = outcome(
        Kubectl::new(&server.url())
            .unwrap()
            .output(&["get", "service", "web"])
            .unwrap(),
    );
    assert!(!ok && err.contains("You must be logged in"), "{err}");
}

fn demo_seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed/demo.yaml")
}

#[tokio::test]
async fn binary_serves_the_demo_seed() {
    let (mut child, url) = binary_server(&["--seed".into(), demo_seed().into()]).await;

    let k = Kubectl::new(&url).unwrap();
    let svcs = k.json(&["get", "services", "-A"]).unwrap();
    let find = |ns: &str, name: &str| {
        svcs["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["metadata"]["namespace"] == ns && s["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{ns}/{name} missing"))
    };
    assert_eq!(
        find("default", "kubernetes")["spec"]["clusterIP"],
        "10.0.0.1"
    );
    let dns = find("kube-system", "kube-dns");
    assert_eq!(dns["spec"]["clusterIP"], "10.0.0.10");
    let ports: Vec<(String, String)> = dns["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["protocol"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("dns".into(), "UDP".into()),
            ("dns-tcp".into(), "TCP".into())
        ]
    );
    assert_eq!(find("default", "web")["spec"]["clusterIP"], "None");
    let ep = k.json(&["get", "endpoints", "web"]).unwrap();
    assert_eq!(ep["subsets"][0]["addresses"].as_array().unwrap().len(), 2);
    let pod = k.json(&["get", "pod", "demo-pod"]).unwrap();
    assert_eq!(pod["status"]["podIP"], "1.2.3.4");

    child.kill().await.unwrap();
}
