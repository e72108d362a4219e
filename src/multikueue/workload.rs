//! Dispatch of a Workload to the workers (Kueue's `workload.go` `wlReconciler`): once the Workload
//! holds quota on the manager, a copy goes to each worker its dispatcher nominates
//! (`status.nominatedClusterNames`, see [`super::dispatch`]); the first copy admitted on a worker
//! wins, the other copies (and their jobs) are removed, the job is created on the winner by its kind's
//! adapter, the check turns `Ready` with `status.clusterName` set, and the job's status is brought
//! back. A Workload that loses its quota, finishes or is deleted has its copies removed; a winner whose
//! copy is gone while it is still connected sets the check to `Retry` at once, one that cannot be
//! reached does so after `workerLostTimeout` (Kueue's "Admitting remote lost"); the admission
//! controller then evicts and requeues the Workload.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::dispatch::{Nomination, Nominator};
use super::{Clusters, Dispatcher, Error};
use crate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, condition, label};
use crate::api::kueue::multikueue::{MULTIKUEUE_CONTROLLER_NAME, ORIGIN_LABEL, config_name};
use crate::api::kueue::{
    AdmissionCheck, AdmissionCheckState, CheckState, MultiKueueConfig, Workload, WorkloadStatus,
};
use crate::jobframework::multikueue::{JobKey, MultiKueueAdapter, clone_meta_for_creation, created_by};

/// While copies wait on the workers: how often they are read again.
const DISPATCH_POLL: Duration = Duration::from_secs(1);
/// While the winner runs the job: how often its status is brought back.
const SYNC_POLL: Duration = Duration::from_secs(2);
/// A worker that cannot be reached, or a config that cannot be read: the next look.
const UNAVAILABLE_POLL: Duration = Duration::from_secs(5);

pub struct Context {
    pub client: Client,
    pub clusters: Clusters,
    pub origin: String,
    pub adapters: Vec<Arc<dyn MultiKueueAdapter>>,
    pub leader: watch::Receiver<bool>,
    /// Kueue's `workerLostTimeout`.
    pub worker_lost_timeout: Duration,
    pub dispatcher: Nominator,
    pub metrics: Arc<super::metrics::Metrics>,
}

/// Kueue's `cloneForCreate`: the Workload's name, namespace, labels (without the job-uid one, plus the
/// origin) and annotations, and its spec; no owner, no status.
pub fn clone_for_create(local: &Workload, origin: &str) -> Workload {
    let mut meta = clone_meta_for_creation(&local.metadata);
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.remove(label::JOB_UID);
    labels.insert(ORIGIN_LABEL.to_string(), origin.to_string());
    Workload {
        metadata: meta,
        spec: local.spec.clone(),
        status: None,
    }
}

/// Kueue's `bestMatchByCondition`: of the copies with `type_` True, the one that got it first.
pub fn best_match<'a>(remotes: &'a [(String, Option<Workload>)], type_: &str) -> Option<&'a str> {
    remotes
        .iter()
        .filter_map(|(name, wl)| {
            let c = wl.as_ref()?.status.as_ref()?.condition(type_)?;
            (c.status == "True").then_some((c.last_transition_time.0, name.as_str()))
        })
        .min()
        .map(|(_, name)| name)
}

/// The adapter for the Workload's owner (its controller, else its first owner), with the owner.
fn adapter_for<'a>(
    adapters: &'a [Arc<dyn MultiKueueAdapter>],
    wl: &'a Workload,
) -> (Option<&'a Arc<dyn MultiKueueAdapter>>, Option<&'a OwnerReference>) {
    let refs = wl.metadata.owner_references.as_deref().unwrap_or_default();
    let owner = refs
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| refs.first());
    (owner.and_then(|o| adapter_for_owner(adapters, o)), owner)
}

/// The adapter of the owner's kind.
pub(super) fn adapter_for_owner<'a>(
    adapters: &'a [Arc<dyn MultiKueueAdapter>],
    owner: &OwnerReference,
) -> Option<&'a Arc<dyn MultiKueueAdapter>> {
    adapters.iter().find(|a| {
        let g = a.gvk();
        let av = if g.group.is_empty() {
            g.version.clone()
        } else {
            format!("{}/{}", g.group, g.version)
        };
        av == owner.api_version && g.kind == owner.kind
    })
}

