use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::api::kueue::{TopologyLevel, TopologySpec};

fn dom(values: &[&str], count: i32) -> DomainAssignment {
    DomainAssignment {
        values: values.iter().map(|v| v.to_string()).collect(),
        count,
    }
}

fn levels(l: &[&str]) -> Vec<String> {
    l.iter().map(|v| v.to_string()).collect()
}

// Kueue pkg/util/tas/tas_assignment_test.go, `bothWaysTestCases` (the single-slice encoding).
#[test]
fn encoding_matches_kueue_both_ways_cases() {
    let cases = [
        ("empty", vec![], json!({"levels": ["a", "b"], "slices": []})),
        (
            "one domain",
            vec![dom(&["a1", "b1"], 1)],
            json!({"levels": ["a", "b"], "slices": [{"domainCount": 1, "podCounts": {"universal": 1},
                "valuesPerLevel": [{"universal": "a1"}, {"universal": "b1"}]}]}),
        ),
        (
            "multiple domains, same counts, no common prefix",
            vec![dom(&["a1", "b1"], 1), dom(&["a2", "b2"], 1)],
            json!({"levels": ["a", "b"], "slices": [{"domainCount": 2, "podCounts": {"universal": 1},
                "valuesPerLevel": [{"individual": {"prefix": "a", "roots": ["1", "2"]}},
                                   {"individual": {"prefix": "b", "roots": ["1", "2"]}}]}]}),
        ),
        (
            "multiple domains, different counts, common prefix and suffix",
            vec![dom(&["p.a1.s", "p.b1.s"], 1), dom(&["p.a2.s", "p.b2.s"], 2)],
            json!({"levels": ["a", "b"], "slices": [{"domainCount": 2, "podCounts": {"individual": [1, 2]},
                "valuesPerLevel": [{"individual": {"prefix": "p.a", "suffix": ".s", "roots": ["1", "2"]}},
                                   {"individual": {"prefix": "p.b", "suffix": ".s", "roots": ["1", "2"]}}]}]}),
        ),
        (
            "multiple domains, universal value",
            vec![dom(&["a1", "x"], 1), dom(&["a1", "y"], 2)],
            json!({"levels": ["a", "b"], "slices": [{"domainCount": 2, "podCounts": {"individual": [1, 2]},
                "valuesPerLevel": [{"universal": "a1"}, {"individual": {"roots": ["x", "y"]}}]}]}),
        ),
    ];
    for (name, domains, want) in cases {
        let got = encode_assignment(&levels(&["a", "b"]), &domains);
        assert_eq!(serde_json::to_value(&got).unwrap(), want, "{name}");
        assert_eq!(decode_assignment(&got), domains, "{name}: round trip");
    }
}

#[test]
fn decode_skips_a_malformed_slice_instead_of_panicking() {
    let ta: TopologyAssignment = serde_json::from_value(json!({"levels": ["a"], "slices": [
        {"domainCount": 3, "podCounts": {"individual": [1]}, "valuesPerLevel": [{"individual": {"roots": ["x"]}}]}
    ]}))
    .unwrap();
    assert_eq!(decode_assignment(&ta), vec![dom(&["x"], 1)]);
}

fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

fn rendered(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.to_string()).collect()
}

// Kueue pkg/controller/jobframework/tas.go `Build`: required wins, the slice pair rides along.
#[test]
fn annotations_become_the_topology_request() {
    let m = meta(&[
        (REQUIRED_TOPOLOGY, "cloud.com/rack"),
        (SLICE_REQUIRED_TOPOLOGY, "kubernetes.io/hostname"),
        (SLICE_SIZE, "2"),
    ]);
    let req = podset_topology_request(Some(&m), None).unwrap().unwrap();
    assert_eq!(req.required.as_deref(), Some("cloud.com/rack"));
    assert_eq!(
        req.pod_set_slice_required_topology.as_deref(),
        Some("kubernetes.io/hostname")
    );
    assert_eq!(req.pod_set_slice_size, Some(2));
    assert!(explicitly_requests_tas(Some(&req)));

    let m = meta(&[(UNCONSTRAINED_TOPOLOGY, "true")]);
    let req = podset_topology_request(Some(&m), None).unwrap().unwrap();
    assert_eq!(req.unconstrained, Some(true));

    // No annotation: no request, unless the kind names a pod index label (a batch Job).
    assert_eq!(podset_topology_request(Some(&meta(&[])), None).unwrap(), None);
    let req = podset_topology_request(None, Some(JOB_COMPLETION_INDEX))
        .unwrap()
        .unwrap();
    assert_eq!(req.pod_index_label.as_deref(), Some(JOB_COMPLETION_INDEX));
    assert!(!explicitly_requests_tas(Some(&req)));
}

