//! Table-driven tests: one failing case per rule (exact path, kind and rule text), and the Kueue
//! sample manifests validate clean.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::*;
use crate::api::kueue::builders::{podset, workload_priority_class};
use crate::api::kueue::constants::label;
use crate::api::kueue::*;
use crate::api::validation::ErrorType::{self, *};

fn q(s: &str) -> WireQuantity {
    WireQuantity(s.to_string())
}

fn cq() -> ClusterQueue {
    ClusterQueue::build("cq")
        .flavor("default", [("cpu", "10"), ("memory", "10Gi")])
        .build()
}

fn quota(cq: &mut ClusterQueue) -> &mut ResourceQuota {
    &mut cq.spec.resource_groups.as_mut().unwrap()[0].flavors[0].resources[0]
}

fn wl() -> Workload {
    Workload::build("w", "ns")
        .queue("lq")
        .podset("main", 2, [("cpu", "1")])
        .build()
}

fn toleration(key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>) -> Toleration {
    Toleration {
        key: key.map(str::to_string),
        operator: op.map(str::to_string),
        value: value.map(str::to_string),
        effect: effect.map(str::to_string),
        toleration_seconds: None,
    }
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        value: None,
        time_added: None,
    }
}

/// Exactly one error, at `path`, of `kind`, whose message contains `rule`.
fn check(case: &str, errs: Vec<FieldError>, path: &str, kind: ErrorType, rule: &str) {
    assert_eq!(errs.len(), 1, "{case}: expected one error, got {errs:#?}");
    let e = &errs[0];
    assert_eq!((e.field.as_str(), e.kind), (path, kind), "{case}: {e}");
    assert!(
        e.message.contains(rule),
        "{case}: message {:?} lacks {rule:?}",
        e.message
    );
}

