//! The process runtime: the node agent's way to run pods whose image it knows (`rayproject/ray:*`, see
//! `image.rs`) as real processes with the pinned Ray of a venv, each pod in a network namespace of its
//! own with an address from this instance's /24 of 10.244.0.0/16 (`net.rs`). Everything else stays
//! simulated. What it does and does not do: `src/embedded/README.md`.

pub mod cgroup;
mod container;
pub mod env;
pub mod hosts;
pub mod image;
pub mod incluster;
mod init;
pub mod launch;
pub mod net;
mod pod;
pub mod probe;
pub mod security;
pub mod status;
pub mod token;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher::{self, watcher};
use serde_json::json;
use tokio::sync::watch;

use super::SimError;
use crate::embedded::logs::{LogRequest, LogSource, LogStream};
use launch::PodDir;
use net::{Host, Subnet};

/// Where the runtime finds Ray and keeps its state.
/// Where `ip netns exec NAME` finds files to mount over `/etc` (iproute2's `NETNS_ETC_DIR`).
const NETNS_ETC: &str = "/etc/netns";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessConfig {
    /// A venv with Ray Serve (`scripts/install-ray.sh`): its `bin/` goes first on the pods' PATH.
    pub ray_venv: PathBuf,
    /// Lock files telling live instances from crashed ones (tmpfs: cleared with the namespaces on reboot).
    pub state_dir: PathBuf,
    /// Pods' files: their /tmp, emptyDir volumes and container output.
    pub work_dir: PathBuf,
    /// This machine's `quotagate` binary: containers of quotagate's own image run as it (`quotagate
    /// node-agent --runtime process`); `None`: they are simulated, as in the embedded cluster.
    pub quotagate: Option<PathBuf>,
    /// The API server's port on the host's loopback, given to the pods with the in-cluster
    /// environment and their volumes' files (`incluster.rs`); `None` in the embedded cluster.
    pub api_port: Option<u16>,
    /// Whether `rayproject/ray` containers run as processes (the default); `false` leaves them
    /// simulated (`quotagate node-agent --runtime auto`, which runs quotagate's own image only).
    pub ray: bool,
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            ray_venv: ".venv-ray".into(),
            state_dir: "/run/quotagate/pod-net".into(),
            work_dir: "/var/tmp/quotagate-pods".into(),
            quotagate: None,
            api_port: None,
            ray: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("--ray-venv {0}: no bin/ray there (run scripts/install-ray.sh)")]
    NoRay(PathBuf),
    #[error(
        "--ray-venv {0}: under /tmp, which every pod replaces with a /tmp of its own, so no pod could run Ray from there; install it elsewhere (scripts/install-ray.sh installs it in the checkout)"
    )]
    UnderTmp(PathBuf),
    #[error(
        "this quotagate binary, {0}, is under /tmp, which every pod replaces with a /tmp of its own, so no pod of quotagate's image could run it; build or copy it elsewhere"
    )]
    BinaryUnderTmp(PathBuf),
    #[error("the process runtime needs network namespaces (root and iproute2's `ip`): {0}")]
    Net(#[from] net::NetError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

struct Entry {
    key: String,
    host: u8,
    dir: PodDir,
    stop: watch::Sender<Option<Duration>>,
    /// The pod's `terminationGracePeriodSeconds`, for a pod removed without a graceful delete.
    grace: Duration,
    containers: BTreeMap<String, bool>,
}

pub struct ProcessRuntime {
    cfg: ProcessConfig,
    subnet: Subnet,
    work: PathBuf,
    host: Mutex<Option<Host>>,
    /// By pod UID.
    pods: Mutex<HashMap<String, Entry>>,
    image_env: Vec<(String, String)>,
    node: env::NodeCapacity,
    /// The pods' hosts files (Service names), kept current by the Service proxy.
    names: Arc<hosts::Names>,
    /// The pods' CPU groups, where the host has a cgroup v1 `cpu` controller.
    cpu: Option<cgroup::Cpu>,
    /// Addresses of this /24 lent to simulated pods (`lend_address`), by host number.
    lent: Mutex<BTreeSet<u8>>,
}

impl std::fmt::Debug for ProcessRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessRuntime")
            .field("cfg", &self.cfg)
            .field("subnet", &self.subnet.cidr())
            .finish_non_exhaustive()
    }
}

/// The host's CPUs and memory, what a `resourceFieldRef` to an unset limit reads.
fn node_capacity() -> env::NodeCapacity {
    let cpu_cores = std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1);
    let memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib.saturating_mul(1024));
    env::NodeCapacity {
        cpu_cores,
        memory_bytes,
    }
}

