//! Kubernetes name rules (RFC 1123 subdomains and labels, qualified names, label values), with the
//! API server's messages so errors read the same as kubectl users know them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::api::validation::{ErrorType, FieldError, Path};

static DNS_LABEL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("constant regex"));
static DNS_SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").expect("constant regex"));
static QUALIFIED_NAME_PART: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").expect("constant regex"));

const DNS_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn too_long(path: &Path, max: usize) -> FieldError {
    FieldError::new(path, ErrorType::TooLong, format!("must be no more than {max} characters"))
}

/// An RFC 1123 label (≤63): podset names.
pub(super) fn dns_label(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    if v.len() > 63 {
        errs.push(too_long(path, 63));
    }
    if !DNS_LABEL.is_match(v) {
        errs.push(FieldError::invalid(path, format!("{v:?}: {DNS_LABEL_MSG}")));
    }
}

/// An RFC 1123 subdomain (≤253): cohort, queue, flavor and class references.
pub(super) fn dns_subdomain(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    if v.len() > 253 {
        errs.push(too_long(path, 253));
    }
    if !DNS_SUBDOMAIN.is_match(v) {
        errs.push(FieldError::invalid(path, format!("{v:?}: {DNS_SUBDOMAIN_MSG}")));
    }
}

/// A qualified name `[prefix/]name`: label keys, taint keys, resource names.
pub(super) fn qualified_name(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    let (prefix, name) = match v.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, v),
    };
    if name.is_empty() {
        errs.push(FieldError::invalid(path, format!("{v:?}: name part must be non-empty")));
    } else {
        if name.len() > 63 {
            errs.push(FieldError::invalid(path, format!("{v:?}: name part must be no more than 63 characters")));
        }
        if !QUALIFIED_NAME_PART.is_match(name) {
            errs.push(FieldError::invalid(path, format!("{v:?}: {QUALIFIED_NAME_MSG}")));
        }
    }
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push(FieldError::invalid(path, format!("{v:?}: prefix part must be non-empty")));
        } else if p.len() > 253 || !DNS_SUBDOMAIN.is_match(p) {
            errs.push(FieldError::invalid(path, format!("{v:?}: prefix part {DNS_SUBDOMAIN_MSG}")));
        }
    }
}

/// A label value: empty, or ≤63 characters of the label alphabet.
pub(super) fn label_value(path: &Path, v: &str, errs: &mut Vec<FieldError>) {
    if v.len() > 63 {
        errs.push(too_long(path, 63));
    }
    if !v.is_empty() && !QUALIFIED_NAME_PART.is_match(v) {
        errs.push(FieldError::invalid(path, format!("{v:?}: {LABEL_VALUE_MSG}")));
    }
}

/// A label map (node labels, node selectors): keys are qualified names, values label values.
pub(super) fn labels(path: &Path, m: &BTreeMap<String, String>, errs: &mut Vec<FieldError>) {
    for (k, v) in m {
        qualified_name(path, k, errs);
        label_value(&path.key(k), v, errs);
    }
}
