//! Reflector caches of the kinds the admission loop reads; every change wakes the loop.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{Future, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use super::non_tas_pods::NonTasUsage;
use super::sync::Snapshot;
use super::workload_events::WorkloadEvents;
use crate::api::kueue::{
    AdmissionCheck, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology, Workload,
    WorkloadPriorityClass,
};

#[derive(Clone)]
pub struct Caches {
    pub cluster_queues: Store<ClusterQueue>,
    pub cohorts: Store<Cohort>,
    pub flavors: Store<ResourceFlavor>,
    pub local_queues: Store<LocalQueue>,
    pub workloads: Store<Workload>,
    pub namespaces: Store<Namespace>,
    pub priority_classes: Store<WorkloadPriorityClass>,
    pub admission_checks: Store<AdmissionCheck>,
    /// For topology-aware scheduling: the Topologies and the Nodes their domains are made of.
    pub topologies: Store<Topology>,
    pub nodes: Store<Node>,
    /// What pods TAS did not place request per node, watched while a Topology exists.
    pub non_tas: NonTasUsage,
    /// The Workload watch above, shared with the controllers that own Workloads.
    pub workload_events: WorkloadEvents,
}

/// Reflects `api` into a store and hands every watch event to `on` after the store took it, `None`
/// for a watch error (logged; the watcher re-lists or resumes by itself). The one reflector loop of the
/// process: the admission caches, the web view and the Ray metrics all start theirs here.
pub fn reflect_each<K>(
    api: Api<K>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    mut on: impl FnMut(Option<&watcher::Event<K>>) + Send + 'static,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    let kind = K::kind(&K::DynamicType::default()).to_string();
    tasks.push(tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => on(Some(&ev)),
                Err(e) => {
                    tracing::debug!(kind = %kind, error = %e, "watch interrupted");
                    on(None);
                }
            }
        }
    }));
    reader
}

/// A reflected store whose every change (or watch interruption) wakes the admission loop.
fn reflect<K>(api: Api<K>, notify: Arc<Notify>, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    reflect_each(api, tasks, move |_| notify.notify_one())
}

impl Caches {
    /// Starts one watch per kind; the returned tasks run until aborted.
    pub fn start(client: &Client, notify: Arc<Notify>) -> (Caches, Vec<tokio::task::JoinHandle<()>>) {
        let mut tasks = Vec::new();
        let topology_changed = Arc::new(Notify::new());
        let topologies = {
            let (wake, changed) = (notify.clone(), topology_changed.clone());
            reflect_each(Api::all(client.clone()), &mut tasks, move |_| {
                wake.notify_one();
                changed.notify_one();
            })
        };
        let non_tas = NonTasUsage::default();
        let workload_events = WorkloadEvents::default();
        let workloads = {
            let (wake, events) = (notify.clone(), workload_events.clone());
            reflect_each(Api::all(client.clone()), &mut tasks, move |ev| {
                wake.notify_one();
                if let Some(ev) = ev {
                    events.publish(ev);
                }
            })
        };
        workload_events.set_store(workloads.clone());
        tasks.push(non_tas.start(
            client.clone(),
            topologies.clone(),
            topology_changed,
            notify.clone(),
        ));
        let caches = Caches {
            cluster_queues: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            cohorts: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            flavors: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            local_queues: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            workloads,
            namespaces: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            priority_classes: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            admission_checks: reflect(Api::all(client.clone()), notify.clone(), &mut tasks),
            topologies,
            nodes: reflect(Api::all(client.clone()), notify, &mut tasks),
            non_tas,
            workload_events,
        };
        (caches, tasks)
    }

    /// The kinds whose cache has not listed them yet, for a log line while the manager waits.
    pub fn unsynced(&self) -> Vec<&'static str> {
        use futures::FutureExt;
        fn pending<K: Resource + Clone>(s: &Store<K>) -> bool
        where
            K::DynamicType: Eq + Hash + Clone,
        {
            s.wait_until_ready().now_or_never().is_none()
        }
        let mut out = Vec::new();
        for (kind, waiting) in [
            ("ClusterQueue", pending(&self.cluster_queues)),
            ("Cohort", pending(&self.cohorts)),
            ("ResourceFlavor", pending(&self.flavors)),
            ("LocalQueue", pending(&self.local_queues)),
            ("Workload", pending(&self.workloads)),
            ("Namespace", pending(&self.namespaces)),
            ("WorkloadPriorityClass", pending(&self.priority_classes)),
            ("AdmissionCheck", pending(&self.admission_checks)),
            ("Topology", pending(&self.topologies)),
            ("Node", pending(&self.nodes)),
        ] {
            if waiting {
                out.push(kind);
            }
        }
        out
    }

    /// Resolves once every cache has listed its kind.
    pub fn ready(&self) -> impl Future<Output = ()> + Send + 'static {
        let c = self.clone();
        async move {
            let _ = c.cluster_queues.wait_until_ready().await;
            let _ = c.cohorts.wait_until_ready().await;
            let _ = c.flavors.wait_until_ready().await;
            let _ = c.local_queues.wait_until_ready().await;
            let _ = c.workloads.wait_until_ready().await;
            let _ = c.namespaces.wait_until_ready().await;
            let _ = c.priority_classes.wait_until_ready().await;
            let _ = c.admission_checks.wait_until_ready().await;
            let _ = c.topologies.wait_until_ready().await;
            let _ = c.nodes.wait_until_ready().await;
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut workloads = self.workloads.state();
        // Deterministic order: creation time, then name (the core orders queues itself).
        workloads.sort_by(|a, b| {
            (
                a.metadata.creation_timestamp.as_ref().map(|t| t.0),
                &a.metadata.namespace,
                &a.metadata.name,
            )
                .cmp(&(
                    b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    &b.metadata.namespace,
                    &b.metadata.name,
                ))
        });
        Snapshot {
            cluster_queues: self.cluster_queues.state(),
            cohorts: self.cohorts.state(),
            flavors: self.flavors.state(),
            local_queues: self.local_queues.state(),
            workloads,
            namespaces: self
                .namespaces
                .state()
                .iter()
                .map(|n| {
                    (
                        n.metadata.name.clone().unwrap_or_default(),
                        n.metadata.labels.clone().unwrap_or_default(),
                    )
                })
                .collect::<BTreeMap<_, _>>(),
            priority_classes: self
                .priority_classes
                .state()
                .iter()
                .map(|p| (p.metadata.name.clone().unwrap_or_default(), p.spec.value))
                .collect(),
            admission_checks: self.admission_checks.state(),
            topologies: self.topologies.state(),
            nodes: self.nodes.state(),
            non_tas: self.non_tas.per_node(),
        }
    }
}
