//! Label and field selectors, parsed from query strings as strictly as the real API server parses them,
//! and matched against stored JSON objects.
//!
//! Label selectors parse into kube-core's `Selector`/`Expression` (which has the types and matching,
//! not the string grammar), so matching is written once. The grammar is apimachinery's
//! `labels.Parse`: `[!]key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`,
//! `key notin (a,b)`, joined by commas; keys must be qualified names and values label values. The
//! numeric `key>1` / `key<1` forms have no kube-core expression and are refused with a clear error.
//!
//! Field selectors are apimachinery's `fields.ParseSelector` (`path=value`, `==`, `!=`, with `\,`,
//! `\=` and `\\` escapes), and a path must be one the real server supports for the kind.

use crate::api::names;
use kube::core::{Expression, Selector, SelectorExt};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Selector);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    Not,
    NotEq,
    Eq,
    DoubleEq,
    Open,
    Close,
    Comma,
    Gt,
    Lt,
    End,
}

impl Tok<'_> {
    fn text(&self) -> String {
        match self {
            Tok::Ident(s) => (*s).to_string(),
            Tok::Not => "!".into(),
            Tok::NotEq => "!=".into(),
            Tok::Eq => "=".into(),
            Tok::DoubleEq => "==".into(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
            Tok::End => "end of string".into(),
        }
    }
}

const SPECIAL: &[char] = &['!', '=', '(', ')', ',', '>', '<'];

fn lex(s: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start();
        let Some(c) = rest.chars().next() else { break };
        let (tok, len) = match c {
            '!' if rest.starts_with("!=") => (Tok::NotEq, 2),
            '!' => (Tok::Not, 1),
            '=' if rest.starts_with("==") => (Tok::DoubleEq, 2),
            '=' => (Tok::Eq, 1),
            '(' => (Tok::Open, 1),
            ')' => (Tok::Close, 1),
            ',' => (Tok::Comma, 1),
            '>' => (Tok::Gt, 1),
            '<' => (Tok::Lt, 1),
            _ => {
                let end = rest
                    .find(|c: char| c.is_whitespace() || SPECIAL.contains(&c))
                    .unwrap_or(rest.len());
                (Tok::Ident(&rest[..end]), end)
            }
        };
        out.push(tok);
        rest = &rest[len..];
    }
    out.push(Tok::End);
    out
}

struct Parser<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
}

fn found(t: &Tok<'_>, expected: &str) -> SelectorError {
    SelectorError(format!("found '{}', expected: {expected}", t.text()))
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok<'a> {
        self.toks.get(self.pos).unwrap_or(&Tok::End)
    }

    fn next(&mut self) -> Tok<'a> {
        let t = self.peek().clone();
        self.pos = (self.pos + 1).min(self.toks.len());
        t
    }

    fn selector(&mut self) -> Result<Vec<Expression>, SelectorError> {
        let mut exprs = Vec::new();
        loop {
            match self.peek() {
                Tok::End => return Ok(exprs),
                Tok::Ident(_) | Tok::Not => {}
                t => return Err(found(t, "!, identifier, or 'end of string'")),
            }
            // apimachinery's `Parser.parse` wraps what a requirement's own parse refuses.
            exprs.push(
                self.requirement()
                    .map_err(|e| SelectorError(format!("unable to parse requirement: {}", e.0)))?,
            );
            match self.next() {
                Tok::End => return Ok(exprs),
                Tok::Comma => match self.peek() {
                    Tok::Ident(_) | Tok::Not => {}
                    t => return Err(found(t, "identifier after ','")),
                },
                t => return Err(found(&t, "',' or 'end of string'")),
            }
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        match self.next() {
            Tok::Ident(k) if names::is_label_key(k) => Ok(k.to_string()),
            Tok::Ident(k) => Err(SelectorError(format!(
                "invalid label key {k:?}: must be a qualified name of at most 63 characters, optionally prefixed by a DNS subdomain and '/'"
            ))),
            t => Err(found(&t, "identifier")),
        }
    }

    fn value(v: &str) -> Result<String, SelectorError> {
        if names::is_label_value(v) {
            Ok(v.to_string())
        } else {
            Err(SelectorError(format!(
                "invalid label value {v:?}: must be 63 characters or less, alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
            )))
        }
    }

    fn requirement(&mut self) -> Result<Expression, SelectorError> {
        if *self.peek() == Tok::Not {
            self.next();
            return Ok(Expression::DoesNotExist(self.key()?));
        }
        let key = self.key()?;
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            return Ok(Expression::Exists(key));
        }
        match self.next() {
            Tok::Eq | Tok::DoubleEq => Ok(Expression::Equal(key, self.exact()?)),
            Tok::NotEq => Ok(Expression::NotEqual(key, self.exact()?)),
            Tok::Ident("in") => Ok(Expression::In(key, self.set()?)),
            Tok::Ident("notin") => Ok(Expression::NotIn(key, self.set()?)),
            t @ (Tok::Gt | Tok::Lt) => Err(SelectorError(format!(
                "the numeric operator '{}' in a label selector is not supported by this server",
                t.text()
            ))),
            t => Err(found(&t, "'=', '!=', '==', 'in', 'notin'")),
        }
    }

    fn exact(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            Tok::End | Tok::Comma => Ok(String::new()),
            Tok::Ident(v) => {
                let v = Self::value(v)?;
                self.next();
                Ok(v)
            }
            t => Err(found(t, "identifier")),
        }
    }

    fn set(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        match self.next() {
            Tok::Open => {}
            t => return Err(found(&t, "'('")),
        }
        let mut values = BTreeSet::new();
        loop {
            match self.next() {
                Tok::Ident(v) => {
                    values.insert(Self::value(v)?);
                    match self.next() {
                        Tok::Comma => {}
                        Tok::Close => return Ok(values),
                        t => return Err(found(&t, "',' or ')'")),
                    }
                }
                Tok::Close if values.is_empty() => {
                    return Err(SelectorError(
                        "for 'in', 'notin' operators, values set can't be empty".into(),
                    ));
                }
                t => return Err(found(&t, "identifier")),
            }
        }
    }
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let exprs = Parser { toks: lex(s), pos: 0 }.selector()?;
        Ok(LabelSelector(Selector::from_iter(exprs)))
    }

    /// `key=value` for every pair: a Service's selector.
    pub fn from_map<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        LabelSelector(Selector::from_iter(
            pairs
                .into_iter()
                .map(|(k, v)| Expression::Equal(k.clone(), v.clone())),
        ))
    }

    pub fn selects_all(&self) -> bool {
        self.0.selects_all()
    }

    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches(labels)
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if self.0.selects_all() {
            return true;
        }
        let labels: BTreeMap<String, String> = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.0.matches(&labels)
    }
}

