//! Endpoints mirrored into EndpointSlices, as kube-controller-manager's
//! EndpointSliceMirroring controller does: with
//! [`super::Config::mirror_endpoints`] on, the store calls [`reconcile`] after
//! every Endpoints write, under the same lock. Slice names are deterministic
//! (`<name>-mirror-ipv4-<n>`), so tests can name them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use serde_json::{json, Map, Value};

use super::endpointslice;
use super::history::{EventType, Key};
use super::mirrored::{CONTROLLER, MANAGED_BY, SERVICE_NAME};
use super::resource::ResourceKind;
use super::state::State;
use super::writes;

/// The label that, `"true"`, keeps an Endpoints from being mirrored.
pub(crate) const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// The annotation of a leader election lock (never mirrored).
const LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
/// Annotations not copied to slices.
const UNCOPIED_ANNOTATIONS: [&str; 2] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "endpoints.kubernetes.io/last-change-trigger-time",
];
/// `--mirroring-max-endpoints-per-subset`'s default.
const MAX_PER_SUBSET: usize = 1000;
/// Endpoints per mirrored slice.
const MAX_PER_SLICE: usize = 100;
/// Longest object name.
const MAX_NAME: usize = 253;

/// One slice write a reconcile asks the store to make.
pub(crate) struct Write {
    /// ADDED, MODIFIED or DELETED.
    pub(crate) event_type: EventType,
    /// The slice.
    pub(crate) key: Key,
    /// Its new state (for DELETED: its last).
    pub(crate) object: Value,
    /// Its previous state.
    pub(crate) prev: Option<Value>,
}

/// The slice writes that make the store's mirrored slices of Endpoints
/// `key` match `endpoints` (None: it was deleted). Creates are checked and
/// filled in as any create; nothing is stored yet.
pub(crate) fn reconcile(state: &mut State, key: &Key, endpoints: Option<&Value>) -> Vec<Write> {
    let desired = endpoints
        .filter(|e| should_mirror(e))
        .map(desired_slices)
        .unwrap_or_default();
    let existing = state.mirrored.names(&key.namespace, &key.name);
    let mut writes = Vec::new();
    let mut kept = BTreeSet::new();
    for (name, slice) in desired {
        let slice_key = Key {
            kind: ResourceKind::EndpointSlice,
            namespace: key.namespace.clone(),
            name,
        };
        let result = if existing.contains(&slice_key.name) {
            kept.insert(slice_key.name.clone());
            update(state, &slice_key, slice)
        } else {
            create(state, &slice_key, slice)
        };
        match result {
            Ok(write) => writes.extend(write),
            Err(why) => tracing::warn!(
                "mirroring Endpoints {}/{}: EndpointSlice {}: {why}",
                key.namespace,
                key.name,
                slice_key.name
            ),
        }
    }
    for name in existing.difference(&kept) {
        let slice_key = Key {
            kind: ResourceKind::EndpointSlice,
            namespace: key.namespace.clone(),
            name: name.clone(),
        };
        if let Some(old) = state.objects.get(&slice_key).map(|s| &s.value) {
            writes.push(Write {
                event_type: EventType::Deleted,
                key: slice_key,
                object: old.clone(),
                prev: Some(old.clone()),
            });
        }
    }
    writes
}

fn create(state: &mut State, key: &Key, slice: Value) -> Result<Option<Write>, String> {
    let mut obj = ResourceKind::EndpointSlice
        .decode(slice)
        .map_err(|e| e.to_string())?;
    let ns = Some(key.namespace.as_str());
    let key =
        writes::prepare_create(state, key.kind, ns, &mut obj, false).map_err(|e| e.to_string())?;
    Ok(Some(Write {
        event_type: EventType::Added,
        key,
        object: obj,
        prev: None,
    }))
}

