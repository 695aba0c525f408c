//! List requests: resourceVersion semantics (latest, exact from history, 410
//! when compacted, 504 when in the future), selectors, Tables, and paging whose
//! `continue` token pins the first page's version, like etcd-backed paging.

use std::collections::HashMap;

use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use super::history::Key;
use super::resource::ResourceKind;
use super::selector::Selector;
use super::state::list_item_bytes;
use super::status::{json_bytes_response, json_response, ApiError};
use super::store::Store;
use super::table;

/// Query parameters, as sent.
pub(crate) type Params = HashMap<String, String>;

/// Reads a query parameter, treating empty as absent.
pub(crate) fn param<'a>(q: &'a Params, name: &str) -> Option<&'a str> {
    q.get(name).map(String::as_str).filter(|s| !s.is_empty())
}

/// Whether a boolean query parameter is set (`true` or `1`).
pub(crate) fn flag(q: &Params, name: &str) -> bool {
    matches!(param(q, name), Some("true" | "1"))
}

/// Checks the combination of list/watch options as apiserver's
/// `ValidateListOptions` does (422 ListOptions Invalid).
pub(crate) fn validate_options(q: &Params, watch: bool) -> Result<(), ApiError> {
    const PATH: &str = "resourceVersionMatch";
    let forbidden = |path: &str, why: &str| format!("{path}: Forbidden: {why}");
    let rv_match = param(q, PATH);
    let send_initial = param(q, "sendInitialEvents");
    let mut errs = Vec::new();
    if watch {
        // 1.36 no longer requires allowWatchBookmarks here.
        if send_initial.is_some() && rv_match != Some("NotOlderThan") {
            errs.push(forbidden(
                PATH,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if let Some(m) = rv_match {
            if send_initial.is_none() {
                errs.push(forbidden(PATH, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
            }
            if m != "NotOlderThan" {
                errs.push(format!(
                    "{PATH}: Unsupported value: \"{m}\": supported values: \"NotOlderThan\""
                ));
            }
        }
    } else {
        if let Some(m) = rv_match {
            if param(q, "resourceVersion").is_none() {
                errs.push(forbidden(
                    PATH,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            match m {
                "Exact" if param(q, "resourceVersion") == Some("0") => errs.push(forbidden(PATH, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")),
                "Exact" | "NotOlderThan" => {}
                other => errs.push(format!("{PATH}: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
            }
        }
        if send_initial.is_some() {
            errs.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if rv_match.is_some() && param(q, "continue").is_some() {
        errs.push(forbidden(
            PATH,
            "resourceVersionMatch is forbidden when continue is provided",
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_list_options(&errs))
    }
}

/// Parses a resourceVersion parameter (400 if not a number).
pub(crate) fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    rv.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))
}

fn encode_continue(rv: u64, key: &Key) -> String {
    format!("{rv}/{}/{}", key.namespace, key.name)
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    if !token.len().is_multiple_of(2) || !token.is_ascii() {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '/');
    let (Some(rv), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok((
        rv.parse().map_err(|_| bad())?,
        ns.to_string(),
        name.to_string(),
    ))
}

/// `(namespace, name)` of the last object on the previous page.
type ResumeAfter = Option<(String, String)>;

/// Which version to read, and where to resume, for a list request.
fn read_point(store: &Store, q: &Params) -> Result<(Option<u64>, ResumeAfter), ApiError> {
    if let Some(token) = param(q, "continue") {
        if param(q, "resourceVersion").is_some_and(|rv| rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, ns, name) = decode_continue(token)?;
        return Ok((Some(rv), Some((ns, name))));
    }
    let Some(rv) = param(q, "resourceVersion").filter(|rv| *rv != "0") else {
        return Ok((None, None));
    };
    let rv = parse_rv(rv)?;
    if param(q, "resourceVersionMatch") == Some("Exact") {
        return Ok((Some(rv), None));
    }
    let current = store.current_rv();
    if rv > current {
        return Err(ApiError::too_large_resource_version(rv, current));
    }
    Ok((None, None))
}

/// The `metadata` and `items` of a list page.
pub(crate) struct Page {
    /// List metadata (`resourceVersion`, `continue`, `remainingItemCount`).
    pub metadata: Value,
    /// The objects on this page.
    pub items: Vec<Value>,
}

/// Reads one page of `kind` objects for a list request, as values.
pub(crate) fn read_page(
    store: &Store,
    kind: ResourceKind,
    namespace: Option<&str>,
    q: &Params,
) -> Result<Page, ApiError> {
    let mut items = Vec::new();
    let metadata = visit_page(store, kind, namespace, q, |value, _| {
        let mut item = value.clone();
        if let Some(m) = item.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        items.push(item);
    })?;
    Ok(Page { metadata, items })
}

/// Reads one page of `kind` objects for a list request: hands each to
/// `take` (under the store's lock, nothing copied; with its list item's
/// bytes when it is the current version) and returns the list's metadata.
fn visit_page(
    store: &Store,
    kind: ResourceKind,
    namespace: Option<&str>,
    q: &Params,
    mut take: impl FnMut(&Value, Option<&[u8]>),
) -> Result<Value, ApiError> {
    validate_options(q, false)?;
    let selector = Selector::parse(kind, param(q, "labelSelector"), param(q, "fieldSelector"))?;
    let limit: usize = match param(q, "limit") {
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        None => 0,
    };
    let (at, after) = read_point(store, q)?;
    let continuing = after.is_some();
    // One pass over the objects from the resume point: the page's objects
    // are taken, the first one past it only noted.
    let (mut taken, mut last, mut more) = (0usize, None, 0usize);
    let after = after
        .as_ref()
        .map(|(ns, name)| (ns.as_str(), name.as_str()));
    let rv = store
        .visit(kind, namespace, at, after, |key, value, list_item| {
            if !selector.matches(value) {
                return true;
            }
            if limit == 0 || taken < limit {
                take(value, list_item);
                taken += 1;
                last = Some(key.clone());
                return true;
            }
            more = 1; // counted below when the selector is empty
            false
        })
        .map_err(|e| {
            if continuing && e.code == 410 {
                ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
            } else {
                e
            }
        })?;
    if more > 0 && selector.is_empty() {
        // etcd3's store counts the rest (remainingItemCount) when no
        // selector filters it.
        if let Some(last) = &last {
            more = store.count_after(kind, namespace, rv, (&last.namespace, &last.name))?;
        }
    }
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if more > 0 {
        if let Some(last) = &last {
            metadata["continue"] = json!(encode_continue(rv, last));
            // etcd3's store counts the rest only when no selector filters it.
            if selector.is_empty() {
                metadata["remainingItemCount"] = json!(more);
            }
        }
    }
    Ok(metadata)
}

/// Handles a list GET (as a `<Kind>List`, or a Table when asked for). The
/// `<Kind>List` is written as the objects are visited, with no copy of
/// them (at 150,000 pods, copying each page's objects was half of the
/// server's time), from the bytes kept with each current object.
pub(crate) fn list(
    store: &Store,
    kind: ResourceKind,
    namespace: Option<&str>,
    q: &Params,
    headers: &HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    if table::wants_table(headers) {
        let page = read_page(store, kind, namespace, q)?;
        let includes = param(q, "includeObject");
        let body = table::table(kind, &page.items, page.metadata, includes);
        return Ok(json_response(StatusCode::OK, &body));
    }
    let mut items = b"[".to_vec();
    let metadata = visit_page(store, kind, namespace, q, |value, list_item| {
        if items.len() > 1 {
            items.push(b',');
        }
        match list_item {
            Some(bytes) => items.extend_from_slice(bytes),
            None => items.extend_from_slice(&list_item_bytes(value)),
        }
    })?;
    items.push(b']');
    let head = json!({ "kind": format!("{}List", kind.kind()), "apiVersion": kind.api_version() });
    let mut body = serde_json::to_vec(&head).map_err(|e| ApiError::internal(e.to_string()))?;
    body.pop(); // the closing brace: metadata and items follow
    body.extend_from_slice(b",\"metadata\":");
    serde_json::to_writer(&mut body, &metadata).map_err(|e| ApiError::internal(e.to_string()))?;
    body.extend_from_slice(b",\"items\":");
    body.extend_from_slice(&items);
    body.push(b'}');
    Ok(json_bytes_response(StatusCode::OK, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_roundtrip() {
        let key = Key {
            kind: ResourceKind::Service,
            namespace: "default".into(),
            name: "web".into(),
        };
        let token = encode_continue(42, &key);
        assert_eq!(
            decode_continue(&token).unwrap(),
            (42, "default".into(), "web".into())
        );
        assert!(decode_continue("zz").is_err());
    }

    /// Every page of a paged list (whole, one namespace, and after a write
    /// between pages) says how many objects follow it: the count a page
    /// further on is derived from the last one, and must equal a recount.
    #[test]
    fn remaining_item_count_is_right_on_every_page() {
        let store = Store::new("10.0.0.0/16".parse().unwrap(), 1_000);
        for ns in ["a", "b"] {
            let body = json!({"metadata": {"name": ns}});
            store
                .create(ResourceKind::Namespace, None, body, false)
                .unwrap();
            for i in 0..7 {
                let body = json!({"metadata": {"name": format!("p{i}")}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
                store
                    .create(ResourceKind::Pod, Some(ns), body, false)
                    .unwrap();
            }
        }
        let pages = |namespace: Option<&str>, write_after_first: bool| {
            let mut counts = Vec::new();
            let mut q = Params::from([("limit".to_string(), "3".to_string())]);
            loop {
                let page = read_page(&store, ResourceKind::Pod, namespace, &q).unwrap();
                counts.push((
                    page.items.len(),
                    page.metadata["remainingItemCount"].as_u64(),
                ));
                let Some(token) = page.metadata["continue"].as_str() else {
                    return counts;
                };
                q.insert("continue".into(), token.into());
                if write_after_first && counts.len() == 1 {
                    let body = json!({"metadata": {"name": "late"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
                    store
                        .create(ResourceKind::Pod, Some("b"), body, false)
                        .unwrap();
                }
            }
        };
        let all = vec![
            (3, Some(11)),
            (3, Some(8)),
            (3, Some(5)),
            (3, Some(2)),
            (2, None),
        ];
        assert_eq!(pages(None, false), all);
        assert_eq!(pages(None, false), all, "the same list again");
        assert_eq!(
            pages(Some("b"), false),
            vec![(3, Some(4)), (3, Some(1)), (1, None)]
        );
        // Later pages of a list begun before the write keep its version.
        assert_eq!(pages(None, true), all);
        let after_write = vec![
            (3, Some(12)),
            (3, Some(9)),
            (3, Some(6)),
            (3, Some(3)),
            (3, None),
        ];
        assert_eq!(pages(None, false), after_write);
        // Two lists paged in turn (as kube2sky lists several kinds at once)
        // keep their own counts.
        let mut lists = [
            (None, Params::new(), Vec::new()),
            (Some("b"), Params::new(), Vec::new()),
        ];
        for (_, q, _) in &mut lists {
            q.insert("limit".into(), "3".into());
        }
        for _ in 0..5 {
            for (namespace, q, counts) in &mut lists {
                let ended = |c: &Vec<(usize, Option<u64>)>| c.last().is_some_and(|p| p.1.is_none());
                if ended(counts) {
                    continue;
                }
                let page = read_page(&store, ResourceKind::Pod, *namespace, q).unwrap();
                counts.push((
                    page.items.len(),
                    page.metadata["remainingItemCount"].as_u64(),
                ));
                if let Some(token) = page.metadata["continue"].as_str() {
                    q.insert("continue".into(), token.into());
                }
            }
        }
        assert_eq!(lists[0].2, after_write);
        assert_eq!(lists[1].2, vec![(3, Some(5)), (3, Some(2)), (2, None)]);
        // Deletes and a create in the rest of a list begun before them,
        // in the range the next page's count subtracts (the second page,
        // a/p3..a/p5) and beyond: its pages keep its version's counts.
        let mut q = Params::from([("limit".to_string(), "3".to_string())]);
        let mut counts = Vec::new();
        loop {
            let page = read_page(&store, ResourceKind::Pod, None, &q).unwrap();
            counts.push((
                page.items.len(),
                page.metadata["remainingItemCount"].as_u64(),
            ));
            let Some(token) = page.metadata["continue"].as_str() else {
                break;
            };
            q.insert("continue".into(), token.into());
            if counts.len() == 1 {
                for (ns, name) in [("a", "p4"), ("a", "p5"), ("b", "p6")] {
                    let key = Key {
                        kind: ResourceKind::Pod,
                        namespace: ns.into(),
                        name: name.into(),
                    };
                    store.delete(&key, &Default::default()).unwrap();
                }
                let body = json!({"metadata": {"name": "p35"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
                store
                    .create(ResourceKind::Pod, Some("a"), body, false)
                    .unwrap();
            }
        }
        assert_eq!(counts, after_write);
    }

    /// A `metadata.name` field selector (what a kube-rs watcher of one
    /// ConfigMap sends) lists that ConfigMap only: not its namesakes in
    /// other namespaces, not its neighbours.
    #[test]
    fn a_configmap_list_by_name_returns_that_configmap_only() {
        let store = Store::new("10.0.0.0/16".parse().unwrap(), 1_000);
        for (ns, name) in [
            ("kube-system", "kube-dns"),
            ("kube-system", "kube-proxy"),
            ("default", "kube-dns"),
        ] {
            let body = json!({"metadata": {"name": name}, "data": {"ns": ns}});
            store
                .create(ResourceKind::ConfigMap, Some(ns), body, false)
                .unwrap();
        }
        let q = Params::from([(
            "fieldSelector".to_string(),
            "metadata.name=kube-dns".to_string(),
        )]);
        let page = read_page(&store, ResourceKind::ConfigMap, Some("kube-system"), &q).unwrap();
        let listed: Vec<(&str, &str)> = page
            .items
            .iter()
            .map(|cm| {
                let m = &cm["metadata"];
                (
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(listed, [("kube-system", "kube-dns")]);
        assert_eq!(page.items[0]["data"], json!({"ns": "kube-system"}));
        // Across namespaces, both namesakes; a field the real server does
        // not index is a 400.
        let all = read_page(&store, ResourceKind::ConfigMap, None, &q).unwrap();
        assert_eq!(all.items.len(), 2);
        let q = Params::from([("fieldSelector".to_string(), "data.ns=x".to_string())]);
        let Err(err) = read_page(&store, ResourceKind::ConfigMap, None, &q) else {
            panic!("data.ns is not a field label");
        };
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                400,
                r#""data.ns" is not a known field selector: only "metadata.name", "metadata.namespace""#
            )
        );
    }

    /// The `<Kind>List` written as objects are visited (from the bytes kept
    /// with each object) is the list of the same page read as values: same
    /// objects (without `apiVersion` and `kind`), same metadata; after an
    /// update and a delete, and at an older version rebuilt from history.
    #[test]
    fn a_list_written_while_visiting_is_the_page_read_as_values() {
        let store = Store::new("10.0.0.0/16".parse().unwrap(), 1_000);
        let ns = json!({"metadata": {"name": "a"}});
        store
            .create(ResourceKind::Namespace, None, ns, false)
            .unwrap();
        let pod = |i: usize, image: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}"), "namespace": "a", "labels": {"app": "x\"<y>"}}, "spec": {"containers": [{"name": "c", "image": image}]}});
        for i in 0..5 {
            store
                .create(ResourceKind::Pod, Some("a"), pod(i, "i"), false)
                .unwrap();
        }
        let before = store.current_rv().to_string();
        let key = |i: usize| Key {
            kind: ResourceKind::Pod,
            namespace: "a".into(),
            name: format!("p{i}"),
        };
        store.update(&key(1), pod(1, "changed"), false).unwrap();
        store.delete(&key(3), &Default::default()).unwrap();
        let exact = [
            ("resourceVersion", before.as_str()),
            ("resourceVersionMatch", "Exact"),
        ];
        for (extra, count) in [(&[][..], 4), (&exact[..], 5)] {
            for limit in ["2", "0"] {
                let mut q = Params::from([("limit".to_string(), limit.to_string())]);
                q.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
                let response =
                    list(&store, ResourceKind::Pod, Some("a"), &q, &HeaderMap::new()).unwrap();
                let bytes = futures::executor::block_on(axum::body::to_bytes(
                    response.into_body(),
                    usize::MAX,
                ))
                .unwrap();
                let text = String::from_utf8(bytes.to_vec()).unwrap();
                assert!(
                    text.starts_with(r#"{"apiVersion":"v1","kind":"PodList","metadata":{"#),
                    "{text}"
                );
                let listed: Value = serde_json::from_str(&text).unwrap();
                let page = read_page(&store, ResourceKind::Pod, Some("a"), &q).unwrap();
                assert_eq!(listed["metadata"], page.metadata);
                assert_eq!(listed["items"], Value::Array(page.items.clone()));
                assert_eq!(page.items.len(), if limit == "2" { 2 } else { count });
                assert!(page
                    .items
                    .iter()
                    .all(|item| item.get("kind").is_none() && item.get("apiVersion").is_none()));
                let image = &page.items[1]["spec"]["containers"][0]["image"];
                let want = if extra.is_empty() { "changed" } else { "i" };
                assert_eq!(image, want, "p1 as of the version listed");
            }
        }
    }
}
