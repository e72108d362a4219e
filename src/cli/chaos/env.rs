//! The embedded cluster one chaos run plays on: the API server, the simulated node agent, endpoints and
//! gateway controllers, the simulated Ray dashboards, and the manager (restartable).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::world::{NS, PRIORITY_CLASSES, Preemption, Queue, queue_names};
use crate::api::kueue::builders::workload_priority_class;
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, ResourceGroup, WorkloadPriorityClass};
use crate::embedded::EmbeddedServer;
use crate::rayservice::dashboard::sim::RaySim;
use crate::wiring::manager::{ManagerOptions, embedded_server, run_manager};
use crate::wiring::ray::Dashboards;

/// One manager process; dropping it aborts it (a crash), `stop` shuts it down cleanly.
struct Manager {
    stop: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<()>,
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

pub(super) struct Env {
    pub(super) server: Arc<EmbeddedServer>,
    pub(super) client: Client,
    pub(super) sim: Arc<RaySim>,
    dashboards: Dashboards,
    manager: Option<Manager>,
    /// Why a manager ended on its own (it must not: that is a failure of the run).
    manager_error: Arc<Mutex<Option<String>>>,
    _sims: DropGuard,
}

impl Env {
    /// Server, simulators and one manager. Pods take `pod_start` to start, so a fault can reach them
    /// while they are still Pending.
    pub(super) async fn start(pod_start: Duration) -> Env {
        let server = embedded_server();
        let client = server.client();
        let cancel = CancellationToken::new();
        let mut sims = crate::embedded::sim::SimConfig::default();
        if let Some(node) = sims.node.as_mut() {
            node.start_delay = pod_start;
        }
        crate::embedded::sim::spawn(client.clone(), &sims, cancel.clone());
        let sim = Arc::new(RaySim::new(crate::rayservice::dashboard::sim::SimOptions {
            build_delay: Duration::from_millis(50),
            replica_start_delay: Duration::from_millis(50),
            ..Default::default()
        }));
        // The in-tree autoscaler stand-in, for parity with `run --embedded`; no load: blue/green
        // services have no HTTPRoute to send it through.
        let opts = crate::wiring::raysim::RaySimOptions {
            load_rps: 0.0,
            submitter: false,
            ..Default::default()
        };
        crate::wiring::raysim::spawn(client.clone(), sim.clone(), &opts, cancel.clone());
        let mut env = Env {
            server,
            client,
            dashboards: Dashboards::Simulated(sim.clone()),
            sim,
            manager: None,
            manager_error: Arc::new(Mutex::new(None)),
            _sims: cancel.drop_guard(),
        };
        env.restart_manager("m0").await;
        env
    }

    /// Stops the manager (cleanly, as a rolling restart does) and starts a fresh one: no memory of
    /// the old one survives but what it wrote into the API (DESIGN I5).
    pub(super) async fn restart_manager(&mut self, identity: &str) {
        self.stop_manager().await;
        self.manager = Some(self.spawn_manager(identity));
    }

    /// A leader change between two managers: a second replica starts beside the leader (electing on
    /// the same Lease, its caches filling while it follows), then the leader stops cleanly, gives the
    /// Lease up, and the second one leads.
    pub(super) async fn leader_change(&mut self, identity: &str) {
        let next = self.spawn_manager(identity);
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.stop_manager().await;
        self.manager = Some(next);
    }

    async fn stop_manager(&mut self) {
        if let Some(mut m) = self.manager.take() {
            if let Some(s) = m.stop.take() {
                let _ = s.send(());
            }
            let _ = tokio::time::timeout(Duration::from_secs(20), &mut m.handle).await;
        }
    }

    /// One manager with leader election on, as replicas run in a cluster.
    fn spawn_manager(&self, identity: &str) -> Manager {
        let opts = ManagerOptions {
            leader_election: true,
            lease_namespace: NS.to_string(),
            identity: identity.to_string(),
            resync: Duration::from_millis(300),
            ray: Some(self.dashboards.clone()),
            ..Default::default()
        };
        let (tx, rx) = oneshot::channel::<()>();
        let client = self.client.clone();
        let error = self.manager_error.clone();
        let handle = tokio::spawn(async move {
            if let Err(e) = run_manager(client, opts, async move {
                let _ = rx.await;
            })
            .await
            {
                *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
            }
        });
        Manager {
            stop: Some(tx),
            handle,
        }
    }

    pub(super) fn manager_error(&self) -> Option<String> {
        self.manager_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Flavor `default`; per queue of the world a ClusterQueue with its CPU quota (and memory enough for
    /// any run: workers request memory through the operator's init container) and a LocalQueue in the
    /// default namespace (`queue_names`); two ClusterQueues share the cohort `pool`. The
    /// WorkloadPriorityClasses of `PRIORITY_CLASSES` too.
    pub(super) async fn queues(&self, queues: &[Queue], preemption: Preemption) -> Result<(), kube::Error> {
        let ns: Api<Namespace> = Api::all(self.client.clone());
        if ns.get_opt(NS).await?.is_none() {
            let mut n = Namespace::default();
            n.metadata.name = Some(NS.into());
            ns.create(&PostParams::default(), &n).await?;
        }
        let pp = PostParams::default();
        Api::<ResourceFlavor>::all(self.client.clone())
            .create(&pp, &ResourceFlavor::build("default").build())
            .await?;
        for (name, value) in PRIORITY_CLASSES {
            Api::<WorkloadPriorityClass>::all(self.client.clone())
                .create(&pp, &workload_priority_class(name, value))
                .await?;
        }
        let cohort = queues.len() > 1;
        for (i, q) in queues.iter().enumerate() {
            let (cq_name, lq_name) = queue_names(i);
            let mut cq = ClusterQueue::build(cq_name).build();
            cq.spec.resource_groups = Some(resource_groups(q.quota, q.borrowing_limit, q.lent(q.quota))?);
            cq.spec.namespace_selector = Some(Default::default());
            if cohort {
                cq.spec.cohort_name = Some("pool".into());
            }
            if preemption.within != "Never" || (cohort && preemption.reclaim != "Never") {
                let mut p = serde_json::json!({"withinClusterQueue": preemption.within});
                if cohort {
                    p["reclaimWithinCohort"] = serde_json::json!(preemption.reclaim);
                }
                cq.spec.preemption = Some(serde_json::from_value(p).map_err(kube::Error::SerdeError)?);
            }
            Api::<ClusterQueue>::all(self.client.clone())
                .create(&pp, &cq)
                .await?;
            let lq = LocalQueue::build(lq_name, NS).cluster_queue(cq_name).build();
            Api::<LocalQueue>::namespaced(self.client.clone(), NS)
                .create(&pp, &lq)
                .await?;
        }
        Ok(())
    }
}

/// One `default` flavor with `milli` CPU (borrowing at most `borrow` more, lending at most `lend` of
/// it, when set) and 64Gi memory.
pub(super) fn resource_groups(
    milli: i64,
    borrow: Option<i64>,
    lend: Option<i64>,
) -> Result<Vec<ResourceGroup>, kube::Error> {
    let mut cpu = serde_json::json!({"name": "cpu", "nominalQuota": format!("{milli}m")});
    if let Some(b) = borrow {
        cpu["borrowingLimit"] = serde_json::json!(format!("{b}m"));
    }
    if let Some(l) = lend {
        cpu["lendingLimit"] = serde_json::json!(format!("{l}m"));
    }
    let v = serde_json::json!([{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
        "resources": [cpu, {"name": "memory", "nominalQuota": "64Gi"}]}]}]);
    serde_json::from_value(v).map_err(kube::Error::SerdeError)
}
