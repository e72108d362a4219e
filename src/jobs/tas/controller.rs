//! The thin shell around [`super::pods_to_ungate`] (Kueue's `tas_topology_ungater` controller): a
//! Workload wakes on its own changes and on those of the pods naming it (their workload annotation);
//! each pass of a workload admitted by TAS reads its namespace's podset pods from the API (not a cache,
//! so a pod ungated a moment ago is counted as such: Kueue keeps an expectations store for that) and
//! patches each pod to let through, guarded by the pod's resourceVersion. Only the leader writes. It
//! reads only for a workload that a pod still behind the gate has named since its last full pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use super::{UngateError, has_gate, is_admitted_by_tas, pod_workload, pods_to_ungate, ungated};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::label;
use crate::api::kueue::tas::WORKLOAD_ANNOTATION;
use crate::api::merge_patch::guarded;
use crate::jobframework::JobContext;
use crate::kit::shell::{self, ReconcileError};
use crate::kit::{RESYNC, became_leader};

#[derive(Debug, thiserror::Error)]
pub enum UngaterError {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Ungate(#[from] UngateError),
    #[error("encoding a pod patch: {0}")]
    Encode(String),
}

impl ReconcileError for UngaterError {
    fn category(&self) -> &'static str {
        match self {
            UngaterError::Kube(_) => "api",
            UngaterError::Ungate(_) => "offset",
            UngaterError::Encode(_) => "encode",
        }
    }
}

struct Ctx {
    client: Client,
    leader: tokio::sync::watch::Receiver<bool>,
    gated: Arc<GatedPods>,
}

/// The slice chains (namespace, chain name: `pod_workload`) that pods behind the topology gate name,
/// as the pod watch has seen them, each with a count of such events. A pass reads pods only for a
/// workload of one of these chains, so a workload whose pods are all through, or that has none yet,
/// costs no read; a gated pod seen later wakes its workload again.
#[derive(Default)]
struct GatedPods(Mutex<HashMap<(String, String), u64>>);

impl GatedPods {
    fn saw(&self, ns: &str, chain: &str) {
        let Ok(mut g) = self.0.lock() else { return };
        *g.entry((ns.to_string(), chain.to_string())).or_default() += 1;
    }

    /// The events seen for `key` when some pod of it may still be gated (a poisoned lock: assume so).
    fn pending(&self, key: &(String, String)) -> Option<u64> {
        match self.0.lock() {
            Ok(g) => g.get(key).copied(),
            Err(_) => Some(0),
        }
    }

    /// A pass over `key` that began after `seen` events left no pod of the chain gated: forgotten,
    /// unless a gated pod was seen since (its wake runs another pass).
    fn done(&self, key: &(String, String), seen: u64) {
        if let Ok(mut g) = self.0.lock()
            && g.get(key) == Some(&seen)
        {
            g.remove(key);
        }
    }

    /// The chains held that no workload in `live` names, each with its event count, by namespace.
    fn orphans(&self, live: &HashSet<(String, String)>) -> BTreeMap<String, Vec<(String, u64)>> {
        let mut out: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        let Ok(g) = self.0.lock() else { return out };
        for ((ns, chain), seen) in g.iter() {
            if !live.contains(&(ns.clone(), chain.clone())) {
                out.entry(ns.clone()).or_default().push((chain.clone(), *seen));
            }
        }
        out
    }

    /// Forgets the orphaned chains of `ns` that none of `pods` behind the gate names (unless a gated
    /// pod of one was seen since `orphans` counted it). A chain whose pods are gated but whose
    /// workload is not there yet (a pod group's pods come first) is kept.
    fn forget_ungated(&self, ns: &str, orphans: Vec<(String, u64)>, pods: &[Pod]) {
        let gated: HashSet<&str> = pods
            .iter()
            .filter(|p| has_gate(p))
            .filter_map(pod_workload)
            .collect();
        for (chain, seen) in orphans {
            if !gated.contains(chain.as_str()) {
                self.done(&(ns.to_string(), chain), seen);
            }
        }
    }
}

