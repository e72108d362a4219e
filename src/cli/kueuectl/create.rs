//! `quotagate create clusterqueue|localqueue`: kueuectl's generators
//! (kubernetes-sigs/kueue:cmd/kueuectl/app/create/create_{clusterqueue,localqueue}.go), for
//! Kueue v1beta2 (`spec.cohortName`). Quota flags take kueuectl's form,
//! `FLAVOR:RESOURCE=QUANTITY;RESOURCE=QUANTITY` per flavor, flavors separated by commas; the same
//! flavor in several flags must name the same resources, and flavors with the same resources share
//! one resource group. Unlike kueuectl, a malformed quantity is an error naming the flag, not a panic.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;

use super::{CliError, DryRun};
use crate::api::kueue::{
    ClusterQueue, ClusterQueuePreemption, ClusterQueueSpec, FlavorQuotas, LocalQueue, LocalQueueSpec,
    PreemptionPolicy, QueueingStrategy, ResourceGroup, ResourceQuota,
};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ClusterQueueArgs {
    pub name: String,
    /// The cohort this ClusterQueue belongs to.
    #[arg(long)]
    pub cohort: Option<String>,
    /// StrictFIFO or BestEffortFIFO (default).
    #[arg(long)]
    pub queuing_strategy: Option<String>,
    /// Namespaces allowed to submit, as key=value[,key=value] (default: all namespaces).
    #[arg(long, value_delimiter = ',')]
    pub namespace_selector: Vec<String>,
    /// Never (default), Any, LowerPriority or LowerOrNewerEqualPriority.
    #[arg(long)]
    pub reclaim_within_cohort: Option<String>,
    /// Never (default), Any, LowerPriority or LowerOrNewerEqualPriority.
    #[arg(long)]
    pub preemption_within_cluster_queue: Option<String>,
    /// e.g. `alpha:cpu=10;memory=32Gi,beta:nvidia.com/gpu=4`.
    #[arg(long, value_delimiter = ',')]
    pub nominal_quota: Vec<String>,
    #[arg(long, value_delimiter = ',')]
    pub borrowing_limit: Vec<String>,
    #[arg(long, value_delimiter = ',')]
    pub lending_limit: Vec<String>,
    #[arg(long, value_enum, default_value_t = DryRun::None)]
    pub dry_run: DryRun,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    Nominal,
    Borrowing,
    Lending,
}

impl Limit {
    fn flag(self) -> &'static str {
        match self {
            Limit::Nominal => "nominal-quota",
            Limit::Borrowing => "borrowing-limit",
            Limit::Lending => "lending-limit",
        }
    }
}

fn enum_flag<T: DeserializeOwned>(flag: &'static str, value: &str, allowed: &str) -> Result<T, CliError> {
    serde_json::from_value(serde_json::Value::String(value.to_string())).map_err(|_| CliError::Flag {
        flag,
        message: format!("{value:?}: must be one of {allowed}"),
    })
}

/// One flavor's part of a quota flag: `FLAVOR:RES=Q;RES=Q`, resources in the order given.
fn parse_flavor(spec: &str, limit: Limit) -> Result<(String, Vec<(String, String)>), CliError> {
    let bad = |m: String| CliError::Flag {
        flag: limit.flag(),
        message: format!("{spec:?}: {m}"),
    };
    let (flavor, resources) = spec
        .split_once(':')
        .ok_or_else(|| bad("must be FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY]".into()))?;
    let flavor = flavor.trim();
    if flavor.is_empty() {
        return Err(bad("the flavor name is empty".into()));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for r in resources.split(';') {
        let (name, q) = r
            .split_once('=')
            .ok_or_else(|| bad(format!("{r:?} must be RESOURCE=QUANTITY")))?;
        let (name, q) = (name.trim(), q.trim());
        if name.is_empty() {
            return Err(bad(format!("{r:?} has no resource name")));
        }
        crate::api::quantity::Quantity::parse(q).map_err(|e| bad(format!("quantity of {name}: {e}")))?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(bad(format!("{name} is given twice")));
        }
        out.push((name.to_string(), q.to_string()));
    }
    Ok((flavor.to_string(), out))
}

