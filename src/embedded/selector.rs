//! Label and field selectors, parsed from query strings and matched against stored JSON objects.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

/// Splits on commas that are not inside parentheses (`a in (x,y),b`).
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
    out.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

fn parse_set(rest: &str, term: &str) -> Result<Vec<String>, SelectorError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("{term}: expected a parenthesised value list")))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let req = if let Some(key) = term.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), parse_set(rest, term)?)
            } else if let Some((k, rest)) = term.split_once(" in ") {
                LabelReq::In(k.trim().into(), parse_set(rest, term)?)
            } else if term.contains(' ') || term.contains('(') {
                return Err(SelectorError(term.to_string()));
            } else {
                LabelReq::Exists(term.to_string())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// `path=value` / `path==value` / `path!=value` terms over any dotted path (metadata.name,
/// involvedObject.uid, status.phase, spec.nodeName, ...). A missing field compares as "".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for term in split_terms(s) {
            let (path, eq, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError(format!("invalid field selector: {term}")));
            };
            terms.push((path.trim().to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
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
        self.0.iter().find(|(p, eq, _)| p == "metadata.name" && *eq).map(|(_, _, v)| v.as_str())
    }
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
            ("!tier", false),
            ("app=web,tier in (front,back),!x", true),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&obj), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in x").is_err());
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
        assert!(FieldSelector::parse("nonsense").is_err());
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
    }
}
