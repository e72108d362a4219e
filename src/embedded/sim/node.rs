//! A node agent: binds Pending pods to a node, starts them after a delay (Running, Ready=True, podIP),
//! fails the ones selected for failure, and removes pods that are terminating with no finalizers. A
//! running pod whose containers all run `sleep N` and/or `exit K` (directly, or as `sh -c` statements
//! joined by `;` or `&&`) ends after the longest sleep: Succeeded, or Failed with the first non-zero
//! exit code. Any other command runs until the pod is deleted. A pod with `schedulingGates` stays
//! Pending with `PodScheduled=False` (`SchedulingGated`), unbound.

use super::{RETRY, SimError, condition};
use crate::embedded::selector::LabelSelector;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
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
    /// Runs pods with a known image (`rayproject/ray`) as real processes; `None`: every pod simulated.
    pub runtime: Option<Arc<super::process::ProcessRuntime>>,
    /// The kubelet's share of the work, for a cluster with a scheduler of its own (`quotagate
    /// node-agent` against a real kube-scheduler): only pods bound to one of these nodes are run;
    /// unbound and gated pods are the scheduler's, and the agent binds nothing. `None` (the embedded
    /// cluster, which has no scheduler): every pod, bound by the agent to `node_name`.
    pub kubelet_of: Option<Vec<String>>,
    /// Images (repository names, without tag or digest) this agent cannot simulate: a pod with one
    /// stays Pending, its container waiting (`ImageNotSimulated`), rather than showing a program
    /// Running and Ready that does not run. Empty in the embedded cluster.
    pub images_not_run: Vec<String>,
    /// Nodes with capacity (`--nodes`, `--node-pool`; name and pool): with any, the embedded cluster
    /// registers them and runs its scheduler (`scheduler.rs`), which binds each pod only where it fits,
    /// and this agent runs the pods bound to them. Empty (the default): no Node objects, every pod bound
    /// to `node_name` at once, quota the only limit.
    pub nodes: Vec<(String, super::nodes::NodePool)>,
    /// Reachable addresses for some simulated pods (`quotagate node-agent`'s simulated Ray heads,
    /// whose dashboards it serves there); `None`: every simulated pod gets an address of its own that
    /// reaches nothing.
    pub addresses: Option<Arc<dyn PodAddresses>>,
}

/// Lends simulated pods addresses where something answers for them.
pub trait PodAddresses: Send + Sync + std::fmt::Debug {
    /// The address `pod` runs at, when this serves it (the same one for every call until released).
    fn address(&self, pod: &Pod) -> Option<String>;
    /// `pod` (by UID) is gone: stop serving it, free its address.
    fn release(&self, uid: &str);
}

impl Default for NodeAgentConfig {
    fn default() -> Self {
        NodeAgentConfig {
            node_name: "sim-node-1".into(),
            start_delay: Duration::ZERO,
            fail_selector: None,
            runtime: None,
            kubelet_of: None,
            images_not_run: Vec::new(),
            nodes: Vec::new(),
            addresses: None,
        }
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
    /// Write this status of a pod held by its scheduling gates (not bound).
    Gated(Value),
}

/// kube-scheduler's reason and message for a pod held by `schedulingGates`.
pub const SCHEDULING_GATED: &str = "SchedulingGated";
pub const SCHEDULING_GATED_MESSAGE: &str = "Scheduling is blocked due to non-empty scheduling gates";

pub fn decide(
    pod: &Pod,
    cfg: &NodeAgentConfig,
    fail: &Option<LabelSelector>,
    waited: Duration,
    ip: &str,
) -> PodAction {
    let meta = &pod.metadata;
    if meta.deletion_timestamp.is_some() {
        return if meta.finalizers.as_ref().is_none_or(Vec::is_empty) {
            PodAction::Remove
        } else {
            PodAction::Nothing
        };
    }
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    if phase == "Running" {
        return finish(pod, jiff::Timestamp::now());
    }
    if phase != "Pending" {
        return PodAction::Nothing;
    }
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
    {
        // The scheduler's word for a gated pod: not scheduled, `SchedulingGated`.
        let said = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some(SCHEDULING_GATED)
                })
            });
        return if said {
            PodAction::Nothing
        } else {
            PodAction::Gated(
                json!({"phase": "Pending", "conditions": [condition("PodScheduled", false, SCHEDULING_GATED, SCHEDULING_GATED_MESSAGE, None)]}),
            )
        };
    }
    if let Some(image) = not_run(pod, cfg) {
        return not_simulated(pod, image);
    }
    if waited < cfg.start_delay {
        return PodAction::Wait(cfg.start_delay - waited);
    }
    let now = crate::embedded::meta::now_rfc3339();
    let as_json = serde_json::to_value(pod).unwrap_or(Value::Null);
    let by_annotation = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAIL_ANNOTATION))
        .is_some_and(|v| v == "true");
    let failed = by_annotation || fail.as_ref().is_some_and(|s| s.matches(&as_json));
    let containers: Vec<String> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
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

