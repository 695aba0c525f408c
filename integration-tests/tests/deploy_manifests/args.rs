//! Container arguments against our binaries' flag parsers, and the pod wiring.

use super::support::*;
use super::*;
use skydns::pods::PodMode;

// ---------------------------------------------------------------------------
// Container arguments against our flag parsers

/// What a binary made of a container's arguments.
#[derive(Debug)]
pub(crate) enum Accepted {
    Skydns(Box<skydns::config::Config>),
    Kube2sky(Box<kube2sky::config::Config>),
    Healthz(healthz::flags::Config),
}

pub(crate) fn skydns_accepts(args: &[String]) -> Result<Accepted, String> {
    let argv = std::iter::once("skydns".to_owned())
        .chain(args.iter().cloned())
        .map(OsString::from);
    let flags = skydns::config::parse_args(argv).map_err(|e| e.to_string())?;
    let config = skydns::config::Settings::from_flags(&flags)
        .finish(&flags, || Ok(vec![]))
        .map_err(|e| e.0)?;
    Ok(Accepted::Skydns(Box::new(config)))
}

pub(crate) fn kube2sky_accepts(args: &[String]) -> Result<Accepted, String> {
    let argv = std::iter::once("kube2sky".to_owned()).chain(args.iter().cloned());
    let flags = kube2sky::config::Flags::parse_from_go_style(argv).map_err(|e| e.to_string())?;
    let config = flags.into_config().map_err(|e| e.to_string())?;
    Ok(Accepted::Kube2sky(Box::new(config)))
}

