//! The watch of kube-dns's ConfigMap (`--config-map`): each version is parsed
//! ([`KubeDnsConfig::parse`]) and, when valid and new, sent to the writer as a
//! [`Change::KubeDns`]; a deletion is the default configuration. A malformed
//! version changes nothing: it is logged, counted and reported as a Warning
//! Event.

use crate::index::Change;
use crate::kube_dns_config::KubeDnsConfig;
use crate::metrics::{ConfigMapLabel, ConfigMapResult, Kind, Metrics};
use crate::watch::Recovering;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::events::{Event as Report, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest note an Event takes, in bytes.
const EVENT_NOTE_BYTES: usize = 1024;

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
        let config = watcher::Config::default().fields(&fields);
        let health = (Kind::ConfigMap, self.metrics.clone(), self.shutdown.clone());
        let mut events = Recovering::new(api, config, health);
        let mut seen = Seen::default();
        let mut listed: Option<ConfigMap> = None;
        while let Some(event) = events.next().await {
            let current = match event {
                Event::Init => {
                    listed = None;
                    continue;
                }
                Event::InitApply(cm) if cm.name_any() == *name => {
                    listed = Some(cm);
                    continue;
                }
                Event::InitApply(_) => continue,
                Event::InitDone => listed.take(),
                Event::Apply(cm) => Some(cm),
                Event::Delete(_) => None,
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
                report(recorder, &cm, &invalid.to_string()).await;
                self.count(ConfigMapResult::Invalid);
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
    // The version in the reference keeps the Recorder from folding this
    // report into the last one's series (and its note).
    let mut reference = cm.object_ref(&());
    reference.resource_version = cm.resource_version();
    if let Err(error) = recorder.publish(&event, &reference).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_clipped_on_a_character_boundary() {
        assert_eq!(clip("abc", 10), "abc");
        assert_eq!(clip("abcdef", 4), "abcd");
        // "é" is two bytes: never cut in half.
        assert_eq!(clip("aé", 2), "a");
        assert_eq!(
            clip(&"é".repeat(600), EVENT_NOTE_BYTES).len(),
            EVENT_NOTE_BYTES
        );
    }
}
