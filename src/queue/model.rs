//! The admission core's own input model: plain structs, independent of the Kubernetes API types
//! (conversions live in `convert.rs`). Builders make test fixtures short.

use std::collections::BTreeMap;
use std::fmt;

use super::amount::Amount;

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadKey {
    pub namespace: String,
    pub name: String,
}

impl WorkloadKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        WorkloadKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueingStrategy {
    StrictFifo,
    #[default]
    BestEffortFifo,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WithinClusterQueue {
    #[default]
    Never,
    LowerPriority,
    LowerOrNewerEqualPriority,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReclaimWithinCohort {
    #[default]
    Never,
    LowerPriority,
    Any,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BorrowWithinCohortPolicy {
    #[default]
    Never,
    LowerPriority,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BorrowWithinCohort {
    pub policy: BorrowWithinCohortPolicy,
    pub max_priority_threshold: Option<i32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreemptionPolicy {
    pub within_cluster_queue: WithinClusterQueue,
    pub reclaim_within_cohort: ReclaimWithinCohort,
    pub borrow_within_cohort: BorrowWithinCohort,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FungibilityPolicy {
    MayStopSearch,
    TryNextFlavor,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FungibilityPreference {
    #[default]
    BorrowingOverPreemption,
    PreemptionOverBorrowing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlavorFungibility {
    pub when_can_borrow: FungibilityPolicy,
    pub when_can_preempt: FungibilityPolicy,
    pub preference: FungibilityPreference,
}

impl Default for FlavorFungibility {
    /// Kueue's defaults: stop at a flavor that fits by borrowing, try the next one before preempting.
    fn default() -> Self {
        FlavorFungibility {
            when_can_borrow: FungibilityPolicy::MayStopSearch,
            when_can_preempt: FungibilityPolicy::TryNextFlavor,
            preference: FungibilityPreference::BorrowingOverPreemption,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StopPolicy {
    #[default]
    None,
    Hold,
    HoldAndDrain,
}

/// Quota of one resource in one flavor. `None` limits mean unlimited borrowing / lend everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceQuota {
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlavorQuotas {
    pub name: String,
    /// resource name -> quota, for every covered resource of the group.
    pub resources: BTreeMap<String, ResourceQuota>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceGroup {
    pub covered_resources: Vec<String>,
    /// In the order flavors are tried.
    pub flavors: Vec<FlavorQuotas>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    pub op: SelectorOp,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let v = labels.get(&self.key);
        let int = |s: &str| s.parse::<i64>().ok();
        match self.op {
            SelectorOp::In => v.is_some_and(|v| self.values.contains(v)),
            SelectorOp::NotIn => v.is_none_or(|v| !self.values.contains(v)),
            SelectorOp::Exists => v.is_some(),
            SelectorOp::DoesNotExist => v.is_none(),
            SelectorOp::Gt | SelectorOp::Lt => {
                let (Some(have), Some(want)) =
                    (v.and_then(|v| int(v)), self.values.first().and_then(|w| int(w)))
                else {
                    return false;
                };
                if self.op == SelectorOp::Gt {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// A label selector over namespace labels. `ClusterQueueModel::namespace_selector == None`
/// matches no namespace (Kueue's nil selector); an empty selector matches all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterQueueModel {
    pub name: String,
    pub cohort: Option<String>,
    pub resource_groups: Vec<ResourceGroup>,
    pub queueing_strategy: QueueingStrategy,
    pub preemption: PreemptionPolicy,
    pub flavor_fungibility: FlavorFungibility,
    pub stop_policy: StopPolicy,
    pub namespace_selector: Option<LabelSelector>,
    /// Deleted, kept by its finalizer while workloads hold quota in it: it admits nothing more
    /// (Kueue's `terminating` ClusterQueue status).
    pub terminating: bool,
    /// `spec.fairSharing.weight`; used only when fair sharing is on.
    pub fair_weight: FairWeight,
    /// `spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing`: pending workloads are
    /// ordered by their LocalQueue's recent usage first (when the feature is configured).
    pub admission_fair_sharing: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CohortModel {
    pub name: String,
    pub parent: Option<String>,
    pub resource_groups: Vec<ResourceGroup>,
    /// `spec.fairSharing.weight`; used only when fair sharing is on.
    pub fair_weight: FairWeight,
}

/// A fair-sharing weight in nano-units, exact for any Kubernetes quantity Kueue accepts as a
/// weight (0, or at least 10^-9). 0 means an infinite share while borrowing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FairWeight(pub i64);

impl Default for FairWeight {
    /// Kueue's default weight, 1.
    fn default() -> Self {
        FairWeight(1_000_000_000)
    }
}

impl FairWeight {
    /// A weight from a decimal value (test fixtures and the CLI).
    pub fn of(w: f64) -> FairWeight {
        FairWeight((w * 1e9).round() as i64)
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

/// Kueue's `fairSharing.preemptionStrategies` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairPreemptionStrategy {
    /// Rule S2-a: the preemptor's share with its workload is at most the target's share without
    /// the victim.
    LessThanOrEqualToFinalShare,
    /// Rule S2-b: the preemptor's share with its workload is below the target's share before.
    LessThanInitialShare,
}

/// Fair sharing turned on (Kueue's `fairSharing` config section).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FairSharingConfig {
    /// Never empty; Kueue's default is both strategies, in this order.
    pub strategies: Vec<FairPreemptionStrategy>,
}

impl Default for FairSharingConfig {
    fn default() -> Self {
        FairSharingConfig {
            strategies: vec![
                FairPreemptionStrategy::LessThanOrEqualToFinalShare,
                FairPreemptionStrategy::LessThanInitialShare,
            ],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty key with `exists` tolerates every taint.
    pub key: String,
    pub exists: bool,
    pub value: String,
    /// None tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self.effect.as_ref().is_some_and(|e| *e != t.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        self.key == t.key && (self.exists || self.value == t.value)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlavorModel {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
    pub node_taints: Vec<Taint>,
    pub tolerations: Vec<Toleration>,
    /// `spec.topologyName`: a TAS flavor, whose podsets are placed over that Topology's domains.
    pub topology: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodSetModel {
    pub name: String,
    pub count: i64,
    /// `minCount`: partial admission may run it with fewer pods, down to this many.
    pub min_count: Option<i64>,
    /// Per-pod requests in accounting units (see `requests.rs`).
    pub requests: BTreeMap<String, Amount>,
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms are ORed, requirements inside a term ANDed.
    pub affinity_terms: Vec<Vec<Requirement>>,
    pub tolerations: Vec<Toleration>,
    /// `topologyRequest`: where its pods go in a TAS flavor's topology.
    pub topology: Option<super::topology::TopologyRequest>,
    /// Its pods that already run and their domains (a replacement slice's podset, from the slice
    /// it replaces): placement counts them there and places only the rest.
    pub running: Option<super::topology::Placement>,
}

impl PodSetModel {
    pub fn total(&self, resource: &str) -> Amount {
        self.requests
            .get(resource)
            .copied()
            .unwrap_or_default()
            .times(self.count)
    }
}

/// Flavors chosen for one podset at admission.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSetAssignment {
    pub name: String,
    /// resource -> flavor
    pub flavors: BTreeMap<String, String>,
    /// resource -> total amount for `count` pods
    pub resource_usage: BTreeMap<String, Amount>,
    pub count: i64,
    /// In a TAS flavor: the domains its pods go to.
    pub topology: Option<super::topology::Placement>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    pub cluster_queue: String,
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadModel {
    pub key: WorkloadKey,
    pub uid: String,
    /// `kueue.x-k8s.io/job-uid`, named in the messages of the workloads it preempts.
    pub job_uid: Option<String>,
    /// The ClusterQueue the workload's LocalQueue points to.
    pub cluster_queue: String,
    /// `spec.queueName`: the LocalQueue (in the workload's namespace), for admission fair sharing.
    pub local_queue: String,
    pub priority: i32,
    /// Queue-order timestamp (creation, or eviction time when requeued), in any monotonic unit.
    pub timestamp: i64,
    pub podsets: Vec<PodSetModel>,
    /// Labels of the workload's namespace, for the ClusterQueue's namespaceSelector.
    pub namespace_labels: BTreeMap<String, String>,
    /// `kueue.x-k8s.io/workload-slice-replacement-for`: the admitted slice this one replaces.
    pub replacement_for: Option<WorkloadKey>,
    /// A slice of an upgrade in flight (a RayService with a pending cluster): what the chain may
    /// still hold and what it keeps once done, for the banker's check (`banker.rs`).
    pub upgrade: Option<UpgradeClaim>,
}

/// What an upgrade in flight asks of the quota, per resource in accounting units: `peak`, the
/// most its slice chain holds at any state until it finishes; `done`, what it holds once finished
/// (the new cluster alone). Computed by the job adapter from the spec and the live children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeClaim {
    pub peak: BTreeMap<String, Amount>,
    pub done: BTreeMap<String, Amount>,
}

// ---- builders (used by tests, benches and the controllers' fixtures) ----

impl ClusterQueueModel {
    pub fn build(name: &str) -> Self {
        ClusterQueueModel {
            name: name.to_string(),
            cohort: None,
            resource_groups: Vec::new(),
            queueing_strategy: QueueingStrategy::default(),
            preemption: PreemptionPolicy::default(),
            flavor_fungibility: FlavorFungibility::default(),
            stop_policy: StopPolicy::None,
            namespace_selector: Some(LabelSelector::default()),
            terminating: false,
            fair_weight: FairWeight::default(),
            admission_fair_sharing: false,
        }
    }
    pub fn weight(mut self, w: f64) -> Self {
        self.fair_weight = FairWeight::of(w);
        self
    }
    pub fn cohort(mut self, c: &str) -> Self {
        self.cohort = Some(c.to_string());
        self
    }
    /// Adds a flavor with nominal quotas; consecutive flavors over the same resources share a group.
    pub fn flavor(self, flavor: &str, quotas: &[(&str, i64)]) -> Self {
        let q = quotas
            .iter()
            .map(|(r, n)| (*r, *n, None, None))
            .collect::<Vec<_>>();
        self.flavor_limits(flavor, &q)
    }
    /// (resource, nominal, borrowingLimit, lendingLimit)
    pub fn flavor_limits(mut self, flavor: &str, quotas: &[(&str, i64, Option<i64>, Option<i64>)]) -> Self {
        self.resource_groups = push_flavor(std::mem::take(&mut self.resource_groups), flavor, quotas);
        self
    }
    pub fn strategy(mut self, s: QueueingStrategy) -> Self {
        self.queueing_strategy = s;
        self
    }
    pub fn preemption(mut self, p: PreemptionPolicy) -> Self {
        self.preemption = p;
        self
    }
    pub fn within(mut self, w: WithinClusterQueue) -> Self {
        self.preemption.within_cluster_queue = w;
        self
    }
    pub fn reclaim(mut self, r: ReclaimWithinCohort) -> Self {
        self.preemption.reclaim_within_cohort = r;
        self
    }
    pub fn fungibility(mut self, f: FlavorFungibility) -> Self {
        self.flavor_fungibility = f;
        self
    }
    pub fn stop(mut self, s: StopPolicy) -> Self {
        self.stop_policy = s;
        self
    }
}

impl CohortModel {
    pub fn build(name: &str) -> Self {
        CohortModel {
            name: name.to_string(),
            ..Default::default()
        }
    }
    pub fn parent(mut self, p: &str) -> Self {
        self.parent = Some(p.to_string());
        self
    }
    pub fn weight(mut self, w: f64) -> Self {
        self.fair_weight = FairWeight::of(w);
        self
    }
    pub fn flavor_limits(mut self, flavor: &str, quotas: &[(&str, i64, Option<i64>, Option<i64>)]) -> Self {
        self.resource_groups = push_flavor(std::mem::take(&mut self.resource_groups), flavor, quotas);
        self
    }
}

fn push_flavor(
    mut groups: Vec<ResourceGroup>,
    flavor: &str,
    quotas: &[(&str, i64, Option<i64>, Option<i64>)],
) -> Vec<ResourceGroup> {
    let covered: Vec<String> = quotas.iter().map(|q| q.0.to_string()).collect();
    let fq = FlavorQuotas {
        name: flavor.to_string(),
        resources: quotas
            .iter()
            .map(|(r, n, b, l)| {
                let q = ResourceQuota {
                    nominal: Amount(*n),
                    borrowing_limit: b.map(Amount),
                    lending_limit: l.map(Amount),
                };
                (r.to_string(), q)
            })
            .collect(),
    };
    match groups.iter_mut().find(|g| g.covered_resources == covered) {
        Some(g) => g.flavors.push(fq),
        None => groups.push(ResourceGroup {
            covered_resources: covered,
            flavors: vec![fq],
        }),
    }
    groups
}

impl FlavorModel {
    pub fn build(name: &str) -> Self {
        FlavorModel {
            name: name.to_string(),
            ..Default::default()
        }
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.node_labels.insert(k.to_string(), v.to_string());
        self
    }
    pub fn with_topology(mut self, topology: &str) -> Self {
        self.topology = Some(topology.to_string());
        self
    }
    pub fn taint(mut self, k: &str, v: &str, effect: TaintEffect) -> Self {
        self.node_taints.push(Taint {
            key: k.to_string(),
            value: v.to_string(),
            effect,
        });
        self
    }
}

impl PodSetModel {
    pub fn build(name: &str, count: i64, requests: &[(&str, i64)]) -> Self {
        PodSetModel {
            name: name.to_string(),
            count,
            requests: requests
                .iter()
                .map(|(r, v)| (r.to_string(), Amount(*v)))
                .collect(),
            ..Default::default()
        }
    }
    pub fn min_count(mut self, min: i64) -> Self {
        self.min_count = Some(min);
        self
    }
    pub fn with_topology(mut self, req: super::topology::TopologyRequest) -> Self {
        self.topology = Some(req);
        self
    }
    pub fn selector(mut self, k: &str, v: &str) -> Self {
        self.node_selector.insert(k.to_string(), v.to_string());
        self
    }
    pub fn tolerate(mut self, k: &str, v: &str) -> Self {
        self.tolerations.push(Toleration {
            key: k.to_string(),
            exists: false,
            value: v.to_string(),
            effect: None,
        });
        self
    }
}

impl WorkloadModel {
    /// A one-podset workload named `name` in namespace `ns`, `count` pods of `requests` each.
    pub fn build(ns: &str, name: &str, cq: &str) -> Self {
        WorkloadModel {
            key: WorkloadKey::new(ns, name),
            uid: format!("uid-{ns}-{name}"),
            cluster_queue: cq.to_string(),
            ..Default::default()
        }
    }
    pub fn podset(mut self, ps: PodSetModel) -> Self {
        self.podsets.push(ps);
        self
    }
    /// Shorthand for one podset "main" with one pod.
    pub fn request(self, requests: &[(&str, i64)]) -> Self {
        self.podset(PodSetModel::build("main", 1, requests))
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    pub fn at(mut self, ts: i64) -> Self {
        self.timestamp = ts;
        self
    }
    pub fn replaces(mut self, old: &WorkloadKey) -> Self {
        self.replacement_for = Some(old.clone());
        self
    }
    /// Marks the slice as an upgrade in flight: (resource, peak, done) per resource.
    pub fn upgrade(mut self, claim: &[(&str, i64, i64)]) -> Self {
        let mut c = UpgradeClaim::default();
        for (r, peak, done) in claim {
            c.peak.insert(r.to_string(), Amount(*peak));
            c.done.insert(r.to_string(), Amount(*done));
        }
        self.upgrade = Some(c);
        self
    }
}
