//! Reflector caches of the kinds the admission loop reads; every change wakes the loop.

use std::collections::{BTreeMap, BTreeSet};
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
    /// The kinds not listed yet (see [`Listed`]).
    pub(crate) unlisted: Listed,
}

/// The kinds whose reflector has not finished its first list, emptied by each one's first
/// `InitDone`. Readiness is tracked here, not awaited from the stores: a store's
/// `wait_until_ready` wakes only the last of several tasks waiting on it (kube-runtime's
/// `DelayedInit` keeps one oneshot receiver, whose waker each poll replaces), and the Workload
/// store is shared with a controller whose runner waits on it too. Awaited from both, the
/// manager's "caches synced" could wait for ever, one start in a few: never ready, never admitting.
#[derive(Clone)]
pub(crate) struct Listed(Arc<tokio::sync::watch::Sender<BTreeSet<&'static str>>>);

/// Nothing to wait for (caches built by hand, as tests do).
impl Default for Listed {
    fn default() -> Self {
        Listed::new(&[])
    }
}

impl Listed {
    fn new(kinds: &[&'static str]) -> Self {
        Listed(Arc::new(tokio::sync::watch::Sender::new(
            kinds.iter().copied().collect(),
        )))
    }

    /// The watch callback's part: `kind` is listed at its first `InitDone` (the store holds the list by then).
    fn on<K>(&self, kind: &'static str, ev: Option<&watcher::Event<K>>) {
        if matches!(ev, Some(watcher::Event::InitDone)) {
            self.0.send_if_modified(|s| s.remove(kind));
        }
    }
}

const KINDS: [&str; 10] = [
    "ClusterQueue",
    "Cohort",
    "ResourceFlavor",
    "LocalQueue",
    "Workload",
    "Namespace",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Topology",
    "Node",
];

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
fn reflect<K>(
    api: Api<K>,
    notify: Arc<Notify>,
    listed: (&Listed, &'static str),
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (listed, kind) = (listed.0.clone(), listed.1);
    reflect_each(api, tasks, move |ev| {
        listed.on(kind, ev);
        notify.notify_one();
    })
}

fn all<K: Resource<DynamicType = ()>>(client: &Client) -> Api<K> {
    Api::all(client.clone())
}

impl Caches {
    /// Starts one watch per kind; the returned tasks run until aborted.
    pub fn start(client: &Client, notify: Arc<Notify>) -> (Caches, Vec<tokio::task::JoinHandle<()>>) {
        let mut tasks = Vec::new();
        let unlisted = Listed::new(&KINDS);
        let topology_changed = Arc::new(Notify::new());
        let topologies = {
            let (wake, changed, listed) = (notify.clone(), topology_changed.clone(), unlisted.clone());
            reflect_each(Api::all(client.clone()), &mut tasks, move |ev| {
                listed.on("Topology", ev);
                wake.notify_one();
                changed.notify_one();
            })
        };
        let non_tas = NonTasUsage::default();
        let workload_events = WorkloadEvents::default();
        let workloads = {
            let (wake, events, listed) = (notify.clone(), workload_events.clone(), unlisted.clone());
            reflect_each(Api::all(client.clone()), &mut tasks, move |ev| {
                listed.on("Workload", ev);
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
            cluster_queues: reflect(
                all(client),
                notify.clone(),
                (&unlisted, "ClusterQueue"),
                &mut tasks,
            ),
            cohorts: reflect(all(client), notify.clone(), (&unlisted, "Cohort"), &mut tasks),
            flavors: reflect(
                all(client),
                notify.clone(),
                (&unlisted, "ResourceFlavor"),
                &mut tasks,
            ),
            local_queues: reflect(all(client), notify.clone(), (&unlisted, "LocalQueue"), &mut tasks),
            workloads,
            namespaces: reflect(all(client), notify.clone(), (&unlisted, "Namespace"), &mut tasks),
            priority_classes: reflect(
                all(client),
                notify.clone(),
                (&unlisted, "WorkloadPriorityClass"),
                &mut tasks,
            ),
            admission_checks: reflect(
                all(client),
                notify.clone(),
                (&unlisted, "AdmissionCheck"),
                &mut tasks,
            ),
            topologies,
            nodes: reflect(all(client), notify, (&unlisted, "Node"), &mut tasks),
            non_tas,
            workload_events,
            unlisted,
        };
        (caches, tasks)
    }

    /// The kinds whose cache has not listed them yet, for a log line while the manager waits.
    pub fn unsynced(&self) -> Vec<&'static str> {
        self.unlisted.0.borrow().iter().copied().collect()
    }

    /// Resolves once every cache has listed its kind (or once every reflector and cache is gone).
    pub fn ready(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.unlisted.0.subscribe();
        async move {
            let _ = rx.wait_for(BTreeSet::is_empty).await;
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

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn ready(l: &Listed) -> impl Future<Output = ()> + use<> {
        let mut rx = l.0.subscribe();
        async move {
            let _ = rx.wait_for(BTreeSet::is_empty).await;
        }
    }

    // Ours: several tasks wait for the caches at once (the manager's readiness, the admission loop);
    // each is woken once the last kind is listed, where a store's own readiness wakes only the last
    // task that polled it.
    #[tokio::test]
    async fn every_waiter_wakes_once_the_last_kind_is_listed() {
        let l = Listed::new(&["Workload", "Node"]);
        let (a, b) = (tokio::spawn(ready(&l)), tokio::spawn(ready(&l)));
        tokio::task::yield_now().await;
        l.on::<Node>("Workload", Some(&watcher::Event::Init));
        l.on::<Node>("Workload", Some(&watcher::Event::InitDone));
        l.on::<Node>("Node", None);
        assert!(ready(&l).now_or_never().is_none(), "Node is not listed yet");
        assert_eq!(l.0.borrow().iter().copied().collect::<Vec<_>>(), ["Node"]);
        l.on::<Node>("Node", Some(&watcher::Event::InitDone));
        let both = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            a.await.unwrap();
            b.await.unwrap();
        });
        assert!(both.await.is_ok(), "both waiters woke");
        // A re-list after a watch error changes nothing: listed once is listed.
        l.on::<Node>("Node", Some(&watcher::Event::InitDone));
        assert!(ready(&l).now_or_never().is_some());
    }
}
