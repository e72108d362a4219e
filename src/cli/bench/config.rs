//! The two files of Kueue's scheduler performance runner (`test/performance/scheduler`), read as Kueue
//! reads them: the generator config (cohorts of ClusterQueue sets, each with workload sets arriving on a
//! fixed interval) and the rangespec (the thresholds a run must meet). Also what the config implies
//! before anything runs: the object counts, and the physical lower bound on the wall time.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::api::kueue::PreemptionPolicy;

/// Kueue's generator config. Only the scheduler configs are supported: topology (TAS) and DRA
/// sections are refused by name.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Generator {
    pub cohorts: Vec<CohortSet>,
    #[serde(default)]
    pub resource_flavor: Option<ResourceFlavor>,
    #[serde(default)]
    topology: Option<serde_json::Value>,
    #[serde(default)]
    dra: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavor {
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CohortSet {
    pub class_name: String,
    pub count: u32,
    pub queues_sets: Vec<QueuesSet>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueuesSet {
    pub class_name: String,
    pub count: u32,
    #[serde(deserialize_with = "number_or_string")]
    pub nominal_quota: String,
    #[serde(default, deserialize_with = "opt_number_or_string")]
    pub borrowing_limit: Option<String>,
    #[serde(default)]
    pub reclaim_within_cohort: Option<String>,
    #[serde(default)]
    pub within_cluster_queue: Option<String>,
    pub workloads_sets: Vec<WorkloadsSet>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadsSet {
    pub count: u32,
    pub creation_interval_ms: u64,
    pub workloads: Vec<WorkloadTemplate>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadTemplate {
    pub class_name: String,
    pub runtime_ms: u64,
    #[serde(default)]
    pub priority: i32,
    #[serde(deserialize_with = "number_or_string")]
    pub request: String,
    #[serde(default)]
    pub pod_count: Option<u32>,
}

/// Kueue's rangespec: the thresholds of a passing run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeSpec {
    #[serde(default)]
    pub cmd: CmdRange,
    /// Per ClusterQueue class: the least usage, in percent.
    #[serde(default)]
    pub cluster_queue_classes_min_usage: BTreeMap<String, Number>,
    /// Per workload class: the most average time to admission, in ms.
    #[serde(default)]
    pub wl_classes_max_avg_time_to_admission_ms: BTreeMap<String, Number>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CmdRange {
    #[serde(default)]
    pub max_wall_ms: Option<Number>,
    /// Average CPU use of the process, in millicores.
    #[serde(default, rename = "mCPU")]
    pub m_cpu: Option<Number>,
    /// Peak resident set, in KiB.
    #[serde(default)]
    pub maxrss: Option<Number>,
}

/// A YAML number as Kueue's files write them: `425_000`, `55`, `31.6`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Number(pub f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = number_or_string(d)?;
        s.replace('_', "")
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(Number)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a number")))
    }
}

fn number_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum V {
        I(i64),
        F(f64),
        S(String),
    }
    Ok(match V::deserialize(d)? {
        V::I(i) => i.to_string(),
        V::F(f) => f.to_string(),
        V::S(s) => s,
    })
}

fn opt_number_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    number_or_string(d).map(Some)
}

/// Above these the run is refused: the runner keeps a record per workload and an object per queue.
pub const MAX_WORKLOADS: u64 = 1_000_000;
pub const MAX_CLUSTER_QUEUES: u64 = 10_000;
/// The most a single interval or runtime may be (one hour), so no run waits forever on a typo.
pub const MAX_MS: u64 = 3_600_000;

/// One ClusterQueue the run creates, with what arrives at it.
#[derive(Clone, Debug)]
pub struct QueuePlan {
    pub name: String,
    pub class: String,
    pub cohort: String,
    /// Milli-CPU.
    pub nominal_m: i64,
    pub borrowing_limit_m: Option<i64>,
    pub reclaim_within_cohort: PreemptionPolicy,
    pub within_cluster_queue: PreemptionPolicy,
    pub sets: Vec<WorkloadsSet>,
}

/// What a config expands to, checked.
#[derive(Clone, Debug)]
pub struct Plan {
    pub flavor: String,
    pub queues: Vec<QueuePlan>,
    pub workloads: u64,
    /// max(last arrival + its runtime, the busiest cohort's CPU·seconds / its nominal quota), ms.
    pub lower_bound_ms: u64,
}

