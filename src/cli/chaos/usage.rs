//! What a Workload holding quota holds, as the invariant checks and the chain checks both count it.

use std::collections::BTreeMap;

use crate::api::kueue::Workload;
use crate::api::quantity::Quantity;

/// Milli-units of a quantity (cpu) or its value (memory, pods).
pub(super) fn amount(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, resource: &str) -> i64 {
    Quantity::try_from(q).map_or(0, |v| crate::api::quantity::resource_value(resource, &v))
}

/// What a Workload holding quota holds, per resource, as Kueue counts it: each podset's admitted usage
/// scaled down to its count now (a slice scaled down in place releases quota without a new admission).
pub(super) fn held(w: &Workload) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for ps in w.admission().iter().flat_map(|a| a.pod_set_assignments.iter()) {
        let admitted = i64::from(ps.count.unwrap_or(1)).max(1);
        let now = w
            .spec
            .pod_sets
            .iter()
            .find(|s| s.name.as_deref() == Some(ps.name.as_str()))
            .map_or(admitted, |s| i64::from(s.count()));
        for (r, q) in &ps.resource_usage {
            *out.entry(r.clone()).or_default() += amount(q, r) / admitted * now.min(admitted);
        }
    }
    out
}
