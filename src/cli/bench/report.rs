//! The figures of a run beside Kueue's published ones and the physical lower bound, as text or JSON,
//! and the pass/fail check against a rangespec.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::config::{Plan, RangeSpec};
use super::runner::Measured;

/// What Kueue published for a shipped config (Kueue's scheduler performance results): mean wall, and per
/// class the mean time to admission, in ms; mean ClusterQueue usage in percent.
pub struct Published {
    pub wall_ms: f64,
    pub admission_ms: &'static [(&'static str, f64)],
    pub usage_pct: f64,
}

pub fn published(config: &str) -> Option<Published> {
    match config {
        "baseline" => Some(Published {
            wall_ms: 351_116.0,
            admission_ms: &[("large", 16_501.0), ("medium", 76_768.0), ("small", 215_468.0)],
            usage_pct: 55.9,
        }),
        "large-scale" => Some(Published {
            wall_ms: 1_179_411.0,
            admission_ms: &[("large", 105_604.0), ("medium", 256_413.0), ("small", 700_379.0)],
            usage_pct: 38.64,
        }),
        // Kueue's TAS config: the means of its ten CI runs, written beside its rangespec.
        "tas" => Some(Published {
            wall_ms: 401_472.0,
            admission_ms: &[
                ("large-balanced-rack", 37_862.0),
                ("large-preferred-rack", 39_573.0),
                ("large-required-rack", 39_625.0),
                ("medium-balanced-rack", 106_303.0),
                ("medium-preferred-rack", 106_324.0),
                ("medium-required-rack", 107_071.0),
                ("small-balanced-rack", 237_846.0),
                ("small-preferred-rack", 246_090.0),
                ("small-required-rack", 246_755.0),
            ],
            usage_pct: 62.41,
        }),
        _ => None,
    }
}

/// Per class: average, p50 and p99 time to admission, in ms.
pub fn admission_stats(samples: &[Duration]) -> (f64, f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    (ms.iter().sum::<f64>() / ms.len() as f64, at(0.5), at(0.99))
}

/// Usage in percent of a ClusterQueue class: CPU used over nominal × wall.
pub fn usage_pct(used_milli_s: f64, nominal_m: i64, wall: Duration) -> f64 {
    let cap = nominal_m as f64 * wall.as_secs_f64();
    if cap <= 0.0 {
        0.0
    } else {
        100.0 * used_milli_s / cap
    }
}

