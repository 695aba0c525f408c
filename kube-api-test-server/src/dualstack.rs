//! Dual-stack Services: cluster IPs and IP families, set and checked as
//! kube-apiserver's Service REST does it (`NormalizeClusterIPs`,
//! `PatchAllocatedValues`, `ValidateServiceClusterIPsRelatedFields`, the update
//! rules), in what clients observe. IPs come from the [`IpAllocator`]; Pods'
//! IPs are `podips.rs`'s.

use serde_json::{json, Map, Value};

use super::ipalloc::{Family, IpAllocator};
use super::status::ApiError;

const SINGLE: &str = "SingleStack";
const PREFER: &str = "PreferDualStack";
const REQUIRE: &str = "RequireDualStack";
const NONE: &str = "None";
pub(crate) const NOT_AN_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// The four linked IP fields of a Service spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ips {
    cluster_ip: String,
    cluster_ips: Vec<String>,
    families: Vec<String>,
    policy: Option<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// A string list as Go's `%#v` prints it in field errors.
fn go_strings(items: &[String], type_name: &str) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("{type_name}{{{}}}", quoted.join(", "))
}

impl Ips {
    fn read(spec: &Value) -> Self {
        Self {
            cluster_ip: spec["clusterIP"].as_str().unwrap_or_default().to_string(),
            cluster_ips: strings(&spec["clusterIPs"]),
            families: strings(&spec["ipFamilies"]),
            policy: spec["ipFamilyPolicy"].as_str().map(str::to_string),
        }
    }

    fn write(&self, spec: &mut Value) {
        spec["clusterIP"] = json!(self.cluster_ip);
        spec["clusterIPs"] = json!(self.cluster_ips);
        spec["ipFamilies"] = json!(self.families);
        spec["ipFamilyPolicy"] = json!(self.policy);
    }

    fn policy(&self) -> &str {
        self.policy.as_deref().unwrap_or(SINGLE)
    }

    fn ip_list(&self) -> String {
        go_strings(&self.cluster_ips, "[]string")
    }
}

/// Whether a Service has cluster IPs at all (every type but ExternalName).
pub(crate) fn needs_cluster_ip(svc: &Value) -> bool {
    svc["spec"]["type"].as_str() != Some("ExternalName")
}

fn selectorless(svc: &Value) -> bool {
    svc["spec"]["selector"]
        .as_object()
        .is_none_or(Map::is_empty)
}

fn invalid(name: &str, errors: &[String]) -> ApiError {
    ApiError::invalid_fields("Service", "services", name, errors)
}

/// An ExternalName Service has no cluster IP and no IP families.
fn clear(spec: &mut Value) {
    if let Some(spec) = spec.as_object_mut() {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            spec.remove(field);
        }
    }
}

/// Fills in, checks and allocates the IP fields of a Service being created.
pub(crate) fn create_service(
    pool: &mut IpAllocator,
    name: &str,
    svc: &mut Value,
) -> Result<(), ApiError> {
    if !needs_cluster_ip(svc) {
        clear(&mut svc["spec"]);
        return Ok(());
    }
    let mut ips = Ips::read(&svc["spec"]);
    if !ips.cluster_ip.is_empty() && ips.cluster_ips.is_empty() {
        ips.cluster_ips = vec![ips.cluster_ip.clone()];
    }
    init_families(&mut ips, None, selectorless(svc)).map_err(|e| invalid(name, &e))?;
    allocate(pool, &mut ips, &[]).map_err(|e| invalid(name, &[e]))?;
    ips.write(&mut svc["spec"]);
    Ok(())
}

/// Carries the IP fields of `old` through an update to `svc` (a PUT, or
/// the PUT a patch makes), allocating and freeing what changed.
pub(crate) fn update_service(
    pool: &mut IpAllocator,
    name: &str,
    old: &Value,
    svc: &mut Value,
) -> Result<(), ApiError> {
    match (needs_cluster_ip(old), needs_cluster_ip(svc)) {
        (false, _) => return create_service(pool, name, svc),
        (true, false) => return to_external_name(pool, name, old, svc),
        (true, true) => {}
    }
    let before = Ips::read(&old["spec"]);
    let mut ips = Ips::read(&svc["spec"]);
    // What the client left out stays (PatchAllocatedValues); a changed
    // `clusterIP` with `clusterIPs` untouched replaces them
    // (NormalizeClusterIPs), for validation to judge.
    if ips.cluster_ip.is_empty() {
        ips.cluster_ip.clone_from(&before.cluster_ip);
    }
    if ips.cluster_ips.is_empty() {
        ips.cluster_ips.clone_from(&before.cluster_ips);
    }
    if ips.cluster_ip != before.cluster_ip && ips.cluster_ips == before.cluster_ips {
        ips.cluster_ips = vec![ips.cluster_ip.clone()];
    }
    init_families(&mut ips, Some(&before), selectorless(svc)).map_err(|e| invalid(name, &e))?;
    let changed = immutable(&before, &ips);
    if !changed.is_empty() {
        return Err(invalid(name, &changed));
    }
    if before.cluster_ips.first().map(String::as_str) != Some(NONE) {
        allocate(pool, &mut ips, &before.cluster_ips).map_err(|e| invalid(name, &[e]))?;
        for dropped in before.cluster_ips.iter().skip(ips.cluster_ips.len()) {
            pool.release(dropped);
        }
    }
    ips.write(&mut svc["spec"]);
    Ok(())
}

