//! What every test of the workspace uses, in one place. The tests run the real
//! parts (Debian's etcd, dnsmasq, `dig`, `kubectl`) and the workspace's own
//! binaries; this crate starts them, talks to them and cleans up after them,
//! so each test says only what it checks. Crate map:
//! - [`wait`]: the one way a test waits (`eventually(what, within, probe)`),
//!   failing with the last thing the probe saw; no fixed sleeps.
//! - [`process`]: child processes in their own process group, stopped
//!   (SIGTERM, then SIGKILL of the whole group) when the guard is dropped.
//! - [`tools`]: finding an installed tool (also in `/usr/sbin`), or failing
//!   with the Debian package to install.
//! - [`ports`]: loopback ports for servers that cannot bind port 0; the
//!   launchers retry with new ports when one was taken in between.
//! - [`etcd`]: a real etcd on its own ports and data directory, restartable.
//! - [`etcd_cluster`]: a real etcd cluster of several members, for failover.
//! - [`dead`]: an upstream that never answers, a port nobody listens on.
//! - [`fake_upstream`]: upstreams that echo, forge, truncate, fail or switch
//!   off, for skydns's forwarding tests.
//! - [`dnssec`]: key pairs made by `dnssec-keygen` for the test.
//! - [`dns`]: DNS queries from the test process itself (no `dig` per poll),
//!   and `dig` where a real client is the point.
//! - [`dnsperf`]: dnsperf as a steady query load, and its report.
//! - [`dnsmasq`]: dnsmasq as an upstream resolver.
//! - [`front`]: a Service front relaying to the ready replicas, as kube-proxy.
//! - [`skydns`]: the skydns binary on free ports, ready once it answers.
//! - [`tls`]: a CA and server and client certificates made with openssl.
//! - [`kubectl`]: kubectl bound to one API server, isolated from the machine.
//! - [`relay`]: a TCP relay whose connections a test cuts and holds.
//! - [`control_plane`]: a real kube-apiserver (and kube-controller-manager)
//!   over its own etcd, without nodes, as envtest runs one.
//! - [`coredns`]: CoreDNS, the peer, on a free port with a given Corefile.
//! - [`http`]: GETs of the health and metrics ports, and metric values.
//! - [`bins`]: the workspace's binaries, refused when older than the tree.
//! - [`deploy`]: the manifests rendered by kustomize, `deploy/render.sh`
//!   and Helm.

pub mod bins;
pub mod control_plane;
pub mod coredns;
pub mod dead;
pub mod deploy;
pub mod dns;
pub mod dnsmasq;
pub mod dnsperf;
pub mod dnssec;
pub mod etcd;
pub mod etcd_cluster;
mod etcd_member;
pub mod fake_upstream;
pub mod front;
pub mod http;
pub mod kubectl;
pub mod ports;
pub mod process;
mod reaper;
pub mod relay;
pub mod skydns;
pub mod tls;
pub mod tools;
pub mod wait;
