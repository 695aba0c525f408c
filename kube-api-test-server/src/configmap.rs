//! ConfigMap (core/v1) rules: the validation kube-apiserver applies on create
//! and update (`ValidateConfigMap`, `ValidateConfigMapUpdate`): valid and
//! distinct keys, at most 1 MiB of values, and no change once `immutable:
//! true`.

use serde_json::{json, Value};

/// The most `data` and `binaryData` may hold together (`core.MaxSecretSize`).
const MAX_SIZE: usize = 1024 * 1024;
const KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const FROZEN: &str = "Forbidden: field is immutable when `immutable` is set";

/// The field errors of `cm` (`old`: its stored state, on update).
pub(crate) fn validate(cm: &Value, old: Option<&Value>) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(old) = old.filter(|o| o["immutable"] == json!(true)) {
        if cm["immutable"] != json!(true) {
            errors.push(format!("immutable: {FROZEN}"));
        }
        for field in ["data", "binaryData"] {
            if cm.get(field) != old.get(field) {
                errors.push(format!("{field}: {FROZEN}"));
            }
        }
    }
    let data = cm["data"].as_object();
    let binary = cm["binaryData"].as_object();
    let mut size = 0;
    for (key, value) in data.into_iter().flatten() {
        errors.extend(key_errors("data", key));
        if binary.is_some_and(|b| b.contains_key(key)) {
            errors.push(format!(
                "data[{key}]: Invalid value: {key:?}: duplicate of key present in binaryData"
            ));
        }
        size += value.as_str().map_or(0, str::len);
    }
    for (key, value) in binary.into_iter().flatten() {
        errors.extend(key_errors("binaryData", key));
        size += value.as_str().map_or(0, base64_len);
    }
    if size > MAX_SIZE {
        errors.push(format!(": Too long: may not be more than {MAX_SIZE} bytes"));
    }
    errors
}

/// `IsConfigMapKey`'s complaints about `key`, as field errors under `field`.
fn key_errors(field: &str, key: &str) -> Vec<String> {
    let mut why = Vec::new();
    if key.len() > 253 {
        why.push("must be no more than 253 characters");
    }
    let charset = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
    if key.is_empty() || !key.bytes().all(charset) {
        why.push(KEY);
    }
    match key {
        "." => why.push("must not be '.'"),
        ".." => why.push("must not be '..'"),
        _ if key.starts_with("..") => why.push("must not start with '..'"),
        _ => {}
    }
    why.into_iter()
        .map(|w| format!("{field}[{key}]: Invalid value: {key:?}: {w}"))
        .collect()
}

/// The number of bytes a (padded) base64 text decodes to.
fn base64_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count();
    (text.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_size_and_immutability() {
        let ok = json!({ "data": { "stubDomains": "{}", "a.b_c-1": "" }, "binaryData": { "bin": "AAE=" } });
        assert!(validate(&ok, None).is_empty());
        let bad =
            json!({ "data": { "a b": "", "..x": "", "dup": "" }, "binaryData": { "dup": "" } });
        let mut errors = validate(&bad, None);
        errors.sort();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].starts_with("data[..x]: Invalid value: \"..x\": must not start with '..'")
        );
        assert!(errors[1].starts_with("data[a b]: Invalid value: \"a b\": a valid config key"));
        assert!(errors[2].ends_with("duplicate of key present in binaryData"));
        let big = json!({ "data": { "a": "x".repeat(MAX_SIZE), "b": "x" } });
        assert_eq!(
            validate(&big, None),
            [": Too long: may not be more than 1048576 bytes"]
        );
        assert_eq!(base64_len("AAE="), 2);

        let frozen = json!({ "immutable": true, "data": { "a": "1" } });
        assert!(validate(&frozen, Some(&frozen)).is_empty());
        let thawed = json!({ "data": { "a": "2" } });
        assert_eq!(
            validate(&thawed, Some(&frozen)),
            [
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
        // A mutable one changes freely, and may be frozen.
        assert!(validate(&frozen, Some(&thawed)).is_empty());
    }
}
