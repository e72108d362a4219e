//! CPU for process-run pods as the kubelet divides it, with the cgroup v1 `cpu` controller: one group
//! per instance (`quotagate-<N>`, with the node's CPUs as its shares, as the kubelet's `kubepods`), one
//! group per pod inside it with `cpu.shares` from the sum of its containers' CPU requests and, when
//! every container has a CPU limit, a CFS quota of their sum (`MilliCPUToShares`, `MilliCPUToQuota`).
//! So a starting Ray head cannot take more than its limit from the one already serving.
//!
//! Where the host has no writable cgroup v1 `cpu` hierarchy, nothing is divided (as before) and the
//! runtime says so once. Memory limits are not enforced.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use crate::api::quantity::Quantity;

const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";
/// The CFS period the kubelet uses.
const PERIOD_US: u64 = 100_000;

/// `cpu.shares` for `milli` CPUs (kubelet `MilliCPUToShares`: 2 at least, 262144 at most).
pub fn shares(milli: u64) -> u64 {
    (milli.saturating_mul(1024) / 1000).clamp(2, 262_144)
}

/// `cpu.cfs_quota_us` for a limit of `milli` CPUs over the 100 ms period (1 ms at least).
pub fn quota_us(milli: u64) -> u64 {
    (milli.saturating_mul(PERIOD_US) / 1000).max(1000)
}

fn cpu_milli(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Option<u64> {
    q.and_then(|q| Quantity::parse(&q.0).ok())
        .map(|q| u64::try_from(q.milli_value()).unwrap_or(0))
}

/// The pod's CPU requests and, when every container has one, the sum of its CPU limits, in milli-CPUs.
pub fn pod_cpu(pod: &Pod) -> (u64, Option<u64>) {
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    let mut requests = 0u64;
    let mut limits = Some(0u64);
    for c in containers {
        let r = c.resources.as_ref();
        let limit = cpu_milli(r.and_then(|r| r.limits.as_ref()).and_then(|l| l.get("cpu")));
        // A container with a limit and no request requests its limit (API defaulting).
        let request = cpu_milli(r.and_then(|r| r.requests.as_ref()).and_then(|l| l.get("cpu")))
            .or(limit)
            .unwrap_or(0);
        requests = requests.saturating_add(request);
        limits = match (limits, limit) {
            (Some(sum), Some(l)) => Some(sum.saturating_add(l)),
            _ => None,
        };
    }
    (requests, limits)
}

/// This instance's CPU group.
#[derive(Debug)]
pub struct Cpu {
    root: PathBuf,
}

fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

impl Cpu {
    /// Makes the instance's group (removing a crashed run's first); None where cgroups cannot be used.
    pub fn claim(block: u8, cpus: u32) -> Option<Cpu> {
        let root = Path::new(CPU_ROOT).join(format!("quotagate-{block}"));
        remove_tree(&root);
        let made = std::fs::create_dir_all(&root)
            .and_then(|()| write(&root, "cpu.shares", &shares(u64::from(cpus) * 1000).to_string()));
        match made {
            Ok(()) => Some(Cpu { root }),
            Err(e) => {
                tracing::info!(cgroup = %root.display(), error = %e, "process runtime: no cgroup v1 cpu controller to use; pods' CPU requests and limits are not enforced");
                let _ = std::fs::remove_dir(&root);
                None
            }
        }
    }

    /// The pod's group, with its shares and quota; None if it could not be made.
    pub fn pod(&self, name: &str, pod: &Pod) -> Option<PathBuf> {
        let dir = self.root.join(name);
        let (requests, limit) = pod_cpu(pod);
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| write(&dir, "cpu.shares", &shares(requests).to_string()))
            .and_then(|()| match limit {
                Some(l) => write(&dir, "cpu.cfs_period_us", &PERIOD_US.to_string())
                    .and_then(|()| write(&dir, "cpu.cfs_quota_us", &quota_us(l).to_string())),
                None => Ok(()),
            });
        match made {
            Ok(()) => Some(dir),
            Err(e) => {
                tracing::debug!(cgroup = %dir.display(), error = %e, "process runtime: the pod's cgroup could not be made");
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Removes what is left of the instance's groups.
    pub fn release(&self) {
        remove_tree(&self.root);
    }
}

/// Moves process `pid` (and its threads; children it forks later follow it) into group `dir`.
pub fn add(dir: &Path, pid: u32) {
    if let Err(e) = write(dir, "cgroup.procs", &pid.to_string()) {
        tracing::debug!(cgroup = %dir.display(), pid, error = %e, "process runtime: process not moved into its pod's cgroup");
    }
}

/// Removes a pod's group once its processes are gone (a group with tasks cannot be removed: they are
/// moved to the root group first).
pub fn remove(dir: &Path) {
    if let Ok(tasks) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in tasks.split_whitespace() {
            let _ = write(Path::new(CPU_ROOT), "cgroup.procs", pid);
        }
    }
    let _ = std::fs::remove_dir(dir);
}

fn remove_tree(root: &Path) {
    if let Ok(entries) = std::fs::read_dir(root) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&e.path());
            }
        }
    }
    if root.exists() {
        remove(root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kubernetes pkg/kubelet/cm `MilliCPUToShares` and `MilliCPUToQuota` (period 100 ms).
    #[test]
    fn shares_and_quota_as_the_kubelet_computes_them() {
        assert_eq!(shares(0), 2);
        assert_eq!(shares(1), 2);
        assert_eq!(shares(1000), 1024);
        assert_eq!(shares(1500), 1536);
        assert_eq!(shares(10_000_000), 262_144);
        assert_eq!(quota_us(1000), 100_000);
        assert_eq!(quota_us(500), 50_000);
        assert_eq!(quota_us(1), 1000, "1 ms at least");
    }

    #[test]
    fn a_pods_cpu_is_the_sum_of_its_containers() {
        let pod = |containers: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({"spec": {"containers": containers}})).unwrap()
        };
        let both = pod(serde_json::json!([
            {"name": "ray-head", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},
            {"name": "autoscaler", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}}]));
        assert_eq!(pod_cpu(&both), (1500, Some(1500)));
        let limit_only = pod(serde_json::json!([{"name": "c", "resources": {"limits": {"cpu": "2"}}}]));
        assert_eq!(
            pod_cpu(&limit_only),
            (2000, Some(2000)),
            "the request defaults to the limit"
        );
        let one_unlimited = pod(serde_json::json!([
            {"name": "a", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m"}}}]));
        assert_eq!(
            pod_cpu(&one_unlimited),
            (500, None),
            "no pod-level quota when a container has no limit"
        );
    }
}
