//! Admission checks on the embedded cluster with the real manager, each test naming the Kueue spec
//! it ports: `test/integration/singlecluster/controller/core/{workload_controller_test.go,
//! clusterqueue_controller_test.go, admissioncheck_controller_test.go}`. Kueue's core suite runs
//! without its scheduler and reserves quota by hand; ours always runs the admission loop, so a
//! reservation Kueue writes by hand is reached here through admission itself. A check's own
//! controller is played by the test, writing `status.admissionChecks[]` as Kueue's
//! `SetWorkloadsAdmissionCheck` does.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::admission_check::AUTO_READY_CONTROLLER;
use quotagate::api::kueue::constants::condition;
use quotagate::api::kueue::{AdmissionCheck, AdmissionCheckSpec, CheckState, ClusterQueue, Workload};
use quotagate::api::ray::RayCluster;

use crate::support::*;

fn check_names(w: &Workload) -> Vec<String> {
    w.status
        .iter()
        .flat_map(|s| &s.admission_checks)
        .map(|s| s.name.clone())
        .collect()
}

fn check_state(w: &Workload, name: &str) -> Option<CheckState> {
    w.status
        .as_ref()?
        .admission_checks
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.state)
}

/// Flavors on-demand (gpu) and spot (memory), checks 1 and 2 on every flavor and check 3 on spot
/// only: Kueue's "the queue has admission checks" setup.
async fn two_flavor_queue(c: &Cluster) {
    c.flavor("on-demand").await;
    c.flavor("spot").await;
    for n in ["check1", "check2", "check3"] {
        admission_check(c, n, "ctrl", true).await;
    }
    let cq = ClusterQueue::build("cluster-queue")
        .cohort("cohort")
        .flavor("on-demand", [("nvidia.com/gpu", "5")])
        .flavor("spot", [("memory", "5")])
        .admission_check("check1", &[])
        .admission_check("check2", &[])
        .admission_check("check3", &["spot"])
        .build();
    c.cluster_queue(with_all_namespaces(cq)).await;
    c.local_queue("queue", "cluster-queue").await;
}

/// `workload_controller_test.go`, "the queue has admission checks": "the workload should have
/// checks updated when changed on the cluster queue". The workload asks for CPU, which no flavor
/// covers, so it stays pending as in Kueue's scheduler-less suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_has_checks_updated_when_changed_on_the_cluster_queue() {
    let c = Cluster::start(Limits::default()).await;
    two_flavor_queue(&c).await;
    c.workload("wl", "queue", 0, "1").await;
    let wls = c.workloads();
    wait_for(&wls, "wl", "checks 1 and 2 (check3 is for spot only)", |w| {
        check_names(w) == ["check1", "check2"]
    })
    .await;

    set_check_state(
        &c,
        "wl",
        "check1",
        CheckState::Ready,
        "check successfully passed",
        None,
    )
    .await;
    set_check_state(&c, "wl", "check2", CheckState::Retry, "check rejected", None).await;
    let before = wls.get("wl").await.unwrap();
    let old_check2 = before
        .status
        .as_ref()
        .unwrap()
        .admission_checks
        .iter()
        .find(|s| s.name == "check2")
        .cloned()
        .unwrap();

    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let rules = serde_json::json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "check2"}, {"name": "check3"}]}}});
    cqs.patch("cluster-queue", &PatchParams::default(), &Patch::Merge(&rules))
        .await
        .unwrap();
    let w = wait_for(&wls, "wl", "checks 2 and 3", |w| {
        check_names(w) == ["check2", "check3"]
    })
    .await;
    let check2 = w
        .status
        .as_ref()
        .unwrap()
        .admission_checks
        .iter()
        .find(|s| s.name == "check2")
        .cloned()
        .unwrap();
    assert_eq!(check2, old_check2, "a check kept by the queue keeps its state");
    // Kueue's scheduler: a failed check keeps a pending workload out of admission.
    wait_for(&wls, "wl", "held for its failed check", |w| {
        condition(w, condition::QUOTA_RESERVED)
            == cond(
                "False",
                "PendingEvaluation",
                "The workload has failed admission checks",
            )
    })
    .await;
}

