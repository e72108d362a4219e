//! Messages as kube-apiserver's CRD validation prints them (kube-openapi `pkg/validation/errors`,
//! apiextensions-apiserver `test/integration/validation_test.go` "TestCustomResourceValidation").

use super::*;
use serde_json::json;
use std::sync::Arc;

fn errors(schema: &Value, v: &Value) -> Vec<String> {
    let mut e = Vec::new();
    check(schema, v, "spec", &mut e);
    e.iter().map(|e| e.to_string()).collect()
}

#[test]
fn structural_checks_word_their_refusals_as_the_real_server() {
    let schema = json!({"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 3},
        "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
        "e": {"type": "string", "enum": ["A", "B"]},
        "l": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
        "q": {"x-kubernetes-int-or-string": true},
        "m": {"type": "object", "additionalProperties": {"type": "boolean"}}
    }});
    assert!(
        errors(
            &schema,
            &json!({"n": 2, "s": "ab", "e": "A", "l": [1], "q": "1Gi", "m": {"x": true}})
        )
        .is_empty()
    );
    assert_eq!(errors(&schema, &json!({})), ["spec.n: Required value"]);
    assert_eq!(
        errors(&schema, &json!({"n": "two"})),
        ["spec.n: Invalid value: \"string\": spec.n in body must be of type integer: \"string\""]
    );
    assert_eq!(
        errors(&schema, &json!({"n": 5})),
        ["spec.n: Invalid value: 5: spec.n in body should be less than or equal to 3"]
    );
    assert_eq!(
        errors(&schema, &json!({"n": 0})),
        ["spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1"]
    );
    assert_eq!(
        errors(&schema, &json!({"n": 1, "e": "C"})),
        ["spec.e: Unsupported value: \"C\": supported values: \"A\", \"B\""]
    );
    assert_eq!(
        errors(&schema, &json!({"n": 1, "s": "ABCD"})),
        [
            "spec.s: Too long: may not be more than 3 bytes",
            "spec.s: Invalid value: \"ABCD\": spec.s in body should match '^[a-z]+$'"
        ]
    );
    assert_eq!(
        errors(&schema, &json!({"n": 1, "l": [1, "x"]})),
        [
            "spec.l: Too many: 2: must have at most 1 items",
            "spec.l[1]: Invalid value: \"string\": spec.l[1] in body must be of type integer: \"string\""
        ]
    );
    assert_eq!(errors(&schema, &json!({"n": 1, "q": true})).len(), 1);
    assert_eq!(
        errors(&schema, &json!({"n": 1, "m": {"x": 1}})),
        ["spec.m.x: Invalid value: \"integer\": spec.m.x in body must be of type boolean: \"integer\""]
    );
}

#[test]
fn defaults_fill_missing_fields_of_present_objects() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "default": "x"},
        "o": {"type": "object", "properties": {"b": {"type": "integer", "default": 7}}},
        "l": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "boolean", "default": true}}}}
    }});
    let mut v = json!({"o": {}, "l": [{}, {"c": false}]});
    default(&schema, &mut v);
    assert_eq!(
        v,
        json!({"a": "x", "o": {"b": 7}, "l": [{"c": true}, {"c": false}]})
    );
}

/// The hook on a real CRD: a ClusterQueue with a mistyped field is refused by its schema alone, and
/// Kueue's schema defaults (`queueingStrategy: BestEffortFIFO`) are filled in.
#[test]
fn the_hook_applies_a_real_crds_schema() {
    let registry = crate::embedded::Registry::new(&crate::api::all_crds());
    let info: Arc<ResourceInfo> = registry
        .find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        .unwrap();
    let mut cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {}});
    CrdSchemaAdmission
        .admit(Operation::Create, &info, &mut cq, None)
        .expect("an empty spec is valid");
    assert_eq!(cq["spec"]["queueingStrategy"], "BestEffortFIFO", "{cq}");
    // Defaults are defaulted in turn, as kube-apiserver does: Kueue's preemption rule reads
    // `borrowWithinCohort.policy` of the `{}` default (found by tests/install.rs).
    assert_eq!(
        cq["spec"]["preemption"]["borrowWithinCohort"]["policy"], "Never",
        "{cq}"
    );
    let mut bad = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"queueingStrategy": "Sometimes"}});
    let errs = CrdSchemaAdmission
        .admit(Operation::Create, &info, &mut bad, None)
        .unwrap_err();
    assert_eq!(
        errs[0].to_string(),
        "spec.queueingStrategy: Unsupported value: \"Sometimes\": supported values: \"StrictFIFO\", \"BestEffortFIFO\""
    );
}

