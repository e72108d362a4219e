//! Table tests of the RayCluster pod plan and lifecycle.

use super::lifecycle::{Phase, decide, facts, running_conditions};
use super::pods::{GroupView, NewWorker, PodAction, PodInputs, PodView, Recreate, plan_pods};

fn head(name: &str) -> PodView {
    PodView {
        name: name.into(),
        head: true,
        group: "headgroup".into(),
        running: true,
        ready: true,
        ..Default::default()
    }
}

fn worker(name: &str, group: &str, index: usize) -> PodView {
    PodView {
        name: name.into(),
        group: group.into(),
        running: true,
        ready: true,
        replica_index: Some(index),
        ..Default::default()
    }
}

fn group(name: &str, replicas: usize) -> GroupView {
    GroupView {
        name: name.into(),
        replicas,
        hosts: 1,
        workers_to_delete: vec![],
    }
}

fn inputs(pods: Vec<PodView>, groups: Vec<GroupView>) -> PodInputs {
    PodInputs {
        gated: false,
        quota: None,
        recreate: Recreate::Keep,
        autoscaling: false,
        groups,
        pods,
        head_backoff: false,
    }
}

fn single(n: usize) -> Vec<NewWorker> {
    (0..n)
        .map(|i| NewWorker {
            replica_index: i,
            host_index: 0,
            replica_ordinal: i,
        })
        .collect()
}

fn del(name: &str, reason: &'static str) -> PodAction {
    PodAction::DeletePod {
        name: name.into(),
        reason,
    }
}

