//! MultiKueue with three embedded clusters in one process: a manager and two workers, each worker
//! served on loopback TCP with its own kubeconfig (one handed to the manager in a Secret, one by
//! path), each running quotagate's manager and the simulated Job controller and nodes. A batch Job
//! with `spec.managedBy: kueue.x-k8s.io/multikueue` created on the manager is dispatched to both
//! workers, runs on the one that admits it and nowhere else, and its status comes back. The setup
//! (workers, the manager, the MultiKueue objects) is shared with `multikueue_dispatch`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use quotagate::api::kueue::builders::ClusterQueueBuilder;
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::multikueue::{
    ClusterSource, KubeConfig, LocationType, MULTIKUEUE_CONTROLLER_NAME, MultiKueueClusterSpec,
    MultiKueueConfigSpec, ORIGIN_LABEL,
};
use quotagate::api::kueue::{
    AdmissionCheck, AdmissionCheckParametersReference, AdmissionCheckSpec, CheckState, ClusterQueue,
    MultiKueueCluster, MultiKueueConfig, ResourceFlavor,
};
use quotagate::embedded::rbac::Authorizer;
use quotagate::jobframework::names::NameLength;
use quotagate::jobframework::workload::workload_name_for_job;
use quotagate::jobs::batch::BatchJob;
use quotagate::wiring::manager::MultiKueueSettings;
use tokio_util::sync::CancellationToken;

use crate::support::*;

pub(crate) struct Worker {
    pub cluster: Cluster,
    pub kubeconfig: std::path::PathBuf,
    /// Cancelled: the worker's server stops listening and closes its connections (the worker is
    /// lost to the manager; its own controllers go on).
    pub serving: CancellationToken,
    _sims: Option<tokio_util::sync::DropGuard>,
    _serving: tokio_util::sync::DropGuard,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(dir) = self.kubeconfig.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Worker {
    /// Serves `cluster` on loopback TCP, its kubeconfig written to a file of its own; `sims` (if any)
    /// stop with it.
    pub(crate) async fn serve(cluster: Cluster, name: &str, sims: Option<CancellationToken>) -> Worker {
        // One directory per worker of the process: tests running side by side name their workers alike.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("quotagate-mk-{}-{n}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let serving = CancellationToken::new();
        cluster
            .server
            .spawn_tcp("127.0.0.1:0".parse().unwrap(), Some(&kubeconfig), serving.clone())
            .await
            .unwrap();
        Worker {
            cluster,
            kubeconfig,
            serving: serving.clone(),
            _sims: sims.map(CancellationToken::drop_guard),
            _serving: serving.drop_guard(),
        }
    }
}

/// A worker: server on loopback TCP (kubeconfig written to a file), manager, simulated nodes and Job
/// controller, flavor `on-demand`, ClusterQueue `cq` with `cpu` and LocalQueue `lq`.
pub(crate) async fn worker(name: &str, cpu: &str, milli: i64) -> Worker {
    let cluster = Cluster::start(Limits::default().cq("cq", milli)).await;
    let sims = CancellationToken::new();
    quotagate::embedded::sim::spawn(
        cluster.client.clone(),
        &quotagate::embedded::sim::SimConfig {
            gateway: None,
            endpoints: false,
            ..Default::default()
        },
        sims.clone(),
    );
    Api::<ResourceFlavor>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &ResourceFlavor::build("on-demand")
                .node_label("instance", "on-demand")
                .build(),
        )
        .await
        .unwrap();
    cluster
        .cluster_queue(with_all_namespaces(
            ClusterQueue::build("cq")
                .flavor("on-demand", [("cpu", cpu)])
                .build(),
        ))
        .await;
    cluster.local_queue("lq", "cq").await;
    Worker::serve(cluster, name, Some(sims)).await
}

pub(crate) fn mk_cluster(name: &str, location: &str, location_type: LocationType) -> MultiKueueCluster {
    MultiKueueCluster::new(
        name,
        MultiKueueClusterSpec {
            cluster_source: ClusterSource {
                kube_config: Some(KubeConfig {
                    location: location.into(),
                    location_type,
                }),
                cluster_profile_ref: None,
            },
        },
    )
}

pub(crate) fn active(c: &MultiKueueCluster) -> Option<(String, String)> {
    let cond = c
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Active")?;
    Some((cond.status.clone(), cond.reason.clone()))
}

