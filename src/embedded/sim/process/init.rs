//! A pod's init containers, as the kubelet runs them: in order, each to a successful exit before the
//! next, before any container starts (KubeRay's `wait-gcs-ready` on workers polls the head Service's
//! name until the head's GCS answers). A failed one runs again with the kubelet's back-off, unless the
//! pod's `restartPolicy` is `Never` (then the pod fails). Init containers of other images count as done
//! at once, as simulated containers do. Each change of their states goes out as the pod's
//! `initContainerStatuses` (waiting `PodInitializing` until its turn, then its process's states).

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::mpsc;

use super::container::{self, Launch, Stop};
use super::env::{self, Addresses, NodeCapacity, Sources};
use super::image::{self, Runs};
use super::launch::{self, PodDir};
use super::status::{self, State, View};

/// What the pod's containers need to know about how its init containers went.
pub enum InitResult {
    Done,
    /// The pod was told to stop meanwhile.
    Stopped,
    /// Failed for good: the message for the pod's status.
    Failed(String),
}

pub struct InitCtx<'a> {
    pub pod: &'a Pod,
    pub netns: String,
    pub dir: &'a PodDir,
    pub image_env: &'a [(String, String)],
    pub addrs: &'a Addresses,
    pub sources: &'a Sources,
    pub node: NodeCapacity,
    pub policy: &'a str,
    pub grace: std::time::Duration,
    pub key: String,
    pub cgroup: Option<std::path::PathBuf>,
}

/// The environment of init container `c`: resolved as a container's (`env::resolve` reads the pod's
/// containers, so it is given a pod whose only container is this one).
fn environment(x: &InitCtx<'_>, c: &Container) -> Result<Vec<(String, String)>, String> {
    let mut as_main = x.pod.clone();
    if let Some(spec) = as_main.spec.as_mut() {
        spec.containers = vec![c.clone()];
    }
    env::resolve(&as_main, 0, x.image_env, x.addrs, x.sources, x.node)
        .map_err(|e| format!("init container {:?}: {e}", c.name))
}

/// The init containers' views before any runs: a simulated one done at once, the rest waiting.
pub fn initial_views(pod: &Pod, now: &str) -> Vec<View> {
    let inits = pod.spec.iter().flat_map(|s| s.init_containers.iter().flatten());
    inits
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            if image::runs(c) == Runs::Simulated {
                View::new(
                    &c.name,
                    &image,
                    State::Terminated {
                        code: 0,
                        reason: "Completed".into(),
                        started: now.into(),
                        finished: now.into(),
                    },
                )
            } else {
                status::initializing(&c.name, &image)
            }
        })
        .collect()
}

/// Runs the init containers in order; `views` gets every change of their states.
pub async fn run(x: InitCtx<'_>, stop: Stop, views: mpsc::UnboundedSender<Vec<View>>) -> InitResult {
    let inits: Vec<Container> = x
        .pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .cloned()
        .collect();
    let spec = x.pod.spec.clone().unwrap_or_default();
    let mut shown = initial_views(x.pod, &crate::embedded::meta::now_rfc3339());
    for (i, c) in inits.iter().enumerate() {
        if image::runs(c) == Runs::Simulated {
            continue;
        }
        let vars = match environment(&x, c) {
            Ok(v) => v,
            Err(message) => return InitResult::Failed(message),
        };
        let command = env::command_line(c, &vars);
        if command.is_empty() {
            return InitResult::Failed(format!(
                "init container {:?} has no command and the image none either",
                c.name
            ));
        }
        let binds = launch::binds(&spec, c, x.dir);
        let (command, read_only) = match super::security::secure(x.pod, c, &binds, command) {
            Ok(v) => v,
            Err(message) => return InitResult::Failed(message),
        };
        let workdir = c
            .working_dir
            .clone()
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| "/tmp".into());
        let l = Launch {
            index: i,
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            argv: launch::argv(&x.netns, x.dir, &binds, &read_only, &workdir, &command),
            env: vars,
            log: x.dir.log(&c.name),
            pod_ip: x.addrs.pod_ip.clone(),
            pod: x.key.clone(),
            // Init containers run until they succeed, whatever the pod's policy, except under Never.
            restart_policy: if x.policy == "Never" {
                "Never".into()
            } else {
                "OnFailure".into()
            },
            grace: x.grace,
            startup: None,
            readiness: None,
            liveness: None,
            cgroup: x.cgroup.clone(),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(container::run(l, tx, stop.clone()));
        let mut last = None;
        while let Some((_, v)) = rx.recv().await {
            last = Some(v.state.clone());
            if let Some(slot) = shown.get_mut(i) {
                *slot = v;
                let _ = views.send(shown.clone());
            }
        }
        let _ = task.await;
        if stop.borrow().is_some() {
            return InitResult::Stopped;
        }
        match last {
            Some(State::Terminated { code: 0, .. }) => {}
            Some(State::Terminated { code, .. }) => {
                return InitResult::Failed(format!("init container {:?} exited with {code}", c.name));
            }
            other => {
                return InitResult::Failed(format!(
                    "init container {:?} did not complete: {other:?}",
                    c.name
                ));
            }
        }
    }
    InitResult::Done
}
