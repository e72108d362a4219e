//! Builder fixtures for tests and for the admission core, in the style of Kueue's test wrappers:
//! `ClusterQueue::build("cq").cohort("c").flavor("default", [("cpu", "10")]).build()`.
//! Quantities are given as strings and stored verbatim.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PodSpec, PodTemplateSpec, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};

use super::constants::{condition, reason};
use super::*;

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    }
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

fn resource_list<'a>(items: impl IntoIterator<Item = (&'a str, &'a str)>) -> ResourceList {
    items.into_iter().map(|(k, v)| (k.to_string(), q(v))).collect()
}

/// A condition with the given status and reason, at the Unix epoch.
pub fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    crate::api::conditions::new(type_, status, reason, message, None, jiff::Timestamp::UNIX_EPOCH)
}

/// Builds a [`FlavorQuotas`] resource by resource.
#[derive(Clone, Debug)]
pub struct FlavorQuotasBuilder(FlavorQuotas);

impl FlavorQuotas {
    pub fn build(name: &str) -> FlavorQuotasBuilder {
        FlavorQuotasBuilder(FlavorQuotas {
            name: name.to_string(),
            resources: Vec::new(),
        })
    }
}

impl FlavorQuotasBuilder {
    pub fn resource(self, name: &str, nominal: &str) -> Self {
        self.resource_with_limits(name, nominal, None, None)
    }
    pub fn resource_with_limits(
        mut self,
        name: &str,
        nominal: &str,
        borrowing: Option<&str>,
        lending: Option<&str>,
    ) -> Self {
        self.0.resources.push(ResourceQuota {
            name: name.to_string(),
            nominal_quota: q(nominal),
            borrowing_limit: borrowing.map(q),
            lending_limit: lending.map(q),
        });
        self
    }
    pub fn build(self) -> FlavorQuotas {
        self.0
    }
}

/// Adds a flavor to the group covering exactly its resources, or to a new group.
fn add_flavor(groups: &mut Vec<ResourceGroup>, flavor: FlavorQuotas) {
    let names: Vec<String> = flavor.resources.iter().map(|r| r.name.clone()).collect();
    match groups.iter_mut().find(|g| g.covered_resources == names) {
        Some(g) => g.flavors.push(flavor),
        None => groups.push(ResourceGroup {
            covered_resources: names,
            flavors: vec![flavor],
        }),
    }
}

/// Builds a [`ClusterQueue`]; like Kueue's wrapper it admits from all namespaces by default.
#[derive(Clone, Debug)]
pub struct ClusterQueueBuilder(ClusterQueue);

impl ClusterQueue {
    pub fn build(name: &str) -> ClusterQueueBuilder {
        let spec = ClusterQueueSpec {
            namespace_selector: Some(LabelSelector::default()),
            ..Default::default()
        };
        ClusterQueueBuilder(ClusterQueue {
            metadata: meta(name, None),
            spec,
            status: None,
        })
    }
}

impl ClusterQueueBuilder {
    pub fn cohort(mut self, cohort: &str) -> Self {
        self.0.spec.cohort_name = Some(cohort.to_string());
        self
    }
    /// A flavor with nominal quotas only, e.g. `.flavor("default", [("cpu", "10"), ("memory", "10Gi")])`.
    pub fn flavor<'a>(self, name: &str, nominal: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let fq = nominal
            .into_iter()
            .fold(FlavorQuotas::build(name), |b, (r, n)| b.resource(r, n));
        self.flavor_quotas(fq.build())
    }
    pub fn flavor_quotas(mut self, flavor: FlavorQuotas) -> Self {
        add_flavor(self.0.spec.resource_groups.get_or_insert_with(Vec::new), flavor);
        self
    }
    pub fn resource_group(mut self, group: ResourceGroup) -> Self {
        self.0
            .spec
            .resource_groups
            .get_or_insert_with(Vec::new)
            .push(group);
        self
    }
    pub fn queueing_strategy(mut self, s: QueueingStrategy) -> Self {
        self.0.spec.queueing_strategy = Some(s);
        self
    }
    pub fn namespace_selector(mut self, sel: Option<LabelSelector>) -> Self {
        self.0.spec.namespace_selector = sel;
        self
    }
    pub fn preemption(mut self, p: ClusterQueuePreemption) -> Self {
        self.0.spec.preemption = Some(p);
        self
    }
    pub fn flavor_fungibility(mut self, f: FlavorFungibility) -> Self {
        self.0.spec.flavor_fungibility = Some(f);
        self
    }
    pub fn stop_policy(mut self, p: StopPolicy) -> Self {
        self.0.spec.stop_policy = Some(p);
        self
    }
    /// Adds an `admissionChecksStrategy` rule: the check `name` on `on_flavors` (none: every flavor).
    pub fn admission_check(mut self, name: &str, on_flavors: &[&str]) -> Self {
        let rules = &mut self
            .0
            .spec
            .admission_checks_strategy
            .get_or_insert_with(|| AdmissionChecksStrategy {
                admission_checks: Vec::new(),
            })
            .admission_checks;
        let on = (!on_flavors.is_empty()).then(|| on_flavors.iter().map(|f| f.to_string()).collect());
        rules.push(AdmissionCheckStrategyRule {
            name: name.to_string(),
            on_flavors: on,
        });
        self
    }
    pub fn fair_weight(mut self, weight: &str) -> Self {
        self.0.spec.fair_sharing = Some(FairSharing {
            weight: Some(q(weight)),
        });
        self
    }
    pub fn build(self) -> ClusterQueue {
        self.0
    }
}