#[test]
fn pod_plan_table() {
    let cases: Vec<(&str, PodInputs, Vec<PodAction>)> = vec![
        (
            "empty cluster: head and all workers",
            inputs(vec![], vec![group("g", 2)]),
            vec![
                PodAction::CreateHead,
                PodAction::CreateWorkers {
                    group: "g".into(),
                    workers: single(2),
                },
            ],
        ),
        (
            "steady",
            inputs(
                vec![head("h"), worker("w0", "g", 0), worker("w1", "g", 1)],
                vec![group("g", 2)],
            ),
            vec![],
        ),
        (
            "missing worker gets the free index",
            inputs(vec![head("h"), worker("w1", "g", 1)], vec![group("g", 2)]),
            vec![PodAction::CreateWorkers {
                group: "g".into(),
                workers: vec![NewWorker {
                    replica_index: 0,
                    host_index: 0,
                    replica_ordinal: 0,
                }],
            }],
        ),
        (
            "surplus removed, not-ready first, without autoscaling",
            inputs(
                vec![
                    head("h"),
                    worker("w0", "g", 0),
                    PodView {
                        ready: false,
                        ..worker("w1", "g", 1)
                    },
                    worker("w2", "g", 2),
                ],
                vec![group("g", 1)],
            ),
            vec![
                del("w1", "more replicas than desired"),
                del("w2", "more replicas than desired"),
            ],
        ),
        (
            "failed worker replaced on the next pass",
            inputs(
                vec![
                    head("h"),
                    PodView {
                        unhealthy: true,
                        ..worker("w0", "g", 0)
                    },
                ],
                vec![group("g", 1)],
            ),
            vec![del("w0", "unhealthy worker replica")],
        ),
        (
            "failed head deleted",
            inputs(
                vec![PodView {
                    unhealthy: true,
                    ..head("h")
                }],
                vec![],
            ),
            vec![del("h", "the head pod failed")],
        ),
        (
            "terminating head: wait, no second head",
            inputs(
                vec![PodView {
                    deleting: true,
                    ..head("h")
                }],
                vec![],
            ),
            vec![],
        ),
        (
            "workersToDelete then refill to the desired count",
            inputs(
                vec![head("h"), worker("w0", "g", 0), worker("w1", "g", 1)],
                vec![GroupView {
                    workers_to_delete: vec!["w0".into()],
                    ..group("g", 2)
                }],
            ),
            vec![
                del("w0", "listed in workersToDelete"),
                PodAction::CreateWorkers {
                    group: "g".into(),
                    workers: vec![NewWorker {
                        replica_index: 0,
                        host_index: 0,
                        replica_ordinal: 0,
                    }],
                },
            ],
        ),
        (
            "removed group's pods deleted",
            inputs(vec![head("h"), worker("x0", "gone", 0)], vec![]),
            vec![del("x0", "its worker group was removed")],
        ),
        (
            "multi-host: whole replicas of numOfHosts pods",
            inputs(
                vec![head("h")],
                vec![GroupView {
                    hosts: 2,
                    ..group("tpu", 1)
                }],
            ),
            vec![PodAction::CreateWorkers {
                group: "tpu".into(),
                workers: vec![
                    NewWorker {
                        replica_index: 0,
                        host_index: 0,
                        replica_ordinal: 0,
                    },
                    NewWorker {
                        replica_index: 0,
                        host_index: 1,
                        replica_ordinal: 0,
                    },
                ],
            }],
        ),
        (
            "multi-host: an incomplete replica is deleted as a whole",
            inputs(
                vec![
                    head("h"),
                    PodView {
                        replica_name: Some("tpu-abc".into()),
                        ..worker("t0", "tpu", 0)
                    },
                ],
                vec![GroupView {
                    hosts: 2,
                    ..group("tpu", 1)
                }],
            ),
            vec![del("t0", "unhealthy worker replica")],
        ),
        (
            "gated: nothing is created",
            PodInputs {
                gated: true,
                ..inputs(vec![], vec![group("g", 3)])
            },
            vec![],
        ),
        (
            "gated with pods: they go",
            PodInputs {
                gated: true,
                ..inputs(vec![head("h")], vec![])
            },
            vec![PodAction::DeleteAll {
                reason: "the admission gate is closed",
            }],
        ),
        (
            "Recreate: spec hash changed, everything goes",
            PodInputs {
                recreate: Recreate::All,
                ..inputs(vec![head("h"), worker("w0", "g", 0)], vec![group("g", 1)])
            },
            vec![PodAction::DeleteAll {
                reason: "the spec changed and upgradeStrategy is Recreate",
            }],
        ),
        (
            "Recreate: operator version change only re-stamps",
            PodInputs {
                recreate: Recreate::Restamp,
                ..inputs(vec![head("h"), worker("w0", "g", 0)], vec![group("g", 1)])
            },
            vec![PodAction::RestampHead { name: "h".into() }],
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(plan_pods(&input), want, "{name}");
    }
}

#[test]
fn autoscaler_owns_scale_down() {
    let mut i = inputs(
        vec![head("h"), worker("w0", "g", 0), worker("w1", "g", 1)],
        vec![group("g", 1)],
    );
    i.autoscaling = true;
    assert_eq!(plan_pods(&i), vec![]);
}

#[test]
fn suspend_machine() {
    let i = inputs(vec![head("h"), worker("w0", "g", 0)], vec![group("g", 1)]);
    // Request: stage only.
    let d = decide(true, false, false, &i);
    assert_eq!((d.phase, d.pods.len()), (Phase::Suspending, 0));
    assert_eq!(d.conditions[0].type_, "RayClusterSuspending");
    // Suspending: delete all, even when suspend flipped back.
    let d = decide(false, true, false, &i);
    assert_eq!(
        d.pods,
        vec![PodAction::DeleteAll {
            reason: "the cluster is suspending"
        }]
    );
    // Pods terminating: wait.
    let terminating = inputs(
        vec![PodView {
            deleting: true,
            ..head("h")
        }],
        vec![],
    );
    assert!(decide(false, true, false, &terminating).pods.is_empty());
    assert_eq!(decide(false, true, false, &terminating).phase, Phase::Suspending);
    // Gone: Suspended and no longer provisioned.
    let empty = inputs(vec![], vec![group("g", 1)]);
    let d = decide(true, true, false, &empty);
    assert_eq!(d.phase, Phase::Suspended);
    let types: Vec<(&str, &str, &str)> = d
        .conditions
        .iter()
        .map(|c| (c.type_, c.status, c.reason))
        .collect();
    // Source: KubeRay raycluster_controller calculateStatus, suspending with no pod left.
    assert_eq!(
        types,
        [
            ("RayClusterSuspending", "False", "RayClusterSuspending"),
            ("RayClusterSuspended", "True", "RayClusterSuspended"),
            ("RayClusterProvisioned", "False", "RayClusterPodsProvisioning"),
            ("HeadPodReady", "False", "HeadPodNotFound")
        ]
    );
    // Stays suspended.
    assert_eq!(decide(true, false, true, &empty).pods, vec![]);
    // Found by `chaos --scenario clusters` (seed 22): resumed, its head created, the status write
    // lost, then suspended again. The stale Suspended status must not keep that head running.
    let stale = inputs(vec![head("h")], vec![group("g", 1)]);
    let d = decide(true, false, true, &stale);
    assert_eq!(
        (d.phase, d.conditions[0].type_, d.conditions[0].status),
        (Phase::Suspending, "RayClusterSuspending", "True")
    );
    // Found by `chaos --scenario clusters` (seed 873): Suspended must turn False in the same write,
    // or the API refuses the status (both True) on every retry and the head runs on.
    assert_eq!(
        (d.conditions[1].type_, d.conditions[1].status),
        ("RayClusterSuspended", "False")
    );
    assert_eq!(
        decide(true, true, false, &stale).pods,
        vec![PodAction::DeleteAll {
            reason: "the cluster is suspending"
        }]
    );
    // Resume: pods planned in the same pass.
    let d = decide(false, false, true, &empty);
    assert_eq!(d.phase, Phase::Running);
    assert_eq!(
        (d.conditions[0].status, d.conditions[0].reason),
        ("False", "RayClusterSuspended")
    );
    assert_eq!(d.pods[0], PodAction::CreateHead);
}

#[test]
fn facts_and_conditions() {
    let pods = vec![
        head("h"),
        worker("w0", "g", 0),
        PodView {
            ready: false,
            ..worker("w1", "g", 1)
        },
    ];
    let f = facts(&pods, 2);
    assert_eq!((f.ready_workers, f.available_workers, f.all_ready), (1, 2, false));
    let c = running_conditions(&f, false);
    assert_eq!((c[0].status, c[0].reason), ("True", "HeadPodRunningAndReady"));
    assert_eq!(
        (c[1].status, c[1].reason),
        ("False", "RayClusterPodsProvisioning")
    );
    // Provisioned is sticky once reached.
    assert_eq!(running_conditions(&f, true)[1].status, "True");
    let all = vec![head("h"), worker("w0", "g", 0)];
    assert!(facts(&all, 1).all_ready);
    assert_eq!(
        running_conditions(&facts(&[], 1), false)[0].reason,
        "HeadPodNotFound"
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn arb_pod() -> impl Strategy<Value = PodView> {
        (
            any::<bool>(),
            0..3usize,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            0..4usize,
        )
            .prop_map(|(head, group, ready, unhealthy, deleting, idx)| PodView {
                name: format!("p-{head}-{group}-{idx}-{ready}-{unhealthy}-{deleting}"),
                head,
                group: if head {
                    "headgroup".into()
                } else {
                    format!("g{group}")
                },
                running: true,
                ready,
                unhealthy,
                deleting,
                replica_index: Some(idx),
                ..Default::default()
            })
    }

    fn arb_inputs() -> impl Strategy<Value = PodInputs> {
        (
            prop::collection::vec(arb_pod(), 0..8),
            prop::collection::vec((0..4usize, 1..3usize), 0..3),
            any::<bool>(),
            any::<bool>(),
            prop::sample::select(vec![Recreate::Keep, Recreate::Restamp, Recreate::All]),
        )
            .prop_map(|(pods, groups, gated, autoscaling, recreate)| {
                let mut seen = std::collections::BTreeSet::new();
                let pods = pods.into_iter().filter(|p| seen.insert(p.name.clone())).collect();
                let groups = groups
                    .into_iter()
                    .enumerate()
                    .map(|(i, (replicas, hosts))| GroupView {
                        name: format!("g{i}"),
                        replicas,
                        hosts,
                        workers_to_delete: vec![],
                    })
                    .collect();
                PodInputs {
                    gated,
                    quota: None,
                    recreate,
                    autoscaling,
                    groups,
                    pods,
                    head_backoff: false,
                }
            })
    }

    proptest! {
        /// I2 where pods are created: a gated cluster never gets a pod.
        #[test]
        fn gated_clusters_create_nothing(i in arb_inputs()) {
            let mut i = i;
            i.gated = true;
            let plan = plan_pods(&i);
            prop_assert!(!plan.iter().any(|a| matches!(a, PodAction::CreateHead | PodAction::CreateWorkers { .. })), "{:?}", plan);
        }

        /// Never more than one head, never more workers per group than desired, never a delete of a
        /// pod that is already terminating.
        #[test]
        fn creates_stay_within_the_desired_counts(i in arb_inputs()) {
            let plan = plan_pods(&i);
            let heads = plan.iter().filter(|a| matches!(a, PodAction::CreateHead)).count();
            prop_assert!(heads <= 1);
            for a in &plan {
                match a {
                    PodAction::CreateWorkers { group, workers } => {
                        let g = i.groups.iter().find(|g| &g.name == group).unwrap();
                        prop_assert!(workers.len() <= g.replicas * g.hosts.max(1));
                    }
                    PodAction::DeletePod { name, .. } => {
                        prop_assert!(i.pods.iter().any(|p| &p.name == name && !p.deleting));
                    }
                    _ => {}
                }
            }
        }
    }
}

// Issue 13 item 2: `replicas: 2147483647` used to materialise every missing pod in one plan (RSS
// grew by 500 MB/s). A pass creates at most MAX_PODS_PER_PASS pods; multi-host replicas stay whole.
#[test]
fn huge_replica_counts_are_created_in_bounded_batches() {
    use super::pods::MAX_PODS_PER_PASS;
    let created = |plan: &[PodAction]| -> usize {
        plan.iter()
            .map(|a| match a {
                PodAction::CreateWorkers { workers, .. } => workers.len(),
                _ => 0,
            })
            .sum()
    };
    let huge = usize::try_from(i32::MAX).unwrap();
    let plan = plan_pods(&inputs(vec![head("h")], vec![group("g", huge)]));
    assert_eq!(created(&plan), MAX_PODS_PER_PASS);
    let multi = GroupView {
        hosts: 64,
        ..group("m", huge)
    };
    let plan = plan_pods(&inputs(vec![head("h")], vec![multi]));
    assert_eq!(
        created(&plan),
        (MAX_PODS_PER_PASS / 64) * 64,
        "whole replicas of 64 hosts"
    );
    let wide = GroupView {
        hosts: 2_000,
        ..group("w", huge)
    };
    let plan = plan_pods(&inputs(vec![head("h")], vec![wide]));
    assert_eq!(
        created(&plan),
        2_000,
        "one replica wider than a batch is still created whole"
    );
}

#[test]
fn status_patches_null_what_went_away() {
    use crate::api::merge_patch::merge_diff;
    use serde_json::json;
    let old = json!({"state": "suspended", "head": {"podName": "h", "podIP": "1.2.3.4", "serviceName": "s"}, "n": 1});
    let new = json!({"head": {"serviceName": "s"}, "n": 2});
    let patch = merge_diff(&old, &new);
    assert_eq!(
        patch,
        json!({"state": null, "head": {"podName": null, "podIP": null}, "n": 2})
    );
    let mut applied = old.clone();
    json_patch::merge(&mut applied, &patch);
    assert_eq!(applied, new);
}

/// A queue-managed cluster's terminating worker keeps its share of the reservation until it is gone:
/// its replacement is created only then (KubeRay alone replaces it at once).
#[test]
fn a_quota_gated_replacement_waits_for_the_terminating_pod() {
    let quota = Some([("head".to_string(), 1), ("g".to_string(), 2)].into());
    let gone = PodView {
        deleting: true,
        ..worker("w2", "g", 1)
    };
    let terminating = PodInputs {
        quota: quota.clone(),
        ..inputs(vec![head("h"), worker("w1", "g", 0), gone], vec![group("g", 2)])
    };
    assert_eq!(plan_pods(&terminating), vec![], "the replacement waits");
    let after = PodInputs {
        quota,
        ..inputs(vec![head("h"), worker("w1", "g", 0)], vec![group("g", 2)])
    };
    let created = plan_pods(&after);
    assert!(
        matches!(created.as_slice(), [PodAction::CreateWorkers { workers, .. }] if workers.len() == 1),
        "{created:?}"
    );
    // Without quota (not queue-managed), KubeRay's behaviour: replaced at once.
    let plain = inputs(
        vec![
            head("h"),
            worker("w1", "g", 0),
            PodView {
                deleting: true,
                ..worker("w2", "g", 1)
            },
        ],
        vec![group("g", 2)],
    );
    assert_eq!(plan_pods(&plain).len(), 1);
}
