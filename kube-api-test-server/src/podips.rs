//! A Pod's IPs on a dual-stack cluster: the v1 conversion that keeps
//! `status.podIP` and `podIPs` (and `hostIP`, `hostIPs`) in agreement, and the
//! status validation of those lists.

use serde_json::{json, Value};

use super::dualstack::{dual_stack, NOT_AN_IP};
use super::ipalloc::Family;

/// The v1 Pod status conversion: `podIP`/`podIPs` (and `hostIP`/`hostIPs`)
/// agree; `podIP` wins when both are given and differ.
pub(crate) fn convert_pod_ips(pod: &mut Value) {
    let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    for (one, many) in [("podIP", "podIPs"), ("hostIP", "hostIPs")] {
        let single = status
            .get(one)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let first = status
            .get(many)
            .and_then(|v| v.get(0))
            .and_then(|v| v["ip"].as_str())
            .map(str::to_string);
        match (single, first) {
            (Some(ip), Some(first)) if ip == first => {}
            (Some(ip), _) => {
                status.insert(many.into(), json!([{ "ip": ip }]));
            }
            (None, Some(first)) => {
                status.insert(one.into(), json!(first));
            }
            (None, None) => {}
        }
    }
}

/// `validatePodIPs` (and its `hostIPs` twin) of the Pod status validation.
pub(crate) fn validate_pod_ips(pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (many, type_name) in [("podIPs", "PodIP"), ("hostIPs", "HostIP")] {
        let ips: Vec<String> = pod["status"][many]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v["ip"].as_str().unwrap_or_default().to_string())
            .collect();
        for (i, ip) in ips.iter().enumerate() {
            if Family::of(ip).is_none() {
                errors.push(format!(
                    "status.{many}[{i}]: Invalid value: {ip:?}: {NOT_AN_IP}"
                ));
            }
        }
        if ips.len() > 1 && (!dual_stack(&ips) || ips.len() > 2) {
            let shown: Vec<String> = ips
                .iter()
                .map(|ip| format!("core.{type_name}{{IP:{ip:?}}}"))
                .collect();
            errors.push(format!(
                "status.{many}: Invalid value: []core.{type_name}{{{}}}: may specify no more than one IP for each IP family",
                shown.join(", ")
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_ips_follow_pod_ip() {
        let mut pod = json!({ "status": { "podIP": "10.1.0.1" } });
        convert_pod_ips(&mut pod);
        assert_eq!(pod["status"]["podIPs"], json!([{ "ip": "10.1.0.1" }]));
        let mut pod =
            json!({ "status": { "podIPs": [{ "ip": "fd00::1" }, { "ip": "10.1.0.1" }] } });
        convert_pod_ips(&mut pod);
        assert_eq!(pod["status"]["podIP"], "fd00::1");
        assert!(validate_pod_ips(&pod).is_empty());
        let mut pod = json!({ "status": { "podIP": "10.1.0.2",
            "podIPs": [{ "ip": "10.1.0.1" }, { "ip": "fd00::1" }] } });
        convert_pod_ips(&mut pod);
        assert_eq!(pod["status"]["podIPs"], json!([{ "ip": "10.1.0.2" }]));
        let two_v4 =
            json!({ "status": { "podIPs": [{ "ip": "10.1.0.1" }, { "ip": "10.1.0.2" }] } });
        assert_eq!(validate_pod_ips(&two_v4).len(), 1);
        let junk = json!({ "status": { "podIPs": [{ "ip": "nope" }] } });
        assert_eq!(validate_pod_ips(&junk).len(), 1);
    }
}