/// Builds a [`Cohort`].
#[derive(Clone, Debug)]
pub struct CohortBuilder(Cohort);

impl Cohort {
    pub fn build(name: &str) -> CohortBuilder {
        CohortBuilder(Cohort {
            metadata: meta(name, None),
            spec: CohortSpec::default(),
            status: None,
        })
    }
}

impl CohortBuilder {
    pub fn parent(mut self, parent: &str) -> Self {
        self.0.spec.parent_name = Some(parent.to_string());
        self
    }
    pub fn flavor<'a>(self, name: &str, nominal: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let fq = nominal
            .into_iter()
            .fold(FlavorQuotas::build(name), |b, (r, n)| b.resource(r, n));
        self.flavor_quotas(fq.build())
    }
    pub fn flavor_quotas(mut self, flavor: FlavorQuotas) -> Self {
        add_flavor(self.0.spec.resource_groups.get_or_insert_with(Vec::new), flavor);
        self
    }
    pub fn fair_weight(mut self, weight: &str) -> Self {
        self.0.spec.fair_sharing = Some(FairSharing {
            weight: Some(q(weight)),
        });
        self
    }
    pub fn build(self) -> Cohort {
        self.0
    }
}

/// Builds a [`ResourceFlavor`].
#[derive(Clone, Debug)]
pub struct ResourceFlavorBuilder(ResourceFlavor);

impl ResourceFlavor {
    pub fn build(name: &str) -> ResourceFlavorBuilder {
        ResourceFlavorBuilder(ResourceFlavor {
            metadata: meta(name, None),
            spec: None,
        })
    }
}

impl ResourceFlavorBuilder {
    fn spec(&mut self) -> &mut ResourceFlavorSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }
    pub fn node_label(mut self, key: &str, value: &str) -> Self {
        self.spec()
            .node_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }
    pub fn taint(mut self, taint: Taint) -> Self {
        self.spec().node_taints.get_or_insert_with(Vec::new).push(taint);
        self
    }
    pub fn toleration(mut self, toleration: Toleration) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(toleration);
        self
    }
    pub fn topology(mut self, name: &str) -> Self {
        self.spec().topology_name = Some(name.to_string());
        self
    }
    pub fn build(self) -> ResourceFlavor {
        self.0
    }
}

/// Builds a [`LocalQueue`].
#[derive(Clone, Debug)]
pub struct LocalQueueBuilder(LocalQueue);

impl LocalQueue {
    pub fn build(name: &str, namespace: &str) -> LocalQueueBuilder {
        LocalQueueBuilder(LocalQueue {
            metadata: meta(name, Some(namespace)),
            spec: LocalQueueSpec::default(),
            status: None,
        })
    }
}

impl LocalQueueBuilder {
    pub fn cluster_queue(mut self, cq: &str) -> Self {
        self.0.spec.cluster_queue = Some(cq.to_string());
        self
    }
    pub fn stop_policy(mut self, p: StopPolicy) -> Self {
        self.0.spec.stop_policy = Some(p);
        self
    }
    pub fn build(self) -> LocalQueue {
        self.0
    }
}

/// Builds a [`WorkloadPriorityClass`].
pub fn workload_priority_class(name: &str, value: i32) -> WorkloadPriorityClass {
    WorkloadPriorityClass {
        metadata: meta(name, None),
        spec: WorkloadPriorityClassFields {
            value,
            description: None,
        },
    }
}

/// A podset of `count` pods, each with one container requesting `requests`.
pub fn podset<'a>(name: &str, count: i32, requests: impl IntoIterator<Item = (&'a str, &'a str)>) -> PodSet {
    let container = Container {
        name: "c".to_string(),
        resources: Some(ResourceRequirements {
            requests: Some(resource_list(requests)),
            ..Default::default()
        }),
        ..Default::default()
    };
    PodSet {
        name: Some(name.to_string()),
        template: PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![container],
                ..Default::default()
            }),
        },
        count: Some(count),
        min_count: None,
        topology_request: None,
    }
}

