//! One connection per MultiKueueCluster (Kueue's `clustersReconciler`): the kubeconfig is read from
//! the Secret named by `spec.clusterSource.kubeConfig.location` in quotagate's namespace (key
//! `kubeconfig`) or from the file at that path, a client is built from it and the worker is asked for
//! its Workloads. Connected: `Active=True` (`Active`, `Connected`), checked again every 30 s. Not:
//! `Active=False` with Kueue's reason (`BadKubeConfig`, `ClientConnectionFailed`, ...) and the error,
//! the client is dropped and the attempt is retried after Kueue's back-off (5 s doubling to 320 s).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Clusters, Error};
use crate::api::conditions;
use crate::api::kueue::Workload;
use crate::api::kueue::multikueue::{
    CLUSTER_ACTIVE, KUBECONFIG_SECRET_KEY, LocationType, MultiKueueCluster, MultiKueueClusterStatus,
};

/// Kueue's `retryIncrement` and `retryMaxSteps`.
const RETRY_INCREMENT: Duration = Duration::from_secs(5);
const RETRY_MAX_STEPS: u32 = 7;
/// How often a connected worker is asked again whether it still answers.
const RECHECK: Duration = Duration::from_secs(30);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Kueue's `retryAfter`: 5 s, 10 s, ... doubling up to 2^6 * 5 s = 320 s.
pub fn retry_after(failed_attempts: u32) -> Duration {
    let steps = failed_attempts.clamp(1, RETRY_MAX_STEPS);
    RETRY_INCREMENT * (1u32 << (steps - 1))
}

struct Ctx {
    client: Client,
    namespace: String,
    clusters: Clusters,
    leader: watch::Receiver<bool>,
    failures: Mutex<HashMap<String, u32>>,
}

