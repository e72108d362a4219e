//! The page body as server-rendered HTML, a pure function of a [`Snapshot`]: the quota tree with usage
//! bars, the workloads of each ClusterQueue in queue order (with the MultiKueue worker each runs on),
//! the MultiKueue worker clusters, the Topology domains of TAS flavors (in [`domains`]), and the
//! RayServices with their gate and traffic chart (in [`rayservice`]). Every string from the cluster
//! goes through [`esc`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;

use super::model::{Placement, Snapshot, WorkerRow, multikueue_checks, placement, workers};
use super::shortfall::shortfall;
use crate::api::conditions::TRUE;
use crate::api::kueue::constants::label::WORKLOAD_SLICE_REPLACEMENT_FOR;
use crate::api::kueue::{ClusterQueue, StopPolicy, Workload};
use crate::api::quantity::{Quantity, resource_quantity, resource_value};

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// A link that opens the object's YAML (in a dialog with JavaScript, as a page without).
fn obj_link(kind: &str, ns: &str, name: &str) -> String {
    let enc =
        |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
    format!(
        "<a class=\"obj\" href=\"{}\" data-yaml=\"{}\">{}</a>",
        esc(&format!(
            "yaml?kind={}&ns={}&name={}",
            enc(kind),
            enc(ns),
            enc(name)
        )),
        esc(&format!(
            "{kind} {}{name}",
            if ns.is_empty() {
                String::new()
            } else {
                format!("{ns}/")
            }
        )),
        esc(name)
    )
}

/// Links to the Workloads `shown` (namespace, name), then "and K more" up to `total`; "none" when
/// there are none.
pub(super) fn workload_links(shown: &[(String, String)], total: usize) -> String {
    let mut links: Vec<String> = shown.iter().map(|(ns, n)| obj_link("Workload", ns, n)).collect();
    if total > shown.len() {
        links.push(format!("and {} more", total - shown.len()));
    }
    if links.is_empty() {
        "none".to_string()
    } else {
        links.join(", ")
    }
}

fn find_cond<'a>(conds: &'a [Condition], t: &str) -> Option<&'a Condition> {
    crate::api::conditions::find(Some(conds), t)
}

/// Amounts of one resource in one flavor of a ClusterQueue, in Kueue's accounting units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub nominal: i64,
    pub borrowing_limit: Option<i64>,
    pub lending_limit: Option<i64>,
    pub reserved: i64,
    pub borrowed: i64,
    pub in_use: i64,
}

fn amount(resource: &str, q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i64 {
    q.and_then(|q| Quantity::try_from(q).ok())
        .map(|q| resource_value(resource, &q))
        .unwrap_or(0)
}

/// (flavor, resource, usage) for every quota the ClusterQueue's spec gives, in spec order.
pub fn usage_rows(cq: &ClusterQueue) -> Vec<(String, String, Usage)> {
    let status = cq.status.as_ref();
    let find = |list: Option<&Vec<crate::api::kueue::FlavorUsage>>, flavor: &str, res: &str| {
        list.into_iter()
            .flatten()
            .filter(|f| f.name == flavor)
            .flat_map(|f| f.resources.iter())
            .find(|r| r.name == res)
            .cloned()
    };
    let mut rows = Vec::new();
    for group in cq.spec.resource_groups.iter().flatten() {
        for flavor in &group.flavors {
            for r in &flavor.resources {
                let reserved = find(status.map(|s| &s.flavors_reservation), &flavor.name, &r.name);
                let used = find(status.map(|s| &s.flavors_usage), &flavor.name, &r.name);
                let u = Usage {
                    nominal: amount(&r.name, Some(&r.nominal_quota)),
                    borrowing_limit: r.borrowing_limit.as_ref().map(|q| amount(&r.name, Some(q))),
                    lending_limit: r.lending_limit.as_ref().map(|q| amount(&r.name, Some(q))),
                    reserved: amount(&r.name, reserved.as_ref().and_then(|x| x.total.as_ref())),
                    borrowed: amount(&r.name, reserved.as_ref().and_then(|x| x.borrowed.as_ref())),
                    in_use: amount(&r.name, used.as_ref().and_then(|x| x.total.as_ref())),
                };
                rows.push((flavor.name.clone(), r.name.clone(), u));
            }
        }
    }
    rows
}

/// An amount as Kubernetes prints it (`6`, `500m`, `32Gi`).
fn qty(resource: &str, v: i64) -> String {
    resource_quantity(resource, v).canonical()
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        (part.max(0) as f64 * 100.0 / whole as f64).clamp(0.0, 100.0)
    }
}