/// Removes a copy this manager made on a worker: its resource-in-use finalizer released (on the
/// version read), then deleted; gone is fine.
pub(super) async fn delete_remote_workload(remote: &Client, wl: &Workload) -> Result<(), Error> {
    let api: Api<Workload> = Api::namespaced(remote.clone(), &wl.namespace().unwrap_or_default());
    let name = wl.name_any();
    let finalizers = wl.metadata.finalizers.clone().unwrap_or_default();
    if finalizers.iter().any(|f| f == RESOURCE_IN_USE_FINALIZER) {
        let kept: Vec<&String> = finalizers
            .iter()
            .filter(|f| *f != RESOURCE_IN_USE_FINALIZER)
            .collect();
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": wl.metadata.resource_version, "finalizers": kept}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if crate::kit::shell::is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if crate::kit::shell::is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// One Workload with its copies, as read in one pass.
struct Group<'a> {
    ctx: &'a Context,
    local: &'a Workload,
    adapter: &'a Arc<dyn MultiKueueAdapter>,
    key: JobKey,
    /// Per connected worker of the config, its copy (one this manager made) if any.
    remotes: Vec<(String, Option<Workload>)>,
    unavailable: Vec<String>,
    /// The config's workers, in its order.
    clusters: Vec<String>,
    /// The Workload, or its job, is being deleted or gone.
    deleted: bool,
}

impl Group<'_> {
    fn client(&self, cluster: &str) -> Option<Client> {
        self.ctx.clusters.get(cluster)
    }

    /// Kueue's `RemoveRemoteObjects`: the job's copy, then the Workload's (its resource-in-use
    /// finalizer released first).
    async fn remove(&mut self, cluster: &str) -> Result<(), Error> {
        let Some(remote) = self.client(cluster) else {
            return Ok(());
        };
        self.adapter
            .delete_remote_object(&remote, &self.key, &self.ctx.origin)
            .await?;
        let slot = self.remotes.iter_mut().find(|(n, _)| n == cluster);
        let Some((_, Some(wl))) = slot else {
            return Ok(());
        };
        delete_remote_workload(&remote, wl).await?;
        if let Some(slot) = self.remotes.iter_mut().find(|(n, _)| n == cluster) {
            slot.1 = None;
        }
        Ok(())
    }

    async fn remove_all_but(&mut self, keep: Option<&str>) -> Result<(), Error> {
        let present: Vec<String> = self
            .remotes
            .iter()
            .filter(|(n, w)| w.is_some() && Some(n.as_str()) != keep)
            .map(|(n, _)| n.clone())
            .collect();
        for cluster in present {
            self.remove(&cluster).await?;
        }
        Ok(())
    }
}

/// Changes the Workload's status as `change` says (on a fresh read; a write only when it changed).
/// True when it wrote.
async fn write_status(
    client: &Client,
    wl: &Workload,
    change: impl FnOnce(&mut WorkloadStatus) -> bool,
) -> Result<bool, Error> {
    let api: Api<Workload> = Api::namespaced(client.clone(), &wl.namespace().unwrap_or_default());
    let Some(mut fresh) = api.get_opt(&wl.name_any()).await? else {
        return Ok(false);
    };
    if !change(fresh.status.get_or_insert_with(Default::default)) {
        return Ok(false);
    }
    api.replace_status(&wl.name_any(), &PostParams::default(), &fresh)
        .await?;
    Ok(true)
}

/// Kueue's `updateACS`: the check's state and message on the Workload. True when it wrote (a pass
/// on a stale copy of a Workload already changed writes nothing, and counts nothing).
async fn set_check(
    client: &Client,
    wl: &Workload,
    check: &str,
    state: CheckState,
    message: String,
    extra: impl FnOnce(&mut WorkloadStatus),
) -> Result<bool, Error> {
    write_status(client, wl, |st| {
        let Some(s) = st.admission_checks.iter_mut().find(|s| s.name == check) else {
            return false;
        };
        if s.state == state && s.message == message {
            return false;
        }
        if s.state != state {
            s.last_transition_time = Some(Time(jiff::Timestamp::now()));
        }
        s.state = state;
        s.message = message;
        extra(st);
        true
    })
    .await
}

