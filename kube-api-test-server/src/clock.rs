//! The server's clock: the current time as the API writes it
//! (`creationTimestamp`) and as Table ages are measured from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

/// The current time, to the second.
pub(crate) fn now_timestamp() -> k8s_openapi::jiff::Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(i64::MAX))
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// The current time in the API's format.
pub(crate) fn now() -> Value {
    serde_json::to_value(Time(now_timestamp())).unwrap_or(Value::Null)
}