#[test]
fn cluster_queue_rules() {
    type Mutate = fn(&mut ClusterQueue);
    let cases: Vec<(&str, Mutate, &str, ErrorType, &str)> = vec![
        (
            "flavor lists fewer resources than covered",
            |c| {
                c.spec.resource_groups.as_mut().unwrap()[0].flavors[0]
                    .resources
                    .pop();
            },
            "spec.resourceGroups[0].flavors[0].resources",
            Invalid,
            "flavors must have the same number of resources as the coveredResources",
        ),
        (
            "flavor lists resources out of order",
            |c| {
                c.spec.resource_groups.as_mut().unwrap()[0]
                    .covered_resources
                    .swap(0, 1);
                let rs = &mut c.spec.resource_groups.as_mut().unwrap()[0].flavors[0].resources;
                rs[0].name = "cpu".into();
                rs[1].name = "cpu".into();
            },
            "spec.resourceGroups[0].flavors[0].resources[0].name",
            Invalid,
            "must match the name in coveredResources",
        ),
        (
            "resource covered by two groups",
            |c| {
                let other = FlavorQuotas::build("other")
                    .resource("gpu", "1")
                    .resource("cpu", "1")
                    .build();
                c.spec.resource_groups.as_mut().unwrap().push(ResourceGroup {
                    covered_resources: vec!["gpu".into(), "cpu".into()],
                    flavors: vec![other],
                });
            },
            "spec.resourceGroups[1].coveredResources[1]",
            Duplicate,
            "a resource can be covered by only one resource group",
        ),
        (
            "flavor name repeated across groups",
            |c| {
                c.spec.resource_groups.as_mut().unwrap().push(ResourceGroup {
                    covered_resources: vec!["gpu".into()],
                    flavors: vec![FlavorQuotas::build("default").resource("gpu", "1").build()],
                });
            },
            "spec.resourceGroups[1].flavors[0].name",
            Duplicate,
            "flavor names must be unique across resource groups",
        ),
        (
            "borrowingLimit without cohort",
            |c| quota(c).borrowing_limit = Some(q("1")),
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            Invalid,
            "\"1\": must be nil when cohort is empty",
        ),
        (
            "lendingLimit without cohort",
            |c| quota(c).lending_limit = Some(q("1")),
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            Invalid,
            "must be nil when cohort is empty",
        ),
        (
            "lendingLimit above nominal",
            |c| {
                c.spec.cohort_name = Some("co".into());
                quota(c).lending_limit = Some(q("10500m"));
            },
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            Invalid,
            "\"10500m\": must be less than or equal to the nominalQuota",
        ),
        (
            "negative nominal quota",
            |c| quota(c).nominal_quota = q("-1"),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            Invalid,
            "\"-1\": must be greater than or equal to 0",
        ),
        (
            "malformed nominal quota",
            |c| quota(c).nominal_quota = q("ten"),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            Invalid,
            "does not match",
        ),
        (
            "negative borrowing limit",
            |c| {
                c.spec.cohort_name = Some("co".into());
                // Kueue prints the canonical form, quoted: `Invalid value: "-500m"`.
                quota(c).borrowing_limit = Some(q("-0.5"));
            },
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            Invalid,
            "\"-500m\": must be greater than or equal to 0",
        ),
        (
            "more than 16 resource groups",
            |c| {
                let groups = (0..17)
                    .map(|i| ResourceGroup {
                        covered_resources: vec![format!("r{i}")],
                        flavors: vec![
                            FlavorQuotas::build(&format!("f{i}"))
                                .resource(&format!("r{i}"), "1")
                                .build(),
                        ],
                    })
                    .collect();
                c.spec.resource_groups = Some(groups);
            },
            "spec.resourceGroups",
            TooMany,
            "must have at most 16 items",
        ),
        (
            "more than 64 covered resources",
            |c| {
                let names: Vec<String> = (0..65).map(|i| format!("r{i}")).collect();
                let f = names
                    .iter()
                    .fold(FlavorQuotas::build("f"), |b, n| b.resource(n, "1"))
                    .build();
                c.spec.resource_groups = Some(vec![ResourceGroup {
                    covered_resources: names,
                    flavors: vec![f],
                }]);
            },
            "spec.resourceGroups[0].coveredResources",
            TooMany,
            "must have at most 64 items",
        ),
        (
            "more than 64 flavors in a group",
            |c| {
                let flavors = (0..65)
                    .map(|i| FlavorQuotas::build(&format!("f{i}")).resource("cpu", "1").build())
                    .collect();
                c.spec.resource_groups = Some(vec![ResourceGroup {
                    covered_resources: vec!["cpu".into()],
                    flavors,
                }]);
            },
            "spec.resourceGroups[0].flavors",
            TooMany,
            "must have at most 64 items",
        ),
        (
            "more than 256 flavors in all",
            |c| {
                let groups = (0..5)
                    .map(|g| ResourceGroup {
                        covered_resources: vec![format!("r{g}")],
                        flavors: (0..52)
                            .map(|i| {
                                FlavorQuotas::build(&format!("f{g}-{i}"))
                                    .resource(&format!("r{g}"), "1")
                                    .build()
                            })
                            .collect(),
                    })
                    .collect();
                c.spec.resource_groups = Some(groups);
            },
            "spec.resourceGroups",
            Invalid,
            "total number of flavors across all resourceGroups must be ≤ 256, got 260",
        ),
        (
            "group without flavors",
            |c| c.spec.resource_groups.as_mut().unwrap()[0].flavors.clear(),
            "spec.resourceGroups[0].flavors",
            Required,
            "must have at least 1 item",
        ),
        (
            "bad resource name",
            |c| {
                let g = &mut c.spec.resource_groups.as_mut().unwrap()[0];
                g.covered_resources[0] = "cpu!".into();
                g.flavors[0].resources[0].name = "cpu!".into();
            },
            "spec.resourceGroups[0].coveredResources[0]",
            Invalid,
            "name part must consist of alphanumeric characters",
        ),
        (
            "flavor name not a DNS subdomain",
            |c| c.spec.resource_groups.as_mut().unwrap()[0].flavors[0].name = "Default".into(),
            "spec.resourceGroups[0].flavors[0].name",
            Invalid,
            "a lowercase RFC 1123 subdomain",
        ),
        (
            "cohort name not a DNS subdomain",
            |c| c.spec.cohort_name = Some("Team_A".into()),
            "spec.cohortName",
            Invalid,
            "a lowercase RFC 1123 subdomain",
        ),
        (
            "borrowWithinCohort without reclaimWithinCohort",
            |c| {
                c.spec.preemption = Some(ClusterQueuePreemption {
                    borrow_within_cohort: Some(BorrowWithinCohort {
                        policy: Some(BorrowWithinCohortPolicy::LowerPriority),
                        max_priority_threshold: None,
                    }),
                    ..Default::default()
                });
            },
            "spec.preemption",
            Invalid,
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ),
        (
            "reclaimWithinCohort value not allowed",
            |c| {
                c.spec.preemption = Some(ClusterQueuePreemption {
                    reclaim_within_cohort: Some(PreemptionPolicy::LowerOrNewerEqualPriority),
                    ..Default::default()
                });
            },
            "spec.preemption.reclaimWithinCohort",
            NotSupported,
            "supported values",
        ),
        (
            "preference without TryNextFlavor both ways",
            |c| {
                c.spec.flavor_fungibility = Some(FlavorFungibility {
                    when_can_borrow: None,
                    when_can_preempt: Some(FlavorFungibilityPolicy::TryNextFlavor),
                    preference: Some(FlavorFungibilityPreference::PreemptionOverBorrowing),
                });
            },
            "spec.flavorFungibility.preference",
            Invalid,
            "requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor",
        ),
        (
            "negative fair-sharing weight",
            |c| {
                c.spec.fair_sharing = Some(FairSharing {
                    weight: Some(q("-1")),
                })
            },
            "spec.fairSharing",
            Invalid,
            "must be greater than or equal to 0",
        ),
        (
            "tiny fair-sharing weight",
            |c| {
                c.spec.fair_sharing = Some(FairSharing {
                    weight: Some(q("1n")),
                })
            },
            "spec.fairSharing",
            Invalid,
            "When not 0, weight must be > 10e-9",
        ),
        (
            "selector In without values",
            |c| {
                c.spec.namespace_selector = Some(LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "team".into(),
                        operator: "In".into(),
                        values: None,
                    }]),
                    match_labels: None,
                });
            },
            "spec.namespaceSelector.matchExpressions[0].values",
            Required,
            "must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            "admission check on unknown flavor",
            |c| {
                c.spec.admission_checks_strategy = Some(AdmissionChecksStrategy {
                    admission_checks: vec![AdmissionCheckStrategyRule {
                        name: "prov".into(),
                        on_flavors: Some(vec!["spot".into()]),
                    }],
                });
            },
            "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
            NotSupported,
            "\"spot\": supported values: [\"default\"]",
        ),
        (
            "admission check listed twice",
            |c| {
                let r = AdmissionCheckStrategyRule {
                    name: "prov".into(),
                    on_flavors: None,
                };
                c.spec.admission_checks_strategy = Some(AdmissionChecksStrategy {
                    admission_checks: vec![r.clone(), r],
                });
            },
            "spec.admissionChecksStrategy.admissionChecks[1].name",
            Duplicate,
            "prov",
        ),
    ];
    for (case, mutate, path, kind, rule) in cases {
        let mut c = cq();
        mutate(&mut c);
        check(case, validate_cluster_queue(&c), path, kind, rule);
    }
}