fn update(state: &mut State, key: &Key, slice: Value) -> Result<Option<Write>, String> {
    let Some(old) = state.objects.get(key).map(|s| s.value.clone()) else {
        return Ok(None);
    };
    let obj = ResourceKind::EndpointSlice
        .decode(slice)
        .map_err(|e| e.to_string())?;
    let new = writes::prepare_update(state, key, &old, obj).map_err(|e| e.to_string())?;
    Ok((new != old).then(|| Write {
        event_type: EventType::Modified,
        key: key.clone(),
        object: new,
        prev: Some(old),
    }))
}

/// Whether the real controller would mirror `endpoints` (its Service aside).
fn should_mirror(endpoints: &Value) -> bool {
    let meta = &endpoints["metadata"];
    meta["labels"][SKIP_MIRROR] != "true" && meta["annotations"].get(LEADER).is_none()
}

/// The endpoints of one address type and set of ports.
struct Group {
    family: &'static str,
    /// The ports, sorted: what makes subsets share a group.
    sorted_ports: Value,
    ports: Value,
    endpoints: Vec<Value>,
    /// What makes two endpoints the same (all but the conditions).
    seen: HashSet<String>,
}

/// The mirrored slices `endpoints` should have, by name, in name order.
fn desired_slices(endpoints: &Value) -> BTreeMap<String, Value> {
    let name = endpoints["metadata"]["name"].as_str().unwrap_or_default();
    let mut counts = BTreeMap::<&str, usize>::new();
    let mut slices = BTreeMap::new();
    for group in groups(endpoints) {
        for chunk in group.endpoints.chunks(MAX_PER_SLICE) {
            let n = counts.entry(group.family).or_default();
            *n += 1;
            let slice_name = slice_name(name, group.family, *n);
            let slice = slice_object(endpoints, &slice_name, &group, chunk);
            slices.insert(slice_name, slice);
        }
    }
    slices
}

/// The endpoints of every subset, grouped; empty groups left out.
fn groups(endpoints: &Value) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let subsets = endpoints["subsets"].as_array().map(Vec::as_slice);
    for subset in subsets.unwrap_or_default() {
        let ports = slice_ports(&subset["ports"]);
        let mut sorted_ports = ports.clone();
        if let Some(p) = sorted_ports.as_array_mut() {
            p.sort_by_key(Value::to_string);
        }
        let ready = subset["addresses"].as_array().into_iter().flatten();
        let not_ready = subset["notReadyAddresses"].as_array().into_iter().flatten();
        let addresses = ready
            .map(|a| (a, true))
            .chain(not_ready.map(|a| (a, false)));
        let mut added = 0;
        for (address, is_ready) in addresses {
            if added == MAX_PER_SUBSET {
                tracing::warn!(
                    "mirroring Endpoints {}: more than {MAX_PER_SUBSET} addresses in a subset; the rest are skipped",
                    describe(endpoints)
                );
                break;
            }
            let Some((family, endpoint)) = to_endpoint(endpoints, address, is_ready) else {
                continue;
            };
            added += 1;
            let at = groups
                .iter()
                .position(|g| g.family == family && g.sorted_ports == sorted_ports)
                .unwrap_or_else(|| {
                    groups.push(Group {
                        family,
                        sorted_ports: sorted_ports.clone(),
                        ports: ports.clone(),
                        endpoints: Vec::new(),
                        seen: HashSet::new(),
                    });
                    groups.len() - 1
                });
            let group = &mut groups[at];
            let mut identity = endpoint.clone();
            identity["conditions"] = Value::Null;
            if group.seen.insert(identity.to_string()) {
                group.endpoints.push(endpoint);
            }
        }
    }
    groups
}