/// The reason a pod's container waits when its image is one the agent does not simulate.
pub const IMAGE_NOT_SIMULATED: &str = "ImageNotSimulated";

/// `registry:5000/org/name:tag@sha256:...` -> `name`.
fn repository_name(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split(':').next().unwrap_or(last)
}

/// The first image of `pod` that `cfg` does not run.
fn not_run<'a>(pod: &'a Pod, cfg: &NodeAgentConfig) -> Option<&'a str> {
    if cfg.images_not_run.is_empty() {
        return None;
    }
    pod.spec.as_ref()?.containers.iter().find_map(|c| {
        let image = c.image.as_deref()?;
        cfg.images_not_run
            .iter()
            .any(|n| n == repository_name(image))
            .then_some(image)
    })
}

/// A bound pod whose image is not simulated: Pending, not ready, its containers waiting (said once).
fn not_simulated(pod: &Pod, image: &str) -> PodAction {
    let said = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some(IMAGE_NOT_SIMULATED))
            })
        });
    if said {
        return PodAction::Nothing;
    }
    let message = format!("the node agent simulates pods and cannot run {image}");
    let statuses: Vec<Value> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({"name": c.name, "ready": false, "started": false, "restartCount": 0,
                   "image": c.image.clone().unwrap_or_default(), "imageID": "",
                   "state": {"waiting": {"reason": IMAGE_NOT_SIMULATED, "message": message}}})
        })
        .collect();
    PodAction::SetStatus(json!({
        "phase": "Pending",
        "hostIP": "10.0.0.1",
        "conditions": [
            condition("PodScheduled", true, "", "", None),
            condition("Initialized", true, "", "", None),
            condition("ContainersReady", false, "ContainersNotReady", &message, None),
            condition("Ready", false, "ContainersNotReady", &message, None),
        ],
        "containerStatuses": statuses,
    }))
}

/// How a container's command ends: after this long, with this exit code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exit {
    pub after: Duration,
    pub code: i32,
}

/// `sleep N` / `exit K`, alone or as `sh -c` statements joined by `;` or `&&`; `None` for any other
/// command (it runs until deleted).
pub fn exit_of(command: &[String]) -> Option<Exit> {
    let script = match command {
        [sh, c, script] if ["sh", "/bin/sh", "bash", "/bin/bash"].contains(&sh.as_str()) && c == "-c" => {
            script.clone()
        }
        [] => return None,
        words => words.join(" "),
    };
    let mut exit = Exit {
        after: Duration::ZERO,
        code: 0,
    };
    for statement in script
        .split(';')
        .flat_map(|s| s.split("&&"))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match statement.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["sleep", n] => {
                let secs = n.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
                exit.after += Duration::try_from_secs_f64(secs).ok()?;
            }
            ["exit", k] => {
                exit.code = k.parse().ok()?;
                return Some(exit);
            }
            _ => return None,
        }
    }
    Some(exit)
}