/// Why a connection failed: Kueue's reason and the message.
pub struct Failure(pub &'static str, pub String);

/// A client for the worker `mkc` names, as the controller builds it (the kubeconfig from a Secret in
/// `namespace` or from a path), checked by asking the worker for its Workloads.
pub async fn connect_to(local: &Client, namespace: &str, mkc: &MultiKueueCluster) -> Result<Client, Failure> {
    let text = load_kubeconfig(local, namespace, mkc).await?;
    client_from(&text).await
}

async fn load_kubeconfig(
    local: &Client,
    namespace: &str,
    mkc: &MultiKueueCluster,
) -> Result<String, Failure> {
    let src = &mkc.spec.cluster_source;
    let Some(kc) = &src.kube_config else {
        return Err(Failure(
            "BadClusterProfile",
            "connecting through a ClusterProfile is not supported by quotagate".into(),
        ));
    };
    match kc.location_type {
        LocationType::Secret => {
            let secrets: Api<Secret> = Api::namespaced(local.clone(), namespace);
            let secret = secrets
                .get_opt(&kc.location)
                .await
                .map_err(|e| Failure("BadConfig", e.to_string()))?
                .ok_or_else(|| {
                    Failure(
                        "BadConfig",
                        format!("secret {namespace}/{} not found", kc.location),
                    )
                })?;
            let bytes = secret
                .data
                .as_ref()
                .and_then(|d| d.get(KUBECONFIG_SECRET_KEY))
                .ok_or_else(|| {
                    Failure(
                        "BadConfig",
                        format!(
                            "key {KUBECONFIG_SECRET_KEY:?} not found in secret {:?}",
                            kc.location
                        ),
                    )
                })?;
            String::from_utf8(bytes.0.clone()).map_err(|e| Failure("BadKubeConfig", e.to_string()))
        }
        LocationType::Path => std::fs::read_to_string(&kc.location)
            .map_err(|e| Failure("BadConfig", format!("reading {:?}: {e}", kc.location))),
    }
}

async fn connect(ctx: &Ctx, mkc: &MultiKueueCluster) -> Result<Client, Failure> {
    connect_to(&ctx.client, &ctx.namespace, mkc).await
}

async fn client_from(text: &str) -> Result<Client, Failure> {
    let kc = Kubeconfig::from_yaml(text).map_err(|e| Failure("BadKubeConfig", e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Failure("BadKubeConfig", e.to_string()))?;
    let client = Client::try_from(config).map_err(|e| Failure("BadKubeConfig", e.to_string()))?;
    // The worker must answer for Workloads (Kueue's watch on them would fail otherwise).
    let workloads = Api::<Workload>::all(client.clone());
    let lp = ListParams::default().limit(1);
    let probe = workloads.list_metadata(&lp);
    match tokio::time::timeout(CONNECT_TIMEOUT, probe).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(Failure("ClientConnectionFailed", e.to_string())),
        Err(_) => Err(Failure(
            "ClientConnectionFailed",
            format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
        )),
    }
}

async fn write_active(
    ctx: &Ctx,
    mkc: &MultiKueueCluster,
    active: bool,
    reason: &str,
    message: &str,
) -> Result<(), Error> {
    let mut obj = mkc.clone();
    let status = obj.status.get_or_insert_with(MultiKueueClusterStatus::default);
    let cond = conditions::new(
        CLUSTER_ACTIVE,
        active,
        reason,
        message,
        mkc.metadata.generation,
        jiff::Timestamp::now(),
    );
    if conditions::set(&mut status.conditions, cond) {
        Api::<MultiKueueCluster>::all(ctx.client.clone())
            .replace_status(&mkc.name_any(), &PostParams::default(), &obj)
            .await?;
    }
    Ok(())
}

async fn reconcile(mkc: Arc<MultiKueueCluster>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = mkc.name_any();
    if mkc.metadata.deletion_timestamp.is_some() {
        ctx.clusters.set(&name, None);
        return Ok(Action::await_change());
    }
    match connect(&ctx, &mkc).await {
        Ok(client) => {
            ctx.clusters.set(&name, Some(client));
            ctx.clusters.mark_reachable(&name);
            if let Ok(mut f) = ctx.failures.lock() {
                f.remove(&name);
            }
            if *ctx.leader.borrow() {
                write_active(&ctx, &mkc, true, "Active", "Connected").await?;
            }
            Ok(Action::requeue(RECHECK))
        }
        Err(Failure(reason, message)) => {
            ctx.clusters.set(&name, None);
            ctx.clusters.mark_lost(&name);
            let attempts = ctx
                .failures
                .lock()
                .map(|mut f| {
                    let n = f.entry(name.clone()).or_insert(0);
                    *n = n.saturating_add(1);
                    *n
                })
                .unwrap_or(1);
            tracing::info!(cluster = %name, reason, %message, attempts, "MultiKueue worker not connected");
            if *ctx.leader.borrow() {
                let message = format!("load client config failed: {message}");
                write_active(&ctx, &mkc, false, reason, &message).await?;
            }
            Ok(Action::requeue(retry_after(attempts)))
        }
    }
}

/// Runs the cluster controller until `cancel` fires.
pub async fn run(
    client: Client,
    namespace: String,
    clusters: Clusters,
    leader: watch::Receiver<bool>,
    cancel: CancellationToken,
) {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        namespace,
        clusters,
        leader,
        failures: Mutex::new(HashMap::new()),
    });
    let controller = Controller::new(Api::<MultiKueueCluster>::all(client), watcher::Config::default())
        .graceful_shutdown_on(async move { cancel.cancelled().await });
    crate::kit::shell::run(controller, "multikueue-cluster", reconcile, ctx, |_| {
        RETRY_INCREMENT
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kueue `multikueuecluster.go` `retryAfter`: 5 s doubling, capped at 2^6 * 5 s.
    #[test]
    fn back_off_is_kueues() {
        let secs: Vec<u64> = (0..10).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(secs, vec![5, 5, 10, 20, 40, 80, 160, 320, 320, 320]);
    }
}