/// The manager of a MultiKueue run: `m`'s manager restarted under the shipped Role (what MultiKueue
/// needs is granted, and used) with MultiKueue on (origin `multikueue`) and `m`'s Ray operator if it
/// has one; `flavor`, ClusterQueue `cq` (from `cq`, with the check `mk`) and LocalQueue `lq`; worker1's
/// kubeconfig in a Secret, worker2's by path, worker3's Secret missing; MultiKueueConfig `mkc` of the
/// three and the AdmissionCheck `mk` of it. Returns once worker1 and worker2 are `Active`.
pub(crate) async fn start_manager(
    m: Cluster,
    flavor: ResourceFlavor,
    cq: ClusterQueueBuilder,
    w1: &Worker,
    w2: &Worker,
) -> (Cluster, Arc<Authorizer>) {
    start_manager_serving(m, flavor, cq, w1, w2, None).await
}

/// [`start_manager`], its `/metrics` served on `health` when given.
pub(crate) async fn start_manager_serving(
    mut m: Cluster,
    flavor: ResourceFlavor,
    cq: ClusterQueueBuilder,
    w1: &Worker,
    w2: &Worker,
    health: Option<std::net::SocketAddr>,
) -> (Cluster, Arc<Authorizer>) {
    let authz = shipped_role();
    if let Some(old) = m.manager.take() {
        old.stop().await;
    }
    m.manager = Some(Manager::start_opts(
        m.server.client_as(authz.clone()),
        quotagate::wiring::manager::ManagerOptions {
            leader_election: false,
            identity: "m1".into(),
            resync: std::time::Duration::from_millis(300),
            ray: m.ray.clone(),
            multikueue: Some(mk_settings()),
            health_addr: health,
            ..Default::default()
        },
    ));
    Api::<ResourceFlavor>::all(m.client.clone())
        .create(&PostParams::default(), &flavor)
        .await
        .unwrap();
    m.cluster_queue(with_all_namespaces(cq.admission_check("mk", &[]).build()))
        .await;
    m.local_queue("lq", "cq").await;

    // worker1's kubeconfig in a Secret of the manager's namespace, worker2's by path.
    let text = std::fs::read(&w1.kubeconfig).unwrap();
    let mut secret = Secret::default();
    secret.metadata.name = Some("worker1-kubeconfig".into());
    secret.data = Some([("kubeconfig".to_string(), ByteString(text))].into());
    Api::<Secret>::namespaced(m.client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let mkcs: Api<MultiKueueCluster> = Api::all(m.client.clone());
    for c in [
        mk_cluster("worker1", "worker1-kubeconfig", LocationType::Secret),
        mk_cluster("worker2", w2.kubeconfig.to_str().unwrap(), LocationType::Path),
        mk_cluster("worker3", "no-such-secret", LocationType::Secret),
    ] {
        mkcs.create(&PostParams::default(), &c).await.unwrap();
    }
    // The config and the check; worker1 and worker2 are waited for below.
    register(&m, &[], &["worker1", "worker2", "worker3"]).await;
    for name in ["worker1", "worker2"] {
        wait_for(&mkcs, name, "Active=True", |c| {
            active(c) == Some(("True".into(), "Active".into()))
        })
        .await;
    }
    (m, authz)
}

/// The manager asked nothing the shipped Role denies, and used every one of `grants`.
pub(crate) fn assert_role_used(authz: &Authorizer, grants: &[&str]) {
    let denied: Vec<String> = authz.denied().iter().map(|a| a.to_string()).collect();
    assert!(denied.is_empty(), "the shipped Role is missing: {denied:?}");
    let unused = authz.unused();
    let idle: Vec<&&str> = grants.iter().filter(|g| unused.iter().any(|u| u == *g)).collect();
    assert!(idle.is_empty(), "MultiKueue grants no request used: {idle:?}");
}

/// Every Workload name ever seen on a cluster (so a copy removed quickly is still known to have been
/// there); returns once the watch has listed, so nothing created after the call is missed.
pub(crate) async fn record_workload_names(client: kube::Client) -> Arc<Mutex<BTreeSet<String>>> {
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let s = seen.clone();
    let (listed, ready) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let api: Api<quotagate::api::kueue::Workload> = Api::all(client);
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut listed = Some(listed);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(wl) | watcher::Event::InitApply(wl)) => {
                    s.lock().unwrap().insert(wl.name_any());
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    tokio::time::timeout(WAIT, ready)
        .await
        .expect("the watch on the worker lists")
        .unwrap();
    seen
}

/// Kueue: test/integration/multikueue/jobs_test.go, "Should run a job on worker if admitted
/// (ManagedBy)": the manager's Workload is copied to both workers with the same spec; worker1 admits it
/// (here by its own quota: worker2's ClusterQueue is too small), the check turns Ready with `The workload
/// was admitted on "worker1"`, worker2's copy is removed, the manager's Job is unsuspended, the worker's
/// Job status is mirrored (Complete), the manager's Workload finishes and the remote Workload is deleted
/// (`waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted`). Plus Kueue's
/// pkg/controller/admissionchecks/multikueue/multikueuecluster_test.go: a cluster whose Secret is missing
/// is `Active=False`, and admissioncheck_test.go: the check is Active with some clusters unusable
/// (`SomeActiveClusters`) and names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_dispatched_runs_on_the_worker_that_admits_it_and_reports_back() {
    let w1 = worker("worker1", "2", 2000).await;
    let w2 = worker("worker2", "500m", 500).await;

    // The manager runs under the shipped Role: what MultiKueue needs is granted, and used.
    let health = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (m, authz) = start_manager_serving(
        Cluster::start(Limits::default().cq("cq", 2000)).await,
        ResourceFlavor::build("on-demand").build(),
        ClusterQueue::build("cq").flavor("on-demand", [("cpu", "2")]),
        &w1,
        &w2,
        Some(health),
    )
    .await;
    let mkcs: Api<MultiKueueCluster> = Api::all(m.client.clone());
    let checks: Api<AdmissionCheck> = Api::all(m.client.clone());
    let w3 = wait_for(&mkcs, "worker3", "Active=False", |c| {
        active(c) == Some(("False".into(), "BadConfig".into()))
    })
    .await;
    let msg = &w3.status.unwrap().conditions[0].message;
    assert!(msg.contains("no-such-secret"), "{msg}");
    wait_for(&checks, "mk", "Active, some clusters unusable", |ac| {
        ac.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Active" && c.status == "True" && c.reason == "SomeActiveClusters")
        })
    })
    .await;
    // The check is looked at every 2 s: it may still name worker1 from before it connected.
    let ac = wait_for(&checks, "mk", "only worker3 unusable", |ac| {
        ac.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.message == "Inactive clusters: [worker3]")
        })
    })
    .await;
    assert_eq!(ac.status.unwrap().conditions[0].reason, "SomeActiveClusters");

    let seen_on_w2 = record_workload_names(w2.cluster.client.clone()).await;
    let jobs: Api<Job> = Api::namespaced(m.client.clone(), "default");
    let wl_name = managed_job(&m, "job", 4).await;

    // The check turns Ready on the worker that admitted the copy.
    let wl = wait_for(&m.workloads(), &wl_name, "check mk Ready", |w| {
        w.status.as_ref().is_some_and(|s| {
            s.admission_checks
                .iter()
                .any(|a| a.name == "mk" && a.state == CheckState::Ready)
        })
    })
    .await;
    let st = wl.status.clone().unwrap();
    let acs = st.admission_checks.iter().find(|a| a.name == "mk").unwrap();
    assert_eq!(acs.message, r#"The workload was admitted on "worker1""#);
    assert_eq!(st.cluster_name.as_deref(), Some("worker1"));
    // `explain workload`: the worker it runs on, and why not the others (worker2's copy is removed
    // once worker1 admitted; worker3 cannot be connected).
    let all_checks = checks.list(&Default::default()).await.unwrap().items;
    let mut explained = quotagate::multikueue::explain::lines(&wl, &all_checks);
    wait_gone(&w2.cluster.workloads(), &wl_name).await;
    explained.extend(
        quotagate::multikueue::explain::read_other_workers(&m.client, "default", &wl, &all_checks).await,
    );
    for l in &explained {
        println!("explain: {l}");
    }
    assert!(
        explained[0].contains(r#"running on worker "worker1""#),
        "{explained:?}"
    );
    assert_eq!(
        explained[1],
        r#"worker "worker2": no copy: removed once "worker1" admitted first"#
    );
    assert!(
        explained[2].starts_with(r#"worker "worker3": inactive: BadConfig"#),
        "{explained:?}"
    );

    // worker1 holds a copy with the manager's spec and the origin label.
    let remote = wait_for(&w1.cluster.workloads(), &wl_name, "admitted copy", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::ADMITTED))
    })
    .await;
    assert_eq!(remote.spec, wl.spec);
    assert_eq!(
        remote.labels().get(ORIGIN_LABEL).map(String::as_str),
        Some("multikueue")
    );

    // worker2 had a copy (AllAtOnce), which is removed now.
    wait_gone(&w2.cluster.workloads(), &wl_name).await;
    assert!(
        seen_on_w2.lock().unwrap().contains(&wl_name),
        "worker2 never got a copy"
    );
    assert!(
        Api::<Job>::namespaced(w2.cluster.client.clone(), "default")
            .get_opt("job")
            .await
            .unwrap()
            .is_none(),
        "no Job on the loser"
    );

    // The manager's Job is unsuspended (it runs nowhere locally: managedBy), the worker's runs.
    wait_for(&jobs, "job", "unsuspended", |j| {
        j.spec.as_ref().unwrap().suspend == Some(false)
    })
    .await;
    let remote_jobs: Api<Job> = Api::namespaced(w1.cluster.client.clone(), "default");
    let rj = wait_for(&remote_jobs, "job", "running on worker1", |j| {
        j.spec.as_ref().unwrap().suspend == Some(false)
    })
    .await;
    assert_eq!(rj.labels().get(label::PREBUILT_WORKLOAD_NAME), Some(&wl_name));
    assert_eq!(
        rj.labels().get(ORIGIN_LABEL).map(String::as_str),
        Some("multikueue")
    );
    assert_eq!(rj.spec.as_ref().unwrap().managed_by, None);

    // Status sync: the manager's Job shows the worker's pod running, then its completion.
    wait_for(&jobs, "job", "active mirrored", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await;
    wait_for(&jobs, "job", "Complete mirrored", |j| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
    })
    .await;
    wait_for(&m.workloads(), &wl_name, "finished", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::FINISHED))
    })
    .await;
    wait_gone(&w1.cluster.workloads(), &wl_name).await;
    // Kueue's MultiKueue metrics: one copy dispatched to each worker, admitted on worker1; worker1
    // and worker2 Active, worker3 not (the gauge is read every 5 s).
    let series = [
        r#"multikueue_workloads_dispatched_total{cluster_queue="cq",cluster="worker1",replica_role="standalone"} 1"#,
        r#"multikueue_workloads_dispatched_total{cluster_queue="cq",cluster="worker2",replica_role="standalone"} 1"#,
        r#"multikueue_workloads_admitted_total{cluster_queue="cq",cluster="worker1",replica_role="standalone"} 1"#,
        r#"multikueue_cluster_status{cluster_queue="cq",cluster="worker1",active="True",replica_role="standalone"} 1"#,
        r#"multikueue_cluster_status{cluster_queue="cq",cluster="worker2",active="True",replica_role="standalone"} 1"#,
        r#"multikueue_cluster_status{cluster_queue="cq",cluster="worker3",active="False",replica_role="standalone"} 1"#,
        r#"multikueue_cluster_status{cluster_queue="cq",cluster="worker3",active="True",replica_role="standalone"} 0"#,
    ];
    let deadline = tokio::time::Instant::now() + WAIT;
    let text = loop {
        let text = scrape(health).await;
        if series.iter().all(|s| text.lines().any(|l| l == *s)) || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    for s in series {
        assert!(text.lines().any(|l| l == s), "missing {s} in /metrics:\n{text}");
    }
    for l in text.lines().filter(|l| l.starts_with("multikueue_")) {
        println!("metrics: {l}");
    }
    assert_role_used(&authz, &MULTIKUEUE_GRANTS);
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// The MultiKueue settings of the tests' managers: kubeconfig Secrets in `default`, Kueue's origin
/// and dispatcher, short intervals.
pub(crate) fn mk_settings() -> MultiKueueSettings {
    MultiKueueSettings {
        namespace: "default".into(),
        origin: "multikueue".into(),
        ..Default::default()
    }
}

/// The manager: quotagate's manager with `settings` (under `authz` when given), flavor `on-demand`,
/// ClusterQueue `cq` (2 cpu) whose admission check is `mk`, LocalQueue `lq`.
pub(crate) async fn manager(
    settings: MultiKueueSettings,
    authz: Option<std::sync::Arc<quotagate::embedded::rbac::Authorizer>>,
) -> Cluster {
    let mut m = Cluster::start(Limits::default().cq("cq", 2000)).await;
    if let Some(old) = m.manager.take() {
        old.stop().await;
    }
    let client = match authz {
        Some(a) => m.server.client_as(a),
        None => m.client.clone(),
    };
    m.manager = Some(Manager::start_opts(
        client,
        quotagate::wiring::manager::ManagerOptions {
            leader_election: false,
            identity: "m1".into(),
            resync: std::time::Duration::from_millis(300),
            ray: m.ray.clone(),
            multikueue: Some(settings),
            ..Default::default()
        },
    ));
    Api::<ResourceFlavor>::all(m.client.clone())
        .create(
            &PostParams::default(),
            &ResourceFlavor::build("on-demand").build(),
        )
        .await
        .unwrap();
    m.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "2")])
            .admission_check("mk", &[])
            .build(),
    ))
    .await;
    m.local_queue("lq", "cq").await;
    m
}

