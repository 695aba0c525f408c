//! What the command reads: a raw Corefile, or YAML holding the `coredns`
//! ConfigMap (one document, several, or a `kind: List` as `kubectl get -o
//! yaml` prints it). In YAML, the ConfigMap with `data.Corefile` is the
//! Corefile, and the data keys of every ConfigMap in the input are the
//! files `import` globs match ([`ConfigMapFiles`]).

use crate::corefile::{glob_match, Files, Source};
use serde_yaml::Value;

/// The input, sorted out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A Corefile as it is; imports are files beside it.
    Raw(Source),
    /// The Corefile of a ConfigMap, and the other data keys for imports.
    ConfigMap {
        corefile: Source,
        files: ConfigMapFiles,
    },
}

/// Input that is neither a Corefile nor YAML holding one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Reads `text` (named `label` in messages).
pub fn read(label: &str, text: &str) -> Result<Input, InputError> {
    let docs = match yaml_documents(text) {
        Ok(docs) if docs.iter().any(has_kind) => docs,
        Ok(_) => return Ok(Input::Raw(source(label, text))),
        Err(e) if looks_like_yaml(text) => {
            let line = e.location().map_or(0, |l| l.line());
            return Err(InputError(format!("{label}:{line}: not valid YAML: {e}")));
        }
        Err(_) => return Ok(Input::Raw(source(label, text))),
    };
    let mut maps = Vec::new();
    for doc in &docs {
        match kind(doc) {
            Some("List") => {
                let items = doc.get("items").and_then(Value::as_sequence);
                maps.extend(
                    items
                        .into_iter()
                        .flatten()
                        .filter(|i| kind(i) == Some("ConfigMap")),
                );
            }
            Some("ConfigMap") => maps.push(doc),
            _ => {}
        }
    }
    let mut corefile = None;
    let mut entries = Vec::new();
    for map in maps {
        let name = (map.get("metadata").and_then(|m| m.get("name")))
            .and_then(Value::as_str)
            .unwrap_or("configmap");
        let Some(data) = map.get("data").and_then(Value::as_mapping) else {
            continue;
        };
        for (key, value) in data {
            let (Some(key), Some(value)) = (key.as_str(), value.as_str()) else {
                return Err(InputError(format!(
                    "{label}: data of ConfigMap {name} holds a key or value that is not a string"
                )));
            };
            if key == "Corefile" && corefile.is_none() {
                corefile = Some(source(&format!("{label}[{name}:Corefile]"), value));
                continue;
            }
            entries.push((
                key.to_owned(),
                source(&format!("{label}[{name}:{key}]"), value),
            ));
        }
    }
    match corefile {
        Some(corefile) => Ok(Input::ConfigMap {
            corefile,
            files: ConfigMapFiles { entries },
        }),
        None => Err(InputError(format!(
            "{label}: no ConfigMap in it holds data.Corefile (give the coredns ConfigMap, \
             e.g. kubectl -n kube-system get configmap coredns -o yaml)"
        ))),
    }
}

/// The data keys of the input's ConfigMaps, as files for `import`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigMapFiles {
    entries: Vec<(String, Source)>,
}

impl Files for ConfigMapFiles {
    /// A ConfigMap is mounted as a directory: the glob's last path element
    /// is matched against the data keys, its directories are not looked at
    /// (AKS mounts coredns-custom at /etc/coredns/custom and imports
    /// `custom/*.server`).
    fn glob(&self, pattern: &str) -> Result<Vec<Source>, String> {
        let name = pattern.rsplit('/').next().unwrap_or(pattern);
        let mut found: Vec<&(String, Source)> = (self.entries.iter())
            .filter(|(key, _)| glob_match(name, key))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(found.into_iter().map(|(_, s)| s.clone()).collect())
    }
}

fn source(label: &str, text: &str) -> Source {
    Source {
        label: label.to_owned(),
        text: text.to_owned(),
    }
}

fn yaml_documents(text: &str) -> Result<Vec<Value>, serde_yaml::Error> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(Value::deserialize)
        .collect()
}

fn kind(doc: &Value) -> Option<&str> {
    doc.get("kind").and_then(Value::as_str)
}

fn has_kind(doc: &Value) -> bool {
    kind(doc).is_some()
}

/// A first meaningful line of a Kubernetes object: broken YAML, not a
/// Corefile.
fn looks_like_yaml(text: &str) -> bool {
    let first = (text.lines())
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---");
    first.is_some_and(|l| l.starts_with("apiVersion:") || l.starts_with("kind:"))
}

#[cfg(test)]
mod tests;
