//! The RayService cards: active and pending clusters, the quota gate and the slice it waits for, the
//! upgrade's phase, the traffic chart and recent Events.

use std::fmt::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;

use super::{esc, find_cond, obj_link};
use crate::api::conditions::{FALSE, TRUE};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::label::{QUEUE_NAME as QUEUE_NAME_LABEL, WORKLOAD_SLICE_REPLACEMENT_FOR};
use crate::api::ray::constants::COND_QUOTA_GATED;
use crate::api::ray::{RayCluster, RayService};
use crate::wiring::ui::model::{EventLine, Sample, Snapshot};
use crate::wiring::ui::shortfall::shortfall;

fn quota_gate(rc: &RayCluster) -> Option<&Condition> {
    rc.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| find_cond(c, COND_QUOTA_GATED))
}

/// The gate of a RayService's pending cluster: (open?, what it says).
fn gate(snap: &Snapshot, rs: &RayService, pending: Option<&str>) -> (Option<bool>, String) {
    let ns = rs.namespace().unwrap_or_default();
    let Some(pending) = pending else {
        return (None, "no upgrade in progress".into());
    };
    if rs.labels().get(QUEUE_NAME_LABEL).is_none_or(|q| q.is_empty()) {
        return (
            None,
            "none: not queue-managed (no kueue.x-k8s.io/queue-name label)".into(),
        );
    }
    let rc = snap
        .ray_clusters
        .iter()
        .map(|c| &**c)
        .find(|c| c.namespace().as_deref() == Some(ns.as_str()) && c.name_any() == pending);
    let waiting: Vec<&Workload> = snap
        .workloads
        .iter()
        .map(|w| &**w)
        .filter(|w| {
            w.namespace().as_deref() == Some(ns.as_str()) && !w.is_finished() && !w.has_quota_reservation()
        })
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|o| o.kind == "RayService" && o.name == rs.name_any())
        })
        .collect();
    // The pending cluster's condition decides; one on the service itself is the fallback.
    let cond = rc
        .and_then(quota_gate)
        .or_else(|| rs_condition(rs, COND_QUOTA_GATED));
    let open = match cond {
        Some(c) if c.status == FALSE => Some(true),
        Some(c) if c.status == TRUE => Some(false),
        _ => None,
    };
    // The waiting slice says it best (name, what it replaces, the shortfall); the RayCluster's
    // condition message is the fallback before the slice exists.
    let slices: Vec<String> = waiting
        .iter()
        .map(|w| {
            let cq = snap.cluster_queues.iter().map(|q| &**q).find(|q| {
                snap.local_queues.iter().any(|lq| {
                    lq.namespace().as_deref() == Some(ns.as_str())
                        && lq.name_any() == w.spec.queue_name()
                        && lq.spec.cluster_queue.as_deref() == Some(q.name_any().as_str())
                })
            });
            let replaces = w
                .annotations()
                .get(WORKLOAD_SLICE_REPLACEMENT_FOR)
                .map(|r| format!(" (replaces {r})"))
                .unwrap_or_default();
            format!(
                "waits for workload slice {}{replaces}: {}",
                w.name_any(),
                shortfall(w, cq).unwrap_or_default()
            )
        })
        .collect();
    let text = match (open, cond) {
        (Some(true), _) => "open: an admitted workload slice covers the pending cluster".to_string(),
        (Some(false), _) if !slices.is_empty() => format!("closed: {}", slices.join("; ")),
        (Some(false), Some(c)) => format!(
            "closed: {}",
            if c.message.is_empty() {
                &c.reason
            } else {
                &c.message
            }
        ),
        _ if !slices.is_empty() => format!("not decided yet; {}", slices.join("; ")),
        _ => "not decided yet".to_string(),
    };
    (open, text)
}

fn rs_condition<'a>(rs: &'a RayService, t: &str) -> Option<&'a Condition> {
    rs.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| find_cond(c, t))
}

