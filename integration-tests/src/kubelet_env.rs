//! What the kubelet does with a container's environment before it starts
//! it, for the settings the manifests take from a ConfigMap: an `env` entry
//! with `valueFrom.configMapKeyRef` gets the ConfigMap's value, and each
//! `$(NAME)` of `command` and `args` naming such a variable is replaced by
//! it (Kubernetes' "dependent environment variables"). References to other
//! variables (the downward API, Service links) are left as they are. Pure.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec};
use serde::Deserialize;

/// The `data` of every ConfigMap of a manifest stream, by name.
pub fn config_maps(stream: &str) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
    let mut maps = BTreeMap::new();
    for (index, document) in serde_yaml::Deserializer::from_str(stream).enumerate() {
        let value = serde_yaml::Value::deserialize(document)
            .with_context(|| format!("document {}: not YAML", index + 1))?;
        if value.get("kind").and_then(|k| k.as_str()) != Some("ConfigMap") {
            continue;
        }
        let map: ConfigMap = serde_yaml::from_value(value)
            .with_context(|| format!("document {}: ConfigMap", index + 1))?;
        let name = map.metadata.name.clone().unwrap_or_default();
        maps.insert(name, map.data.unwrap_or_default());
    }
    Ok(maps)
}

/// Gives every `configMapKeyRef` variable of `spec`'s containers its value
/// from `maps` and expands it in their `command` and `args`. A ConfigMap or
/// key that is missing is an error, as it is for the kubelet (the container
/// is not started).
pub fn resolve_config_map_env(
    spec: &mut PodSpec,
    maps: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<()> {
    for container in &mut spec.containers {
        let mut values = BTreeMap::new();
        for var in container.env.iter_mut().flatten() {
            let Some(key_ref) = var
                .value_from
                .as_ref()
                .and_then(|v| v.config_map_key_ref.as_ref())
            else {
                continue;
            };
            let value = maps
                .get(&key_ref.name)
                .and_then(|data| data.get(&key_ref.key))
                .with_context(|| {
                    format!(
                        "container {}: env {} reads key {} of ConfigMap {}, which is not in the manifests",
                        container.name, var.name, key_ref.key, key_ref.name
                    )
                })?
                .clone();
            values.insert(var.name.clone(), value.clone());
            var.value = Some(value);
            var.value_from = None;
        }
        for list in [container.command.as_mut(), container.args.as_mut()]
            .into_iter()
            .flatten()
        {
            for item in list.iter_mut() {
                *item = expand(item, &values)?;
            }
        }
    }
    Ok(())
}

/// `text` with each `$(NAME)` whose NAME is in `values` replaced; `$$` is a
/// literal `$`, and other references stay as written.
pub fn expand(text: &str, values: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(reference) = after.strip_prefix('(') {
            let Some(end) = reference.find(')') else {
                bail!("{text:?}: $( without a closing )");
            };
            match values.get(&reference[..end]) {
                Some(value) => out.push_str(value),
                None => out.push_str(&rest[at..at + 2 + end + 1]),
            }
            rest = &reference[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> BTreeMap<String, String> {
        [("DNS_DOMAIN".to_owned(), "k8s.example".to_owned())].into()
    }

    #[test]
    fn expands_known_names_and_keeps_the_others() {
        let got = expand("-domain=$(DNS_DOMAIN).", &values()).unwrap();
        assert_eq!(got, "-domain=k8s.example.");
        let got = expand("--id=$(POD_NAME) $(DNS_DOMAIN)", &values()).unwrap();
        assert_eq!(got, "--id=$(POD_NAME) k8s.example");
        assert_eq!(
            expand("a$$(DNS_DOMAIN)", &values()).unwrap(),
            "a$(DNS_DOMAIN)"
        );
        assert_eq!(expand("cost $5", &values()).unwrap(), "cost $5");
        assert!(expand("$(DNS_DOMAIN", &values()).is_err());
    }

    #[test]
    fn config_map_values_reach_env_and_args_and_a_missing_key_is_named() {
        let stream =
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata: {domain: k8s.example}\n";
        let maps = config_maps(stream).unwrap();
        let pod = |key: &str| -> PodSpec {
            serde_yaml::from_str(&format!(
                "containers:\n- name: c\n  args: ['--domain=$(D)']\n  env:\n  - name: D\n    valueFrom:\n      configMapKeyRef: {{name: s, key: {key}}}\n"
            ))
            .unwrap()
        };
        let mut spec = pod("domain");
        resolve_config_map_env(&mut spec, &maps).unwrap();
        let c = &spec.containers[0];
        assert_eq!(
            c.args.as_deref(),
            Some(&["--domain=k8s.example".to_owned()][..])
        );
        let env = &c.env.as_ref().unwrap()[0];
        assert_eq!(env.value.as_deref(), Some("k8s.example"));
        assert!(env.value_from.is_none());

        let err = resolve_config_map_env(&mut pod("nope"), &maps).unwrap_err();
        assert!(
            format!("{err:#}").contains("key nope of ConfigMap s"),
            "{err:#}"
        );
    }
}
