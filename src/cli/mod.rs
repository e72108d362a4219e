//! Command-line entry points that are more than wiring: `crds` and `validate`.

pub mod validate;

use crate::api;

/// Every CRD quotagate serves, as one multi-document YAML stream (what `config/crd/` holds).
pub fn crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for crd in api::all_crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}
pub mod bench;