/// One usage bar: reserved (with the borrowed part marked) and in use, against nominal quota.
fn bar(cq: &str, flavor: &str, res: &str, u: &Usage) -> String {
    let lendable = u.lending_limit.unwrap_or(u.nominal);
    let cap = u
        .borrowing_limit
        .map(|b| u.nominal.saturating_add(b))
        .unwrap_or(u.nominal);
    let scale = cap.max(u.reserved).max(u.in_use).max(u.nominal).max(1);
    let own = u.reserved.saturating_sub(u.borrowed);
    let state = if u.borrowed > 0 {
        "borrowing"
    } else if u.reserved >= u.nominal && u.nominal > 0 {
        "full"
    } else {
        "ok"
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<div class=\"usage\"><div class=\"bar {state}\" data-cq=\"{}\" data-flavor=\"{}\" data-resource=\"{}\" data-nominal=\"{}\" data-reserved=\"{}\" data-in-use=\"{}\" data-borrowed=\"{}\" title=\"{}\">",
        esc(cq),
        esc(flavor),
        esc(res),
        esc(&qty(res, u.nominal)),
        esc(&qty(res, u.reserved)),
        esc(&qty(res, u.in_use)),
        esc(&qty(res, u.borrowed)),
        esc(&format!(
            "{res} in {flavor}: reserved {} of nominal {}",
            qty(res, u.reserved),
            qty(res, u.nominal)
        ))
    );
    let _ = write!(
        s,
        "<span class=\"seg reserved\" style=\"width:{:.1}%\"></span>",
        pct(own, scale)
    );
    let _ = write!(
        s,
        "<span class=\"seg borrowed\" style=\"width:{:.1}%\"></span>",
        pct(u.borrowed, scale)
    );
    let _ = write!(
        s,
        "<span class=\"inuse\" style=\"width:{:.1}%\"></span>",
        pct(u.in_use, scale)
    );
    let _ = write!(
        s,
        "<span class=\"nominal\" style=\"left:{:.1}%\"></span></div>",
        pct(u.nominal, scale)
    );
    let _ = write!(
        s,
        "<div class=\"legend\"><b>{}</b> {} · reserved <b>{}</b> of nominal <b>{}</b> · in use {} · borrowed {} · lendable {}{}</div></div>",
        esc(res),
        esc(flavor),
        esc(&qty(res, u.reserved)),
        esc(&qty(res, u.nominal)),
        esc(&qty(res, u.in_use)),
        esc(&qty(res, u.borrowed)),
        esc(&qty(res, lendable)),
        u.borrowing_limit
            .map(|b| format!(" · may borrow {}", esc(&qty(res, b))))
            .unwrap_or_default()
    );
    s
}

/// `Active`, `Stopped (Hold)` or `Inactive: <reason>`.
pub fn cq_state(cq: &ClusterQueue) -> (String, &'static str) {
    if let Some(p) = cq.spec.stop_policy.filter(|p| *p != StopPolicy::None) {
        return (format!("Stopped ({p:?})"), "stopped");
    }
    let active = cq
        .status
        .as_ref()
        .and_then(|s| find_cond(&s.conditions, "Active"));
    match active {
        Some(c) if c.status == TRUE => ("Active".into(), "active"),
        Some(c) => (format!("Inactive: {}", c.reason), "stopped"),
        None => ("Pending status".into(), "unknown"),
    }
}