#[test]
fn limits_are_fine_with_a_cohort_and_within_nominal() {
    let cq = ClusterQueue::build("cq")
        .cohort("co")
        .flavor_quotas(
            FlavorQuotas::build("default")
                .resource_with_limits("cpu", "10", Some("5"), Some("10000m"))
                .build(),
        )
        .build();
    assert_eq!(validate_cluster_queue(&cq), vec![]);
}

#[test]
fn cohort_rules() {
    type Mutate = fn(&mut Cohort);
    let cases: Vec<(&str, Mutate, &str, ErrorType, &str)> = vec![
        (
            "limit without parent",
            |c| {
                c.spec.resource_groups = Some(vec![ResourceGroup {
                    covered_resources: vec!["cpu".into()],
                    flavors: vec![
                        FlavorQuotas::build("f")
                            .resource_with_limits("cpu", "1", None, Some("1"))
                            .build(),
                    ],
                }]);
            },
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            Invalid,
            "must be nil when parent is empty",
        ),
        (
            "parent not a DNS subdomain",
            |c| c.spec.parent_name = Some("Root".into()),
            "spec.parentName",
            Invalid,
            "a lowercase RFC 1123 subdomain",
        ),
        (
            "own parent",
            |c| c.spec.parent_name = Some("co".into()),
            "spec.parentName",
            Invalid,
            "a cohort cannot be its own parent",
        ),
        (
            "negative weight",
            |c| {
                c.spec.fair_sharing = Some(FairSharing {
                    weight: Some(q("-2")),
                })
            },
            "spec.fairSharing",
            Invalid,
            "must be greater than or equal to 0",
        ),
    ];
    for (case, mutate, path, kind, rule) in cases {
        let mut c = Cohort::build("co").build();
        mutate(&mut c);
        check(case, validate_cohort(&c), path, kind, rule);
    }
    // Kueue lets a cohort lend more than its own nominal quota (it lends its subtree's).
    let c = Cohort::build("co")
        .parent("root")
        .flavor_quotas(
            FlavorQuotas::build("f")
                .resource_with_limits("cpu", "1", None, Some("5"))
                .build(),
        )
        .build();
    assert_eq!(validate_cohort(&c), vec![]);
}

