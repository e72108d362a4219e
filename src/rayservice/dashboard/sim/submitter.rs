//! The `ray job submit` of a submitter pod, played against the simulated dashboards: what the Ray CLI
//! in KubeRay's `K8sJobMode` submitter Job does on a real cluster. The embedded cluster has no container
//! runtime, so the node agent starts such a pod and leaves it Running; this loop reads the pod's
//! command, submits the job to the dashboard at `--address` (unless it is already there, as the
//! script's `ray job status` check does), and ends the pod the way the CLI process would end:
//!
//! * `ray job submit --no-wait` alone: Succeeded (exit 0) once the submission is accepted;
//! * followed by `ray job logs --follow` (KubeRay's script), or `ray job submit` without `--no-wait`:
//!   Running until the Ray job ends, then Succeeded (exit 0): the CLI tails logs and exits 0 whatever
//!   the job's end, and the RayJob reads the job's status from Ray, not from the pod;
//! * a submission the dashboard refuses, or a dashboard that does not answer: Failed (exit 1), as the
//!   CLI under `bash -e` fails, and the Job controller retries per its `backoffLimit`;
//! * an `--address` whose host the cluster's DNS would not resolve (no such Service, a name outside
//!   the cluster): Failed (exit 1), as the CLI fails to connect. The simulated dashboards answer at
//!   any address, so this is decided here, against the Services the API has.
//!
//! A pod whose command has no `ray job submit` statement is not this loop's business.
//!
//! Where the loop runs decides which pods it plays and how it reaches their dashboards ([`Scope`]): in
//! the embedded cluster (or a manager with simulated dashboards) every pod, against dashboards keyed
//! by the address the pod dials; in `quotagate node-agent` only the pods bound to the agent's nodes,
//! against the heads it serves at their pod addresses, so a Service address is followed to the ready
//! endpoint behind it as the pod's connection would be.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::{Value, json};

use super::RaySim;
use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::rayservice::dashboard::{DashboardEndpoint, DashboardError, JobSubmitRequest, RayJobsApi};

/// How often a followed job's status is read.
const POLL: Duration = Duration::from_millis(300);

/// What one container's `ray job submit` asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Submission {
    /// The dashboard's base URL (`http://host:port`).
    pub address: String,
    pub submission_id: Option<String>,
    pub entrypoint: String,
    /// The process stays until the job ends (`ray job logs --follow`, or a submit without `--no-wait`).
    pub follows: bool,
    /// The rest of the submit's options, passed on to the Jobs API as the Ray CLI does.
    pub options: SubmitOptions,
}

/// `--runtime-env-json`, `--metadata-json` and the entrypoint's resources, as read from the command.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubmitOptions {
    pub runtime_env: Option<Value>,
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
    pub entrypoint_num_cpus: Option<f64>,
    pub entrypoint_num_gpus: Option<f64>,
    pub entrypoint_resources: Option<std::collections::BTreeMap<String, f64>>,
    /// An option the CLI could not read: it exits 1 with this message before submitting.
    pub error: Option<String>,
}