/// What this host lacks to run the process runtime, each item naming the thing and how to get it
/// (empty: nothing). Checked up front so that a user sees every missing piece at once.
pub fn missing(cfg: &ProcessConfig) -> Vec<String> {
    let mut out = Vec::new();
    let uid = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
    });
    if uid.as_deref() != Some("0") {
        out.push(
            "root: pods get network namespaces of their own, which only root can make (run it with sudo)"
                .into(),
        );
    }
    if let Err(e) = net::available() {
        out.push(format!(
            "iproute2's `ip netns` ({e}); on Debian or Ubuntu: apt-get install iproute2"
        ));
    }
    let nsenter = std::process::Command::new("nsenter").arg("--version").output();
    if nsenter.is_err() {
        out.push("util-linux's `nsenter`, which runs the pods' exec probes; on Debian or Ubuntu: apt-get install util-linux".into());
    }
    if !std::path::Path::new(security::setpriv()).is_absolute() {
        out.push("util-linux's `setpriv`, which gives the containers their securityContext's user and capabilities; on Debian or Ubuntu: apt-get install util-linux".into());
    }
    if cfg.ray && !cfg.ray_venv.join("bin/ray").exists() && cfg.quotagate.is_none() {
        out.push(format!(
            "Ray Serve in a venv at {} (run scripts/install-ray.sh from the repository)",
            cfg.ray_venv.display()
        ));
    }
    out
}

/// Refuses a quotagate binary that pods of quotagate's image could not see: one under the host's
/// /tmp, which each pod's own /tmp hides (`launch.rs`).
pub fn seen_by_pods(bin: &std::path::Path) -> Result<(), ProcessError> {
    let seen = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    if seen.starts_with("/tmp") {
        return Err(ProcessError::BinaryUnderTmp(bin.to_path_buf()));
    }
    Ok(())
}

impl ProcessRuntime {
    /// Checks the venv, claims a pod network (removing what crashed runs left) and brings it up.
    pub fn start(cfg: ProcessConfig) -> Result<Arc<ProcessRuntime>, ProcessError> {
        let venv = std::path::absolute(&cfg.ray_venv).map_err(|source| ProcessError::Io {
            path: cfg.ray_venv.clone(),
            source,
        })?;
        if cfg.ray && !venv.join("bin/ray").exists() {
            if cfg.quotagate.is_none() {
                return Err(ProcessError::NoRay(cfg.ray_venv.clone()));
            }
            tracing::warn!(ray = %venv.display(), "process runtime: no Ray there; rayproject/ray containers will fail to start (run scripts/install-ray.sh)");
        }
        // A pod's processes see their own /tmp (`launch.rs`), so a Ray kept under the host's is out
        // of their sight: the head would start and never answer its probes.
        let seen = std::fs::canonicalize(&venv).unwrap_or_else(|_| venv.clone());
        if cfg.ray && seen.starts_with("/tmp") {
            return Err(ProcessError::UnderTmp(cfg.ray_venv.clone()));
        }
        if let Some(bin) = &cfg.quotagate {
            seen_by_pods(bin)?;
        }
        net::available()?;
        let host = Host::claim(&cfg.state_dir)?;
        let subnet = host.subnet;
        // This /24's lock is ours: any files under its directory are a crashed run's.
        let work = cfg.work_dir.join(subnet.block.to_string());
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|source| ProcessError::Io {
            path: work.clone(),
            source,
        })?;
        let path = format!(
            "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            venv.join("bin").display()
        );
        // The rayproject/ray image's own variables, as a container runtime sets them from the image.
        let image_env = vec![
            ("PATH".into(), path),
            ("HOME".into(), "/tmp".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("VIRTUAL_ENV".into(), venv.display().to_string()),
        ];
        let names = Arc::new(hosts::Names::new(NETNS_ETC));
        names.remove_leftovers(|n| n.starts_with(&subnet.netns_prefix()));
        tracing::info!(pod_network = %subnet.cidr(), bridge = %subnet.bridge(), ray = %venv.display(), "process runtime: rayproject/ray pods run as processes");
        let node = node_capacity();
        let cpu = cgroup::Cpu::claim(subnet.block, node.cpu_cores);
        Ok(Arc::new(ProcessRuntime {
            cfg,
            subnet,
            work,
            host: Mutex::new(Some(host)),
            pods: Mutex::new(HashMap::new()),
            image_env,
            node,
            names,
            cpu,
            lent: Mutex::new(BTreeSet::new()),
        }))
    }

    /// This instance's pod network, e.g. `10.244.128.0/24`.
    pub fn pod_cidr(&self) -> String {
        self.subnet.cidr()
    }

    /// This instance's /24 (its bridge, its block index).
    pub fn subnet(&self) -> Subnet {
        self.subnet
    }

    /// The pods' hosts files, which the Service proxy keeps current; also the host side's resolver.
    pub fn names(&self) -> Arc<hosts::Names> {
        self.names.clone()
    }

