//! A node agent: binds Pending pods to a node, starts them after a delay (Running, Ready=True, podIP),
//! fails the ones selected for failure, and removes pods that are terminating with no finalizers.

use super::{RETRY, SimError, condition};
use crate::embedded::selector::LabelSelector;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Pods carrying this annotation with value "true" fail instead of starting.
pub const FAIL_ANNOTATION: &str = "sim.quotagate.io/fail";

#[derive(Clone, Debug)]
pub struct NodeAgentConfig {
    pub node_name: String,
    /// From first sight of a pod to Running.
    pub start_delay: Duration,
    /// Pods matching this label selector fail (phase Failed) instead of starting.
    pub fail_selector: Option<String>,
}

impl Default for NodeAgentConfig {
    fn default() -> Self {
        NodeAgentConfig { node_name: "sim-node-1".into(), start_delay: Duration::ZERO, fail_selector: None }
    }
}

/// What to do with one pod: a pure decision from its state and the agent's config.
#[derive(Clone, Debug, PartialEq)]
pub enum PodAction {
    Nothing,
    /// Terminating with no finalizers: remove it now.
    Remove,
    /// Not started yet: check again after this long.
    Wait(Duration),
    /// Write this status (and bind to the node if not bound).
    SetStatus(Value),
}

pub fn decide(pod: &Pod, cfg: &NodeAgentConfig, fail: &Option<LabelSelector>, waited: Duration, ip: &str) -> PodAction {
    let meta = &pod.metadata;
    if meta.deletion_timestamp.is_some() {
        return if meta.finalizers.as_ref().is_none_or(Vec::is_empty) { PodAction::Remove } else { PodAction::Nothing };
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    if phase != "Pending" {
        return PodAction::Nothing;
    }
    if pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty()) {
        return PodAction::Nothing;
    }
    if waited < cfg.start_delay {
        return PodAction::Wait(cfg.start_delay - waited);
    }
    let now = crate::embedded::meta::now_rfc3339();
    let as_json = serde_json::to_value(pod).unwrap_or(Value::Null);
    let by_annotation = meta.annotations.as_ref().and_then(|a| a.get(FAIL_ANNOTATION)).is_some_and(|v| v == "true");
    let failed = by_annotation || fail.as_ref().is_some_and(|s| s.matches(&as_json));
    let containers: Vec<String> = pod.spec.as_ref().map(|s| s.containers.iter().map(|c| c.name.clone()).collect()).unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|n| {
            let state = if failed {
                json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}})
            } else {
                json!({"running": {"startedAt": now}})
            };
            json!({"name": n, "ready": !failed, "started": !failed, "restartCount": 0, "image": "", "imageID": "", "state": state})
        })
        .collect();
    let ready = !failed;
    let status = json!({
        "phase": if failed { "Failed" } else { "Running" },
        "hostIP": "10.0.0.1",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "conditions": [
            condition("PodScheduled", true, "", "", None),
            condition("Initialized", true, "", "", None),
            condition("ContainersReady", ready, if ready { "" } else { "ContainersNotReady" }, "", None),
            condition("Ready", ready, if ready { "" } else { "ContainersNotReady" }, "", None),
        ],
        "containerStatuses": statuses,
    });
    PodAction::SetStatus(status)
}

struct Ctx {
    client: kube::Client,
    cfg: NodeAgentConfig,
    fail: Option<LabelSelector>,
    first_seen: Mutex<HashMap<String, Instant>>,
    next_ip: AtomicU32,
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let waited = {
        let mut seen = ctx.first_seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.entry(uid.clone()).or_insert_with(Instant::now).elapsed()
    };
    let n = ctx.next_ip.fetch_add(1, Ordering::Relaxed);
    let ip = format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 2);
    match decide(&pod, &ctx.cfg, &ctx.fail, waited, &ip) {
        PodAction::Nothing => Ok(Action::await_change()),
        PodAction::Wait(d) => Ok(Action::requeue(d)),
        PodAction::Remove => {
            ctx.first_seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&uid);
            match api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
                Err(e) => Err(e.into()),
            }
        }
        PodAction::SetStatus(status) => {
            if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty) {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"nodeName": ctx.cfg.node_name}}))).await?;
            }
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await?;
            // Started (or failed): the start clock is no longer needed.
            ctx.first_seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&uid);
            Ok(Action::await_change())
        }
    }
}

fn error_policy(_: Arc<Pod>, _: &SimError, _: Arc<Ctx>) -> Action {
    Action::requeue(RETRY)
}

/// Runs until the stream ends (never, while the API is up).
pub async fn run(client: kube::Client, cfg: NodeAgentConfig) {
    let fail = match cfg.fail_selector.as_deref().map(LabelSelector::parse) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            tracing::error!(error = %e, "node agent: invalid fail selector; no pod will be failed by label");
            None
        }
        None => None,
    };
    let ctx = Arc::new(Ctx { client: client.clone(), cfg, fail, first_seen: Mutex::new(HashMap::new()), next_ip: AtomicU32::new(0) });
    Controller::new(Api::<Pod>::all(client), watcher::Config::default())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn decisions() {
        let cfg = NodeAgentConfig { start_delay: Duration::from_secs(2), ..Default::default() };
        let base = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
        let p = pod(base.clone());
        assert_eq!(decide(&p, &cfg, &None, Duration::from_secs(1), "ip"), PodAction::Wait(Duration::from_secs(1)));
        match decide(&p, &cfg, &None, Duration::from_secs(2), "10.0.0.9") {
            PodAction::SetStatus(s) => {
                assert_eq!(s["phase"], "Running");
                assert_eq!(s["podIP"], "10.0.0.9");
                assert_eq!(s["conditions"][3], json!({"type": "Ready", "status": "True", "reason": "", "message": "", "lastTransitionTime": s["conditions"][3]["lastTransitionTime"]}));
            }
            other => panic!("{other:?}"),
        }
        let mut failing = base.clone();
        failing["metadata"]["labels"] = json!({"fail": "yes"});
        let sel = Some(LabelSelector::parse("fail=yes").unwrap());
        match decide(&pod(failing), &cfg, &sel, Duration::from_secs(5), "ip") {
            PodAction::SetStatus(s) => assert_eq!(s["phase"], "Failed"),
            other => panic!("{other:?}"),
        }
        let mut gated = base.clone();
        gated["spec"]["schedulingGates"] = json!([{"name": "g"}]);
        assert_eq!(decide(&pod(gated), &cfg, &None, Duration::from_secs(5), "ip"), PodAction::Nothing);
        let mut deleting = base.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(decide(&pod(deleting.clone()), &cfg, &None, Duration::ZERO, "ip"), PodAction::Remove);
        deleting["metadata"]["finalizers"] = json!(["x"]);
        assert_eq!(decide(&pod(deleting), &cfg, &None, Duration::ZERO, "ip"), PodAction::Nothing);
        let mut running = base;
        running["status"]["phase"] = json!("Running");
        assert_eq!(decide(&pod(running), &cfg, &None, Duration::from_secs(9), "ip"), PodAction::Nothing);
    }
}