impl SubmitOptions {
    fn read(opts: &[String]) -> SubmitOptions {
        let mut out = SubmitOptions::default();
        let mut fail = |flag: &str, e: &dyn std::fmt::Display| {
            out.error
                .get_or_insert_with(|| format!("ray job submit: invalid value for '{flag}': {e}"));
        };
        let json = |flag: &str| {
            option(opts, flag).map(|v| serde_json::from_str::<Value>(&v).map_err(|e| e.to_string()))
        };
        let number = |flag: &str| option(opts, flag).map(|v| v.parse::<f64>().map_err(|e| e.to_string()));
        let mut runtime_env = None;
        match json("--runtime-env-json") {
            Some(Ok(v)) => runtime_env = Some(v),
            Some(Err(e)) => fail("--runtime-env-json", &e),
            None => {}
        }
        let mut metadata = None;
        match json("--metadata-json")
            .map(|r| r.and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string())))
        {
            Some(Ok(m)) => metadata = Some(m),
            Some(Err(e)) => fail("--metadata-json", &e),
            None => {}
        }
        let mut resources = None;
        match json("--entrypoint-resources")
            .map(|r| r.and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string())))
        {
            Some(Ok(m)) => resources = Some(m),
            Some(Err(e)) => fail("--entrypoint-resources", &e),
            None => {}
        }
        let mut cpus = None;
        match number("--entrypoint-num-cpus") {
            Some(Ok(n)) => cpus = Some(n),
            Some(Err(e)) => fail("--entrypoint-num-cpus", &e),
            None => {}
        }
        let mut gpus = None;
        match number("--entrypoint-num-gpus") {
            Some(Ok(n)) => gpus = Some(n),
            Some(Err(e)) => fail("--entrypoint-num-gpus", &e),
            None => {}
        }
        SubmitOptions {
            runtime_env,
            metadata,
            entrypoint_num_cpus: cpus,
            entrypoint_num_gpus: gpus,
            entrypoint_resources: resources,
            ..out
        }
    }
}

/// One shell statement: its words (quotes taken off) and each word's end in `raw`, the statement's text.
struct Statement<'a> {
    words: Vec<String>,
    ends: Vec<usize>,
    raw: &'a str,
}

/// The statements of a shell script: split on `;`, `&&` and new lines outside quotes, leading shell
/// keywords of `if`/`then` dropped.
fn statements(script: &str) -> Vec<Statement<'_>> {
    let mut out = Vec::new();
    let (mut start, mut quote, mut word, mut in_word) = (0, None::<char>, String::new(), false);
    let mut current = Statement {
        words: Vec::new(),
        ends: Vec::new(),
        raw: "",
    };
    let mut chars = script.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        let end_word = |current: &mut Statement<'_>, word: &mut String, in_word: &mut bool| {
            if std::mem::take(in_word) {
                current.words.push(std::mem::take(word));
                current.ends.push(i - start);
            }
        };
        match (quote, ch) {
            // As the shell reads them: inside double quotes a backslash escapes only `"`, `\\`, `$` and
            // `` ` ``; outside quotes it escapes any character.
            (Some('"'), '\\') => match chars.peek() {
                Some(&(_, n)) if matches!(n, '"' | '\\' | '$' | '`') => {
                    word.push(n);
                    chars.next();
                }
                _ => word.push('\\'),
            },
            (None, '\\') => {
                if let Some((_, n)) = chars.next() {
                    word.push(n);
                }
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(ch);
                in_word = true;
            }
            (None, ';' | '\n') | (None, '&') if ch != '&' || chars.peek().is_some_and(|(_, n)| *n == '&') => {
                end_word(&mut current, &mut word, &mut in_word);
                current.raw = &script[start..i];
                out.push(std::mem::replace(
                    &mut current,
                    Statement {
                        words: Vec::new(),
                        ends: Vec::new(),
                        raw: "",
                    },
                ));
                if ch == '&' {
                    chars.next();
                    start = i + 2;
                } else {
                    start = i + 1;
                }
            }
            (None, c) if c.is_whitespace() => end_word(&mut current, &mut word, &mut in_word),
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        current.words.push(word);
        current.ends.push(script.len() - start);
    }
    current.raw = &script[start..];
    out.push(current);
    for st in &mut out {
        let skip = st
            .words
            .iter()
            .take_while(|w| matches!(w.as_str(), "if" | "then" | "else" | "do" | "!"))
            .count();
        st.words.drain(..skip);
        st.ends.drain(..skip);
    }
    out.retain(|st| !st.words.is_empty() && st.words[0] != "fi");
    out
}

fn starts(words: &[String], prefix: &[&str]) -> bool {
    words.len() >= prefix.len() && words.iter().zip(prefix).all(|(w, p)| w == p)
}

/// The value after `flag` (`--flag value` or `--flag=value`).
fn option(words: &[String], flag: &str) -> Option<String> {
    let eq = format!("{flag}=");
    words.iter().enumerate().find_map(|(i, w)| {
        if w == flag {
            words.get(i + 1).cloned()
        } else {
            w.strip_prefix(&eq).map(str::to_string)
        }
    })
}

