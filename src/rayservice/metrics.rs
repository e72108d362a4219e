//! The Ray operator's metrics. KubeRay's RayCluster and RayService metrics
//! (ray-project/kuberay:ray-operator/controllers/ray/metrics/ray_{cluster,service}_metrics.go), computed
//! from the objects at scrape time as KubeRay's collectors do; and quotagate's own for the gate: which
//! clusters are gated and for how long now, and, from the transitions a watcher sees, how long each
//! gate stayed closed, the latency from a slice's admission to its gate opening, and incremental
//! traffic steps.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::kueue::Workload;
use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayJob, RayService};

fn find<'a>(conds: Option<&'a [Condition]>, type_: &str) -> Option<&'a Condition> {
    conds.into_iter().flatten().find(|c| c.type_ == type_)
}

fn is_true(conds: Option<&[Condition]>, type_: &str) -> bool {
    find(conds, type_).is_some_and(|c| c.status == "True")
}

fn cluster_conditions(rc: &RayCluster) -> Option<&[Condition]> {
    rc.status.as_ref().and_then(|s| s.conditions.as_deref())
}

/// Label values are escaped as the text format requires.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// KubeRay's scrape-time gauges plus quotagate's gate gauges for these objects, at `now`.
pub fn render(clusters: &[RayCluster], services: &[RayService], now: Timestamp) -> String {
    let mut out = String::new();
    let id = |name: String, ns: Option<String>| {
        format!(
            "name=\"{}\",namespace=\"{}\"",
            esc(&name),
            esc(&ns.unwrap_or_default())
        )
    };
    header(
        &mut out,
        "kuberay_cluster_info",
        "Metadata information about RayCluster custom resources",
    );
    for rc in clusters {
        let owner = rc
            .labels()
            .get(c::LABEL_ORIGINATED_FROM_CRD)
            .cloned()
            .unwrap_or_else(|| "None".into());
        let _ = writeln!(
            out,
            "kuberay_cluster_info{{{},owner_kind=\"{}\"}} 1",
            id(rc.name_any(), rc.namespace()),
            esc(&owner)
        );
    }
    header(
        &mut out,
        "kuberay_cluster_condition_provisioned",
        "Indicates whether the RayCluster is provisioned",
    );
    for rc in clusters {
        let p = is_true(cluster_conditions(rc), c::COND_RAY_CLUSTER_PROVISIONED);
        let _ = writeln!(
            out,
            "kuberay_cluster_condition_provisioned{{{},condition=\"{p}\"}} 1",
            id(rc.name_any(), rc.namespace())
        );
    }
    header(
        &mut out,
        "kuberay_cluster_provisioned_duration_seconds",
        "The time, in seconds, when a RayCluster's `RayClusterProvisioned` status transitions from false (or unset) to true",
    );
    for rc in clusters {
        let prov =
            find(cluster_conditions(rc), c::COND_RAY_CLUSTER_PROVISIONED).filter(|c| c.status == "True");
        if let (Some(p), Some(created)) = (prov, rc.metadata.creation_timestamp.as_ref()) {
            let secs = p
                .last_transition_time
                .0
                .duration_since(created.0)
                .as_secs_f64()
                .max(0.0);
            let _ = writeln!(
                out,
                "kuberay_cluster_provisioned_duration_seconds{{{}}} {secs}",
                id(rc.name_any(), rc.namespace())
            );
        }
    }
    header(
        &mut out,
        "kuberay_service_info",
        "Metadata information about RayService custom resources",
    );
    for rs in services {
        let _ = writeln!(
            out,
            "kuberay_service_info{{{}}} 1",
            id(rs.name_any(), rs.namespace())
        );
    }
    let service_conds = |rs: &RayService| rs.status.as_ref().and_then(|s| s.conditions.clone());
    header(
        &mut out,
        "kuberay_service_condition_ready",
        "Describes whether the RayService is ready. Ready means users can send requests to the underlying cluster and the number of serve endpoints is greater than 0.",
    );
    for rs in services {
        let v = is_true(service_conds(rs).as_deref(), c::COND_READY);
        let _ = writeln!(
            out,
            "kuberay_service_condition_ready{{{},condition=\"{v}\"}} 1",
            id(rs.name_any(), rs.namespace())
        );
    }
    header(
        &mut out,
        "kuberay_service_condition_upgrade_in_progress",
        "Describes whether the RayService is performing a zero-downtime upgrade.",
    );
    for rs in services {
        let v = is_true(service_conds(rs).as_deref(), c::COND_UPGRADE_IN_PROGRESS);
        let _ = writeln!(
            out,
            "kuberay_service_condition_upgrade_in_progress{{{},condition=\"{v}\"}} 1",
            id(rs.name_any(), rs.namespace())
        );
    }
    let gated: Vec<(&RayCluster, &Condition)> = clusters
        .iter()
        .filter_map(|rc| find(cluster_conditions(rc), c::COND_QUOTA_GATED).map(|g| (rc, g)))
        .collect();
    let gate_id = |rc: &RayCluster| {
        let rs = rc
            .labels()
            .get(c::LABEL_ORIGINATED_FROM_CR_NAME)
            .cloned()
            .unwrap_or_default();
        format!(
            "{},rayservice=\"{}\"",
            id(rc.name_any(), rc.namespace()),
            esc(&rs)
        )
    };
    header(
        &mut out,
        "quotagate_raycluster_quota_gated",
        "1 while the RayCluster waits behind the quota gate (QuotaGated=True), 0 once an admitted workload slice covers it",
    );
    for (rc, g) in &gated {
        let _ = writeln!(
            out,
            "quotagate_raycluster_quota_gated{{{}}} {}",
            gate_id(rc),
            i32::from(g.status == "True")
        );
    }
    header(
        &mut out,
        "quotagate_raycluster_gated_seconds",
        "How long the RayCluster has been waiting behind the quota gate (0 when open)",
    );
    for (rc, g) in &gated {
        let secs = if g.status == "True" {
            now.duration_since(g.last_transition_time.0)
                .as_secs_f64()
                .max(0.0)
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "quotagate_raycluster_gated_seconds{{{}}} {secs}",
            gate_id(rc)
        );
    }
    out
}

