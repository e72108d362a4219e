//! One pod's supervisor, the kubelet's part for a pod the process runtime runs: its network namespace,
//! its files, its containers (Ray ones as processes, the rest simulated as running), and its status,
//! written whenever what it shows changes. It ends when every process container has ended for good
//! or after the pod asked its containers to stop; the namespace goes with it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::container::{self, Launch};
use super::env::{self, Addresses, NodeCapacity, Sources};
use super::image::{self, Runs};
use super::incluster;
use super::init::{self, InitCtx, InitResult};
use super::launch::{self, PodDir};
use super::net::Subnet;
use super::probe;
use super::security;
use super::status::{self, State, View};

/// What a supervisor needs besides the pod.
#[derive(Clone)]
pub struct PodCtx {
    pub client: kube::Client,
    pub subnet: Subnet,
    pub host: u8,
    pub dir: PodDir,
    pub node_name: String,
    /// The image's own environment (PATH with the pinned Ray first, HOME, LANG).
    pub image_env: Vec<(String, String)>,
    pub node: NodeCapacity,
    pub names: std::sync::Arc<super::hosts::Names>,
    /// The pod's CPU group (`cgroup.rs`), when the host has one to give.
    pub cgroup: Option<std::path::PathBuf>,
    /// This machine's `quotagate` binary, which runs containers of quotagate's image (`None`: those
    /// are simulated).
    pub quotagate: Option<std::path::PathBuf>,
    /// The API server's port on the host's loopback, served at `127.0.0.1` in the pod's namespace with
    /// the in-cluster environment (`None`: the embedded cluster, whose pods do not call it).
    pub api_port: Option<u16>,
}

/// Aborts a task when dropped (the pod's API forwarder ends with its supervisor).
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            t.abort();
        }
    }
}

/// How a supervisor ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The pod asked its containers to stop (it is being deleted, or the runtime shuts down).
    Stopped,
    /// Every process container ended and will not restart.
    Finished,
    /// The pod could not start (its network); the status says why.
    Failed,
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

async fn write(api: &Api<Pod>, name: &str, status: Value) {
    if let Err(e) = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
    {
        tracing::debug!(pod = name, error = %e, "process runtime: status not written");
    }
}

/// The ConfigMaps and Secrets the containers' environments name (missing ones are left out; the
/// environment then says which is missing).
async fn sources(api_cm: &Api<ConfigMap>, api_s: &Api<Secret>, pod: &Pod) -> Sources {
    let mut out = Sources::default();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        for (secret, name) in env::referenced(c) {
            if secret {
                if let Ok(Some(s)) = api_s.get_opt(&name).await {
                    let mut data = Sources::decode_secret(&s.data.unwrap_or_default());
                    data.extend(s.string_data.unwrap_or_default());
                    out.secrets.insert(name, data);
                }
            } else if let Ok(Some(cm)) = api_cm.get_opt(&name).await {
                out.config_maps.insert(name, cm.data.unwrap_or_default());
            }
        }
    }
    out
}

/// A Warning event on the pod from this node's kubelet part (written once; a failure is logged).
async fn warn_event(client: &kube::Client, pod: &Pod, reason: &str, message: &str) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let now = crate::embedded::meta::now_rfc3339();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
            "uid": pod.metadata.uid},
        "reason": reason, "message": message, "type": "Warning", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now,
        "source": {"component": "kubelet", "host": pod.spec.as_ref().and_then(|s| s.node_name.clone())},
    });
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    match serde_json::from_value(event) {
        Ok(e) => {
            if let Err(err) = api.create(&kube::api::PostParams::default(), &e).await {
                tracing::warn!(pod = name, error = %err, %message, "process runtime: event not written");
            }
        }
        Err(err) => tracing::warn!(pod = name, error = %err, "process runtime: event not made"),
    }
    tracing::info!(pod = name, reason, message, "process runtime: pod event");
}