/// kueuectl's parseResourceGroups: merge the three flags per flavor, then group flavors that cover
/// the same resources (a group's flavors list their resources in the group's order).
pub fn resource_groups(
    nominal: &[String],
    borrowing: &[String],
    lending: &[String],
) -> Result<Vec<ResourceGroup>, CliError> {
    let mut flavors: Vec<(String, Vec<ResourceQuota>)> = Vec::new();
    for (limit, specs) in [
        (Limit::Nominal, nominal),
        (Limit::Borrowing, borrowing),
        (Limit::Lending, lending),
    ] {
        for spec in specs {
            let (flavor, resources) = parse_flavor(spec, limit)?;
            let idx = match flavors.iter().position(|(f, _)| *f == flavor) {
                Some(i) => {
                    let have: BTreeSet<&str> = flavors[i].1.iter().map(|r| r.name.as_str()).collect();
                    let want: BTreeSet<&str> = resources.iter().map(|(n, _)| n.as_str()).collect();
                    if have != want {
                        return Err(CliError::Flag {
                            flag: limit.flag(),
                            message: format!(
                                "flavor {flavor} names {want:?} here but {have:?} in an earlier flag: every quota flag must name the same resources for a flavor"
                            ),
                        });
                    }
                    i
                }
                None => {
                    let quotas = resources
                        .iter()
                        .map(|(n, _)| ResourceQuota {
                            name: n.clone(),
                            nominal_quota: Quantity("0".into()),
                            borrowing_limit: None,
                            lending_limit: None,
                        })
                        .collect();
                    flavors.push((flavor.clone(), quotas));
                    flavors.len() - 1
                }
            };
            for (name, q) in resources {
                if let Some(rq) = flavors[idx].1.iter_mut().find(|r| r.name == name) {
                    let q = Quantity(q);
                    match limit {
                        Limit::Nominal => rq.nominal_quota = q,
                        Limit::Borrowing => rq.borrowing_limit = Some(q),
                        Limit::Lending => rq.lending_limit = Some(q),
                    }
                }
            }
        }
    }
    let mut groups: Vec<(BTreeSet<String>, ResourceGroup)> = Vec::new();
    for (flavor, quotas) in flavors {
        let set: BTreeSet<String> = quotas.iter().map(|r| r.name.clone()).collect();
        if let Some((_, g)) = groups.iter_mut().find(|(s, _)| *s == set) {
            let order: BTreeMap<&str, usize> = g
                .covered_resources
                .iter()
                .enumerate()
                .map(|(i, r)| (r.as_str(), i))
                .collect();
            let mut quotas = quotas;
            quotas.sort_by_key(|r| order.get(r.name.as_str()).copied().unwrap_or(usize::MAX));
            g.flavors.push(FlavorQuotas {
                name: flavor,
                resources: quotas,
            });
            continue;
        }
        if let Some((other, g)) = groups.iter().find(|(s, _)| !s.is_disjoint(&set)) {
            let first = g.flavors.first().map(|f| f.name.as_str()).unwrap_or_default();
            return Err(CliError::Flag {
                flag: "nominal-quota",
                message: format!(
                    "flavor {flavor} covers {set:?} and flavor {first} covers {other:?}: flavors that share a resource must cover the same resources (one resource group)"
                ),
            });
        }
        let covered = quotas.iter().map(|r| r.name.clone()).collect();
        groups.push((
            set,
            ResourceGroup {
                covered_resources: covered,
                flavors: vec![FlavorQuotas {
                    name: flavor,
                    resources: quotas,
                }],
            },
        ));
    }
    Ok(groups.into_iter().map(|(_, g)| g).collect())
}

/// The ClusterQueue kueuectl would create, with its defaults (BestEffortFIFO, no preemption, every
/// namespace).
pub fn cluster_queue(a: &ClusterQueueArgs) -> Result<ClusterQueue, CliError> {
    let policies = "Never, Any, LowerPriority, LowerOrNewerEqualPriority";
    let strategy: QueueingStrategy = match &a.queuing_strategy {
        Some(s) => enum_flag("queuing-strategy", s, "StrictFIFO, BestEffortFIFO")?,
        None => QueueingStrategy::BestEffortFIFO,
    };
    let reclaim: PreemptionPolicy = a
        .reclaim_within_cohort
        .as_deref()
        .map(|s| enum_flag("reclaim-within-cohort", s, policies))
        .transpose()?
        .unwrap_or_default();
    let within: PreemptionPolicy = a
        .preemption_within_cluster_queue
        .as_deref()
        .map(|s| enum_flag("preemption-within-cluster-queue", s, policies))
        .transpose()?
        .unwrap_or_default();
    let mut labels = BTreeMap::new();
    for kv in &a.namespace_selector {
        let (k, v) = kv.split_once('=').ok_or_else(|| CliError::Flag {
            flag: "namespace-selector",
            message: format!("{kv:?} must be key=value"),
        })?;
        labels.insert(k.trim().to_string(), v.trim().to_string());
    }
    let groups = resource_groups(&a.nominal_quota, &a.borrowing_limit, &a.lending_limit)?;
    let spec = ClusterQueueSpec {
        cohort_name: a.cohort.clone().filter(|c| !c.is_empty()),
        queueing_strategy: Some(strategy),
        namespace_selector: Some(LabelSelector {
            match_labels: (!labels.is_empty()).then_some(labels),
            match_expressions: None,
        }),
        preemption: Some(ClusterQueuePreemption {
            reclaim_within_cohort: Some(reclaim),
            within_cluster_queue: Some(within),
            borrow_within_cohort: None,
        }),
        resource_groups: (!groups.is_empty()).then_some(groups),
        ..Default::default()
    };
    Ok(ClusterQueue::new(&a.name, spec))
}

