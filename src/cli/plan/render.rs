//! `plan`'s output: kubectl-like tables by default, or the report as JSON or YAML.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{PhaseReport, Report};
use crate::queue::Explanation;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Table,
    Json,
    Yaml,
}

/// Left-aligned columns separated by three spaces, as kubectl prints them.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}   ", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn resources(r: &Report) -> Vec<String> {
    let set: BTreeSet<&String> = r.steady.total.keys().chain(r.peak.total.keys()).collect();
    set.into_iter().cloned().collect()
}

fn verdict_cell(p: &PhaseReport) -> String {
    match &p.admission {
        None => String::new(),
        Some(v) if v.admitted => {
            let flavors: BTreeSet<&String> = v.flavors.values().flat_map(|m| m.values()).collect();
            format!(
                "yes ({})",
                flavors.into_iter().cloned().collect::<Vec<_>>().join(",")
            )
        }
        Some(v) => format!("no ({})", v.reason),
    }
}

/// Whether the phase fits its topology: where each podset goes, or which level has no room.
fn write_topology(out: &mut String, p: &PhaseReport) {
    let Some(t) = p.admission.as_ref().and_then(|v| v.topology.as_ref()) else {
        return;
    };
    let fits = match t.fits {
        Some(true) => "yes",
        Some(false) => "no",
        None => "not tried (quota does not fit first)",
    };
    let _ = writeln!(
        out,
        "\n{} topology: fits {fits}; by quota alone: {}",
        p.name,
        yes_no(t.by_quota)
    );
    for (podset, domains) in &t.placements {
        let at = domains
            .iter()
            .map(|(d, n)| format!("{d}={n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "  {podset}: {at}");
    }
    if !t.why.is_empty() {
        let _ = writeln!(out, "  {}", t.why);
    }
}

fn write_shortfall(out: &mut String, p: &PhaseReport) {
    let Some(v) = p.admission.as_ref().filter(|v| !v.admitted) else {
        return;
    };
    let _ = writeln!(out, "\n{}: {}", p.name, v.message);
    let Some(e) = &v.explanation else { return };
    out.push_str(&flavor_table(e, false));
    if !e.holders.is_empty() {
        out.push('\n');
        out.push_str(&holder_table(e));
    }
    let _ = writeln!(out, "preemption ({}): {}", e.preemption.policy, e.preemption.why);
}

fn yes_no(b: bool) -> String {
    (if b { "yes" } else { "no" }).into()
}

/// A scheduler record's numbers per podset, resource and flavor tried (`plan`'s shortfall and
/// `explain`); `count` adds each podset's pod count. A slice that replaces an admitted one also
/// shows what it ADDS: USED already counts what the replaced slice holds, and only the growth has
/// to fit in AVAILABLE.
pub fn flavor_table(e: &Explanation, count: bool) -> String {
    let growth = e.replaces.is_some();
    let mut head = vec![
        "PODSET",
        "COUNT",
        "RESOURCE",
        "REQUESTED",
        "ADDS",
        "FLAVOR",
        "NOMINAL",
        "USED",
        "AVAILABLE",
        "BORROWABLE",
        "PREEMPTIBLE",
        "FITS",
    ];
    if !growth {
        head.remove(4);
    }
    if !count {
        head.remove(1);
    }
    let mut rows = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for ps in &e.podsets {
        for r in &ps.resources {
            for f in &r.flavors {
                let mut row = vec![ps.name.clone()];
                if count {
                    row.push(ps.count.to_string());
                }
                row.extend([r.resource.clone(), r.requested.clone()]);
                if growth {
                    row.push(f.adds.clone());
                }
                row.extend([
                    f.flavor.clone(),
                    f.nominal.clone(),
                    f.used.clone(),
                    f.available.clone(),
                    f.borrowable.clone(),
                    f.preemptible.clone(),
                    yes_no(f.fits),
                ]);
                rows.push(row);
            }
        }
    }
    table(&rows)
}

/// The admitted workloads holding the quota a record is short of.
pub fn holder_table(e: &Explanation) -> String {
    let mut rows = vec![
        ["HOLDER", "CLUSTERQUEUE", "PRIORITY", "HOLDS", "PREEMPTIBLE"]
            .map(String::from)
            .to_vec(),
    ];
    for h in &e.holders {
        let holds = h
            .holds
            .iter()
            .map(|(fr, v)| format!("{v} {fr}"))
            .collect::<Vec<_>>()
            .join(", ");
        rows.push(vec![
            h.workload.clone(),
            h.cluster_queue.clone(),
            h.priority.to_string(),
            holds,
            yes_no(h.preemptible),
        ]);
    }
    table(&rows)
}

fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "RayService {}   upgrade strategy {}",
        r.ray_service, r.strategy
    );
    if let Some(cq) = &r.cluster_queue {
        let _ = writeln!(
            out,
            "ClusterQueue {cq}{}",
            r.replaces
                .as_ref()
                .map(|k| format!(" (the upgrade's slice replaces admitted {k})"))
                .unwrap_or_default()
        );
    }
    out.push('\n');
    let res = resources(r);
    let mut header = vec!["PHASE".to_string()];
    header.extend(res.iter().map(|s| s.to_uppercase()));
    if r.cluster_queue.is_some() {
        header.push("ADMITTED NOW".into());
    }
    let mut rows = vec![header];
    for p in [&r.steady, &r.peak] {
        let mut row = vec![p.name.clone()];
        row.extend(
            res.iter()
                .map(|k| p.total.get(k).cloned().unwrap_or_else(|| "0".into())),
        );
        if r.cluster_queue.is_some() {
            row.push(verdict_cell(p));
        }
        rows.push(row);
    }
    let mut row = vec!["upgrade needs on top of steady".to_string()];
    row.extend(
        res.iter()
            .map(|k| r.upgrade_extra.get(k).cloned().unwrap_or_else(|| "0".into())),
    );
    rows.push(row);
    let c = &r.concurrent;
    let mut row = vec![format!("{} concurrent upgrades, none waiting", c.upgrades)];
    row.extend(
        res.iter()
            .map(|k| c.without_waiting.get(k).cloned().unwrap_or_else(|| "0".into())),
    );
    rows.push(row);
    let mut row = vec![format!("{} concurrent upgrades, taking turns", c.upgrades)];
    row.extend(
        res.iter()
            .map(|k| c.taking_turns.get(k).cloned().unwrap_or_else(|| "0".into())),
    );
    rows.push(row);
    out.push_str(&table(&rows));
    let _ = writeln!(
        out,
        "(spare quota beyond every service at steady state; taking turns, a waiting upgrade holds nothing and cannot deadlock)"
    );
    for p in [&r.steady, &r.peak] {
        let _ = writeln!(out, "\n{}:", p.name);
        let mut rows = vec![vec!["PODSET".to_string(), "COUNT".into()]];
        rows[0].extend(res.iter().map(|s| format!("{}/POD", s.to_uppercase())));
        for ps in &p.podsets {
            let mut row = vec![ps.name.clone(), ps.count.to_string()];
            row.extend(
                res.iter()
                    .map(|k| ps.per_pod.get(k).cloned().unwrap_or_else(|| "0".into())),
            );
            rows.push(row);
        }
        out.push_str(&table(&rows));
        let clusters = p
            .clusters
            .iter()
            .map(|c| {
                let workers = c
                    .workers
                    .iter()
                    .map(|(g, n)| format!("{g}={n}"))
                    .collect::<Vec<_>>()
                    .join(",");
                format!(
                    "{} cluster at {}% Serve capacity (workers {workers})",
                    c.role, c.serve_capacity
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(out, "{clusters}");
    }
    write_topology(&mut out, &r.steady);
    write_topology(&mut out, &r.peak);
    write_shortfall(&mut out, &r.steady);
    write_shortfall(&mut out, &r.peak);
    out
}

pub fn render(r: &Report, output: Output) -> Result<String, String> {
    match output {
        Output::Table => Ok(text(r)),
        Output::Json => serde_json::to_string_pretty(r)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Yaml => serde_saphyr::to_string(r).map_err(|e| e.to_string()),
    }
}
