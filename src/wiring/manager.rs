//! The manager: what `quotagate run` starts. Leader election on a coordination Lease (only the
//! leader writes; losing the lease ends `run_manager` with an error so the process exits),
//! `/healthz`, `/readyz` (after the caches synced) and `/metrics`, the admission loop and the
//! RayCluster job controller.
//! `run_embedded` runs the same manager against the in-process API server, with its simulators.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::kit::events::Recorder;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::health::{self, Health};
use super::leader::{self, LeaderConfig, LeaderError};
use super::metrics::{Metrics, Role};
use super::tasks::{AbortOnDrop, Tasks};
use crate::admission::WorkloadEvents;
use crate::admission::{AdmissionLoop, Caches};
use crate::embedded::{self, EmbeddedServer};
use crate::jobframework::job_controller::JobContext;

#[derive(Clone, Debug)]
pub struct ManagerOptions {
    /// Where `/healthz`, `/readyz` and `/metrics` are served; `None` serves nothing.
    pub health_addr: Option<SocketAddr>,
    /// Off: this replica is the only writer (tests, single-replica dev runs).
    pub leader_election: bool,
    pub lease_namespace: String,
    pub lease_name: String,
    /// This replica's identity in the Lease (defaults to `$POD_NAME`, else the host name, `_` and a
    /// UUID new at each start: controller-runtime's form).
    pub identity: String,
    /// How often the admission loop runs without a cache change.
    pub resync: Duration,
    /// Run the embedded Ray operator (RayCluster and RayService controllers) with these dashboards;
    /// `None` runs admission only.
    pub ray: Option<super::ray::Dashboards>,
    /// More series for `/metrics` (the embedded cluster's simulated load).
    pub extra_metrics: Option<health::ExtraMetrics>,
    /// Who may read `/metrics` off loopback; `None` asks the API server (TokenReview, then
    /// SubjectAccessReview), as kube-apiserver's delegated authorization does.
    pub metrics_auth: Option<health::MetricsAuth>,
    /// KubeRay feature gates (`--feature-gates`): what the Ray controllers' validation accepts.
    pub ray_gates: crate::api::ray::validation::RayFeatureGates,
    /// `--upgrade-deadline`: the RayService controller's default upgrade deadline (`None`: off).
    pub upgrade_deadline: Option<Duration>,
    /// The scheduler's latest reasoning per pending workload, served for `quotagate explain`.
    pub explanations: crate::admission::Explanations,
    /// Serve the web view on this listener (`--ui-addr`).
    pub ui: Option<super::ui::UiListener>,
    /// Where the admission loop's time goes, phase by phase (read by `bench e2e`).
    pub cycle_stats: crate::admission::CycleStats,
    /// Kueue's waitForPodsReady (`--config`); `None`: off.
    pub pods_ready: Option<crate::api::kueue::config::PodsReadyConfig>,
    /// `objectRetentionPolicies.workloads.afterFinished`: finished Workloads are deleted this long
    /// after they finish (`None`: kept).
    pub workload_retention: Option<Duration>,
    /// Kueue's fairSharing (`--config`); `None`: classical admission order and preemption.
    pub fair_sharing: Option<crate::queue::FairSharingConfig>,
    /// Kueue's admissionFairSharing (`--config`); `None`: off.
    pub admission_fair_sharing: Option<crate::api::kueue::config::AfsConfig>,
    /// Kueue's `PrioritizePreemptorWorkloads` feature gate (alpha, off as in Kueue;
    /// `--prioritize-preemptor-workloads`).
    pub prioritize_preemptor_workloads: bool,
    /// Kueue's `RecomputeAssignmentUponPreemptionTargetsOverlap` feature gate (beta, on as in Kueue
    /// v0.20; `featureGates` in `--config`).
    pub recompute_on_overlap: bool,
    /// Serve the admission webhook (and the aggregated API groups on its TLS port); readiness
    /// waits for it.
    pub webhook: Option<super::webhook::WebhookServing>,
    /// The job kinds managed (Kueue's `integrations.frameworks`, `--config`).
    pub frameworks: crate::api::kueue::config::Frameworks,
    /// Kueue's `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector` (`--config`).
    pub managed_jobs: crate::api::kueue::config::ManagedJobs,
    /// How long a wait-for cycle among upgrades may last before the cycle breaker releases one
    /// upgrade's growth (`--cycle-break-after`; default 60 s, `BREAK_AFTER_MS`).
    pub cycle_break_after: Duration,
    /// MultiKueue (Kueue's `multiKueue` section): `None` runs no MultiKueue controller.
    pub multikueue: Option<MultiKueueSettings>,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        let host = ["POD_NAME", "HOSTNAME"]
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.is_empty())
            .unwrap_or_else(|| "quotagate".to_string());
        ManagerOptions {
            health_addr: None,
            leader_election: true,
            lease_namespace: "default".to_string(),
            lease_name: "quotagate-leader".to_string(),
            identity: leader::unique_identity(&host),
            resync: Duration::from_secs(1),
            ray: None,
            extra_metrics: None,
            metrics_auth: None,
            ray_gates: Default::default(),
            upgrade_deadline: None,
            explanations: Default::default(),
            ui: None,
            cycle_stats: Default::default(),
            pods_ready: None,
            workload_retention: None,
            fair_sharing: None,
            admission_fair_sharing: None,
            prioritize_preemptor_workloads: false,
            recompute_on_overlap: true,
            webhook: None,
            frameworks: Default::default(),
            managed_jobs: Default::default(),
            cycle_break_after: Duration::from_millis(crate::admission::CYCLE_BREAK_AFTER_MS.unsigned_abs()),
            multikueue: Some(MultiKueueSettings::default()),
        }
    }
}