/// A running pod whose containers all end on their own: its final status once the longest has run
/// its time (counted from the pod's `startTime`), else a wait until then.
fn finish(pod: &Pod, now: jiff::Timestamp) -> PodAction {
    let Some(spec) = pod.spec.as_ref() else {
        return PodAction::Nothing;
    };
    let exits: Option<Vec<(String, Exit)>> = spec
        .containers
        .iter()
        .map(|c| {
            exit_of(
                &[
                    c.command.clone().unwrap_or_default(),
                    c.args.clone().unwrap_or_default(),
                ]
                .concat(),
            )
            .map(|e| (c.name.clone(), e))
        })
        .collect();
    let Some(exits) = exits.filter(|e| !e.is_empty()) else {
        return PodAction::Nothing;
    };
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or(now, |t| t.0);
    let ran = Duration::try_from(now.duration_since(started)).unwrap_or(Duration::ZERO);
    let longest = exits.iter().map(|(_, e)| e.after).max().unwrap_or(Duration::ZERO);
    if ran < longest {
        return PodAction::Wait(longest - ran);
    }
    let at = now.to_string();
    let code = exits.iter().map(|(_, e)| e.code).find(|c| *c != 0).unwrap_or(0);
    let statuses: Vec<Value> = exits
        .iter()
        .map(|(n, e)| {
            let reason = if e.code == 0 { "Completed" } else { "Error" };
            let state = json!({"terminated": {"exitCode": e.code, "reason": reason, "startedAt": started.to_string(), "finishedAt": at}});
            json!({"name": n, "ready": false, "started": false, "restartCount": 0, "image": "", "imageID": "", "state": state})
        })
        .collect();
    PodAction::SetStatus(json!({
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "conditions": [
            condition("ContainersReady", false, "PodCompleted", "", None),
            condition("Ready", false, "PodCompleted", "", None),
        ],
        "containerStatuses": statuses,
    }))
}

/// Whether this agent runs `pod`: every pod in the embedded cluster; as a kubelet, only the pods a
/// scheduler bound to one of its nodes.
pub fn runs_here(pod: &Pod, cfg: &NodeAgentConfig) -> bool {
    let Some(nodes) = &cfg.kubelet_of else {
        return true;
    };
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|bound| nodes.iter().any(|n| n == bound))
}