/// Milli-CPU of a quantity as the generator writes it ("20", "500m", 1.5).
pub fn milli_cpu(q: &str, field: &str) -> Result<i64, String> {
    let parsed = crate::api::quantity::Quantity::parse(q)
        .map_err(|e| format!("{field}: {q:?} is not a quantity: {e}"))?;
    let m = crate::api::quantity::resource_value("cpu", &parsed);
    if m < 0 {
        return Err(format!("{field}: {q:?} is negative"));
    }
    Ok(m)
}

fn policy(v: &Option<String>, field: &str) -> Result<PreemptionPolicy, String> {
    match v {
        None => Ok(PreemptionPolicy::Never),
        Some(s) => serde_json::from_value(serde_json::Value::String(s.clone())).map_err(|_| {
            format!("{field}: {s:?} is not one of Never, LowerPriority, LowerOrNewerEqualPriority, Any")
        }),
    }
}

impl Generator {
    pub fn parse(yaml: &str) -> Result<Generator, String> {
        serde_saphyr::from_str(yaml).map_err(|e| format!("generator config: {e}"))
    }

    /// Expands the config with workload counts multiplied by `scale` (rounded, at least 1 per set),
    /// refusing what cannot run: TAS/DRA sections, empty sets, absurd counts, a workload larger than
    /// its ClusterQueue can ever hold.
    pub fn plan(&self, scale: f64) -> Result<Plan, String> {
        if self.topology.is_some() || self.dra.is_some() {
            return Err("generator config: topology and dra sections (TAS configs) are not supported; use a scheduler config such as baseline".into());
        }
        if !(scale.is_finite() && scale > 0.0 && scale <= 100.0) {
            return Err(format!("--scale {scale}: must be above 0 and at most 100"));
        }
        if self.cohorts.is_empty() {
            return Err("generator config: cohorts: must contain at least one cohort".into());
        }
        let mut tally = Tally::default();
        for (ci, cset) in self.cohorts.iter().enumerate() {
            if u64::from(cset.count) > MAX_CLUSTER_QUEUES {
                return Err(format!(
                    "cohorts[{ci}].count: {} is more than {MAX_CLUSTER_QUEUES}",
                    cset.count
                ));
            }
            for ch in 0..cset.count {
                let cohort = format!("{}-{ch}", cset.class_name);
                for (qi, qset) in cset.queues_sets.iter().enumerate() {
                    let at = format!("cohorts[{ci}].queuesSets[{qi}]");
                    tally.queues_set(&at, qi, qset, &cohort, scale)?;
                }
            }
        }
        if tally.workloads == 0 {
            return Err("generator config: no workloads".into());
        }
        tally.refuse_never_admissible()?;
        let work_bound = tally.work_bound();
        Ok(Plan {
            flavor: self
                .resource_flavor
                .as_ref()
                .map_or_else(|| "rf".to_string(), |r| r.name.clone()),
            queues: tally.queues,
            workloads: tally.workloads,
            lower_bound_ms: tally.arrival_bound.max(work_bound),
        })
    }
}

/// What `plan` gathers while it walks the config.
#[derive(Default)]
struct Tally {
    queues: Vec<QueuePlan>,
    workloads: u64,
    /// The last arrival plus its runtime, ms.
    arrival_bound: u64,
    /// Per cohort: CPU-milli x ms of its workloads, and its nominal quota (milli-CPU).
    cohort_work: BTreeMap<String, (f64, i64)>,
    /// Every workload template, checked against its cohort's quota once all are known.
    templates: Vec<Template>,
}

/// One workload template: its cohort, its queue's ceiling, its request, where it is written.
struct Template {
    cohort: String,
    ceiling: i64,
    req: i64,
    at: String,
    class: String,
    qclass: String,
}