/// Where the upgrade stands, from the status the operator wrote.
fn phase(rs: &RayService, pending: Option<&str>, gate_open: Option<bool>) -> String {
    let st = rs.status.as_ref();
    let pending_traffic = st
        .and_then(|s| s.pending_service_status.as_ref())
        .and_then(|p| p.traffic_routed_percent)
        .unwrap_or(0);
    let is_true = |t: &str| rs_condition(rs, t).is_some_and(|c| c.status == TRUE);
    if is_true(crate::api::ray::constants::COND_ROLLBACK_IN_PROGRESS) {
        return "Rolling back".into();
    }
    if is_true(crate::api::ray::constants::COND_SUSPENDED) {
        return "Suspended".into();
    }
    let ready = is_true("Ready");
    match (pending, gate_open) {
        (None, _) if ready => "Serving".into(),
        (None, _) => "Starting".into(),
        (Some(_), Some(false)) => "Upgrade gated: waiting for quota".into(),
        (Some(_), _) if pending_traffic > 0 => {
            format!("Moving traffic: {pending_traffic}% on the new cluster")
        }
        (Some(_), Some(true)) => "Upgrade admitted: new cluster starting".into(),
        (Some(_), None) => "Upgrade: new cluster starting".into(),
    }
}

/// Traffic (solid) and target capacity (dashed) of the active (blue) and pending (orange) clusters.
pub fn chart(points: &[Sample], now: f64) -> String {
    const W: f64 = 320.0;
    const H: f64 = 80.0;
    if points.is_empty() {
        return String::new();
    }
    let t0 = points[0].t;
    let span = (now - t0).max(1.0);
    let x = |t: f64| ((t - t0) / span * W).clamp(0.0, W);
    // 4 px inside the frame, so 0 % and 100 % stay visible.
    let y = |v: i32| H - 4.0 - (f64::from(v.clamp(0, 100)) / 100.0 * (H - 8.0));
    let line = |get: &dyn Fn(&Sample) -> Option<i32>, class: &str| {
        let mut d = String::new();
        let mut last: Option<f64> = None;
        for p in points {
            match get(p) {
                Some(v) => {
                    let (px, py) = (x(p.t), y(v));
                    match last {
                        Some(ly) => {
                            let _ = write!(d, " L{px:.1},{ly:.1} L{px:.1},{py:.1}");
                        }
                        None => {
                            let _ = write!(d, " M{px:.1},{py:.1}");
                        }
                    }
                    last = Some(py);
                }
                None => last = None,
            }
        }
        if let (Some(ly), Some(p)) = (last, points.last()) {
            let _ = write!(d, " L{:.1},{ly:.1}", x(now.max(p.t)));
        }
        if d.is_empty() {
            String::new()
        } else {
            format!("<path class=\"{class}\" d=\"{}\"/>", d.trim())
        }
    };
    format!(
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"traffic and target capacity over the last {span:.0} s\">\
         <rect class=\"frame\" x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\"/>{}{}{}{}{}</svg>\
         <div class=\"chart-legend\"><span class=\"k active\">active</span> <span class=\"k pending\">pending</span> cluster: traffic % (solid), target capacity % (dashed), switch (grey), last {span:.0} s</div>",
        line(&|p| p.active_capacity, "active cap"),
        line(&|p| p.pending_capacity, "pending cap"),
        line(&|p| p.active_traffic, "active traffic"),
        line(&|p| p.pending_traffic, "pending traffic"),
        switches(points, &x),
    )
}

/// A vertical mark where the active cluster changed (the switch to the upgraded cluster).
fn switches(points: &[Sample], x: &dyn Fn(f64) -> f64) -> String {
    let mut s = String::new();
    for w in points.windows(2) {
        if w[0].active_cluster.is_some()
            && w[1].active_cluster.is_some()
            && w[0].active_cluster != w[1].active_cluster
        {
            let px = x(w[1].t);
            let _ = write!(
                s,
                "<line class=\"switch\" x1=\"{px:.1}\" y1=\"0\" x2=\"{px:.1}\" y2=\"80\"><title>switched to {}</title></line>",
                esc(w[1].active_cluster.as_deref().unwrap_or(""))
            );
        }
    }
    s
}

