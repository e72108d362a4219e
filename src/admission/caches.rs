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

/// The kinds whose reflector has not finished its first list: each reflector adds its kind when it
/// is made, and removes it at its first `InitDone`. Readiness is tracked here, not awaited from the
/// stores: a store's `wait_until_ready` wakes only the last of several tasks waiting on it
/// (kube-runtime's `DelayedInit` keeps one oneshot receiver, whose waker each poll replaces), and the
/// Workload store is shared with a controller whose runner waits on it too. Awaited from both, the
/// manager's "caches synced" could wait for ever, one start in a few: never ready, never admitting.
#[derive(Clone, Default)]
pub(crate) struct Listed(Arc<tokio::sync::watch::Sender<BTreeSet<String>>>);

impl Listed {
    /// The watch callback's part for a reflector of `K`, whose kind is not listed until its first
    /// `InitDone` (the store holds the list by then).
    fn track<K: Resource<DynamicType = ()>>(
        &self,
    ) -> impl FnMut(Option<&watcher::Event<K>>) + Send + 'static {
        let kind = K::kind(&()).into_owned();
        self.0.send_modify(|s| {
            s.insert(kind.clone());
        });
        let listed = self.0.clone();
        move |ev| {
            if matches!(ev, Some(watcher::Event::InitDone)) {
                listed.send_if_modified(|s| s.remove(&kind));
            }
        }
    }

    /// The kinds not listed yet.
    fn pending(&self) -> Vec<String> {
        self.0.borrow().iter().cloned().collect()
    }

    /// Resolves once every tracked kind is listed; every waiter is woken.
    fn ready(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let mut rx = self.0.subscribe();
        async move {
            let _ = rx.wait_for(BTreeSet::is_empty).await;
        }
    }
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
fn reflect<K>(
    client: &Client,
    notify: Arc<Notify>,
    listed: &Listed,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut listed = listed.track::<K>();
    reflect_each(Api::all(client.clone()), tasks, move |ev| {
        listed(ev);
        notify.notify_one();
    })
}

impl Caches {
    /// Starts one watch per kind; the returned tasks run until aborted.
    pub fn start(client: &Client, notify: Arc<Notify>) -> (Caches, Vec<tokio::task::JoinHandle<()>>) {
        let mut tasks = Vec::new();
        let unlisted = Listed::default();
        let topology_changed = Arc::new(Notify::new());
        let topologies = {
            let (wake, changed, mut listed) = (notify.clone(), topology_changed.clone(), unlisted.track());
            reflect_each(Api::all(client.clone()), &mut tasks, move |ev| {
                listed(ev);
                wake.notify_one();
                changed.notify_one();
            })
        };
        let non_tas = NonTasUsage::default();
        let workload_events = WorkloadEvents::default();
        let workloads = {
            let (wake, events, mut listed) = (notify.clone(), workload_events.clone(), unlisted.track());
            reflect_each(Api::all(client.clone()), &mut tasks, move |ev| {
                listed(ev);
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
            cluster_queues: reflect(client, notify.clone(), &unlisted, &mut tasks),
            cohorts: reflect(client, notify.clone(), &unlisted, &mut tasks),
            flavors: reflect(client, notify.clone(), &unlisted, &mut tasks),
            local_queues: reflect(client, notify.clone(), &unlisted, &mut tasks),
            workloads,
            namespaces: reflect(client, notify.clone(), &unlisted, &mut tasks),
            priority_classes: reflect(client, notify.clone(), &unlisted, &mut tasks),
            admission_checks: reflect(client, notify.clone(), &unlisted, &mut tasks),
            topologies,
            nodes: reflect(client, notify, &unlisted, &mut tasks),
            non_tas,
            workload_events,
            unlisted,
        };
        (caches, tasks)
    }

    /// The kinds whose cache has not listed them yet, for a log line while the manager waits.
    pub fn unsynced(&self) -> Vec<String> {
        self.unlisted.pending()
    }

    /// Resolves once every cache has listed its kind (or once every reflector and cache is gone).
    pub fn ready(&self) -> impl Future<Output = ()> + Send + 'static {
        self.unlisted.ready()
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
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    // Ours: several tasks wait for the caches at once (the manager's readiness, the admission loop);
    // each is woken once the last kind is listed, where a store's own readiness wakes only the last
    // task that polled it.
    #[tokio::test]
    async fn every_waiter_wakes_once_the_last_kind_is_listed() {
        let l = Listed::default();
        let (mut workloads, mut nodes) = (l.track::<Workload>(), l.track::<Node>());
        let (a, b) = (tokio::spawn(l.ready()), tokio::spawn(l.ready()));
        tokio::task::yield_now().await;
        workloads(Some(&watcher::Event::Init));
        workloads(Some(&watcher::Event::InitDone));
        nodes(None);
        // Another kind's events do not list this one.
        l.track::<ConfigMap>()(Some(&watcher::Event::InitDone));
        assert!(l.ready().now_or_never().is_none(), "Node is not listed yet");
        assert_eq!(l.pending(), ["Node"]);
        nodes(Some(&watcher::Event::InitDone));
        let both = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            a.await.unwrap();
            b.await.unwrap();
        });
        assert!(both.await.is_ok(), "both waiters woke");
        // A re-list after a watch error changes nothing: listed once is listed.
        nodes(Some(&watcher::Event::InitDone));
        assert!(l.ready().now_or_never().is_some());
    }
}
