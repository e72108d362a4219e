//! The Topology domains section: per TAS ResourceFlavor its Topology's levels and one row per
//! lowest-level domain under headings for the domains above it, with free, held (and what pods TAS
//! did not place take) and allocatable per resource and the admitted Workloads placed there (the model is `ui/domains.rs`).

use std::fmt::Write as _;

use kube::ResourceExt;

use super::{esc, obj_link, qty, workload_links};
use crate::wiring::ui::domains::{DomainRow, FlavorDomains, domains};
use crate::wiring::ui::model::Snapshot;

/// Flavors without a topology named in the section's last line.
const PLAIN_FLAVORS: usize = 20;

/// Shown over a flavor's domains until the pods TAS did not place are listed.
const NOT_COUNTED: &str = "<div class=\"note\" data-non-tas=\"not-counted\">non-TAS pods not yet counted: \
    the free room shown leaves out what pods TAS did not place request, so it is at most the real room; \
    nothing is placed in this flavor until they are listed</div>";

/// The section, or nothing when no ResourceFlavor names a Topology.
pub(super) fn domains_section(snap: &Snapshot) -> String {
    let flavors = domains(snap);
    if flavors.is_empty() {
        return String::new();
    }
    let mut s = String::from("<section><h2>Topology domains</h2>");
    for f in &flavors {
        flavor_card(f, &mut s);
    }
    let plain: Vec<String> = snap
        .flavors
        .iter()
        .map(|f| f.name_any())
        .filter(|n| !flavors.iter().any(|f| f.flavor == *n))
        .collect();
    if !plain.is_empty() {
        let mut names: Vec<String> = plain.iter().take(PLAIN_FLAVORS).map(|n| esc(n)).collect();
        if plain.len() > PLAIN_FLAVORS {
            names.push(format!("and {} more", plain.len() - PLAIN_FLAVORS));
        }
        let _ = write!(
            s,
            "<div class=\"note\">ResourceFlavors without a topology: {}</div>",
            names.join(", ")
        );
    }
    s.push_str("</section>");
    s
}

fn flavor_card(f: &FlavorDomains, s: &mut String) {
    let levels: Vec<String> = f
        .levels
        .iter()
        .map(|l| format!("<code>{}</code>", esc(l)))
        .collect();
    let _ = write!(
        s,
        "<div class=\"topo\" data-flavor=\"{}\" data-topology=\"{}\"><div class=\"head\">ResourceFlavor {} · Topology {}{}</div>",
        esc(&f.flavor),
        esc(&f.topology),
        obj_link("ResourceFlavor", "", &f.flavor),
        if f.levels.is_empty() {
            esc(&f.topology)
        } else {
            obj_link("Topology", "", &f.topology)
        },
        if levels.is_empty() {
            String::new()
        } else {
            format!(" <span class=\"note\">levels {}</span>", levels.join(" › "))
        }
    );
    if let Some(note) = &f.note {
        let _ = write!(s, "<div class=\"empty\">{}</div></div>", esc(note));
        return;
    }
    if !f.non_tas_counted {
        s.push_str(NOT_COUNTED);
    }
    s.push_str("<table class=\"domains\"><tr><th>Domain</th><th>Nodes</th>");
    for r in &f.resources {
        let _ = write!(
            s,
            "<th>{}<br><span class=\"note\">free · held (+ other pods) / allocatable</span></th>",
            esc(r)
        );
    }
    s.push_str("<th>Workloads with pods there</th></tr>");
    let columns = f.resources.len() + 3;
    let mut previous: Option<&DomainRow> = None;
    for row in &f.rows {
        headings(f, previous, row, columns, s);
        domain_row(f, row, s);
        previous = Some(row);
    }
    if f.rows_total > f.rows.len() {
        let _ = write!(
            s,
            "<tr class=\"more\"><td colspan=\"{columns}\">and {} more domains not shown</td></tr>",
            f.rows_total - f.rows.len()
        );
    }
    s.push_str("</table></div>");
}

/// A heading row for each domain above the lowest level that `row` enters.
fn headings(
    f: &FlavorDomains,
    previous: Option<&DomainRow>,
    row: &DomainRow,
    columns: usize,
    s: &mut String,
) {
    let above = row.values.len().saturating_sub(1);
    let same = previous.map_or(0, |p| {
        p.values
            .iter()
            .zip(&row.values)
            .take_while(|(a, b)| a == b)
            .count()
    });
    for depth in same.min(above)..above {
        let _ = write!(
            s,
            "<tr class=\"group\" data-level=\"{depth}\"><td colspan=\"{columns}\" style=\"padding-left:{}em\">{} <b>{}</b></td></tr>",
            depth,
            esc(f.levels.get(depth).map_or("", String::as_str)),
            esc(&row.values[depth])
        );
    }
}

fn domain_row(f: &FlavorDomains, row: &DomainRow, s: &mut String) {
    let mut nodes: Vec<String> = row.nodes.iter().map(|n| obj_link("Node", "", n)).collect();
    if row.nodes_total > row.nodes.len() {
        nodes.push(format!("and {} more", row.nodes_total - row.nodes.len()));
    }
    let _ = write!(
        s,
        "<tr class=\"domain\" data-domain=\"{}\" data-workloads=\"{}\"><td style=\"padding-left:{}em\">{}</td><td>{}</td>",
        esc(&row.values.join("/")),
        row.workloads_total,
        row.values.len().saturating_sub(1),
        esc(row.values.last().map_or("", String::as_str)),
        nodes.join(", ")
    );
    for (i, r) in f.resources.iter().enumerate() {
        let at = |v: &[i64]| v.get(i).copied().unwrap_or(0);
        let (free, held, alloc) = (at(&row.free), at(&row.held), at(&row.allocatable));
        let class = if free < 0 { " class=\"warn\"" } else { "" };
        // Pods TAS did not place, shown only where there are some; unknown until they are listed,
        // when the free room shown is only an upper bound.
        let (other, bound) = match (f.non_tas_counted, at(&row.non_tas)) {
            (false, _) => (" + ? other".to_string(), "≤ "),
            (true, 0) => (String::new(), ""),
            (true, n) => (format!(" + {} other", qty(r, n)), ""),
        };
        let _ = write!(
            s,
            "<td data-resource=\"{}\" data-free=\"{}\"{class}><b>{bound}{}</b> · {}{} / {}</td>",
            esc(r),
            esc(&qty(r, free)),
            esc(&qty(r, free)),
            esc(&qty(r, held)),
            esc(&other),
            esc(&qty(r, alloc))
        );
    }
    let _ = write!(
        s,
        "<td>{}</td></tr>",
        workload_links(&row.workloads, row.workloads_total)
    );
}
