//! Test-only builders for Services, Endpoints and Pods
//! (`svc("default", "web").headless().port("http", "TCP", 80)`).

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..ObjectMeta::default()
    }
}

/// A Service with no cluster IP yet (headless until `.ip()`).
pub(crate) fn svc(namespace: &str, name: &str) -> Service {
    Service {
        metadata: meta(namespace, name),
        spec: Some(ServiceSpec::default()),
        ..Service::default()
    }
}

/// Builder methods on Service.
pub(crate) trait ServiceExt {
    fn ip(self, ip: &str) -> Self;
    fn port(self, name: &str, protocol: &str, port: i32) -> Self;
    fn external(self, name: &str) -> Self;
}

impl ServiceExt for Service {
    fn ip(mut self, ip: &str) -> Self {
        if let Some(spec) = self.spec.as_mut() {
            spec.cluster_ip = Some(ip.into());
        }
        self
    }

    fn port(mut self, name: &str, protocol: &str, port: i32) -> Self {
        if let Some(spec) = self.spec.as_mut() {
            spec.ports.get_or_insert_with(Vec::new).push(ServicePort {
                name: Some(name.into()),
                protocol: Some(protocol.into()),
                port,
                ..ServicePort::default()
            });
        }
        self
    }

    fn external(mut self, name: &str) -> Self {
        if let Some(spec) = self.spec.as_mut() {
            spec.type_ = Some("ExternalName".into());
            spec.external_name = Some(name.into());
        }
        self
    }
}

/// An Endpoints object with the given subsets.
pub(crate) fn endpoints(namespace: &str, name: &str, subsets: Vec<EndpointSubset>) -> Endpoints {
    Endpoints {
        metadata: meta(namespace, name),
        subsets: Some(subsets),
    }
}

/// One subset: IPs (optionally `ip=hostname`) and `(name, protocol, port)` ports.
pub(crate) fn subset(ips: &[&str], ports: &[(&str, &str, i32)]) -> EndpointSubset {
    EndpointSubset {
        addresses: Some(
            ips.iter()
                .map(|spec| {
                    let (ip, hostname) = spec
                        .split_once('=')
                        .map_or((*spec, None), |(i, h)| (i, Some(h.to_string())));
                    EndpointAddress {
                        ip: ip.into(),
                        hostname,
                        ..EndpointAddress::default()
                    }
                })
                .collect(),
        ),
        ports: Some(
            ports
                .iter()
                .map(|(name, protocol, port)| EndpointPort {
                    name: Some((*name).into()),
                    protocol: Some((*protocol).into()),
                    port: *port,
                    ..EndpointPort::default()
                })
                .collect(),
        ),
        not_ready_addresses: None,
    }
}

/// The `host` of each record JSON in `values`, sorted.
pub(crate) fn sorted_hosts<'a>(values: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut hosts: Vec<String> = values
        .map(|v| {
            skydns_msg::record::Record::from_json(v.as_bytes())
                .expect("record JSON")
                .host
                .to_string()
        })
        .collect();
    hosts.sort();
    hosts
}