/// The script of `sh -c SCRIPT` / `/bin/bash -ce -- SCRIPT`: the first word after the shell's options.
fn shell_script(argv: &[String]) -> Option<String> {
    let shell = argv.first()?.rsplit('/').next()?;
    if !matches!(shell, "sh" | "bash" | "dash" | "zsh") {
        return None;
    }
    let mut rest = argv[1..].iter().skip_while(|w| w.starts_with('-'));
    let has_c = argv[1..]
        .iter()
        .take_while(|w| w.starts_with('-'))
        .any(|w| !w.starts_with("--") && w.contains('c'));
    has_c.then(|| rest.next().cloned()).flatten()
}

/// The container's `ray job submit`, if its command runs one.
pub fn parse_container(c: &Container) -> Option<Submission> {
    let argv = [
        c.command.clone().unwrap_or_default(),
        c.args.clone().unwrap_or_default(),
    ]
    .concat();
    let script = shell_script(&argv).unwrap_or_else(|| argv.join(" "));
    let lines = statements(&script);
    let submit = lines
        .iter()
        .find(|st| starts(&st.words, &["ray", "job", "submit"]))?;
    // The entrypoint is the statement's text after `--`, as the shell would pass it on.
    let (opts, entry) = match submit.words.iter().position(|w| w == "--") {
        Some(i) => (
            &submit.words[..i],
            submit.raw[submit.ends[i]..].trim().to_string(),
        ),
        None => (&submit.words[..], String::new()),
    };
    let env = |name: &str| {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    let address = option(opts, "--address")
        .or_else(|| env("RAY_DASHBOARD_ADDRESS"))
        .or_else(|| env("RAY_ADDRESS"))?;
    let address = if address.contains("://") {
        address
    } else {
        format!("http://{address}")
    };
    let no_wait = opts.iter().any(|w| w == "--no-wait");
    let follows_logs = lines.iter().any(|st| {
        starts(&st.words, &["ray", "job", "logs"]) && st.words.iter().any(|f| f == "--follow" || f == "-f")
    });
    Some(Submission {
        address,
        submission_id: option(opts, "--submission-id"),
        entrypoint: entry,
        follows: !no_wait || follows_logs,
        options: SubmitOptions::read(opts),
    })
}

/// The pod's `ray job submit`: the first container running one.
pub fn parse(pod: &Pod) -> Option<(String, Submission)> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find_map(|c| parse_container(c).map(|s| (c.name.clone(), s)))
}

/// What the controller's cache keeps of a pod: a pod that runs a submitter whole (less its
/// `managedFields`), any other as its name, namespace, uid and version, all `reconcile` reads of it
/// (it forgets that uid). The cache holds every pod in the cluster and most run no submitter (a
/// RayCluster's workers): whole, they were most of this simulator's memory. A pod's containers never
/// change, so a pod slimmed once never needs its spec again.
pub fn slim(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    if parse(pod).is_some() {
        return;
    }
    let meta = std::mem::take(&mut pod.metadata);
    *pod = Pod {
        metadata: ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
}

/// The pod's status once its submitter container `name` ended with `code`. Alone in its pod (K8sJobMode)
/// the pod ends with it; beside other containers (SidecarMode, in the head pod) only that container
/// ends, and the pod, still Running, is no longer Ready, as the kubelet says of a pod that never restarts.
/// A container with its own `restartPolicy: OnFailure` (KubeRay's SidecarSubmitterRestart) that failed
/// is restarted instead, as the kubelet does: its restart count goes up, its last state is the failure,
/// and it runs again.
pub fn ended_container(pod: &Pod, name: &str, code: i32, message: &str) -> Value {
    let spec_of = |n: &str| {
        pod.spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == n))
    };
    if code != 0 && spec_of(name).is_some_and(|c| c.restart_policy.as_deref() == Some("OnFailure")) {
        return restarted(pod, name, code, message);
    }
    let alone = pod
        .spec
        .as_ref()
        .is_none_or(|s| s.containers.iter().all(|c| c.name == name));
    if alone {
        return ended(pod, code, message);
    }
    let now = jiff::Timestamp::now().to_string();
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let statuses: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| match current.iter().find(|st| st.name == c.name) {
            Some(st) if c.name != name => serde_json::to_value(st).unwrap_or(Value::Null),
            _ if c.name != name => json!({"name": c.name, "ready": true, "started": true, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {"startedAt": now}}}),
            _ => terminated(c, code, message, &started(pod, &now), &now),
        })
        .collect();
    let keep: Vec<Value> = pod
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| !matches!(c.type_.as_str(), "Ready" | "ContainersReady"))
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect();
    let cond = |t: &str| json!({"type": t, "status": "False", "reason": "ContainersNotReady", "message": format!("containers with unready status: [{name}]"), "lastTransitionTime": now});
    let mut conditions = keep;
    conditions.extend([cond("ContainersReady"), cond("Ready")]);
    json!({"conditions": conditions, "containerStatuses": statuses})
}