#[test]
fn resource_flavor_rules() {
    type Mutate = fn(&mut ResourceFlavorSpec);
    let cases: Vec<(&str, Mutate, &str, ErrorType, &str)> = vec![
        (
            "more than 8 node labels",
            |s| s.node_labels = Some((0..9).map(|i| (format!("k{i}"), "v".to_string())).collect()),
            "spec.nodeLabels",
            TooMany,
            "must have at most 8 items",
        ),
        (
            "bad node label value",
            |s| s.node_labels = Some([("k".to_string(), "-v".to_string())].into()),
            "spec.nodeLabels[k]",
            Invalid,
            "a valid label must be an empty string",
        ),
        (
            "bad node label key",
            |s| s.node_labels = Some([("a/b/c".to_string(), "v".to_string())].into()),
            "spec.nodeLabels",
            Invalid,
            "name part must consist",
        ),
        (
            "more than 8 taints",
            |s| s.node_taints = Some((0..9).map(|i| taint(&format!("k{i}"), "NoSchedule")).collect()),
            "spec.nodeTaints",
            TooMany,
            "must have at most 8 items",
        ),
        (
            "unknown taint effect",
            |s| s.node_taints = Some(vec![taint("k", "Sometimes")]),
            "spec.nodeTaints[0].effect",
            NotSupported,
            "supported taint effect values",
        ),
        (
            "duplicate taint",
            |s| s.node_taints = Some(vec![taint("k", "NoSchedule"), taint("k", "NoSchedule")]),
            "spec.nodeTaints[1]",
            Duplicate,
            "taints must be unique by key and effect pair",
        ),
        (
            "more than 8 tolerations",
            |s| {
                s.tolerations = Some(
                    (0..9)
                        .map(|i| toleration(Some(&format!("k{i}")), None, None, None))
                        .collect(),
                )
            },
            "spec.tolerations",
            TooMany,
            "must have at most 8 items",
        ),
        (
            "empty key needs Exists",
            |s| s.tolerations = Some(vec![toleration(None, Some("Equal"), None, None)]),
            "spec.tolerations[0].operator",
            Invalid,
            "operator must be Exists when 'key' is empty",
        ),
        (
            "unknown operator",
            |s| s.tolerations = Some(vec![toleration(Some("k"), Some("Like"), None, None)]),
            "spec.tolerations[0].operator",
            NotSupported,
            "supported toleration values: 'Equal'(default), 'Exists'",
        ),
        (
            "Exists with a value",
            |s| s.tolerations = Some(vec![toleration(Some("k"), Some("Exists"), Some("v"), None)]),
            "spec.tolerations[0].value",
            Invalid,
            "a value must be empty when 'operator' is 'Exists'",
        ),
        (
            "tolerationSeconds without NoExecute",
            |s| {
                let mut t = toleration(Some("k"), None, None, Some("NoSchedule"));
                t.toleration_seconds = Some(5);
                s.tolerations = Some(vec![t]);
            },
            "spec.tolerations[0].effect",
            Invalid,
            "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        ),
        (
            "topology without node labels",
            |s| s.topology_name = Some("default".into()),
            "spec.nodeLabels",
            Required,
            "at least one nodeLabel is required when topology is set",
        ),
    ];
    for (case, mutate, path, kind, rule) in cases {
        let mut spec = ResourceFlavorSpec::default();
        mutate(&mut spec);
        check(
            case,
            validate_resource_flavor(&ResourceFlavor::new("rf", spec)),
            path,
            kind,
            rule,
        );
    }
    let old = ResourceFlavor::build("rf")
        .node_label("a", "b")
        .topology("default")
        .build();
    let new = ResourceFlavor::build("rf")
        .node_label("a", "c")
        .topology("default")
        .build();
    check(
        "topology flavor changed",
        validate_resource_flavor_update(&old, &new),
        "spec",
        Invalid,
        "resourceFlavorSpec are immutable when topologyName is set",
    );
}

#[test]
fn local_queue_rules() {
    let lq = LocalQueue::build("lq", "ns")
        .cluster_queue("Cluster Queue")
        .build();
    check(
        "clusterQueue not a DNS subdomain",
        validate_local_queue(&lq),
        "spec.clusterQueue",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    let old = LocalQueue::build("lq", "ns").cluster_queue("a").build();
    let new = LocalQueue::build("lq", "ns").cluster_queue("b").build();
    check(
        "clusterQueue changed",
        validate_local_queue_update(&old, &new),
        "spec.clusterQueue",
        Invalid,
        "field is immutable",
    );
    assert_eq!(validate_local_queue_update(&old, &old.clone()), vec![]);
}

#[test]
fn workload_rules() {
    type Mutate = fn(&mut Workload);
    let cases: Vec<(&str, Mutate, &str, ErrorType, &str)> = vec![
        (
            "no podsets",
            |w| w.spec.pod_sets.clear(),
            "spec.podSets",
            Required,
            "must have at least 1 item",
        ),
        (
            "more than 18 podsets",
            |w| {
                w.spec.pod_sets = (0..19)
                    .map(|i| podset(&format!("p{i}"), 1, [("cpu", "1")]))
                    .collect()
            },
            "spec.podSets",
            TooMany,
            "must have at most 18 items",
        ),
        (
            "duplicate podset names",
            |w| w.spec.pod_sets.push(podset("main", 1, [])),
            "spec.podSets[1].name",
            Duplicate,
            "\"main\"",
        ),
        (
            "podset name not a DNS label",
            |w| w.spec.pod_sets[0].name = Some("Main".into()),
            "spec.podSets[0].name",
            Invalid,
            "a lowercase RFC 1123 label",
        ),
        (
            "negative count",
            |w| w.spec.pod_sets[0].count = Some(-1),
            "spec.podSets[0].count",
            Invalid,
            "must be greater than or equal to 0",
        ),
        (
            "minCount above count",
            |w| w.spec.pod_sets[0].min_count = Some(3),
            "spec.podSets[0].minCount",
            Invalid,
            "minCount should be less or equal to count",
        ),
        (
            // Kueue v0.20 `test/integration/singlecluster/webhook/core/workload_test.go`
            // "invalid podSet minCount (negative)" (the minimum is 0 since kueue#14720).
            "negative minCount",
            |w| w.spec.pod_sets[0].min_count = Some(-1),
            "spec.podSets[0].minCount",
            Invalid,
            "-1: must be greater than or equal to 0",
        ),
        (
            "minCount on two podsets",
            |w| {
                w.spec.pod_sets[0].min_count = Some(1);
                let mut p = podset("second", 2, []);
                p.min_count = Some(1);
                w.spec.pod_sets.push(p);
            },
            "spec.podSets",
            Invalid,
            "at most one podSet can use minCount",
        ),
        (
            "priorityClassRef without priority",
            |w| w.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class("high")),
            "spec.priority",
            Required,
            "priority should not be nil when priorityClassRef is set",
        ),
        (
            "priorityClassRef kind/group mismatch",
            |w| {
                w.spec.priority = Some(1);
                w.spec.priority_class_ref = Some(PriorityClassRef {
                    group: PriorityClassGroup::Scheduling,
                    kind: PriorityClassKind::WorkloadPriorityClass,
                    name: "x".into(),
                });
            },
            "spec.priorityClassRef.kind",
            Invalid,
            "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
        ),
        (
            "queueName not a DNS subdomain",
            |w| w.spec.queue_name = Some("LQ".into()),
            "spec.queueName",
            Invalid,
            "a lowercase RFC 1123 subdomain",
        ),
        (
            "maximumExecutionTimeSeconds zero",
            |w| w.spec.maximum_execution_time_seconds = Some(0),
            "spec.maximumExecutionTimeSeconds",
            Invalid,
            "must be greater than or equal to 1",
        ),
        (
            "pods resource requested",
            |w| {
                w.spec.pod_sets[0].template.spec.as_mut().unwrap().containers[0]
                    .resources
                    .as_mut()
                    .unwrap()
                    .requests
                    .as_mut()
                    .unwrap()
                    .insert("pods".into(), q("1"));
            },
            "spec.podSets[0].template.spec.containers[0].resources.requests[pods]",
            Invalid,
            "the key is reserved for internal kueue use",
        ),
        (
            "negative request",
            |w| {
                w.spec.pod_sets[0].template.spec.as_mut().unwrap().containers[0]
                    .resources
                    .as_mut()
                    .unwrap()
                    .requests
                    .as_mut()
                    .unwrap()
                    .insert("cpu".into(), q("-1"));
            },
            "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
            Invalid,
            "must be greater than or equal to 0",
        ),
        (
            "quota reserved without admission",
            |w| {
                *w = Workload::build("w", "ns")
                    .podset("main", 2, [("cpu", "1")])
                    .reserve_quota("cq", "default")
                    .build();
                w.status.as_mut().unwrap().admission = None;
            },
            "status.admission",
            Required,
            "must be set while the QuotaReserved condition is true",
        ),
        (
            "assignment count mismatch",
            |w| {
                *w = Workload::build("w", "ns")
                    .podset("main", 2, [("cpu", "1")])
                    .reserve_quota("cq", "default")
                    .build();
                w.spec.pod_sets.push(podset("extra", 1, []));
            },
            "status.admission.podSetAssignments",
            Invalid,
            "podSetAssignments must have the same number of podSets as the spec",
        ),
        (
            "usage not a multiple of count",
            |w| {
                *w = Workload::build("w", "ns")
                    .podset("main", 2, [("cpu", "1")])
                    .reserve_quota("cq", "default")
                    .build();
                w.status
                    .as_mut()
                    .unwrap()
                    .admission
                    .as_mut()
                    .unwrap()
                    .pod_set_assignments[0]
                    .resource_usage
                    .insert("cpu".into(), q("3m"));
            },
            "status.admission.podSetAssignments[0].resourceUsage[cpu]",
            Invalid,
            "is not a multiple of 2",
        ),
        (
            "reclaimable above count",
            |w| {
                w.status = Some(WorkloadStatus {
                    reclaimable_pods: vec![ReclaimablePod {
                        name: "main".into(),
                        count: 3,
                    }],
                    ..Default::default()
                });
            },
            "status.reclaimablePods[main].count",
            Invalid,
            "should be less or equal to 2",
        ),
    ];
    for (case, mutate, path, kind, rule) in cases {
        let mut w = wl();
        mutate(&mut w);
        check(case, validate_workload(&w), path, kind, rule);
    }
    assert_eq!(validate_workload(&wl()), vec![]);
    // Kueue v0.20 (kueue#14720) `webhook/core/workload_test.go` "valid podSet minCount (zero with
    // count zero)" and "(zero with count greater than zero)".
    for count in [0, 3] {
        let mut w = wl();
        w.spec.pod_sets[0].count = Some(count);
        w.spec.pod_sets[0].min_count = Some(0);
        assert_eq!(validate_workload(&w), vec![], "minCount 0, count {count}");
    }
    let admitted = Workload::build("w", "ns")
        .queue("lq")
        .podset("main", 2, [("cpu", "1")])
        .reserve_quota("cq", "default")
        .admitted()
        .build();
    assert_eq!(validate_workload(&admitted), vec![]);
}

#[test]
fn workload_update_rules() {
    let reserved = || {
        Workload::build("w", "ns")
            .queue("lq")
            .podset("main", 2, [("cpu", "1")])
            .reserve_quota("cq", "default")
            .admitted()
            .build()
    };
    type Mutate = fn(&mut Workload);
    let cases: Vec<(&str, Mutate, &str, ErrorType, &str)> = vec![
        (
            "queueName changed while reserved",
            |w| w.spec.queue_name = Some("other".into()),
            "spec.queueName",
            Invalid,
            "queueName is immutable while workload quota reserved",
        ),
        (
            "podset count changed while reserved",
            |w| {
                w.spec.pod_sets[0].count = Some(3);
                w.status.as_mut().unwrap().admission = None;
            },
            "spec.podSets[0]",
            Invalid,
            "field is immutable",
        ),
        (
            "podset added while reserved",
            |w| {
                w.spec.pod_sets.push(podset("extra", 1, []));
                w.status.as_mut().unwrap().admission = None;
            },
            "spec.podSets",
            Invalid,
            "field is immutable",
        ),
        (
            "admission mutated",
            |w| {
                w.status
                    .as_mut()
                    .unwrap()
                    .admission
                    .as_mut()
                    .unwrap()
                    .cluster_queue = "other".into()
            },
            "status.admission",
            Invalid,
            "field is immutable",
        ),
        (
            "priorityClassRef added while reserved",
            |w| {
                w.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class("high"));
                w.spec.priority = Some(1);
            },
            "spec.priorityClassRef",
            Invalid,
            "priorityClassRef is immutable while workload quota reserved",
        ),
        (
            "maximumExecutionTimeSeconds changed while admitted",
            |w| w.spec.maximum_execution_time_seconds = Some(60),
            "spec.maximumExecutionTimeSeconds",
            Invalid,
            "immutable while workload quota reserved",
        ),
    ];
    for (case, mutate, path, kind, rule) in cases {
        let old = reserved();
        let mut new = old.clone();
        mutate(&mut new);
        // A change of podsets cannot keep an admission that no longer matches; clearing it is the
        // eviction path and stays allowed, so these cases clear it to isolate the podset rule.
        if new.admission().is_none() {
            new.status.as_mut().unwrap().conditions.clear();
        }
        check(case, validate_workload_update(&old, &new), path, kind, rule);
    }

    // Allowed: setting or clearing admission, changing the queue before reservation, scaling an
    // elastic workload down, changing a WorkloadPriorityClass name while reserved.
    let pending = Workload::build("w", "ns")
        .queue("lq")
        .podset("main", 2, [("cpu", "1")])
        .build();
    let reserved_now = reserved();
    assert_eq!(validate_workload_update(&pending, &reserved_now), vec![]);
    let mut evicted = reserved_now.clone();
    evicted.status = None;
    assert_eq!(validate_workload_update(&reserved_now, &evicted), vec![]);
    let mut moved = pending.clone();
    moved.spec.queue_name = Some("other".into());
    assert_eq!(validate_workload_update(&pending, &moved), vec![]);

    let elastic = |count| {
        Workload::build("w", "ns")
            .annotation(label::ELASTIC_JOB, "true")
            .queue("lq")
            .podset("main", count, [("cpu", "1")])
            .reserve_quota("cq", "default")
            .build()
    };
    let (old, mut new) = (elastic(4), elastic(2));
    new.status.as_mut().unwrap().admission = None;
    new.status.as_mut().unwrap().conditions.clear();
    assert_eq!(validate_workload_update(&old, &new), vec![]);

    let mut old = reserved();
    old.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class("low"));
    old.spec.priority = Some(1);
    let mut new = old.clone();
    new.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class("high"));
    new.spec.priority = Some(100);
    assert_eq!(validate_workload_update(&old, &new), vec![]);
}