    /// Whether this runtime runs `pod` (one of its containers has a known image).
    pub fn runs(&self, pod: &Pod) -> bool {
        pod.spec
            .as_ref()
            .is_some_and(|s| image::has_process(&s.containers, self.cfg.quotagate.is_some(), self.cfg.ray))
    }

    /// An address of this pod network for a pod the node agent simulates but others must reach
    /// (a simulated Ray head's dashboard): added to the bridge, so the host and every process-run
    /// pod reach whatever listens there. `None` when the /24 is full or `ip` refused.
    pub fn lend_address(&self) -> Option<std::net::Ipv4Addr> {
        let host = {
            let mut lent = self.lent.lock().unwrap_or_else(PoisonError::into_inner);
            let host = self.free_host_besides(&lent)?;
            lent.insert(host);
            host
        };
        let ip = self.subnet.pod_ip(host);
        match net::ip(&["addr", "add", &format!("{ip}/32"), "dev", &self.subnet.bridge()]) {
            Ok(_) => Some(ip),
            Err(e) => {
                tracing::warn!(%ip, error = %e, "process runtime: an address for a simulated pod could not be added to the bridge");
                self.lent
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&host);
                None
            }
        }
    }

    /// Gives back an address `lend_address` lent.
    pub fn return_address(&self, ip: std::net::Ipv4Addr) {
        let Some(host) = (net::FIRST_HOST..=net::LAST_HOST).find(|h| self.subnet.pod_ip(*h) == ip) else {
            return;
        };
        if self
            .lent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&host)
        {
            let _ = net::ip(&["addr", "del", &format!("{ip}/32"), "dev", &self.subnet.bridge()]);
        }
    }

    /// Network namespace names of the pods running now (by `namespace/name`), for tests and logs.
    pub fn namespaces(&self) -> BTreeMap<String, String> {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        pods.values()
            .map(|e| (e.key.clone(), self.subnet.netns(e.host)))
            .collect()
    }

    fn free_host(&self) -> Option<u8> {
        let lent = self.lent.lock().unwrap_or_else(PoisonError::into_inner).clone();
        self.free_host_besides(&lent)
    }

    /// A host number no pod and no lent address has.
    fn free_host_besides(&self, lent: &BTreeSet<u8>) -> Option<u8> {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        let used: BTreeSet<u8> = pods
            .values()
            .map(|e| e.host)
            .chain(lent.iter().copied())
            .collect();
        (net::FIRST_HOST..=net::LAST_HOST).find(|h| !used.contains(h))
    }

    /// The node agent's reconcile for a pod this runtime runs (not gated).
    pub async fn reconcile(
        self: &Arc<Self>,
        pod: Arc<Pod>,
        client: &kube::Client,
        node_name: &str,
    ) -> Result<Action, SimError> {
        let meta = &pod.metadata;
        let (ns, name, uid) = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let running = {
            let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            pods.get(&uid).map(|e| e.stop.clone())
        };
        if meta.deletion_timestamp.is_some() {
            if let Some(stop) = running {
                // The grace the delete asked for, else the pod's own.
                let grace = meta
                    .deletion_grace_period_seconds
                    .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(30);
                stop.send_if_modified(|s| {
                    s.is_none()
                        .then(|| *s = Some(Duration::from_secs(grace)))
                        .is_some()
                });
                return Ok(Action::await_change());
            }
            if meta.finalizers.as_ref().is_none_or(Vec::is_empty) {
                return match api
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
                };
            }
            return Ok(Action::await_change());
        }
        if running.is_some() {
            return Ok(Action::await_change());
        }
        match pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending")
        {
            "Pending" => self.launch(pod.clone(), client.clone(), node_name).await,
            "Running" => {
                // Ours, but no process of this instance runs it: the quotagate that started it is gone.
                let status = json!({"status": {"phase": "Failed", "reason": "ProcessLost",
                    "message": "the process runtime that ran this pod's containers is gone (quotagate restarted); its processes were stopped"}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await?;
                Ok(Action::await_change())
            }
            _ => Ok(Action::await_change()),
        }
    }

    async fn launch(
        self: &Arc<Self>,
        pod: Arc<Pod>,
        client: kube::Client,
        node_name: &str,
    ) -> Result<Action, SimError> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let Some(host) = self.free_host() else {
            tracing::warn!(pod_network = %self.subnet.cidr(), "process runtime: no free pod address; the pod waits");
            return Ok(Action::requeue(Duration::from_secs(5)));
        };
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let short: String = uid.chars().filter(char::is_ascii_alphanumeric).take(12).collect();
        let dir = PodDir(self.work.join(format!(
            "{}_{}_{short}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        )));
        let (stop, stop_rx) = watch::channel(None);
        {
            let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            let grace = pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(30);
            let entry = Entry {
                key: key.clone(),
                host,
                dir: dir.clone(),
                stop,
                grace: Duration::from_secs(grace),
                containers: pod::process_containers(&pod),
            };
            pods.insert(uid.clone(), entry);
        }
        let cgroup = self
            .cpu
            .as_ref()
            .and_then(|c| c.pod(&format!("pod{short}"), &pod));
        let ctx = pod::PodCtx {
            client: client.clone(),
            subnet: self.subnet,
            host,
            dir: dir.clone(),
            node_name: node_name.into(),
            image_env: self.image_env.clone(),
            node: self.node,
            names: self.names.clone(),
            cgroup,
            quotagate: self.cfg.quotagate.clone(),
            api_port: self.cfg.api_port,
        };
        let rt = self.clone();
        tokio::spawn(async move {
            let mut deleted = stop_rx.clone();
            let ended = pod::supervise(ctx, (*pod).clone(), stop_rx).await;
            tracing::info!(pod = %key, ?ended, "process runtime: pod ended");
            // A pod that ended on its own keeps its entry (its address, its logs) until it is deleted.
            let _ = deleted.wait_for(Option::is_some).await;
            rt.pods
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&uid);
            let _ = std::fs::remove_dir_all(&dir.0);
            // Deleted: now that its processes are gone, the pod object goes too.
            let api: Api<Pod> = Api::namespaced(client, pod.metadata.namespace.as_deref().unwrap_or(""));
            let name = pod.metadata.name.clone().unwrap_or_default();
            if let Ok(Some(p)) = api.get_opt(&name).await
                && p.metadata.uid.as_deref() == Some(uid.as_str())
                && p.metadata.deletion_timestamp.is_some()
                && p.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)
            {
                let _ = api
                    .delete(
                        &name,
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        },
                    )
                    .await;
            }
        });
        Ok(Action::await_change())
    }

    /// Stops the processes of pods whose object is gone without a graceful delete the node agent saw
    /// (removed by the garbage collector or with their namespace, or while a watch was down).
    pub async fn follow_removals(self: Arc<Self>, client: kube::Client) {
        let mut events = std::pin::pin!(watcher(Api::<Pod>::all(client), watcher::Config::default()));
        let mut listed: HashSet<String> = HashSet::new();
        while let Some(e) = events.next().await {
            let gone: Vec<String> = match e {
                Ok(watcher::Event::Delete(p)) => p.metadata.uid.into_iter().collect(),
                Ok(watcher::Event::Init) => {
                    listed.clear();
                    continue;
                }
                Ok(watcher::Event::InitApply(p)) => {
                    listed.extend(p.metadata.uid);
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
                    pods.keys().filter(|u| !listed.contains(*u)).cloned().collect()
                }
                Ok(watcher::Event::Apply(_)) | Err(_) => continue,
            };
            let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            for e in gone.iter().filter_map(|u| pods.get(u)) {
                tracing::info!(pod = %e.key, "process runtime: the pod was removed; stopping its processes");
                e.stop
                    .send_if_modified(|s| s.is_none().then(|| *s = Some(e.grace)).is_some());
            }
        }
    }

    /// Stops every pod (SIGTERM, SIGKILL after at most `grace`) and removes the pod network.
    pub async fn shutdown(&self, grace: Duration) {
        let stops: Vec<_> = {
            let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            pods.values().map(|e| e.stop.clone()).collect()
        };
        for s in &stops {
            s.send_if_modified(|v| v.is_none().then(|| *v = Some(grace)).is_some());
        }
        // The supervisors remove their entries once their processes are gone.
        let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(5);
        while !self
            .pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.release();
    }

    /// Kills whatever still runs in this instance's namespaces and removes them and the bridge.
    fn release(&self) {
        let host = self.host.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(h) = host {
            h.release();
            if let Some(c) = &self.cpu {
                c.release();
            }
            self.names
                .remove_leftovers(|n| n.starts_with(&self.subnet.netns_prefix()));
            let _ = std::fs::remove_dir_all(&self.work);
            tracing::info!(pod_network = %self.subnet.cidr(), "process runtime: pod network removed");
        }
    }
}

impl Drop for ProcessRuntime {
    fn drop(&mut self) {
        self.release();
    }
}

impl LogSource for ProcessRuntime {
    fn logs(&self, req: &LogRequest) -> Option<LogStream> {
        let key = format!("{}/{}", req.namespace, req.pod);
        let path = {
            let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            let e = pods.values().find(|e| e.key == key)?;
            if !e.containers.get(&req.container).copied().unwrap_or(false) {
                return None;
            }
            e.dir.log(&req.container)
        };
        let output = std::fs::read(&path).unwrap_or_default();
        let body = crate::embedded::logs::tail(&output, req);
        Some(Box::pin(futures::stream::iter([body])))
    }
}
