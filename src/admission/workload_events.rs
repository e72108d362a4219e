//! One watch of Workloads per process, shared: the admission caches' watch hands every change of a
//! Workload to the controllers that own Workloads, instead of each of them opening a watch of its own
//! (controller-runtime shares one informer per kind across a manager's reconcilers in the same way).
//!
//! A controller that owns Workloads only needs to know which of its objects to wake, so a
//! subscriber gets the Workload's name, namespace and owner references, and only for Workloads with
//! an owner reference of its kind (the references kube-runtime's `owns` maps back to owners). A
//! Workload no job owns (a bare one, as a benchmark creates) costs the subscribers nothing. A
//! controller whose own objects are Workloads gets those it acts on whole, and reads the others from
//! the shared store.

use std::sync::{Arc, Mutex, OnceLock};

use futures::Stream;
use kube::Resource;
use kube::api::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio::sync::mpsc;

use crate::api::kueue::Workload;

/// What a subscriber gets: a Workload reduced to what maps it to its owners.
pub type Touched = PartialObjectMeta<Workload>;

type Wants = Box<dyn Fn(&Workload) -> bool + Send + Sync>;

enum Subscriber {
    /// `(apiVersion, kind)` of the owners it maps Workloads to.
    Owners {
        owners: Vec<(String, String)>,
        tx: mpsc::UnboundedSender<Touched>,
    },
    Whole {
        wants: Wants,
        tx: mpsc::UnboundedSender<Workload>,
    },
}

impl Subscriber {
    /// Hands `wl` over if it wants it; false once its stream is gone.
    fn offer(&self, wl: &Workload) -> bool {
        match self {
            Subscriber::Owners { owners, tx } => {
                let mine = wl
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| owners.iter().any(|(v, k)| o.kind == *k && o.api_version == *v));
                !mine || tx.send(reduced(wl)).is_ok()
            }
            Subscriber::Whole { wants, tx } => !wants(wl) || tx.send(wl.clone()).is_ok(),
        }
    }
}

/// The fan-out of the shared Workload watch. Cloning shares it.
#[derive(Clone, Default)]
pub struct WorkloadEvents {
    subscribers: Arc<Mutex<Vec<Subscriber>>>,
    store: Arc<OnceLock<Store<Workload>>>,
}

impl WorkloadEvents {
    /// The Workloads with an owner reference to a `K` (its `apiVersion` and `kind`), from now on:
    /// a stream for `Controller::owns_stream`. A subscriber that started late missed nothing it
    /// needs, because its own objects' initial list reconciles each of them anyway. The channel is
    /// unbounded so the shared watch never waits for a controller; what it holds is a few hundred
    /// bytes per change not yet taken, and the controller takes them as fast as it maps owners.
    pub fn owned_by<K: Resource<DynamicType = ()>>(
        &self,
    ) -> impl Stream<Item = Result<Touched, watcher::Error>> + Send + 'static {
        self.owned_by_any(vec![(
            K::api_version(&()).into_owned(),
            K::kind(&()).into_owned(),
        )])
    }

    /// The Workloads with an owner reference to any of `owners` (`(apiVersion, kind)`), as `owned_by`.
    pub fn owned_by_any(
        &self,
        owners: Vec<(String, String)>,
    ) -> impl Stream<Item = Result<Touched, watcher::Error>> + Send + 'static {
        let (tx, mut rx) = mpsc::unbounded_channel();
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.push(Subscriber::Owners { owners, tx });
        }
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|o| o.map(Ok)))
    }

    /// Every Workload `wants` takes, whole, as it is applied or deleted from now on (deletions carry
    /// the last state), for `Controller::for_stream` with [`Self::store`] or a tracker of its own.
    pub fn whole(
        &self,
        wants: impl Fn(&Workload) -> bool + Send + Sync + 'static,
    ) -> impl Stream<Item = Result<Workload, watcher::Error>> + Send + 'static {
        let (tx, mut rx) = mpsc::unbounded_channel();
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.push(Subscriber::Whole {
                wants: Box::new(wants),
                tx,
            });
        }
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|o| o.map(Ok)))
    }

    /// The store the shared watch fills, once the watch runs (`None` for a hub no watch feeds).
    pub fn store(&self) -> Option<Store<Workload>> {
        self.store.get().cloned()
    }

    /// Names the store the watch that publishes here fills.
    pub fn set_store(&self, store: Store<Workload>) {
        let _ = self.store.set(store);
    }

    /// Hands one event of the shared watch to the subscribers whose kind owns the Workload.
    /// Subscribers whose stream was dropped are forgotten.
    pub fn publish(&self, event: &watcher::Event<Workload>) {
        match event {
            watcher::Event::Apply(wl) | watcher::Event::Delete(wl) | watcher::Event::InitApply(wl) => {
                self.touched(wl)
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }

    fn touched(&self, wl: &Workload) {
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.retain(|s| s.offer(wl));
        }
    }

    /// How many controllers are subscribed.
    pub fn subscribers(&self) -> usize {
        self.subscribers.lock().map_or(0, |s| s.len())
    }
}

