//! Kueue's `test/integration/singlecluster/controller/core/clusterqueue_controller_test.go` on the
//! embedded cluster with the real manager, each test naming the Kueue spec it ports (the
//! LocalQueue and ResourceFlavor specs are in `kueue_core_lq_rf.rs`).
//!
//! Kueue's core suite runs without a scheduler and reserves quota by hand
//! (`util.SetQuotaReservation`); these tests do the same (`reserve`), with a workload our
//! scheduler would otherwise admit made too big to fit. Admission checks are not implemented:
//! the ClusterQueues here have none, so a reservation is an admission at once
//! (`admittedWorkloads` equals `reservingWorkloads`, `flavorsUsage` equals `flavorsReservation`).

use kube::api::{Api, DeleteParams, PostParams};
use quotagate::api::kueue::builders::{condition as make_condition, podset};
use quotagate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, condition, reason};
use quotagate::api::kueue::{
    Admission, ClusterQueue, ClusterQueueStatus, FlavorQuotas, LocalQueue, LocalQueueStatus,
    PodSetAssignment, ResourceGroup, Workload,
};
use quotagate::api::quantity::{Quantity, resource_value};

use crate::kueue_scheduler_more::finish;
use crate::support::*;

pub(crate) const GPU: &str = "example.com/gpu";

/// One podset's hand-written assignment: (podset, count, [(resource, flavor, total)]).
pub(crate) type Assign<'a> = (&'a str, i32, &'a [(&'a str, &'a str, &'a str)]);

/// Kueue's `util.SetQuotaReservation` followed by the Admitted condition its workload controller
/// adds when there are no admission checks. Retried on conflicts with the admission loop.
pub(crate) async fn reserve(wls: &Api<Workload>, name: &str, cq: &str, podsets: &[Assign<'_>]) {
    let admission = Admission {
        cluster_queue: cq.to_string(),
        pod_set_assignments: podsets
            .iter()
            .map(|(ps, count, rs)| PodSetAssignment {
                name: ps.to_string(),
                flavors: rs
                    .iter()
                    .map(|(r, f, _)| (r.to_string(), f.to_string()))
                    .collect(),
                resource_usage: rs
                    .iter()
                    .map(|(r, _, q)| {
                        (
                            r.to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.to_string()),
                        )
                    })
                    .collect(),
                count: Some(*count),
                ..Default::default()
            })
            .collect(),
    };
    for _ in 0..20 {
        let mut w = wls.get_status(name).await.unwrap();
        let s = w.status.get_or_insert_with(Default::default);
        s.admission = Some(admission.clone());
        let msg = format!("Quota reserved in ClusterQueue {cq}");
        quotagate::api::conditions::set(
            &mut s.conditions,
            make_condition(condition::QUOTA_RESERVED, true, reason::QUOTA_RESERVED, &msg),
        );
        quotagate::api::conditions::set(
            &mut s.conditions,
            make_condition(
                condition::ADMITTED,
                true,
                reason::ADMITTED,
                "The workload is admitted",
            ),
        );
        if wls.replace_status(name, &PostParams::default(), &w).await.is_ok() {
            return;
        }
    }
    panic!("could not reserve quota for {name}");
}

/// A one-podset workload asking `requests` of one pod.
pub(crate) async fn workload(c: &Cluster, name: &str, lq: &str, requests: &[(&str, &str)]) {
    let wl = Workload::build(name, "default")
        .queue(lq)
        .podset("main", 1, requests.iter().copied())
        .build();
    c.workloads().create(&PostParams::default(), &wl).await.unwrap();
}

/// Flavor usage as (flavor, resource, total, borrowed) in the resource's base units (milli for
/// cpu), in the order written.
fn usage(u: &[quotagate::api::kueue::FlavorUsage]) -> Vec<(String, String, i64, i64)> {
    let v = |r: &str, q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.as_ref()
            .map_or(0, |q| resource_value(r, &Quantity::try_from(q).unwrap()))
    };
    u.iter()
        .flat_map(|f| {
            f.resources.iter().map(|r| {
                (
                    f.name.clone(),
                    r.name.clone(),
                    v(&r.name, &r.total),
                    v(&r.name, &r.borrowed),
                )
            })
        })
        .collect()
}