/// Every [`RESYNC`], the chains no workload names any more are dropped once no gated pod names them
/// either. A workload deleted while its pods were behind the gate is never passed over again (its
/// pods' deletion is one more event of a gated pod), so without this its entry stayed for the life of
/// the process, one per such workload. Reads pods only in namespaces holding such a chain.
///
/// It does not wait for the store to be ready: the controller's runner waits on it, and a store's
/// readiness wakes only the last of its waiters. Before the first list every chain looks orphaned,
/// which costs a pod list and forgets only chains no gated pod names, as it should.
async fn sweep_orphans(client: Client, gated: Arc<GatedPods>, workloads: Store<Workload>) {
    loop {
        tokio::time::sleep(RESYNC).await;
        let live: HashSet<(String, String)> = workloads
            .state()
            .iter()
            .map(|w| {
                let ns = w.namespace().unwrap_or_default();
                (ns, crate::jobs::elastic::slice_name(w).to_string())
            })
            .collect();
        for (ns, orphans) in gated.orphans(&live) {
            let pods = Api::<Pod>::namespaced(client.clone(), &ns)
                .list(&ListParams::default().labels(label::PODSET))
                .await;
            match pods {
                Ok(l) => gated.forget_ungated(&ns, orphans, &l.items),
                Err(e) => tracing::debug!(namespace = %ns, error = %e, "listing pods for the gated sweep"),
            }
        }
    }
}

