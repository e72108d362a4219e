//! [`all_crds`](super::all_crds) compiled into the binary, so a server starts without generating
//! the CRDs' OpenAPI schemas (about 1 s of CPU): `crds.json` is what [`render`] prints for
//! `all_crds()`, and a test fails when it is stale (regenerate with
//! `QUOTAGATE_BLESS_CRDS=1 cargo test --lib compiled_crds`).
//!
//! The file is one JSON array, one element per line: first every CRD with its versions' schemas
//! taken out (the heads, small), then one `[crdName, version, openAPIV3Schema]` per served
//! version. A reader parses the heads at start and a schema only when something first needs it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};

/// The text compiled in (see the module doc).
pub const TEXT: &str = include_str!("crds.json");

/// One CRD version's `openAPIV3Schema` as compact JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemaText {
    pub crd: &'static str,
    pub version: &'static str,
    pub json: &'static str,
}

impl SchemaText {
    /// The schema as JSON, exactly as `serde_json::to_value` of the generated `JSONSchemaProps`
    /// (parsed through that type so numbers and key order match).
    pub fn value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(serde_json::from_str::<JSONSchemaProps>(self.json)?)
    }
}

/// The compiled CRDs: heads without schemas, and each schema's text.
#[derive(Clone, Debug)]
pub struct CompiledCrds {
    pub heads: Vec<CustomResourceDefinition>,
    pub schemas: Vec<SchemaText>,
}

/// The malformed line of `crds.json` (only if the file was edited by hand: the test renders it).
#[derive(Debug, thiserror::Error)]
#[error("crds.json line {line}: {what}")]
pub struct CompiledError {
    pub line: usize,
    pub what: String,
}

/// Reads [`TEXT`]: the heads are parsed, the schemas only located.
pub fn compiled() -> Result<CompiledCrds, CompiledError> {
    parse(TEXT)
}

fn parse(text: &'static str) -> Result<CompiledCrds, CompiledError> {
    let err = |line: usize, what: String| CompiledError { line: line + 1, what };
    let mut lines = text.lines().enumerate();
    if lines.next().map(|(_, l)| l) != Some("[") {
        return Err(err(0, "expected `[`".into()));
    }
    let (n, heads) = lines.next().ok_or_else(|| err(1, "no heads".into()))?;
    let heads: Vec<CustomResourceDefinition> =
        serde_json::from_str(heads.strip_suffix(',').unwrap_or(heads)).map_err(|e| err(n, e.to_string()))?;
    let mut schemas = Vec::new();
    for (n, line) in lines {
        if line == "]" {
            return Ok(CompiledCrds { heads, schemas });
        }
        let line = line.strip_suffix(',').unwrap_or(line);
        let inner = line
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .ok_or_else(|| err(n, "expected `[crd, version, schema]`".into()))?;
        let mut parts = inner.splitn(3, ',');
        let mut string = |what: &str| -> Result<&'static str, CompiledError> {
            let part = parts.next().ok_or_else(|| err(n, format!("no {what}")))?;
            part.strip_prefix('"')
                .and_then(|p| p.strip_suffix('"'))
                .filter(|p| !p.contains(['"', '\\']))
                .ok_or_else(|| err(n, format!("{what} is not a plain JSON string")))
        };
        let crd = string("CRD name")?;
        let version = string("version")?;
        let json = parts.next().ok_or_else(|| err(n, "no schema".into()))?;
        schemas.push(SchemaText { crd, version, json });
    }
    Err(err(text.lines().count(), "no closing `]`".into()))
}

/// What `crds.json` holds for `crds` (see the module doc).
pub fn render(crds: &[CustomResourceDefinition]) -> Result<String, serde_json::Error> {
    let mut heads = crds.to_vec();
    let mut lines = Vec::new();
    for crd in &mut heads {
        let name = crd.metadata.name.clone().unwrap_or_default();
        for v in &mut crd.spec.versions {
            if let Some(schema) = v.schema.as_mut().and_then(|s| s.open_api_v3_schema.take()) {
                lines.push(format!(
                    "[{},{},{}]",
                    serde_json::to_string(&name)?,
                    serde_json::to_string(&v.name)?,
                    serde_json::to_string(&schema)?
                ));
            }
        }
    }
    let mut out = String::from("[\n");
    out.push_str(&serde_json::to_string(&heads)?);
    for line in lines {
        out.push_str(",\n");
        out.push_str(&line);
    }
    out.push_str("\n]\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compiled file is what the code generates; with `QUOTAGATE_BLESS_CRDS=1` it is rewritten.
    #[test]
    fn compiled_crds_are_what_the_code_generates() {
        let rendered = render(&super::super::all_crds()).unwrap();
        if std::env::var_os("QUOTAGATE_BLESS_CRDS").is_some() {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api/crds.json");
            std::fs::write(path, &rendered).unwrap();
            return;
        }
        assert!(
            rendered == TEXT,
            "src/api/crds.json is stale: run `QUOTAGATE_BLESS_CRDS=1 cargo test --lib compiled_crds`"
        );
    }

    /// Reading the file back gives every CRD: heads equal to the generated ones without their
    /// schemas, and each served version's schema equal to the generated one.
    #[test]
    fn compiled_crds_read_back_as_generated() {
        let all = super::super::all_crds();
        let c = compiled().unwrap();
        assert_eq!(c.heads.len(), all.len());
        let mut n = 0;
        for (head, crd) in c.heads.iter().zip(&all) {
            let mut stripped = crd.clone();
            for (hv, v) in head.spec.versions.iter().zip(&mut stripped.spec.versions) {
                let schema = v.schema.as_mut().and_then(|s| s.open_api_v3_schema.take());
                let name = crd.metadata.name.as_deref().unwrap();
                let text = c.schemas.iter().find(|s| s.crd == name && s.version == hv.name);
                assert_eq!(
                    text.map(|t| t.value().unwrap()),
                    schema.map(|s| serde_json::to_value(s).unwrap()),
                    "{name} {}",
                    hv.name
                );
                n += usize::from(text.is_some());
            }
            assert_eq!(head, &stripped);
        }
        assert_eq!(n, c.schemas.len());
        assert!(n >= all.len());
    }

    #[test]
    fn a_malformed_file_names_its_line() {
        let e = parse("[\n[],\n[\"a\",\"v1\"]\n]\n").unwrap_err();
        assert_eq!(e.to_string(), "crds.json line 3: no schema");
        let e = parse("[\n[]\n").unwrap_err();
        assert_eq!(e.to_string(), "crds.json line 3: no closing `]`");
        let e = parse("{}").unwrap_err();
        assert_eq!(e.to_string(), "crds.json line 1: expected `[`");
    }
}
