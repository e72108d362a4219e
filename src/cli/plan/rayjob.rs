//! `quotagate plan -f rayjob.yaml`: the quota a RayJob's Workload asks for, from the podset code its
//! admission uses (`RayJobJob::pod_sets`: `head`, each worker group, and `submitter` in K8sJobMode),
//! and, against ClusterQueue files or a live cluster, whether it would be admitted now and, if not,
//! the shortfall and who holds the quota. A RayJob has one Workload for its whole life: no upgrade
//! phases.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::fit::{self, Verdict};
use super::render::{Output, table};
use super::{PlanError, PodSetReport, show};
use crate::admission::Snapshot;
use crate::api::ray::RayJob;
use crate::api::ray::rayjob::JobSubmissionMode;
use crate::jobframework::GenericJob;
use crate::queue::amount::Amount;
use crate::rayservice::job::rayjob::RayJobJob;

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobPlan {
    pub ray_job: String,
    pub submission_mode: &'static str,
    pub podsets: Vec<PodSetReport>,
    /// Per resource: every pod of every podset.
    pub total: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<Verdict>,
}

fn mode_name(m: JobSubmissionMode) -> &'static str {
    match m {
        JobSubmissionMode::K8sJobMode => "K8sJobMode",
        JobSubmissionMode::HTTPMode => "HTTPMode",
        JobSubmissionMode::InteractiveMode => "InteractiveMode",
        JobSubmissionMode::SidecarMode => "SidecarMode",
    }
}

/// The RayJob's podsets and totals, checked against nothing.
pub fn compute(job: &RayJob) -> Result<(JobPlan, Vec<crate::api::kueue::PodSet>), PlanError> {
    let ns = job.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let name = format!("{ns}/{}", job.metadata.name.clone().unwrap_or_default());
    if job.spec.uses_cluster_selector() {
        return Err(PlanError::Input(format!(
            "RayJob {name} uses spec.clusterSelector: it runs on an existing RayCluster and, as in Kueue, is not queue-managed, so it asks no quota of its own"
        )));
    }
    let podsets = RayJobJob::new(job.clone())
        .pod_sets()
        .map_err(|e| PlanError::Input(format!("RayJob {name}: {e}")))?;
    let mut reports = Vec::new();
    let mut totals: BTreeMap<String, Amount> = BTreeMap::new();
    for ps in &podsets {
        let ps_name = ps.name.clone().unwrap_or_default();
        let spec = ps.template.spec.clone().unwrap_or_default();
        let per = crate::queue::requests::pod_requests("template.spec", &spec)
            .map_err(|e| PlanError::Input(format!("podset {ps_name}: {e}")))?;
        for (r, v) in &per {
            let t = totals.entry(r.clone()).or_default();
            *t += v.times(i64::from(ps.count()));
        }
        reports.push(PodSetReport {
            per_pod: per
                .iter()
                .filter(|(_, v)| **v != Amount::ZERO)
                .map(|(r, v)| (r.clone(), show(r, *v)))
                .collect(),
            name: ps_name,
            count: ps.count(),
        });
    }
    let plan = JobPlan {
        ray_job: name,
        submission_mode: mode_name(job.spec.mode()),
        podsets: reports,
        total: totals
            .iter()
            .filter(|(_, v)| **v != Amount::ZERO)
            .map(|(r, v)| (r.clone(), show(r, *v)))
            .collect(),
        cluster_queue: None,
        admission: None,
    };
    Ok((plan, podsets))
}

/// Adds the admission verdict against `snap`: one cycle of the scheduler with the RayJob's Workload
/// added to what the queues already hold.
pub fn check_against(
    plan: &mut JobPlan,
    podsets: &[crate::api::kueue::PodSet],
    snap: &Snapshot,
    job: &RayJob,
    cluster_queue: Option<&str>,
    now_ms: i64,
) -> Result<(), PlanError> {
    let mut snap = snap.clone();
    let (lq, cq) = fit::queue_of(&mut snap, &job.metadata, cluster_queue)?;
    plan.admission = Some(fit::check(&snap, &job.metadata, &lq, podsets, None, now_ms));
    plan.cluster_queue = Some(cq);
    Ok(())
}

