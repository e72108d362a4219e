//! `quotagate validate -f FILE_OR_DIR...`: every problem in every document, with file, document index,
//! kind/name and field path.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::api::kueue::constants::label;
use crate::api::manifest::{DocClass, check_document_with, load_documents};
use crate::api::names;
use crate::api::ray::validation::RayFeatureGates;
use crate::api::validation::{FieldError, Path as FieldPath};
use crate::embedded::registry::Registry;

/// The outcome of a validate run: the printed report and whether anything was wrong.
#[derive(Debug, Default)]
pub struct Outcome {
    pub report: String,
    pub problems: usize,
    pub documents: usize,
    pub not_managed: Vec<String>,
}

/// Expands directories (recursively, `.yaml`/`.yml`/`.json` files, sorted) and keeps files as given.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, std::io::Error> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            let (dirs, files): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| e.is_dir());
            out.extend(files.into_iter().filter(|f| {
                matches!(
                    f.extension().and_then(|e| e.to_str()),
                    Some("yaml") | Some("yml") | Some("json")
                )
            }));
            out.extend(expand(&dirs)?);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Checks one file's text, appending to the outcome.
pub fn check_text(file: &Path, text: &str, outcome: &mut Outcome) {
    check_text_with(file, text, RayFeatureGates::default(), outcome)
}

/// `check_text` under the Ray feature gates of `--feature-gates`.
pub fn check_text_with(file: &Path, text: &str, gates: RayFeatureGates, outcome: &mut Outcome) {
    let shown = file.display();
    let docs = match load_documents(text) {
        Ok(d) => d,
        Err(e) => {
            outcome.problems += 1;
            let _ = writeln!(
                outcome.report,
                "{shown}: line {}: unparsable YAML: {}",
                e.line, e.message
            );
            return;
        }
    };
    let registry = Registry::compiled();
    for (i, doc) in docs.iter().enumerate() {
        outcome.documents += 1;
        let mut r = check_document_with(doc, gates);
        // Objects an API server would store; another API's (a Kustomization) is only listed.
        if matches!(r.class, DocClass::Managed | DocClass::BuiltIn) {
            // A built-in object that does not decode is a 400 before any value check runs.
            let mut server = server_checks(&registry, doc, r.problems.is_empty());
            server.append(&mut r.problems);
            r.problems = server;
        }
        let what = format!(
            "{}/{}",
            if r.kind.is_empty() { "<no kind>" } else { &r.kind },
            r.name
        );
        if r.class == DocClass::NotManaged {
            outcome.not_managed.push(format!(
                "{shown}: document {i}: {what} ({}): not managed by quotagate",
                r.api_version
            ));
        }
        for p in &r.problems {
            outcome.problems += 1;
            let _ = writeln!(outcome.report, "{shown}: document {i}: {what}: {p}");
        }
    }
}