pub(crate) fn active(
    conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<(String, String, String)> {
    conds
        .iter()
        .find(|c| c.type_ == condition::ACTIVE)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

pub(crate) fn t(s: &str, r: &str, m: &str) -> Option<(String, String, String)> {
    Some((s.into(), r.into(), m.into()))
}

pub(crate) async fn cq_status(
    c: &Cluster,
    name: &str,
    what: &str,
    cond: impl Fn(&ClusterQueueStatus) -> bool,
) -> ClusterQueueStatus {
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&api, name, what, |q| q.status.as_ref().is_some_and(&cond))
        .await
        .status
        .unwrap()
}

pub(crate) async fn lq_status(
    c: &Cluster,
    name: &str,
    what: &str,
    cond: impl Fn(&LocalQueueStatus) -> bool,
) -> LocalQueueStatus {
    let api: Api<LocalQueue> = Api::namespaced(c.client.clone(), "default");
    wait_for(&api, name, what, |q| q.status.as_ref().is_some_and(&cond))
        .await
        .status
        .unwrap()
}

fn counts(pending: i32, reserving: i32, admitted: i32) -> impl Fn(i32, i32, i32) -> bool {
    move |p, r, a| p == pending && r == reserving && a == admitted
}

/// Waits (on a watch) until the named object is gone from the API.
pub(crate) async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let Some(obj) = api.get_opt(name).await.unwrap() else {
        return;
    };
    let uid = obj.meta().uid.clone().unwrap_or_default();
    let done = kube::runtime::wait::await_condition(
        api.clone(),
        name,
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    let last = tokio::time::timeout(WAIT, done).await;
    assert!(
        matches!(last, Ok(Ok(_))),
        "{name} still exists: {:?}",
        api.get_opt(name).await.unwrap().map(|o| o.meta().clone())
    );
}

/// Kueue's `clusterqueue_controller_test.go` ClusterQueue "cluster-queue": cpu in on-demand and
/// spot, gpu in model-a and model-b, 5 of each (borrowing limit 5), in cohort "cohort".
fn usage_cq() -> ClusterQueue {
    let fq = |f: &str, r: &str| {
        FlavorQuotas::build(f)
            .resource_with_limits(r, "5", Some("5"), None)
            .build()
    };
    let mut cq = ClusterQueue::build("cluster-queue").cohort("cohort").build();
    cq.spec.resource_groups = Some(vec![
        ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("on-demand", "cpu"), fq("spot", "cpu")],
        },
        ResourceGroup {
            covered_resources: vec![GPU.into()],
            flavors: vec![fq("model-a", GPU), fq("model-b", GPU)],
        },
    ]);
    with_all_namespaces(cq)
}

fn empty_usage() -> Vec<(String, String, i64, i64)> {
    [
        ("on-demand", "cpu"),
        ("spot", "cpu"),
        ("model-a", GPU),
        ("model-b", GPU),
    ]
    .iter()
    .map(|(f, r)| (f.to_string(), r.to_string(), 0, 0))
    .collect()
}

const MISSING_ALL: &str =
    "Can't admit new workloads: references missing ResourceFlavor(s): on-demand,spot,model-a,model-b.";