/// The MultiKueue settings of a manager (Kueue's `multiKueue` configuration).
pub use crate::multikueue::Settings as MultiKueueSettings;

#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("leader election: {0}")]
    Leader(#[from] LeaderError),
    #[error("leader election task ended unexpectedly")]
    LeaderTaskDied,
    #[error("health endpoint on {addr}: {source}")]
    Health {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("embedded API server: {0}")]
    Embedded(#[from] embedded::ServeError),
}

/// The lease loop of this replica, while it runs leader election.
type LeaseTask = AbortOnDrop<Result<(), LeaderError>>;

/// Runs the controllers until `shutdown` completes (Ok) or the lease is lost (Err).
pub async fn run_manager(
    client: Client,
    opts: ManagerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ManagerError> {
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let metrics = Arc::new(Metrics::new());
    let mut tasks = Tasks::default();
    let dropped_events = crate::kit::events::DroppedEvents::default();
    let role = metrics.clone();
    let mk_metrics = Arc::new(crate::multikueue::metrics::Metrics::new(Arc::new(move || {
        role.role()
    })));
    let notify = Arc::new(Notify::new());
    let (caches, cache_tasks) = Caches::start(&client, notify.clone());
    tasks.extend(cache_tasks);
    let extra = with_multikueue(
        extra_metrics(&client, &opts, &caches.workload_events, &mut tasks),
        &mk_metrics,
    );
    let extra = with_dropped_events(extra, &dropped_events);
    let auth = (opts.metrics_auth.clone()).unwrap_or_else(|| health::MetricsAuth::delegated(client.clone()));
    let health = Health::new(metrics.clone())
        .with_extra(extra)
        .with_metrics_auth(Some(auth));
    if let Some(addr) = opts.health_addr {
        serve_health(addr, &client, &opts, &health, &cancel, &mut tasks).await?;
    }
    let (mut lease_task, rx) = start_leader_election(&client, &opts, &metrics, &mut tasks);
    if let Some(w) = opts.webhook.clone() {
        // The aggregated API groups ride on the webhook's TLS port (config/apiservice/).
        let groups = super::explain::router(opts.explanations.clone())
            .merge(super::visibility::router(client.clone()));
        let namespaces = super::webhook::NamespaceLookup {
            namespaces: caches.namespaces.clone(),
            local_queues: caches.local_queues.clone(),
        };
        let policy = super::webhook::Policy {
            gates: opts.ray_gates,
            frameworks: opts.frameworks,
            managed: opts.managed_jobs.clone(),
            namespaces: Some(namespaces),
        };
        tasks.extend(super::webhook::spawn(
            client.clone(),
            w,
            rx.clone(),
            health.clone(),
            policy,
            groups,
            cancel.clone(),
        ));
    }
    if let Some(ui) = &opts.ui {
        // Every replica serves it from its own caches: reads need no leadership.
        tasks.extend(super::ui::spawn(&client, &caches, ui, cancel.clone()));
    }
    let synced = ready_when_synced(&caches, &health, &mut tasks);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "quotagate".into(),
            instance: Some(opts.identity.clone()),
        },
    );
    let jobs = JobContext {
        client: client.clone(),
        recorder: recorder.clone(),
        leader: rx.clone(),
        managed_kinds: Arc::new(super::frameworks::managed_kinds(opts.frameworks)),
        wait_for_pods_ready: opts.pods_ready.is_some(),
        track_pods_scheduled: opts
            .pods_ready
            .as_ref()
            .is_some_and(|c| c.unscheduled_timeout.is_some()),
        metrics: metrics.clone(),
        managed_jobs: Arc::new(opts.managed_jobs.clone()),
        workload_events: caches.workload_events.clone(),
    };
    tasks.extend(super::frameworks::spawn(opts.frameworks, &jobs, &cancel));
    if let Some(mut mk) = super::frameworks::multikueue_options(opts.frameworks, &opts.multikueue) {
        mk.metrics = mk_metrics.clone();
        tasks.push(crate::multikueue::spawn_when_used(
            client.clone(),
            mk,
            rx.clone(),
            cancel.clone(),
        ));
    }
    if let Some(after) = opts.workload_retention {
        tasks.push(crate::jobframework::retention::spawn(
            client.clone(),
            after,
            rx.clone(),
        ));
    }
    if let Some(dashboards) = opts.ray.clone() {
        tasks.push(spawn_ray_operator_when_leader(
            client.clone(),
            dashboards,
            opts.ray_gates,
            opts.upgrade_deadline,
            opts.managed_jobs.clone(),
            caches.workload_events.clone(),
            rx.clone(),
        ));
    }
    let (queued, events_task) =
        crate::kit::events::QueuedRecorder::spawn(recorder.clone(), 4096, dropped_events.clone());
    tasks.push(events_task);
    let admission = AdmissionLoop {
        client: client.clone(),
        caches,
        notify,
        recorder: queued,
        metrics: metrics.clone(),
        leader: rx,
        resync: opts.resync,
        synced,
        explanations: opts.explanations.clone(),
        stats: opts.cycle_stats.clone(),
        pods_ready: opts.pods_ready.clone(),
        fair_sharing: opts.fair_sharing.clone(),
        admission_fair_sharing: opts.admission_fair_sharing.clone(),
        prioritize_preemptor_workloads: opts.prioritize_preemptor_workloads,
        recompute_on_overlap: opts.recompute_on_overlap,
        cycle_break_after: opts.cycle_break_after,
        own_writes: Default::default(),
    };
    let c = cancel.clone();
    let mut loop_task = AbortOnDrop(tokio::spawn(admission.run(async move { c.cancelled().await })));
    let (result, loop_ended) = wait_for_end(shutdown, &mut lease_task, &mut loop_task).await;
    tracing::info!("manager shutting down");
    cancel.cancel();
    stop(loop_task, loop_ended, lease_task, tasks, &client, &opts).await;
    if dropped_events.total() > 0 {
        tracing::info!(
            dropped = dropped_events.total(),
            "events dropped while the event queue was full"
        );
    }
    result
}