// Kueue pkg/controller/jobframework/tas_validation.go, `ValidateTASPodSetRequest`.
#[test]
fn webhook_refuses_bad_annotations_naming_the_field() {
    let p = Path::root("spec").child("template").child("metadata");
    type Annotations<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Annotations, Vec<&str>)> = vec![
        (
            vec![(REQUIRED_TOPOLOGY, "rack"), (PREFERRED_TOPOLOGY, "block")],
            vec![
                "spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation: [\"kueue.x-k8s.io/podset-required-topology\", \"kueue.x-k8s.io/podset-preferred-topology\", \"kueue.x-k8s.io/podset-unconstrained-topology\"]",
            ],
        ),
        (
            vec![(SLICE_REQUIRED_TOPOLOGY, "rack")],
            vec![
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
            ],
        ),
        (
            vec![(SLICE_SIZE, "2")],
            vec![
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified",
            ],
        ),
        (
            vec![(SLICE_REQUIRED_TOPOLOGY, "rack"), (SLICE_SIZE, "0")],
            vec![
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"0\": must be greater than or equal to 1",
            ],
        ),
        (
            vec![(SLICE_REQUIRED_TOPOLOGY, "rack"), (SLICE_SIZE, "two")],
            vec![
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"two\": must be a numeric value",
            ],
        ),
        (
            vec![(UNCONSTRAINED_TOPOLOGY, "yes")],
            vec![
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]: Invalid value: \"yes\": must be a boolean value",
            ],
        ),
        (vec![(REQUIRED_TOPOLOGY, "cloud.com/rack")], vec![]),
    ];
    for (ann, want) in cases {
        let got = rendered(&validate_tas_podset_request(&p, Some(&meta(&ann))));
        assert_eq!(got, want, "{ann:?}");
    }
    let errs = validate_tas_podset_request(&p, Some(&meta(&[(REQUIRED_TOPOLOGY, "bad key!")])));
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].field,
        "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]"
    );
    let errs = validate_slice_size_upper_bound(&p, Some(&meta(&[(SLICE_SIZE, "5")])), 4);
    assert_eq!(
        rendered(&errs),
        vec![
            "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"5\": must not be greater than pod set count 4"
        ]
    );
}

fn topology(labels: &[&str]) -> Topology {
    Topology::new(
        "default",
        TopologySpec {
            levels: labels
                .iter()
                .map(|l| TopologyLevel {
                    node_label: l.to_string(),
                })
                .collect(),
        },
    )
}

// Kueue apis/kueue/v1beta2/topology_types.go markers; test/integration/singlecluster/tas
// "should allow mutating levels only when hostname stays the lowest level".
#[test]
fn topology_rules_are_kueues() {
    assert!(validate_topology(&topology(&["cloud.com/block", "cloud.com/rack", HOSTNAME_LABEL])).is_empty());
    let msgs = |t: &Topology| -> Vec<String> { validate_topology(t).iter().map(|e| e.body()).collect() };
    assert_eq!(
        msgs(&topology(&[])),
        vec!["Required value: must have at least 1 item"]
    );
    let many: Vec<String> = (0..17).map(|i| format!("l{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(
        msgs(&topology(&many)),
        vec!["Too many: must have at most 16 items, got 17"]
    );
    assert_eq!(
        msgs(&topology(&["rack", "rack"])),
        vec!["Invalid value: must be unique"]
    );
    assert_eq!(
        msgs(&topology(&[HOSTNAME_LABEL, "rack"])),
        vec![format!("Invalid value: {HOSTNAME_LOWEST_MSG}")]
    );
    let old = topology(&["block", "rack"]);
    let new = topology(&["block"]);
    assert_eq!(
        validate_topology_update(&old, &new)
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
        vec![format!("spec.levels: Invalid value: {LEVELS_MUTABLE_MSG}")]
    );
    let old = topology(&["block", "rack", HOSTNAME_LABEL]);
    let new = topology(&["block", HOSTNAME_LABEL]);
    assert!(validate_topology_update(&old, &new).is_empty());
}