/// The pod's files. Its /tmp is the image's (mode 1777) and its `emptyDir` volumes are 0777, as a
/// kubelet makes them, so that a container running as another user than root can write there.
fn make_dirs(pod: &Pod, dir: &PodDir) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir.tmp())?;
    std::fs::set_permissions(dir.tmp(), std::fs::Permissions::from_mode(0o1777))?;
    std::fs::create_dir_all(dir.0.join("logs"))?;
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if v.empty_dir.is_some() {
            std::fs::create_dir_all(dir.volume(&v.name))?;
            std::fs::set_permissions(dir.volume(&v.name), std::fs::Permissions::from_mode(0o777))?;
        }
    }
    Ok(())
}

pub async fn supervise(ctx: PodCtx, pod: Pod, stop: watch::Receiver<Option<Duration>>) -> Ended {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let started = crate::embedded::meta::now_rfc3339();
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let host_ip = ctx.subnet.gateway().to_string();
    let pod_ip = ctx.subnet.pod_ip(ctx.host).to_string();

    let (subnet, host, dir) = (ctx.subnet, ctx.host, ctx.dir.clone());
    let setup = tokio::task::spawn_blocking({
        let (pod, names, ns, name) = (pod.clone(), ctx.names.clone(), ns.clone(), name.clone());
        move || -> Result<(), String> {
            make_dirs(&pod, &dir).map_err(|e| format!("{}: {e}", dir.0.display()))?;
            subnet.add_pod(host).map_err(|e| e.to_string())?;
            // Before any process starts: `ip netns exec` mounts the file as the pod's /etc/hosts.
            names
                .add_pod(&subnet.netns(host), &ns, &name, subnet.pod_ip(host))
                .map_err(|e| format!("the pod's hosts file: {e}"))
        }
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    if let Err(message) = setup {
        tracing::warn!(pod = %key(&pod), %message, "process runtime: the pod's network could not be made");
        let mut s = status::pod_status(&[], &policy, "", &host_ip, &started);
        s["phase"] = json!("Failed");
        s["reason"] = json!("NetworkNotReady");
        s["message"] = json!(format!("process runtime: {message}"));
        write(&api, &name, s).await;
        return Ended::Failed;
    }
    if spec.node_name.as_deref().is_none_or(str::is_empty) {
        let _ = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"nodeName": ctx.node_name}})),
            )
            .await;
    }

    // The volumes' files and the API server inside the pod, before any container starts.
    let mut forward = AbortOnDrop(None);
    let mut refresh = AbortOnDrop(None);
    if ctx.api_port.is_some() || ctx.quotagate.is_some() {
        let mounted = incluster::write_volumes(&ctx.client, &pod, &ctx.dir)
            .await
            .map(|tokens| refresh.0 = incluster::refresh_tokens(&ctx.client, &pod, tokens))
            .map_err(|e| ("FailedMount", e.to_string()));
        let forwarded = match (mounted, ctx.api_port) {
            (Ok(()), Some(port)) => incluster::forward_api(&subnet.netns(host), port)
                .map(|t| forward.0 = Some(t))
                .map_err(|e| {
                    (
                        "NetworkNotReady",
                        format!("the API server at 127.0.0.1:{port} in the pod: {e}"),
                    )
                }),
            (r, _) => r,
        };
        if let Err((reason, message)) = forwarded {
            tracing::warn!(pod = %key(&pod), %message, "process runtime: the pod cannot start");
            let mut s = status::pod_status(&[], &policy, &pod_ip, &host_ip, &started);
            s["phase"] = json!("Failed");
            s["reason"] = json!(reason);
            s["message"] = json!(format!("process runtime: {message}"));
            write(&api, &name, s).await;
            let mut stop = stop.clone();
            let _ = stop.wait_for(Option::is_some).await;
            teardown(&ctx).await;
            return Ended::Stopped;
        }
    }
    let src = sources(
        &Api::namespaced(ctx.client.clone(), &ns),
        &Api::namespaced(ctx.client.clone(), &ns),
        &pod,
    )
    .await;
    let addrs = Addresses {
        pod_ip: pod_ip.clone(),
        host_ip: host_ip.clone(),
        node_name: ctx.node_name.clone(),
    };
    let grace = Duration::from_secs(
        spec.termination_grace_period_seconds
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(30),
    );
    let init = InitCtx {
        pod: &pod,
        netns: subnet.netns(host),
        dir: &ctx.dir,
        image_env: &ctx.image_env,
        addrs: &addrs,
        sources: &src,
        node: ctx.node,
        policy: &policy,
        grace,
        key: key(&pod),
        cgroup: ctx.cgroup.clone(),
    };
    // While the init containers run, the pod shows them, and its containers waiting for them.
    let mut inits = init::initial_views(&pod, &started);
    let waiting: Vec<View> = spec
        .containers
        .iter()
        .map(|c| status::initializing(&c.name, c.image.as_deref().unwrap_or("")))
        .collect();
    let (itx, mut irx) = mpsc::unbounded_channel::<Vec<View>>();
    let outcome = {
        let run = init::run(init, stop.clone(), itx);
        tokio::pin!(run);
        if !inits.is_empty() {
            write(
                &api,
                &name,
                status::pod_status_with_inits(&waiting, &inits, &policy, &pod_ip, &host_ip, &started),
            )
            .await;
        }
        loop {
            tokio::select! {
                r = &mut run => break r,
                Some(v) = irx.recv() => {
                    inits = v;
                    write(&api, &name, status::pod_status_with_inits(&waiting, &inits, &policy, &pod_ip, &host_ip, &started)).await;
                }
            }
        }
    };
    while let Ok(v) = irx.try_recv() {
        inits = v;
    }
    match outcome {
        InitResult::Done => {}
        InitResult::Stopped => {
            teardown(&ctx).await;
            return Ended::Stopped;
        }
        InitResult::Failed(message) => {
            tracing::info!(pod = %key(&pod), %message, "process runtime: an init container failed");
            let mut s = status::pod_status_with_inits(&waiting, &inits, &policy, &pod_ip, &host_ip, &started);
            s["phase"] = json!("Failed");
            s["reason"] = json!("InitContainerFailed");
            s["message"] = json!(message);
            write(&api, &name, s).await;
            // A failed pod keeps its address until it is deleted, as one that ran and ended.
            let mut stop = stop.clone();
            let _ = stop.wait_for(Option::is_some).await;
            teardown(&ctx).await;
            return Ended::Stopped;
        }
    }
    let mut views = Vec::new();
    let mut launches = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let img = c.image.clone().unwrap_or_default();
        let runs = image::runs(c);
        if runs == Runs::Simulated || (runs == Runs::Quotagate && ctx.quotagate.is_none()) {
            views.push(View {
                ready: true,
                started: true,
                ..View::new(
                    &c.name,
                    &img,
                    State::Running {
                        started: started.clone(),
                    },
                )
            });
            continue;
        }
        match env::resolve(&pod, i, &ctx.image_env, &addrs, &src, ctx.node) {
            Err(e) => views.push(View::new(
                &c.name,
                &img,
                State::waiting("CreateContainerConfigError", e.to_string()),
            )),
            Ok(mut vars) => {
                if let Some(port) = ctx.api_port {
                    // What a kubelet sets from the `kubernetes` Service; here the API server's own
                    // address, forwarded into the pod.
                    vars.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
                    vars.push(("KUBERNETES_SERVICE_PORT".into(), port.to_string()));
                    vars.push(("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.to_string()));
                }
                let mut command = env::command_line(c, &vars);
                if let (Runs::Quotagate, Some(bin)) = (runs, &ctx.quotagate) {
                    // The image's entrypoint is the binary: `command` replaces it, `args` follow it.
                    let bin = bin.to_string_lossy().into_owned();
                    if c.command.as_ref().is_none_or(Vec::is_empty) {
                        command.insert(0, bin);
                    } else if let Some(first) = command.first_mut() {
                        *first = bin;
                    }
                }
                if command.is_empty() {
                    views.push(View::new(
                        &c.name,
                        &img,
                        State::waiting(
                            "CreateContainerError",
                            "the container has no command and the image none either",
                        ),
                    ));
                    continue;
                }
                let workdir = c
                    .working_dir
                    .clone()
                    .filter(|w| !w.is_empty())
                    .unwrap_or_else(|| "/tmp".into());
                let binds = launch::binds(&spec, c, &ctx.dir);
                let (command, read_only) = match security::secure(&pod, c, &binds, command) {
                    Ok(v) => v,
                    Err(message) => {
                        views.push(View::new(
                            &c.name,
                            &img,
                            State::waiting("CreateContainerConfigError", message),
                        ));
                        continue;
                    }
                };
                let unapplied = security::not_enforced(&pod, c);
                if !unapplied.is_empty() {
                    warn_event(
                        &ctx.client,
                        &pod,
                        "SecurityContextNotEnforced",
                        &format!(
                            "container {}: the process runtime does not apply {}",
                            c.name,
                            unapplied.join("; ")
                        ),
                    )
                    .await;
                }
                let argv = launch::argv(
                    &subnet.netns(host),
                    &ctx.dir,
                    &binds,
                    &read_only,
                    &workdir,
                    &command,
                );
                views.push(View::new(&c.name, &img, State::waiting("ContainerCreating", "")));
                launches.push(Launch {
                    index: i,
                    name: c.name.clone(),
                    image: img,
                    argv,
                    env: vars,
                    log: ctx.dir.log(&c.name),
                    pod_ip: pod_ip.clone(),
                    pod: key(&pod),
                    restart_policy: policy.clone(),
                    grace,
                    startup: c.startup_probe.as_ref().map(|p| probe::spec(p, c)),
                    readiness: c.readiness_probe.as_ref().map(|p| probe::spec(p, c)),
                    liveness: c.liveness_probe.as_ref().map(|p| probe::spec(p, c)),
                    cgroup: ctx.cgroup.clone(),
                });
            }
        }
    }
    write(
        &api,
        &name,
        status::pod_status_with_inits(&views, &inits, &policy, &pod_ip, &host_ip, &started),
    )
    .await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for l in launches {
        tasks.push(tokio::spawn(container::run(l, tx.clone(), stop.clone())));
    }
    drop(tx);
    let mut stop = stop;
    let mut stopping = stop.borrow().is_some();
    let mut open = !tasks.is_empty();
    let mut last: Option<Value> = None;
    loop {
        // Stopped, or every process container ended for good (a pod with none waits for its stop).
        if !open && (stopping || !tasks.is_empty()) {
            break;
        }
        tokio::select! {
            got = rx.recv(), if open => match got {
                Some((i, v)) => {
                    if let Some(slot) = views.get_mut(i) {
                        *slot = v;
                    }
                }
                None => open = false,
            },
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_err() {
                    tracing::debug!(pod = %key(&pod), "process runtime: the pod's owner is gone; stopping it");
                }
            }
        }
        if stopping {
            let now = crate::embedded::meta::now_rfc3339();
            for (v, c) in views.iter_mut().zip(&spec.containers) {
                let simulated = image::runs(c) == Runs::Simulated
                    || (image::runs(c) == Runs::Quotagate && ctx.quotagate.is_none());
                if simulated && matches!(v.state, State::Running { .. }) {
                    v.ready = false;
                    v.state = State::Terminated {
                        code: 0,
                        reason: "Completed".into(),
                        started: started.clone(),
                        finished: now.clone(),
                    };
                }
            }
        }
        let s = status::pod_status_with_inits(&views, &inits, &policy, &pod_ip, &host_ip, &started);
        if last.as_ref() != Some(&s) {
            write(&api, &name, s.clone()).await;
            last = Some(s);
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    teardown(&ctx).await;
    // The last container can end on the same stop before this loop saw it.
    if stopping || stop.borrow().is_some() {
        Ended::Stopped
    } else {
        Ended::Finished
    }
}

/// Removes the pod's namespace (killing what is left in it) and its hosts file.
async fn teardown(ctx: &PodCtx) {
    let (subnet, host, names, cgroup) = (ctx.subnet, ctx.host, ctx.names.clone(), ctx.cgroup.clone());
    let _ = tokio::task::spawn_blocking(move || {
        subnet.remove_pod(host);
        names.remove_pod(&subnet.netns(host));
        if let Some(dir) = cgroup {
            super::cgroup::remove(&dir);
        }
    })
    .await;
}

/// The names of a pod's containers by how they run, for the runtime's log lookup.
pub fn process_containers(pod: &Pod) -> BTreeMap<String, bool> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| (c.name.clone(), image::runs(c) != Runs::Simulated))
        .collect()
}