/// `clusterqueue_controller_test.go`, "Reconciling clusterQueue usage status": "Should update
/// status and report metrics when workloads are assigned and finish" (the status, not the
/// metrics). "six" asks for 5 GPUs instead of 1 so that our scheduler, which Kueue's core suite
/// does not run, leaves it pending once the flavors exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_status_follows_reservations_and_finishes() {
    let c = Cluster::start(Limits::default()).await;
    c.cluster_queue(usage_cq()).await;
    c.local_queue("queue", "cluster-queue").await;
    for (name, lq, cpu, gpu) in [
        ("one", "queue", "2", "2"),
        ("two", "queue", "3", "3"),
        ("three", "queue", "1", "1"),
        ("four", "queue", "1", "1"),
        ("five", "other", "1", "1"),
        ("six", "queue", "1", "5"),
    ] {
        workload(&c, name, lq, &[("cpu", cpu), (GPU, gpu)]).await;
    }
    let s = cq_status(&c, "cluster-queue", "5 pending, flavors missing", |s| {
        s.pending_workloads == 5 && active(&s.conditions) == t("False", reason::FLAVOR_NOT_FOUND, MISSING_ALL)
    })
    .await;
    assert_eq!((s.reserving_workloads, s.admitted_workloads), (0, 0));
    assert_eq!(usage(&s.flavors_reservation), empty_usage());
    assert_eq!(usage(&s.flavors_usage), empty_usage());

    let wls = c.workloads();
    reserve(
        &wls,
        "one",
        "cluster-queue",
        &[("main", 1, &[("cpu", "on-demand", "2"), (GPU, "model-a", "2")])],
    )
    .await;
    reserve(
        &wls,
        "two",
        "cluster-queue",
        &[("main", 1, &[("cpu", "on-demand", "3"), (GPU, "model-a", "3")])],
    )
    .await;
    reserve(
        &wls,
        "three",
        "cluster-queue",
        &[("main", 1, &[("cpu", "on-demand", "1"), (GPU, "model-b", "1")])],
    )
    .await;
    reserve(
        &wls,
        "four",
        "cluster-queue",
        &[("main", 1, &[("cpu", "spot", "1"), (GPU, "model-b", "1")])],
    )
    .await;
    // Reserved in a ClusterQueue that does not exist: counted nowhere.
    reserve(
        &wls,
        "five",
        "other",
        &[("main", 1, &[("cpu", "spot", "1"), (GPU, "model-b", "1")])],
    )
    .await;
    for f in ["on-demand", "spot", "model-a", "model-b"] {
        c.flavor(f).await;
    }
    let want = vec![
        ("on-demand".to_string(), "cpu".to_string(), 6000, 1000),
        ("spot".into(), "cpu".into(), 1000, 0),
        ("model-a".into(), GPU.into(), 5, 0),
        ("model-b".into(), GPU.into(), 2, 0),
    ];
    let s = cq_status(&c, "cluster-queue", "4 reserving, 1 pending, Ready", |s| {
        counts(1, 4, 4)(s.pending_workloads, s.reserving_workloads, s.admitted_workloads)
            && active(&s.conditions) == t("True", reason::READY, "Can admit new workloads")
    })
    .await;
    assert_eq!(usage(&s.flavors_reservation), want);
    assert_eq!(usage(&s.flavors_usage), want);

    for n in ["one", "two", "three", "four", "five"] {
        finish(&wls, n).await;
    }
    // Everything freed, "six" is admitted by our scheduler; Kueue finishes it too.
    wait_for(&wls, "six", "admitted", |w| w.is_admitted()).await;
    finish(&wls, "six").await;
    let s = cq_status(&c, "cluster-queue", "nothing left", |s| {
        counts(0, 0, 0)(s.pending_workloads, s.reserving_workloads, s.admitted_workloads)
    })
    .await;
    assert_eq!(usage(&s.flavors_reservation), empty_usage());
    assert_eq!(usage(&s.flavors_usage), empty_usage());
    assert_eq!(
        active(&s.conditions),
        t("True", reason::READY, "Can admit new workloads")
    );
}

/// `clusterqueue_controller_test.go`, "Should update status and report metrics when a pending
/// workload is deleted" (the status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_forgets_a_deleted_pending_workload() {
    let c = Cluster::start(Limits::default()).await;
    c.cluster_queue(usage_cq()).await;
    c.local_queue("queue", "cluster-queue").await;
    workload(&c, "one", "queue", &[("cpu", "5")]).await;
    let missing =
        |s: &ClusterQueueStatus| active(&s.conditions) == t("False", reason::FLAVOR_NOT_FOUND, MISSING_ALL);
    let s = cq_status(&c, "cluster-queue", "1 pending", |s| {
        s.pending_workloads == 1 && missing(s)
    })
    .await;
    assert_eq!(usage(&s.flavors_reservation), empty_usage());
    c.workloads()
        .delete("one", &DeleteParams::default())
        .await
        .unwrap();
    let s = cq_status(&c, "cluster-queue", "0 pending", |s| {
        s.pending_workloads == 0 && missing(s)
    })
    .await;
    assert_eq!(usage(&s.flavors_usage), empty_usage());
}