/// MultiKueue's series (`multikueue_...`, none before a Workload is dispatched) beside the extra ones.
fn with_multikueue(
    extra: Option<health::ExtraMetrics>,
    mk: &Arc<crate::multikueue::metrics::Metrics>,
) -> Option<health::ExtraMetrics> {
    let mk = mk.clone();
    Some(health::ExtraMetrics::new(move || {
        let mut text = mk.render();
        if let Some(e) = &extra {
            text.push_str(&e.render());
        }
        text
    }))
}

/// The dropped-events counter served beside the other extra series.
fn with_dropped_events(
    extra: Option<health::ExtraMetrics>,
    dropped: &crate::kit::events::DroppedEvents,
) -> Option<health::ExtraMetrics> {
    let dropped = dropped.clone();
    Some(health::ExtraMetrics::new(move || {
        let mut text = dropped.render();
        if let Some(e) = &extra {
            text.push_str(&e.render());
        }
        text
    }))
}

/// With the Ray operator: KubeRay's metrics and the gate's, beside any extra series.
fn extra_metrics(
    client: &Client,
    opts: &ManagerOptions,
    workload_events: &WorkloadEvents,
    tasks: &mut Tasks,
) -> Option<health::ExtraMetrics> {
    match (opts.ray.is_some(), opts.extra_metrics.clone()) {
        (false, extra) => extra,
        (true, extra) => {
            let ray = super::ray_metrics::spawn(client, workload_events, tasks);
            Some(health::ExtraMetrics::new(move || {
                let mut text = ray();
                if let Some(e) = &extra {
                    text.push_str(&e.render());
                }
                text
            }))
        }
    }
}

