//! `-discover`: the etcd endpoints follow the cluster's members. A task asks
//! the cluster for its members every [`PERIOD`] and, when their URLs changed,
//! replaces the endpoint list of the store's client (SkyDNS 2.5 watched
//! `/v2/_etcd/machines` for this).

use etcd_access::member::{Endpoints, MemberClient};
use etcd_access::EtcdOptions;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the member list is asked for.
pub(crate) const PERIOD: Duration = Duration::from_secs(5);

/// Keeps `endpoints` (a v3 [`MemberClient`]'s) equal to the members'
/// client URLs until `shutdown`.
pub(crate) async fn follow_v3(
    options: EtcdOptions,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) {
    let configured = options.endpoints.clone();
    let mut client = MemberClient::sharing(options, endpoints.clone());
    loop {
        let listed = async {
            let mut etcd = client.get().await.map_err(|e| e.to_string())?;
            let members = etcd.member_list().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(
                members
                    .members()
                    .iter()
                    .flat_map(|m| m.client_urls().iter().cloned())
                    .collect::<Vec<String>>(),
            )
        };
        let listed = tokio::select! {
            _ = shutdown.cancelled() => return,
            listed = listed => listed,
        };
        match listed {
            Ok(urls) => {
                let mut current = endpoints.write().unwrap_or_else(|e| e.into_inner());
                if let Some(new) = changed(&current, urls, &configured) {
                    tracing::info!(members = ?new, "etcd members changed; following them");
                    *current = new;
                }
            }
            Err(error) => {
                client.forget();
                tracing::warn!(%error, "cannot list the etcd members; keeping the endpoints");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}

/// Keeps a v2 client's endpoints equal to the members' client URLs until `shutdown`.
pub(crate) async fn follow_v2(client: etcd_access::v2::Client, shutdown: CancellationToken) {
    let configured = client.endpoints();
    loop {
        let listed = tokio::select! {
            _ = shutdown.cancelled() => return,
            listed = client.members() => listed,
        };
        match listed {
            Ok(urls) => {
                if let Some(new) = changed(&client.endpoints(), urls, &configured) {
                    match client.set_endpoints(&new) {
                        Ok(()) => {
                            tracing::info!(members = ?new, "etcd members changed; following them")
                        }
                        Err(error) => tracing::warn!(%error, "cannot use the etcd members' URLs"),
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot list the etcd members; keeping the endpoints")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}

/// The members' URLs then the `configured` ones (trailing `/` dropped,
/// de-duplicated, in that order) when they differ from `current` as a set;
/// `None` when they are the same or there are no members.
pub(crate) fn changed(
    current: &[String],
    members: Vec<String>,
    configured: &[String],
) -> Option<Vec<String>> {
    if members.iter().all(|m| m.trim().is_empty()) {
        return None;
    }
    let mut new: Vec<String> = Vec::new();
    for url in members.iter().chain(configured) {
        let url = url.trim_end_matches('/').to_string();
        if !url.is_empty() && !new.contains(&url) {
            new.push(url);
        }
    }
    let normal = |list: &[String]| {
        let mut l: Vec<String> = list
            .iter()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        l.sort();
        l.dedup();
        l
    };
    (!new.is_empty() && normal(&new) != normal(current)).then_some(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_a_different_non_empty_set_replaces_the_endpoints() {
        let configured = list(&["http://a:2379"]);
        let current = list(&["http://a:2379", "http://b:2379/"]);
        let changed = |members: &[&str]| changed(&current, list(members), &configured);
        assert_eq!(changed(&["http://b:2379", "http://a:2379"]), None);
        assert_eq!(changed(&[]), None);
        assert_eq!(
            changed(&["http://a:2379", "http://c:2379/", "http://a:2379"]),
            Some(list(&["http://a:2379", "http://c:2379"]))
        );
        // Unreachable advertised URLs never push out the configured ones.
        assert_eq!(
            changed(&["http://localhost:2379"]),
            Some(list(&["http://localhost:2379", "http://a:2379"]))
        );
    }
}
