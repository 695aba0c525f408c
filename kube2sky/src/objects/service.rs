//! What kube2sky keeps of a Service: its key and the fields records are made
//! of, in about a hundred bytes instead of a k8s-openapi `Service`'s 800.
//! [`ServiceInfo::to_service`] rebuilds the slim `Service` that the record
//! functions take, for one service at a time.

use super::ObjectKey;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// One port of a [`ServiceInfo`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PortInfo {
    /// `name`.
    pub name: Option<Box<str>>,
    /// `protocol`.
    pub protocol: Option<Box<str>>,
    /// `port`.
    pub port: i32,
}

/// A Service reduced to what DNS records use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceInfo {
    /// Namespace and name.
    pub key: ObjectKey,
    /// `spec.type`.
    pub type_: Option<Box<str>>,
    /// `spec.clusterIP`.
    pub cluster_ip: Option<Box<str>>,
    /// `spec.clusterIPs` (dual-stack: both families).
    pub cluster_ips: Option<Box<[Box<str>]>>,
    /// `spec.externalName`.
    pub external_name: Option<Box<str>>,
    /// `spec.ports`; `None` when the spec has no port list at all.
    pub ports: Option<Box<[PortInfo]>>,
    /// Whether the Service had a spec.
    pub has_spec: bool,
}

fn boxed(s: Option<String>) -> Option<Box<str>> {
    s.map(String::into_boxed_str)
}

fn unboxed(s: &Option<Box<str>>) -> Option<String> {
    s.as_deref().map(str::to_string)
}

impl From<Service> for ServiceInfo {
    fn from(svc: Service) -> Self {
        let key = ObjectKey::of(&svc.metadata);
        let has_spec = svc.spec.is_some();
        let spec = svc.spec.unwrap_or_default();
        ServiceInfo {
            key,
            type_: boxed(spec.type_),
            cluster_ip: boxed(spec.cluster_ip),
            // Single-stack services carry `[clusterIP]`: keep nothing then.
            cluster_ips: spec
                .cluster_ips
                .filter(|ips| ips.len() > 1)
                .map(|ips| ips.into_iter().map(String::into_boxed_str).collect()),
            external_name: boxed(spec.external_name),
            ports: spec.ports.map(|ports| {
                ports
                    .into_iter()
                    .map(|p| PortInfo {
                        name: boxed(p.name),
                        protocol: boxed(p.protocol),
                        port: p.port,
                    })
                    .collect()
            }),
            has_spec,
        }
    }
}

impl ServiceInfo {
    /// The slim Service this was made from: name, namespace and the fields
    /// kept here, nothing else.
    pub(crate) fn to_service(&self) -> Service {
        let spec = self.has_spec.then(|| ServiceSpec {
            type_: unboxed(&self.type_),
            cluster_ip: unboxed(&self.cluster_ip),
            cluster_ips: self
                .cluster_ips
                .as_ref()
                .map(|ips| ips.iter().map(|ip| ip.to_string()).collect()),
            external_name: unboxed(&self.external_name),
            ports: self.ports.as_ref().map(|ports| {
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: unboxed(&p.name),
                        protocol: unboxed(&p.protocol),
                        port: p.port,
                        ..ServicePort::default()
                    })
                    .collect()
            }),
            ..ServiceSpec::default()
        });
        Service {
            metadata: ObjectMeta {
                namespace: Some(self.key.namespace.clone()),
                name: Some(self.key.name.clone()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl ServiceInfo {
    /// Whether the service is headless (its records come from Endpoints):
    /// the rule of `records::service_kind` read off the fields, without
    /// rebuilding a Service (it is asked on every endpoints event).
    pub(crate) fn is_headless(&self) -> bool {
        self.type_.as_deref() != Some("ExternalName")
            && matches!(self.cluster_ip.as_deref().unwrap_or(""), "" | "None")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(spec: Option<ServiceSpec>) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("web".into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    #[test]
    fn a_slim_service_comes_back_unchanged() {
        let ports = vec![
            ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: 80,
                ..ServicePort::default()
            },
            ServicePort {
                port: 53,
                ..ServicePort::default()
            },
        ];
        for spec in [
            None,
            Some(ServiceSpec::default()),
            Some(ServiceSpec {
                cluster_ip: Some("10.0.0.5".into()),
                ports: Some(ports),
                ..ServiceSpec::default()
            }),
            Some(ServiceSpec {
                type_: Some("ExternalName".into()),
                external_name: Some("example.com".into()),
                ports: Some(Vec::new()),
                ..ServiceSpec::default()
            }),
        ] {
            let svc = service(spec);
            assert_eq!(ServiceInfo::from(svc.clone()).to_service(), svc);
        }
    }

    #[test]
    fn it_is_a_fraction_of_a_service() {
        assert!(std::mem::size_of::<ServiceInfo>() * 5 < std::mem::size_of::<Service>());
    }
}