fn cluster_queue_card(snap: &Snapshot, cq: &ClusterQueue, queues: &QueueIndex) -> String {
    let name = cq.name_any();
    let (state, class) = cq_state(cq);
    let st = cq.status.as_ref();
    let mut s = format!(
        "<div class=\"cq\" id=\"cq-{}\" data-cq=\"{}\"><div class=\"head\">ClusterQueue {} <span class=\"pill {class}\">{}</span> <span class=\"counts\">pending <b>{}</b> · admitted <b>{}</b></span></div>",
        esc(&name),
        esc(&name),
        obj_link("ClusterQueue", "", &name),
        esc(&state),
        st.map_or(0, |s| s.pending_workloads),
        st.map_or(0, |s| s.admitted_workloads)
    );
    for (flavor, res, u) in usage_rows(cq) {
        s.push_str(&bar(&name, &flavor, &res, &u));
    }
    let lqs: Vec<String> = snap
        .local_queues
        .iter()
        .filter(|lq| lq.spec.cluster_queue.as_deref() == Some(name.as_str()))
        .map(|lq| obj_link("LocalQueue", &lq.namespace().unwrap_or_default(), &lq.name_any()))
        .collect();
    if !lqs.is_empty() {
        let _ = write!(s, "<div class=\"lqs\">LocalQueues: {}</div>", lqs.join(", "));
    }
    s.push_str(&workload_table(queues.of(&name), Some(cq), &queues.mk_checks));
    s.push_str("</div>");
    s
}

/// The cohort tree: cohorts (explicit or only named by a ClusterQueue) with their children.
fn quota_tree(snap: &Snapshot, queues: &QueueIndex) -> String {
    let mut parent: BTreeMap<String, Option<String>> = BTreeMap::new();
    for c in &snap.cohorts {
        parent.insert(c.name_any(), c.spec.parent_name.clone().filter(|p| !p.is_empty()));
    }
    for cq in &snap.cluster_queues {
        if let Some(c) = cq.spec.cohort_name.as_ref().filter(|c| !c.is_empty()) {
            parent.entry(c.clone()).or_insert(None);
        }
    }
    let ps: Vec<(String, Option<String>)> = parent.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (_, p) in ps {
        if let Some(p) = p {
            parent.entry(p).or_insert(None);
        }
    }
    let mut s = String::from("<ul class=\"tree\">");
    let mut seen = BTreeSet::new();
    for root in parent.iter().filter(|(_, p)| p.is_none()).map(|(k, _)| k.clone()) {
        cohort_node(snap, queues, &parent, &root, &mut seen, &mut s);
    }
    // Cohorts in a parent cycle reach no root: show them flat, saying so.
    for name in parent
        .keys()
        .filter(|k| !seen.contains(*k))
        .cloned()
        .collect::<Vec<_>>()
    {
        let _ = write!(
            s,
            "<li class=\"warn\">Cohort {} is in a parent cycle</li>",
            esc(&name)
        );
        cohort_node(snap, queues, &parent, &name, &mut seen, &mut s);
    }
    for cq in snap
        .cluster_queues
        .iter()
        .filter(|q| q.spec.cohort_name.as_deref().is_none_or(str::is_empty))
    {
        let _ = write!(s, "<li>{}</li>", cluster_queue_card(snap, cq, queues));
    }
    s.push_str("</ul>");
    s
}

fn cohort_node(
    snap: &Snapshot,
    queues: &QueueIndex,
    parent: &BTreeMap<String, Option<String>>,
    name: &str,
    seen: &mut BTreeSet<String>,
    s: &mut String,
) {
    if !seen.insert(name.to_string()) {
        return;
    }
    let explicit = snap.cohorts.iter().any(|c| c.name_any() == name);
    let label = if explicit {
        obj_link("Cohort", "", name)
    } else {
        esc(name)
    };
    let _ = write!(s, "<li><div class=\"cohort\">Cohort {label}</div><ul>");
    for child in parent
        .iter()
        .filter(|(_, p)| p.as_deref() == Some(name))
        .map(|(k, _)| k.clone())
    {
        cohort_node(snap, queues, parent, &child, seen, s);
    }
    for cq in snap
        .cluster_queues
        .iter()
        .filter(|q| q.spec.cohort_name.as_deref() == Some(name))
    {
        let _ = write!(s, "<li>{}</li>", cluster_queue_card(snap, cq, queues));
    }
    s.push_str("</ul></li>");
}

/// Workloads by ClusterQueue: pending ones in queue order (priority, then creation time), then the
/// ones holding quota. Finished workloads are left out.
struct QueueIndex<'a> {
    by_cq: HashMap<String, Vec<&'a Workload>>,
    unrouted: Vec<&'a Workload>,
    /// The AdmissionChecks of MultiKueue: a Workload with one shows the worker it runs on.
    mk_checks: Vec<String>,
}

