use serde_json::Value;

/// Kueue's v1beta2 and KubeRay's v1 CRDs' markers at the schema paths quotagate's CRDs have, one
/// `crd path markers` a line (`template` lines are relative to each `<podTemplate>` mount); written
/// from their CRDs (`config/components/crd/bases`, `ray-operator/config/crd/bases`), `rules=N` being
/// the number of `x-kubernetes-validations` rules, `!default` a generated default their CRD lacks.
const EXPECTED: &str = include_str!("crd_markers_expected.txt");

fn schema_of(name: &str) -> Value {
    static CRDS: std::sync::LazyLock<
        Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    > = std::sync::LazyLock::new(crate::api::all_crds);
    let crd = CRDS
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no CRD {name}"));
    let v = crd.spec.versions.iter().find(|v| v.storage).unwrap();
    serde_json::to_value(v.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap()
}

fn has(schema: &mut Value, crd: &str, path: &str, markers: &str) -> Vec<String> {
    let Some(n) = super::node(schema, path) else {
        return vec![format!("{crd} {path}: no such schema path")];
    };
    let mut missing = Vec::new();
    for m in markers.split(',') {
        let ok = if let Some(absent) = m.strip_prefix('!') {
            !n.contains_key(absent)
        } else {
            match m.strip_prefix("rules=") {
                Some(count) => n
                    .get("x-kubernetes-validations")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.len().to_string() == count),
                None => n.contains_key(m),
            }
        };
        if !ok {
            missing.push(format!("{crd} {path}: {m}"));
        }
    }
    missing
}

/// Every (schema path, marker) Kueue's and KubeRay's CRDs carry where ours have the field is in
/// ours: a marker lost later fails here.
#[test]
fn crds_carry_kueues_and_kuberays_markers() {
    let mut template = Vec::new();
    let mut mounts: Vec<(&str, &str)> = Vec::new();
    let mut plain: Vec<(&str, &str, &str)> = Vec::new();
    for line in EXPECTED.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(3, ' ');
        let (crd, path, markers) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        match (crd, markers) {
            ("template", _) => template.push((path, markers)),
            (_, "<podTemplate>") => mounts.push((crd, path)),
            _ => plain.push((crd, path, markers)),
        }
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    let crds: std::collections::BTreeSet<&str> = plain
        .iter()
        .map(|p| p.0)
        .chain(mounts.iter().map(|m| m.0))
        .collect();
    for crd in crds {
        let mut schema = schema_of(crd);
        for (_, path, markers) in plain.iter().filter(|p| p.0 == crd) {
            missing.extend(has(&mut schema, crd, path, markers));
            checked += 1;
        }
        for (_, mount) in mounts.iter().filter(|m| m.0 == crd) {
            for (rel, markers) in &template {
                missing.extend(has(&mut schema, crd, &format!("{mount}{rel}"), markers));
                checked += 1;
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} missing:\n{}",
        missing.len(),
        missing.join("\n")
    );
    assert!(checked > 2000, "{checked}");
}

/// The CEL rules per CRD, as counted in Kueue's v1beta2 and KubeRay's v1 CRDs (issue 58) for the
/// fields quotagate has.
#[test]
fn cel_rule_counts_match_kueues() {
    fn count(v: &Value) -> usize {
        match v {
            Value::Object(m) => {
                m.get("x-kubernetes-validations")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
                    + m.iter()
                        .filter(|(k, _)| *k != "x-kubernetes-validations")
                        .map(|(_, v)| count(v))
                        .sum::<usize>()
            }
            Value::Array(a) => a.iter().map(count).sum(),
            _ => 0,
        }
    }
    let got: Vec<(&str, usize)> = [
        "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "cohorts.kueue.x-k8s.io",
        "topologies.kueue.x-k8s.io",
        "admissionchecks.kueue.x-k8s.io",
    ]
    .into_iter()
    .map(|c| (c, count(&schema_of(c))))
    .collect();
    assert_eq!(
        got,
        [
            ("clusterqueues.kueue.x-k8s.io", 4),
            ("localqueues.kueue.x-k8s.io", 1),
            ("resourceflavors.kueue.x-k8s.io", 8),
            ("cohorts.kueue.x-k8s.io", 1),
            ("topologies.kueue.x-k8s.io", 3),
            ("admissionchecks.kueue.x-k8s.io", 1),
        ]
    );
}

/// Every path of the table is in the generated schema (else the marker would be silently lost).
#[test]
fn every_table_path_is_in_the_schema() {
    let mut crds = crate::api::all_crds();
    let unresolved: Vec<String> = crds.iter_mut().flat_map(super::apply).collect();
    assert!(unresolved.is_empty(), "{unresolved:#?}");
}

#[test]
fn schema_paths_parse() {
    use super::Step::*;
    assert_eq!(
        super::steps(".spec.podSets[].flavors{}.x"),
        Some(vec![
            Property("spec"),
            Property("podSets"),
            Items,
            Property("flavors"),
            Values,
            Property("x")
        ])
    );
    assert_eq!(super::steps(""), Some(vec![]));
    assert_eq!(super::steps("spec"), None);
    assert_eq!(super::steps(".a..b"), None);
}