/// `clusterqueue_controller_test.go`, "Should update status when workloads have reclaimable
/// pods": `flavorsReservation` drops by the reclaimable pods' share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_reservation_leaves_out_reclaimable_pods() {
    let c = Cluster::start(Limits::default()).await;
    for f in ["on-demand", "spot", "model-a", "model-b"] {
        c.flavor(f).await;
    }
    c.cluster_queue(usage_cq()).await;
    c.local_queue("queue", "cluster-queue").await;
    // 7 GPUs: more than a flavor holds, so only the hand-written reservation admits it.
    let wl = Workload::build("one", "default")
        .queue("queue")
        .podset_spec(podset("driver", 2, [("cpu", "1")]))
        .podset_spec(podset("workers", 7, [(GPU, "1")]))
        .build();
    let wls = c.workloads();
    wls.create(&PostParams::default(), &wl).await.unwrap();
    cq_status(&c, "cluster-queue", "1 pending", |s| s.pending_workloads == 1).await;
    reserve(
        &wls,
        "one",
        "cluster-queue",
        &[
            ("driver", 2, &[("cpu", "on-demand", "2")]),
            ("workers", 5, &[(GPU, "model-a", "5")]),
        ],
    )
    .await;
    let at = |cpu: i64, gpu: i64| {
        vec![
            ("on-demand".to_string(), "cpu".to_string(), cpu, 0),
            ("spot".into(), "cpu".into(), 0, 0),
            ("model-a".into(), GPU.into(), gpu, 0),
            ("model-b".into(), GPU.into(), 0, 0),
        ]
    };
    let s = cq_status(&c, "cluster-queue", "reserving 1", |s| s.reserving_workloads == 1).await;
    assert_eq!(usage(&s.flavors_reservation), at(2000, 5));
    let reclaim = |pods: serde_json::Value| async {
        let mut w = wls.get_status("one").await.unwrap();
        w.status.as_mut().unwrap().reclaimable_pods = serde_json::from_value(pods).unwrap();
        wls.replace_status("one", &PostParams::default(), &w)
            .await
            .unwrap();
    };
    reclaim(serde_json::json!([{"name": "workers", "count": 2}])).await;
    cq_status(&c, "cluster-queue", "3 GPUs reserved", |s| {
        usage(&s.flavors_reservation) == at(2000, 3)
    })
    .await;
    reclaim(serde_json::json!([{"name": "workers", "count": 5}, {"name": "driver", "count": 1}])).await;
    let s = cq_status(&c, "cluster-queue", "1 cpu, 0 GPUs reserved", |s| {
        usage(&s.flavors_reservation) == at(1000, 0)
    })
    .await;
    assert_eq!(s.reserving_workloads, 1);
    finish(&wls, "one").await;
    cq_status(&c, "cluster-queue", "nothing left", |s| {
        counts(0, 0, 0)(s.pending_workloads, s.reserving_workloads, s.admitted_workloads)
    })
    .await;
}

/// `clusterqueue_controller_test.go`, "Reconciling clusterQueue status condition": "Should
/// update status conditions when flavors are created".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_active_condition_follows_its_flavors() {
    let c = Cluster::start(Limits::default()).await;
    let fq = |f: &str| {
        FlavorQuotas::build(f)
            .resource_with_limits("cpu", "5", Some("5"), None)
            .build()
    };
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("bar-cq")
            .cohort("bar-cohort")
            .flavor_quotas(fq("arch-a"))
            .flavor_quotas(fq("arch-b"))
            .build(),
    ))
    .await;
    c.local_queue("bar-lq", "bar-cq").await;
    workload(&c, "bar-wl", "bar-lq", &[]).await;
    let is = |status: &'static str, why: &'static str, msg: &'static str| {
        move |s: &ClusterQueueStatus| active(&s.conditions) == t(status, why, msg)
    };
    cq_status(
        &c,
        "bar-cq",
        "all flavors missing",
        is(
            "False",
            "FlavorNotFound",
            "Can't admit new workloads: references missing ResourceFlavor(s): arch-a,arch-b.",
        ),
    )
    .await;
    c.flavor("arch-a").await;
    cq_status(
        &c,
        "bar-cq",
        "arch-b missing",
        is(
            "False",
            "FlavorNotFound",
            "Can't admit new workloads: references missing ResourceFlavor(s): arch-b.",
        ),
    )
    .await;
    c.flavor("arch-b").await;
    cq_status(
        &c,
        "bar-cq",
        "ready",
        is("True", "Ready", "Can admit new workloads"),
    )
    .await;
}

