//! `quotagate validate -f FILE_OR_DIR...`: every problem in every document, with file, document index,
//! kind/name and field path.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::api::manifest::{DocClass, check_document_with, load_documents};
use crate::api::ray::validation::RayFeatureGates;

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
    for (i, doc) in docs.iter().enumerate() {
        outcome.documents += 1;
        let r = check_document_with(doc, gates);
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