/// Kueue's `resetClusterNomination` written on its own, for a nomination no eviction reset (a write
/// only when either field is set).
async fn reset_nomination(client: &Client, wl: &Workload) -> Result<(), Error> {
    let st = wl.status.as_ref();
    if !st.is_some_and(|s| s.cluster_name.is_some() || !s.nominated_cluster_names.is_empty()) {
        return Ok(());
    }
    write_status(client, wl, |st| {
        let changed = st.cluster_name.is_some() || !st.nominated_cluster_names.is_empty();
        st.cluster_name = None;
        st.nominated_cluster_names.clear();
        changed
    })
    .await?;
    Ok(())
}

/// The ClusterQueue that admitted the Workload on the manager (the metrics' `cluster_queue`).
fn admitted_cluster_queue(wl: &Workload) -> &str {
    wl.status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|a| a.cluster_queue.as_str())
        .unwrap_or_default()
}

fn previously(message: &str, acs: &AdmissionCheckState) -> String {
    format!("{message}, Previously: {:?}", format!("{:?}", acs.state))
}

async fn reconcile(wl: Arc<Workload>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(SYNC_POLL));
    }
    let Some(states) = wl
        .status
        .as_ref()
        .map(|s| &s.admission_checks)
        .filter(|s| !s.is_empty())
    else {
        return Ok(Action::await_change());
    };
    let checks: Vec<AdmissionCheck> = Api::<AdmissionCheck>::all(ctx.client.clone())
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|ac| ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME)
        .collect();
    let Some((acs, ac)) = states
        .iter()
        .find_map(|s| checks.iter().find(|ac| ac.name_any() == s.name).map(|ac| (s, ac)))
    else {
        return Ok(Action::await_change());
    };
    if acs.state == CheckState::Rejected {
        return Ok(Action::await_change());
    }
    let (adapter, owner) = adapter_for(&ctx.adapters, &wl);
    let ns = wl.namespace().unwrap_or_default();
    let key = JobKey {
        namespace: ns.clone(),
        name: owner.map(|o| o.name.clone()).unwrap_or_default(),
    };
    let mut deleted = wl.metadata.deletion_timestamp.is_some();
    // Kueue rejects a Workload that cannot run through MultiKueue: no adapter for its owner's kind,
    // or a job that is not MultiKueue's (skipped for a deleted Workload, whose owner may be gone).
    let rejection = match adapter {
        None => Some(match owner {
            Some(o) => format!(
                "No multikueue adapter found for owner kind {:?}",
                format!("{}, Kind={}", o.api_version, o.kind)
            ),
            None => "No multikueue adapter found".to_string(),
        }),
        Some(_) if deleted => None,
        Some(a) => match a.unmanaged_reason(&ctx.client, &key).await {
            Ok(None) => None,
            Ok(Some(why)) => Some(format!("The owner is not managed by Kueue: {why}")),
            Err(e) if crate::kit::shell::is_not_found(&e) => {
                deleted = true;
                None
            }
            Err(e) => return Err(e.into()),
        },
    };
    let adapter = match (adapter, rejection) {
        (Some(a), None) => a,
        (_, msg) => {
            let msg = msg.unwrap_or_default();
            set_check(
                &ctx.client,
                &wl,
                &acs.name,
                CheckState::Rejected,
                previously(&msg, acs),
                |_| {},
            )
            .await?;
            return Ok(Action::await_change());
        }
    };
    let config_names = match config_name(ac) {
        Ok(n) => n.to_string(),
        Err(_) => return Ok(Action::requeue(UNAVAILABLE_POLL)),
    };
    let Some(config) = Api::<MultiKueueConfig>::all(ctx.client.clone())
        .get_opt(&config_names)
        .await?
    else {
        return Ok(Action::requeue(UNAVAILABLE_POLL));
    };
    let mut group = Group {
        ctx: &ctx,
        local: &wl,
        adapter,
        key,
        remotes: Vec::new(),
        unavailable: Vec::new(),
        clusters: config.spec.clusters.clone(),
        deleted,
    };
    for cluster in &config.spec.clusters {
        let Some(remote) = ctx.clusters.get(cluster) else {
            group.unavailable.push(cluster.clone());
            continue;
        };
        match Api::<Workload>::namespaced(remote, &ns)
            .get_opt(&wl.name_any())
            .await
        {
            Ok(copy) => {
                ctx.clusters.mark_reachable(cluster);
                let ours = copy.filter(|c| created_by(&c.metadata, &ctx.origin));
                group.remotes.push((cluster.clone(), ours));
            }
            Err(e) => {
                tracing::info!(cluster = %cluster, error = %e, "reading the remote workload failed");
                if !matches!(e, kube::Error::Api(_)) {
                    ctx.clusters.mark_lost(cluster);
                }
                group.unavailable.push(cluster.clone());
            }
        }
    }
    reconcile_group(&mut group, acs).await
}