/// The pod's status with container `name` restarted after failing with `code` (the others as they are).
fn restarted(pod: &Pod, name: &str, code: i32, message: &str) -> Value {
    let now = jiff::Timestamp::now().to_string();
    let mut current = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    if !current.iter().any(|st| st.name == name) {
        current.push(k8s_openapi::api::core::v1::ContainerStatus {
            name: name.to_string(),
            ..Default::default()
        });
    }
    let statuses: Vec<Value> = current
        .iter()
        .map(|st| {
            let mut v = serde_json::to_value(st).unwrap_or(Value::Null);
            if st.name == name {
                let since = st.state.as_ref().and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.as_ref()).map_or_else(|| started(pod, &now), |t| t.0.to_string());
                v["restartCount"] = json!(st.restart_count.saturating_add(1));
                v["lastState"] = json!({"terminated": {"exitCode": code, "reason": "Error", "message": message, "startedAt": since, "finishedAt": now}});
                v["state"] = json!({"running": {"startedAt": now}});
            }
            v
        })
        .collect();
    json!({"containerStatuses": statuses})
}

/// When the pod started (its `startTime`), else `now`.
fn started(pod: &Pod, now: &str) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or_else(|| now.to_string(), |t| t.0.to_string())
}

/// The status of container `c` ended with `code`.
fn terminated(c: &Container, code: i32, message: &str, started: &str, now: &str) -> Value {
    let reason = if code == 0 { "Completed" } else { "Error" };
    json!({"name": c.name, "ready": false, "started": false, "restartCount": 0, "image": c.image.clone().unwrap_or_default(), "imageID": "",
           "state": {"terminated": {"exitCode": code, "reason": reason, "message": message, "startedAt": started, "finishedAt": now}}})
}

