//! The Job adapter against Kueue's expectations (`pkg/controller/jobs/job/job_controller_test.go`,
//! the cases observable without a cluster), and the generic reconciler's decisions for Jobs.

use super::*;
use crate::admission as conditions;
use crate::api::kueue::constants::label;
use crate::api::kueue::{Admission, PodSetAssignment};
use crate::jobframework::names::NameLength;
use crate::jobframework::workload::workload_name_for_job;
use crate::jobframework::{Step, plan};
use serde_json::json;

fn job(parallelism: i32, completions: Option<i32>, annotations: serde_json::Value) -> BatchJob {
    let mut spec = json!({
        "parallelism": parallelism,
        "suspend": true,
        "template": {
            "metadata": {"labels": {"app": "x", b::JOB_NAME_LABEL: "j", b::CONTROLLER_UID_LABEL: "u1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
        }
    });
    if let Some(c) = completions {
        spec["completions"] = json!(c);
    }
    BatchJob::new(
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "uid": "u1", "labels": {label::QUEUE_NAME: "lq"}, "annotations": annotations},
            "spec": spec,
        }))
        .unwrap(),
    )
}

fn info(count: i32) -> PodSetInfo {
    PodSetInfo {
        name: "main".into(),
        count,
        node_selector: [("pool".to_string(), "spot".to_string())].into(),
        tolerations: vec![
            serde_json::from_value(json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"}))
                .unwrap(),
        ],
        ..Default::default()
    }
}

fn set_status(j: &mut BatchJob, status: serde_json::Value) {
    j.job.status = Some(serde_json::from_value(status).unwrap());
}

// Kueue: job_controller_test.go TestPodSets / TestPodsReady-like cases: count = parallelism, or the
// completions when fewer; the Job controller's labels stay off the podset.
#[test]
fn one_main_podset_of_kueues_count_without_the_job_controllers_labels() {
    let ps = job(3, None, json!({})).pod_sets().unwrap();
    assert_eq!(
        (ps.len(), ps[0].name(), ps[0].count(), ps[0].min_count),
        (1, "main", 3, None)
    );
    let labels = ps[0].template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert_eq!(labels, [("app".to_string(), "x".to_string())].into());
    assert_eq!(job(5, Some(2), json!({})).pod_sets().unwrap()[0].count(), 2);
    assert_eq!(job(5, Some(9), json!({})).pod_sets().unwrap()[0].count(), 5);
    let partial = job(5, None, json!({b::JOB_MIN_PARALLELISM: "2"}))
        .pod_sets()
        .unwrap();
    assert_eq!((partial[0].count(), partial[0].min_count), (5, Some(2)));
}

// Kueue: job_controller_test.go TestReclaimablePods.
#[test]
fn reclaimable_pods_are_kueues() {
    type Case = (&'static str, i32, Option<i32>, i32, Vec<ReclaimablePod>);
    let cases: Vec<Case> = vec![
        ("no succeeded", 5, Some(10), 0, vec![]),
        ("remaining above parallelism", 5, Some(10), 4, vec![]),
        (
            "remaining below parallelism",
            5,
            Some(10),
            7,
            vec![ReclaimablePod {
                name: "main".into(),
                count: 2,
            }],
        ),
        ("parallelism 1", 1, Some(10), 9, vec![]),
        (
            "completions unset",
            3,
            None,
            1,
            vec![ReclaimablePod {
                name: "main".into(),
                count: 1,
            }],
        ),
    ];
    for (name, p, c, succeeded, want) in cases {
        let mut j = job(p, c, json!({}));
        set_status(&mut j, json!({"succeeded": succeeded}));
        assert_eq!(j.reclaimable_pods(), want, "{name}");
    }
}

// Kueue: job_controller_test.go "when job is admitted with partial admission, parallelism is set" and
// "restores parallelism on stop"; RunWithPodSetsInfo / RestorePodSetsInfo.
#[test]
fn admission_injects_the_flavor_and_the_admitted_count_and_stopping_restores_them() {
    let mut j = job(5, Some(10), json!({b::JOB_MIN_PARALLELISM: "2"}));
    let originals: Vec<PodSetInfo> = j
        .pod_sets()
        .unwrap()
        .iter()
        .map(PodSetInfo::from_podset)
        .collect();
    j.run_with_podsets_info(&[info(3)]).unwrap();
    assert!(!j.is_suspended());
    let spec = j.job.spec.clone().unwrap();
    assert_eq!(
        (spec.parallelism, spec.completions),
        (Some(3), Some(10)),
        "completions untouched without the sync annotation"
    );
    let pod = spec.template.spec.clone().unwrap();
    assert_eq!(pod.node_selector.unwrap()["pool"], "spot");
    assert_eq!(pod.tolerations.unwrap().len(), 1);
    assert_eq!(
        j.pod_sets().unwrap()[0].count(),
        3,
        "the job now asks for what was admitted"
    );

    j.suspend();
    assert!(j.restore_podsets_info(&originals));
    let spec = j.job.spec.clone().unwrap();
    assert_eq!(spec.parallelism, Some(5));
    let pod = spec.template.spec.clone().unwrap();
    assert!(pod.node_selector.is_none_or(|s| s.is_empty()));
    assert!(pod.tolerations.is_none_or(|t| t.is_empty()));
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(
        labels.get(b::CONTROLLER_UID_LABEL).map(String::as_str),
        Some("u1"),
        "the Job controller's labels stay"
    );
    assert!(
        !j.restore_podsets_info(&originals),
        "restoring twice changes nothing"
    );

    let mut plain = job(4, None, json!({}));
    plain.run_with_podsets_info(&[info(2)]).unwrap();
    assert_eq!(
        plain.job.spec.as_ref().unwrap().parallelism,
        Some(4),
        "no partial admission: parallelism is the user's"
    );
    assert!(matches!(
        plain.run_with_podsets_info(&[info(1), info(1)]),
        Err(JobFrameworkError::PodSetsInfoLength { want: 1, got: 2 })
    ));
}

// Kueue: job_webhook_test.go / job_controller_test.go with job-completions-equal-parallelism.
#[test]
fn completions_follow_parallelism_when_asked() {
    let mut j = job(
        4,
        Some(4),
        json!({b::JOB_MIN_PARALLELISM: "1", b::JOB_COMPLETIONS_EQUAL_PARALLELISM: "true"}),
    );
    j.run_with_podsets_info(&[info(2)]).unwrap();
    let spec = j.job.spec.clone().unwrap();
    assert_eq!((spec.parallelism, spec.completions), (Some(2), Some(2)));
    j.restore_podsets_info(&[PodSetInfo {
        name: "main".into(),
        count: 4,
        ..Default::default()
    }]);
    let spec = j.job.spec.clone().unwrap();
    assert_eq!((spec.parallelism, spec.completions), (Some(4), Some(4)));
}

// Kueue: job_controller_test.go Finished: Complete or Failed with status True, with its message.
#[test]
fn finished_by_the_complete_or_failed_condition() {
    let mut j = job(1, None, json!({}));
    assert_eq!(j.finished(), None);
    set_status(
        &mut j,
        json!({"conditions": [{"type": "Suspended", "status": "True"}, {"type": "Complete", "status": "False"}]}),
    );
    assert_eq!(j.finished(), None);
    set_status(
        &mut j,
        json!({"conditions": [{"type": "Complete", "status": "True", "message": "Reached expected number of succeeded pods"}]}),
    );
    assert_eq!(
        j.finished(),
        Some(Finished {
            success: true,
            message: "Reached expected number of succeeded pods".into()
        })
    );
    set_status(
        &mut j,
        json!({"conditions": [{"type": "Failed", "status": "True", "message": "Job has reached the specified backoff limit"}]}),
    );
    assert_eq!(
        j.finished(),
        Some(Finished {
            success: false,
            message: "Job has reached the specified backoff limit".into()
        })
    );
}

// Kueue: job_controller_test.go PodsReady: succeeded + ready ≥ pod count.
#[test]
fn pods_ready_counts_succeeded_and_ready() {
    let mut j = job(3, Some(4), json!({}));
    set_status(&mut j, json!({"ready": 2, "succeeded": 0}));
    assert!(!j.pods_ready());
    set_status(&mut j, json!({"ready": 2, "succeeded": 1}));
    assert!(j.pods_ready());
    set_status(&mut j, json!({"active": 2}));
    assert!(j.is_active());
}

// Kueue: workload_names_test.go / job_controller.go GetWorkloadNameForJob: `job-<name>-<hash>`.
#[test]
fn the_workload_is_named_as_kueue_names_it() {
    let mut j = job(1, None, json!({}));
    j.job.metadata.name = Some("name".into());
    j.job.metadata.uid = Some("uid".into());
    assert_eq!(
        workload_name_for_job(&j, NameLength::Long).unwrap(),
        "job-name-ef3a1"
    );
}

fn wl_for(j: &BatchJob, reserved: bool, evicted: bool) -> Workload {
    let mut w = Workload::build("w", "default").queue("lq").build();
    w.spec.pod_sets = j.pod_sets().unwrap();
    let now = jiff::Timestamp::UNIX_EPOCH;
    if reserved {
        let assignments = w
            .spec
            .pod_sets
            .iter()
            .map(|p| PodSetAssignment {
                name: p.name().into(),
                count: p.count,
                ..Default::default()
            })
            .collect();
        w.status = Some(conditions::admitted(
            &w,
            Admission {
                cluster_queue: "cq".into(),
                pod_set_assignments: assignments,
            },
            now,
        ));
    }
    if evicted {
        let cause = conditions::EvictionCause {
            by: conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
            message: "m".into(),
        };
        w.status = conditions::evicted(&w, &cause, now);
    }
    w
}

// Kueue: jobframework reconciler order as job_controller_test.go TestReconciler exercises it for
// Jobs ("when workload is admitted, job gets unsuspended", "when workload is evicted, suspended is
// reset", "when job completes, workload is marked as finished", "non-matching workload is deleted").
#[test]
fn the_reconciler_runs_jobs_in_kueues_order() {
    let suspended = job(2, None, json!({}));
    let mut running = job(2, None, json!({}));
    running.job.spec.as_mut().unwrap().suspend = Some(false);
    let mut complete = job(2, None, json!({}));
    set_status(
        &mut complete,
        json!({"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}),
    );
    let mut done = wl_for(&complete, true, false);
    done.status
        .as_mut()
        .unwrap()
        .conditions
        .push(crate::api::conditions::new(
            "Finished",
            true,
            "Succeeded",
            "done",
            None,
            jiff::Timestamp::UNIX_EPOCH,
        ));
    let mut partial = job(5, None, json!({b::JOB_MIN_PARALLELISM: "2"}));
    let mut partial_wl = wl_for(&partial, true, false);
    partial_wl
        .status
        .as_mut()
        .unwrap()
        .admission
        .as_mut()
        .unwrap()
        .pod_set_assignments[0]
        .count = Some(3);
    partial.run_with_podsets_info(&[info(3)]).unwrap();
    let bigger = job(4, None, json!({}));
    let cases: Vec<(&str, &BatchJob, Vec<Workload>, Step)> = vec![
        ("suspended, no workload", &suspended, vec![], Step::CreateWorkload),
        ("running, no workload", &running, vec![], Step::SuspendThenCreate),
        (
            "admitted",
            &suspended,
            vec![wl_for(&suspended, true, false)],
            Step::Start("w".into()),
        ),
        (
            "pending, running",
            &running,
            vec![wl_for(&running, false, false)],
            Step::Suspend,
        ),
        (
            "evicted while running",
            &running,
            vec![wl_for(&running, true, true)],
            Step::Stop("w".into()),
        ),
        (
            "parallelism changed while pending",
            &suspended,
            vec![wl_for(&bigger, false, false)],
            Step::DeleteWorkloads(vec!["w".into()]),
        ),
        (
            "partially admitted and running on 3 of 5",
            &partial,
            vec![partial_wl],
            Step::Nothing,
        ),
        (
            "complete",
            &complete,
            vec![wl_for(&complete, true, false)],
            Step::Finish {
                name: "w".into(),
                finished: Finished {
                    success: true,
                    message: "done".into(),
                },
            },
        ),
        (
            "complete, workload finished",
            &complete,
            vec![done],
            Step::Nothing,
        ),
        (
            "complete, no workload: none is created",
            &complete,
            vec![],
            Step::Nothing,
        ),
    ];
    for (name, j, wls, want) in cases {
        let refs: Vec<&Workload> = wls.iter().collect();
        assert_eq!(plan(j, &refs).unwrap(), want, "{name}");
    }
}

// Kueue: pkg/controller/jobframework/reconciler.go step 4, as job_controller_test.go TestReconciler
// "reclaimable pods are updated" sees it: a running Job with fewer completions left than it runs in
// parallel has its reclaimable pods written into its Workload once; written, nothing more. Counts
// are capped at the podset's size (`LimitReclaimablePodsToPodSetSizes`).
#[test]
fn a_running_jobs_reclaimable_pods_are_written_into_its_workload() {
    let mut j = job(5, Some(10), json!({}));
    j.run_with_podsets_info(&[info(5)]).unwrap();
    set_status(&mut j, json!({"succeeded": 7, "active": 3}));
    let mut wl = crate::api::kueue::Workload::build("w", "default")
        .queue("lq")
        .build();
    wl.spec.pod_sets = job(5, Some(10), json!({})).pod_sets().unwrap();
    let assignments = vec![PodSetAssignment {
        name: "main".into(),
        count: Some(5),
        ..Default::default()
    }];
    wl.status = Some(conditions::admitted(
        &wl,
        Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: assignments,
        },
        jiff::Timestamp::UNIX_EPOCH,
    ));
    let want = vec![ReclaimablePod {
        name: "main".into(),
        count: 2,
    }];
    assert_eq!(
        plan(&j, &[&wl]).unwrap(),
        Step::UpdateReclaimablePods {
            name: "w".into(),
            pods: want.clone()
        }
    );
    wl.status.as_mut().unwrap().reclaimable_pods = want;
    assert_eq!(plan(&j, &[&wl]).unwrap(), Step::Nothing);
    let capped = crate::jobframework::reclaimable::limited(
        &wl,
        vec![ReclaimablePod {
            name: "main".into(),
            count: 9,
        }],
    );
    assert_eq!(
        capped,
        vec![ReclaimablePod {
            name: "main".into(),
            count: 5
        }]
    );
}

fn indexed(parallelism: i32, completions: i32, status: serde_json::Value) -> BatchJob {
    let mut j = job(parallelism, Some(completions), json!({}));
    j.job.spec.as_mut().unwrap().completion_mode = Some("Indexed".into());
    set_status(&mut j, status);
    j
}

// Kueue: job_controller_test.go TestReclaimablePods (every case: an Indexed Job counts its terminal
// indexes, not `status.succeeded`), and the integration specs "Should not wedge the reconciler when
// scaling down below the accumulated succeeded count" (kueue#12670) and "Should not over-reserve quota
// for a non-indexed Job after a scale-down" (kueue#13117), at the Job's end of them.
#[test]
fn reclaimable_pods_count_terminal_indexes_and_survive_a_scale_down() {
    let main = |count| {
        vec![ReclaimablePod {
            name: "main".into(),
            count,
        }]
    };
    assert_eq!(
        indexed(8, 8, json!({"succeeded": 4, "completedIndexes": "0-3"})).reclaimable_pods(),
        main(4),
        "completed indexes"
    );
    let mut retryable = indexed(
        8,
        8,
        json!({"succeeded": 1, "failed": 1, "completedIndexes": "0"}),
    );
    retryable.job.spec.as_mut().unwrap().backoff_limit_per_index = Some(1);
    assert_eq!(
        retryable.reclaimable_pods(),
        main(1),
        "a retryable failure holds its quota"
    );
    assert_eq!(
        indexed(
            8,
            8,
            json!({"succeeded": 1, "failed": 1, "completedIndexes": "0", "failedIndexes": "1"})
        )
        .reclaimable_pods(),
        main(2),
        "completed and failed indexes"
    );
    assert_eq!(
        indexed(8, 8, json!({"succeeded": 4})).reclaimable_pods(),
        vec![],
        "counters without index sets hold the quota"
    );
    // Scaled from 8 to 3 after indexes 0-3 completed: 3 of the 3 are done, never 4 of 3.
    assert_eq!(
        indexed(3, 3, json!({"succeeded": 4, "completedIndexes": "0-3"})).reclaimable_pods(),
        main(3)
    );
    // A stale failed index removed by the scale-down counts for nothing (kueue#13552).
    assert_eq!(
        indexed(3, 3, json!({"failed": 1, "failedIndexes": "4"})).reclaimable_pods(),
        vec![]
    );
    // Non-indexed, 20 → 10 after 15 succeeded: the 5 still running keep their quota.
    let mut j = job(10, Some(20), json!({}));
    set_status(&mut j, json!({"succeeded": 15}));
    assert_eq!(j.reclaimable_pods(), main(5));
    // More succeeded than completions left (a scale-down below them): every pod is reclaimable, no more.
    let mut below = job(3, Some(3), json!({}));
    set_status(&mut below, json!({"succeeded": 4}));
    assert_eq!(below.reclaimable_pods(), main(3));
}

fn elastic(parallelism: i32, generation: i64) -> BatchJob {
    let mut j = job(
        parallelism,
        Some(parallelism),
        json!({label::ELASTIC_JOB: "true"}),
    );
    j.job.metadata.generation = Some(generation);
    j
}

fn running(mut j: BatchJob) -> BatchJob {
    let mut info = info(j.pod_sets().unwrap()[0].count());
    info.labels.insert(label::PODSET.into(), "main".into());
    info.annotations
        .insert(label::WORKLOAD_SLICE_NAME.into(), "w".into());
    j.run_with_podsets_info(&[info]).unwrap();
    j
}

fn replacing(mut w: Workload, name: &str, old: &str) -> Workload {
    w.metadata.name = Some(name.into());
    w.metadata.annotations = Some(
        [(
            label::WORKLOAD_SLICE_REPLACEMENT_FOR.to_string(),
            format!("default/{old}"),
        )]
        .into(),
    );
    w
}

// Kueue: pkg/workloadslicing/workloadslicing_test.go TestEnsureWorkloadSlices, for a batch Job
// ("OneWorkloadSlice_CurrentWorkload", "..._ReservedQuota_ScaleUp", "..._ReservedQuota_ScaleDown",
// "..._UnreservedQuota_ScaleUp", "..._UnreservedQuota_ScaleDown", "TwoWorkloadSlices_NewIsUnreserved..."),
// and reconciler.go step 8: an elastic Job running while its new slice waits is not suspended (its new
// pods wait behind the elastic-job scheduling gate instead).
#[test]
fn an_elastic_jobs_parallelism_changes_become_slices_as_kueue_makes_them() {
    let at3 = running(elastic(3, 1));
    let admitted3 = wl_for(&elastic(3, 1), true, false);
    let pending3 = wl_for(&elastic(3, 1), false, false);
    let cases: Vec<(&str, BatchJob, Vec<Workload>, Step)> = vec![
        (
            "admitted, unchanged",
            running(elastic(3, 1)),
            vec![admitted3.clone()],
            Step::Nothing,
        ),
        (
            "admitted, scaled up: a new slice",
            running_at(&at3, 5, 2),
            vec![admitted3.clone()],
            Step::CreateSlice { replaces: "w".into() },
        ),
        (
            "admitted, scaled down: in place",
            running_at(&at3, 1, 2),
            vec![admitted3.clone()],
            Step::UpdateCounts("w".into()),
        ),
        (
            "pending, scaled up: in place",
            with_parallelism(elastic(3, 1), 5, 2),
            vec![pending3.clone()],
            Step::UpdateCounts("w".into()),
        ),
        (
            "pending, scaled down: in place",
            with_parallelism(elastic(3, 1), 2, 2),
            vec![pending3],
            Step::UpdateCounts("w".into()),
        ),
        (
            "running while its new slice waits: not suspended",
            running_at(&at3, 5, 2),
            vec![
                admitted3.clone(),
                replacing(wl_for(&elastic(5, 2), false, false), "w2", "w"),
            ],
            Step::Nothing,
        ),
        (
            "the waiting slice follows a further scale-up",
            running_at(&at3, 6, 3),
            vec![
                admitted3.clone(),
                replacing(wl_for(&elastic(5, 2), false, false), "w2", "w"),
            ],
            Step::ReplacePodSets {
                name: "w2".into(),
                pod_sets: running_at(&at3, 6, 3).pod_sets().unwrap(),
            },
        ),
        (
            "scaled back while the new slice waits: it goes",
            running(elastic(3, 3)),
            vec![
                admitted3.clone(),
                replacing(wl_for(&elastic(5, 2), false, false), "w2", "w"),
            ],
            Step::DeleteWorkloads(vec!["w2".into()]),
        ),
        (
            "the new slice admitted: the Job runs on it",
            running_at(&at3, 5, 2),
            vec![replacing(wl_for(&elastic(5, 2), true, false), "w2", "w")],
            Step::Nothing,
        ),
        (
            "evicted: stopped whole",
            running(elastic(3, 1)),
            vec![wl_for(&elastic(3, 1), true, true)],
            Step::Stop("w".into()),
        ),
    ];
    for (name, j, wls, want) in cases {
        let refs: Vec<&Workload> = wls.iter().collect();
        assert_eq!(plan(&j, &refs).unwrap(), want, "{name}");
    }
}

fn with_parallelism(mut j: BatchJob, parallelism: i32, generation: i64) -> BatchJob {
    let spec = j.job.spec.as_mut().unwrap();
    (spec.parallelism, spec.completions) = (Some(parallelism), Some(parallelism));
    j.job.metadata.generation = Some(generation);
    j
}

fn running_at(j: &BatchJob, parallelism: i32, generation: i64) -> BatchJob {
    with_parallelism(BatchJob::new(j.job.clone()), parallelism, generation)
}

// Kueue: reconciler.go `newWorkloadName` (workload_names_test.go's "1" extra): each slice of an elastic
// Job is named with the Job's generation, so every scale-up gets a Workload of its own.
#[test]
fn each_slice_of_an_elastic_job_has_its_own_name() {
    let name = |j: &BatchJob| workload_name_for_job(j, NameLength::Long).unwrap();
    assert_ne!(name(&elastic(3, 1)), name(&elastic(3, 2)));
    assert_ne!(name(&elastic(3, 1)), name(&job(3, Some(3), json!({}))));
    assert_eq!(
        name(&elastic(3, 1)),
        name(&elastic(5, 1)),
        "a name follows the generation, not the count"
    );
}

// A running elastic Job's template carries what admission injected (the flavor's node selector, the
// podset label, the slice name): its next slice takes the chain's template instead, so a Job evicted
// from that slice is restored to the template its user wrote, whichever flavor admits it next.
#[test]
fn a_new_slice_carries_the_chains_original_template() {
    let original = elastic(3, 1);
    let admitted = wl_for(&original, true, false);
    let mut grown = running_at(&running(elastic(3, 1)), 5, 2);
    let injected = grown
        .job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .node_selector
        .clone();
    assert_eq!(
        injected.unwrap()["pool"],
        "spot",
        "the running Job's template has the flavor in it"
    );
    grown = BatchJob::with_workloads(grown.job, std::slice::from_ref(&admitted));
    let podsets = grown.pod_sets().unwrap();
    assert_eq!(
        podsets[0].template, admitted.spec.pod_sets[0].template,
        "the slice's template, not the running one"
    );
    assert_eq!(podsets[0].count(), 5, "with the Job's count");
    let originals: Vec<PodSetInfo> = podsets.iter().map(PodSetInfo::from_podset).collect();
    grown.suspend();
    assert!(grown.restore_podsets_info(&originals));
    let spec = grown.job.spec.as_ref().unwrap().template.spec.clone().unwrap();
    assert!(
        spec.node_selector.is_none_or(|s| s.is_empty()),
        "restored to the user's template"
    );
    // Suspended (or not elastic), the Job's own template is its demand.
    let suspended = BatchJob::with_workloads(elastic(3, 1).job, std::slice::from_ref(&admitted));
    assert_eq!(
        suspended.pod_sets().unwrap()[0].template,
        elastic(3, 1).pod_sets().unwrap()[0].template
    );
}

// An elastic Job created before Kueue managed it has no gate from the webhook; starting it puts the
// gate on its template (Kueue's webhook gates every elastic Job at creation instead), once.
#[test]
fn starting_an_elastic_job_gates_its_pods() {
    let gates = |j: &BatchJob| {
        j.job
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .scheduling_gates
            .clone()
            .unwrap_or_default()
    };
    let mut j = elastic(2, 1);
    assert!(gates(&j).is_empty());
    j.run_with_podsets_info(&[info(2)]).unwrap();
    assert_eq!(
        gates(&j).iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        vec![label::ELASTIC_JOB_SCHEDULING_GATE]
    );
    j.run_with_podsets_info(&[info(2)]).unwrap();
    assert_eq!(gates(&j).len(), 1, "not doubled");
    let mut plain = job(2, None, json!({}));
    plain.run_with_podsets_info(&[info(2)]).unwrap();
    assert!(gates(&plain).is_empty(), "only elastic Jobs");
}