/// `healthz::flags::parse` takes the arguments after the program name, as
/// exec-healthz's main passes them.
pub(crate) fn healthz_accepts(args: &[String]) -> Result<Accepted, String> {
    match healthz::flags::parse(args.iter().cloned()) {
        Ok(healthz::flags::Parsed::Run(config)) => Ok(Accepted::Healthz(config)),
        Ok(healthz::flags::Parsed::Help) => Err("asks for help instead of running".into()),
        Ok(healthz::flags::Parsed::Version) => {
            Err("asks for the version instead of running".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `localhost/kube-dns-rs/skydns:0.1.0` (or the same name in the registry an
/// overlay moved it to) → the parser of the binary in that image.
pub(crate) type Parser = fn(&[String]) -> Result<Accepted, String>;

pub(crate) fn parser_for(image: &str) -> Option<Parser> {
    let (name, _tag) = image.rsplit_once(':')?;
    let (registry, last) = name.rsplit_once('/')?;
    if registry.starts_with("registry.k8s.io") {
        return None;
    }
    match last {
        "skydns" => Some(skydns_accepts),
        "kube2sky" => Some(kube2sky_accepts),
        "exechealthz" => Some(healthz_accepts),
        _ => None,
    }
}

/// Runs one container's arguments through its binary's parser. Containers
/// with a `command` (etcd) are not ours and return `None`.
pub(crate) fn check_args(c: &Container, what: &str) -> Option<Result<Accepted, String>> {
    let image = c.image.as_deref().unwrap_or("");
    if c.command.is_some() {
        assert!(
            parser_for(image).is_none(),
            "{what}: our images are run through their entrypoint; no command"
        );
        return None;
    }
    let parse = parser_for(image)
        .unwrap_or_else(|| panic!("{what}: image {image:?} has no command and is not one of ours"));
    let args = c.args.clone().unwrap_or_default();
    // Every argument is one `-flag=value`: a value split into its own list
    // item would be a positional argument, which Go's flag package (and so
    // exec-healthz) silently treats as the end of the flags.
    for arg in &args {
        assert!(
            arg.starts_with('-') && arg.contains('='),
            "{what}: argument {arg:?} is not of the form -flag=value"
        );
    }
    Some(parse(&args))
}

pub(crate) fn port_number(port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => panic!("probe port {s:?}: use numbers"),
    }
}

/// `(path, port)` of an HTTP GET probe.
pub(crate) fn http_get(probe: Option<&Probe>, what: &str) -> (String, i32) {
    let get = probe
        .and_then(|p| p.http_get.as_ref())
        .unwrap_or_else(|| panic!("{what}: no httpGet probe"));
    (get.path.clone().unwrap_or_default(), port_number(&get.port))
}

/// The port of an etcd container's `-listen-metrics-urls` (one URL).
pub(crate) fn etcd_metrics_port(c: &Container) -> Option<i32> {
    let command = c.command.as_ref()?;
    let at = command.iter().position(|a| a == "-listen-metrics-urls")?;
    let url = command.get(at + 1)?;
    url.rsplit_once(':')?.1.parse().ok()
}

pub(crate) fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The four containers' arguments are accepted, and they wire the pod
/// together: kube2sky and skydns use the etcd the etcd container serves, the
/// probes hit the ports the binaries listen on, the domain is the rendered one.
pub(crate) fn check_pod_wiring(m: &Manifests) {
    let (_, pod) = m.pod();
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["etcd", "kube2sky", "skydns", "healthz"],
        "{}",
        m.flavour
    );

    let etcd = container(pod, "etcd");
    assert_eq!(etcd.image.as_deref(), Some(ETCD_IMAGE));
    let command = etcd.command.clone().expect("etcd has a command");
    assert_eq!(command[0], "/usr/local/bin/etcd");
    let flag_value = |flag: &str| {
        let i = command.iter().position(|a| a == flag);
        i.and_then(|i| command.get(i + 1)).cloned()
    };
    let client_urls: BTreeSet<String> = flag_value("-listen-client-urls")
        .expect("etcd -listen-client-urls")
        .split(',')
        .map(str::to_owned)
        .collect();
    let expected: BTreeSet<String> = ["http://127.0.0.1:2379", "http://127.0.0.1:4001"]
        .map(String::from)
        .into();
    assert_eq!(client_urls, expected);
    let data_dir = flag_value("-data-dir").expect("etcd -data-dir");
    let mounts = etcd.volume_mounts.clone().unwrap_or_default();
    assert!(
        mounts
            .iter()
            .any(|vm| vm.name == "etcd-storage" && data_dir.starts_with(&vm.mount_path)),
        "{}: etcd's data dir {data_dir} is not on the etcd-storage volume",
        m.flavour
    );

    let mut checked = BTreeSet::new();
    for c in &pod.containers {
        let what = format!("deploy/{} container {}", m.flavour, c.name);
        let Some(result) = check_args(c, &what) else {
            continue;
        };
        let image = c.image.clone().unwrap_or_default();
        assert!(
            image.ends_with(&format!(":{IMAGE_TAG}")),
            "{what}: image {image} is not tagged {IMAGE_TAG}"
        );
        match result.unwrap_or_else(|e| panic!("{what}: arguments rejected: {e}")) {
            Accepted::Skydns(config) => {
                assert_eq!(config.zone.domain, format!("{}.", m.domain), "{what}");
                assert_eq!(config.addr.to_string(), "0.0.0.0:53", "{what}");
                assert_eq!(
                    config.handler.forward.relay.policy,
                    skydns::NsPolicy::Sequential,
                    "{what}: -ns-rotate=false as in 1.2"
                );
                assert_eq!(config.etcd.endpoints, ["http://127.0.0.1:4001"], "{what}");
                assert!(client_urls.contains(&config.etcd.endpoints[0]));
                let ports: BTreeSet<(i32, String)> = c
                    .ports
                    .iter()
                    .flatten()
                    .map(|p| (p.container_port, p.protocol.clone().unwrap_or_default()))
                    .collect();
                let mut want: BTreeSet<(i32, String)> =
                    [(53, "UDP".to_owned()), (53, "TCP".to_owned())].into();
                if m.flavour == "legacy" {
                    assert!(
                        config.lifecycle.lameduck.is_zero(),
                        "{what}: 1.2 had no lameduck"
                    );
                    assert_eq!(
                        config.handler.cache.capacity, 0,
                        "{what}: 1.2 had no response cache"
                    );
                    let pods = config.handler.pods;
                    assert_eq!(pods, PodMode::Verified, "{what}: 1.2 answered its records");
                } else {
                    let metrics = check_skydns_lifecycle(pod, c, &config, &what);
                    let pods = config.handler.pods;
                    assert_eq!(pods, PodMode::Insecure, "{what}: kubeadm's pods insecure");
                    want.insert((metrics, "TCP".to_owned()));
                }
                assert_eq!(ports, want, "{what}");
            }
            Accepted::Kube2sky(config) => {
                assert_eq!(config.domain, format!("{}.", m.domain), "{what}");
                assert_eq!(config.etcd.endpoints, ["http://127.0.0.1:4001"], "{what}");
                assert!(client_urls.contains(&config.etcd.endpoints[0]));
                let readiness = http_get(c.readiness_probe.as_ref(), &what);
                assert_eq!(
                    readiness,
                    ("/readiness".to_owned(), i32::from(config.healthz_port)),
                    "{what}: readiness must hit kube2sky's own /readiness"
                );
                assert!(c.liveness_probe.is_some(), "{what}: liveness probe");
                // The 1.2 pod keeps 1.2's key set; the others write the
                // DNS specification's records.
                assert_eq!(
                    config.features.spec_records,
                    m.flavour != "legacy",
                    "{what}: --spec-records"
                );
            }
            Accepted::Healthz(config) => {
                assert_eq!(
                    config.cmd,
                    format!(
                        "nslookup kubernetes.default.svc.{} 127.0.0.1 >/dev/null",
                        m.domain
                    ),
                    "{what}"
                );
                assert_eq!(config.port, 8080, "{what}");
                let declared: Vec<i32> =
                    c.ports.iter().flatten().map(|p| p.container_port).collect();
                assert_eq!(declared, [i32::from(config.port)], "{what}");
            }
        }
        checked.insert(c.name.clone());
    }
    assert_eq!(
        checked,
        ["kube2sky", "skydns", "healthz"].map(String::from).into(),
        "{}: every one of our containers is checked",
        m.flavour
    );

    // Every other HTTP probe in the pod hits a port some container listens
    // on: 8080 (exec-healthz) or 8081 (kube2sky's --healthz-port default);
    // etcd's, its /health on its metrics listener (etcd_probes.rs asks a
    // real etcd).
    for c in pod.containers.iter().filter(|c| c.name != "skydns") {
        for probe in [&c.liveness_probe, &c.readiness_probe]
            .into_iter()
            .flatten()
        {
            let (path, port) = http_get(Some(probe), &c.name);
            let ok = if c.name == "etcd" {
                path.starts_with("/health") && Some(port) == etcd_metrics_port(c)
            } else {
                matches!(
                    (path.as_str(), port),
                    ("/healthz", 8080 | 8081) | ("/readiness", 8081)
                )
            };
            assert!(
                ok,
                "deploy/{} container {}: probe {path} on {port}",
                m.flavour, c.name
            );
        }
    }

    // Resources: cpu and memory requests and a memory limit everywhere; no
    // CPU limit on etcd, kube2sky and skydns but in the 1.2 pod (resources.rs).
    for c in &pod.containers {
        let r = c.resources.as_ref().expect("resources");
        let requests = r.requests.as_ref().expect("requests");
        assert!(
            requests.contains_key("cpu") && requests.contains_key("memory"),
            "{}",
            c.name
        );
        let limits = r.limits.as_ref().expect("limits");
        assert!(limits.contains_key("memory"), "{}", c.name);
        let unthrottled = ["etcd", "kube2sky", "skydns"].contains(&c.name.as_str());
        assert_eq!(
            limits.contains_key("cpu"),
            m.flavour == "legacy" || !unthrottled,
            "deploy/{} container {}: a CPU limit",
            m.flavour,
            c.name
        );
    }
    assert_eq!(pod.dns_policy.as_deref(), Some("Default"), "{}", m.flavour);
    let volumes: BTreeSet<&str> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    for c in &pod.containers {
        for vm in c.volume_mounts.iter().flatten() {
            assert!(
                volumes.contains(vm.name.as_str()),
                "{}: {}",
                c.name,
                vm.name
            );
        }
    }
}

/// skydns in a current pod: readiness on its own `/ready` and liveness on
/// `/health`, both on its metrics port; a lameduck, within the pod's
/// termination grace period together with the drain. The metrics port.
pub(crate) fn check_skydns_lifecycle(
    pod: &PodSpec,
    c: &Container,
    config: &skydns::config::Config,
    what: &str,
) -> i32 {
    let metrics = config.metrics.addr.expect("-metrics-addr").port();
    let metrics = i32::from(metrics);
    assert_eq!(
        http_get(c.readiness_probe.as_ref(), what),
        ("/ready".to_owned(), metrics),
        "{what}: readiness"
    );
    assert_eq!(
        http_get(c.liveness_probe.as_ref(), what),
        ("/health".to_owned(), metrics),
        "{what}: liveness"
    );
    assert!(!config.lifecycle.lameduck.is_zero(), "{what}: -lameduck");
    check_skydns_forwarding(config, what);
    let grace = pod.termination_grace_period_seconds.unwrap_or(30);
    let needed = config.lifecycle.lameduck + skydns::lifecycle::DRAIN_LIMIT;
    assert!(
        u64::try_from(grace).unwrap() > needed.as_secs(),
        "{what}: terminationGracePeriodSeconds {grace} <= lameduck + drain {needed:?}"
    );
    metrics
}

/// skydns in a current pod caches forwarded answers, prefetches popular
/// ones, serves stale ones when the upstreams fail, and skips a dead one.
fn check_skydns_forwarding(config: &skydns::config::Config, what: &str) {
    assert!(config.handler.cache.capacity >= 1_000, "{what}: -rcache");
    let (cache, forward) = (&config.handler.cache, &config.handler.forward);
    assert!(cache.prefetch_hits > 0, "{what}: -rcache-prefetch");
    assert!(!cache.stale.is_zero(), "{what}: -rcache-stale");
    assert!(
        forward.relay.fail_threshold > 0,
        "{what}: upstream health on"
    );
}

pub(crate) fn check_service(m: &Manifests) {
    let svc = m.service();
    let meta = &svc.metadata;
    assert_eq!(meta.name.as_deref(), Some("kube-dns"));
    assert_eq!(meta.namespace.as_deref(), Some("kube-system"));
    let spec = svc.spec.as_ref().expect("service spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some(m.server_ip.as_str()));
    let ports: Vec<(String, i32, String)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port,
                p.protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("dns".to_owned(), 53, "UDP".to_owned()),
            ("dns-tcp".to_owned(), 53, "TCP".to_owned())
        ]
    );
    let (labels, _) = m.pod();
    for (k, v) in spec.selector.iter().flatten() {
        assert_eq!(labels.get(k), Some(v), "{}: selector {k}", m.flavour);
    }
}