/// What the API server refuses before quotagate's checks see the object, as the embedded server
/// refuses it: a missing name, the object-metadata rules (name under its kind's rule, a namespace that is
/// an RFC 1123 label, label keys and values, annotations, finalizers), Kueue's rule that a queue name is
/// an RFC 1123 subdomain, and the value checks of the built-in kinds (`embedded::validation`). A kind the
/// embedded server does not serve gets the metadata rules of a custom resource.
fn server_checks(registry: &Registry, doc: &Value, decoded: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let info = registry
        .all()
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
        .map(|r| (**r).clone())
        .unwrap_or_else(|| crate::embedded::registry::ResourceInfo {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            plural: String::new(),
            singular: String::new(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced: true,
            has_status: false,
            is_crd: true,
            printer_columns: Vec::new(),
            schema: None,
        });
    let meta = doc.get("metadata");
    let field = |f: &str| {
        meta.and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let mut named = doc.clone();
    if field("name").is_empty() {
        let prefix = field("generateName");
        if prefix.is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
            return errs;
        }
        // The server checks the name it generates: the prefix and five more characters.
        named["metadata"]["name"] = json!(format!("{prefix}bcdfg"));
    }
    let ns = field("namespace");
    if !ns.is_empty() {
        names::dns_label(&FieldPath::root("metadata").child("namespace"), ns, &mut errs);
    }
    errs.extend(crate::embedded::meta::validate_meta(&info, &named));
    if let Some(q) = meta
        .and_then(|m| m.pointer("/labels"))
        .and_then(|l| l.get(label::QUEUE_NAME))
        .and_then(Value::as_str)
        .filter(|q| names::is_label_value(q))
    {
        // A value that is no label value is refused by the server before Kueue's webhook sees it.
        let p = FieldPath::root("metadata").child("labels").key(label::QUEUE_NAME);
        names::dns_subdomain(&p, q, &mut errs);
    }
    if decoded {
        errs.extend(crate::embedded::validation::validate(&info, &named, None));
    }
    errs
}

/// Runs the whole command over files and directories.
pub fn run(paths: &[PathBuf]) -> Outcome {
    run_with(paths, RayFeatureGates::default())
}

/// `run` under the Ray feature gates of `--feature-gates`.
pub fn run_with(paths: &[PathBuf], gates: RayFeatureGates) -> Outcome {
    let mut outcome = Outcome::default();
    let files = match expand(paths) {
        Ok(f) => f,
        Err(e) => {
            outcome.problems += 1;
            let _ = writeln!(
                outcome.report,
                "cannot read {}: {e}",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return outcome;
        }
    };
    for f in files {
        match std::fs::read_to_string(&f) {
            Ok(text) => check_text_with(&f, &text, gates, &mut outcome),
            Err(e) => {
                outcome.problems += 1;
                let _ = writeln!(outcome.report, "{}: cannot read: {e}", f.display());
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(text: &str) -> Outcome {
        let mut o = Outcome::default();
        check_text(Path::new("m.yaml"), text, &mut o);
        o
    }

    /// Manifests kube-apiserver v1.36.3 refuses (its answers in the comments) are problems here too,
    /// each naming the field the server names.
    #[test]
    fn what_the_server_refuses_is_not_valid() {
        let cases = [
            // ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
                "metadata.name: Required value: name or generateName is required",
            ),
            // ConfigMap "c1" is invalid: metadata.labels: Invalid value: "bad key!": name part must ...
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, labels: {'bad key!': v}}\n",
                "metadata.labels: Invalid value: \"bad key!\": name part must consist",
            ),
            // ConfigMap "c2" is invalid: metadata.labels: Invalid value: "bad value": a valid label must ...
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c2, labels: {k: bad value}}\n",
                "metadata.labels: Invalid value: \"bad value\": a valid label must",
            ),
            // Kueue's webhook: the queue name is an RFC 1123 subdomain.
            (
                "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, labels: {kueue.x-k8s.io/queue-name: Queue_A}}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}}\n",
                "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Queue_A\"",
            ),
            // Namespace names are RFC 1123 labels.
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c3, namespace: Bad_NS}\n",
                "metadata.namespace: Invalid value: \"Bad_NS\"",
            ),
            // Service "s1" is invalid: spec.type: Unsupported value: "Bogus": supported values: ...
            (
                "apiVersion: v1\nkind: Service\nmetadata: {name: s1}\nspec: {type: Bogus, ports: [{port: 80}]}\n",
                "spec.type: Unsupported value: \"Bogus\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            ),
            // Job.batch "j1" is invalid: spec.parallelism: Invalid value: -1: must be greater than or equal to 0
            (
                "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j1}\nspec: {parallelism: -1, template: {spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}}\n",
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            ),
            // A custom resource's name is an RFC 1123 subdomain.
            (
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: Bad_Queue, namespace: ns}\nspec: {clusterQueue: cq}\n",
                "metadata.name: Invalid value: \"Bad_Queue\"",
            ),
        ];
        for (text, want) in cases {
            let o = report(text);
            assert!(o.problems > 0 && o.report.contains(want), "{text}\n{}", o.report);
        }
        let o = report(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: cm-, namespace: ns}\ndata: {a: b}\n",
        );
        assert_eq!(o.problems, 0, "{}", o.report);
    }

    /// The server reads 127 levels of nesting (serde_json's limit) and refuses the 128th.
    #[test]
    fn nesting_is_read_as_deep_as_the_server_reads_it() {
        let nested = |levels: usize| {
            let inner = format!("{}1{}", "[".repeat(levels - 1), "]".repeat(levels - 1));
            format!(
                "{{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {{\"name\": \"c\", \"annotations\": {{}}}}, \"x\": {inner}}}"
            )
        };
        assert!(crate::api::manifest::load_documents(&nested(crate::api::manifest::MAX_DEPTH)).is_ok());
        assert!(crate::api::manifest::load_documents(&nested(crate::api::manifest::MAX_DEPTH + 1)).is_err());
    }
}
