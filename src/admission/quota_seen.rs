//! The quota a cycle decided on, held against what the caches show now: an admission is written only
//! while every ClusterQueue, Cohort and ResourceFlavor of the cycle's snapshot still has the spec the
//! decision read. Kueue's scheduler decides on its cache's snapshot and writes afterwards, so a cut that
//! arrives in between (during the step, during the cycle's earlier writes, or during a conflict's
//! re-read) lets it write an admission the new quota does not allow; here such an admission is
//! withdrawn and decided again on the new quota (invariant I1, issue 67). The caches learn of a cut
//! through their watch, which a loaded machine may deliver well after the write that made it; so
//! before a cycle's admissions are written the ClusterQueues (and Cohorts) are also read from the API
//! server itself.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{Api, ListParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource};

use super::caches::Caches;
use super::snapshot::Snapshot;
use crate::api::kueue::{ClusterQueue, Cohort};

/// The quota objects a cycle's decisions read, and the caches that show their current spec.
#[derive(Clone, Copy)]
pub(super) struct QuotaSeen<'a> {
    pub(super) caches: &'a Caches,
    pub(super) snap: &'a Snapshot,
}

impl QuotaSeen<'_> {
    /// A ClusterQueue, Cohort or ResourceFlavor of the snapshot has another spec in the cache now
    /// (or is gone), compared by uid and generation: a status write (the loop's own, every cycle)
    /// moves neither. A few objects, looked up in the stores without copying them.
    pub(super) fn moved(&self) -> bool {
        moved(&self.caches.cluster_queues, &self.snap.cluster_queues)
            || moved(&self.caches.cohorts, &self.snap.cohorts)
            || moved(&self.caches.flavors, &self.snap.flavors)
    }

    /// As `moved`, against the API server: one list of ClusterQueues, and of Cohorts when the
    /// snapshot has any. `None` when the API could not be read: the caller keeps to the caches'
    /// answer, so a failing read neither holds every admission back nor spins the loop.
    pub(super) async fn moved_on_server(&self, client: &Client) -> Option<bool> {
        let cqs = listed::<ClusterQueue>(client).await?;
        if moved_from(&self.snap.cluster_queues, |name| cqs.get(name)) {
            return Some(true);
        }
        if self.snap.cohorts.is_empty() {
            return Some(false);
        }
        let cohorts = listed::<Cohort>(client).await?;
        Some(moved_from(&self.snap.cohorts, |name| cohorts.get(name)))
    }
}

/// Every object of a kind as the API server holds it now, by name.
async fn listed<K>(client: &Client) -> Option<HashMap<String, K>>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match Api::<K>::all(client.clone()).list(&ListParams::default()).await {
        Ok(l) => Some(
            l.items
                .into_iter()
                .map(|o| (o.meta().name.clone().unwrap_or_default(), o))
                .collect(),
        ),
        Err(e) => {
            tracing::debug!(kind = %K::kind(&()), error = %e, "reading the quota before admitting failed; the cache's answer stands");
            None
        }
    }
}

/// Whether an object of `objs` is gone from `now` (looked up by name) or has another uid or spec
/// generation there.
fn moved_from<K, N>(objs: &[Arc<K>], now: impl Fn(&str) -> Option<N>) -> bool
where
    K: Resource,
    N: std::ops::Deref<Target = K>,
{
    objs.iter().any(|o| {
        let m = o.meta();
        now(m.name.as_deref().unwrap_or_default())
            .is_none_or(|n| n.meta().uid != m.uid || n.meta().generation != m.generation)
    })
}

fn moved<K>(store: &Store<K>, objs: &[Arc<K>]) -> bool
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    moved_from(objs, |name| store.get(&ObjectRef::new(name)))
}
