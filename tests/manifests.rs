//! Compatibility with Kueue and KubeRay manifests as their users write them: every document of our
//! kinds deserializes into our types and serializes back with no field lost or changed; built-in kinds
//! parse with k8s-openapi types. The manifests live in `tests/fixtures/manifests/` (written for this
//! repository, covering every kind and field of the Kueue and KubeRay samples); a file dropped there is
//! covered with no code change. Where the upstream samples sit beside the checkout
//! (`../shared/manifests/`), they are checked the same way; elsewhere that check says it skipped.

use std::path::{Path, PathBuf};

use quotagate::api::manifest::{DocClass, check_document, load_documents, round_trip_managed};
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests")
}

/// The upstream samples, when a checkout beside this one has them.
fn upstream_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/manifests");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: no upstream samples in ../shared/manifests/ beside the repository");
        None
    }
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

/// The documents of our kinds under `dir` that round-trip, and every loss found.
fn round_trips(dir: &Path) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut ours = 0;
    for file in yaml_files(dir) {
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
    (ours, failures)
}

/// Built-in documents under `dir`, other projects' documents, and every problem found.
fn built_in_and_foreign(dir: &Path) -> (usize, usize, Vec<String>) {
    let mut problems = Vec::new();
    let (mut builtin, mut foreign) = (0, 0);
    for file in yaml_files(dir) {
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
    (builtin, foreign, problems)
}

#[test]
fn fixture_manifests_exist() {
    let files = yaml_files(&fixtures_dir());
    assert!(
        files.len() >= 20,
        "expected the Kueue and KubeRay manifests of tests/fixtures/manifests/, found {} files",
        files.len()
    );
}

#[test]
fn every_document_of_our_kinds_round_trips_without_loss() {
    let (ours, failures) = round_trips(&fixtures_dir());
    assert!(
        ours >= 25,
        "expected at least 25 documents of our kinds, found {ours}"
    );
    assert!(failures.is_empty(), "round-trip losses:\n{}", failures.join("\n"));
}

#[test]
fn built_in_kinds_parse_and_foreign_kinds_are_listed_not_failed() {
    let (builtin, foreign, problems) = built_in_and_foreign(&fixtures_dir());
    assert!(
        builtin >= 15,
        "expected built-in kinds (ConfigMap, Secret, Service, ...), found {builtin}"
    );
    assert!(
        foreign >= 2,
        "expected Topology and another scheduler's Queue to be listed, found {foreign}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn upstream_samples_round_trip_where_present() {
    let Some(dir) = upstream_dir() else { return };
    let files = yaml_files(&dir);
    assert!(
        files.len() >= 40,
        "expected the upstream Kueue and KubeRay samples, found {} files",
        files.len()
    );
    let (ours, failures) = round_trips(&dir);
    assert!(
        ours >= 30,
        "expected at least 30 documents of our kinds, found {ours}"
    );
    assert!(failures.is_empty(), "round-trip losses:\n{}", failures.join("\n"));
    let (builtin, foreign, problems) = built_in_and_foreign(&dir);
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