/// The slice endpoint of an Endpoints address and its address type; None
/// (with a warning) when it cannot be mirrored.
fn to_endpoint(endpoints: &Value, address: &Value, ready: bool) -> Option<(&'static str, Value)> {
    let ip_text = address["ip"].as_str().unwrap_or_default();
    let Ok(ip) = ip_text.parse::<IpAddr>() else {
        tracing::warn!(
            "mirroring Endpoints {}: {ip_text:?} is not a valid IP; not mirrored",
            describe(endpoints)
        );
        return None;
    };
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let mut endpoint = json!({ "addresses": [ip.to_string()], "conditions": { "ready": ready } });
    if let Some(host) = address["hostname"].as_str().filter(|h| !h.is_empty()) {
        endpoint["hostname"] = json!(host);
    }
    if let Some(node) = address["nodeName"].as_str() {
        endpoint["nodeName"] = json!(node);
    }
    if address["targetRef"].is_object() {
        endpoint["targetRef"] = address["targetRef"].clone();
    }
    let check = json!({ "addressType": family, "endpoints": [&endpoint] });
    let errors = endpointslice::validate(&check, None);
    if !errors.is_empty() {
        tracing::warn!(
            "mirroring Endpoints {}: address {ip_text} not mirrored: {}",
            describe(endpoints),
            errors.join("; ")
        );
        return None;
    }
    Some((family, endpoint))
}

/// A subset's ports as slice ports (defaulted as a slice's are).
fn slice_ports(ports: &Value) -> Value {
    let ports: Vec<Value> = ports
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut port = json!({
                "name": p["name"].as_str().unwrap_or_default(),
                "port": p["port"],
                "protocol": p["protocol"].as_str().unwrap_or("TCP"),
            });
            if let Some(app) = p["appProtocol"].as_str() {
                port["appProtocol"] = json!(app);
            }
            port
        })
        .collect();
    Value::Array(ports)
}

/// `<name>-mirror-<family>-<n>`, `name` cut short to fit [`MAX_NAME`].
fn slice_name(name: &str, family: &str, n: usize) -> String {
    let suffix = format!("-mirror-{}-{n}", family.to_ascii_lowercase());
    let cut = name.len().min(MAX_NAME - suffix.len());
    let prefix = name.get(..cut).unwrap_or(name).trim_end_matches(['-', '.']);
    format!("{prefix}{suffix}")
}

/// The mirrored slice `name` of `endpoints` holding `chunk`.
fn slice_object(endpoints: &Value, name: &str, group: &Group, chunk: &[Value]) -> Value {
    let meta = &endpoints["metadata"];
    let ep_name = meta["name"].as_str().unwrap_or_default();
    let mut labels = meta["labels"].as_object().cloned().unwrap_or_default();
    labels.remove(SKIP_MIRROR);
    labels.insert(SERVICE_NAME.into(), json!(ep_name));
    labels.insert(MANAGED_BY.into(), json!(CONTROLLER));
    let mut annotations: Map<String, Value> =
        meta["annotations"].as_object().cloned().unwrap_or_default();
    for a in UNCOPIED_ANNOTATIONS {
        annotations.remove(a);
    }
    let mut metadata = json!({
        "name": name,
        "namespace": meta["namespace"],
        "labels": labels,
        "ownerReferences": [{
            "apiVersion": "v1",
            "kind": "Endpoints",
            "name": ep_name,
            "uid": meta["uid"],
            "controller": true,
            "blockOwnerDeletion": true,
        }],
    });
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata,
        "addressType": group.family,
        "endpoints": chunk,
        "ports": group.ports,
    })
}