/// `x-kubernetes-list-type: map` and `set` refuse duplicates, worded as kube-apiserver v1.36.3
/// answered `kubectl create` of a ClusterQueue with one flavor twice (issue 58):
/// `spec.resourceGroups[0].flavors[1]: Duplicate value: {"name":"default"}`.
#[test]
fn list_maps_and_sets_refuse_duplicates() {
    let schema = json!({"type": "object", "properties": {
        "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
              "items": {"type": "object", "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}},
        "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "a": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}}
    }});
    let ok = json!({"m": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}], "s": ["a", "b"], "a": ["x", "x"]});
    assert!(errors(&schema, &ok).is_empty());
    assert_eq!(
        errors(
            &schema,
            &json!({"m": [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP"}, {"protocol": "TCP", "port": 80}]})
        ),
        ["spec.m[2]: Duplicate value: {\"port\":80,\"protocol\":\"TCP\"}"]
    );
    assert_eq!(
        errors(&schema, &json!({"s": ["a", "b", "a"]})),
        ["spec.s[2]: Duplicate value: \"a\""]
    );
}

/// The markers added to quotagate's CRDs (`api/crd_markers.rs`) hold on the embedded server as on
/// kube-apiserver v1.36.3 (the messages are what it answered for the same objects).
#[test]
fn the_hook_applies_kueues_markers() {
    let registry = crate::embedded::Registry::new(&crate::api::all_crds());
    let admit = |plural: &str, mut obj: Value| {
        let info = registry.find("kueue.x-k8s.io", "v1beta2", plural).unwrap();
        CrdSchemaAdmission
            .admit(Operation::Create, &info, &mut obj, None)
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    };
    let flavor = json!({"name": "default", "resources": [{"name": "cpu", "nominalQuota": "3"}]});
    let cq = |spec: Value| json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec});
    assert_eq!(
        admit(
            "clusterqueues",
            cq(json!({"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [flavor, flavor]}]}))
        ),
        ["spec.resourceGroups[0].flavors[1]: Duplicate value: {\"name\":\"default\"}"]
    );
    assert_eq!(
        admit("clusterqueues", cq(json!({"cohortName": "Not_A_Name"}))),
        [
            "spec.cohortName: Invalid value: \"Not_A_Name\": spec.cohortName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"
        ]
    );
    let quota = json!([{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "three"}]}]}]);
    assert_eq!(
        admit("clusterqueues", cq(json!({"resourceGroups": quota}))),
        [
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"three\": spec.resourceGroups[0].flavors[0].resources[0].nominalQuota in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'"
        ]
    );
    let wl = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "default"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "busybox"}, {"name": "c", "image": "busybox"}]}}}]}});
    assert_eq!(
        admit("workloads", wl),
        ["spec.podSets[0].template.spec.containers[1]: Duplicate value: {\"name\":\"c\"}"]
    );
}

/// apiextensions-apiserver's `hasBlockingErr`, as kube-apiserver v1.36.3 answered in the differential
/// suite: an unsupported enum value stops the CEL rules and adds one cause saying so; a pattern
/// mismatch does not stop them.
#[test]
fn a_blocking_schema_error_skips_the_cel_rules_and_says_so() {
    let registry = crate::embedded::Registry::new(&crate::api::all_crds());
    let info = registry
        .find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        .unwrap();
    let mut cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"queueingStrategy": "Bogus"}});
    let errs: Vec<String> = CrdSchemaAdmission
        .admit(Operation::Create, &info, &mut cq, None)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with("spec.queueingStrategy: Unsupported value: \"Bogus\""),
        "{errs:?}"
    );
    assert_eq!(
        errs[1],
        "<nil>: Invalid value: null: some validation rules were not checked because the object was \
         invalid; correct the existing errors to complete validation"
    );
}

/// Where start-up CPU goes (issue "start-up under 100 ms"): prints the time to build every CRD,
/// the registry from them, and the server. By hand, in a release build:
/// `cargo test --release --lib startup_costs -- --ignored --nocapture`.
#[test]
#[ignore]
fn startup_costs() {
    let t = std::time::Instant::now();
    let crds = crate::api::all_crds();
    let crds_took = t.elapsed();
    let t = std::time::Instant::now();
    let registry = crate::embedded::Registry::new(&crds);
    let registry_took = t.elapsed();
    let t = std::time::Instant::now();
    let _again = crate::embedded::Registry::new(&crds);
    let again_took = t.elapsed();
    let t = std::time::Instant::now();
    let compiled = crate::embedded::Registry::compiled();
    let compiled_took = t.elapsed();
    println!(
        "all_crds {crds_took:?}; Registry::new {registry_took:?} ({} resources); a second Registry::new {again_took:?}; Registry::compiled {compiled_took:?} ({} resources)",
        registry.all().len(),
        compiled.all().len()
    );
}

/// The compiled-in CRDs (`api/compiled_crds.rs`) serve exactly what generating them does, and a
/// server built from them parses no schema until one is used (issue 60: start-up under 100 ms).
#[test]
fn compiled_registry_serves_what_generated_crds_do() {
    let compiled = crate::embedded::Registry::compiled();
    let schemas: Vec<_> = compiled.all().iter().filter_map(|r| r.schema.clone()).collect();
    assert!(schemas.len() >= crate::api::all_crds().len(), "{}", schemas.len());
    assert!(schemas.iter().all(|s| !s.is_parsed()));
    let generated = crate::embedded::Registry::new(&crate::api::all_crds());
    assert_eq!(compiled.all().len(), generated.all().len());
    for (c, g) in compiled.all().iter().zip(generated.all()) {
        assert_eq!(c, g, "{}/{}", g.qualified_plural(), g.version);
    }
    assert!(schemas.iter().all(|s| s.is_parsed()));
}
