//! `quotagate stop|resume clusterqueue|localqueue|workload`: kueuectl's merge patches
//! (kubernetes-sigs/kueue:cmd/kueuectl/app/{stop,resume}): a queue's `spec.stopPolicy` (Hold with
//! `--keep-already-running`, else HoldAndDrain; None to resume), a workload's `spec.active`.

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::{CliError, DryRun, ResumeCmd, StopCmd};
use crate::api::kueue::{ClusterQueue, LocalQueue, StopPolicy, Workload};

/// One change: which object, the merge patch, and the word the name printer ends with.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub kind: Target,
    pub name: String,
    pub patch: Value,
    pub operation: &'static str,
    pub dry_run: DryRun,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    ClusterQueue,
    LocalQueue,
    Workload,
}

impl Target {
    fn resource(self) -> &'static str {
        match self {
            Target::ClusterQueue => "clusterqueue",
            Target::LocalQueue => "localqueue",
            Target::Workload => "workload",
        }
    }
}

fn stop_policy(p: StopPolicy) -> Value {
    json!({"spec": {"stopPolicy": p}})
}

fn hold(keep_already_running: bool) -> StopPolicy {
    if keep_already_running {
        StopPolicy::Hold
    } else {
        StopPolicy::HoldAndDrain
    }
}

pub fn stop(cmd: &StopCmd) -> Change {
    let (kind, name, patch, dry_run) = match cmd {
        StopCmd::Clusterqueue {
            name,
            keep_already_running,
        } => (
            Target::ClusterQueue,
            name,
            stop_policy(hold(*keep_already_running)),
            DryRun::None,
        ),
        StopCmd::Localqueue {
            name,
            keep_already_running,
        } => (
            Target::LocalQueue,
            name,
            stop_policy(hold(*keep_already_running)),
            DryRun::None,
        ),
        StopCmd::Workload { name, dry_run } => (
            Target::Workload,
            name,
            json!({"spec": {"active": false}}),
            *dry_run,
        ),
    };
    Change {
        kind,
        name: name.clone(),
        patch,
        operation: "stopped",
        dry_run,
    }
}

pub fn resume(cmd: &ResumeCmd) -> Change {
    let (kind, name, patch, dry_run) = match cmd {
        ResumeCmd::Clusterqueue { name } => (
            Target::ClusterQueue,
            name,
            stop_policy(StopPolicy::None),
            DryRun::None,
        ),
        ResumeCmd::Localqueue { name } => (
            Target::LocalQueue,
            name,
            stop_policy(StopPolicy::None),
            DryRun::None,
        ),
        ResumeCmd::Workload { name, dry_run } => (
            Target::Workload,
            name,
            json!({"spec": {"active": true}}),
            *dry_run,
        ),
    };
    Change {
        kind,
        name: name.clone(),
        patch,
        operation: "resumed",
        dry_run,
    }
}

/// Applies the change (a client dry run only reads the object, so a missing one is still an
/// error) and returns kubectl's name-printer line.
pub async fn apply(client: &kube::Client, ns: &str, c: &Change) -> Result<String, CliError> {
    let pp = PatchParams {
        dry_run: c.dry_run == DryRun::Server,
        ..Default::default()
    };
    let patch = Patch::Merge(&c.patch);
    let client_only = c.dry_run == DryRun::Client;
    match c.kind {
        Target::ClusterQueue => {
            let api: Api<ClusterQueue> = Api::all(client.clone());
            if client_only {
                api.get(&c.name).await.map(drop)
            } else {
                api.patch(&c.name, &pp, &patch).await.map(drop)
            }
        }
        Target::LocalQueue => {
            let api: Api<LocalQueue> = Api::namespaced(client.clone(), ns);
            if client_only {
                api.get(&c.name).await.map(drop)
            } else {
                api.patch(&c.name, &pp, &patch).await.map(drop)
            }
        }
        Target::Workload => {
            let api: Api<Workload> = Api::namespaced(client.clone(), ns);
            if client_only {
                api.get(&c.name).await.map(drop)
            } else {
                api.patch(&c.name, &pp, &patch).await.map(drop)
            }
        }
    }?;
    Ok(format!(
        "{}.kueue.x-k8s.io/{} {}{}\n",
        c.kind.resource(),
        c.name,
        c.operation,
        c.dry_run.suffix()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // kueuectl's stop_clusterqueue: Hold keeps what runs, HoldAndDrain (the default) evicts it.
    #[test]
    fn stop_and_resume_patch_what_kueuectl_patches() {
        let c = stop(&StopCmd::Clusterqueue {
            name: "cq".into(),
            keep_already_running: false,
        });
        assert_eq!(c.patch, json!({"spec": {"stopPolicy": "HoldAndDrain"}}));
        let c = stop(&StopCmd::Localqueue {
            name: "lq".into(),
            keep_already_running: true,
        });
        assert_eq!(
            (c.kind, c.patch),
            (Target::LocalQueue, json!({"spec": {"stopPolicy": "Hold"}}))
        );
        assert_eq!(
            resume(&ResumeCmd::Clusterqueue { name: "cq".into() }).patch,
            json!({"spec": {"stopPolicy": "None"}})
        );
        let w = stop(&StopCmd::Workload {
            name: "w".into(),
            dry_run: DryRun::Server,
        });
        assert_eq!(
            (w.patch, w.dry_run),
            (json!({"spec": {"active": false}}), DryRun::Server)
        );
        assert_eq!(
            resume(&ResumeCmd::Workload {
                name: "w".into(),
                dry_run: DryRun::None
            })
            .patch,
            json!({"spec": {"active": true}})
        );
    }
}