/// `path=value` / `path==value` / `path!=value` terms. A missing field compares as "".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

/// Splits on commas that are not escaped with a backslash.
fn split_unescaped(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut escaped) = (0usize, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn unescape(v: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => {
                    return Err(SelectorError(format!(
                        "invalid field selector value {v:?}: invalid escape sequence '\\{e}'"
                    )));
                }
                None => {
                    return Err(SelectorError(format!(
                        "invalid field selector value {v:?}: unterminated escape sequence"
                    )));
                }
            },
            ',' | '=' => {
                return Err(SelectorError(format!(
                    "invalid field selector value {v:?}: unescaped '{c}'"
                )));
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// The fields the real API server lets a client select on, per kind (beyond `metadata.name` and
/// `metadata.namespace`, which every kind supports).
fn kind_fields(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "source",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("batch", "jobs") => &["status.successful"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        _ => &[],
    }
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(terms));
        }
        for term in split_unescaped(s) {
            let (path, eq, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError(format!(
                    "invalid field selector: {term:?}: expected path=value, path==value or path!=value"
                )));
            };
            let path = path.trim();
            if path.is_empty() {
                return Err(SelectorError(format!(
                    "invalid field selector: {term:?}: the field path is empty"
                )));
            }
            terms.push((path.to_string(), eq, unescape(value.trim())?));
        }
        Ok(FieldSelector(terms))
    }

    /// 400's message when a path is not selectable on this kind, as the real server refuses it.
    pub fn check_supported(&self, group: &str, plural: &str) -> Result<(), SelectorError> {
        self.check_supported_on(group, plural, false)
    }

    /// As [`Self::check_supported`]; a built-in kind with no fields of its own (a ConfigMap) is refused
    /// in the words of apimachinery's default conversion, kube-apiserver's for such kinds.
    pub fn check_supported_on(&self, group: &str, plural: &str, builtin: bool) -> Result<(), SelectorError> {
        let fields = kind_fields(group, plural);
        for (path, _, _) in &self.0 {
            let ok =
                path == "metadata.name" || path == "metadata.namespace" || fields.contains(&path.as_str());
            if ok {
                continue;
            }
            return Err(SelectorError(if builtin && fields.is_empty() {
                format!(
                    "{path:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )
            } else {
                format!("field label not supported: {path}")
            }));
        }
        Ok(())
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            // Only Events select on `source`, and it is computed, not a path (`events.rs`).
            if path == "source" {
                return (super::event_fields::source_field(obj) == *want) == *eq;
            }
            // Jobs select on `status.successful`: the count `status.succeeded`, 0 when unset.
            if path == "status.successful" {
                let n = obj
                    .pointer("/status/succeeded")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                return (n.to_string() == *want) == *eq;
            }
            let mut cur = Some(obj);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let got = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }

    /// The `metadata.name=x` term, if any: lets a watch or list skip every other object.
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, eq, _)| p == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// An object's `metadata.labels` (non-string values are left out).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A `metav1.LabelSelector` as apimachinery prints it (`LabelSelectorAsSelector(..).String()`):
/// requirements sorted by key, `matchLabels` as `k=v`, `In`/`NotIn` values sorted, `""` for an empty
/// selector. What a Scale's `status.selector` and kubectl's `SELECTOR` column show.
pub fn selector_string(sel: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut reqs: Vec<(String, String)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), format!("{k}={}", text(v))))
        .collect();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").map(text).unwrap_or_default();
        let mut values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        values.sort();
        let values = values.join(",");
        let req = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            // No requirement of apimachinery's: it prints as text no selector parses.
            op => format!("{key} <unknown operator {op:?}>"),
        };
        reqs.push((key, req));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter().map(|(_, r)| r).collect::<Vec<_>>().join(",")
}

