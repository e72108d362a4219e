//! The layering of DESIGN.md, kept by a test: `api <- queue <- jobframework <- rayservice <- wiring`, and
//! `embedded` on `api` only. Every `crate::<module>` path in `src/` (in `use` lines and inline paths alike)
//! is checked against the table below; an import against the arrows fails with file and line.

use std::path::{Path, PathBuf};

/// Which top-level modules each layer may name. One line per layer; a module not listed may use anything
/// (the wiring: `main.rs`, `cli`, `wiring`).
const ALLOWED: &[(&str, &[&str])] = &[
    ("api", &["api"]),
    ("queue", &["api", "queue"]),
    ("jobframework", &["api", "queue", "jobframework"]),
    (
        "rayservice",
        &["api", "queue", "jobframework", "rayservice"],
    ),
    ("embedded", &["api", "embedded"]),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::<module>` names a line refers to, with comments stripped.
fn crate_refs(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut refs = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            refs.push(name);
        }
        rest = after;
    }
    // `use crate::{a, b::c}` names several modules at once.
    if let Some(i) = code.find("crate::{") {
        let inner = &code[i + "crate::{".len()..];
        for part in inner.split(',') {
            let name: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                refs.push(name);
            }
        }
    }
    refs
}

/// Every `file:line: layer -> module` that breaks the table.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        let layer = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_string();
        let Some((_, allowed)) = ALLOWED.iter().find(|(l, _)| *l == layer) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("source file is readable");
        for (n, line) in text.lines().enumerate() {
            for module in crate_refs(line) {
                if !allowed.contains(&module.as_str()) {
                    out.push(format!(
                        "src/{}:{}: {layer} -> {module}",
                        rel.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn every_import_follows_the_layering() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    assert!(
        bad.is_empty(),
        "imports against DESIGN.md's layering (api <- queue <- jobframework <- rayservice <- wiring; embedded <- api only):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_checker_sees_an_upward_import() {
    let dir = std::env::temp_dir().join(format!("quotagate-layering-{}", std::process::id()));
    let queue = dir.join("queue");
    std::fs::create_dir_all(&queue).unwrap();
    std::fs::write(
        queue.join("bad.rs"),
        "// crate::wiring in a comment is fine\nuse crate::jobframework::JobContext;\nfn f() { crate::api::x(); }\nuse crate::{api, wiring::metrics};\n",
    )
    .unwrap();
    let bad = violations(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        bad,
        vec![
            "src/queue/bad.rs:2: queue -> jobframework".to_string(),
            "src/queue/bad.rs:4: queue -> wiring".to_string(),
        ]
    );
}