pub fn to_json(name: &str, scale: f64, plan: &Plan, m: &Measured) -> Value {
    let wall_ms = m.wall.as_secs_f64() * 1000.0;
    let classes: BTreeMap<&String, Value> = m
        .admission
        .iter()
        .map(|(c, s)| {
            let (avg, p50, p99) = admission_stats(s);
            (c, json!({"avgMs": avg.round(), "p50Ms": p50.round(), "p99Ms": p99.round(), "admitted": s.len()}))
        })
        .collect();
    let usage: BTreeMap<&String, f64> = m
        .usage
        .iter()
        .map(|(c, (u, n))| (c, (usage_pct(*u, *n, m.wall) * 10.0).round() / 10.0))
        .collect();
    let wall_s = m.wall.as_secs_f64().max(1e-9);
    // Kueue published figures for the configs as shipped: beside a scaled run they compare nothing.
    let kueue = published(name).filter(|_| scale == 1.0).map(|p| {
        json!({
            "wallMs": p.wall_ms,
            "wallOverBound": p.wall_ms / plan.lower_bound_ms as f64,
            "avgTimeToAdmissionMs": p.admission_ms.iter().map(|(c, v)| (c.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "clusterQueueUsagePct": p.usage_pct,
        })
    });
    json!({
        "config": name,
        "scale": scale,
        "ground": m.ground,
        "process": m.process,
        "workloads": m.workloads,
        "clusterQueues": plan.queues.len(),
        "lowerBoundMs": plan.lower_bound_ms,
        "wallMs": wall_ms.round(),
        "wallOverBound": wall_ms / plan.lower_bound_ms as f64,
        "timeToAdmission": classes,
        "clusterQueueUsagePct": usage,
        "evictions": m.evictions,
        "cpuMs": m.cpu.map(|c| c.as_millis() as u64),
        "avgMilliCpu": m.cpu.map(|c| (c.as_secs_f64() / wall_s * 1000.0).round()),
        "maxRssKiB": m.max_rss_kib,
        "apiRequests": m.requests,
        "apiRequestsPerSecond": (m.requests as f64 / wall_s).round(),
        "apiRequestsBy": m.requests_by,
        "workloadWatchEventsPerWorkload": m.watch_events as f64 / m.workloads.max(1) as f64,
        "admissionLoop": {
            "cycles": m.admission_loop.cycles,
            "examinedPerCycle": m.admission_loop.examined / m.admission_loop.cycles.max(1),
            "readPerCycle": m.admission_loop.read / m.admission_loop.cycles.max(1),
            "phaseMs": crate::admission::Phase::ALL.iter().zip(m.admission_loop.phases)
                .map(|(p, d)| (p.as_str().to_string(), json!(d.as_millis() as u64)))
                .collect::<serde_json::Map<_, _>>(),
            "summary": m.admission_loop.summary(),
        },
        "kueuePublished": kueue,
        "tasNodes": m.tas_nodes,
        "placements": m.placements,
    })
}

pub fn to_text(v: &Value) -> String {
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    let k = &v["kueuePublished"];
    let mut out = String::new();
    out.push_str(&format!(
        "quotagate bench e2e: {} at scale {} ({} workloads, {} ClusterQueues) on {}, lower bound {:.1} s\n\n",
        v["config"].as_str().unwrap_or("?"),
        f("scale"),
        f("workloads"),
        f("clusterQueues"),
        v["ground"].as_str().unwrap_or("?"),
        f("lowerBoundMs") / 1000.0
    ));
    out.push_str(&format!(
        "{:<44}{:>22}{:>22}\n",
        "", "quotagate", "Kueue (published)"
    ));
    let kwall = k["wallMs"].as_f64().map_or("-".to_string(), |w| {
        format!(
            "{:.1} s ({:.2}x)",
            w / 1000.0,
            k["wallOverBound"].as_f64().unwrap_or(0.0)
        )
    });
    out.push_str(&format!(
        "{:<44}{:>22}{:>22}\n",
        "wall (x lower bound)",
        format!("{:.1} s ({:.2}x)", f("wallMs") / 1000.0, f("wallOverBound")),
        kwall
    ));
    if let Some(classes) = v["timeToAdmission"].as_object() {
        for (c, s) in classes {
            let kv = k["avgTimeToAdmissionMs"][c]
                .as_f64()
                .map_or("-".to_string(), |x| format!("{:.1} s", x / 1000.0));
            out.push_str(&format!(
                "{:<44}{:>22}{:>22}\n",
                format!("time to admission {c} avg"),
                format!("{:.2} s", s["avgMs"].as_f64().unwrap_or(0.0) / 1000.0),
                kv
            ));
            out.push_str(&format!(
                "{:<44}{:>22}\n",
                format!("time to admission {c} p50 / p99"),
                format!(
                    "{:.2} / {:.2} s",
                    s["p50Ms"].as_f64().unwrap_or(0.0) / 1000.0,
                    s["p99Ms"].as_f64().unwrap_or(0.0) / 1000.0
                )
            ));
        }
    }
    if let Some(usage) = v["clusterQueueUsagePct"].as_object() {
        for (c, u) in usage {
            let kv = k["clusterQueueUsagePct"]
                .as_f64()
                .map_or("-".to_string(), |x| format!("{x:.1}%"));
            out.push_str(&format!(
                "{:<44}{:>22}{:>22}\n",
                format!("ClusterQueue usage {c}"),
                format!("{:.1}%", u.as_f64().unwrap_or(0.0)),
                kv
            ));
        }
    }
    if let Some(p) = v["placements"].as_object().filter(|p| !p.is_empty()) {
        out.push_str(&format!(
            "\nTAS placements ({} Nodes), per class: admissions checked / spread over domains / without assignment / miscounted\n",
            v["tasNodes"]
        ));
        for (c, t) in p {
            let n = |k: &str| t[k].as_u64().unwrap_or(0);
            out.push_str(&format!(
                "  {c:<32}{:>8} / {} / {} / {}\n",
                n("admissions"),
                n("spread"),
                n("unassigned"),
                n("miscounted")
            ));
        }
    }
    out.push_str(&format!(
        "\nprocess ({}): {} ms CPU ({} mCPU avg), max RSS {} MiB\n",
        v["process"].as_str().unwrap_or("?"),
        v["cpuMs"],
        v["avgMilliCpu"],
        v["maxRssKiB"]
            .as_f64()
            .map_or("?".to_string(), |k| format!("{:.0}", k / 1024.0))
    ));
    out.push_str(&format!(
        "API requests: {} ({}/s); Workload watch events per workload: {:.1}; evictions: {}\n",
        v["apiRequests"],
        v["apiRequestsPerSecond"],
        f("workloadWatchEventsPerWorkload"),
        v["evictions"]
    ));
    if let Some(by) = v["apiRequestsBy"].as_object() {
        let mut top: Vec<(&String, u64)> = by.iter().map(|(k, n)| (k, n.as_u64().unwrap_or(0))).collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        let line: Vec<String> = top.iter().take(6).map(|(k, n)| format!("{k} {n}")).collect();
        out.push_str(&format!("  busiest: {}\n", line.join(", ")));
    }
    if let Some(line) = v["admissionLoop"]["summary"].as_str() {
        out.push_str(&format!("{line}\n"));
    }
    out
}

/// Every threshold of `spec` the run misses, named as the rangespec names it; and, for a TAS run,
/// every class with an admission whose placement broke its constraint (`placement.<class>`).
pub fn check(spec: &RangeSpec, v: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    for (class, t) in v["placements"].as_object().into_iter().flatten() {
        let n = |k: &str| t[k].as_u64().unwrap_or(0);
        if n("spread") + n("unassigned") + n("miscounted") > 0 {
            bad.push(format!(
                "placement.{class}: of {} admissions {} spread over domains of their level, {} without a topologyAssignment, {} miscounted",
                n("admissions"),
                n("spread"),
                n("unassigned"),
                n("miscounted")
            ));
        }
    }
    let wall = v["wallMs"].as_f64().unwrap_or(f64::MAX);
    if let Some(max) = spec.cmd.max_wall_ms
        && wall > max.0
    {
        bad.push(format!("cmd.maxWallMs: wall {wall:.0} ms > {}", max.0));
    }
    if let Some(max) = spec.cmd.m_cpu
        && let Some(m) = v["avgMilliCpu"].as_f64()
        && m > max.0
    {
        bad.push(format!("cmd.mCPU: {m:.0} > {}", max.0));
    }
    if let Some(max) = spec.cmd.maxrss
        && let Some(k) = v["maxRssKiB"].as_f64()
        && k > max.0
    {
        bad.push(format!("cmd.maxrss: {k:.0} KiB > {}", max.0));
    }
    for (class, min) in &spec.cluster_queue_classes_min_usage {
        match v["clusterQueueUsagePct"][class].as_f64() {
            Some(u) if u >= min.0 => {}
            Some(u) => bad.push(format!(
                "clusterQueueClassesMinUsage.{class}: {u:.1}% < {}%",
                min.0
            )),
            None => bad.push(format!(
                "clusterQueueClassesMinUsage.{class}: no such ClusterQueue class in the run"
            )),
        }
    }
    for (class, max) in &spec.wl_classes_max_avg_time_to_admission_ms {
        match v["timeToAdmission"][class]["avgMs"].as_f64() {
            Some(a) if a <= max.0 => {}
            Some(a) => bad.push(format!(
                "wlClassesMaxAvgTimeToAdmissionMs.{class}: {a:.0} ms > {}",
                max.0
            )),
            None => bad.push(format!(
                "wlClassesMaxAvgTimeToAdmissionMs.{class}: no such workload class in the run"
            )),
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bench::config::Number;

    #[test]
    fn a_run_outside_the_rangespec_fails_by_name() {
        let v = json!({
            "wallMs": 500.0,
            "clusterQueueUsagePct": {"cq": 40.0},
            "timeToAdmission": {"large": {"avgMs": 900.0}},
        });
        let mut spec = RangeSpec::default();
        spec.cmd.max_wall_ms = Some(Number(400.0));
        spec.cluster_queue_classes_min_usage
            .insert("cq".into(), Number(50.0));
        spec.wl_classes_max_avg_time_to_admission_ms
            .insert("large".into(), Number(1000.0));
        spec.wl_classes_max_avg_time_to_admission_ms
            .insert("tiny".into(), Number(1.0));
        let bad = check(&spec, &v);
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(bad[0].starts_with("cmd.maxWallMs"));
        assert!(bad[1].starts_with("clusterQueueClassesMinUsage.cq"));
        assert!(bad[2].contains("tiny"));
        spec.cmd.max_wall_ms = Some(Number(600.0));
        spec.cluster_queue_classes_min_usage.clear();
        spec.wl_classes_max_avg_time_to_admission_ms.remove("tiny");
        assert!(check(&spec, &v).is_empty());
    }

    #[test]
    fn admission_percentiles() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let (avg, p50, p99) = admission_stats(&s);
        assert_eq!((avg, p50, p99), (50.5, 51.0, 99.0));
    }
}
