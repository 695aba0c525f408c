//! PATCH support: JSON merge patch (RFC 7386), also applied for strategic merge
//! patch (lists are replaced); JSON patch and server-side apply get 415. The
//! patched object takes the normal update path.

use bytes::Bytes;
use serde_json::Value;

use super::history::Key;
use super::status::ApiError;
use super::store::Store;

/// Applies an RFC 7386 merge patch to `target` in place.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (k, v) in patch_map {
            if v.is_null() {
                target_map.remove(k);
            } else {
                merge(target_map.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Handles a PATCH of `key` (or of its status with `status_only`).
pub(crate) fn patch(
    store: &Store,
    key: &Key,
    content_type: &str,
    body: &Bytes,
    status_only: bool,
) -> Result<Value, ApiError> {
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !matches!(
        media,
        "application/merge-patch+json" | "application/strategic-merge-patch+json"
    ) {
        return Err(ApiError::unsupported_media_type(
            content_type,
            "application/merge-patch+json, application/strategic-merge-patch+json",
        ));
    }
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let pins_version = patch["metadata"]["resourceVersion"].is_string();
    let mut attempts = 0;
    loop {
        let mut obj = store.get(key)?;
        merge(&mut obj, &patch);
        match store.update(key, obj, status_only) {
            Ok((obj, _)) => return Ok(obj),
            Err(e) if e.code == 409 && !pins_version && attempts < 5 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge(&mut doc, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
    }
}
