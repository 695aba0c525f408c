//! Seeding the store from a file of objects, as `kubectl create -f` takes it
//! (multi-document YAML or JSON, `kind: List` too): objects take the normal
//! create path but keep their `status`, and missing namespaces are created
//! first.

use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value};

use super::history::Key;
use super::resource::{ResourceKind, Served};
use super::store::Store;

/// Errors while reading or applying a seed.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The file could not be read.
    #[error("reading seed file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A document is not valid YAML/JSON.
    #[error("parsing seed document {index}: {source}")]
    Parse {
        /// 1-based document number.
        index: usize,
        /// Why.
        source: serde_yaml::Error,
    },
    /// An object was rejected by the store.
    #[error("seed object {what}: {reason}")]
    Rejected {
        /// `Kind namespace/name`.
        what: String,
        /// The API error text.
        reason: String,
    },
}

/// Parses every object in a (multi-document) YAML or JSON text.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, SeedError> {
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|source| SeedError::Parse {
            index: i + 1,
            source,
        })?;
        flatten(value, &mut objects);
    }
    Ok(objects)
}

fn flatten(value: Value, out: &mut Vec<Value>) {
    match value {
        Value::Null => {}
        Value::Object(ref m)
            if m.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List")) =>
        {
            if let Some(items) = m.get("items").and_then(Value::as_array) {
                for item in items {
                    flatten(item.clone(), out);
                }
            }
        }
        other => out.push(other),
    }
}

/// Reads and parses a seed file.
pub fn load_file(path: &Path) -> Result<Vec<Value>, SeedError> {
    let text = std::fs::read_to_string(path).map_err(|source| SeedError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_documents(&text)
}

fn describe(obj: &Value) -> String {
    let m = &obj["metadata"];
    format!(
        "{} {}/{}",
        obj["kind"].as_str().unwrap_or("<no kind>"),
        m["namespace"].as_str().unwrap_or("default"),
        m["name"].as_str().unwrap_or("<no name>")
    )
}

/// Creates every object in `store` (keeping given status); a kind not
/// `served` is refused.
pub(crate) fn apply(store: &Store, objects: &[Value], served: Served) -> Result<(), SeedError> {
    for obj in objects {
        let rejected = |reason: String| SeedError::Rejected {
            what: describe(obj),
            reason,
        };
        let kind = obj["kind"]
            .as_str()
            .and_then(ResourceKind::from_kind)
            .filter(|k| served.serves(*k))
            .ok_or_else(|| {
                let kinds: Vec<&str> = served.kinds().map(ResourceKind::kind).collect();
                rejected(format!("unsupported kind (served: {})", kinds.join(", ")))
            })?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if kind == ResourceKind::Namespace {
            let key = Key {
                kind,
                namespace: String::new(),
                name: name.to_string(),
            };
            if store.get(&key).is_ok() {
                continue;
            }
        } else {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
            ensure_namespace(store, ns).map_err(|e| rejected(e.to_string()))?;
        }
        store
            .create(kind, None, obj.clone(), true)
            .map_err(|e| rejected(e.to_string()))?;
    }
    Ok(())
}

fn ensure_namespace(store: &Store, ns: &str) -> Result<(), super::status::ApiError> {
    let key = Key {
        kind: ResourceKind::Namespace,
        namespace: String::new(),
        name: ns.to_string(),
    };
    if store.get(&key).is_err() {
        store.create(
            ResourceKind::Namespace,
            None,
            json!({ "metadata": { "name": ns } }),
            false,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multi_document_yaml_and_lists() {
        let text = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n---\n{\"kind\": \"List\", \"items\": [{\"kind\": \"Pod\"}, {\"kind\": \"Pod\"}]}\n";
        let objs = parse_documents(text).unwrap();
        assert_eq!(objs.len(), 3);
        assert_eq!(objs[0]["metadata"]["name"], "a");
    }
}
