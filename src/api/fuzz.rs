//! Fuzz targets for what users write: manifests (loading, defaulting, validation) and quantities.
//! proptest-driven, so they run with the other tests: 256 cases each by default (seconds), more with
//! `PROPTEST_CASES=100000 cargo test --release --lib fuzz` (the README says so). Each target asserts
//! no panic, and where the input is accepted, that it means one thing (a quantity prints back to
//! itself).

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::manifest::{check_document, load_documents};
use super::on_write::{Operation, admit, default_object};
use super::quantity::Quantity;

/// Any JSON value a careless or hostile user could put at a field: huge and negative numbers,
/// odd strings, nesting.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(json!(2147483647)),
        Just(json!(-1)),
        Just(json!(1e308)),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[ -~]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("-1"),
            Just("NaN"),
            Just("999999999999999Ei"),
            Just(" 1"),
            Just("1e9999999999"),
            Just(""),
            Just("a/b"),
            Just("ünï"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every document of the manifest fixtures (Kueue, KubeRay, Gateway) and, where a checkout beside this
/// one has them, the upstream samples, once.
fn real_documents() -> &'static [Value] {
    static DOCS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    DOCS.get_or_init(|| {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs = vec![
            repo.join("tests/fixtures/manifests"),
            repo.join("../shared/manifests"),
        ];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                    files.push(p);
                }
            }
        }
        files.sort();
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .filter_map(|t| load_documents(&t).ok())
            .flatten()
            .collect()
    })
}

/// The number of values in `v` (itself included): the places a mutation can land.
fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(m) => m.values().map(count).sum(),
        _ => 0,
    }
}

/// Replaces the `n`-th value of `v` (pre-order) with `with`; false when `n` is past the end.
fn replace_nth(v: &mut Value, n: &mut usize, with: &Value) -> bool {
    if *n == 0 {
        *v = with.clone();
        return true;
    }
    *n -= 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|c| replace_nth(c, n, with)),
        Value::Object(m) => m.values_mut().any(|c| replace_nth(c, n, with)),
        _ => false,
    }
}

/// What a write of `doc` goes through: the manifest check, defaulting, validation on create and
/// on update against itself.
fn judge(doc: &Value) {
    let _ = check_document(doc);
    let mut created = doc.clone();
    default_object(Operation::Create, &mut created);
    let _ = admit(Operation::Create, &mut created, None);
    let mut updated = doc.clone();
    let _ = admit(Operation::Update, &mut updated, Some(&created));
}

proptest! {
    #[test]
    fn any_text_loads_or_fails_cleanly(text in "(?s).{0,400}") {
        if let Ok(docs) = load_documents(&text) {
            for d in &docs {
                judge(d);
            }
        }
    }

    #[test]
    fn yaml_shaped_text_loads_or_fails_cleanly(
        lines in prop::collection::vec(
            "( {0,4})(- )?[a-zA-Z]{0,6}(: )?([\\[\\]{}&*!|>'\"%@`#,0-9a-z.-]{0,8})",
            0..20,
        )
    ) {
        if let Ok(docs) = load_documents(&lines.join("\n")) {
            for d in &docs {
                judge(d);
            }
        }
    }

    #[test]
    fn any_field_of_a_real_manifest_can_be_anything(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        with in any_value(),
    ) {
        let docs = real_documents();
        prop_assume!(!docs.is_empty());
        let mut doc = docs[which.index(docs.len())].clone();
        let mut n = at.index(count(&doc));
        prop_assert!(replace_nth(&mut doc, &mut n, &with));
        judge(&doc);
    }

    #[test]
    fn quantities_parse_or_fail_cleanly_and_print_back(
        s in "[ +-]?[0-9]{0,24}(\\.[0-9]{0,24})?([eE][+-]?[0-9]{1,14})?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?"
    ) {
        if let Ok(q) = Quantity::parse(&s) {
            let printed = q.canonical();
            let again = Quantity::parse(&printed);
            prop_assert!(again.is_ok(), "{s:?} printed as {printed:?}, which does not parse");
            prop_assert_eq!(again.unwrap().canonical(), printed.clone(), "{:?} -> {:?}", s, printed);
        }
    }

    #[test]
    fn any_text_as_a_quantity_fails_cleanly(s in "(?s).{0,40}") {
        let _ = Quantity::parse(&s).map(|q| q.canonical());
    }
}

#[test]
fn the_shared_manifests_are_found() {
    // Without them the mutation target above would test nothing.
    assert!(real_documents().len() > 20, "{}", real_documents().len());
}