/// The workers by path (`workers`, created here) and the MultiKueueConfig `mkc` naming `config` in
/// that order, and the AdmissionCheck `mk` of MultiKueue with it as parameters.
pub(crate) async fn register(m: &Cluster, workers: &[(&str, &Worker)], config: &[&str]) {
    let mkcs: Api<MultiKueueCluster> = Api::all(m.client.clone());
    for (name, w) in workers {
        mkcs.create(
            &PostParams::default(),
            &mk_cluster(name, w.kubeconfig.to_str().unwrap(), LocationType::Path),
        )
        .await
        .unwrap();
    }
    Api::<MultiKueueConfig>::all(m.client.clone())
        .create(
            &PostParams::default(),
            &MultiKueueConfig::new(
                "mkc",
                MultiKueueConfigSpec {
                    clusters: config.iter().map(|c| c.to_string()).collect(),
                    quota_management: None,
                },
            ),
        )
        .await
        .unwrap();
    Api::<AdmissionCheck>::all(m.client.clone())
        .create(
            &PostParams::default(),
            &AdmissionCheck::new(
                "mk",
                AdmissionCheckSpec {
                    controller_name: MULTIKUEUE_CONTROLLER_NAME.into(),
                    parameters: Some(AdmissionCheckParametersReference {
                        api_group: "kueue.x-k8s.io".into(),
                        kind: "MultiKueueConfig".into(),
                        name: "mkc".into(),
                    }),
                },
            ),
        )
        .await
        .unwrap();
    for (name, _) in workers {
        wait_for(&mkcs, name, "Active=True", |c| {
            active(c) == Some(("True".into(), "Active".into()))
        })
        .await;
    }
}

