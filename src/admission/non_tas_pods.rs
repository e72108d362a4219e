//! The admission loop's view of pods TAS did not place (Kueue's pod usage controller): a Pod watch
//! over scheduled pods (`spec.nodeName!=`) folded into a per-node sum of requests
//! ([`queue::non_tas`]); no Pod object is kept. The watch runs only while a Topology exists, so a
//! cluster without TAS lists no Pod. A change of a node's sum wakes the loop, which then sees a
//! different TAS cluster and requeues the workloads waiting for room, as a Node change does.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;

use crate::api::kueue::Topology;
use crate::queue::non_tas::{NodeUsage, NonTasPods, non_tas_usage, pod_key};

/// What the watch has folded so far, shared with the loop's snapshot.
#[derive(Default)]
struct State {
    live: NonTasPods,
    /// A re-list in progress: the pods listed so far, swapped in when the list completes.
    relist: Option<NonTasPods>,
    listed: bool,
}

/// The per-node sums of non-TAS pods' requests; cheap to clone.
#[derive(Clone, Default)]
pub struct NonTasUsage {
    state: Arc<Mutex<State>>,
}

impl NonTasUsage {
    /// The sums, or `None` while the pods are not listed (no Topology, or the list in progress).
    pub fn per_node(&self) -> Option<Arc<NodeUsage>> {
        let s = self.state.lock().ok()?;
        s.listed.then(|| s.live.per_node())
    }

    /// Takes one watch event; whether the sums changed (or the pods just became known).
    fn apply(&self, ev: watcher::Event<Pod>) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        match ev {
            watcher::Event::Init => {
                s.relist = Some(NonTasPods::default());
                false
            }
            watcher::Event::InitApply(p) => {
                if let Some(r) = s.relist.as_mut() {
                    r.set(pod_key(&p), usage(&p));
                }
                false
            }
            watcher::Event::InitDone => {
                if let Some(r) = s.relist.take() {
                    s.live = r;
                }
                s.listed = true;
                true
            }
            watcher::Event::Apply(p) => s.live.set(pod_key(&p), usage(&p)),
            watcher::Event::Delete(p) => s.live.set(pod_key(&p), None),
        }
    }

    /// Forgets every pod (the watch stopped: no Topology is left).
    fn clear(&self) {
        if let Ok(mut s) = self.state.lock() {
            *s = State::default();
        }
    }

    /// Runs the Pod watch while a Topology exists; `topology_changed` fires on every Topology watch
    /// event (after the store took it), `wake` wakes the admission loop.
    pub fn start(
        &self,
        client: Client,
        topologies: Store<Topology>,
        topology_changed: Arc<Notify>,
        wake: Arc<Notify>,
    ) -> tokio::task::JoinHandle<()> {
        let usage = self.clone();
        tokio::spawn(async move {
            loop {
                while topologies.state().is_empty() {
                    topology_changed.notified().await;
                }
                let config = watcher::Config::default().fields("spec.nodeName!=");
                let stream = watcher(Api::<Pod>::all(client.clone()), config).default_backoff();
                futures::pin_mut!(stream);
                loop {
                    tokio::select! {
                        ev = stream.next() => match ev {
                            Some(Ok(ev)) => {
                                if usage.apply(ev) {
                                    wake.notify_one();
                                }
                            }
                            Some(Err(e)) => tracing::debug!(error = %e, "non-TAS pod watch interrupted"),
                            None => break,
                        },
                        _ = topology_changed.notified() => {
                            if topologies.state().is_empty() {
                                break;
                            }
                        }
                    }
                }
                usage.clear();
                wake.notify_one();
            }
        })
    }
}

/// A pod's non-TAS usage; one whose requests do not parse (the API server refuses those) counts as
/// nothing rather than stopping the fold.
fn usage(p: &Pod) -> Option<crate::queue::non_tas::PodUsage> {
    non_tas_usage(p).unwrap_or_else(|e| {
        tracing::debug!(pod = ?pod_key(p), error = %e, "non-TAS pod's requests left out");
        None
    })
}
