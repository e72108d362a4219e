//! `plan` over several RayServices (issue 45: "how much spare quota N concurrent upgrades of the given
//! services need"): each service's own report, and what they need together through one queue: all of
//! them at steady state, plus the sum of their upgrade extras when none may wait on another, or the
//! largest extra when they take turns (a waiting upgrade holds nothing, so turns cannot deadlock).

use std::collections::BTreeMap;

use super::render::{Output, table};
use super::{PlanError, Report, phases, show};
use crate::api::ray::RayService;
use crate::queue::amount::Amount;

/// What several services need together.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Together {
    pub ray_services: Vec<String>,
    /// Every service at steady state.
    pub steady: BTreeMap<String, String>,
    /// Spare quota beyond that for every upgrade at its peak at once: none waits.
    pub without_waiting: BTreeMap<String, String>,
    /// Spare quota for the upgrades taking turns: the largest single extra.
    pub taking_turns: BTreeMap<String, String>,
}

/// One report per service, and what they need together (when there are several).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plans {
    pub services: Vec<Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub together: Option<Together>,
    /// RayJobs planned (files holding RayJobs and no RayService).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<super::rayjob::JobPlan>,
}

/// Sums and maxima of the services' steady totals and upgrade extras (each upgrading to its own spec).
pub fn together(services: &[RayService]) -> Result<Together, PlanError> {
    let (mut steady, mut sum, mut max) = (
        BTreeMap::<String, Amount>::new(),
        BTreeMap::<String, Amount>::new(),
        BTreeMap::<String, Amount>::new(),
    );
    let mut names = Vec::new();
    for rs in services {
        let s = phases::steady(rs, "spec")?;
        let peak = phases::peak(rs, rs)?;
        for (r, v) in &s.totals {
            *steady.entry(r.clone()).or_default() += *v;
        }
        for (r, v) in &peak.totals {
            let extra = (*v - s.totals.get(r).copied().unwrap_or_default()).clamp_zero();
            *sum.entry(r.clone()).or_default() += extra;
            let m = max.entry(r.clone()).or_default();
            *m = (*m).max(extra);
        }
        let ns = rs.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        names.push(format!("{ns}/{}", rs.metadata.name.clone().unwrap_or_default()));
    }
    let shown = |m: BTreeMap<String, Amount>| m.into_iter().map(|(r, v)| (r.clone(), show(&r, v))).collect();
    Ok(Together {
        ray_services: names,
        steady: shown(steady),
        without_waiting: shown(sum),
        taking_turns: shown(max),
    })
}

fn together_text(t: &Together) -> String {
    let mut out = format!(
        "Together: {} RayServices through one queue ({})\n\n",
        t.ray_services.len(),
        t.ray_services.join(", ")
    );
    let resources: Vec<&String> = t
        .steady
        .keys()
        .chain(t.without_waiting.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut header = vec!["WHAT".to_string()];
    header.extend(resources.iter().map(|r| r.to_uppercase()));
    let mut rows = vec![header];
    for (what, m) in [
        ("every service at steady state", &t.steady),
        ("spare for all upgrades at once, none waiting", &t.without_waiting),
        ("spare for upgrades taking turns", &t.taking_turns),
    ] {
        let mut row = vec![what.to_string()];
        row.extend(
            resources
                .iter()
                .map(|r| m.get(*r).cloned().unwrap_or_else(|| "0".into())),
        );
        rows.push(row);
    }
    out.push_str(&table(&rows));
    out
}

/// One service renders as `plan` always has; several as each report, then what they need together.
pub fn render_all(p: &Plans, output: Output) -> Result<String, String> {
    if let ([one], None) = (p.services.as_slice(), &p.together) {
        return super::render(one, output);
    }
    if let ([], [one]) = (p.services.as_slice(), p.jobs.as_slice()) {
        return super::rayjob::render(one, output);
    }
    match output {
        Output::Table => {
            let mut out = String::new();
            for r in &p.services {
                out.push_str(&super::render(r, Output::Table)?);
                out.push('\n');
            }
            for j in &p.jobs {
                out.push_str(&super::rayjob::render(j, Output::Table)?);
                out.push('\n');
            }
            if let Some(t) = &p.together {
                out.push_str(&together_text(t));
            }
            Ok(out)
        }
        Output::Json => serde_json::to_string_pretty(p)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Yaml => serde_saphyr::to_string(p).map_err(|e| e.to_string()),
    }
}
