//! The `Active` condition of MultiKueue's AdmissionChecks (Kueue's `admissioncheck.go`
//! `ACReconciler`): `BadConfig` when `parameters` do not name a MultiKueueConfig that exists,
//! `NoUsableClusters` when none of its clusters is there and Active, `SomeActiveClusters` (still
//! Active) when only some are. Checked again every 2 s, so a cluster that connects or drops shows.

use std::sync::Arc;
use std::time::Duration;

use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Error;
use crate::api::conditions;
use crate::api::kueue::constants::condition;
use crate::api::kueue::multikueue::{MULTIKUEUE_CONTROLLER_NAME, config_name};
use crate::api::kueue::{AdmissionCheck, AdmissionCheckStatus, MultiKueueCluster, MultiKueueConfig};

const RECHECK: Duration = Duration::from_secs(2);

struct Ctx {
    client: Client,
    leader: watch::Receiver<bool>,
}

/// The check's Active condition: (status, reason, message), as Kueue words it.
pub fn active_state(
    config: Result<&MultiKueueConfig, String>,
    clusters: &[MultiKueueCluster],
) -> (bool, &'static str, String) {
    let cfg = match config {
        Ok(c) => c,
        Err(e) => {
            return (
                false,
                "BadConfig",
                format!("Cannot load the AdmissionChecks parameters: {e}"),
            );
        }
    };
    let mut missing = Vec::new();
    let mut inactive = Vec::new();
    for name in &cfg.spec.clusters {
        match clusters.iter().find(|c| c.name_any() == *name) {
            None => missing.push(name.as_str()),
            Some(c) if !c.is_active() => inactive.push(name.as_str()),
            Some(_) => {}
        }
    }
    let unusable = missing.len() + inactive.len();
    if unusable == 0 {
        return (true, "Active", "The admission check is active".into());
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("Missing clusters: [{}]", missing.join(" ")));
    }
    if !inactive.is_empty() {
        parts.push(format!("Inactive clusters: [{}]", inactive.join(" ")));
    }
    let all = unusable == cfg.spec.clusters.len();
    (
        !all,
        if all {
            "NoUsableClusters"
        } else {
            "SomeActiveClusters"
        },
        parts.join(", "),
    )
}

async fn reconcile(ac: Arc<AdmissionCheck>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ac.spec.controller_name != MULTIKUEUE_CONTROLLER_NAME || ac.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(RECHECK));
    }
    let configs: Api<MultiKueueConfig> = Api::all(ctx.client.clone());
    let config = match config_name(&ac) {
        Ok(name) => configs
            .get_opt(name)
            .await?
            .ok_or_else(|| format!("multikueueconfig {name:?} not found")),
        Err(e) => Err(e),
    };
    let clusters = Api::<MultiKueueCluster>::all(ctx.client.clone())
        .list(&Default::default())
        .await?
        .items;
    let (active, reason, message) = active_state(config.as_ref().map_err(Clone::clone), &clusters);
    let mut obj = (*ac).clone();
    let status = obj.status.get_or_insert_with(AdmissionCheckStatus::default);
    let cond = conditions::new(
        condition::ACTIVE,
        active,
        reason,
        &message,
        ac.metadata.generation,
        jiff::Timestamp::now(),
    );
    if conditions::set(&mut status.conditions, cond) {
        Api::<AdmissionCheck>::all(ctx.client.clone())
            .replace_status(&ac.name_any(), &PostParams::default(), &obj)
            .await?;
    }
    Ok(Action::requeue(RECHECK))
}

/// Runs the controller until `cancel` fires.
pub async fn run(client: Client, leader: watch::Receiver<bool>, cancel: CancellationToken) {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        leader,
    });
    let controller = Controller::new(Api::<AdmissionCheck>::all(client), watcher::Config::default())
        .graceful_shutdown_on(async move { cancel.cancelled().await });
    crate::kit::shell::run(controller, "multikueue-admissioncheck", reconcile, ctx, |_| {
        RECHECK
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::multikueue::{MultiKueueClusterStatus, MultiKueueConfigSpec};

    fn cluster(name: &str, active: bool) -> MultiKueueCluster {
        let mut c = MultiKueueCluster::new(name, Default::default());
        c.status = Some(MultiKueueClusterStatus {
            conditions: vec![conditions::new(
                "Active",
                active,
                "R",
                "",
                None,
                jiff::Timestamp::UNIX_EPOCH,
            )],
        });
        c
    }

    /// Kueue `admissioncheck_test.go` cases: missing config, none usable, some active, all active.
    #[test]
    fn active_as_kueue_words_it() {
        let cfg = MultiKueueConfig::new(
            "cfg",
            MultiKueueConfigSpec {
                clusters: vec!["w1".into(), "w2".into()],
                quota_management: None,
            },
        );
        let (a, r, m) = active_state(Err("multikueueconfig \"cfg\" not found".into()), &[]);
        assert_eq!((a, r), (false, "BadConfig"));
        assert!(
            m.starts_with("Cannot load the AdmissionChecks parameters: "),
            "{m}"
        );
        let (a, r, m) = active_state(Ok(&cfg), &[cluster("w1", false)]);
        assert_eq!((a, r), (false, "NoUsableClusters"));
        assert_eq!(m, "Missing clusters: [w2], Inactive clusters: [w1]");
        let (a, r, m) = active_state(Ok(&cfg), &[cluster("w1", true)]);
        assert_eq!(
            (a, r, m.as_str()),
            (true, "SomeActiveClusters", "Missing clusters: [w2]")
        );
        let (a, r, _) = active_state(Ok(&cfg), &[cluster("w1", true), cluster("w2", true)]);
        assert_eq!((a, r), (true, "Active"));
    }
}