/// The pod's final status: every container terminated with `code`.
fn ended(pod: &Pod, code: i32, message: &str) -> Value {
    let now = jiff::Timestamp::now().to_string();
    let started = started(pod, &now);
    let statuses: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| terminated(c, code, message, &started, &now))
        .collect();
    let cond =
        |t: &str| json!({"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now});
    json!({
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "conditions": [cond("ContainersReady"), cond("Ready")],
        "containerStatuses": statuses,
    })
}

/// What to do with a running submitter now.
#[derive(Debug, PartialEq)]
enum Step {
    /// End the pod with this exit code and message.
    End(i32, String),
    /// Look again later.
    Poll,
}

/// One pass over a running submitter: submit if the job is not there yet, then end or keep following.
async fn step(jobs: &dyn RayJobsApi, sub: &Submission, known_id: Option<String>) -> (Step, Option<String>) {
    let endpoint = DashboardEndpoint::new(sub.address.clone());
    if let Some(why) = &sub.options.error {
        return (Step::End(1, why.clone()), None);
    }
    let refused = |e: DashboardError| (Step::End(1, format!("ray job submit: {e}")), None);
    let id = match known_id.or_else(|| sub.submission_id.clone()) {
        Some(id) => match jobs.job_info(&endpoint, &id).await {
            Ok(Some(_)) => id,
            Ok(None) => match submit(jobs, &endpoint, sub, Some(id)).await {
                Ok(id) => id,
                Err(e) => return refused(e),
            },
            Err(e) => return refused(e),
        },
        None => match submit(jobs, &endpoint, sub, None).await {
            Ok(id) => id,
            Err(e) => return refused(e),
        },
    };
    if !sub.follows {
        return (Step::End(0, format!("submitted {id}")), Some(id));
    }
    match jobs.job_info(&endpoint, &id).await {
        Ok(Some(d)) if matches!(d.status.as_str(), "SUCCEEDED" | "FAILED" | "STOPPED") => {
            (Step::End(0, format!("job {id} ended {}", d.status)), Some(id))
        }
        Ok(Some(_)) => (Step::Poll, Some(id)),
        Ok(None) => (
            Step::End(1, format!("ray job logs: job {id} does not exist")),
            Some(id),
        ),
        Err(e) => (Step::End(1, format!("ray job logs: {e}")), Some(id)),
    }
}

async fn submit(
    jobs: &dyn RayJobsApi,
    endpoint: &DashboardEndpoint,
    sub: &Submission,
    id: Option<String>,
) -> Result<String, DashboardError> {
    let o = &sub.options;
    let request = JobSubmitRequest {
        entrypoint: sub.entrypoint.clone(),
        submission_id: id,
        runtime_env: o.runtime_env.clone(),
        metadata: o.metadata.clone(),
        entrypoint_num_cpus: o.entrypoint_num_cpus,
        entrypoint_num_gpus: o.entrypoint_num_gpus,
        entrypoint_resources: o.entrypoint_resources.clone(),
    };
    jobs.submit_job(endpoint, &request).await.map(|r| r.submission_id)
}

/// Which submitter pods a loop plays, and how it reaches their dashboards.
#[derive(Clone, Debug, Default)]
pub enum Scope {
    /// Every pod, against the simulator's dashboards keyed by the address the pod dials (the embedded
    /// cluster, or a manager with simulated dashboards).
    #[default]
    Cluster,
    /// Only the pods bound to these nodes (a node agent's), against the heads the agent serves at
    /// their pod addresses (`http://<pod ip>:<port>`): a Service address is followed to the ready
    /// endpoint behind it.
    Nodes(HashSet<String>),
}

impl Scope {
    fn plays(&self, pod: &Pod) -> bool {
        match self {
            Scope::Cluster => true,
            Scope::Nodes(nodes) => pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| nodes.contains(n)),
        }
    }
}

struct Ctx {
    client: kube::Client,
    sim: Arc<RaySim>,
    scope: Scope,
    /// Pod uid -> the submission id its CLI got back (for a submit without `--submission-id`).
    ids: Mutex<HashMap<String, String>>,
}