/// `pod` as the simulated agent's cache keeps it: only the fields `decide`, `runs_here` and
/// `reconcile` read (names, labels, the fail annotation, deletion, finalizers; the containers' names,
/// images, commands and arguments, the node, the scheduling gates; the phase, conditions, container
/// states and start time). A cached `Pod` is about six times its JSON, and the cache holds every pod
/// in the cluster; the env, probes, volumes and the rest were most of it. Not for the process
/// runtime or lent addresses, which read the whole pod.
pub fn slim(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    meta.owner_references = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| k == FAIL_ANNOTATION);
    }
    if let Some(spec) = pod.spec.as_mut() {
        let containers = std::mem::take(&mut spec.containers)
            .into_iter()
            .map(|c| Container {
                name: c.name,
                image: c.image,
                command: c.command,
                args: c.args,
                ..Default::default()
            })
            .collect();
        *spec = PodSpec {
            containers,
            node_name: spec.node_name.take(),
            scheduling_gates: spec.scheduling_gates.take(),
            ..Default::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        *status = PodStatus {
            phase: status.phase.take(),
            conditions: status.conditions.take(),
            container_statuses: status.container_statuses.take(),
            start_time: status.start_time.take(),
            ..Default::default()
        };
    }
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
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    if !runs_here(&pod, &ctx.cfg) {
        return Ok(Action::await_change());
    }
    if let Some(rt) = ctx.cfg.runtime.as_ref().filter(|rt| rt.runs(&pod))
        && (!gated || pod.metadata.deletion_timestamp.is_some())
    {
        // The node the scheduler bound it to, else (no scheduler) this agent's own.
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| ctx.cfg.node_name.clone());
        return rt.reconcile(pod, &ctx.client, &node).await;
    }
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
            ctx.first_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&uid);
            if let Some(a) = &ctx.cfg.addresses {
                a.release(&uid);
            }
            match api
                .delete(
                    &name,
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..Default::default()
                    },
                )
                .await
            {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
                Err(e) => Err(e.into()),
            }
        }
        PodAction::Gated(status) => {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
            Ok(Action::await_change())
        }
        PodAction::SetStatus(mut status) => {
            if status["phase"] == "Running"
                && let Some(ip) = ctx.cfg.addresses.as_ref().and_then(|a| a.address(&pod))
            {
                status["podIP"] = json!(ip);
                status["podIPs"] = json!([{"ip": ip}]);
            }
            if pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
            {
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"nodeName": ctx.cfg.node_name}})),
                )
                .await?;
            }
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
            // Started (or failed): the start clock is no longer needed.
            ctx.first_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&uid);
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
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        cfg,
        fail,
        first_seen: Mutex::new(HashMap::new()),
        next_ip: AtomicU32::new(0),
    });
    let api = Api::<Pod>::all(client);
    // As `Controller::new` watches, with the cached pods slimmed when nothing reads them whole.
    let controller = if ctx.cfg.runtime.is_none() && ctx.cfg.addresses.is_none() {
        let (reader, writer) = reflector::store();
        let pods = watcher(api, watcher::Config::default())
            .modify(slim)
            .reflect(writer)
            .applied_objects();
        Controller::for_stream(pods, reader)
    } else {
        Controller::new(api, watcher::Config::default())
    };
    controller
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
        let cfg = NodeAgentConfig {
            start_delay: Duration::from_secs(2),
            ..Default::default()
        };
        let base = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
        let p = pod(base.clone());
        assert_eq!(
            decide(&p, &cfg, &None, Duration::from_secs(1), "ip"),
            PodAction::Wait(Duration::from_secs(1))
        );
        match decide(&p, &cfg, &None, Duration::from_secs(2), "10.0.0.9") {
            PodAction::SetStatus(s) => {
                assert_eq!(s["phase"], "Running");
                assert_eq!(s["podIP"], "10.0.0.9");
                assert_eq!(
                    s["conditions"][3],
                    json!({"type": "Ready", "status": "True", "reason": "", "message": "", "lastTransitionTime": s["conditions"][3]["lastTransitionTime"]})
                );
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
        match decide(&pod(gated.clone()), &cfg, &None, Duration::from_secs(5), "ip") {
            PodAction::Gated(s) => {
                assert_eq!(
                    (s["phase"].as_str(), s["conditions"][0]["type"].as_str()),
                    (Some("Pending"), Some("PodScheduled"))
                );
                assert_eq!(
                    (
                        s["conditions"][0]["status"].as_str(),
                        s["conditions"][0]["reason"].as_str()
                    ),
                    (Some("False"), Some("SchedulingGated"))
                );
                gated["status"] = s;
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            decide(&pod(gated), &cfg, &None, Duration::from_secs(5), "ip"),
            PodAction::Nothing,
            "said once"
        );
        let mut deleting = base.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            decide(&pod(deleting.clone()), &cfg, &None, Duration::ZERO, "ip"),
            PodAction::Remove
        );
        deleting["metadata"]["finalizers"] = json!(["x"]);
        assert_eq!(
            decide(&pod(deleting), &cfg, &None, Duration::ZERO, "ip"),
            PodAction::Nothing
        );
        let mut running = base;
        running["status"]["phase"] = json!("Running");
        assert_eq!(
            decide(&pod(running), &cfg, &None, Duration::from_secs(9), "ip"),
            PodAction::Nothing
        );
    }

    /// The agent decides the same on a slimmed pod as on the whole one, in each state it acts on.
    #[test]
    fn a_slimmed_pod_is_decided_as_the_whole_one() {
        let whole = json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"crash": "yes"},
                "annotations": {FAIL_ANNOTATION: "false", "big": "x".repeat(1000)}, "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "o1"}]},
            "spec": {"nodeName": "n", "schedulingGates": [{"name": "g"}], "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "img", "command": ["sh", "-c"], "args": ["sleep 1"],
                    "env": [{"name": "A", "value": "1"}], "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending", "podIP": "10.0.0.1", "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": SCHEDULING_GATED}]}
        });
        let mut slimmed = pod(whole.clone());
        slim(&mut slimmed);
        let text = serde_json::to_string(&slimmed).unwrap();
        assert!(
            !text.contains("xxx") && !text.contains("env") && !text.contains("volumes"),
            "{text}"
        );
        let full = pod(whole.clone());
        assert_eq!(slimmed.metadata.labels, full.metadata.labels);
        assert_eq!(slimmed.metadata.finalizers, full.metadata.finalizers);
        let (s, f) = (slimmed.spec.clone().unwrap(), full.spec.clone().unwrap());
        assert_eq!(
            (&s.node_name, &s.scheduling_gates),
            (&f.node_name, &f.scheduling_gates)
        );
        assert_eq!(
            (
                &s.containers[0].image,
                &s.containers[0].command,
                &s.containers[0].args
            ),
            (
                &f.containers[0].image,
                &f.containers[0].command,
                &f.containers[0].args
            )
        );
        let cfg = NodeAgentConfig {
            images_not_run: vec!["img".into()],
            ..Default::default()
        };
        let sel = Some(LabelSelector::parse("crash=yes").unwrap());
        let variants = |mut v: Value| {
            let mut out = Vec::new();
            for change in 0..5 {
                match change {
                    1 => v["spec"]["schedulingGates"] = json!([]),
                    2 => v["spec"]["containers"][0]["image"] = json!("other"),
                    3 => v["status"]["phase"] = json!("Running"),
                    4 => v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"),
                    _ => {}
                }
                out.push(v.clone());
            }
            out
        };
        // Timestamps aside (`now` may tick between the two calls), the same action.
        let strip_times = |a: PodAction| match a {
            PodAction::SetStatus(mut s) | PodAction::Gated(mut s) => {
                for c in s["conditions"].as_array_mut().into_iter().flatten() {
                    c["lastTransitionTime"] = Value::Null;
                }
                s["startTime"] = Value::Null;
                for c in s["containerStatuses"].as_array_mut().into_iter().flatten() {
                    c["state"] = Value::Null;
                }
                PodAction::SetStatus(s)
            }
            other => other,
        };
        for v in variants(whole) {
            let full = pod(v.clone());
            let mut slimmed = full.clone();
            slim(&mut slimmed);
            for sel in [&None, &sel] {
                assert_eq!(
                    strip_times(decide(&slimmed, &cfg, sel, Duration::from_secs(9), "ip")),
                    strip_times(decide(&full, &cfg, sel, Duration::from_secs(9), "ip")),
                    "{v}"
                );
            }
        }
    }

    #[test]
    fn a_kubelet_runs_only_the_pods_bound_to_its_nodes() {
        let embedded = NodeAgentConfig::default();
        let kubelet = NodeAgentConfig {
            kubelet_of: Some(vec!["n1".into(), "n2".into()]),
            ..Default::default()
        };
        let unbound = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}));
        let bound = |node: &str| {
            pod(json!({"metadata": {"name": "p"}, "spec": {"nodeName": node, "containers": [{"name": "c"}]}}))
        };
        assert!(
            runs_here(&unbound, &embedded),
            "the embedded agent binds it itself"
        );
        assert!(!runs_here(&unbound, &kubelet), "unbound: the scheduler's");
        assert!(runs_here(&bound("n2"), &kubelet));
        assert!(!runs_here(&bound("other"), &kubelet), "another kubelet's");
    }

    #[test]
    fn an_image_not_simulated_waits_instead_of_running() {
        let cfg = NodeAgentConfig {
            images_not_run: vec!["quotagate".into()],
            ..Default::default()
        };
        for image in [
            "quotagate:0.1.0",
            "ghcr.io/org/quotagate@sha256:ab",
            "reg:5000/quotagate",
        ] {
            let p = pod(
                json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "manager", "image": image}]}, "status": {"phase": "Pending"}}),
            );
            let PodAction::SetStatus(s) = decide(&p, &cfg, &None, Duration::from_secs(9), "ip") else {
                panic!("{image}: a status")
            };
            assert_eq!(s["phase"], "Pending", "{image}");
            assert_eq!(s["conditions"][3]["status"], "False");
            assert_eq!(
                s["containerStatuses"][0]["state"]["waiting"]["reason"],
                IMAGE_NOT_SIMULATED
            );
            let mut said = serde_json::to_value(&p).unwrap();
            said["status"] = s;
            assert_eq!(
                decide(&pod(said), &cfg, &None, Duration::from_secs(9), "ip"),
                PodAction::Nothing,
                "said once"
            );
        }
        let other = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "quotagate-demo:1"}]}, "status": {"phase": "Pending"}}),
        );
        match decide(&other, &cfg, &None, Duration::from_secs(9), "ip") {
            PodAction::SetStatus(s) => assert_eq!(s["phase"], "Running"),
            x => panic!("{x:?}"),
        }
    }

    #[test]
    fn sleep_and_exit_commands_end_their_pods() {
        let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let exit = |secs: u64, code: i32| {
            Some(Exit {
                after: Duration::from_secs(secs),
                code,
            })
        };
        assert_eq!(exit_of(&words(&["sleep", "3"])), exit(3, 0));
        assert_eq!(exit_of(&words(&["sh", "-c", "sleep 1; exit 3"])), exit(1, 3));
        assert_eq!(
            exit_of(&words(&["/bin/sh", "-c", "sleep 1 && sleep 2"])),
            exit(3, 0)
        );
        assert_eq!(exit_of(&words(&["sh", "-c", "exit 2; sleep 9"])), exit(0, 2));
        assert_eq!(
            exit_of(&words(&["sleep", "0.5"])),
            Some(Exit {
                after: Duration::from_millis(500),
                code: 0
            })
        );
        for forever in [
            &["python", "train.py"][..],
            &["sleep", "-1"],
            &["sleep", "inf"],
            &["sh", "-c", "echo hi; sleep 1"],
            &[],
        ] {
            assert_eq!(exit_of(&words(forever)), None, "{forever:?}");
        }

        let at = |s: i64| jiff::Timestamp::from_second(1_700_000_000 + s).unwrap();
        let running = |command: Value| {
            pod(
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "command": command}, {"name": "b", "command": ["sleep", "1"]}]},
                "status": {"phase": "Running", "startTime": at(0).to_string()}}),
            )
        };
        let p = running(json!(["sleep", "2"]));
        assert_eq!(
            finish(&p, at(1)),
            PodAction::Wait(Duration::from_secs(1)),
            "the longest container decides"
        );
        match finish(&p, at(2)) {
            PodAction::SetStatus(s) => {
                assert_eq!(s["phase"], "Succeeded");
                assert_eq!(s["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
            }
            other => panic!("{other:?}"),
        }
        match finish(&running(json!(["sh", "-c", "exit 7"])), at(1)) {
            PodAction::SetStatus(s) => {
                assert_eq!(s["phase"], "Failed");
                assert_eq!(s["containerStatuses"][0]["state"]["terminated"]["exitCode"], 7);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            finish(&running(json!(["serve"])), at(100)),
            PodAction::Nothing,
            "runs until deleted"
        );
    }
}