/// KubeRay's RayJob gauges (`ray_job_metrics.go`) for these jobs. KubeRay sets the execution duration
/// when a job's deployment status goes from Initializing to a terminal state (or Retrying), as the time
/// since its `startTime`; here it is read from the stored status at scrape time: `endTime - startTime`
/// for a Complete or Failed job, with `retry_count` its failed tries. (KubeRay's value for a try that went
/// Retrying is not kept: the status no longer holds it once the retry starts.)
pub fn render_jobs(jobs: &[RayJob]) -> String {
    let mut out = String::new();
    let id = |j: &RayJob| {
        format!(
            "name=\"{}\",namespace=\"{}\"",
            esc(&j.name_any()),
            esc(&j.namespace().unwrap_or_default())
        )
    };
    let deployment = |j: &RayJob| j.status.as_ref().and_then(|s| s.job_deployment_status);
    header(
        &mut out,
        "kuberay_job_info",
        "Metadata information about RayJob custom resources",
    );
    for j in jobs {
        let _ = writeln!(out, "kuberay_job_info{{{}}} 1", id(j));
    }
    header(
        &mut out,
        "kuberay_job_deployment_status",
        "The RayJobs current deployment status",
    );
    for j in jobs {
        let status = deployment(j).map_or("", |d| d.as_str());
        let _ = writeln!(
            out,
            "kuberay_job_deployment_status{{{},deployment_status=\"{status}\"}} 1",
            id(j)
        );
    }
    header(
        &mut out,
        "kuberay_job_execution_duration_seconds",
        "Duration from when the RayJob CR's JobDeploymentStatus transitions from Initializing to either the Retrying state or a terminal state, such as Complete or Failed",
    );
    for j in jobs {
        let Some(st) = j
            .status
            .as_ref()
            .filter(|_| deployment(j).is_some_and(|d| d.is_terminal()))
        else {
            continue;
        };
        let (Some(start), Some(end), Some(d)) = (
            st.start_time.as_ref(),
            st.end_time.as_ref(),
            st.job_deployment_status,
        ) else {
            continue;
        };
        let secs = end.0.duration_since(start.0).as_secs_f64().max(0.0);
        let retries = st.failed.unwrap_or(0);
        let _ = writeln!(
            out,
            "kuberay_job_execution_duration_seconds{{{},job_deployment_status=\"{}\",retry_count=\"{retries}\"}} {secs}",
            id(j),
            d.as_str()
        );
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ServiceLabels {
    pub name: String,
    pub namespace: String,
}

/// What the watcher saw change.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// A gated cluster's gate opened after `waited`; `latency` from its service's slice admission
    /// (when that was seen while the cluster waited).
    GateOpened {
        waited: Duration,
        latency: Option<Duration>,
    },
    /// An incremental upgrade moved traffic on a service's pending cluster.
    TrafficStep(ServiceLabels),
}

/// The transitions behind quotagate's gate histograms and traffic counter, from a stream of
/// objects; the clock is the caller's, so it is tested without waiting.
#[derive(Debug, Default)]
pub struct GateTracker {
    /// ns/name of a gated cluster -> when it was first seen gated.
    gated_since: HashMap<String, Instant>,
    /// ns/rayservice -> when a slice of it was seen turning admitted.
    admitted_at: HashMap<String, Instant>,
    /// ns/rayservice -> the pending cluster's (name, trafficRoutedPercent) last seen.
    traffic: HashMap<String, (String, i32)>,
    /// ns/name of workloads seen admitted.
    admitted: std::collections::HashSet<String>,
}

fn key(ns: Option<String>, name: &str) -> String {
    format!("{}/{name}", ns.unwrap_or_default())
}

impl GateTracker {
    pub fn cluster(&mut self, rc: &RayCluster, now: Instant) -> Option<Observed> {
        let g = find(cluster_conditions(rc), c::COND_QUOTA_GATED)?;
        let k = key(rc.namespace(), &rc.name_any());
        if g.status == "True" {
            self.gated_since.entry(k).or_insert(now);
            return None;
        }
        let since = self.gated_since.remove(&k)?;
        let rs = key(
            rc.namespace(),
            rc.labels()
                .get(c::LABEL_ORIGINATED_FROM_CR_NAME)
                .map(String::as_str)
                .unwrap_or_default(),
        );
        let latency = self
            .admitted_at
            .get(&rs)
            .filter(|t| **t >= since)
            .map(|t| now.saturating_duration_since(*t));
        Some(Observed::GateOpened {
            waited: now.saturating_duration_since(since),
            latency,
        })
    }

    pub fn cluster_deleted(&mut self, rc: &RayCluster) {
        self.gated_since.remove(&key(rc.namespace(), &rc.name_any()));
    }

    /// A workload owned by a RayService: the moment its slice turns admitted.
    pub fn workload(&mut self, wl: &Workload, now: Instant) {
        let Some(owner) = wl.owner_references().iter().find(|o| o.kind == "RayService") else {
            return;
        };
        let k = key(wl.namespace(), &wl.name_any());
        if wl.is_admitted() {
            if self.admitted.insert(k) {
                self.admitted_at.insert(key(wl.namespace(), &owner.name), now);
            }
        } else {
            self.admitted.remove(&k);
        }
    }

    pub fn service(&mut self, rs: &RayService) -> Option<Observed> {
        let pending = rs
            .status
            .as_ref()
            .and_then(|s| s.pending_service_status.as_ref())?;
        let (cluster, pct) = (pending.ray_cluster_name.clone()?, pending.traffic_routed_percent?);
        let k = key(rs.namespace(), &rs.name_any());
        let before = self.traffic.insert(k, (cluster.clone(), pct));
        // A step is a change of the same pending cluster's share (not its first report).
        match before {
            Some((c, p)) if c == cluster && p != pct => Some(Observed::TrafficStep(ServiceLabels {
                name: rs.name_any(),
                namespace: rs.namespace().unwrap_or_default(),
            })),
            _ => None,
        }
    }
}

/// quotagate's gate histograms and traffic counter.
pub struct GateMetrics {
    registry: Registry,
    pub gate_wait_seconds: Histogram,
    pub gate_latency_seconds: Histogram,
    pub traffic_steps_total: Family<ServiceLabels, Counter>,
    pub tracker: Mutex<GateTracker>,
}

impl Default for GateMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("quotagate");
        // Gates stay closed from seconds to hours; the latency target is 250 ms.
        let wait = Histogram::new(std::iter::once(1.0).chain(exponential_buckets(2.5, 2.0, 13)));
        let latency = Histogram::new(exponential_buckets(0.01, 2.0, 12));
        let steps: Family<ServiceLabels, Counter> = Family::default();
        registry.register(
            "gate_wait_seconds",
            "How long a RayCluster waited behind the quota gate, observed when the gate opens",
            wait.clone(),
        );
        registry.register("gate_latency_seconds", "From a RayService's workload slice turning admitted to its gated cluster's gate opening, as the manager's watcher sees both", latency.clone());
        registry.register(
            "rayservice_traffic_steps",
            "Traffic moves of an incremental upgrade onto a RayService's pending cluster",
            steps.clone(),
        );
        GateMetrics {
            registry,
            gate_wait_seconds: wait,
            gate_latency_seconds: latency,
            traffic_steps_total: steps,
            tracker: Mutex::default(),
        }
    }
}