async fn reconcile_group(g: &mut Group<'_>, acs: &AdmissionCheckState) -> Result<Action, Error> {
    let local = g.local;
    let wl_key = (g.key.namespace.clone(), local.name_any());
    if g.deleted || g.key.name.is_empty() || local.is_finished() || !local.has_quota_reservation() {
        g.ctx.dispatcher.forget(&wl_key);
        g.remove_all_but(None).await?;
        return Ok(if g.unavailable.is_empty() {
            Action::await_change()
        } else {
            Action::requeue(UNAVAILABLE_POLL)
        });
    }
    // A copy that finished: its job's status is brought back, and the manager's job controller
    // finishes the Workload from it.
    if let Some(done) = best_match(&g.remotes, condition::FINISHED).map(str::to_string) {
        if let Some(remote) = g.client(&done) {
            g.adapter
                .sync_job(&g.ctx.client, &remote, &g.key, &local.name_any(), &g.ctx.origin)
                .await?;
        }
        return Ok(Action::requeue(SYNC_POLL));
    }
    // Evicted on the manager (it holds its quota until its job stops): the copies are removed and
    // the manager's job stops mirroring them, so its quota is given back and it is requeued. (Kueue
    // first deactivates the copy on the worker, `EvictedOnManagerCluster`, and removes it once the
    // quota is released; the end is the same, and a lost worker cannot be asked anything.)
    if local
        .status
        .as_ref()
        .is_some_and(|s| s.condition_true(condition::EVICTED))
    {
        g.ctx.dispatcher.forget(&wl_key);
        // A copy that held quota on its worker is counted as evicted once: it is gone afterwards.
        let holding: Vec<String> = g
            .remotes
            .iter()
            .filter(|(_, w)| w.as_ref().is_some_and(|w| w.has_quota_reservation()))
            .map(|(n, _)| n.clone())
            .collect();
        for cluster in holding {
            g.remove(&cluster).await?;
            g.ctx.metrics.evicted(
                admitted_cluster_queue(local),
                &cluster,
                super::metrics::reason::EVICTED_ON_MANAGER,
            );
        }
        g.remove_all_but(None).await?;
        g.adapter.release_local(&g.ctx.client, &g.key).await?;
        return Ok(Action::requeue(SYNC_POLL));
    }
    let admitting = local
        .status
        .as_ref()
        .and_then(|s| s.cluster_name.clone())
        .unwrap_or_default();
    // The worker recorded as admitting wins over any other admitted copy (one on a worker that was
    // lost and came back after the Workload moved on is older, and would otherwise be picked).
    let recorded = g.remotes.iter().any(|(n, w)| {
        *n == admitting
            && w.as_ref()
                .and_then(|w| w.status.as_ref())
                .is_some_and(|s| s.condition_true(condition::ADMITTED))
    });
    let winner = if recorded {
        Some(admitting.clone())
    } else {
        best_match(&g.remotes, condition::ADMITTED).map(str::to_string)
    };
    // Kueue 6a: no admitted copy is seen while the check is Ready.
    if winner.is_none() && acs.state == CheckState::Ready {
        if !admitting.is_empty() && g.unavailable.contains(&admitting) {
            // The worker cannot be reached: it may still run the job, so the Workload stays admitted
            // until the worker has been lost for `workerLostTimeout` (from the first failure).
            let lost_for = g.ctx.clusters.lost_since(&admitting).elapsed();
            if let Some(left) = g
                .ctx
                .worker_lost_timeout
                .checked_sub(lost_for)
                .filter(|d| !d.is_zero())
            {
                tracing::info!(cluster = %admitting, workload = %local.name_any(), left_secs = left.as_secs(),
                    "the admitting worker is unreachable; waiting before retry");
                return Ok(Action::requeue(left.min(UNAVAILABLE_POLL)));
            }
            let wrote = set_check(
                &g.ctx.client,
                local,
                &acs.name,
                CheckState::Retry,
                previously("Admitting remote lost", acs),
                |_| {},
            )
            .await?;
            if wrote {
                g.ctx.metrics.evicted(
                    admitted_cluster_queue(local),
                    &admitting,
                    super::metrics::reason::WORKER_LOST,
                );
            }
            return Ok(Action::requeue(SYNC_POLL));
        }
        let msg = if admitting.is_empty() {
            "Admission check is Ready but no admitting cluster is recorded; this is unexpected, please report it"
        } else {
            "Admitting remote no longer exists"
        };
        let wrote = set_check(
            &g.ctx.client,
            local,
            &acs.name,
            CheckState::Retry,
            previously(msg, acs),
            |_| {},
        )
        .await?;
        if wrote && !admitting.is_empty() {
            g.ctx.metrics.evicted(
                admitted_cluster_queue(local),
                &admitting,
                super::metrics::reason::REMOTE_GONE,
            );
        }
        return Ok(Action::requeue(SYNC_POLL));
    }
    if let Some(winner) = winner {
        g.ctx.dispatcher.forget(&wl_key);
        g.remove_all_but(Some(&winner)).await?;
        let Some(remote) = g.client(&winner) else {
            return Ok(Action::requeue(UNAVAILABLE_POLL));
        };
        g.adapter
            .sync_job(&g.ctx.client, &remote, &g.key, &local.name_any(), &g.ctx.origin)
            .await?;
        if acs.state != CheckState::Ready && acs.state != CheckState::Retry {
            let msg = format!("The workload was admitted on {winner:?}");
            let wrote = set_check(&g.ctx.client, local, &acs.name, CheckState::Ready, msg, |st| {
                if st.cluster_name.is_none() {
                    st.cluster_name = Some(winner.clone());
                }
                st.nominated_cluster_names.clear();
            })
            .await?;
            if wrote {
                g.ctx.metrics.admitted(admitted_cluster_queue(local), &winner);
            }
        }
        return Ok(Action::requeue(SYNC_POLL));
    }
    // A Pending check that still names a worker no copy is admitted on: the reservation was given
    // back without an eviction (whose status write resets the nomination, as Kueue's
    // `prepareForEviction`: see `crate::admission::conditions::reset_cluster_nomination`), e.g. its
    // job was suspended, and the Workload was admitted again.
    if acs.state == CheckState::Pending && !admitting.is_empty() {
        reset_nomination(&g.ctx.client, local).await?;
        return Ok(Action::requeue(DISPATCH_POLL));
    }
    // Kueue's `ShouldSkipClusterNomination`: only a Pending check with no admitting worker nominates.
    if acs.state != CheckState::Pending {
        return Ok(Action::requeue(DISPATCH_POLL));
    }
    let current = local
        .status
        .as_ref()
        .map(|s| s.nominated_cluster_names.clone())
        .unwrap_or_default();
    let mut next_poll = DISPATCH_POLL;
    let nominated = match g.ctx.dispatcher.mode {
        // AllAtOnce: every connected worker is nominated.
        Dispatcher::AllAtOnce => {
            let mut all: Vec<String> = g.remotes.iter().map(|(n, _)| n.clone()).collect();
            all.sort();
            let mut now = current.clone();
            now.sort();
            if now != all {
                let n = all.clone();
                write_status(&g.ctx.client, local, |st| {
                    st.nominated_cluster_names = n;
                    true
                })
                .await?;
            }
            all
        }
        // Incremental: `step` more of the config's workers each round.
        Dispatcher::Incremental { step } => {
            let now = Instant::now();
            match g
                .ctx
                .dispatcher
                .incremental(&wl_key, step, &current, &g.clusters, now)
            {
                Nomination::Wait(left) => {
                    next_poll = next_poll.min(left.max(Duration::from_millis(100)));
                    current
                }
                Nomination::NoMoreWorkers => current,
                Nomination::Next(all) => {
                    let n = all.clone();
                    write_status(&g.ctx.client, local, |st| {
                        st.nominated_cluster_names = n;
                        true
                    })
                    .await?;
                    g.ctx.dispatcher.round_started(&wl_key, now);
                    tracing::info!(workload = %local.name_any(), nominated = ?all, "incremental dispatcher: a new round");
                    all
                }
            }
        }
    };
    // A copy on each nominated worker; none on the others.
    let stale: Vec<String> = g
        .remotes
        .iter()
        .filter(|(n, w)| w.is_some() && !nominated.contains(n))
        .map(|(n, _)| n.clone())
        .collect();
    for cluster in stale {
        g.remove(&cluster).await?;
    }
    let missing: Vec<String> = g
        .remotes
        .iter()
        .filter(|(n, w)| w.is_none() && nominated.contains(n))
        .map(|(n, _)| n.clone())
        .collect();
    for cluster in missing {
        let Some(remote) = g.client(&cluster) else {
            continue;
        };
        let copy = clone_for_create(local, &g.ctx.origin);
        let api: Api<Workload> = Api::namespaced(remote, &g.key.namespace);
        match api.create(&PostParams::default(), &copy).await {
            Ok(_) => {
                tracing::info!(cluster = %cluster, workload = %local.name_any(), "dispatched");
                g.ctx.metrics.dispatched(admitted_cluster_queue(local), &cluster);
            }
            Err(e) => tracing::info!(cluster = %cluster, error = %e, "creating the remote workload failed"),
        }
    }
    Ok(Action::requeue(next_poll))
}