#[test]
fn reclaimable_pods_do_not_shrink_while_reserved() {
    let with = |n| {
        let mut w = Workload::build("w", "ns")
            .podset("main", 4, [("cpu", "1")])
            .reserve_quota("cq", "default")
            .build();
        w.status.as_mut().unwrap().reclaimable_pods = vec![ReclaimablePod {
            name: "main".into(),
            count: n,
        }];
        w
    };
    check(
        "count decreased",
        validate_workload_update(&with(2), &with(1)),
        "status.reclaimablePods[main].count",
        Invalid,
        "cannot be less than 2",
    );
    assert_eq!(validate_workload_update(&with(1), &with(2)), vec![]);
}

#[test]
fn the_upgrade_claim_may_go_but_never_be_added_or_changed() {
    let key = crate::api::kueue::constants::ANNOTATION_UPGRADE_CLAIM;
    let with = |claim: Option<&str>| {
        let b = Workload::build("w", "ns")
            .queue("lq")
            .podset("main", 2, [("cpu", "1")]);
        match claim {
            Some(c) => b.annotation(key, c).build(),
            None => b.build(),
        }
    };
    let (low, high) = (
        Some(r#"{"peak":{"cpu":1000},"done":{"cpu":1000}}"#),
        Some(r#"{"peak":{"cpu":9000},"done":{"cpu":1000}}"#),
    );
    let path = format!("metadata.annotations[{key}]");
    let rule = "may be removed, never added or changed";
    check(
        "lowered",
        validate_workload_update(&with(high), &with(low)),
        &path,
        Invalid,
        rule,
    );
    check(
        "added",
        validate_workload_update(&with(None), &with(low)),
        &path,
        Invalid,
        rule,
    );
    assert_eq!(validate_workload_update(&with(high), &with(None)), vec![]);
    assert_eq!(validate_workload_update(&with(high), &with(high)), vec![]);
}

#[test]
fn workload_priority_class_rules() {
    let mut wpc = workload_priority_class("high", 1000);
    assert_eq!(validate_workload_priority_class(&wpc), vec![]);
    wpc.spec.description = Some("x".repeat(2049));
    check(
        "long description",
        validate_workload_priority_class(&wpc),
        "description",
        TooLong,
        "must have at most 2048 bytes",
    );
}

/// Kueue's own doc sample `admin.minimal-cq.yaml` names `default-flavor` in `onFlavors` without
/// defining that flavor in the queue; Kueue (since #10336, in v0.19) rejects it on create, and so do we.
const REJECTED_BY_KUEUE: &str = "admin.minimal-cq.yaml#0";

#[test]
fn kueue_sample_manifests_validate_clean() {
    let docs = crate::api::kueue::roundtrip_tests::kueue_manifest_docs();
    let mut checked = 0;
    for (name, doc) in docs {
        let errs = match doc["kind"].as_str() {
            Some("ResourceFlavor") => validate_resource_flavor(&serde_json::from_value(doc).unwrap()),
            Some("ClusterQueue") => validate_cluster_queue(&serde_json::from_value(doc).unwrap()),
            Some("Cohort") => validate_cohort(&serde_json::from_value(doc).unwrap()),
            Some("LocalQueue") => validate_local_queue(&serde_json::from_value(doc).unwrap()),
            Some("Workload") => validate_workload(&serde_json::from_value(doc).unwrap()),
            Some("WorkloadPriorityClass") => {
                validate_workload_priority_class(&serde_json::from_value(doc).unwrap())
            }
            _ => continue,
        };
        if name == REJECTED_BY_KUEUE {
            check(
                &name,
                errs,
                "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
                NotSupported,
                "\"default-flavor\": supported values: []",
            );
        } else {
            assert_eq!(errs, vec![], "{name}");
        }
        checked += 1;
    }
    // The fixtures hold 10 documents of these kinds, the upstream samples (where present) 15 more.
    let want = if crate::api::kueue::roundtrip_tests::upstream_kueue_dir().is_some() {
        25
    } else {
        10
    };
    assert!(checked >= want, "only {checked} documents checked");
}

#[test]
fn admission_check_on_flavors_must_name_a_flavor_of_the_queue() {
    let cq = ClusterQueue::build("cq")
        .flavor("default-flavor", [("cpu", "1")])
        .build();
    let mut with_check = cq.clone();
    with_check.spec.admission_checks_strategy = Some(AdmissionChecksStrategy {
        admission_checks: vec![AdmissionCheckStrategyRule {
            name: "p".into(),
            on_flavors: Some(vec!["default-flavor".into()]),
        }],
    });
    assert_eq!(validate_cluster_queue(&with_check), vec![]);
}

fn admission_check(controller: &str, params: Option<(&str, &str, &str)>) -> AdmissionCheck {
    let mut ac = AdmissionCheck::new(
        "foo",
        AdmissionCheckSpec {
            controller_name: controller.into(),
            parameters: params.map(|(g, k, n)| AdmissionCheckParametersReference {
                api_group: g.into(),
                kind: k.into(),
                name: n.into(),
            }),
        },
    );
    ac.metadata.name = Some("foo".into());
    ac
}

/// Kueue `test/integration/singlecluster/webhook/core/admissioncheck_test.go`, the
/// "Should fail to create AdmissionCheck with …" / "Should allow to create …" entries and the
/// update cases ("when changing parameters", "when removing parameters", controllerName immutable).
#[test]
fn admission_check_rules() {
    let good = ("ref.api.group", "RefKind", "ref-name");
    assert_eq!(
        validate_admission_check(&admission_check("controller-name", None)),
        vec![],
        "no parameters"
    );
    assert_eq!(
        validate_admission_check(&admission_check("controller-name", Some(good))),
        vec![],
        "valid spec"
    );
    let cases: Vec<(&str, AdmissionCheck, &str, ErrorType)> = vec![
        (
            "no controller name",
            admission_check("", Some(good)),
            "spec.controllerName",
            Required,
        ),
        (
            "bad ref api group",
            admission_check("c", Some(("ref.api.group/Bad", "RefKind", "ref-name"))),
            "spec.parameters.apiGroup",
            Invalid,
        ),
        (
            "no ref api group",
            admission_check("c", Some(("", "RefKind", "ref-name"))),
            "spec.parameters.apiGroup",
            Required,
        ),
        (
            "bad ref kind",
            admission_check("c", Some(("ref.api.group", "RefKind/Bad", "ref-name"))),
            "spec.parameters.kind",
            Invalid,
        ),
        (
            "no ref kind",
            admission_check("c", Some(("ref.api.group", "", "ref-name"))),
            "spec.parameters.kind",
            Required,
        ),
        (
            "bad ref name",
            admission_check("c", Some(("ref.api.group", "RefKind", "ref-name/Bad"))),
            "spec.parameters.name",
            Invalid,
        ),
        (
            "no ref name",
            admission_check("c", Some(("ref.api.group", "RefKind", ""))),
            "spec.parameters.name",
            Required,
        ),
        (
            "controller name too long",
            admission_check(&"c".repeat(254), None),
            "spec.controllerName",
            TooLong,
        ),
    ];
    for (case, ac, path, kind) in cases {
        check(case, validate_admission_check(&ac), path, kind, "");
    }
    let old = admission_check("controller-name", Some(good));
    let changed = admission_check(
        "controller-name",
        Some(("ref.api.group2", "RefKind2", "ref-name2")),
    );
    assert_eq!(
        validate_admission_check_update(&old, &changed),
        vec![],
        "changing parameters"
    );
    assert_eq!(
        validate_admission_check_update(&old, &admission_check("controller-name", None)),
        vec![],
        "removing parameters"
    );
    check(
        "controller renamed",
        validate_admission_check_update(&old, &admission_check("other", Some(good))),
        "spec.controllerName",
        Invalid,
        "field is immutable",
    );
    check(
        "breaking parameters",
        validate_admission_check_update(
            &old,
            &admission_check("controller-name", Some(("ref.api.group", "RefKind", ""))),
        ),
        "spec.parameters.name",
        Required,
        "",
    );
    // "Defaulting on creating", "All defaults": the admission chain leaves it as written, and refuses
    // a renamed controller on update as the API server's CEL rule does.
    use crate::api::on_write::{Operation, admit};
    let written = serde_json::to_value(admission_check("ac-controller", None)).unwrap();
    let mut admitted = written.clone();
    admit(Operation::Create, &mut admitted, None).expect("valid");
    assert_eq!(admitted, written);
    let mut renamed = serde_json::to_value(admission_check("other", None)).unwrap();
    let errs =
        admit(Operation::Update, &mut renamed, Some(&written)).expect_err("controllerName is immutable");
    assert_eq!(
        errs.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
        ["spec.controllerName"]
    );
    let mut delayed = admission_check(AUTO_READY_CONTROLLER, None);
    delayed.metadata.annotations =
        Some([(READY_AFTER_SECONDS_ANNOTATION.to_string(), "soon".to_string())].into());
    check(
        "bad delay",
        validate_admission_check(&delayed),
        "metadata.annotations[quotagate.x-k8s.io/ready-after-seconds]",
        Invalid,
        "whole number",
    );
}
