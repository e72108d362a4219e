//! `quotagate explain workload|rayservice|raycluster|rayjob NAME [-n NS]`: why it is pending or gated, in
//! numbers. The numbers are the scheduler's own record of its last decision on the workload, served
//! by the manager (`explain.quotagate.io`, see `wiring::explain`); for a RayService, also its upgrade
//! state and the gate of each child, computed with the gate's own function (`demand::allowed_pods`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::api::kueue::constants::condition;
use crate::api::kueue::{Admission, Workload};
use crate::api::quantity::{Quantity, resource_value};
use crate::api::ray::constants::ANNOTATION_ADMISSION_GATED;
use crate::api::ray::{RayCluster, RayJob, RayService};
use crate::cli::plan::render::{flavor_table, holder_table, table};
use crate::queue::Explanation;
use crate::queue::amount::{Amount, FlavorResource};
use crate::rayservice::job::demand::{self, admitted_slice, allowed_pods, child_demand};
use crate::rayservice::job::rayservice::{children_in_gate_order, service_demand};
use crate::wiring::explain::path;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Workload,
    Rayservice,
    Raycluster,
    Rayjob,
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{kind} {namespace}/{name}: {source}")]
    Get {
        kind: &'static str,
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// The scheduler's record for a workload, or `None` when the manager has none (404).
pub async fn record(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Explanation>, ExplainError> {
    let req = http::Request::get(path(namespace, name))
        .body(Vec::new())
        .map_err(|e| ExplainError::Other(e.to_string()))?;
    match client.request::<Value>(req).await {
        Ok(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| ExplainError::Other(format!("the manager's explanation does not parse: {e}"))),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(ExplainError::Other(format!(
            "asking the manager ({}): {e}",
            path(namespace, name)
        ))),
    }
}

fn condition_line(wl: &Workload, type_: &str) -> Option<String> {
    let c = wl.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some(format!("{}={} ({}): {}", c.type_, c.status, c.reason, c.message))
}

/// The record as text: the verdict, per podset/resource/flavor numbers, holders, preemption.
pub fn render_record(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ClusterQueue {}{}, priority {}",
        e.cluster_queue,
        e.cohort
            .as_ref()
            .map(|c| format!(" (cohort {c})"))
            .unwrap_or_default(),
        e.priority
    );
    if let Some(r) = &e.replaces {
        let _ = writeln!(out, "replaces admitted slice {r}: only the growth has to fit");
    }
    let _ = writeln!(out, "{}: {}", e.reason, e.message);
    if let Some(i) = e.position_in_cluster_queue {
        let _ = writeln!(out, "position in the ClusterQueue's queue: {i} (0 = next)");
    }
    out.push('\n');
    out.push_str(&flavor_table(e, true));
    out.push_str(&topology_lines(e));
    if e.holders.is_empty() {
        out.push_str("\nno admitted workload holds the short quota\n");
    } else {
        out.push('\n');
        out.push_str(&holder_table(e));
    }
    let _ = writeln!(
        out,
        "\npreemption ({}; {} candidate(s)): {}",
        e.preemption.policy, e.preemption.candidates, e.preemption.why
    );
    out
}

/// Per podset in a TAS flavor: its request, then where it would go now or Kueue's reason it fits no
/// domain, and the domains of its level with most room.
fn topology_lines(e: &Explanation) -> String {
    let mut out = String::new();
    for t in &e.topology {
        let _ = writeln!(
            out,
            "\ntopology {} (flavor {}), podset {}: {}",
            t.topology, t.flavor, t.podset, t.request
        );
        if t.no_fit.is_empty() {
            let _ = writeln!(out, "  fits now in: {}", domain_list(&t.placement));
        } else {
            let _ = writeln!(out, "  fits no domain: {}", t.no_fit);
        }
        if !t.roomiest.is_empty() {
            let room = t
                .roomiest
                .iter()
                .map(|(d, n)| format!("{d} ({n} pod(s))"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(out, "  most room at {}: {room}", t.level);
        }
    }
    out
}

/// Domains with their pod counts, `a/b x2, c/d x1`, the first ten and how many more.
fn domain_list(domains: &[(String, i32)]) -> String {
    const SHOWN: usize = 10;
    let mut s = domains
        .iter()
        .take(SHOWN)
        .map(|(d, n)| format!("{d} x{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if domains.len() > SHOWN {
        let _ = write!(s, " and {} more domain(s)", domains.len() - SHOWN);
    }
    s
}

/// One Workload: admitted, finished, or pending with the scheduler's record.
pub async fn workload(client: &Client, namespace: &str, name: &str) -> Result<String, ExplainError> {
    let api: Api<Workload> = Api::namespaced(client.clone(), namespace);
    let wl = api.get(name).await.map_err(|source| ExplainError::Get {
        kind: "Workload",
        namespace: namespace.into(),
        name: name.into(),
        source,
    })?;
    let mut out = format!(
        "Workload {namespace}/{name} (LocalQueue {})\n",
        wl.spec.queue_name()
    );
    if wl.is_finished() {
        let _ = writeln!(
            out,
            "finished: {}",
            condition_line(&wl, condition::FINISHED).unwrap_or_default()
        );
        return Ok(out);
    }
    let checks = Api::<crate::api::kueue::AdmissionCheck>::all(client.clone())
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut dispatched = crate::multikueue::explain::lines(&wl, &checks);
    if !dispatched.is_empty() {
        let secrets = crate::multikueue::Settings::default().namespace;
        dispatched
            .extend(crate::multikueue::explain::read_other_workers(client, &secrets, &wl, &checks).await);
    }
    if let Some(a) = wl.admission().filter(|_| wl.has_quota_reservation()) {
        let _ = writeln!(out, "admitted by ClusterQueue {}", a.cluster_queue);
        out.push_str(&admitted_podsets(&wl, a));
        for l in dispatched {
            let _ = writeln!(out, "{l}");
        }
        return Ok(out);
    }
    for l in dispatched {
        let _ = writeln!(out, "{l}");
    }
    match record(client, namespace, name).await? {
        Some(e) => out.push_str(&render_record(&e)),
        None => {
            let _ = writeln!(out, "pending; the scheduler has no record of evaluating it yet");
            if let Some(l) = condition_line(&wl, condition::QUOTA_RESERVED) {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    Ok(out)
}

/// Each admitted podset, its flavors and what the ClusterQueue counts for it. Like Kueue, an
/// in-place scale-down changes only `spec.podSets[].count`: `status.admission` keeps the granted
/// count and usage, and what is counted is the granted usage scaled down to the spec's count.
fn admitted_podsets(wl: &Workload, a: &Admission) -> String {
    let mut out = String::new();
    for p in &a.pod_set_assignments {
        let flavors = p
            .flavors
            .iter()
            .map(|(r, f)| format!("{r}={f}"))
            .collect::<Vec<_>>()
            .join(", ");
        let granted = i64::from(p.count.unwrap_or(0));
        let spec = wl
            .spec
            .pod_sets
            .iter()
            .find(|s| {
                s.name
                    .as_deref()
                    .unwrap_or(crate::api::kueue::constants::DEFAULT_PODSET_NAME)
                    == p.name
            })
            .map(|s| i64::from(s.count.unwrap_or(1)));
        let counted = spec.map_or(granted, |n| n.min(granted));
        let holds = p
            .resource_usage
            .iter()
            .map(|(r, q)| {
                let fr = FlavorResource::new(p.flavors.get(r).map_or("", String::as_str), r.as_str());
                match Quantity::parse(&q.0) {
                    Ok(total) if granted > 0 => format!(
                        "{r} {}",
                        fr.show(Amount(resource_value(r, &total) / granted * counted))
                    ),
                    _ => format!("{r} {}", q.0),
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let shrunk = if counted < granted {
            format!(" (admitted x{granted}; shrunk in place, the admission keeps the granted count)")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  podset {} x{counted}{shrunk}: {flavors}; counts {holds}",
            p.name
        );
        if let Some(ta) = &p.topology_assignment {
            let domains: Vec<(String, i32)> = crate::api::kueue::tas::decode_assignment(ta)
                .into_iter()
                .map(|d| (d.values.join("/"), d.count))
                .collect();
            let _ = writeln!(
                out,
                "    placed in {} topology domain(s) of {}: {}",
                domains.len(),
                ta.levels.join("/"),
                domain_list(&domains)
            );
        }
    }
    out
}

fn owned_by<'a>(wls: &'a [Workload], kind: &str, name: &str) -> Vec<&'a Workload> {
    wls.iter()
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|o| o.kind == kind && o.name == name)
        })
        .collect()
}

/// A RayService: its upgrade state, each child's gate, its workload slices and why a pending one waits.
pub async fn rayservice(client: &Client, namespace: &str, name: &str) -> Result<String, ExplainError> {
    let get = |kind: &'static str| {
        move |source| ExplainError::Get {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            source,
        }
    };
    let rs = Api::<RayService>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(get("RayService"))?;
    let listed = Api::<RayCluster>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(get("RayClusters of RayService"))?
        .items;
    let children = children_in_gate_order(&rs, listed);
    let wls = Api::<Workload>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(get("Workloads of RayService"))?
        .items;
    let owned: Vec<Workload> = owned_by(&wls, "RayService", name).into_iter().cloned().collect();
    let status = rs.status.as_ref();
    let cluster = |s: Option<&crate::api::ray::rayservice::RayServiceStatus>| {
        s.and_then(|s| s.ray_cluster_name.clone())
            .unwrap_or_else(|| "-".into())
    };
    let mut out = format!("RayService {namespace}/{name}\n");
    let _ = writeln!(
        out,
        "active cluster {}, pending cluster {}",
        cluster(status.and_then(|s| s.active_service_status.as_ref())),
        cluster(status.and_then(|s| s.pending_service_status.as_ref()))
    );
    if rs.spec.is_suspended() {
        let _ = writeln!(
            out,
            "suspended: waiting for its first admission (or evicted); no cluster runs"
        );
    }
    let slice = admitted_slice(&owned);
    let opts = Default::default();
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(get("Pods of RayService"))?
        .items;
    let live = demand::live_pods(&pods);
    // As the gate sees them: the pending cluster at no less than its first step.
    let demands = match service_demand(&rs, &children, &live) {
        Ok(d) if !children.is_empty() => d,
        _ => demand::at_least_live(
            children
                .iter()
                .filter_map(|rc| child_demand(rc, &opts).ok())
                .collect(),
            &live,
        ),
    };
    let allowed = allowed_pods(slice.map(|w| w.spec.pod_sets.as_slice()), &demands, &live);
    let mut rows = vec![
        ["CHILD", "GATED", "GROUP", "WANTS PODS", "ADMITTED SLICE COVERS"]
            .map(String::from)
            .to_vec(),
    ];
    for d in &demands {
        let gated = children
            .iter()
            .find(|c| c.name_any() == d.name)
            .and_then(|c| c.annotations().get(ANNOTATION_ADMISSION_GATED).cloned())
            .unwrap_or_else(|| "-".into());
        let mut want: std::collections::BTreeMap<&str, i64> = Default::default();
        for (id, n, _) in &d.pods {
            *want.entry(id.group.as_str()).or_default() += n;
        }
        for (g, n) in want {
            let covered = allowed.get(&d.name).and_then(|m| m.get(g)).copied().unwrap_or(0);
            rows.push(vec![
                d.name.clone(),
                gated.clone(),
                g.to_string(),
                n.to_string(),
                covered.to_string(),
            ]);
        }
    }
    out.push('\n');
    out.push_str(&table(&rows));
    let _ = writeln!(
        out,
        "\nadmitted slice: {}",
        slice.map(|w| w.name_any()).unwrap_or_else(|| "none".into())
    );
    if owned
        .iter()
        .any(|w| !w.is_finished() && !w.has_quota_reservation())
    {
        let waits_on = waits_on(client, namespace, &wls).await?;
        if let Some(cycle) = wait_for_cycle(name, &waits_on) {
            let _ = writeln!(out, "\nwait-for cycle: {}", cycle_sentence(&cycle));
        }
    }
    for w in owned
        .iter()
        .filter(|w| !w.is_finished() && !w.has_quota_reservation())
    {
        let _ = writeln!(out, "\npending slice {}:", w.name_any());
        match record(client, namespace, &w.name_any()).await? {
            Some(e) => out.push_str(&render_record(&e)),
            None => {
                let _ = writeln!(
                    out,
                    "{}",
                    condition_line(w, condition::QUOTA_RESERVED)
                        .unwrap_or_else(|| "not evaluated yet".into())
                );
            }
        }
    }
    Ok(out)
}

/// RayService -> the RayServices holding quota its pending slices are short of, in `namespace`,
/// from the scheduler's records (their holders) and the Workloads' owners.
async fn waits_on(
    client: &Client,
    namespace: &str,
    wls: &[Workload],
) -> Result<BTreeMap<String, BTreeSet<String>>, ExplainError> {
    let service_of = |w: &Workload| {
        w.owner_references()
            .iter()
            .find(|o| o.kind == "RayService")
            .map(|o| o.name.clone())
    };
    let owner: BTreeMap<String, String> = wls
        .iter()
        .filter_map(|w| Some((format!("{namespace}/{}", w.name_any()), service_of(w)?)))
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for w in wls
        .iter()
        .filter(|w| !w.is_finished() && !w.has_quota_reservation())
    {
        let Some(svc) = service_of(w) else { continue };
        let Some(e) = record(client, namespace, &w.name_any()).await? else {
            continue;
        };
        for h in &e.holders {
            if let Some(other) = owner.get(&h.workload).filter(|o| **o != svc) {
                out.entry(svc.clone()).or_default().insert(other.clone());
            }
        }
    }
    Ok(out)
}

/// The shortest cycle of services each waiting for quota the next one holds, from `start` back to
/// it (`start` first), if there is one.
pub fn wait_for_cycle(start: &str, waits_on: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    crate::queue::wait_cycle::shortest_cycle(&start.to_string(), waits_on)
}

/// "a waits for quota held by b, which waits for c, which waits for a".
pub fn cycle_sentence(cycle: &[String]) -> String {
    let mut out = String::new();
    for (i, s) in cycle.iter().enumerate() {
        let next = cycle
            .get(i + 1)
            .or(cycle.first())
            .map(String::as_str)
            .unwrap_or_default();
        if i == 0 {
            let _ = write!(out, "{s} waits for quota held by {next}");
        } else {
            let _ = write!(out, ", which waits for {next}");
        }
    }
    out
}

/// A RayCluster: its RayService's story when it belongs to one, else its own Workload's.
pub async fn raycluster(client: &Client, namespace: &str, name: &str) -> Result<String, ExplainError> {
    let rc = Api::<RayCluster>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|source| ExplainError::Get {
            kind: "RayCluster",
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    if let Some(owner) = rc
        .owner_references()
        .iter()
        .find(|o| o.kind == "RayService" && o.controller == Some(true))
    {
        let body = rayservice(client, namespace, &owner.name).await?;
        return Ok(format!(
            "RayCluster {namespace}/{name} belongs to RayService {}; its quota is the service's.\n{body}",
            owner.name
        ));
    }
    if let Some(owner) = rc
        .owner_references()
        .iter()
        .find(|o| o.kind == "RayJob" && o.controller == Some(true))
    {
        let body = rayjob(client, namespace, &owner.name).await?;
        return Ok(format!(
            "RayCluster {namespace}/{name} belongs to RayJob {}; its quota is the job's.\n{body}",
            owner.name
        ));
    }
    let wls = Api::<Workload>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|source| ExplainError::Get {
            kind: "Workloads of RayCluster",
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?
        .items;
    // A slice waiting for quota is the story; the one the cluster runs on is named beside it.
    let live: Vec<&Workload> = owned_by(&wls, "RayCluster", name)
        .into_iter()
        .filter(|w| !w.is_finished())
        .collect();
    let waiting = live.iter().find(|w| !w.has_quota_reservation()).copied();
    let held = live.iter().find(|w| w.has_quota_reservation()).copied();
    let Some(w) = waiting.or(held) else {
        return Ok(format!(
            "RayCluster {namespace}/{name} has no Workload: it is not queue-managed (no kueue.x-k8s.io/queue-name label) or not reconciled yet\n"
        ));
    };
    let body = workload(client, namespace, &w.name_any()).await?;
    Ok(match (waiting, held) {
        (Some(w), Some(h)) => format!(
            "RayCluster {namespace}/{name} runs on Workload {}; its growth waits in workload slice {}:\n{body}",
            h.name_any(),
            w.name_any()
        ),
        _ => body,
    })
}

/// A RayJob: where KubeRay's state machine is, then its Workload's story (admitted with its podsets'
/// flavors, or why it waits, in numbers), or why it has none.
pub async fn rayjob(client: &Client, namespace: &str, name: &str) -> Result<String, ExplainError> {
    let get = |kind: &'static str| {
        move |source| ExplainError::Get {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            source,
        }
    };
    let job = Api::<RayJob>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(get("RayJob"))?;
    let status = job.status.clone().unwrap_or_default();
    let mut out = format!("RayJob {namespace}/{name}\n");
    let _ = writeln!(
        out,
        "jobDeploymentStatus {}, jobStatus {}, cluster {}{}",
        status.job_deployment_status.map_or("-", |d| d.as_str()),
        status.job_status.map_or("-", |s| s.as_str()),
        status
            .ray_cluster_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("-"),
        if job.spec.is_suspended() {
            ", suspended"
        } else {
            ""
        },
    );
    if let Some(m) = status.message.as_deref().filter(|m| !m.is_empty()) {
        let _ = writeln!(out, "message: {m}");
    }
    if job.spec.uses_cluster_selector() {
        out.push_str(
            "it runs on an existing RayCluster (spec.clusterSelector): not queue-managed, as in Kueue\n",
        );
        return Ok(out);
    }
    let wls = Api::<Workload>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(get("Workloads of RayJob"))?
        .items;
    let mut owned = owned_by(&wls, "RayJob", name);
    // The open one tells why it waits or what it holds; else the last finished one how it ended.
    owned.sort_by_key(|w| {
        (
            !w.is_finished(),
            w.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    match owned.last() {
        Some(w) => out.push_str(&workload(client, namespace, &w.name_any()).await?),
        None => out.push_str("no Workload: it is not queue-managed (no kueue.x-k8s.io/queue-name label) or not reconciled yet\n"),
    }
    Ok(out)
}

pub async fn run(client: &Client, kind: Kind, namespace: &str, name: &str) -> Result<String, ExplainError> {
    match kind {
        Kind::Rayjob => rayjob(client, namespace, name).await,
        Kind::Workload => workload(client, namespace, name).await,
        Kind::Rayservice => rayservice(client, namespace, name).await,
        Kind::Raycluster => raycluster(client, namespace, name).await,
    }
}

#[cfg(test)]
mod cycle_tests {
    use super::*;

    fn edges(pairs: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    }

    #[test]
    fn names_the_cycle_a_service_is_in() {
        let two = edges(&[("inc-a", "inc-b"), ("inc-b", "inc-a")]);
        let c = wait_for_cycle("inc-a", &two).unwrap();
        assert_eq!(
            cycle_sentence(&c),
            "inc-a waits for quota held by inc-b, which waits for inc-a"
        );
        let three = edges(&[("a", "b"), ("b", "c"), ("c", "a"), ("b", "x")]);
        assert_eq!(
            cycle_sentence(&wait_for_cycle("b", &three).unwrap()),
            "b waits for quota held by c, which waits for a, which waits for b"
        );
    }

    #[test]
    fn no_cycle_when_waits_end_at_a_holder_that_waits_for_nothing() {
        assert_eq!(wait_for_cycle("a", &edges(&[("a", "b"), ("b", "c")])), None);
        // A cycle elsewhere that `a` only leads into is not `a`'s.
        assert_eq!(
            wait_for_cycle("a", &edges(&[("a", "b"), ("b", "c"), ("c", "b")])),
            None
        );
    }
}
