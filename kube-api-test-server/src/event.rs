//! Event (`events.k8s.io/v1`) rules: of kube-apiserver's strict validation of
//! events, only the field every client must get right: `eventTime` is required
//! on create and immutable after.

use serde_json::Value;

/// The field errors of `event` (`old`: its stored state, on update).
pub(crate) fn validate(event: &Value, old: Option<&Value>) -> Vec<String> {
    let time = &event["eventTime"];
    match old {
        None if time.is_null() => vec!["eventTime: Required value".into()],
        Some(old) if old["eventTime"] != *time => {
            vec![format!(
                "eventTime: Invalid value: {time}: field is immutable"
            )]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_time_is_required_and_immutable() {
        let event = json!({ "eventTime": "2025-01-01T00:00:00.000000Z", "reason": "Started" });
        assert!(validate(&event, None).is_empty());
        assert!(validate(&event, Some(&event)).is_empty());
        assert_eq!(
            validate(&json!({ "reason": "Started" }), None),
            ["eventTime: Required value"]
        );
        let moved = json!({ "eventTime": "2025-01-02T00:00:00.000000Z" });
        assert_eq!(
            validate(&moved, Some(&event)),
            ["eventTime: Invalid value: \"2025-01-02T00:00:00.000000Z\": field is immutable"]
        );
    }
}
