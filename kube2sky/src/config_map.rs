//! The watch of kube-dns's ConfigMap (`--config-map`): each version is
//! parsed ([`KubeDnsConfig::parse`]) and, when valid and different from the
//! last one, sent to the writer as a [`Change::KubeDns`]; a deletion (or no
//! ConfigMap at all) is the default configuration, as kube-dns had it. A
//! malformed version changes nothing: it is logged, counted
//! (`kube2sky_config_map_updates_total{result="invalid"}`) and reported as a
//! Warning Event on the ConfigMap (`kubectl describe cm`), once per version.
//! Until a first valid version (or its absence) is seen, what etcd holds
//! from an earlier run is left as it is.

use crate::config::ConfigError;
use crate::index::Change;
use crate::kube_dns_config::KubeDnsConfig;
use crate::metrics::{ConfigMapLabel, ConfigMapResult, Metrics};
use crate::name_rules::{is_dns1123_label, is_dns1123_subdomain};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::events::{Event as Report, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest note an Event takes, in bytes.
const EVENT_NOTE_BYTES: usize = 1024;

/// `--config-map-namespace` and `--config-map`, checked as object names;
/// `None` when `--config-map` is empty (not followed).
pub(crate) fn checked(
    namespace: &str,
    name: &str,
) -> Result<Option<(String, String)>, ConfigError> {
    if name.is_empty() {
        return Ok(None);
    }
    if !is_dns1123_subdomain(name) {
        return Err(ConfigError(format!(
            "--config-map {name:?} is not a ConfigMap name (lower-case DNS-1123 subdomain)"
        )));
    }
    if !is_dns1123_label(namespace) {
        return Err(ConfigError(format!(
            "--config-map-namespace {namespace:?} is not a namespace name (DNS-1123 label)"
        )));
    }
    Ok(Some((namespace.to_string(), name.to_string())))
}

/// What the watch needs.
pub(crate) struct ConfigMapWatch {
    /// `(namespace, name)` of the ConfigMap.
    pub config_map: (String, String),
    /// The cluster domain (stub domains may not overlap it).
    pub domain: String,
    /// The writer's channel.
    pub tx: mpsc::Sender<Change>,
    /// Where updates are counted.
    pub metrics: Arc<Metrics>,
    /// Stops the watch.
    pub shutdown: CancellationToken,
}

/// What was last done, so a relist that delivers the same version again
/// neither resends nor reports it twice.
#[derive(Default)]
struct Seen {
    sent: Option<KubeDnsConfig>,
    refused_version: Option<String>,
}

impl ConfigMapWatch {
    /// Watches the ConfigMap until shutdown or the writer is gone.
    pub(crate) async fn run(self, client: Client) {
        let (namespace, name) = &self.config_map;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let fields = format!("metadata.name={name}");
        let recorder = Recorder::new(client, reporter());
        let mut stream = watcher::watcher(api, watcher::Config::default().fields(&fields))
            .default_backoff()
            .boxed();
        let mut seen = Seen::default();
        let mut listed: Option<ConfigMap> = None;
        loop {
            let item = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                item = stream.next() => item,
            };
            let current = match item {
                None => return,
                Some(Err(error)) => {
                    tracing::warn!(%error, "watch of --config-map {namespace}/{name} failed; retrying with backoff");
                    continue;
                }
                Some(Ok(Event::Init)) => {
                    listed = None;
                    continue;
                }
                Some(Ok(Event::InitApply(cm))) => {
                    listed = Some(cm);
                    continue;
                }
                Some(Ok(Event::InitDone)) => listed.take(),
                Some(Ok(Event::Apply(cm))) => Some(cm),
                Some(Ok(Event::Delete(_))) => None,
            };
            if !self.handle(current, &mut seen, &recorder).await {
                return;
            }
        }
    }

    /// Parses and sends (or reports) one version; `false` once the writer is gone.
    async fn handle(&self, cm: Option<ConfigMap>, seen: &mut Seen, recorder: &Recorder) -> bool {
        let (namespace, name) = &self.config_map;
        let parsed = match &cm {
            None => Ok(KubeDnsConfig::default()),
            Some(cm) => KubeDnsConfig::parse(&cm.data.clone().unwrap_or_default(), &self.domain),
        };
        let config = match parsed {
            Ok(config) => config,
            Err(invalid) => {
                let Some(cm) = cm else { return true };
                let version = cm.resource_version();
                if seen.refused_version == version {
                    return true;
                }
                seen.refused_version = version.clone();
                let version = version.unwrap_or_default();
                tracing::warn!(
                    "ignoring ConfigMap {namespace}/{name} (resourceVersion {version}): {invalid}; \
                     the last good configuration stays"
                );
                self.count(ConfigMapResult::Invalid);
                report(recorder, &cm, &invalid.to_string()).await;
                return true;
            }
        };
        seen.refused_version = None;
        if seen.sent.as_ref() == Some(&config) {
            return true;
        }
        describe(&config, &self.config_map, cm.is_some());
        self.count(ConfigMapResult::Applied);
        seen.sent = Some(config.clone());
        self.tx.send(Change::KubeDns(config)).await.is_ok()
    }

    fn count(&self, result: ConfigMapResult) {
        let label = ConfigMapLabel { result };
        self.metrics.config_map_updates.get_or_create(&label).inc();
    }
}

/// Logs what a new configuration sets.
fn describe(config: &KubeDnsConfig, (namespace, name): &(String, String), exists: bool) {
    let stubs: Vec<String> = (config.stub_domains.iter())
        .map(|(domain, servers)| format!("{domain} -> {servers:?}"))
        .collect();
    let source = match exists {
        true => "",
        false => " (absent: the defaults)",
    };
    tracing::info!(
        "applying ConfigMap {namespace}/{name}{source}: stub domains [{}], upstream nameservers {:?}",
        stubs.join(", "),
        config.upstreams
    );
}

/// This replica as the reporter of its Events: `kube2sky` on the host (pod) name.
fn reporter() -> Reporter {
    let instance = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty());
    Reporter {
        controller: "kube2sky".into(),
        instance,
    }
}

/// A Warning Event on the ConfigMap saying why it was refused. A failure
/// (e.g. no RBAC permission to create Events) is logged, not fatal.
async fn report(recorder: &Recorder, cm: &ConfigMap, why: &str) {
    let note = format!("kube2sky ignored this version; the last good configuration stays: {why}");
    let event = Report {
        type_: EventType::Warning,
        reason: "InvalidConfiguration".into(),
        // The API takes at most 1 kB.
        note: Some(clip(&note, EVENT_NOTE_BYTES).to_string()),
        action: "Parse".into(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &cm.object_ref(&())).await {
        tracing::warn!(%error, "could not create an Event for the refused ConfigMap");
    }
}

/// The longest start of `text` of at most `bytes` bytes.
fn clip(text: &str, bytes: usize) -> &str {
    let mut end = text.len().min(bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