/// One pass for `wl`: lets through the pods its topology assignment places, each with its domain.
async fn reconcile(wl: Arc<Workload>, ctx: Arc<Ctx>) -> Result<Action, UngaterError> {
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if !is_admitted_by_tas(&wl) {
        return Ok(Action::await_change());
    }
    let ns = wl.namespace().unwrap_or_default();
    let key = (ns.clone(), crate::jobs::elastic::slice_name(&wl).to_string());
    // No gated pod names it: nothing to let through, and no read (a workload's own status writes
    // would otherwise list its namespace's pods each time).
    let Some(seen) = ctx.gated.pending(&key) else {
        return Ok(Action::requeue(RESYNC));
    };
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // Every admitted pod carries its podset label; the workload's are told apart by their annotation.
    let pods = pods_api
        .list(&ListParams::default().labels(label::PODSET))
        .await?
        .items;
    let through = pods_to_ungate(&wl, &pods)?;
    // A pod of the chain this pass leaves gated (another slice of it may place it) keeps it read.
    let left_gated = pods.iter().any(|p| {
        pod_workload(p) == Some(key.1.as_str())
            && has_gate(p)
            && !through.iter().any(|u| std::ptr::eq(u.pod, p))
    });
    for u in through {
        let patch = guarded(u.pod, &ungated(u.pod, &u.node_selector))
            .map_err(|e| UngaterError::Encode(e.to_string()))?;
        if let Some(p) = patch {
            shell::ignore_not_found(
                pods_api
                    .patch(&u.pod.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await,
            )?;
            tracing::debug!(pod = %u.pod.name_any(), workload = %wl.name_any(), selector = ?u.node_selector, "topology gate lifted");
        }
    }
    if !left_gated {
        ctx.gated.done(&key, seen);
    }
    // Pod events wake it; the resync is the safety net for a missed one.
    Ok(Action::requeue(RESYNC))
}

/// The workloads a TAS pod's change wakes: the slice that admitted it (its workload annotation,
/// as Kueue's pod handler reads it) and its slice chain. The chain alone names the chain's first
/// slice, so a replacement slice's new pods would wait for the resync to be let through.
fn wakes(pod: &Pod) -> Vec<ObjectRef<Workload>> {
    // Only TAS pods name their workload this way (Kueue's `IsTAS` filter).
    let (Some(own), Some(ns)) = (pod.annotations().get(WORKLOAD_ANNOTATION), pod.namespace()) else {
        return Vec::new();
    };
    let mut out = vec![ObjectRef::<Workload>::new(own).within(&ns)];
    if let Some(chain) = pod_workload(pod).filter(|c| c != own) {
        out.push(ObjectRef::new(chain).within(&ns));
    }
    out
}

/// Runs the topology ungater until `shutdown` completes.
pub async fn run(ctx: JobContext, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let mut leader = ctx.leader.clone();
    let gated = Arc::new(GatedPods::default());
    let seen = gated.clone();
    // From the shared Workload watch, only the workloads TAS admitted wake it (Kueue's ungater
    // filters its events the same way), read from the shared store.
    let controller = match ctx.workload_events.store() {
        Some(store) => Controller::for_stream(ctx.workload_events.whole(is_admitted_by_tas), store),
        None => Controller::new(Api::<Workload>::all(client.clone()), watcher::Config::default()),
    };
    let controller = controller
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(label::PODSET),
            move |pod: Pod| {
                if has_gate(&pod)
                    && let Some(chain) = pod_workload(&pod)
                {
                    seen.saw(&pod.namespace().unwrap_or_default(), chain);
                }
                wakes(&pod)
            },
        )
        .graceful_shutdown_on(shutdown)
        .reconcile_all_on(became_leader(&mut leader));
    // The sweep runs in this future, not a task of its own: it ends with the controller, or when
    // this future is dropped (a manager aborted leaves no task behind).
    let sweep = sweep_orphans(client.clone(), gated.clone(), controller.store());
    let controller = shell::run(
        controller,
        "tas-topology-ungater",
        reconcile,
        Arc::new(Ctx {
            client,
            leader: ctx.leader,
            gated,
        }),
        |_| Duration::from_secs(1),
    );
    tokio::select! {
        () = controller => {}
        () = sweep => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod with the workload annotation `own` (if any) and the slice chain `chain`.
    fn pod(own: Option<&str>, chain: &str) -> Pod {
        let mut a = std::collections::BTreeMap::new();
        if let Some(own) = own {
            a.insert(WORKLOAD_ANNOTATION.to_string(), own.to_string());
        }
        a.insert(label::WORKLOAD_SLICE_NAME.to_string(), chain.to_string());
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.annotations = Some(a);
        p
    }

    fn names(refs: Vec<ObjectRef<Workload>>) -> Vec<String> {
        refs.into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn a_pod_of_a_replacement_slice_wakes_that_slice_and_its_chain() {
        let p = pod(Some("rs-second"), "rs-first");
        assert_eq!(names(wakes(&p)), ["rs-second", "rs-first"]);
    }

    // Ours (Kueue's ungater lists pods through its cache): a chain is read for only while a gated
    // pod of it was seen since its last pass that left none gated.
    #[test]
    fn only_workloads_named_by_a_gated_pod_since_their_last_pass_are_read() {
        let g = GatedPods::default();
        let key = ("ns".to_string(), "rs-first".to_string());
        assert_eq!(g.pending(&key), None, "no gated pod seen: no read");
        g.saw("ns", "rs-first");
        let seen = g.pending(&key).expect("a gated pod names it");
        // Another gated pod arrives during the pass: it is not forgotten.
        g.saw("ns", "rs-first");
        g.done(&key, seen);
        let again = g.pending(&key).expect("still pending");
        g.done(&key, again);
        assert_eq!(g.pending(&key), None);
    }

    /// A gated pod of `chain`, or (`gated` false) one let through.
    fn chain_pod(chain: &str, gated: bool) -> Pod {
        let mut p = pod(Some(chain), chain);
        if gated {
            p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                scheduling_gates: Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: crate::api::kueue::tas::TOPOLOGY_SCHEDULING_GATE.into(),
                }]),
                ..Default::default()
            });
        }
        p
    }

    // Ours: the entry of a workload deleted while its pods were gated goes at the next sweep; one
    // whose workload lives, or whose gated pods wait for their workload, stays.
    #[test]
    fn a_deleted_workloads_chain_is_forgotten_once_no_gated_pod_names_it() {
        let g = GatedPods::default();
        for chain in ["deleted", "live", "pod-group"] {
            g.saw("ns", chain);
        }
        let live = HashSet::from([("ns".to_string(), "live".to_string())]);
        let mut orphans = g.orphans(&live);
        let ns = orphans.remove("ns").unwrap_or_default();
        let mut names: Vec<&str> = ns.iter().map(|(c, _)| c.as_str()).collect();
        names.sort();
        assert_eq!(names, ["deleted", "pod-group"]);
        let pods = [chain_pod("deleted", false), chain_pod("pod-group", true)];
        g.forget_ungated("ns", ns, &pods);
        let key = |c: &str| ("ns".to_string(), c.to_string());
        assert_eq!(g.pending(&key("deleted")), None);
        assert!(g.pending(&key("live")).is_some());
        assert!(
            g.pending(&key("pod-group")).is_some(),
            "its workload is still to come"
        );
    }

    #[test]
    fn a_gated_pod_seen_during_the_sweep_keeps_its_chain() {
        let g = GatedPods::default();
        g.saw("ns", "wl");
        let mut orphans = g.orphans(&HashSet::new());
        g.saw("ns", "wl");
        g.forget_ungated("ns", orphans.remove("ns").unwrap(), &[]);
        assert!(g.pending(&("ns".to_string(), "wl".to_string())).is_some());
    }

    #[test]
    fn a_pod_of_a_first_slice_wakes_it_once_and_a_pod_without_tas_nothing() {
        assert_eq!(names(wakes(&pod(Some("rs-first"), "rs-first"))), ["rs-first"]);
        assert!(wakes(&pod(None, "rs-first")).is_empty());
    }
}
