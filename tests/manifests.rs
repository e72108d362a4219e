//! Compatibility with real Kueue and KubeRay manifests (`../shared/manifests/`): every document of our
//! kinds deserializes into our types and serializes back with no field lost or changed; built-in kinds
//! parse with k8s-openapi types. A file dropped into that folder is covered with no code change.

use std::path::{Path, PathBuf};

use quotagate::api::manifest::{DocClass, check_document, load_documents, round_trip_managed};
use serde_json::Value;

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/manifests")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(yaml_files(&p));
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The documented equivalences. First, a Kubernetes quantity written as a YAML number (`cpu: 4`) is the same
/// value as the string `"4"` (the API server stores quantities as strings; k8s-openapi's Quantity does too).
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => n.to_string() == *s,
        _ => a == b,
    }
}

/// Every path where `got` differs from `want`.
fn diff(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => diff(wv, gv, &format!("{path}.{k}"), out),
                    // Second: a null field (`metadata:` with nothing after it) is dropped, as the API server
                    // prunes nulls of non-nullable fields.
                    None if wv.is_null() => {}
                    None => out.push(format!("{path}.{k}: dropped (was {wv})")),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: added ({})", g[k]));
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(wv, gv, &format!("{path}[{i}]"), out);
            }
        }
        _ if same_scalar(want, got) => {}
        _ => out.push(format!("{path}: {want} became {got}")),
    }
}

#[test]
fn shared_manifests_exist() {
    let files = yaml_files(&manifests_dir());
    assert!(
        files.len() >= 40,
        "expected the shared Kueue and KubeRay samples, found {} files",
        files.len()
    );
}

#[test]
fn every_document_of_our_kinds_round_trips_without_loss() {
    let mut failures = Vec::new();
    let mut ours = 0;
    for file in yaml_files(&manifests_dir()) {
        let text = std::fs::read_to_string(&file).expect("readable manifest");
        let docs = load_documents(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (i, doc) in docs.iter().enumerate() {
            let Some(result) = round_trip_managed(doc) else {
                continue;
            };
            ours += 1;
            match result {
                Ok(back) => {
                    let mut d = Vec::new();
                    diff(doc, &back, "", &mut d);
                    for line in d {
                        failures.push(format!("{} doc {i}: {line}", file.display()));
                    }
                }
                Err(e) => failures.push(format!("{} doc {i}: does not parse: {e}", file.display())),
            }
        }
    }
    assert!(
        ours >= 30,
        "expected at least 30 documents of our kinds, found {ours}"
    );
    assert!(failures.is_empty(), "round-trip losses:\n{}", failures.join("\n"));
}

#[test]
fn built_in_kinds_parse_and_foreign_kinds_are_listed_not_failed() {
    let mut problems = Vec::new();
    let (mut builtin, mut foreign) = (0, 0);
    for file in yaml_files(&manifests_dir()) {
        let text = std::fs::read_to_string(&file).expect("readable manifest");
        for (i, doc) in load_documents(&text).expect("valid YAML").iter().enumerate() {
            let r = check_document(doc);
            match r.class {
                DocClass::BuiltIn => builtin += 1,
                DocClass::NotManaged => foreign += 1,
                DocClass::Managed => continue,
                DocClass::Unknown => {
                    problems.push(format!("{} doc {i}: unknown kind {}", file.display(), r.kind))
                }
            }
            for p in r.problems {
                problems.push(format!("{} doc {i} {}/{}: {p}", file.display(), r.kind, r.name));
            }
        }
    }
    assert!(
        builtin >= 10,
        "expected built-in kinds (ConfigMap, Secret, Service, ...), found {builtin}"
    );
    assert!(
        foreign >= 2,
        "expected Topology and another scheduler's Queue to be listed, found {foreign}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_diff_catches_a_dropped_field() {
    let want: Value = serde_json::json!({"spec": {"a": 1, "b": {"c": "x"}}});
    let got: Value = serde_json::json!({"spec": {"a": "1", "b": {}}});
    let mut d = Vec::new();
    diff(&want, &got, "", &mut d);
    assert_eq!(d, vec![".spec.b.c: dropped (was \"x\")".to_string()]);
}
