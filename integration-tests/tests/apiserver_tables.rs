//! The Tables `kubectl get` prints, from the API test server and from a
//! real kube-apiserver in the same test: columns and rows of EndpointSlices
//! and Services, written out as kube-apiserver 1.36 prints them.

mod apiserver_support;

use apiserver_support::{both, WEB_SLICE};

/// `kubectl get` prints the same Tables from both servers: the columns of
/// EndpointSlices and Services, and a row of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_same_tables_of_slices_and_services_from_both_servers() {
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        let k = server.kubectl();
        k.with_manifest("create", WEB_SLICE).unwrap();
        k.with_manifest(
            "create",
            r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
                "spec":{"clusterIP":"10.0.0.80","ports":[{"name":"http","port":80}]}}"#,
        )
        .unwrap();
        let rows = |args: &[&str]| -> Vec<Vec<String>> {
            let table = k.run(args).unwrap();
            table
                .lines()
                .map(|l| l.split_whitespace().map(str::to_string).collect())
                .collect()
        };
        let slices = rows(&["get", "endpointslices", "-n", "default"]);
        assert_eq!(
            slices[0],
            ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
            "{slices:?}"
        );
        assert_eq!(
            slices[1][..4],
            ["web-abc12", "IPv4", "80", "10.244.1.6,10.244.2.7"]
        );
        let services = rows(&["get", "service", "web", "-n", "default"]);
        assert_eq!(
            services[0],
            [
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE"
            ],
            "{services:?}"
        );
        assert_eq!(
            services[1][..5],
            ["web", "ClusterIP", "10.0.0.80", "<none>", "80/TCP"]
        );
    }
}