#[derive(Debug, thiserror::Error)]
#[error("kube API: {0}")]
struct LoopError(#[from] kube::Error);

/// The submitter container this simulator plays in `pod`, if any: a Running pod, not being
/// deleted, in `scope`, that runs `ray job submit`.
fn playing(pod: &Pod, scope: &Scope) -> Option<(String, Submission)> {
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    parse(pod).filter(|_| running && pod.metadata.deletion_timestamp.is_none() && scope.plays(pod))
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, LoopError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let Some((container, mut sub)) = playing(&pod, &ctx.scope) else {
        ctx.ids.lock().unwrap_or_else(|p| p.into_inner()).remove(&uid);
        return Ok(Action::await_change());
    };
    if has_ended(&pod, &container) {
        return Ok(Action::await_change());
    }
    if let Some(wait) = restart_backoff_left(&pod, &container) {
        return Ok(Action::requeue(wait));
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    if let Some(head) = loopback_to_head(&ctx.client, &pod, &ns, &sub.address).await? {
        sub.address = head;
    }
    let known = ctx
        .ids
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&uid)
        .cloned();
    let (next, id) = match unresolved(&ctx.client, &ns, &sub.address).await? {
        Some(host) => (
            Step::End(
                1,
                format!(
                    "ray job submit: failed to connect to {}: could not resolve host {host}",
                    sub.address
                ),
            ),
            None,
        ),
        None => match dialled(&ctx.client, &ctx.scope, &ns, &sub.address).await? {
            Ok(address) => {
                step(
                    ctx.sim.as_ref(),
                    &Submission {
                        address,
                        ..sub.clone()
                    },
                    known,
                )
                .await
            }
            Err(why) => (
                Step::End(
                    1,
                    format!("ray job submit: failed to connect to {}: {why}", sub.address),
                ),
                None,
            ),
        },
    };
    match next {
        Step::Poll => {
            if let Some(id) = id {
                ctx.ids.lock().unwrap_or_else(|p| p.into_inner()).insert(uid, id);
            }
            Ok(Action::requeue(POLL))
        }
        Step::End(code, message) => {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            let status = ended_container(&pod, &container, code, &message);
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
            ctx.ids.lock().unwrap_or_else(|p| p.into_inner()).remove(&uid);
            Ok(Action::await_change())
        }
    }
}

/// Whether the submitter container already ended (a sidecar's pod goes on running).
fn has_ended(pod: &Pod, container: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

/// How long a restarted submitter still waits before it runs again (the kubelet's crash back-off,
/// shortened to [`RESTART_BACKOFF`]), so a submitter that always fails does not spin.
fn restart_backoff_left(pod: &Pod, container: &str) -> Option<Duration> {
    let st = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)?;
    let failed_at = st
        .last_state
        .as_ref()?
        .terminated
        .as_ref()?
        .finished_at
        .as_ref()?
        .0;
    let since =
        Duration::try_from(jiff::Timestamp::now().duration_since(failed_at)).unwrap_or(Duration::ZERO);
    RESTART_BACKOFF.checked_sub(since).filter(|d| !d.is_zero())
}

/// The simulated kubelet's back-off before a failed submitter container runs again.
const RESTART_BACKOFF: Duration = Duration::from_secs(1);

/// A submitter beside a Ray head (SidecarMode) talks to its own head on loopback: on the embedded
/// cluster that head's dashboard is the one its head Service names, as the Ray operator calls it.
async fn loopback_to_head(
    client: &kube::Client,
    pod: &Pod,
    ns: &str,
    address: &str,
) -> Result<Option<String>, kube::Error> {
    let loopback = ["http://127.0.0.1:", "http://localhost:"]
        .iter()
        .find_map(|p| address.strip_prefix(p));
    let (Some(port), Some(cluster)) = (
        loopback,
        pod.metadata.labels.as_ref().and_then(|l| l.get(c::LABEL_CLUSTER)),
    ) else {
        return Ok(None);
    };
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), ns);
    let Some(rc) = clusters.get_opt(cluster).await? else {
        return Ok(None);
    };
    let svc = crate::rayservice::cluster::names::head_service_name(cluster, &rc.spec);
    Ok(Some(format!("http://{svc}.{ns}.svc.cluster.local:{port}")))
}

/// Where the cluster's DNS would send a pod in `ns` asking for `host`: an IP or `localhost` as they
/// are, else the Service `name` in the namespace `name`, `name.ns`, `name.ns.svc` or
/// `name.ns.svc.<domain>` say (a pod's search path); `None` for a name no Service can answer.
pub fn service_for<'a>(host: &'a str, ns: &'a str) -> Option<Option<(&'a str, &'a str)>> {
    if host == "localhost" || host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return Some(None);
    }
    let parts: Vec<&str> = host.split('.').collect();
    match parts.as_slice() {
        [name] => Some(Some((name, ns))),
        [name, ns] => Some(Some((name, ns))),
        [name, ns, "svc", ..] => Some(Some((name, ns))),
        _ => None,
    }
}