/// `/healthz`, `/readyz`, `/metrics` and the read-only APIs on `addr`, until `cancel`.
async fn serve_health(
    addr: SocketAddr,
    client: &Client,
    opts: &ManagerOptions,
    health: &Health,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) -> Result<(), ManagerError> {
    let listener = crate::embedded::listener::bind(addr)
        .await
        .map_err(|source| ManagerError::Health { addr, source })?;
    let router = health::router(health.clone())
        .merge(super::explain::router(opts.explanations.clone()))
        .merge(super::visibility::router(client.clone()));
    let c = cancel.clone();
    tasks.push(tokio::spawn(async move {
        if let Err(e) = crate::embedded::listener::serve_plain(listener, router, Default::default(), c).await
        {
            tracing::error!(error = %e, "health endpoint failed");
        }
    }));
    Ok(())
}

/// The lease loop (with leader election) and whether this replica leads now, with the role metric
/// following it. Without leader election this replica leads for good and there is no lease loop.
fn start_leader_election(
    client: &Client,
    opts: &ManagerOptions,
    metrics: &Arc<Metrics>,
    tasks: &mut Tasks,
) -> (Option<LeaseTask>, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(!opts.leader_election);
    if !opts.leader_election {
        metrics.set_role(Role::Standalone);
        // Kept alive (moved into a task that only ends with the manager) so leadership stays fixed.
        tasks.push(tokio::spawn(async move {
            tx.closed().await;
        }));
        return (None, rx);
    }
    metrics.set_role(Role::Follower);
    let api: Api<Lease> = Api::namespaced(client.clone(), &opts.lease_namespace);
    let cfg = LeaderConfig::new(&opts.lease_name, &opts.identity);
    // Dropped with the manager, it must not go on renewing the lease.
    let lease_task = AbortOnDrop(tokio::spawn(leader::run(api, cfg, tx)));
    let mut r = rx.clone();
    let m = metrics.clone();
    tasks.push(tokio::spawn(async move {
        while r.changed().await.is_ok() {
            m.set_role(if *r.borrow() { Role::Leader } else { Role::Follower });
        }
    }));
    (Some(lease_task), rx)
}