/// A batch Job of 1 cpu for `secs` seconds in `default` on queue `lq`, kept from running on the
/// manager (`spec.managedBy: kueue.x-k8s.io/multikueue`); returns its Workload's name.
pub(crate) async fn managed_job(m: &Cluster, name: &str, secs: u32) -> String {
    let jobs: Api<Job> = Api::namespaced(m.client.clone(), "default");
    let job: Job = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {"managedBy": MULTIKUEUE_CONTROLLER_NAME, "suspend": true, "parallelism": 1, "completions": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "command": ["sleep", secs.to_string()], "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    workload_name_for_job(&BatchJob::new(created), NameLength::Long).unwrap()
}

/// Kueue's `BreakConnection`: `worker`'s kubeconfig names no server that answers, and the manager's
/// MultiKueueCluster `name`, touched so it reconnects, shows `Active=False`. Returns the kubeconfig
/// that [`restore_connection`] puts back.
pub(crate) async fn break_connection(m: &Cluster, name: &str, worker: &Worker) -> Vec<u8> {
    let good = std::fs::read(&worker.kubeconfig).unwrap();
    let text = String::from_utf8(good.clone()).unwrap();
    let broken: String = text
        .lines()
        .map(|l| match l.split_once("server: ") {
            Some((indent, _)) => format!("{indent}server: https://127.0.0.1:1\n"),
            None => format!("{l}\n"),
        })
        .collect();
    assert_ne!(broken, text, "the kubeconfig names its server");
    std::fs::write(&worker.kubeconfig, broken).unwrap();
    touch_and_wait(m, name, "broken", "False").await;
    good
}

/// The connection back: `good` (from [`break_connection`]) written again, `Active=True`.
pub(crate) async fn restore_connection(m: &Cluster, name: &str, worker: &Worker, good: Vec<u8>) {
    std::fs::write(&worker.kubeconfig, good).unwrap();
    touch_and_wait(m, name, "restored", "True").await;
}

async fn touch_and_wait(m: &Cluster, name: &str, touch: &str, active_status: &str) {
    let mkcs: Api<MultiKueueCluster> = Api::all(m.client.clone());
    let patch = serde_json::json!({"metadata": {"annotations": {"test/touch": touch}}});
    mkcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(&mkcs, name, &format!("Active={active_status}"), |c| {
        active(c).is_some_and(|(s, _)| s == active_status)
    })
    .await;
}