/// Builds a [`Workload`].
#[derive(Clone, Debug)]
pub struct WorkloadBuilder(Workload);

impl Workload {
    pub fn build(name: &str, namespace: &str) -> WorkloadBuilder {
        WorkloadBuilder(Workload {
            metadata: meta(name, Some(namespace)),
            spec: WorkloadSpec::default(),
            status: None,
        })
    }
}

impl WorkloadBuilder {
    pub fn queue(mut self, lq: &str) -> Self {
        self.0.spec.queue_name = Some(lq.to_string());
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.0.spec.priority = Some(p);
        self
    }
    /// Priority from a WorkloadPriorityClass: sets both the reference and the value.
    pub fn priority_class(mut self, name: &str, value: i32) -> Self {
        self.0.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class(name));
        self.0.spec.priority = Some(value);
        self
    }
    /// Adds a podset, e.g. `.podset("main", 3, [("cpu", "1")])`.
    pub fn podset<'a>(
        mut self,
        name: &str,
        count: i32,
        requests: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        self.0.spec.pod_sets.push(podset(name, count, requests));
        self
    }
    pub fn podset_spec(mut self, ps: PodSet) -> Self {
        self.0.spec.pod_sets.push(ps);
        self
    }
    pub fn min_count(mut self, podset: &str, min: i32) -> Self {
        if let Some(ps) = self.0.spec.pod_sets.iter_mut().find(|p| p.name() == podset) {
            ps.min_count = Some(min);
        }
        self
    }
    pub fn active(mut self, active: bool) -> Self {
        self.0.spec.active = Some(active);
        self
    }
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.to_string());
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }
    /// Creation time, which orders workloads of equal priority.
    pub fn created_at(mut self, t: jiff::Timestamp) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(t));
        self
    }
    /// Reserves quota in `cq`, every podset getting `flavor` for each resource it requests and
    /// its full count: sets status.admission and QuotaReserved=True.
    pub fn reserve_quota(mut self, cq: &str, flavor: &str) -> Self {
        let assignments = self
            .0
            .spec
            .pod_sets
            .iter()
            .map(|ps| assignment_for(ps, flavor))
            .collect();
        let status = self.0.status.get_or_insert_with(Default::default);
        status.admission = Some(Admission {
            cluster_queue: cq.to_string(),
            pod_set_assignments: assignments,
        });
        set_condition(
            status,
            condition(
                condition::QUOTA_RESERVED,
                true,
                reason::QUOTA_RESERVED,
                &format!("Quota reserved in ClusterQueue {cq}"),
            ),
        );
        self
    }
    /// Marks the workload Admitted=True (call after `reserve_quota`).
    pub fn admitted(mut self) -> Self {
        let status = self.0.status.get_or_insert_with(Default::default);
        set_condition(
            status,
            condition(
                condition::ADMITTED,
                true,
                reason::ADMITTED,
                "The workload is admitted",
            ),
        );
        self
    }
    pub fn condition(mut self, c: Condition) -> Self {
        set_condition(self.0.status.get_or_insert_with(Default::default), c);
        self
    }
    pub fn build(self) -> Workload {
        self.0
    }
}

fn set_condition(status: &mut WorkloadStatus, c: Condition) {
    crate::api::conditions::set(&mut status.conditions, c);
}

/// Assigns `flavor` to every resource the podset requests, for its full count, with the usage
/// Kueue records: the containers' summed requests times the count (unparsable requests skipped).
fn assignment_for(ps: &PodSet, flavor: &str) -> PodSetAssignment {
    let mut per_pod: BTreeMap<String, crate::api::quantity::Quantity> = BTreeMap::new();
    let requests = ps
        .template
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    for (name, q) in requests.flatten() {
        let Ok(v) = crate::api::quantity::Quantity::try_from(q) else {
            continue;
        };
        let sum = match per_pod.get(name) {
            Some(prev) => prev.checked_add(&v).unwrap_or(*prev),
            None => v,
        };
        per_pod.insert(name.clone(), sum);
    }
    PodSetAssignment {
        name: ps.name().to_string(),
        flavors: per_pod.keys().map(|r| (r.clone(), flavor.to_string())).collect(),
        resource_usage: per_pod
            .iter()
            .map(|(r, q)| (r.clone(), q.saturating_mul(i64::from(ps.count())).into()))
            .collect(),
        count: Some(ps.count()),
        topology_assignment: None,
        delayed_topology_request: None,
    }
}