impl Tally {
    /// One queues set of one cohort: its quota, its workload sets, and its `count` ClusterQueues.
    fn queues_set(
        &mut self,
        at: &str,
        qi: usize,
        qset: &QueuesSet,
        cohort: &str,
        scale: f64,
    ) -> Result<(), String> {
        let nominal_m = milli_cpu(&qset.nominal_quota, &format!("{at}.nominalQuota"))?;
        let borrowing_limit_m = qset
            .borrowing_limit
            .as_deref()
            .map(|b| milli_cpu(b, &format!("{at}.borrowingLimit")))
            .transpose()?;
        let ceiling = nominal_m.saturating_add(borrowing_limit_m.unwrap_or(i64::MAX / 4));
        let mut sets = Vec::new();
        // CPU-milli x ms of one queue of this set.
        let mut queue_work = 0.0;
        for (si, set) in qset.workloads_sets.iter().enumerate() {
            let at = format!("{at}.workloadsSets[{si}]");
            sets.push(self.workloads_set(&at, set, qset, cohort, ceiling, scale, &mut queue_work)?);
        }
        for q in 0..qset.count {
            self.queues.push(QueuePlan {
                // Kueue's generator names: <class>-<set>-<index>-<cohort>.
                name: format!("{}-{qi}-{q}-{cohort}", qset.class_name),
                class: qset.class_name.clone(),
                cohort: cohort.to_string(),
                nominal_m,
                borrowing_limit_m,
                reclaim_within_cohort: policy(
                    &qset.reclaim_within_cohort,
                    &format!("{at}.reclaimWithinCohort"),
                )?,
                within_cluster_queue: policy(
                    &qset.within_cluster_queue,
                    &format!("{at}.withinClusterQueue"),
                )?,
                sets: sets.clone(),
            });
            if self.queues.len() as u64 > MAX_CLUSTER_QUEUES {
                return Err(format!(
                    "the config makes more than {MAX_CLUSTER_QUEUES} ClusterQueues"
                ));
            }
        }
        let e = self.cohort_work.entry(cohort.to_string()).or_default();
        e.0 += queue_work * f64::from(qset.count);
        e.1 =
            e.1.saturating_add(nominal_m.saturating_mul(i64::from(qset.count)));
        Ok(())
    }

    /// One workload set of a queue: its scaled count, checked against the limits, with its
    /// templates noted and its work added to `queue_work`.
    #[allow(clippy::too_many_arguments)]
    fn workloads_set(
        &mut self,
        at: &str,
        set: &WorkloadsSet,
        qset: &QueuesSet,
        cohort: &str,
        ceiling: i64,
        scale: f64,
        queue_work: &mut f64,
    ) -> Result<WorkloadsSet, String> {
        if set.workloads.is_empty() {
            return Err(format!("{at}.workloads: must name at least one workload"));
        }
        if set.creation_interval_ms > MAX_MS {
            return Err(format!(
                "{at}.creationIntervalMs: {} is above one hour",
                set.creation_interval_ms
            ));
        }
        let count = ((f64::from(set.count) * scale).round() as u32).max(1);
        let per_queue = u64::from(count) * set.workloads.len() as u64;
        self.workloads = self
            .workloads
            .saturating_add(per_queue.saturating_mul(u64::from(qset.count)));
        if self.workloads > MAX_WORKLOADS {
            return Err(format!(
                "the config (at --scale {scale}) makes more than {MAX_WORKLOADS} workloads"
            ));
        }
        let last = set.workloads.last().map_or(0, |w| w.runtime_ms);
        self.arrival_bound = self
            .arrival_bound
            .max(per_queue * set.creation_interval_ms + last);
        for (wi, w) in set.workloads.iter().enumerate() {
            let at = format!("{at}.workloads[{wi}]");
            if w.runtime_ms > MAX_MS {
                return Err(format!("{at}.runtimeMs: {} is above one hour", w.runtime_ms));
            }
            let pods = i64::from(w.pod_count.unwrap_or(1).max(1));
            let req = milli_cpu(&w.request, &format!("{at}.request"))?.saturating_mul(pods);
            self.templates.push(Template {
                cohort: cohort.to_string(),
                ceiling,
                req,
                at,
                class: w.class_name.clone(),
                qclass: qset.class_name.clone(),
            });
            *queue_work += req as f64 * w.runtime_ms as f64 * f64::from(count);
        }
        Ok(WorkloadsSet { count, ..set.clone() })
    }

