//! The API objects of the DNS specification's cases (namespace `conf`),
//! shared by the conformance test and the comparison with CoreDNS.

/// The namespace of the querying "pod" and of the objects.
pub const NS: &str = "conf";

/// The namespace.
pub const NAMESPACE: &str = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"conf"}}"#;
/// A dual-stack ClusterIP service with a named port.
pub const DUAL: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"dual","namespace":"conf"},
 "spec":{"clusterIP":"10.0.0.20","clusterIPs":["10.0.0.20","fd00:10::20"],"ipFamilyPolicy":"RequireDualStack",
  "ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#;
/// A headless service; its endpoints come from Endpoints or EndpointSlices.
pub const HEADLESS: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"headless","namespace":"conf"},
 "spec":{"clusterIP":"None","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#;
/// An ExternalName service.
pub const EXTERNAL: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"ext","namespace":"conf"},
 "spec":{"type":"ExternalName","externalName":"www.example.com"}}"#;
/// The headless service's endpoints as one v1 Endpoints: two with a
/// hostname (pet-0 with both families), one without, one not ready.
pub const ENDPOINTS: &str = r#"{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"headless","namespace":"conf",
  "labels":{"endpointslice.kubernetes.io/skip-mirror":"true"}},
 "subsets":[{"addresses":[{"ip":"10.1.0.1","hostname":"pet-0"},{"ip":"fd00::1","hostname":"pet-0"},
   {"ip":"10.1.0.2","hostname":"pet-1"},{"ip":"10.1.0.3"}],
  "notReadyAddresses":[{"ip":"10.1.0.4","hostname":"pet-3"}],
  "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]}"#;
/// The same endpoints as EndpointSlices, one per family.
pub const SLICES: &str = r#"{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"headless-v4","namespace":"conf",
  "labels":{"kubernetes.io/service-name":"headless"}},
 "addressType":"IPv4","ports":[{"name":"http","port":80,"protocol":"TCP"}],
 "endpoints":[{"addresses":["10.1.0.1"],"hostname":"pet-0","conditions":{"ready":true}},
  {"addresses":["10.1.0.2"],"hostname":"pet-1"},{"addresses":["10.1.0.3"],"conditions":{"ready":true}},
  {"addresses":["10.1.0.4"],"hostname":"pet-3","conditions":{"ready":false}}]}
---
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"headless-v6","namespace":"conf",
  "labels":{"kubernetes.io/service-name":"headless"}},
 "addressType":"IPv6","ports":[{"name":"http","port":80,"protocol":"TCP"}],
 "endpoints":[{"addresses":["fd00::1"],"hostname":"pet-0"}]}"#;