/// A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) against `labels`; an empty or
/// absent selector matches everything, one that does not parse matches nothing (the real server
/// refuses such a configuration when it is written).
pub fn selector_matches(sel: &Value, labels: &BTreeMap<String, String>) -> bool {
    // An unknown operator prints as text that does not parse: such a selector matches nothing.
    LabelSelector::parse(&selector_string(sel)).is_ok_and(|s| s.matches_labels(labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_table() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app!=web", false),
            ("app in (db, web)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("app notin (web,db)", false),
            ("missing notin (x)", true),
            ("tier", true),
            ("missing", false),
            ("!missing", true),
            ("! missing", true),
            ("!tier", false),
            ("app=web,tier in (front,back),!x", true),
            ("app=", false),
            ("", true),
            ("   ", true),
        ];
        for (sel, want) in cases {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&obj), want, "{sel}");
        }
    }

    // The real server answers 400 to each of these; before, "!!" selected everything without label "!".
    #[test]
    fn malformed_label_selectors_are_refused() {
        let long = format!("{}=x", "k".repeat(10_000));
        for bad in [
            "!!",
            "=",
            "a,,b",
            "a=b=c",
            ",a",
            "a,",
            "app in x",
            "app in ()",
            "app in (a",
            "a b",
            "a=(",
            &long,
            "a=b c",
            "x>1",
            "a=!b",
        ] {
            let e = LabelSelector::parse(bad).expect_err(bad);
            assert!(!e.0.is_empty(), "{bad}");
        }
        // The wording of kube-apiserver v1.36.3 for `kubectl get -l 'env==='` (the blind kubectl
        // set's cm-list-bad-selector) and for a stray comma.
        assert_eq!(
            LabelSelector::parse("env===").unwrap_err().0,
            "unable to parse requirement: found '=', expected: identifier"
        );
        assert_eq!(
            LabelSelector::parse(",a").unwrap_err().0,
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert!(
            LabelSelector::parse("!!")
                .unwrap_err()
                .0
                .contains("found '!', expected: identifier")
        );
        assert!(
            LabelSelector::parse("a=b=c")
                .unwrap_err()
                .0
                .contains("expected: ',' or 'end of string'")
        );
    }

    #[test]
    fn field_selector_table() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}, "involvedObject": {"kind": "Pod", "uid": "u1"}});
        let cases = [
            ("metadata.name=a", true),
            ("metadata.name==b", false),
            ("metadata.name!=b", true),
            ("metadata.namespace=ns,involvedObject.kind=Pod", true),
            ("involvedObject.uid=u2", false),
            ("involvedObject.namespace=", true),
        ];
        for (sel, want) in cases {
            assert_eq!(FieldSelector::parse(sel).unwrap().matches(&obj), want, "{sel}");
        }
        assert_eq!(FieldSelector::parse("metadata.name=a").unwrap().name(), Some("a"));
        assert_eq!(
            FieldSelector::parse(r"metadata.name=a\,b").unwrap().name(),
            Some("a,b")
        );
        for bad in [
            "nonsense",
            "a,,b",
            "=x",
            r"metadata.name=a\q",
            "metadata.name=a=b",
        ] {
            assert!(FieldSelector::parse(bad).is_err(), "{bad}");
        }
        let ok = FieldSelector::parse("involvedObject.uid=u,metadata.name=a").unwrap();
        assert!(ok.check_supported("", "events").is_ok());
        let e = ok.check_supported("kueue.x-k8s.io", "workloads").unwrap_err();
        assert_eq!(e.0, "field label not supported: involvedObject.uid");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Whatever a user types into -l or --field-selector, parsing and matching never panic.
        #[test]
        fn selectors_never_panic(s in ".{0,40}") {
            let obj = serde_json::json!({"metadata": {"name": "a", "labels": {"a": "b"}}});
            if let Ok(l) = LabelSelector::parse(&s) { let _ = l.matches(&obj); }
            if let Ok(f) = FieldSelector::parse(&s) { let _ = f.matches(&obj); }
        }

        // A selector that parses prints back (kube-core's Display) to one that parses the same.
        #[test]
        fn parsed_label_selectors_round_trip(k in "[a-z]{1,8}", v in "[a-z0-9]{0,8}", op in 0usize..4) {
            let s = match op {
                0 => format!("{k}={v}"),
                1 => format!("{k}!={v}"),
                2 => format!("{k} in ({v}x,y)"),
                _ => format!("!{k}"),
            };
            let parsed = LabelSelector::parse(&s).unwrap();
            let again = LabelSelector::parse(&parsed.0.to_string()).unwrap();
            prop_assert_eq!(parsed, again);
        }
    }
}
