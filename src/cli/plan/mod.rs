//! `quotagate plan -f rayservice.yaml|rayjob.yaml [--to changed.yaml] [--cluster-queue NAME | -f queues.yaml]`:
//! the quota a RayService needs at steady state and at the peak of its upgrade strategy, per
//! resource, from the podset code the admission uses (`phases`); and, against ClusterQueue files or
//! a live cluster, whether each would be admitted now and, if not, the shortfall and who holds the
//! quota (`fit`).

pub mod fit;
pub mod phases;
pub mod rayjob;
pub mod render;
pub mod several;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::admission::Snapshot;
use crate::api::manifest::load_documents;
use crate::api::ray::RayService;
use crate::queue::amount::{Amount, FlavorResource};
pub use render::{Output, render};

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Files holding the RayService (exactly one) and any ClusterQueue, Cohort, ResourceFlavor,
    /// LocalQueue and Workload to check against.
    pub files: Vec<PathBuf>,
    /// The changed RayService the upgrade goes to (default: the same spec, e.g. an image bump).
    pub to: Option<PathBuf>,
    pub cluster_queue: Option<String>,
    /// Check against the cluster of this kubeconfig (default: the files' queues, else
    /// `--cluster-queue` in the default kubeconfig's cluster).
    pub kubeconfig: Option<PathBuf>,
    /// How many such services upgrade at once through the queue (the spare quota they need);
    /// `None` means 2.
    pub concurrent: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Phase(#[from] phases::PhaseError),
    #[error(transparent)]
    Fit(#[from] fit::FitError),
    #[error("kubeconfig: {0}")]
    Kube(String),
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetReport {
    pub name: String,
    pub count: i32,
    pub per_pod: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseReport {
    pub name: String,
    pub clusters: Vec<phases::ClusterInPhase>,
    pub podsets: Vec<PodSetReport>,
    /// Per resource: all pods of the phase.
    pub total: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<fit::Verdict>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub ray_service: String,
    pub strategy: &'static str,
    pub steady: PhaseReport,
    pub peak: PhaseReport,
    /// What the upgrade needs on top of the steady state, per resource.
    pub upgrade_extra: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    /// The admitted slice the upgrade replaces (live cluster): only the growth must fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    pub concurrent: Concurrent,
}

/// The spare quota (beyond every service at steady state) that several services like this one
/// need when they upgrade at the same moment through one queue.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Concurrent {
    pub upgrades: u32,
    /// All of them at their peak at once: none waits on another.
    pub without_waiting: BTreeMap<String, String>,
    /// One at a time: a pending cluster is admitted only with its first step, so an upgrade that
    /// waits holds nothing and the others finish; they take turns but cannot deadlock.
    pub taking_turns: BTreeMap<String, String>,
}

/// `n` upgrades needing `extra` each beyond their steady state.
pub fn concurrent(extra: &BTreeMap<String, Amount>, n: u32) -> Concurrent {
    let n = n.max(1);
    Concurrent {
        upgrades: n,
        without_waiting: extra
            .iter()
            .map(|(r, v)| (r.clone(), show(r, v.times(i64::from(n)))))
            .collect(),
        taking_turns: extra.iter().map(|(r, v)| (r.clone(), show(r, *v))).collect(),
    }
}

fn show(resource: &str, a: Amount) -> String {
    FlavorResource::new("", resource).show(a)
}

fn report_phase(p: &phases::Phase) -> Result<PhaseReport, PlanError> {
    let mut podsets = Vec::new();
    for ps in &p.podsets {
        let name = ps.name.clone().unwrap_or_default();
        let spec = ps.template.spec.clone().unwrap_or_default();
        let per = crate::queue::requests::pod_requests("template.spec", &spec)
            .map_err(|e| PlanError::Input(format!("podset {name}: {e}")))?;
        podsets.push(PodSetReport {
            per_pod: per
                .iter()
                .filter(|(_, v)| **v != Amount::ZERO)
                .map(|(r, v)| (r.clone(), show(r, *v)))
                .collect(),
            name,
            count: ps.count(),
        });
    }
    Ok(PhaseReport {
        name: p.name.clone(),
        clusters: p.clusters.clone(),
        podsets,
        total: p.totals.iter().map(|(r, v)| (r.clone(), show(r, *v))).collect(),
        admission: None,
    })
}

/// Exactly one RayService from a list of documents.
fn one_service(path: &str, docs: &[(usize, Value)]) -> Result<RayService, PlanError> {
    let services: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d.get("kind").and_then(Value::as_str) == Some("RayService"))
        .collect();
    match services.as_slice() {
        [one] => serde_json::from_value((*one).clone()).map_err(|e| PlanError::File {
            path: path.to_string(),
            message: format!("RayService: {e}"),
        }),
        [] => Err(PlanError::File {
            path: path.to_string(),
            message: "no RayService in the file(s)".into(),
        }),
        _ => Err(PlanError::File {
            path: path.to_string(),
            message: format!("{} RayServices; plan takes one", services.len()),
        }),
    }
}

fn read_docs(paths: &[PathBuf]) -> Result<Vec<(usize, Value)>, PlanError> {
    let mut out = Vec::new();
    for p in paths {
        let shown = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(|e| PlanError::File {
            path: shown.clone(),
            message: format!("cannot read: {e}"),
        })?;
        let docs = load_documents(&text).map_err(|e| PlanError::File {
            path: shown.clone(),
            message: format!("line {}: {}", e.line, e.message),
        })?;
        for d in docs.into_iter().filter(|d| !d.is_null()) {
            out.push((out.len(), d));
        }
    }
    Ok(out)
}

/// The numbers, without checking against any queue.
pub fn compute(from: &RayService, to: &RayService) -> Result<Report, PlanError> {
    let steady = phases::steady(from, "spec")?;
    let peak = phases::peak(from, to)?;
    let mut extra = BTreeMap::new();
    for (r, v) in &peak.totals {
        let base = steady.totals.get(r).copied().unwrap_or_default();
        extra.insert(r.clone(), (*v - base).clamp_zero());
    }
    let ns = from
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    Ok(Report {
        ray_service: format!("{ns}/{}", from.metadata.name.clone().unwrap_or_default()),
        strategy: phases::strategy_name(phases::strategy(to)),
        steady: report_phase(&steady)?,
        peak: report_phase(&peak)?,
        upgrade_extra: extra.iter().map(|(r, v)| (r.clone(), show(r, *v))).collect(),
        cluster_queue: None,
        replaces: None,
        concurrent: concurrent(&extra, 2),
    })
}

/// What the upgrade needs on top of the steady state, per resource.
fn phases_extra(from: &RayService, to: &RayService) -> Result<BTreeMap<String, Amount>, PlanError> {
    let steady = phases::steady(from, "spec")?;
    let peak = phases::peak(from, to)?;
    Ok(peak
        .totals
        .iter()
        .map(|(r, v)| {
            (
                r.clone(),
                (*v - steady.totals.get(r).copied().unwrap_or_default()).clamp_zero(),
            )
        })
        .collect())
}

/// Adds the admission verdicts against `snap` to `report`.
pub fn check_against(
    report: &mut Report,
    snap: &Snapshot,
    from: &RayService,
    to: &RayService,
    cluster_queue: Option<&str>,
    now_ms: i64,
) -> Result<(), PlanError> {
    let mut snap = snap.clone();
    let (lq, cq) = fit::queue_of(&mut snap, &from.metadata, cluster_queue)?;
    let replaces = fit::current_slice(&snap, from);
    let mut steady = phases::steady(from, "spec")?;
    let mut peak = phases::peak(from, to)?;
    // The plan's slice replaces the admitted one: its serving cluster stays where its pods run,
    // as the upgrade's slice keeps it (`demand::pins`), so the plan places what the admission would.
    if let Some(key) = replaces.as_ref() {
        let pins = fit::slice_pins(&snap, key);
        crate::rayservice::job::demand::pin(&mut steady.podsets, &pins);
        crate::rayservice::job::demand::pin(&mut peak.podsets, &pins);
    }
    report.steady.admission = Some(fit::check(
        &snap,
        &from.metadata,
        &lq,
        &steady.podsets,
        replaces.as_ref(),
        now_ms,
    ));
    report.peak.admission = Some(fit::check(
        &snap,
        &from.metadata,
        &lq,
        &peak.podsets,
        replaces.as_ref(),
        now_ms,
    ));
    report.cluster_queue = Some(cq);
    report.replaces = replaces.map(|k| k.to_string());
    Ok(())
}

/// The whole command: read, compute, and check against the files' queues or a live cluster.
pub async fn run(opts: &Options) -> Result<Report, PlanError> {
    let shown = opts
        .files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let docs = read_docs(&opts.files)?;
    let from = one_service(&shown, &docs)?;
    let to = match &opts.to {
        Some(p) => one_service(&p.display().to_string(), &read_docs(std::slice::from_ref(p))?)?,
        None => from.clone(),
    };
    checked(opts, &docs, &from, &to).await
}

/// `run` for every RayService in the files: with one, its report; with several, each one's (its
/// upgrade to the same spec) and what they need together through one queue. `--to` takes one.
pub async fn run_all(opts: &Options) -> Result<several::Plans, PlanError> {
    let docs = read_docs(&opts.files)?;
    let is = |kind: &str| {
        docs.iter()
            .any(|(_, d)| d.get("kind").and_then(Value::as_str) == Some(kind))
    };
    if is("RayJob") && !is("RayService") {
        return Ok(several::Plans {
            services: Vec::new(),
            together: None,
            jobs: jobs_checked(opts, &docs).await?,
        });
    }
    let mut services = Vec::new();
    for (_, d) in docs
        .iter()
        .filter(|(_, d)| d.get("kind").and_then(Value::as_str) == Some("RayService"))
    {
        let rs: RayService =
            serde_json::from_value(d.clone()).map_err(|e| PlanError::Input(format!("RayService: {e}")))?;
        services.push(rs);
    }
    if services.len() < 2 {
        return Ok(several::Plans {
            services: vec![run(opts).await?],
            together: None,
            jobs: Vec::new(),
        });
    }
    if opts.to.is_some() {
        return Err(PlanError::Input(format!(
            "--to names the changed spec of one RayService; the files hold {}",
            services.len()
        )));
    }
    let mut reports = Vec::new();
    for rs in &services {
        reports.push(checked(opts, &docs, rs, rs).await?);
    }
    Ok(several::Plans {
        together: Some(several::together(&services)?),
        services: reports,
        jobs: Vec::new(),
    })
}

/// Each RayJob's plan, checked against the files' queues or a live cluster when asked.
async fn jobs_checked(opts: &Options, docs: &[(usize, Value)]) -> Result<Vec<rayjob::JobPlan>, PlanError> {
    if opts.to.is_some() {
        return Err(PlanError::Input(
            "--to names the changed spec of a RayService; a RayJob has no upgrade".into(),
        ));
    }
    let mut snap = Snapshot::default();
    fit::add_documents(&mut snap, docs)?;
    let live = if !snap.cluster_queues.is_empty() && opts.kubeconfig.is_none() {
        Some(snap)
    } else if opts.kubeconfig.is_some() || opts.cluster_queue.is_some() {
        let c = super::kube_client(opts.kubeconfig.as_deref())
            .await
            .map_err(PlanError::Kube)?;
        Some(fit::load_live(&c).await?)
    } else {
        None
    };
    let now_ms = jiff::Timestamp::now().as_millisecond();
    let mut out = Vec::new();
    for (_, d) in docs
        .iter()
        .filter(|(_, d)| d.get("kind").and_then(Value::as_str) == Some("RayJob"))
    {
        let job: crate::api::ray::RayJob =
            serde_json::from_value(d.clone()).map_err(|e| PlanError::Input(format!("RayJob: {e}")))?;
        let (mut plan, podsets) = rayjob::compute(&job)?;
        if let Some(snap) = &live {
            rayjob::check_against(
                &mut plan,
                &podsets,
                snap,
                &job,
                opts.cluster_queue.as_deref(),
                now_ms,
            )?;
        }
        out.push(plan);
    }
    Ok(out)
}

/// One service's report, checked against the files' queues or a live cluster when asked.
async fn checked(
    opts: &Options,
    docs: &[(usize, Value)],
    from: &RayService,
    to: &RayService,
) -> Result<Report, PlanError> {
    let (from, to) = (from.clone(), to.clone());
    let mut report = compute(&from, &to)?;
    if let Some(n) = opts.concurrent {
        let extra = phases_extra(&from, &to)?;
        report.concurrent = concurrent(&extra, n);
    }
    let mut snap = Snapshot::default();
    fit::add_documents(&mut snap, docs)?;
    let now_ms = jiff::Timestamp::now().as_millisecond();
    if !snap.cluster_queues.is_empty() && opts.kubeconfig.is_none() {
        check_against(
            &mut report,
            &snap,
            &from,
            &to,
            opts.cluster_queue.as_deref(),
            now_ms,
        )?;
    } else if opts.kubeconfig.is_some() || opts.cluster_queue.is_some() {
        let c = super::kube_client(opts.kubeconfig.as_deref())
            .await
            .map_err(PlanError::Kube)?;
        let live = fit::load_live(&c).await?;
        check_against(
            &mut report,
            &live,
            &from,
            &to,
            opts.cluster_queue.as_deref(),
            now_ms,
        )?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