/// Kueue's `deletedWlCache`: a Workload deleted (its finalizers released) between two passes is never
/// reconciled by the controller, whose store no longer has it; its last state, marked deleted, is
/// reconciled here once, so its copies are removed at once rather than at the next garbage collection.
async fn remove_copies_of_deleted(ctx: Arc<Context>, cancel: CancellationToken) {
    use futures::StreamExt;
    let stream = watcher(
        Api::<Workload>::all(ctx.client.clone()),
        watcher::Config::default(),
    );
    let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::default_backoff(stream));
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = stream.next() => e,
        };
        let Some(Ok(watcher::Event::Delete(mut wl))) = event else {
            if event.is_none() {
                return;
            }
            continue;
        };
        let has_checks = wl.status.as_ref().is_some_and(|s| !s.admission_checks.is_empty());
        if !has_checks || !*ctx.leader.borrow() {
            continue;
        }
        if wl.metadata.deletion_timestamp.is_none() {
            wl.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        }
        let wl = Arc::new(wl);
        // A worker briefly unreachable is tried again a few times; the garbage collector catches
        // what is left after that.
        for _ in 0..5 {
            match reconcile(wl.clone(), ctx.clone()).await {
                Ok(a) if a == Action::await_change() => break,
                Ok(_) | Err(_) => {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }
}

/// Runs the controller until `cancel` fires.
pub async fn run(ctx: Arc<Context>, cancel: CancellationToken) {
    tokio::spawn(remove_copies_of_deleted(ctx.clone(), cancel.clone()));
    let controller = Controller::new(
        Api::<Workload>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(async move { cancel.cancelled().await });
    crate::kit::shell::run(controller, "multikueue-workload", reconcile, ctx, |_| {
        Duration::from_secs(1)
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(v: serde_json::Value) -> Workload {
        serde_json::from_value(v).unwrap()
    }

    /// Kueue `workload.go` `cloneForCreate`: no job-uid label, the origin label, the spec; no owner.
    #[test]
    fn clone_drops_job_uid_and_owner() {
        let local = wl(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/job-uid": "j", "a": "b"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j", "controller": true}]},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
            "status": {"conditions": []}
        }));
        let c = clone_for_create(&local, "mk");
        let labels = c.metadata.labels.clone().unwrap();
        assert!(!labels.contains_key(label::JOB_UID));
        assert_eq!(labels[ORIGIN_LABEL], "mk");
        assert_eq!(labels["a"], "b");
        assert_eq!(c.metadata.owner_references, None);
        assert_eq!(c.metadata.uid, None);
        assert_eq!(c.spec, local.spec);
        assert_eq!(c.status, None);
    }

    /// Kueue `bestMatchByCondition`: the earliest True condition wins.
    #[test]
    fn first_admitted_wins() {
        let admitted = |t: &str| {
            Some(wl(serde_json::json!({
                "metadata": {"name": "w"}, "spec": {"podSets": []},
                "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "A", "message": "",
                    "lastTransitionTime": t}]}
            })))
        };
        let remotes = vec![
            ("w1".to_string(), admitted("2026-01-01T00:00:02Z")),
            ("w2".to_string(), admitted("2026-01-01T00:00:01Z")),
            ("w3".to_string(), None),
        ];
        assert_eq!(best_match(&remotes, condition::ADMITTED), Some("w2"));
        assert_eq!(best_match(&remotes, condition::FINISHED), None);
    }
}