impl GateMetrics {
    pub fn record(&self, o: Option<Observed>) {
        match o {
            Some(Observed::GateOpened { waited, latency }) => {
                self.gate_wait_seconds.observe(waited.as_secs_f64());
                if let Some(l) = latency {
                    self.gate_latency_seconds.observe(l.as_secs_f64());
                }
            }
            Some(Observed::TrafficStep(l)) => {
                self.traffic_steps_total.get_or_create(&l).inc();
            }
            None => {}
        }
    }

    pub fn tracker(&self) -> std::sync::MutexGuard<'_, GateTracker> {
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; the encoder's trailing `# EOF` is left to the caller.
        let _ = encode(&mut out, &self.registry);
        out.replace("# EOF\n", "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rc(name: &str, conds: serde_json::Value) -> RayCluster {
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"ray.io/originated-from-crd": "RayService", "ray.io/originated-from-cr-name": "rs"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}},
            "status": {"conditions": conds}}))
        .unwrap()
    }

    fn cond(t: &str, s: &str, at: &str) -> serde_json::Value {
        json!({"type": t, "status": s, "reason": "R", "message": "", "lastTransitionTime": at})
    }

    // KubeRay's ray_cluster_metrics_test: info with owner_kind from ray.io/originated-from-crd, the
    // provisioned condition as a label, the provisioned duration from creation.
    #[test]
    fn kuberay_series_and_gate_gauges() {
        let a = rc(
            "a",
            json!([
                cond("RayClusterProvisioned", "True", "2026-01-01T00:00:30Z"),
                cond("QuotaGated", "False", "2026-01-01T00:00:20Z")
            ]),
        );
        let b = rc("b", json!([cond("QuotaGated", "True", "2026-01-01T00:01:00Z")]));
        let text = render(&[a, b], &[], "2026-01-01T00:01:45Z".parse().unwrap());
        for want in [
            "kuberay_cluster_info{name=\"a\",namespace=\"ns\",owner_kind=\"RayService\"} 1",
            "kuberay_cluster_condition_provisioned{name=\"a\",namespace=\"ns\",condition=\"true\"} 1",
            "kuberay_cluster_condition_provisioned{name=\"b\",namespace=\"ns\",condition=\"false\"} 1",
            "kuberay_cluster_provisioned_duration_seconds{name=\"a\",namespace=\"ns\"} 30",
            "quotagate_raycluster_quota_gated{name=\"b\",namespace=\"ns\",rayservice=\"rs\"} 1",
            "quotagate_raycluster_quota_gated{name=\"a\",namespace=\"ns\",rayservice=\"rs\"} 0",
            "quotagate_raycluster_gated_seconds{name=\"b\",namespace=\"ns\",rayservice=\"rs\"} 45",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert!(
            !text.contains("kuberay_cluster_provisioned_duration_seconds{name=\"b\""),
            "{text}"
        );
    }

    // KubeRay's ray_job_metrics_test: info and deployment status per job (a deleted job's series go
    // with it: these are read from the jobs there are), the execution duration of an ended job.
    #[test]
    fn kuberay_job_series() {
        let job = |name: &str, ns: &str, status: serde_json::Value| -> RayJob {
            serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": ns}, "spec": {}, "status": status})).unwrap()
        };
        let jobs = [
            job(
                "ray-job-1",
                "ns1",
                json!({"jobDeploymentStatus": "Running", "startTime": "2026-01-01T00:00:00Z"}),
            ),
            job(
                "ray-job-2",
                "ns2",
                json!({"jobDeploymentStatus": "Failed", "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:00:20.5Z", "failed": 2}),
            ),
            job("ray-job-3", "ns1", json!({})),
        ];
        let text = render_jobs(&jobs);
        for want in [
            "kuberay_job_info{name=\"ray-job-1\",namespace=\"ns1\"} 1",
            "kuberay_job_info{name=\"ray-job-2\",namespace=\"ns2\"} 1",
            "kuberay_job_deployment_status{name=\"ray-job-1\",namespace=\"ns1\",deployment_status=\"Running\"} 1",
            "kuberay_job_deployment_status{name=\"ray-job-2\",namespace=\"ns2\",deployment_status=\"Failed\"} 1",
            "kuberay_job_deployment_status{name=\"ray-job-3\",namespace=\"ns1\",deployment_status=\"\"} 1",
            "kuberay_job_execution_duration_seconds{name=\"ray-job-2\",namespace=\"ns2\",job_deployment_status=\"Failed\",retry_count=\"2\"} 20.5",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert!(
            !text.contains("kuberay_job_execution_duration_seconds{name=\"ray-job-1\""),
            "a running job has no duration yet: {text}"
        );
        let fewer = render_jobs(&jobs[1..]);
        assert!(
            !fewer.contains("ray-job-1"),
            "a deleted job's series are gone: {fewer}"
        );
    }

    #[test]
    fn tracker_times_the_gate_from_closed_through_admitted_to_open() {
        let mut t = GateTracker::default();
        let t0 = Instant::now();
        let gated = rc("b", json!([cond("QuotaGated", "True", "2026-01-01T00:00:00Z")]));
        assert_eq!(t.cluster(&gated, t0), None);
        let wl: Workload = serde_json::from_value(json!({"metadata": {"name": "slice", "namespace": "ns", "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "u"}]},
            "spec": {"podSets": []}, "status": {"conditions": [cond("Admitted", "True", "2026-01-01T00:00:05Z")]}})).unwrap();
        t.workload(&wl, t0 + Duration::from_secs(5));
        let open = rc("b", json!([cond("QuotaGated", "False", "2026-01-01T00:00:05Z")]));
        assert_eq!(
            t.cluster(&open, t0 + Duration::from_millis(5040)),
            Some(Observed::GateOpened {
                waited: Duration::from_millis(5040),
                latency: Some(Duration::from_millis(40))
            })
        );
        assert_eq!(
            t.cluster(&open, t0 + Duration::from_secs(6)),
            None,
            "an open gate is timed once"
        );
    }
}