impl<'a> QueueIndex<'a> {
    fn new(snap: &'a Snapshot) -> Self {
        let lq_to_cq: HashMap<(String, String), String> = snap
            .local_queues
            .iter()
            .filter_map(|lq| {
                Some((
                    (lq.namespace().unwrap_or_default(), lq.name_any()),
                    lq.spec.cluster_queue.clone()?,
                ))
            })
            .collect();
        let mut by_cq: HashMap<String, Vec<&Workload>> = HashMap::new();
        let mut unrouted = Vec::new();
        for wl in snap.workloads.iter().map(|w| &**w).filter(|w| !w.is_finished()) {
            let cq = wl.admission().map(|a| a.cluster_queue.clone()).or_else(|| {
                lq_to_cq
                    .get(&(
                        wl.namespace().unwrap_or_default(),
                        wl.spec.queue_name().to_string(),
                    ))
                    .cloned()
            });
            match cq {
                Some(cq) => by_cq.entry(cq).or_default().push(wl),
                None => unrouted.push(wl),
            }
        }
        for list in by_cq.values_mut() {
            list.sort_by_key(|w| order_key(w));
        }
        unrouted.sort_by_key(|w| order_key(w));
        QueueIndex {
            by_cq,
            unrouted,
            mk_checks: multikueue_checks(&snap.admission_checks),
        }
    }