/// Marks the replica ready once the caches synced; the returned flag turns true then too.
fn ready_when_synced(caches: &Caches, health: &Health, tasks: &mut Tasks) -> watch::Receiver<bool> {
    let h = health.clone();
    let (synced_tx, synced) = watch::channel(false);
    let (ready, caches) = (caches.ready(), caches.clone());
    tasks.push(tokio::spawn(async move {
        // As controller-runtime's "Waiting for caches to sync": a start that takes long names the
        // kinds it still waits for, every 30 s.
        futures::pin_mut!(ready);
        while tokio::time::timeout(Duration::from_secs(30), &mut ready)
            .await
            .is_err()
        {
            tracing::warn!(waiting_for = ?caches.unsynced(), "caches not synced after 30 s");
        }
        h.set_ready(true);
        let _ = synced_tx.send(true);
        tracing::info!("caches synced");
    }));
    synced
}

/// Only the leader runs the Ray operator: it creates pods and Services and writes status.
fn spawn_ray_operator_when_leader(
    client: Client,
    dashboards: super::ray::Dashboards,
    gates: crate::api::ray::validation::RayFeatureGates,
    upgrade_deadline: Option<Duration>,
    managed_jobs: crate::api::kueue::config::ManagedJobs,
    workload_events: crate::admission::WorkloadEvents,
    mut leader: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*leader.borrow() {
            if leader.changed().await.is_err() {
                return;
            }
        }
        let _operator = super::ray::spawn_ray_operator(
            client,
            &dashboards,
            gates,
            upgrade_deadline,
            managed_jobs,
            Some(workload_events),
        );
        std::future::pending::<()>().await
    })
}

/// What ends the manager: `shutdown` (Ok), the lease loop (Err) or the admission loop ending (Ok,
/// and true: its handle has given its output). A lease loop that ended is taken out of `lease_task`:
/// its handle has given its output too, and the lease is no longer this replica's to release (the
/// API server going away ends it so, and awaiting it again in `stop` panicked).
async fn wait_for_end(
    shutdown: impl Future<Output = ()>,
    lease_task: &mut Option<LeaseTask>,
    loop_task: &mut AbortOnDrop<()>,
) -> (Result<(), ManagerError>, bool) {
    tokio::pin!(shutdown);
    let (result, loop_ended, lease_ended) = tokio::select! {
        _ = &mut shutdown => (Ok(()), false, false),
        r = async { match lease_task.as_mut() { Some(t) => t.await, None => std::future::pending().await } } => match r {
            Ok(Err(e)) => (Err(ManagerError::Leader(e)), false, true),
            _ => (Err(ManagerError::LeaderTaskDied), false, true),
        },
        _ = loop_task => (Ok(()), true, false),
    };
    if lease_ended {
        *lease_task = None;
    }
    (result, loop_ended)
}

/// Stops everything this replica started, after `cancel` was cancelled.
async fn stop(
    mut loop_task: AbortOnDrop<()>,
    loop_ended: bool,
    lease_task: Option<LeaseTask>,
    tasks: Tasks,
    client: &Client,
    opts: &ManagerOptions,
) {
    // A JoinHandle must not be polled again once it has given its output.
    if !loop_ended
        && tokio::time::timeout(Duration::from_secs(5), &mut loop_task)
            .await
            .is_err()
    {
        loop_task.abort();
        let _ = loop_task.await;
    }
    if let Some(t) = &lease_task {
        t.abort();
    }
    // A clean stop gives the lease up once nothing of this replica can write any more, so the next
    // replica leads within its retry period rather than after the lease runs out (a rolling
    // restart). A crash releases nothing, and the lease runs out as before.
    tasks.shutdown().await;
    if let Some(t) = lease_task {
        let _ = t.await;
        let api: Api<Lease> = Api::namespaced(client.clone(), &opts.lease_namespace);
        let cfg = LeaderConfig::new(&opts.lease_name, &opts.identity);
        // Bounded as a round is: a request that never answers must not hold the exit until the
        // kubelet's SIGKILL.
        let budget = leader::round_budget(&cfg, None, tokio::time::Instant::now());
        match tokio::time::timeout(budget, leader::release(&api, &cfg)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::info!(error = %e, "could not release the lease; it runs out instead"),
            Err(_) => tracing::info!(
                ?budget,
                "could not release the lease in time; it runs out instead"
            ),
        }
    }
}