fn text(p: &JobPlan) -> String {
    let mut out = format!(
        "RayJob {} ({}): one Workload for the job's life\n\n",
        p.ray_job, p.submission_mode
    );
    let resources: Vec<&String> = p.total.keys().collect();
    let mut header = vec!["PODSET".to_string(), "COUNT".into()];
    header.extend(resources.iter().map(|r| format!("{}/POD", r.to_uppercase())));
    let mut rows = vec![header];
    for ps in &p.podsets {
        let mut row = vec![ps.name.clone(), ps.count.to_string()];
        row.extend(
            resources
                .iter()
                .map(|r| ps.per_pod.get(*r).cloned().unwrap_or_else(|| "0".into())),
        );
        rows.push(row);
    }
    let mut total = vec![
        "total".to_string(),
        p.podsets.iter().map(|ps| ps.count).sum::<i32>().to_string(),
    ];
    total.extend(resources.iter().map(|r| p.total[*r].clone()));
    rows.push(total);
    out.push_str(&table(&rows));
    if let (Some(cq), Some(v)) = (&p.cluster_queue, &p.admission) {
        let _ = writeln!(
            out,
            "\nClusterQueue {cq}: {}",
            if v.admitted {
                format!("admitted now ({})", v.message)
            } else {
                format!("would wait: {}", v.message)
            }
        );
        if let Some(e) = v.explanation.as_ref().filter(|_| !v.admitted) {
            out.push_str(&super::render::flavor_table(e, false));
            if !e.holders.is_empty() {
                out.push('\n');
                out.push_str(&super::render::holder_table(e));
            }
            let _ = writeln!(out, "preemption ({}): {}", e.preemption.policy, e.preemption.why);
        }
    }
    out
}

pub fn render(p: &JobPlan, output: Output) -> Result<String, String> {
    match output {
        Output::Table => Ok(text(p)),
        Output::Json => serde_json::to_string_pretty(p)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Yaml => serde_saphyr::to_string(p).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor};
    use std::sync::Arc;

    fn job(mode: &str, workers: i32) -> RayJob {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"entrypoint": "python train.py", "submissionMode": mode, "shutdownAfterJobFinishes": true,
                "rayClusterSpec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "head", "image": "ray", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}},
                    "workerGroupSpecs": [{"groupName": "GPU", "replicas": workers, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                        "template": {"spec": {"containers": [{"name": "w", "image": "ray", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}]}}
        }))
        .unwrap()
    }

    // Kueue: pkg/controller/jobs/rayjob/rayjob_controller_test.go TestPodSets ("with default job
    // submission mode": head, the worker group lower-cased, and the submitter with KubeRay's default
    // template's 500m CPU / 200Mi; "with HTTPMode": no submitter).
    #[test]
    fn the_plan_counts_head_workers_and_the_submitter() {
        let (p, _) = compute(&job("K8sJobMode", 2)).unwrap();
        let rows: Vec<(&str, i32)> = p.podsets.iter().map(|ps| (ps.name.as_str(), ps.count)).collect();
        assert_eq!(rows, [("head", 1), ("gpu", 2), ("submitter", 1)]);
        assert_eq!(p.podsets[2].per_pod["cpu"], "500m");
        assert_eq!(
            (p.total["cpu"].as_str(), p.total["nvidia.com/gpu"].as_str()),
            ("5500m", "2")
        );
        let (http, _) = compute(&job("HTTPMode", 2)).unwrap();
        assert_eq!(
            http.podsets.iter().map(|ps| ps.name.as_str()).collect::<Vec<_>>(),
            ["head", "gpu"]
        );
        assert_eq!(http.total["cpu"], "5");
        let text = render(&p, Output::Table).unwrap();
        assert!(
            text.contains("RayJob default/train (K8sJobMode)") && text.contains("submitter"),
            "{text}"
        );
        let mut on_existing = job("K8sJobMode", 1);
        on_existing.spec.cluster_selector =
            Some([("ray.io/cluster".to_string(), "shared".to_string())].into());
        on_existing.spec.ray_cluster_spec = None;
        assert!(
            compute(&on_existing)
                .unwrap_err()
                .to_string()
                .contains("not queue-managed")
        );
    }

    #[test]
    fn the_plan_says_whether_it_fits_and_why_not() {
        let cq = |gpus: &str| {
            let mut cq = ClusterQueue::build("cq")
                .flavor(
                    "default",
                    [("cpu", "10"), ("memory", "10Gi"), ("nvidia.com/gpu", gpus)],
                )
                .build();
            cq.spec.namespace_selector = Some(Default::default());
            cq
        };
        let snap = |gpus: &str| Snapshot {
            cluster_queues: vec![Arc::new(cq(gpus))],
            flavors: vec![Arc::new(ResourceFlavor::build("default").build())],
            local_queues: vec![Arc::new(
                LocalQueue::build("lq", "default").cluster_queue("cq").build(),
            )],
            ..Default::default()
        };
        let j = job("K8sJobMode", 2);
        let (mut p, podsets) = compute(&j).unwrap();
        check_against(&mut p, &podsets, &snap("4"), &j, None, 0).unwrap();
        assert!(p.admission.as_ref().unwrap().admitted, "{:?}", p.admission);
        let (mut p, podsets) = compute(&j).unwrap();
        check_against(&mut p, &podsets, &snap("1"), &j, None, 0).unwrap();
        let v = p.admission.as_ref().unwrap();
        assert!(!v.admitted && v.message.contains("nvidia.com/gpu"), "{v:?}");
        assert!(render(&p, Output::Table).unwrap().contains("would wait"));
    }
}