    /// Refuses a workload larger than its ClusterQueue can ever hold (its nominal quota and
    /// borrowing limit, within its cohort's quota).
    fn refuse_never_admissible(&self) -> Result<(), String> {
        for Template {
            cohort,
            ceiling,
            req,
            at,
            class,
            qclass,
        } in &self.templates
        {
            let cap = (*ceiling).min(self.cohort_work.get(cohort).map_or(0, |c| c.1));
            if *req > cap {
                return Err(format!(
                    "{at}: class {class} requests {} CPU but a ClusterQueue of class {qclass} can hold at most {} (its nominalQuota + borrowingLimit, within its cohort's quota): it could never be admitted",
                    *req as f64 / 1000.0,
                    cap as f64 / 1000.0
                ));
            }
        }
        Ok(())
    }

    /// The busiest cohort's CPU·seconds over its nominal quota, ms.
    fn work_bound(&self) -> u64 {
        self.cohort_work
            .values()
            .filter(|(_, quota)| *quota > 0)
            .map(|(work, quota)| (work / *quota as f64).ceil() as u64)
            .max()
            .unwrap_or(0)
    }
}

impl RangeSpec {
    pub fn parse(yaml: &str) -> Result<RangeSpec, String> {
        serde_saphyr::from_str(yaml).map_err(|e| format!("rangespec: {e}"))
    }
}

/// A config shipped with quotagate, by name, with its rangespec.
pub fn builtin(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "baseline" => Some((
            include_str!("../../../config/bench/baseline/generator.yaml"),
            include_str!("../../../config/bench/baseline/rangespec.yaml"),
        )),
        "large-scale" => Some((
            include_str!("../../../config/bench/large-scale/generator.yaml"),
            include_str!("../../../config/bench/large-scale/rangespec.yaml"),
        )),
        "ci" => Some((
            include_str!("../../../config/bench/ci/generator.yaml"),
            include_str!("../../../config/bench/ci/rangespec.yaml"),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_expands_to_kueues_counts_and_a_66_second_bound() {
        let (g, r) = builtin("baseline").unwrap();
        let plan = Generator::parse(g).unwrap().plan(1.0).unwrap();
        assert_eq!(plan.queues.len(), 30);
        assert_eq!(plan.workloads, 15_000);
        assert_eq!(plan.lower_bound_ms, 66_000);
        assert_eq!(plan.queues[0].name, "cq-0-0-cohort-0");
        let r = RangeSpec::parse(r).unwrap();
        assert_eq!(r.cmd.max_wall_ms, Some(Number(425_000.0)));
        assert_eq!(
            r.wl_classes_max_avg_time_to_admission_ms["large"],
            Number(23_000.0)
        );
        let half = Generator::parse(g).unwrap().plan(0.5).unwrap();
        assert_eq!(half.workloads, 7_500);
    }

    #[test]
    fn large_scale_is_fifty_thousand_workloads() {
        let (g, _) = builtin("large-scale").unwrap();
        let plan = Generator::parse(g).unwrap().plan(1.0).unwrap();
        assert_eq!((plan.queues.len(), plan.workloads), (1000, 50_000));
    }

    #[test]
    fn impossible_or_absurd_configs_are_refused_by_field() {
        let base = builtin("ci").unwrap().0;
        let too_big = base.replace("request: 20", "request: 500");
        let e = Generator::parse(&too_big).unwrap().plan(1.0).unwrap_err();
        assert!(
            e.contains("workloads[0]") && e.contains("could never be admitted"),
            "{e}"
        );
        let huge = base.replace("count: 70", "count: 4000000000");
        let e = Generator::parse(&huge).unwrap().plan(1.0).unwrap_err();
        assert!(e.contains("more than 1000000 workloads"), "{e}");
        let e = Generator::parse(base).unwrap().plan(f64::NAN).unwrap_err();
        assert!(e.contains("--scale"), "{e}");
        let bad = base.replace("nominalQuota: 20", "nominalQuota: twenty");
        let e = Generator::parse(&bad).unwrap().plan(1.0).unwrap_err();
        assert!(e.contains("nominalQuota"), "{e}");
        let tas = format!("topology: {{levels: [rack]}}\n{base}");
        assert!(
            Generator::parse(&tas)
                .unwrap()
                .plan(1.0)
                .unwrap_err()
                .contains("TAS")
        );
        assert!(Generator::parse("cohorts: [{className: c, count: 1, queuesSets: [], extra: 1}]").is_err());
    }
}