/// A Service turning ExternalName loses its IPs (unless the client asked
/// for different ones, which is invalid).
fn to_external_name(
    pool: &mut IpAllocator,
    name: &str,
    old: &Value,
    svc: &mut Value,
) -> Result<(), ApiError> {
    let (before, ips) = (Ips::read(&old["spec"]), Ips::read(&svc["spec"]));
    let asked = (!ips.cluster_ip.is_empty() && ips.cluster_ip != before.cluster_ip)
        || (!ips.cluster_ips.is_empty() && ips.cluster_ips != before.cluster_ips);
    if asked {
        return Err(invalid(
            name,
            &["spec.clusterIPs: Invalid value: must be empty for type ExternalName".into()],
        ));
    }
    clear(&mut svc["spec"]);
    release_service(pool, old);
    Ok(())
}

/// Frees the cluster IPs a Service holds.
pub(crate) fn release_service(pool: &mut IpAllocator, svc: &Value) {
    let ips = Ips::read(&svc["spec"]);
    if ips.cluster_ips.is_empty() {
        pool.release(&ips.cluster_ip);
    }
    for ip in &ips.cluster_ips {
        pool.release(ip);
    }
}

/// Defaults the policy and the families (`initIPFamilyFields`), after the
/// loose validation of the four fields.
fn init_families(
    ips: &mut Ips,
    before: Option<&Ips>,
    selectorless: bool,
) -> Result<(), Vec<String>> {
    if ips.policy.is_none() {
        ips.policy = Some(match before.and_then(|b| b.policy.clone()) {
            Some(policy) => policy,
            None if ips.cluster_ip == NONE && selectorless => REQUIRE.into(),
            None => SINGLE.into(),
        });
    }
    let errors = validate_fields(ips);
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut errors = Vec::new();
    let policy = format!("spec.ipFamilyPolicy: Invalid value: {:?}", ips.policy());
    if let Some(before) = before {
        if ips.policy() == SINGLE {
            // Dropping to single-stack with the lists untouched drops the
            // secondary.
            if ips.cluster_ips == before.cluster_ips {
                ips.cluster_ips.truncate(1);
            }
            if ips.families == before.families {
                ips.families.truncate(1);
            }
        } else {
            let reduced = |new: &[String], old: &[String]| !new.is_empty() && new.len() < old.len();
            if reduced(&ips.cluster_ips, &before.cluster_ips) {
                errors.push(format!(
                    "{policy}: must be 'SingleStack' to release the secondary cluster IP"
                ));
            }
            if reduced(&ips.families, &before.families) {
                errors.push(format!(
                    "{policy}: must be 'SingleStack' to release the secondary IP family"
                ));
            }
        }
    }
    if ips.policy() == SINGLE && ips.cluster_ips.len() == 2 {
        errors.push(format!("{policy}: must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"));
    }
    if ips.policy() == SINGLE && ips.families.len() == 2 {
        errors.push(format!("{policy}: must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Families follow the IPs given; both families are configured here.
    for ip in ips.cluster_ips.iter().skip(ips.families.len()) {
        match Family::of(ip) {
            Some(family) => ips.families.push(family.name().into()),
            None => break,
        }
    }
    if ips.families.is_empty() {
        ips.families.push(Family::V4.name().into());
    }
    if ips.policy() != SINGLE && ips.families.len() == 1 {
        let first = Family::from_name(&ips.families[0]).unwrap_or(Family::V4);
        ips.families.push(first.other().name().into());
    }
    Ok(())
}

/// `ValidateServiceClusterIPsRelatedFields`, for a type with cluster IPs.
fn validate_fields(ips: &Ips) -> Vec<String> {
    let mut errors = Vec::new();
    let list = ips.ip_list();
    match ips.cluster_ips.first() {
        None if !ips.cluster_ip.is_empty() => errors.push("spec.clusterIPs: Required value".into()),
        Some(first) if !ips.cluster_ip.is_empty() && *first != ips.cluster_ip => errors.push(format!(
            "spec.clusterIPs: Invalid value: {list}: first value must match `clusterIP`"
        )),
        Some(_) if ips.cluster_ip.is_empty() => errors.push(format!(
            "spec.clusterIPs: Invalid value: {list}: must be empty when `clusterIP` is not specified"
        )),
        _ => {}
    }
    for (i, family) in ips.families.iter().enumerate() {
        if Family::from_name(family).is_none() {
            errors.push(format!(
                "spec.ipFamilies[{i}]: Unsupported value: {family:?}: supported values: \"IPv4\", \"IPv6\""
            ));
        }
        if ips.families[..i].contains(family) {
            errors.push(format!("spec.ipFamilies[{i}]: Duplicate value: {family:?}"));
        }
    }
    if let Some(policy) = ips
        .policy
        .as_deref()
        .filter(|p| ![SINGLE, PREFER, REQUIRE].contains(p))
    {
        errors.push(format!(
            "spec.ipFamilyPolicy: Unsupported value: {policy:?}: supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""
        ));
    }
    let mut bad_ips = false;
    for (i, ip) in ips.cluster_ips.iter().enumerate() {
        if i == 0 && ip == NONE {
            if ips.cluster_ips.len() > 1 {
                bad_ips = true;
                errors.push(format!("spec.clusterIPs: Invalid value: {list}: 'None' must be the first and only value"));
            }
        } else if Family::of(ip).is_none() {
            bad_ips = true;
            errors.push(format!(
                "spec.clusterIPs[{i}]: Invalid value: {ip:?}: {NOT_AN_IP}"
            ));
        }
    }
    if ips.cluster_ips.len() > 2 {
        errors.push(format!(
            "spec.clusterIPs: Invalid value: {list}: may only hold up to 2 values"
        ));
    }
    if bad_ips {
        return errors;
    }
    if ips.cluster_ips.len() > 1 && !dual_stack(&ips.cluster_ips) {
        errors.push(format!(
            "spec.clusterIPs: Invalid value: {list}: may specify no more than one IP for each IP family"
        ));
    }
    if ips.cluster_ips != [NONE] {
        for (i, (ip, family)) in ips.cluster_ips.iter().zip(&ips.families).enumerate() {
            match (Family::of(ip), Family::from_name(family)) {
                (Some(got), Some(want)) if got != want => errors.push(format!(
                    "spec.clusterIPs[{i}]: Invalid value: {ip:?}: expected an {family} value as indicated by `ipFamilies[{i}]`"
                )),
                _ => {}
            }
        }
    }
    errors
}

/// Whether the IPs hold both families (Go's `IsDualStackIPStrings`).
pub(crate) fn dual_stack(ips: &[String]) -> bool {
    let families: Vec<Option<Family>> = ips.iter().map(|ip| Family::of(ip)).collect();
    families.contains(&Some(Family::V4)) && families.contains(&Some(Family::V6))
}

/// Set IPs and families may not change on update (more may be added).
fn immutable(before: &Ips, ips: &Ips) -> Vec<String> {
    let mut errors = Vec::new();
    for (i, (old, new)) in before.cluster_ips.iter().zip(&ips.cluster_ips).enumerate() {
        if old != new {
            errors.push(format!(
                "spec.clusterIPs[{i}]: Invalid value: {}: may not change once set",
                ips.ip_list()
            ));
        }
    }
    for (i, (old, new)) in before.families.iter().zip(&ips.families).enumerate() {
        if old != new {
            errors.push(format!(
                "spec.ipFamilies[{i}]: Invalid value: {}: may not change once set",
                go_strings(&ips.families, "[]core.IPFamily")
            ));
        }
    }
    errors
}

/// Gives each family its IP: `held` ones (the Service's own, on update)
/// stay, missing ones are allocated, given ones reserved. On failure
/// nothing stays taken.
fn allocate(pool: &mut IpAllocator, ips: &mut Ips, held: &[String]) -> Result<(), String> {
    if ips.cluster_ips.first().map(String::as_str) == Some(NONE) {
        return Ok(());
    }
    let mut taken: Vec<String> = Vec::new();
    for (i, family) in ips.families.iter().enumerate() {
        let family = Family::from_name(family).unwrap_or(Family::V4);
        if i >= ips.cluster_ips.len() {
            ips.cluster_ips.push(String::new());
        }
        let ip = ips.cluster_ips[i].clone();
        if !ip.is_empty() && held.get(i) == Some(&ip) {
            continue;
        }
        let got = if ip.is_empty() {
            pool.allocate(family).ok_or_else(|| {
                "spec.clusterIPs: Internal error: failed to allocate a serviceIP: range is full"
                    .to_string()
            })
        } else {
            pool.reserve(&ip).map(|()| ip)
        };
        match got {
            Ok(ip) => {
                taken.push(ip.clone());
                ips.cluster_ips[i] = ip;
            }
            Err(e) => {
                for ip in &taken {
                    pool.release(ip);
                }
                return Err(e);
            }
        }
    }
    ips.cluster_ip.clone_from(&ips.cluster_ips[0]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> IpAllocator {
        IpAllocator::new("10.0.0.0/24".parse().unwrap())
    }

    fn create(pool: &mut IpAllocator, spec: Value) -> Result<Value, ApiError> {
        let mut svc = json!({ "spec": spec });
        create_service(pool, "s", &mut svc).map(|()| svc["spec"].clone())
    }

    #[test]
    fn single_stack_defaults_and_dual_stack_allocation() {
        let mut p = pool();
        let spec = create(&mut p, json!({ "selector": { "a": "b" } })).unwrap();
        assert_eq!(spec["clusterIPs"], json!(["10.0.0.1"]));
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        let spec = create(&mut p, json!({ "ipFamilyPolicy": "PreferDualStack" })).unwrap();
        assert_eq!(spec["clusterIPs"], json!(["10.0.0.2", "fd00:10:96::1"]));
        assert_eq!(spec["ipFamilies"], json!(["IPv4", "IPv6"]));
        let spec = create(&mut p, json!({ "ipFamilies": ["IPv6"] })).unwrap();
        assert_eq!(spec["clusterIP"], "fd00:10:96::2");
        let spec = create(&mut p, json!({ "clusterIP": "None" })).unwrap();
        assert_eq!(spec["clusterIPs"], json!(["None"]));
        assert_eq!(spec["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(spec["ipFamilies"], json!(["IPv4", "IPv6"]));
    }

    #[test]
    fn given_ips_are_checked_and_families_follow_them() {
        let mut p = pool();
        let spec = create(
            &mut p,
            json!({ "clusterIP": "2001:db8::5", "clusterIPs": ["2001:db8::5", "10.0.0.9"],
                    "ipFamilyPolicy": "RequireDualStack" }),
        )
        .unwrap();
        assert_eq!(spec["ipFamilies"], json!(["IPv6", "IPv4"]));
        for bad in [
            json!({ "clusterIPs": ["10.0.0.3"] }),
            json!({ "clusterIP": "10.0.0.3", "clusterIPs": ["10.0.0.4"] }),
            json!({ "clusterIP": "10.0.0.3", "clusterIPs": ["10.0.0.3", "10.0.0.4"],
                    "ipFamilyPolicy": "RequireDualStack" }),
            json!({ "clusterIP": "10.0.0.3", "clusterIPs": ["10.0.0.3", "fd00::3"] }),
            json!({ "clusterIP": "10.0.0.3", "ipFamilies": ["IPv6"] }),
            json!({ "ipFamilyPolicy": "Sometimes" }),
            json!({ "clusterIP": "2001:db8::5" }),
        ] {
            let err = create(&mut p, bad.clone()).unwrap_err();
            assert_eq!(err.code, 422, "{bad}: {err}");
        }
        // A dual-stack create failing on its second IP gives the first back.
        let half = json!({ "clusterIP": "10.0.0.4", "clusterIPs": ["10.0.0.4", "2001:db8::5"],
                           "ipFamilyPolicy": "RequireDualStack" });
        assert!(create(&mut p, half)
            .unwrap_err()
            .message
            .contains("already allocated"));
        p.reserve("10.0.0.4").unwrap();
    }

    #[test]
    fn updates_keep_ips_and_move_between_single_and_dual_stack() {
        let mut p = pool();
        let old = json!({ "spec": create(&mut p, json!({})).unwrap() });
        let mut svc = json!({ "spec": { "ipFamilyPolicy": "PreferDualStack" } });
        update_service(&mut p, "s", &old, &mut svc).unwrap();
        assert_eq!(
            svc["spec"]["clusterIPs"],
            json!(["10.0.0.1", "fd00:10:96::1"])
        );
        let dual = svc.clone();
        let mut svc = json!({ "spec": { "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"] } });
        let err = update_service(&mut p, "s", &dual, &mut svc).unwrap_err();
        assert!(err.message.contains("must be 'SingleStack'"), "{err}");
        let mut svc = dual.clone();
        svc["spec"]["ipFamilyPolicy"] = json!("SingleStack");
        update_service(&mut p, "s", &dual, &mut svc).unwrap();
        assert_eq!(svc["spec"]["clusterIPs"], json!(["10.0.0.1"]));
        assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(p.allocate(Family::V6).as_deref(), Some("fd00:10:96::1"));
        let mut moved = json!({ "spec": { "clusterIP": "10.0.0.7" } });
        let err = update_service(&mut p, "s", &old, &mut moved).unwrap_err();
        assert!(err.message.contains("may not change once set"), "{err}");
    }
}