/// Options of `quotagate run --embedded`.
#[derive(Clone, Debug, Default)]
pub struct EmbeddedOptions {
    /// Loopback address for kubectl (port 0 picks one); `None` keeps the API in-process only.
    pub listen: Option<SocketAddr>,
    /// Where to write a kubeconfig pointing at `listen`.
    pub kubeconfig_out: Option<PathBuf>,
    pub manager: ManagerOptions,
    /// Simulated node agent (pod start delay), gateway controller and endpoints; all on by default.
    pub sims: embedded::sim::SimConfig,
    /// With simulated Ray dashboards: the in-tree autoscaler and the load through HTTPRoutes.
    pub ray_sims: super::raysim::RaySimOptions,
}

/// A new embedded API server serving every quotagate CRD, with the shared admission path.
pub fn embedded_server() -> Arc<EmbeddedServer> {
    embedded_server_with(Default::default())
}

/// `embedded_server` whose admission applies these KubeRay feature gates.
pub fn embedded_server_with(gates: crate::api::ray::validation::RayFeatureGates) -> Arc<EmbeddedServer> {
    EmbeddedServer::new(
        &embedded::QuotagateCrds,
        Arc::new(embedded::QuotagateAdmission {
            gates,
            ..Default::default()
        }),
    )
}

