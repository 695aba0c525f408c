//! Label and field selectors for list and watch: `labelSelector` and
//! `fieldSelector` parsed and matched against stored objects. Field selectors
//! are limited to the field labels the real server supports for each kind
//! ([`field_labels`]).

use serde_json::Value;

use super::resource::ResourceKind;
use super::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector plus field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selector {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
}

impl Selector {
    /// Parses the two query parameters (either may be absent or empty) for
    /// a list or watch of `kind`.
    pub(crate) fn parse(
        kind: ResourceKind,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        let labels = parse_terms(label_selector.unwrap_or_default(), true)
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = parse_terms(field_selector.unwrap_or_default(), false)
            .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
        for field in &fields {
            let label = field.key();
            if !field_labels(kind).contains(&label) {
                return Err(ApiError::bad_request(unsupported_field(kind, label)));
            }
        }
        Ok(Self { labels, fields })
    }

    /// Whether the selector has no requirements (matches everything).
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether `obj` satisfies every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = &obj["metadata"]["labels"];
        let label = |k: &str| labels.get(k).and_then(Value::as_str).map(str::to_string);
        let field = |path: &str| field_value(obj, path);
        self.labels.iter().all(|r| eval(r, label)) && self.fields.iter().all(|r| eval(r, field))
    }
}

impl Requirement {
    fn key(&self) -> &str {
        match self {
            Self::Equals(k, _)
            | Self::NotEquals(k, _)
            | Self::Exists(k)
            | Self::NotExists(k)
            | Self::In(k, _)
            | Self::NotIn(k, _) => k,
        }
    }
}

/// kube-apiserver's refusal of field label `label` for `kind`: the kinds
/// with field label conversions of their own (core's Pod, Service,
/// Namespace; events.k8s.io's Event) say "not supported", the rest
/// answer with the default conversion's words.
fn unsupported_field(kind: ResourceKind, label: &str) -> String {
    match kind {
        ResourceKind::Pod
        | ResourceKind::Service
        | ResourceKind::Namespace
        | ResourceKind::Event => {
            format!("field label not supported: {label}")
        }
        ResourceKind::Endpoints
        | ResourceKind::ConfigMap
        | ResourceKind::Lease
        | ResourceKind::EndpointSlice => format!(
            r#""{label}" is not a known field selector: only "metadata.name", "metadata.namespace""#
        ),
    }
}

/// The field labels kube-apiserver accepts in a field selector for `kind`.
pub(crate) fn field_labels(kind: ResourceKind) -> &'static [&'static str] {
    match kind {
        ResourceKind::Pod => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ResourceKind::Service => &[
            "metadata.name",
            "metadata.namespace",
            "spec.clusterIP",
            "spec.type",
        ],
        ResourceKind::Namespace => &["metadata.name", "metadata.namespace", "status.phase"],
        // events.k8s.io's names for core/v1's `involvedObject.*`, `reason`,
        // `reportingComponent` and `type` (its conversion); core/v1's own
        // names and `source` are 400s there (kube-apiserver 1.36).
        ResourceKind::Event => &[
            "metadata.name",
            "metadata.namespace",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        ResourceKind::Endpoints
        | ResourceKind::ConfigMap
        | ResourceKind::Lease
        | ResourceKind::EndpointSlice => &["metadata.name", "metadata.namespace"],
    }
}

fn eval(req: &Requirement, lookup: impl Fn(&str) -> Option<String>) -> bool {
    match req {
        Requirement::Equals(k, v) => lookup(k).as_deref() == Some(v.as_str()),
        Requirement::NotEquals(k, v) => lookup(k).as_deref() != Some(v.as_str()),
        Requirement::Exists(k) => lookup(k).is_some(),
        Requirement::NotExists(k) => lookup(k).is_none(),
        Requirement::In(k, vs) => lookup(k).is_some_and(|v| vs.contains(&v)),
        Requirement::NotIn(k, vs) => lookup(k).is_none_or(|v| !vs.contains(&v)),
    }
}

/// Resolves a dotted field path to its string form; missing fields read as
/// their Go zero value ("", or "false" for the one boolean label).
fn field_value(obj: &Value, path: &str) -> Option<String> {
    if path == "spec.hostNetwork" {
        let on = obj["spec"]["hostNetwork"].as_bool().unwrap_or(false);
        return Some(on.to_string());
    }
    let mut cur = obj;
    for part in path.split('.') {
        cur = match cur.get(part) {
            Some(v) => v,
            None => return Some(String::new()),
        };
    }
    Some(match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_terms(s: &str, set_based: bool) -> Result<Vec<Requirement>, String> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    split_terms(s)
        .into_iter()
        .map(|t| parse_term(t.trim(), set_based))
        .collect()
}

fn parse_term(t: &str, set_based: bool) -> Result<Requirement, String> {
    let key = |k: &str| -> Result<String, String> {
        let k = k.trim();
        if k.is_empty() || k.contains(char::is_whitespace) {
            Err(format!("invalid key in {t:?}"))
        } else {
            Ok(k.to_string())
        }
    };
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, v.trim().to_string()));
    }
    if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
        return Ok(Requirement::Equals(key(k)?, v.trim().to_string()));
    }
    if !set_based {
        return Err(format!("invalid selector: '{t}'; can't understand '{t}'"));
    }
    for (op, negate) in [(" notin ", true), (" in ", false)] {
        if let Some((k, rest)) = t.split_once(op) {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("expected parenthesised values in {t:?}"))?;
            let values = inner.split(',').map(|v| v.trim().to_string()).collect();
            return Ok(if negate {
                Requirement::NotIn(key(k)?, values)
            } else {
                Requirement::In(key(k)?, values)
            });
        }
    }
    match t.strip_prefix('!') {
        Some(k) => Ok(Requirement::NotExists(key(k)?)),
        None => Ok(Requirement::Exists(key(t)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "fe"}},
               "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selectors() {
        let m =
            |l: &str| Selector::parse(ResourceKind::Pod, Some(l), None).map(|s| s.matches(&obj()));
        assert_eq!(m("app=web"), Ok(true));
        assert_eq!(m("app==web,tier!=be"), Ok(true));
        assert_eq!(m("app in (web, api),tier"), Ok(true));
        assert_eq!(m("app notin (web)"), Ok(false));
        assert_eq!(m("!missing"), Ok(true));
        assert_eq!(m("missing"), Ok(false));
    }

    #[test]
    fn field_selectors() {
        let m =
            |f: &str| Selector::parse(ResourceKind::Pod, None, Some(f)).map(|s| s.matches(&obj()));
        assert_eq!(m("metadata.name=web"), Ok(true));
        assert_eq!(m("metadata.name=other"), Ok(false));
        assert_eq!(
            m("metadata.namespace!=kube-system,status.phase=Running"),
            Ok(true)
        );
        assert!(m("metadata.name").is_err());
        assert_eq!(m("spec.hostNetwork=false"), Ok(true));
        let err = m("spec.containers=x").unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: spec.containers")
        );
        let svc = |f: &str| Selector::parse(ResourceKind::Service, None, Some(f)).map(|_| ());
        assert!(svc("spec.type=ClusterIP,spec.clusterIP=None").is_ok());
        assert!(svc("status.phase=Running").is_err());
    }
}
