//! The two files of Kueue's scheduler performance runner (`test/performance/scheduler`), read as Kueue
//! reads them: the generator config (cohorts of ClusterQueue sets, each with workload sets arriving on a
//! fixed interval; for TAS configs also a topology of generated Nodes and each workload's topology
//! constraint, Kueue's `runner/generator/topology_generator.go`) and the rangespec (the thresholds a
//! run must meet). Also what the config implies before anything runs: the object counts, and the
//! physical lower bound on the wall time.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::api::kueue::PreemptionPolicy;

/// Kueue's generator config: the scheduler configs and the TAS one (`topology`); a DRA section is
/// refused by name.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Generator {
    pub cohorts: Vec<CohortSet>,
    #[serde(default)]
    pub resource_flavor: Option<ResourceFlavor>,
    #[serde(default)]
    pub topology: Option<TopologyConfig>,
    #[serde(default)]
    dra: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceFlavor {
    pub name: String,
    /// The label every generated Node carries with the value `tas`, and the flavor's node label.
    #[serde(default)]
    pub node_label: Option<String>,
    #[serde(default)]
    pub topology_name: Option<String>,
}

/// Kueue's `TopologyConfig`: the Topology's name and its levels from the widest down; the Nodes are
/// every combination of the levels' counts, the last level's `capacity` each.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyConfig {
    pub name: String,
    pub levels: Vec<TopologyLevelConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyLevelConfig {
    pub name: String,
    pub count: u32,
    pub node_label: String,
    #[serde(default)]
    pub capacity: Option<NodeCapacity>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeCapacity {
    #[serde(default, deserialize_with = "opt_number_or_string")]
    pub cpu: Option<String>,
    #[serde(default, deserialize_with = "opt_number_or_string")]
    pub memory: Option<String>,
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
    /// TAS: `required`, `preferred` or `balanced` (a slice-required topology of `sliceSize` pods).
    #[serde(default)]
    pub tas_constraint: Option<String>,
    /// TAS: the node label of the level the constraint names; with it the podset asks for TAS.
    #[serde(default)]
    pub tas_level: Option<String>,
    #[serde(default)]
    pub slice_size: Option<i32>,
}

impl WorkloadTemplate {
    /// The podset's `topologyRequest`, as Kueue's generator builds it (`generateWlSet`): none without
    /// a level; `balanced` is a slice-required topology at that level of `sliceSize` pods.
    pub fn topology_request(&self) -> Option<crate::api::kueue::PodSetTopologyRequest> {
        let level = self.tas_level.clone()?;
        let mut r = crate::api::kueue::PodSetTopologyRequest::default();
        match self.tas_constraint.as_deref() {
            Some("required") => r.required = Some(level),
            Some("preferred") => r.preferred = Some(level),
            Some("balanced") => {
                r.pod_set_slice_required_topology = Some(level);
                r.pod_set_slice_size = self.slice_size.filter(|s| *s > 0);
            }
            _ => {}
        }
        Some(r)
    }
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
/// The most Nodes a topology may generate: each is an object in the API server and in the TAS tree.
pub const MAX_TAS_NODES: u64 = 10_000;
/// What a generated Node offers when the last level names no capacity (Kueue's defaults), and its
/// pods (`.status.allocatable.pods`, the kubelet's default).
pub const DEFAULT_NODE_CPU: &str = "96";
pub const DEFAULT_NODE_MEMORY: &str = "256Gi";
pub const NODE_PODS: i64 = 110;
/// The value of the flavor's node label on every generated Node (Kueue's `tas-node-group: tas`).
pub const NODE_GROUP_VALUE: &str = "tas";

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

/// The topology of a TAS config, checked: what the runner creates before the queues.
#[derive(Clone, Debug)]
pub struct TasPlan {
    pub topology: String,
    /// Per level, widest first: its name (the prefix of its label values), count and node label.
    pub levels: Vec<(String, u32, String)>,
    pub node_cpu: String,
    pub node_memory: String,
    /// The flavor's node label (value [`NODE_GROUP_VALUE`]).
    pub node_group_label: String,
    pub nodes: u64,
}

impl TasPlan {
    /// Every Node: its name and labels (each level's `<name>-<i>`; a `kubernetes.io/hostname` level
    /// carries the node's own name, as a kubelet writes it, so hosts are unique across racks).
    pub fn nodes(&self) -> Vec<(String, BTreeMap<String, String>)> {
        let mut out = Vec::new();
        let mut idx = vec![0u32; self.levels.len()];
        loop {
            let name = std::iter::once("node".to_string())
                .chain(
                    self.levels
                        .iter()
                        .zip(&idx)
                        .map(|((n, _, _), i)| format!("{}{i}", n.chars().next().unwrap_or('l'))),
                )
                .collect::<Vec<_>>()
                .join("-");
            let mut labels = BTreeMap::from([(self.node_group_label.clone(), NODE_GROUP_VALUE.to_string())]);
            for ((n, _, label), i) in self.levels.iter().zip(&idx) {
                let v = if label == crate::api::kueue::tas::HOSTNAME_LABEL {
                    name.clone()
                } else {
                    format!("{n}-{i}")
                };
                labels.insert(label.clone(), v);
            }
            out.push((name, labels));
            // The next combination, the last level fastest.
            let mut d = self.levels.len();
            loop {
                if d == 0 {
                    return out;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.levels[d].1 {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    /// Milli-CPU and pods of one domain at the level labelled `label` (the nodes under it).
    fn domain_room(&self, label: &str) -> Option<(i64, i64)> {
        let at = self.levels.iter().position(|(_, _, l)| l == label)?;
        let nodes: i64 = self.levels[at + 1..]
            .iter()
            .map(|(_, c, _)| i64::from(*c))
            .product();
        let cpu = milli_cpu(&self.node_cpu, "").unwrap_or(0);
        Some((cpu.saturating_mul(nodes), NODE_PODS.saturating_mul(nodes)))
    }
}

/// What a config expands to, checked.
#[derive(Clone, Debug)]
pub struct Plan {
    pub flavor: String,
    pub tas: Option<TasPlan>,
    pub queues: Vec<QueuePlan>,
    pub workloads: u64,
    /// max(last arrival + its runtime, the busiest cohort's CPU·seconds / its nominal quota), ms.
    pub lower_bound_ms: u64,
    /// Labels on every object the run creates (a run on a shared server marks its own).
    pub labels: BTreeMap<String, String>,
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
        if self.dra.is_some() {
            return Err("generator config: dra: DRA configs are not supported; use a scheduler config such as baseline or the TAS config tas".into());
        }
        let tas = self.tas_plan()?;
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
        self.refuse_never_placeable(tas.as_ref())?;
        let work_bound = tally.work_bound();
        Ok(Plan {
            flavor: self
                .resource_flavor
                .as_ref()
                .map_or_else(|| "rf".to_string(), |r| r.name.clone()),
            tas,
            queues: tally.queues,
            workloads: tally.workloads,
            lower_bound_ms: tally.arrival_bound.max(work_bound),
            labels: BTreeMap::new(),
        })
    }
}

impl Generator {
    /// The topology section checked (Kueue's `generateTopologyNodes` and `generateResourceFlavor`
    /// rules: at least two levels, a flavor naming the topology with a node label).
    fn tas_plan(&self) -> Result<Option<TasPlan>, String> {
        let rf = self.resource_flavor.as_ref();
        let Some(t) = &self.topology else {
            if let Some(name) = rf.and_then(|r| r.topology_name.as_ref()) {
                return Err(format!(
                    "resourceFlavor.topologyName: {name:?} names a topology but the config has no topology section"
                ));
            }
            return Ok(None);
        };
        if t.levels.len() < 2 {
            return Err(format!(
                "topology.levels: must have at least 2 levels, got {}",
                t.levels.len()
            ));
        }
        if t.levels.len() > crate::api::kueue::tas::MAX_LEVELS {
            return Err(format!(
                "topology.levels: at most {} levels, got {}",
                crate::api::kueue::tas::MAX_LEVELS,
                t.levels.len()
            ));
        }
        let mut nodes: u64 = 1;
        let mut labels = Vec::new();
        for (i, l) in t.levels.iter().enumerate() {
            if l.count == 0 {
                return Err(format!("topology.levels[{i}].count: must be at least 1"));
            }
            if l.name.is_empty() {
                return Err(format!("topology.levels[{i}].name: must not be empty"));
            }
            if l.node_label.is_empty() || labels.contains(&&l.node_label) {
                return Err(format!(
                    "topology.levels[{i}].nodeLabel: {:?} must be set and differ from the other levels'",
                    l.node_label
                ));
            }
            labels.push(&l.node_label);
            if i + 1 < t.levels.len() && l.capacity.is_some() {
                return Err(format!(
                    "topology.levels[{i}].capacity: only the last level (the nodes) has a capacity"
                ));
            }
            nodes = nodes.saturating_mul(u64::from(l.count));
            if nodes > MAX_TAS_NODES {
                return Err(format!(
                    "topology.levels: the levels' counts make more than {MAX_TAS_NODES} nodes"
                ));
            }
        }
        let last = t.levels.len() - 1;
        let cap = t.levels[last].capacity.clone().unwrap_or_default();
        let node_cpu = cap.cpu.unwrap_or_else(|| DEFAULT_NODE_CPU.to_string());
        let node_memory = cap.memory.unwrap_or_else(|| DEFAULT_NODE_MEMORY.to_string());
        if milli_cpu(&node_cpu, &format!("topology.levels[{last}].capacity.cpu"))? == 0 {
            return Err(format!("topology.levels[{last}].capacity.cpu: must be above 0"));
        }
        crate::api::quantity::Quantity::parse(&node_memory).map_err(|e| {
            format!("topology.levels[{last}].capacity.memory: {node_memory:?} is not a quantity: {e}")
        })?;
        let Some(rf) = rf else {
            return Err("resourceFlavor: a topology needs a resourceFlavor naming it".into());
        };
        if rf.topology_name.as_deref() != Some(t.name.as_str()) {
            return Err(format!(
                "resourceFlavor.topologyName: must be the topology's name {:?}",
                t.name
            ));
        }
        let node_group_label = match rf.node_label.as_deref() {
            Some(l) if !l.is_empty() => l.to_string(),
            _ => return Err("resourceFlavor.nodeLabel: is required when TAS is enabled".into()),
        };
        Ok(Some(TasPlan {
            topology: t.name.clone(),
            levels: t
                .levels
                .iter()
                .map(|l| (l.name.clone(), l.count, l.node_label.clone()))
                .collect(),
            node_cpu,
            node_memory,
            node_group_label,
            nodes,
        }))
    }

    /// Refuses a TAS workload the topology can never place: a level it does not have, a constraint
    /// Kueue does not know, a pod larger than a node, or (required, balanced) all pods or one slice
    /// larger than one domain of its level.
    fn refuse_never_placeable(&self, tas: Option<&TasPlan>) -> Result<(), String> {
        for (ci, c) in self.cohorts.iter().enumerate() {
            for (qi, q) in c.queues_sets.iter().enumerate() {
                for (si, s) in q.workloads_sets.iter().enumerate() {
                    for (wi, w) in s.workloads.iter().enumerate() {
                        let at =
                            format!("cohorts[{ci}].queuesSets[{qi}].workloadsSets[{si}].workloads[{wi}]");
                        check_template(&at, w, tas)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn check_template(at: &str, w: &WorkloadTemplate, tas: Option<&TasPlan>) -> Result<(), String> {
    let Some(level) = &w.tas_level else {
        if w.tas_constraint.is_some() || w.slice_size.is_some() {
            return Err(format!(
                "{at}.tasLevel: must be set with tasConstraint and sliceSize"
            ));
        }
        return Ok(());
    };
    let Some(tas) = tas else {
        return Err(format!(
            "{at}.tasLevel: {level:?} but the config has no topology section"
        ));
    };
    let Some((domain_m, domain_pods)) = tas.domain_room(level) else {
        let known: Vec<&str> = tas.levels.iter().map(|(_, _, l)| l.as_str()).collect();
        return Err(format!(
            "{at}.tasLevel: {level:?} is not a level of topology {:?} ({known:?})",
            tas.topology
        ));
    };
    let constraint = w.tas_constraint.as_deref().unwrap_or_default();
    let slice = match (constraint, w.slice_size) {
        ("required" | "preferred", None) => None,
        ("balanced", Some(n)) if n > 0 => Some(i64::from(n)),
        ("balanced", _) => return Err(format!("{at}.sliceSize: balanced needs a sliceSize above 0")),
        ("required" | "preferred", Some(_)) => {
            return Err(format!("{at}.sliceSize: only with tasConstraint balanced"));
        }
        (other, _) => {
            return Err(format!(
                "{at}.tasConstraint: {other:?} is not one of required, preferred, balanced"
            ));
        }
    };
    let pods = i64::from(w.pod_count.unwrap_or(1).max(1));
    if slice.is_some_and(|n| pods % n != 0) {
        return Err(format!("{at}.sliceSize: podCount {pods} is not a multiple of it"));
    }
    let per_pod = milli_cpu(&w.request, &format!("{at}.request"))?;
    let node_m = milli_cpu(&tas.node_cpu, "")?;
    let together = match (constraint, slice) {
        ("required", _) => pods,
        (_, Some(n)) => n,
        _ => 1,
    };
    if per_pod > node_m || per_pod.saturating_mul(together) > domain_m || together > domain_pods {
        return Err(format!(
            "{at}: {together} pod(s) of {} CPU must go together in one domain of {level:?}, which holds {} CPU and {domain_pods} pods on nodes of {} CPU: it could never be placed",
            per_pod as f64 / 1000.0,
            domain_m as f64 / 1000.0,
            node_m as f64 / 1000.0
        ));
    }
    Ok(())
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
        "tas" => Some((
            include_str!("../../../config/bench/tas/generator.yaml"),
            include_str!("../../../config/bench/tas/rangespec.yaml"),
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
        let dra = format!("dra: {{devices: 1}}\n{base}");
        assert!(
            Generator::parse(&dra)
                .unwrap()
                .plan(1.0)
                .unwrap_err()
                .contains("dra")
        );
        assert!(Generator::parse("cohorts: [{className: c, count: 1, queuesSets: [], extra: 1}]").is_err());
    }

    // Kueue test/performance/scheduler/configs/tas: 1 block x 10 racks x 64 nodes of 96 CPU; the
    // baseline's 15,000 workloads and 66 s bound; Kueue's rangespec (wall 482 s, usage 57%).
    #[test]
    fn tas_expands_to_640_nodes_and_the_baselines_load() {
        let (g, r) = builtin("tas").unwrap();
        let generator = Generator::parse(g).unwrap();
        let plan = generator.plan(1.0).unwrap();
        assert_eq!((plan.queues.len(), plan.workloads), (30, 15_000));
        assert_eq!(plan.lower_bound_ms, 66_000);
        assert_eq!(plan.flavor, "tas-flavor");
        let t = plan.tas.as_ref().unwrap();
        assert_eq!(
            (t.topology.as_str(), t.nodes, t.node_cpu.as_str()),
            ("default-topology", 640, "96")
        );
        let nodes = t.nodes();
        assert_eq!(nodes.len(), 640);
        let (name, labels) = &nodes[65];
        assert_eq!(name, "node-b0-r1-n1");
        assert_eq!(labels["cloud.provider.com/topology-rack"], "rack-1");
        assert_eq!(labels["kubernetes.io/hostname"], "node-b0-r1-n1");
        assert_eq!(labels["tas-node-group"], "tas");
        let hosts: std::collections::BTreeSet<&String> = nodes.iter().map(|(n, _)| n).collect();
        assert_eq!(hosts.len(), 640);
        let w = |class: &str| {
            generator.cohorts[0].queues_sets[0]
                .workloads_sets
                .iter()
                .flat_map(|s| &s.workloads)
                .find(|w| w.class_name == class)
                .unwrap()
                .topology_request()
                .unwrap()
        };
        let rack = Some("cloud.provider.com/topology-rack".to_string());
        assert_eq!(w("small-required-rack").required, rack);
        assert_eq!(w("medium-preferred-rack").preferred, rack);
        let b = w("large-balanced-rack");
        assert_eq!(
            (b.pod_set_slice_required_topology, b.pod_set_slice_size),
            (rack, Some(4))
        );
        let r = RangeSpec::parse(r).unwrap();
        assert_eq!(r.cmd.max_wall_ms, Some(Number(482_000.0)));
        assert_eq!(r.cluster_queue_classes_min_usage["cq"], Number(57.0));
        assert_eq!(r.wl_classes_max_avg_time_to_admission_ms.len(), 9);
    }

    #[test]
    fn bad_tas_sections_are_refused_by_field() {
        let base = builtin("tas").unwrap().0;
        let err = |from: &str, to: &str| {
            let g = base.replacen(from, to, 1);
            assert_ne!(g, base, "{from}");
            Generator::parse(&g).unwrap().plan(1.0).unwrap_err()
        };
        let e = err("tasLevel: cloud.provider.com/topology-rack}", "tasLevel: zone}");
        assert!(
            e.contains("workloads[0].tasLevel") && e.contains("\"zone\" is not a level"),
            "{e}"
        );
        let e = err("tasConstraint: required", "tasConstraint: strict");
        assert!(e.contains("tasConstraint: \"strict\""), "{e}");
        let e = err("sliceSize: 4", "sliceSize: 0");
        assert!(e.contains("workloads[0].sliceSize"), "{e}");
        let e = err("sliceSize: 4", "sliceSize: 3");
        assert!(e.contains("not a multiple"), "{e}");
        let e = err("topologyName: default-topology", "topologyName: other");
        assert!(e.contains("resourceFlavor.topologyName"), "{e}");
        let e = err("  nodeLabel: tas-node-group\n", "");
        assert!(e.contains("resourceFlavor.nodeLabel"), "{e}");
        let e = err("{name: rack, count: 10", "{name: rack, count: 100000");
        assert!(e.contains("more than 10000 nodes"), "{e}");
        let e = err("{cpu: 96, memory: 256Gi}", "{cpu: 1, memory: 256Gi}");
        assert!(e.contains("could never be placed"), "{e}");
        let e = err("{cpu: 96, memory: 256Gi}", "{cpu: many, memory: 256Gi}");
        assert!(e.contains("topology.levels[2].capacity.cpu"), "{e}");
        // Large required: 8 pods of 2.5 CPU in one rack of 2 nodes of 6 CPU (12 CPU) cannot be.
        let small = base
            .replacen("count: 64", "count: 2", 1)
            .replacen("cpu: 96", "cpu: 6", 1);
        let e = Generator::parse(&small).unwrap().plan(1.0).unwrap_err();
        assert!(
            e.contains("8 pod(s) of 2.5 CPU") && e.contains("could never be placed"),
            "{e}"
        );
        let no_topology = base.split("resourceFlavor:").nth(1).unwrap();
        let e = Generator::parse(&format!("resourceFlavor:{no_topology}"))
            .unwrap()
            .plan(1.0)
            .unwrap_err();
        assert!(e.contains("no topology section"), "{e}");
    }
}