fn cluster_line(
    snap: &Snapshot,
    ns: &str,
    role: &str,
    st: Option<&crate::api::ray::rayservice::RayServiceStatus>,
) -> String {
    let Some(name) = st
        .and_then(|s| s.ray_cluster_name.as_deref())
        .filter(|n| !n.is_empty())
    else {
        return format!("<div class=\"cl\">{role} cluster: none</div>");
    };
    let rc = snap
        .ray_clusters
        .iter()
        .find(|c| c.namespace().as_deref() == Some(ns) && c.name_any() == name);
    let state = rc
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.state)
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "starting".into());
    // A blue/green upgrade writes no percentages: all traffic goes to the active cluster until the switch.
    let traffic = match st.and_then(|s| s.traffic_routed_percent) {
        Some(v) => format!("traffic {v}%"),
        None if role == "active" => "all traffic".into(),
        None => "no traffic yet".into(),
    };
    let capacity = st
        .and_then(|s| s.target_capacity)
        .map(|v| format!(" · target capacity {v}%"))
        .unwrap_or_default();
    format!(
        "<div class=\"cl\" data-role=\"{role}\" data-cluster=\"{}\">{role} cluster {} <span class=\"note\">{}</span>{capacity} · {traffic}</div>",
        esc(name),
        obj_link("RayCluster", ns, name),
        esc(&state)
    )
}

fn events_list(snap: &Snapshot, objects: &[(&str, &str, &str)]) -> String {
    let mut lines: Vec<(&str, &EventLine)> = Vec::new();
    for (kind, ns, name) in objects {
        if let Some(ls) = snap
            .events
            .get(&(kind.to_string(), ns.to_string(), name.to_string()))
        {
            lines.extend(ls.iter().map(|l| (*name, l)));
        }
    }
    lines.sort_by_key(|(_, l)| std::cmp::Reverse(l.time));
    lines.truncate(8);
    if lines.is_empty() {
        return String::new();
    }
    let mut s = String::from("<ul class=\"events\">");
    for (obj, l) in lines {
        let when = l
            .time
            .map(|t| t.strftime("%H:%M:%S").to_string())
            .unwrap_or_default();
        let times = if l.count > 1 {
            format!(" (x{})", l.count)
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "<li class=\"{}\"><span class=\"note\">{}</span> {} <b>{}</b>{times}: {}</li>",
            if l.type_ == "Warning" { "warning" } else { "normal" },
            esc(&when),
            esc(obj),
            esc(&l.reason),
            esc(&l.note)
        );
    }
    s.push_str("</ul>");
    s
}

pub(super) fn ray_service_card(snap: &Snapshot, rs: &RayService, now: f64) -> String {
    let ns = rs.namespace().unwrap_or_default();
    let name = rs.name_any();
    let st = rs.status.as_ref();
    let active = st.and_then(|s| s.active_service_status.as_ref());
    let pending_st = st.and_then(|s| s.pending_service_status.as_ref());
    let pending = pending_st
        .and_then(|p| p.ray_cluster_name.as_deref())
        .filter(|n| !n.is_empty());
    let (open, gate_text) = gate(snap, rs, pending);
    let gate_class = match open {
        Some(true) => "open",
        Some(false) => "closed",
        None => "none",
    };
    let queue = rs
        .labels()
        .get(QUEUE_NAME_LABEL)
        .map(|q| format!(" · LocalQueue {}", esc(q)))
        .unwrap_or_default();
    // The operator's own words on the upgrade, on hover.
    let detail = rs_condition(rs, crate::api::ray::constants::COND_UPGRADE_IN_PROGRESS)
        .map(|c| c.message.as_str())
        .unwrap_or("");
    let mut s = format!(
        "<div class=\"rs\" data-rayservice=\"{}\"><div class=\"head\">RayService {}{queue} <span class=\"pill phase\" title=\"{}\">{}</span></div>",
        esc(&name),
        obj_link("RayService", &ns, &name),
        esc(detail),
        esc(&phase(rs, pending, open))
    );
    s.push_str(&cluster_line(snap, &ns, "active", active));
    s.push_str(&cluster_line(
        snap,
        &ns,
        "pending",
        pending_st.filter(|_| pending.is_some()),
    ));
    let _ = write!(
        s,
        "<div class=\"gate {gate_class}\" data-gate=\"{gate_class}\">gate: {}</div>",
        esc(&gate_text)
    );
    if let Some(points) = snap.history.get(&(ns.clone(), name.clone())) {
        s.push_str(&chart(points, now));
    }
    let mut objects = vec![("RayService", ns.as_str(), name.as_str())];
    for c in [active, pending_st]
        .into_iter()
        .flatten()
        .filter_map(|s| s.ray_cluster_name.as_deref())
    {
        objects.push(("RayCluster", ns.as_str(), c));
    }
    s.push_str(&events_list(snap, &objects));
    s.push_str("</div>");
    s
}