/// One flavor with 5 CPU, checks 1 and 2 on it (run by the test).
async fn cpu_queue(c: &Cluster, checks: &[(&str, &str)]) {
    c.flavor("default").await;
    let mut cq = cq_with("cq", "5");
    for (name, controller) in checks {
        admission_check(c, name, controller, true).await;
        cq = cq.admission_check(name, &[]);
    }
    c.cluster_queue(with_all_namespaces(cq.build())).await;
    c.local_queue("lq", "cq").await;
}

async fn rejected_event(c: &Cluster, wl: &str) -> bool {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| {
            e.reason.as_deref() == Some("AdmissionCheckRejected")
                && e.type_.as_deref() == Some("Warning")
                && e.note.as_deref()
                    == Some(
                        r#"Deactivated due to AdmissionCheck in Rejected state: "check1" (check rejected)"#,
                    )
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(wl)
        })
}

async fn deactivated_by_check1(c: &Cluster, name: &str) {
    let w = wait_for(&c.workloads(), name, "deactivated and evicted", |w| {
        w.spec.active == Some(false)
            && condition(w, condition::EVICTED)
                .is_some_and(|(s, r, _)| s == "True" && r.starts_with("Deactivated"))
    })
    .await;
    let (_, _, msg) = condition(&w, condition::EVICTED).unwrap();
    assert_eq!(
        msg,
        r#"The workload is deactivated due to AdmissionCheck in Rejected state: "check1" (check rejected)"#
    );
    let w = wait_for(&c.workloads(), name, "quota released", |w| !reserved(w)).await;
    assert!(!w.is_admitted());
    // Events are written behind the loop's back: poll the list briefly.
    for _ in 0..100 {
        if rejected_event(c, name).await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no AdmissionCheckRejected event");
}

/// `workload_controller_test.go`, "should finish an unadmitted workload with failure when a check is
/// rejected": quota reserved, a check Rejected before the others pass: the workload is deactivated,
/// with Kueue's event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_check_deactivates_a_reserved_workload() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    cpu_queue(&c, &[("check1", "ctrl"), ("check2", "ctrl")]).await;
    c.workload("wl", "lq", 0, "1").await;
    let w = reserved_not_admitted(&c, "wl").await;
    assert_eq!(check_names(&w), ["check1", "check2"]);
    assert_eq!(check_state(&w, "check1"), Some(CheckState::Pending));
    set_check_state(&c, "wl", "check1", CheckState::Rejected, "check rejected", None).await;
    deactivated_by_check1(&c, "wl").await;
}

/// `workload_controller_test.go`, "should evict then finish with failure an admitted workload when a
/// check is rejected": both checks Ready admit it ("The workload is admitted"); check1 Rejected then
/// evicts and deactivates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_ready_admit_and_a_rejected_check_then_evicts_and_deactivates() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    cpu_queue(&c, &[("check1", "ctrl"), ("check2", "ctrl")]).await;
    c.workload("wl", "lq", 0, "1").await;
    reserved_not_admitted(&c, "wl").await;
    set_check_state(&c, "wl", "check1", CheckState::Ready, "check ready", None).await;
    let w = c.workloads().get("wl").await.unwrap();
    assert!(!w.is_admitted(), "one check is still Pending");
    set_check_state(&c, "wl", "check2", CheckState::Ready, "check ready", None).await;
    wait_for(&c.workloads(), "wl", "admitted", |w| {
        condition(w, condition::ADMITTED) == cond("True", "Admitted", "The workload is admitted")
    })
    .await;
    set_check_state(&c, "wl", "check1", CheckState::Rejected, "check rejected", None).await;
    deactivated_by_check1(&c, "wl").await;
}