/// The ClusterQueue of Kueue's "Deleting clusterQueues" specs: 5 GPUs in on-demand.
async fn deleting_setup(c: &Cluster) {
    c.flavor("on-demand").await;
    c.local_queue("queue", "foo-cq").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("foo-cq")
            .flavor("on-demand", [(GPU, "5")])
            .build(),
    ))
    .await;
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&api, "foo-cq", "the resource-in-use finalizer", |q| {
        q.metadata.finalizers.as_deref() == Some(&[RESOURCE_IN_USE_FINALIZER.to_string()][..])
    })
    .await;
}

/// `clusterqueue_controller_test.go`, "Deleting clusterQueues": "Should delete clusterQueues
/// successfully when no admitted workloads are running".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_cluster_queue_is_deleted_at_once() {
    let c = Cluster::start(Limits::default()).await;
    deleting_setup(&c).await;
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    api.delete("foo-cq", &DeleteParams::default()).await.unwrap();
    gone(&api, "foo-cq").await;
}

/// `clusterqueue_controller_test.go`, "Should be stuck in termination until admitted workloads
/// finished running" and "Should keep the status counters and Active condition accurate while
/// terminating": the finalizer holds the deleted ClusterQueue while a workload holds quota in it,
/// its status says Terminating with accurate counters, its LocalQueue turns inactive, and it goes
/// once the workload finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_queue_in_use_terminates_until_its_workloads_finish() {
    let c = Cluster::start(Limits::default()).await;
    deleting_setup(&c).await;
    let wls = c.workloads();
    workload(&c, "admitted", "queue", &[(GPU, "5")]).await;
    wait_for(&wls, "admitted", "admitted", |w| w.is_admitted()).await;
    workload(&c, "pending", "queue", &[(GPU, "5")]).await;
    let s = cq_status(&c, "foo-cq", "1 admitted, 1 pending", |s| {
        counts(1, 1, 1)(s.pending_workloads, s.reserving_workloads, s.admitted_workloads)
    })
    .await;
    assert_eq!(active(&s.conditions).unwrap().1, reason::READY);

    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    api.delete("foo-cq", &DeleteParams::default()).await.unwrap();
    let cq = wait_for(&api, "foo-cq", "terminating", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| active(&s.conditions).is_some_and(|a| a.1 == reason::TERMINATING))
    })
    .await;
    assert!(cq.metadata.deletion_timestamp.is_some());
    assert_eq!(
        cq.metadata.finalizers.as_deref(),
        Some(&[RESOURCE_IN_USE_FINALIZER.to_string()][..])
    );
    assert_eq!(
        active(&cq.status.unwrap().conditions),
        t(
            "False",
            "Terminating",
            "Can't admit new workloads; clusterQueue is terminating"
        )
    );
    // "it mirrors the ClusterQueue's Active condition".
    lq_status(&c, "queue", "inactive", |s| {
        active(&s.conditions).is_some_and(|a| a.0 == "False" && a.1 == "ClusterQueueIsInactive")
    })
    .await;

    wls.delete("pending", &DeleteParams::default()).await.unwrap();
    let s = cq_status(&c, "foo-cq", "pending back to 0", |s| s.pending_workloads == 0).await;
    assert_eq!(s.reserving_workloads, 1);
    assert_eq!(active(&s.conditions).unwrap().1, reason::TERMINATING);
    assert!(
        api.get_opt("foo-cq").await.unwrap().is_some(),
        "held while a workload holds quota"
    );

    finish(&wls, "admitted").await;
    gone(&api, "foo-cq").await;
}

/// `clusterqueue_controller_test.go`, "Should remove finalizer promptly when workload finishes":
/// a ClusterQueue whose only workload has finished is deleted without waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_queue_whose_workloads_finished_is_deleted_at_once() {
    let c = Cluster::start(Limits::default()).await;
    deleting_setup(&c).await;
    let wls = c.workloads();
    workload(&c, "workload", "queue", &[(GPU, "1")]).await;
    wait_for(&wls, "workload", "admitted", |w| w.is_admitted()).await;
    finish(&wls, "workload").await;
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    api.delete("foo-cq", &DeleteParams::default()).await.unwrap();
    gone(&api, "foo-cq").await;
}
