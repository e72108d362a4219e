//! Kubernetes name rules (RFC 1123 subdomains and labels, qualified names, label values), with the
//! API server's messages so errors read the same as kubectl users know them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::api::validation::{ErrorType, FieldError, Path};

static DNS_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("constant regex"));
static DNS_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").expect("constant regex")
});
static QUALIFIED_NAME_PART: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").expect("constant regex"));

const DNS_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn too_long(path: &Path, max: usize) -> FieldError {
    FieldError::new(
        path,
        ErrorType::TooLong,
        format!("must be no more than {max} characters"),
    )
}

/// An RFC 1123 label (≤63): podset names.
pub fn dns_label(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    if v.len() > 63 {
        errs.push(too_long(path, 63));
    }
    if !DNS_LABEL.is_match(v) {
        // apimachinery's `IsDNS1123Label` (v1.36): a valid subdomain that is no label has dots.
        if DNS_SUBDOMAIN.is_match(v) {
            errs.push(FieldError::invalid(path, format!("{v:?}: must not contain dots")));
        } else {
            errs.push(FieldError::invalid(path, format!("{v:?}: {DNS_LABEL_MSG}")));
        }
    }
}

/// An RFC 1123 subdomain (≤253): cohort, queue, flavor and class references.
pub fn dns_subdomain(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    if v.len() > 253 {
        errs.push(too_long(path, 253));
    }
    if !DNS_SUBDOMAIN.is_match(v) {
        errs.push(FieldError::invalid(path, format!("{v:?}: {DNS_SUBDOMAIN_MSG}")));
    }
}

/// A qualified name `[prefix/]name`: label keys, taint keys, resource names.
pub fn qualified_name(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    let (prefix, name) = match v.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, v),
    };
    if name.is_empty() {
        errs.push(FieldError::invalid(
            path,
            format!("{v:?}: name part must be non-empty"),
        ));
    } else {
        if name.len() > 63 {
            errs.push(FieldError::invalid(
                path,
                format!("{v:?}: name part must be no more than 63 characters"),
            ));
        }
        if !QUALIFIED_NAME_PART.is_match(name) {
            errs.push(FieldError::invalid(path, format!("{v:?}: {QUALIFIED_NAME_MSG}")));
        }
    }
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push(FieldError::invalid(
                path,
                format!("{v:?}: prefix part must be non-empty"),
            ));
        } else if p.len() > 253 || !DNS_SUBDOMAIN.is_match(p) {
            errs.push(FieldError::invalid(
                path,
                format!("{v:?}: prefix part {DNS_SUBDOMAIN_MSG}"),
            ));
        }
    }
}

/// A label value: empty, or ≤63 characters of the label alphabet.
pub fn label_value(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    if v.len() > 63 {
        errs.push(too_long(path, 63));
    }
    if !v.is_empty() && !QUALIFIED_NAME_PART.is_match(v) {
        errs.push(FieldError::invalid(path, format!("{v:?}: {LABEL_VALUE_MSG}")));
    }
}

/// A label map (node labels, node selectors): keys are qualified names, values label values.
pub fn labels(path: &Path, m: &BTreeMap<String, String>, errs: &mut Vec<FieldError>) {
    for (k, v) in m {
        qualified_name(path, k, errs);
        label_value(&path.key(k), v, errs);
    }
}

static DNS1035_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").expect("constant regex"));
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Which rule an object's `metadata.name` follows, per kind, as the API server's strategies pick it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// Most kinds, custom resources included.
    Subdomain,
    /// Namespaces.
    Label,
    /// Services.
    Dns1035Label,
}

/// A generateName prefix is checked with its trailing dash masked, as apimachinery does.
fn masked(v: &str, prefix: bool) -> String {
    match v.strip_suffix('-') {
        Some(head) if prefix => format!("{head}a"),
        _ => v.to_string(),
    }
}

/// `metadata.name` or (with `prefix`) `metadata.generateName` under `rule`.
pub fn object_name(path: &Path, rule: NameRule, v: &str, prefix: bool, errs: &mut Vec<FieldError>) {
    let m = masked(v, prefix);
    match rule {
        NameRule::Subdomain => dns_subdomain(path, &m, errs),
        NameRule::Label => dns_label(path, &m, errs),
        NameRule::Dns1035Label => {
            if m.len() > 63 {
                errs.push(too_long(path, 63));
            }
            if !DNS1035_LABEL.is_match(&m) {
                errs.push(FieldError::invalid(path, format!("{v:?}: {DNS1035_LABEL_MSG}")));
            }
        }
    }
}

/// The largest total size of an object's annotations, keys and values together (256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Annotations: keys are qualified names (checked lower-cased), and all of them together stay
/// within [`TOTAL_ANNOTATION_SIZE_LIMIT`].
pub fn annotations(path: &Path, m: &serde_json::Map<String, serde_json::Value>, errs: &mut Vec<FieldError>) {
    let mut total = 0usize;
    for (k, v) in m {
        qualified_name(path, &k.to_lowercase(), errs);
        total = total
            .saturating_add(k.len())
            .saturating_add(v.as_str().map_or(0, str::len));
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::new(
            path,
            ErrorType::TooLong,
            format!("must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
}

/// Labels straight from an object's JSON metadata: keys are qualified names, values label values; both
/// errors name the map itself, as apimachinery's `ValidateLabels` does (`metadata.labels: Invalid
/// value: "bad value": ...`).
pub fn label_map(path: &Path, m: &serde_json::Map<String, serde_json::Value>, errs: &mut Vec<FieldError>) {
    for (k, v) in m {
        qualified_name(path, k, errs);
        match v.as_str() {
            Some(s) => label_value(path, s, errs),
            None => errs.push(FieldError::invalid(
                &path.key(k),
                "a label value must be a string",
            )),
        }
    }
}

/// Whether `s` is a valid label key (a qualified name).
pub fn is_label_key(s: &str) -> bool {
    let mut errs = Vec::new();
    qualified_name(&Path::root("key"), s, &mut errs);
    errs.is_empty()
}

/// Whether `s` is a valid label value.
pub fn is_label_value(s: &str) -> bool {
    let mut errs = Vec::new();
    label_value(&Path::root("value"), s, &mut errs);
    errs.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(rule: NameRule, v: &str, prefix: bool) -> usize {
        let mut errs = Vec::new();
        object_name(&Path::root("metadata").child("name"), rule, v, prefix, &mut errs);
        errs.len()
    }

    #[test]
    fn object_names_follow_the_kind_rule() {
        for bad in ["stuck wl", "a/b", "..", "ünï", "", "Upper", "-a", "a-"] {
            assert!(errors(NameRule::Subdomain, bad, false) > 0, "{bad:?}");
        }
        for good in ["a", "a.b-c", "0abc", "raycluster-alpha-62de1"] {
            assert_eq!(errors(NameRule::Subdomain, good, false), 0, "{good:?}");
        }
        assert!(errors(NameRule::Label, "a.b", false) > 0);
        assert!(errors(NameRule::Dns1035Label, "0abc", false) > 0);
        assert_eq!(
            errors(NameRule::Subdomain, "job-", true),
            0,
            "a generateName prefix may end in a dash"
        );
        assert!(errors(NameRule::Subdomain, &"a".repeat(254), false) > 0);
        assert!(
            !is_label_key("!") && !is_label_key(&"k".repeat(64)) && is_label_key("kueue.x-k8s.io/queue-name")
        );
        assert!(is_label_value("") && !is_label_value(&"v".repeat(64)) && !is_label_value("a b"));
    }
}