/// Kueue `workload_controller.go` `reconcileCheckBasedEviction` and `evict.go`
/// `resetChecksOnEviction`, end to end: a `Retry` check evicts the workload (reason
/// `AdmissionCheck`), releases its quota, resets the checks to Pending (one more retry counted),
/// keeps it out of the queue until `requeueAfterSeconds` has passed, then it is reserved again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_check_evicts_releases_the_quota_and_requeues_after_its_delay() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    cpu_queue(&c, &[("check1", "ctrl")]).await;
    c.workload("wl", "lq", 0, "5").await;
    reserved_not_admitted(&c, "wl").await;
    set_check_state(&c, "wl", "check1", CheckState::Retry, "no capacity", Some(2)).await;
    let w = wait_for(&c.workloads(), "wl", "evicted and released", |w| {
        !reserved(w)
            && condition(w, condition::EVICTED).is_some_and(|(s, r, _)| s == "True" && r == "AdmissionCheck")
    })
    .await;
    let (_, _, msg) = condition(&w, condition::EVICTED).unwrap();
    assert_eq!(
        msg,
        r#"Evicted due to AdmissionCheck in Retry state: "check1" (no capacity)"#
    );
    let st = w.status.as_ref().unwrap();
    let s = &st.admission_checks[0];
    assert_eq!(
        (s.state, s.retry_count, s.message.as_str()),
        (
            CheckState::Pending,
            Some(1),
            "Reset to Pending after eviction. Previously: Retry"
        )
    );
    let rq = condition(&w, condition::REQUEUED).unwrap();
    assert_eq!((rq.0.as_str(), rq.1.as_str()), ("False", "AdmissionCheck"));
    assert!(
        st.requeue_state
            .as_ref()
            .and_then(|r| r.requeue_at.as_ref())
            .is_some(),
        "requeueAt from requeueAfterSeconds: {st:?}"
    );
    // The quota it held is free meanwhile: another workload takes it.
    c.workload("other", "lq", 0, "5").await;
    reserved_not_admitted(&c, "other").await;
    c.workloads()
        .delete("other", &DeleteParams::default())
        .await
        .unwrap();
    let w = wait_for(&c.workloads(), "wl", "reserved again after the backoff", reserved).await;
    assert_eq!(
        condition(&w, condition::REQUEUED).map(|r| r.1),
        Some("BackoffFinished".to_string())
    );
    assert_eq!(check_state(&w, "check1"), Some(CheckState::Pending));
    c.quota.assert_safe();
}

/// `clusterqueue_controller_test.go`, "Reconciling clusterQueue status condition": "Should update
/// status conditions when admission checks are created"; and, as Kueue's scheduler does for an
/// inactive queue, its workload waits ("ClusterQueue cq is inactive") until the checks are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_queue_is_active_only_once_its_checks_exist_and_are_active() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    c.flavor("default").await;
    c.cluster_queue(with_all_namespaces(
        cq_with("cq", "5")
            .admission_check("check1", &[])
            .admission_check("check2", &[])
            .build(),
    ))
    .await;
    c.local_queue("lq", "cq").await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let active = |want: Option<(String, String, String)>| {
        move |q: &ClusterQueue| {
            q.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::ACTIVE))
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
                == want
        }
    };
    wait_for(
        &cqs,
        "cq",
        "all checks not found",
        active(cond(
            "False",
            "AdmissionCheckNotFound",
            "Can't admit new workloads: references missing AdmissionCheck(s): check1,check2.",
        )),
    )
    .await;
    c.workload("wl", "lq", 0, "1").await;
    wait_for(&c.workloads(), "wl", "suspended", |w| {
        condition(w, condition::QUOTA_RESERVED) == cond("False", "Suspended", "ClusterQueue cq is inactive")
    })
    .await;

    admission_check(&c, "check1", "ac-controller", true).await;
    wait_for(
        &cqs,
        "cq",
        "one check not found",
        active(cond(
            "False",
            "AdmissionCheckNotFound",
            "Can't admit new workloads: references missing AdmissionCheck(s): check2.",
        )),
    )
    .await;
    admission_check(&c, "check2", "ac-controller", false).await;
    wait_for(
        &cqs,
        "cq",
        "one check inactive",
        active(cond(
            "False",
            "AdmissionCheckInactive",
            "Can't admit new workloads: references inactive AdmissionCheck(s): check2.",
        )),
    )
    .await;
    assert!(
        !reserved(&c.workloads().get("wl").await.unwrap()),
        "an inactive queue admits nothing"
    );
    set_check_active(&c, "check2").await;
    wait_for(
        &cqs,
        "cq",
        "active",
        active(cond("True", "Ready", "Can admit new workloads")),
    )
    .await;
    reserved_not_admitted(&c, "wl").await;
}

fn has_finalizer(ac: &AdmissionCheck) -> bool {
    ac.finalizers()
        .iter()
        .any(|f| f == quotagate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER)
}