/// The embedded API server and the manager in one process, until `shutdown` completes.
pub async fn run_embedded(
    opts: EmbeddedOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ManagerError> {
    let admission = embedded::QuotagateAdmission {
        gates: opts.manager.ray_gates,
        frameworks: opts.manager.frameworks,
        managed: opts.manager.managed_jobs.clone(),
    };
    let server = EmbeddedServer::new(&embedded::QuotagateCrds, Arc::new(admission));
    run_embedded_on(server, opts, shutdown).await
}

/// As [`run_embedded`], on a server the caller already holds (tests inspect or fault it).
pub async fn run_embedded_on(
    server: Arc<EmbeddedServer>,
    mut opts: EmbeddedOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ManagerError> {
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    // The embedded server has no TokenReview: its own tokens and RBAC decide who reads /metrics.
    if opts.manager.metrics_auth.is_none() {
        opts.manager.metrics_auth = Some(health::MetricsAuth::embedded(server.clone()));
    }
    server.aggregated.mount(
        super::explain::GROUP,
        super::explain::router(opts.manager.explanations.clone()),
    );
    server.aggregated.mount(
        super::visibility::GROUP,
        super::visibility::router(server.client()),
    );
    if let Some(listen) = opts.listen {
        let (addr, _handle) = server
            .spawn_tcp(listen, opts.kubeconfig_out.as_deref(), cancel.clone())
            .await?;
        tracing::info!(%addr, "embedded API server listening");
    }
    let runtime = opts.sims.node.as_ref().and_then(|n| n.runtime.clone());
    if let Some(rt) = &runtime {
        server.runtimes.register(rt.clone());
        // Process-run Ray heads have real dashboards, reached through their head Services' names.
        opts.manager.ray = opts
            .manager
            .ray
            .take()
            .map(|d| d.with_process_runtime(rt.names()));
    }
    let mut sims: Tasks = embedded::sim::spawn(server.client(), &opts.sims, cancel.clone()).into();
    if let Some(sim) = opts.manager.ray.as_ref().and_then(|d| d.sim()).cloned() {
        // The simulated Ray heads outlive this process as real ones would: beside the API state.
        if let Some(dir) = &server.config.data_dir {
            match sim.persist_in(dir) {
                Ok(n) => tracing::info!(heads = n, "simulated Ray state kept in the data directory"),
                Err(error) => tracing::warn!(%error, "simulated Ray starts with no state"),
            }
        }
        let (tasks, board) =
            super::raysim::spawn(server.client(), sim.clone(), &opts.ray_sims, cancel.clone());
        sims.extend(tasks);
        if opts.manager.extra_metrics.is_none() {
            opts.manager.extra_metrics = Some(health::ExtraMetrics::new(move || board.render()));
        }
    }
    // The embedded server's storage beside whatever else is served (etcd's database size, quota and
    // NOSPACE alarm, under names of our own).
    let store = server.store.clone();
    let connections = server.clone();
    let before = opts.manager.extra_metrics.take();
    opts.manager.extra_metrics = Some(health::ExtraMetrics::new(move || {
        let mut text = before
            .as_ref()
            .map(health::ExtraMetrics::render)
            .unwrap_or_default();
        text.push_str(&storage_metrics(&store));
        if let Some(open) = connections.connections() {
            text.push_str(&open.render());
        }
        text
    }));
    let result = run_manager(server.client(), opts.manager, shutdown).await;
    cancel.cancel();
    drop(sims);
    // Dropping the simulators aborted their tasks: the pods' processes and network go here.
    if let Some(rt) = runtime {
        rt.shutdown(embedded::sim::SHUTDOWN_GRACE).await;
    }
    result
}

/// The embedded store's size against its quota, and whether its data directory refuses writes.
fn storage_metrics(store: &embedded::store::Store) -> String {
    let (used, quota) = store.quota_usage();
    let alarm = u8::from(store.disk_alarm());
    format!(
        "# HELP quotagate_embedded_storage_bytes Heap bytes the stored objects hold, as the storage quota counts them.\n\
         # TYPE quotagate_embedded_storage_bytes gauge\nquotagate_embedded_storage_bytes {used}\n\
         # HELP quotagate_embedded_storage_quota_bytes The storage quota (--storage-quota): past it, writes that grow the store are refused.\n\
         # TYPE quotagate_embedded_storage_quota_bytes gauge\nquotagate_embedded_storage_quota_bytes {quota}\n\
         # HELP quotagate_embedded_storage_disk_alarm 1 while the data directory refuses writes (full or read-only), as etcd's NOSPACE alarm.\n\
         # TYPE quotagate_embedded_storage_disk_alarm gauge\nquotagate_embedded_storage_disk_alarm {alarm}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tasks alive on this runtime, once they have had a moment to end.
    async fn settled_alive_tasks(at_most: usize) -> usize {
        let metrics = tokio::runtime::Handle::current().metrics();
        for _ in 0..100 {
            if metrics.num_alive_tasks() <= at_most {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        metrics.num_alive_tasks()
    }

    /// The lease loop ending first (the API server went away: a leader-election round failed past the
    /// renew deadline) ends the manager with the lease error, and stopping does not await the lease
    /// loop's handle again: that panicked with "JoinHandle polled after completion" (exit 101) on a
    /// real control plane's restart.
    #[tokio::test]
    async fn a_lease_loop_that_ended_first_stops_cleanly() {
        let server = embedded_server();
        let lost = AbortOnDrop(tokio::spawn(async {
            Err(LeaderError::Lost("quotagate-leader".into()))
        }));
        let mut lease_task = Some(lost);
        let mut loop_task = AbortOnDrop(tokio::spawn(std::future::pending::<()>()));
        let (result, loop_ended) =
            wait_for_end(std::future::pending(), &mut lease_task, &mut loop_task).await;
        assert!(
            matches!(result, Err(ManagerError::Leader(LeaderError::Lost(_)))),
            "{result:?}"
        );
        assert!(!loop_ended);
        assert!(
            lease_task.is_none(),
            "the ended lease loop is still to be awaited"
        );
        let stopped = tokio::time::timeout(
            Duration::from_secs(10),
            stop(
                loop_task,
                loop_ended,
                lease_task,
                Tasks::default(),
                &server.client(),
                &ManagerOptions::default(),
            ),
        )
        .await;
        assert!(stopped.is_ok(), "stop did not return");
    }

    /// A manager dropped mid-run (its task aborted, as a crash or the end of a chaos run does) stops
    /// every task it spawned: a detached lease loop, cache watch or Ray operator would keep reconciling
    /// against the server forever, and a process that starts many managers (the chaos runner, the
    /// tests) would slow down run after run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_manager_leaves_no_task_behind() {
        let server = embedded_server();
        let mut ns = k8s_openapi::api::core::v1::Namespace::default();
        ns.metadata.name = Some("default".into());
        // One client (its buffer is a task of its own) for the whole test, cloned for the manager.
        let client = server.client();
        let _ = Api::all(client.clone()).create(&Default::default(), &ns).await;
        let before = settled_alive_tasks(0).await;
        let opts = ManagerOptions {
            leader_election: true,
            lease_namespace: "default".into(),
            identity: "m0".into(),
            ray: Some(super::super::ray::Dashboards::Simulated(Arc::new(
                crate::rayservice::dashboard::sim::RaySim::new(Default::default()),
            ))),
            ..Default::default()
        };
        let c = client.clone();
        let handle = tokio::spawn(async move { run_manager(c, opts, std::future::pending()).await });
        // Until it leads, so that the Ray operator and the admission loop run too.
        let leases: Api<Lease> = Api::namespaced(client, "default");
        for _ in 0..250 {
            if leases
                .get_opt(&ManagerOptions::default().lease_name)
                .await
                .ok()
                .flatten()
                .is_some()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            tokio::runtime::Handle::current().metrics().num_alive_tasks() > before + 5,
            "the manager did not start"
        );
        handle.abort();
        let _ = handle.await;
        let after = settled_alive_tasks(before).await;
        assert_eq!(after, before, "tasks still alive after the manager was dropped");
    }

    /// A resource-in-use finalizer is released only once the API server, not just the caches,
    /// shows nothing uses the object: the flavor cache can see a flavor's deletion before the
    /// ClusterQueue cache has seen the queue naming it (a flake of Kueue's "Should delete the
    /// resourceFlavor when the corresponding clusterQueue no longer uses the resourceFlavor").
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_finalizer_release_is_confirmed_against_the_api_server() {
        use crate::admission::{User, in_use_live};
        use crate::api::kueue::{ClusterQueue, Workload};
        let server = embedded_server();
        let client = server.client();
        let cq = ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "5")])
            .admission_check("check", &[])
            .build();
        Api::<ClusterQueue>::all(client.clone())
            .create(&Default::default(), &cq)
            .await
            .unwrap();
        assert!(in_use_live(&client, User::Flavor("on-demand")).await.unwrap());
        assert!(!in_use_live(&client, User::Flavor("spot")).await.unwrap());
        assert!(in_use_live(&client, User::AdmissionCheck("check")).await.unwrap());
        assert!(!in_use_live(&client, User::AdmissionCheck("other")).await.unwrap());

        let wls: Api<Workload> = Api::namespaced(client.clone(), "default");
        let wl: Workload = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        }))
        .unwrap();
        let mut wl = wls.create(&Default::default(), &wl).await.unwrap();
        assert!(
            !in_use_live(&client, User::ClusterQueue("cq")).await.unwrap(),
            "a pending workload holds no quota"
        );
        let admission = crate::api::kueue::Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![crate::api::kueue::PodSetAssignment {
                name: "main".into(),
                flavors: [("cpu".to_string(), "on-demand".to_string())].into(),
                resource_usage: [(
                    "cpu".to_string(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
                )]
                .into(),
                count: Some(1),
                ..Default::default()
            }],
        };
        wl.status = Some(crate::admission::admitted(&wl, admission, jiff::Timestamp::now()));
        wls.replace_status("w", &Default::default(), &wl).await.unwrap();
        assert!(in_use_live(&client, User::ClusterQueue("cq")).await.unwrap());
        assert!(!in_use_live(&client, User::ClusterQueue("other")).await.unwrap());
    }
}