/// The host of `address` (`http://host:port/...`, or `host:port`).
fn host_of(address: &str) -> &str {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if authority.starts_with('[') {
        return authority
            .split(']')
            .next()
            .map_or(authority, |h| &authority[..=h.len()]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// The host of `address` when the cluster's DNS would not resolve it (no such Service).
async fn unresolved(client: &kube::Client, ns: &str, address: &str) -> Result<Option<String>, kube::Error> {
    let host = host_of(address);
    match service_for(host, ns) {
        None => Ok(Some(host.to_owned())),
        Some(None) => Ok(None),
        Some(Some((name, ns))) => {
            let found = Api::<Service>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await?;
            Ok(found.is_none().then(|| host.to_owned()))
        }
    }
}

/// The port of `address` (`http://host:port/...`), else the scheme's.
fn port_of(address: &str) -> Option<i32> {
    let (scheme, rest) = address.split_once("://").unwrap_or(("http", address));
    let authority = rest.split('/').next().unwrap_or(rest);
    let after_host = authority.rsplit_once(']').map_or(authority, |(_, p)| p);
    match after_host.rsplit_once(':') {
        Some((_, port)) => port.parse().ok(),
        None => Some(if scheme == "https" { 443 } else { 80 }),
    }
}

/// The dashboard key a submitter's connection reaches: the address itself under [`Scope::Cluster`];
/// under [`Scope::Nodes`], a Service's address followed through the Service's port to a ready
/// endpoint of its EndpointSlices (`http://<endpoint ip>:<target port>`), as a pod's connection to
/// the Service's address ends there. `Err` says why the connection would fail: no such port on the
/// Service, or no ready endpoint behind it (refused, as kube-proxy rejects a Service without one).
async fn dialled(
    client: &kube::Client,
    scope: &Scope,
    ns: &str,
    address: &str,
) -> Result<Result<String, String>, kube::Error> {
    if matches!(scope, Scope::Cluster) {
        return Ok(Ok(address.to_owned()));
    }
    let Some(Some((name, svc_ns))) = service_for(host_of(address), ns) else {
        return Ok(Ok(address.to_owned()));
    };
    let Some(svc) = Api::<Service>::namespaced(client.clone(), svc_ns)
        .get_opt(name)
        .await?
    else {
        return Ok(Err(format!("could not resolve host {}", host_of(address))));
    };
    let port = port_of(address);
    let Some(svc_port) = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ps| ps.iter().find(|p| Some(p.port) == port))
    else {
        return Ok(Err(format!(
            "connection refused: Service {name} has no port {}",
            port.unwrap_or(0)
        )));
    };
    let selector = format!("kubernetes.io/service-name={name}");
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), svc_ns)
        .list(&ListParams::default().labels(&selector))
        .await?;
    for slice in &slices.items {
        let Some(target) = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name == svc_port.name)
            .and_then(|p| p.port)
        else {
            continue;
        };
        let ready = slice
            .endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false));
        if let Some(ip) = ready.filter_map(|e| e.addresses.first()).next() {
            let host = if ip.contains(':') {
                format!("[{ip}]")
            } else {
                ip.clone()
            };
            return Ok(Ok(format!("http://{host}:{target}")));
        }
    }
    Ok(Err(format!(
        "connection refused: Service {name} has no ready endpoint"
    )))
}

/// Runs until the pod stream ends (never, while the API is up): every submitter pod of the cluster.
pub async fn run(client: kube::Client, sim: Arc<RaySim>) {
    run_in(client, sim, Scope::Cluster).await
}

/// As [`run`], for the pods `scope` names.
pub async fn run_in(client: kube::Client, sim: Arc<RaySim>, scope: Scope) {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        sim,
        scope,
        ids: Mutex::new(HashMap::new()),
    });
    // As `Controller::new` watches, with the pods that run no submitter cached as their names only.
    let (reader, writer) = reflector::store();
    let pods = watcher(Api::<Pod>::all(client), watcher::Config::default())
        .modify(slim)
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(pods, reader)
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_millis(200)),
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
#[path = "submitter_tests.rs"]
mod tests;