/// `admissioncheck_controller_test.go`, "one clusterQueue references admissionChecks": "Should
/// delete the admissionCheck when the corresponding clusterQueue no longer uses the admissionCheck"
/// and "… when the corresponding clusterQueue is deleted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_check_in_use_is_kept_until_no_cluster_queue_names_it() {
    let c = Cluster::start(Limits::default()).await;
    for (cq, check) in [("foo", "check1"), ("bar", "check9")] {
        admission_check(&c, check, "ac-controller", true).await;
        c.cluster_queue(ClusterQueue::build(cq).admission_check(check, &[]).build())
            .await;
    }
    let acs = checks_api(&c);
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    for check in ["check1", "check9"] {
        wait_for(&acs, check, "the finalizer", has_finalizer).await;
        acs.delete(check, &DeleteParams::default()).await.unwrap();
        let ac = acs.get(check).await.unwrap();
        assert!(ac.metadata.deletion_timestamp.is_some(), "kept by its finalizer");
    }
    // A cohort change keeps check1 in use.
    cqs.patch(
        "foo",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"cohortName": "foo-cohort"}})),
    )
    .await
    .unwrap();
    wait_for(&cqs, "foo", "the cohort change seen", |q| {
        q.status.is_some() && q.spec.cohort_name.is_some()
    })
    .await;
    assert!(acs.get_opt("check1").await.unwrap().is_some());
    let other =
        serde_json::json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "check2"}]}}});
    cqs.patch("foo", &PatchParams::default(), &Patch::Merge(&other))
        .await
        .unwrap();
    cqs.delete("bar", &DeleteParams::default()).await.unwrap();
    for check in ["check1", "check9"] {
        let mut gone = false;
        for _ in 0..200 {
            if acs.get_opt(check).await.unwrap().is_none() {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(gone, "{check} released and deleted");
    }
}

/// quotagate's built-in check (`controllerName: quotagate.x-k8s.io/auto-ready`): marked Active by
/// the manager, and Ready for each workload once quota is reserved, so the workload is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_auto_ready_check_admits_once_quota_is_reserved() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    c.flavor("default").await;
    checks_api(&c)
        .create(
            &PostParams::default(),
            &AdmissionCheck::new(
                "auto",
                AdmissionCheckSpec {
                    controller_name: AUTO_READY_CONTROLLER.into(),
                    parameters: None,
                },
            ),
        )
        .await
        .unwrap();
    wait_for(&checks_api(&c), "auto", "made Active by the manager", |a| {
        a.is_active()
    })
    .await;
    c.cluster_queue(with_all_namespaces(
        cq_with("cq", "5").admission_check("auto", &[]).build(),
    ))
    .await;
    c.local_queue("lq", "cq").await;
    c.workload("wl", "lq", 0, "1").await;
    let w = wait_for(&c.workloads(), "wl", "admitted", |w| w.is_admitted()).await;
    let s = &w.status.as_ref().unwrap().admission_checks[0];
    assert_eq!((s.name.as_str(), s.state), ("auto", CheckState::Ready));
}

/// A queue-managed RayCluster on a ClusterQueue with a check: its Workload gets quota, but the
/// cluster stays suspended (no pod) until the check is Ready and the Workload Admitted (Kueue's
/// job reconciler starts a job only once admitted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_stays_suspended_until_its_check_is_ready() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    cpu_queue(&c, &[("check1", "ctrl")]).await;
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    rcs.create(
        &PostParams::default(),
        &queued_ray_cluster("rc", serde_json::json!({})),
    )
    .await
    .unwrap();
    let wl_name = loop {
        let wls = c.workloads().list(&ListParams::default()).await.unwrap().items;
        if let Some(w) = wls.iter().find(|w| w.name_any().starts_with("raycluster-rc-")) {
            break w.name_any();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    reserved_not_admitted(&c, &wl_name).await;
    // Reserved but not admitted: give the job controller time to (wrongly) start it.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(
        rcs.get("rc").await.unwrap().spec.suspend,
        Some(true),
        "no start before the check passes"
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), "default");
    assert!(
        pods.list(&ListParams::default()).await.unwrap().items.is_empty(),
        "no pod before the check passes"
    );
    set_check_state(&c, &wl_name, "check1", CheckState::Ready, "capacity found", None).await;
    wait_for(&c.workloads(), &wl_name, "admitted", |w| w.is_admitted()).await;
    wait_for(&rcs, "rc", "started", |r| r.spec.suspend == Some(false)).await;
}