    fn of(&self, cq: &str) -> &[&'a Workload] {
        self.by_cq.get(cq).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Holding quota last; pending by higher priority, then earlier creation.
fn order_key(w: &Workload) -> (bool, std::cmp::Reverse<i32>, Option<jiff::Timestamp>, String) {
    (
        w.has_quota_reservation(),
        std::cmp::Reverse(w.spec.priority()),
        w.metadata.creation_timestamp.as_ref().map(|t| t.0),
        w.name_any(),
    )
}

/// Rows drawn per ClusterQueue: the head of the queue is what a person acts on, and the page stays
/// small however many workloads wait.
pub const MAX_ROWS: usize = 50;

/// Where MultiKueue runs a Workload: `on worker w1`, or where its copies wait.
fn placement_note(p: &Placement) -> String {
    match (&p.worker, p.nominated.is_empty()) {
        (Some(w), _) => format!(
            " <span class=\"note worker\" data-worker=\"{}\" title=\"MultiKueue check {} is {:?}\">on worker {}</span>",
            esc(w),
            esc(&p.check),
            p.state,
            esc(w)
        ),
        (None, false) => format!(
            " <span class=\"note worker\" data-nominated=\"{}\">copies wait on {}</span>",
            esc(&p.nominated.join(",")),
            esc(&p.nominated.join(", "))
        ),
        (None, true) => " <span class=\"note worker\">MultiKueue: not dispatched yet</span>".to_string(),
    }
}

fn workload_table(wls: &[&Workload], cq: Option<&ClusterQueue>, mk_checks: &[String]) -> String {
    if wls.is_empty() {
        return "<div class=\"empty\">no workloads</div>".into();
    }
    let mut s = String::from(
        "<table class=\"wls\"><tr><th>#</th><th>Workload</th><th>Priority</th><th>State</th><th>Why it waits</th></tr>",
    );
    let mut position = 0;
    for wl in wls.iter().take(MAX_ROWS) {
        let ns = wl.namespace().unwrap_or_default();
        let name = wl.name_any();
        let (pos, state, class) = if wl.is_admitted() {
            (String::new(), "Admitted", "admitted")
        } else if wl.has_quota_reservation() {
            (String::new(), "QuotaReserved", "admitted")
        } else {
            position += 1;
            (
                position.to_string(),
                if wl.spec.active() {
                    "Pending"
                } else {
                    "Deactivated"
                },
                "pending",
            )
        };
        let why = shortfall(wl, cq)
            .map(|m| format!("<span class=\"shortfall\">{}</span>", esc(&m)))
            .unwrap_or_default();
        let slice = wl
            .annotations()
            .get(WORKLOAD_SLICE_REPLACEMENT_FOR)
            .map(|r| format!(" <span class=\"note\">slice, replaces {}</span>", esc(r)))
            .unwrap_or_default();
        let worker = placement(wl, mk_checks)
            .map(|p| placement_note(&p))
            .unwrap_or_default();
        let _ = write!(
            s,
            "<tr class=\"wl {class}\" data-workload=\"{}\" data-state=\"{}\"><td>{pos}</td><td>{}{slice}{worker}</td><td>{}</td><td>{state}</td><td>{why}</td></tr>",
            esc(&name),
            state,
            obj_link("Workload", &ns, &name),
            wl.spec.priority()
        );
    }
    if wls.len() > MAX_ROWS {
        let _ = write!(
            s,
            "<tr class=\"more\"><td></td><td colspan=\"4\">and {} more not shown</td></tr>",
            wls.len() - MAX_ROWS
        );
    }
    s.push_str("</table>");
    s
}

/// The MultiKueue worker clusters: each with its `Active` status and reason, and the Workloads it
/// runs (the first [`super::model::WORKER_ROWS`]) or holds a waiting copy of.
fn workers_section(rows: &[WorkerRow]) -> String {
    let mut s = String::from(
        "<section><h2>MultiKueue workers</h2><table class=\"workers\"><tr><th>Worker</th><th>Active</th><th>Runs</th><th>Copies waiting</th></tr>",
    );
    for r in rows {
        let class = match r.active.as_str() {
            "True" => "active",
            "False" => "stopped",
            _ => "unknown",
        };
        let name = if r.known {
            obj_link("MultiKueueCluster", "", &r.name)
        } else {
            esc(&r.name)
        };
        let why = if r.reason.is_empty() && r.message.is_empty() {
            String::new()
        } else if r.message.is_empty() {
            format!(" {}", esc(&r.reason))
        } else {
            format!(" {}: {}", esc(&r.reason), esc(&r.message))
        };
        let _ = write!(
            s,
            "<tr class=\"worker\" data-worker=\"{}\" data-active=\"{}\" data-running=\"{}\"><td>{name}</td><td><span class=\"pill {class}\">{}</span><span class=\"note\">{why}</span></td><td>{}</td><td>{}</td></tr>",
            esc(&r.name),
            esc(&r.active),
            r.running_total,
            esc(&r.active),
            workload_links(&r.running, r.running_total),
            r.waiting
        );
    }
    s.push_str("</table></section>");
    s
}

/// The whole live part of the page. `now` is seconds since the view started (the chart's right edge).
pub fn body(snap: &Snapshot, now: f64) -> String {
    let queues = QueueIndex::new(snap);
    let mut s = String::from("<section><h2>Quota</h2>");
    if snap.cluster_queues.is_empty() && snap.cohorts.is_empty() {
        s.push_str("<div class=\"empty\">no ClusterQueues yet</div>");
    } else {
        s.push_str(&quota_tree(snap, &queues));
    }
    if !snap.flavors.is_empty() {
        let fl: Vec<String> = snap
            .flavors
            .iter()
            .map(|f| obj_link("ResourceFlavor", "", &f.name_any()))
            .collect();
        let _ = write!(s, "<div class=\"lqs\">ResourceFlavors: {}</div>", fl.join(", "));
    }
    if !queues.unrouted.is_empty() {
        s.push_str("<h3>Workloads whose LocalQueue leads to no ClusterQueue</h3>");
        s.push_str(&workload_table(&queues.unrouted, None, &queues.mk_checks));
    }
    s.push_str("</section>");
    let rows = workers(snap);
    if !rows.is_empty() {
        s.push_str(&workers_section(&rows));
    }
    s.push_str(&domains::domains_section(snap));
    s.push_str("<section><h2>RayServices</h2>");
    if let Some(why) = &snap.events_unavailable {
        let _ = write!(s, "<div class=\"note\">{}</div>", esc(why));
    }
    if snap.ray_services.is_empty() {
        s.push_str("<div class=\"empty\">no RayServices yet</div>");
    }
    for rs in &snap.ray_services {
        s.push_str(&ray_service_card(snap, rs, now));
    }
    s.push_str("</section>");
    s.push_str(&rayjob::ray_jobs(snap));
    s
}

mod domains;
mod rayjob;
mod rayservice;

pub use rayservice::chart;
use rayservice::ray_service_card;

#[cfg(test)]
mod tests;