fn describe(endpoints: &Value) -> String {
    let meta = &endpoints["metadata"];
    format!(
        "{}/{}",
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(subsets: Value) -> Value {
        json!({
            "metadata": {
                "name": "web", "namespace": "default", "uid": "u-1",
                "labels": { "app": "web" },
                "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a" },
            },
            "subsets": subsets,
        })
    }

    #[test]
    fn subsets_become_slices_by_family_and_ports() {
        let ep = endpoints(json!([
            {
                "addresses": [
                    { "ip": "10.1.0.1", "hostname": "a", "nodeName": "n1" },
                    { "ip": "::ffff:10.1.0.2" },
                    { "ip": "fd00::1", "targetRef": { "kind": "Pod", "name": "p" } },
                    { "ip": "not-an-ip" },
                    { "ip": "127.0.0.1" },
                ],
                "notReadyAddresses": [{ "ip": "10.1.0.3" }, { "ip": "10.1.0.1", "hostname": "a", "nodeName": "n1" }],
                "ports": [{ "name": "http", "port": 80 }, { "name": "dns", "port": 53, "protocol": "UDP", "appProtocol": "dns" }],
            },
            {
                "addresses": [{ "ip": "10.1.0.4" }],
                "ports": [{ "name": "dns", "port": 53, "protocol": "UDP", "appProtocol": "dns" }, { "name": "http", "port": 80 }],
            },
            { "addresses": [{ "ip": "10.1.0.5" }], "ports": [{ "port": 8080 }] },
        ]));
        let slices = desired_slices(&ep);
        let names: Vec<&str> = slices.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "web-mirror-ipv4-1",
                "web-mirror-ipv4-2",
                "web-mirror-ipv6-1"
            ]
        );
        let v4 = &slices["web-mirror-ipv4-1"];
        let addresses: Vec<&Value> = v4["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["addresses"][0])
            .collect();
        assert_eq!(
            addresses,
            ["10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"],
            "{v4}"
        );
        assert_eq!(
            v4["endpoints"][0],
            json!({ "addresses": ["10.1.0.1"], "conditions": { "ready": true }, "hostname": "a", "nodeName": "n1" })
        );
        assert_eq!(v4["endpoints"][2]["conditions"]["ready"], false);
        assert_eq!(v4["ports"][1]["appProtocol"], "dns");
        assert_eq!(
            slices["web-mirror-ipv4-2"]["ports"],
            json!([{ "name": "", "port": 8080, "protocol": "TCP" }])
        );
        let v6 = &slices["web-mirror-ipv6-1"];
        assert_eq!(v6["addressType"], "IPv6");
        assert_eq!(v6["endpoints"][0]["targetRef"]["name"], "p");
        let meta = &v4["metadata"];
        assert_eq!(
            meta["labels"],
            json!({ "app": "web", SERVICE_NAME: "web", MANAGED_BY: CONTROLLER })
        );
        assert_eq!(meta["annotations"], json!({ "team": "a" }));
        assert_eq!(meta["ownerReferences"][0]["uid"], "u-1");
    }

    #[test]
    fn big_subsets_are_cut_into_slices_and_capped() {
        let addresses: Vec<Value> = (0..1100)
            .map(|i| json!({ "ip": format!("10.1.{}.{}", i / 200, i % 200 + 1) }))
            .collect();
        let ep = endpoints(json!([{ "addresses": addresses }]));
        let slices = desired_slices(&ep);
        assert_eq!(slices.len(), 10);
        assert!(slices
            .values()
            .all(|s| s["endpoints"].as_array().unwrap().len() == MAX_PER_SLICE));
        assert!(slices.contains_key("web-mirror-ipv4-10"));
    }

    #[test]
    fn skipped_endpoints_and_long_names() {
        let mut ep = endpoints(json!([{ "addresses": [{ "ip": "10.1.0.1" }] }]));
        assert!(should_mirror(&ep));
        ep["metadata"]["labels"][SKIP_MIRROR] = json!("true");
        assert!(!should_mirror(&ep));
        ep["metadata"]["labels"][SKIP_MIRROR] = json!("false");
        assert!(should_mirror(&ep));
        ep["metadata"]["annotations"][LEADER] = json!("{}");
        assert!(!should_mirror(&ep));
        // Cut after 239 characters, at the dash, which goes too.
        let long = format!("{}-{}", "a".repeat(238), "b".repeat(14));
        let name = slice_name(&long, "IPv6", 3);
        assert_eq!(name.len(), 252, "{name}");
        assert!(name.ends_with("a-mirror-ipv6-3"), "{name}");
    }
}