/// DESIGN I4 and I6 on a ClusterQueue with an admission check: a RayService's first slice runs
/// nothing until its check is Ready; during a gated upgrade the replacement slice gets quota at once
/// but stays unadmitted while its check is Pending, so the old slice stays (not finished), the active
/// cluster keeps its pods and the pending cluster runs none; once the check is Ready the upgrade
/// completes and the old slice is finished. The invariant watcher runs throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_upgrade_waits_for_the_replacement_slice_check_without_touching_the_active_cluster() {
    use crate::gated::{Scenario, active, pending, poll, ready, service};
    let s = Scenario::start("4", 4000).await;
    admission_check(&s.c, "gate", "ctrl", true).await;
    let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
    let rules =
        serde_json::json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "gate"}]}}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&rules))
        .await
        .unwrap();
    wait_for(&cqs, "cq", "active with its check", |q| {
        q.status.as_ref().is_some_and(|st| {
            st.conditions
                .iter()
                .any(|c| c.type_ == condition::ACTIVE && c.status == "True")
        })
    })
    .await;

    s.services()
        .create(&PostParams::default(), &service("rs", "1", "2.46.0"))
        .await
        .unwrap();
    let first = poll("the first slice reserved", || async {
        s.workloads_of("rs")
            .await
            .into_iter()
            .find(reserved)
            .map(|w| w.name_any())
    })
    .await;
    let w = reserved_not_admitted(&s.c, &first).await;
    assert!(!w.is_admitted());
    let clusters = s.clusters().list(&ListParams::default()).await.unwrap().items;
    for rc in &clusters {
        assert!(
            s.pods_of(&rc.name_any()).await.is_empty(),
            "no pod before the first slice's check passes"
        );
    }
    set_check_state(&s.c, &first, "gate", CheckState::Ready, "ok", None).await;
    let rs = s
        .wait_rs("rs", "Ready", |r| ready(r) && active(r).is_some())
        .await;
    let a = active(&rs).unwrap();
    let active_pods: Vec<String> = s.pods_of(&a).await.iter().map(|p| p.name_any()).collect();
    assert!(!active_pods.is_empty());

    s.patch_version("rs", "2.47.0").await;
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let p = pending(&rs).unwrap();
    let second = poll("the replacement slice reserved", || async {
        s.workloads_of("rs")
            .await
            .into_iter()
            .find(|w| w.name_any() != first && reserved(w))
            .map(|w| w.name_any())
    })
    .await;
    reserved_not_admitted(&s.c, &second).await;
    // Issue 47: the user is told quota is reserved and which check is pending, not that the cluster
    // waits for quota.
    let said = s
        .wait_rs("rs", "the wait named as the pending check", |r| {
            serde_json::to_string(&r.status)
                .unwrap()
                .contains("quota reserved in ClusterQueue cq; waiting for admission checks: gate (Pending")
        })
        .await;
    assert!(
        !serde_json::to_string(&said.status)
            .unwrap()
            .contains("waits for quota admission"),
        "{:?}",
        said.status
    );
    // Let the controllers act on the reservation (they must not open anything).
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let old = s.c.workloads().get(&first).await.unwrap();
    assert!(
        !old.is_finished() && old.is_admitted(),
        "the replaced slice stays until its successor is admitted"
    );
    assert!(
        s.pods_of(&p).await.is_empty(),
        "the pending cluster runs no pod before the check passes"
    );
    let now: Vec<String> = s.pods_of(&a).await.iter().map(|p| p.name_any()).collect();
    assert_eq!(now, active_pods, "I4: the active cluster is not touched");
    let rs = s.services().get("rs").await.unwrap();
    assert_eq!(active(&rs).as_deref(), Some(a.as_str()));
    assert!(ready(&rs));

    set_check_state(&s.c, &second, "gate", CheckState::Ready, "ok", None).await;
    s.wait_rs("rs", "traffic on the new cluster", |r| {
        active(r).as_deref() == Some(p.as_str()) && ready(r)
    })
    .await;
    let old = wait_for(&s.c.workloads(), &first, "finished as replaced", |w| {
        w.is_finished()
    })
    .await;
    let (_, why, _) = condition(&old, condition::FINISHED).unwrap();
    assert_eq!(why, "WorkloadSliceReplaced");
    s.wait_gone(&a).await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}