impl std::fmt::Debug for WorkloadEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorkloadEvents({} subscribers)", self.subscribers())
    }
}

fn reduced(wl: &Workload) -> Touched {
    PartialObjectMeta {
        types: None,
        metadata: ObjectMeta {
            name: wl.metadata.name.clone(),
            namespace: wl.metadata.namespace.clone(),
            uid: wl.metadata.uid.clone(),
            owner_references: wl.metadata.owner_references.clone(),
            ..ObjectMeta::default()
        },
        _phantom: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::api::ray::RayCluster;

    fn wl(name: &str, owner: Option<(&str, &str)>) -> Workload {
        let mut w = Workload::new(name, Default::default());
        w.metadata.namespace = Some("ns".into());
        w.metadata.owner_references = owner.map(|(api_version, kind)| {
            vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: format!("{name}-owner"),
                uid: "u".into(),
                controller: Some(true),
                ..Default::default()
            }]
        });
        w
    }

    fn ready<S: Stream<Item = Result<Touched, watcher::Error>> + Unpin>(s: &mut S) -> Vec<String> {
        let mut got = Vec::new();
        while let Some(Some(Ok(t))) = s.next().now_or_never() {
            got.push(t.metadata.name.unwrap_or_default());
        }
        got
    }

    #[test]
    fn each_subscriber_gets_only_the_workloads_its_kind_owns() {
        let hub = WorkloadEvents::default();
        let mut jobs = Box::pin(hub.owned_by::<Job>());
        let mut clusters = Box::pin(hub.owned_by::<RayCluster>());
        hub.publish(&watcher::Event::Apply(wl("of-job", Some(("batch/v1", "Job")))));
        hub.publish(&watcher::Event::InitApply(wl(
            "of-cluster",
            Some(("ray.io/v1", "RayCluster")),
        )));
        hub.publish(&watcher::Event::Apply(wl("bare", None)));
        // Same kind, another group: not a batch Job.
        hub.publish(&watcher::Event::Apply(wl(
            "other-job",
            Some(("example.com/v1", "Job")),
        )));
        hub.publish(&watcher::Event::Delete(wl("gone", Some(("batch/v1", "Job")))));
        assert_eq!(ready(&mut jobs), vec!["of-job", "gone"]);
        assert_eq!(ready(&mut clusters), vec!["of-cluster"]);
    }

    #[test]
    fn a_subscriber_gets_what_maps_to_its_owner() {
        let hub = WorkloadEvents::default();
        let mut jobs = Box::pin(hub.owned_by::<Job>());
        hub.publish(&watcher::Event::Apply(wl("w", Some(("batch/v1", "Job")))));
        let t = jobs.next().now_or_never().flatten().and_then(Result::ok);
        let t = t.expect("one touched workload");
        assert_eq!(t.metadata.namespace.as_deref(), Some("ns"));
        let owner = &t.metadata.owner_references.as_ref().expect("owners")[0];
        assert_eq!((owner.name.as_str(), owner.uid.as_str()), ("w-owner", "u"));
    }

    #[test]
    fn a_subscriber_of_several_kinds_gets_each_once() {
        let hub = WorkloadEvents::default();
        let ray = |k: &str| ("ray.io/v1".to_string(), k.to_string());
        let mut ray_kinds = Box::pin(hub.owned_by_any(vec![ray("RayCluster"), ray("RayService")]));
        let mut both = wl("both", Some(("ray.io/v1", "RayService")));
        let mut second = both.metadata.owner_references.clone().unwrap_or_default();
        second[0].kind = "RayCluster".into();
        if let Some(o) = both.metadata.owner_references.as_mut() {
            o.extend(second);
        }
        hub.publish(&watcher::Event::Apply(both));
        hub.publish(&watcher::Event::Apply(wl(
            "of-job",
            Some(("ray.io/v1", "RayJob")),
        )));
        assert_eq!(ready(&mut ray_kinds), vec!["both"]);
    }

    #[test]
    fn a_whole_subscriber_gets_what_it_wants_whole() {
        let hub = WorkloadEvents::default();
        let mut named = Box::pin(hub.whole(|w| w.metadata.name.as_deref() == Some("this")));
        let mut this = wl("this", None);
        this.spec.queue_name = Some("q".into());
        hub.publish(&watcher::Event::Apply(this));
        hub.publish(&watcher::Event::Apply(wl("that", None)));
        hub.publish(&watcher::Event::Delete(wl("this", None)));
        let got: Vec<Workload> = std::iter::from_fn(|| named.next().now_or_never().flatten())
            .filter_map(Result::ok)
            .collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].spec.queue_name.as_deref(), Some("q"));
        assert_eq!(got[1].spec.queue_name, None);
    }

    #[test]
    fn a_dropped_subscriber_is_forgotten() {
        let hub = WorkloadEvents::default();
        let jobs = hub.owned_by::<Job>();
        let _clusters = hub.owned_by::<RayCluster>();
        assert_eq!(hub.subscribers(), 2);
        drop(jobs);
        hub.publish(&watcher::Event::Apply(wl("w", Some(("batch/v1", "Job")))));
        assert_eq!(hub.subscribers(), 1);
    }
}