fn params(d: DryRun) -> PostParams {
    PostParams {
        dry_run: d == DryRun::Server,
        ..Default::default()
    }
}

fn created(resource: &str, name: &str, d: DryRun) -> String {
    format!("{resource}.kueue.x-k8s.io/{name} created{}\n", d.suffix())
}

pub async fn create_cluster_queue(client: &kube::Client, a: &ClusterQueueArgs) -> Result<String, CliError> {
    let cq = cluster_queue(a)?;
    if a.dry_run != DryRun::Client {
        Api::<ClusterQueue>::all(client.clone())
            .create(&params(a.dry_run), &cq)
            .await?;
    }
    Ok(created("clusterqueue", &a.name, a.dry_run))
}

/// kueuectl refuses a LocalQueue for a ClusterQueue that does not exist unless told to ignore it.
pub async fn create_local_queue(
    client: &kube::Client,
    ns: &str,
    name: &str,
    cq: &str,
    ignore_unknown_cq: bool,
    d: DryRun,
) -> Result<String, CliError> {
    if cq.is_empty() {
        return Err(CliError::Flag {
            flag: "clusterqueue",
            message: "must be specified".into(),
        });
    }
    if !ignore_unknown_cq {
        Api::<ClusterQueue>::all(client.clone()).get(cq).await?;
    }
    let mut lq = LocalQueue::new(
        name,
        LocalQueueSpec {
            cluster_queue: Some(cq.to_string()),
            ..Default::default()
        },
    );
    lq.metadata.namespace = Some(ns.to_string());
    if d != DryRun::Client {
        Api::<LocalQueue>::namespaced(client.clone(), ns)
            .create(&params(d), &lq)
            .await?;
    }
    Ok(created("localqueue", name, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    // kueuectl's create_clusterqueue_test "should create clusterqueue with multiple resource groups".
    #[test]
    fn quota_flags_merge_per_flavor_and_group_by_resources() {
        let g = resource_groups(
            &s(&["alpha:cpu=1;memory=1Gi", "beta:gpu=2", "gamma:memory=2Gi;cpu=2"]),
            &s(&["alpha:cpu=3;memory=3Gi"]),
            &s(&["beta:gpu=1"]),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&g).unwrap(),
            json!([
                {"coveredResources": ["cpu", "memory"], "flavors": [
                    {"name": "alpha", "resources": [{"name": "cpu", "nominalQuota": "1", "borrowingLimit": "3"}, {"name": "memory", "nominalQuota": "1Gi", "borrowingLimit": "3Gi"}]},
                    {"name": "gamma", "resources": [{"name": "cpu", "nominalQuota": "2"}, {"name": "memory", "nominalQuota": "2Gi"}]}]},
                {"coveredResources": ["gpu"], "flavors": [{"name": "beta", "resources": [{"name": "gpu", "nominalQuota": "2", "lendingLimit": "1"}]}]}
            ])
        );
    }

    #[test]
    fn bad_quota_flags_name_the_flag() {
        let e = |n: &[&str], b: &[&str]| resource_groups(&s(n), &s(b), &[]).unwrap_err().to_string();
        assert!(
            e(&["alpha:cpu=lots"], &[])
                .starts_with("invalid --nominal-quota: \"alpha:cpu=lots\": quantity of cpu"),
            "{}",
            e(&["alpha:cpu=lots"], &[])
        );
        assert!(e(&["alpha"], &[]).contains("FLAVOR:RESOURCE=QUANTITY"));
        assert!(
            e(&["alpha:cpu=1"], &["alpha:memory=1"]).starts_with("invalid --borrowing-limit: flavor alpha")
        );
        assert!(e(&["a:cpu=1", "b:cpu=1;memory=1"], &[]).contains("one resource group"));
    }

    #[test]
    fn cluster_queue_defaults_are_kueuectls() {
        let cq = cluster_queue(&ClusterQueueArgs {
            name: "cq".into(),
            cohort: Some("co".into()),
            namespace_selector: s(&["team=a"]),
            nominal_quota: s(&["default:cpu=9"]),
            ..Default::default()
        })
        .unwrap();
        let v = serde_json::to_value(&cq).unwrap();
        assert_eq!(v["spec"]["cohortName"], "co");
        assert_eq!(v["spec"]["queueingStrategy"], "BestEffortFIFO");
        assert_eq!(
            v["spec"]["preemption"],
            json!({"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"})
        );
        assert_eq!(
            v["spec"]["namespaceSelector"],
            json!({"matchLabels": {"team": "a"}})
        );
        let e = cluster_queue(&ClusterQueueArgs {
            name: "cq".into(),
            queuing_strategy: Some("Fifo".into()),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("invalid --queuing-strategy: \"Fifo\""), "{e}");
    }
}
