//! The layering of docs/design.md, kept by a test: `api`, `kit` (the controller kit, nothing of ours
//! below it) <- `queue` <- `admission` <- `jobframework` <- (`jobs`, `rayservice`, `multikueue`) <- wiring, and
//! `embedded` on `api` only. Every `crate::<module>` path in `src/` (whole `use` items, multi-line
//! groups and inline paths alike) is checked against the table below; an import against the arrows
//! fails with file and line. Below the table: the admission engine stays private to its folder, a few
//! arrows inside a room are forbidden by name, and neither the files of one folder nor the sub-rooms of
//! one room import each other in a circle.

use std::path::{Path, PathBuf};

/// Which top-level modules each layer may name. One line per layer; a module not listed may use anything
/// (the wiring: `main.rs`, `cli`, `wiring`).
#[rustfmt::skip] // a table, one line per layer
const ALLOWED: &[(&str, &[&str])] = &[
    ("api", &["api"]),
    ("kit", &["kit"]),
    ("queue", &["api", "queue"]),
    ("admission", &["api", "queue", "kit", "admission"]),
    ("jobframework", &["api", "queue", "kit", "admission", "jobframework"]),
    ("rayservice", &["api", "queue", "kit", "admission", "jobframework", "rayservice"]),
    ("jobs", &["api", "queue", "kit", "admission", "jobframework", "jobs"]),
    ("multikueue", &["api", "queue", "kit", "admission", "jobframework", "multikueue"]),
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

/// The code of a file with its `//` comments left out, line for line (so offsets keep their lines).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `file:line: layer -> module` that breaks the table. Whole `use` items and inline paths are
/// parsed, nested groups and all, so a module named on a continuation line of a multi-line group
/// (`use crate::{\n    api::x,\n    wiring::y,\n};`) is checked, with the line it is named on.
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
        let code = without_comments(&text);
        let mut seen = std::collections::BTreeSet::new();
        for named in module_paths(&code, &[]) {
            let Some(module) = named.path.first().filter(|_| named.from_crate) else {
                continue;
            };
            let line = code[..named.at].matches('\n').count() + 1;
            if !allowed.contains(&module.as_str()) && seen.insert((line, module.clone())) {
                out.push(format!("src/{}:{line}: {layer} -> {module}", rel.display()));
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
        "imports against the layering of docs/design.md (api <- queue <- jobframework <- rayservice, jobs <- wiring; embedded <- api only):\n{}",
        bad.join("\n")
    );
}

/// The violations of one file written as `queue/<name>` in a scratch tree of its own.
fn violations_in_queue(name: &str, text: &str) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("quotagate-layering-{name}-{}", std::process::id()));
    let queue = dir.join("queue");
    std::fs::create_dir_all(&queue).unwrap();
    std::fs::write(queue.join(name), text).unwrap();
    let bad = violations(&dir);
    std::fs::remove_dir_all(&dir).ok();
    bad
}

#[test]
fn the_checker_sees_an_upward_import() {
    let bad = violations_in_queue(
        "bad.rs",
        "// crate::wiring in a comment is fine\nuse crate::jobframework::JobContext;\nfn f() { crate::api::x(); }\nuse crate::{api, wiring::metrics};\n",
    );
    assert_eq!(
        bad,
        vec![
            "src/queue/bad.rs:2: queue -> jobframework".to_string(),
            "src/queue/bad.rs:4: queue -> wiring".to_string(),
        ]
    );
}

#[test]
fn the_checker_reads_a_multi_line_group() {
    // The shape rustfmt gives a long `use crate::{…}`: the modules sit on continuation lines, nested
    // groups and all.
    let bad = violations_in_queue(
        "grouped.rs",
        "use crate::{\n    api::workload::Workload,\n    jobframework::JobContext,\n    queue::{\n        cache::Cache,\n        snapshot::Snapshot,\n    },\n    // wiring::metrics in a comment is fine\n    rayservice::{gate, plan::{Plan, Step}},\n};\n",
    );
    assert_eq!(
        bad,
        vec![
            "src/queue/grouped.rs:3: queue -> jobframework".to_string(),
            "src/queue/grouped.rs:9: queue -> rayservice".to_string(),
        ]
    );
}

// ---------------------------------------------------------------------------------------------------
// Module paths: which file of `src/` each `crate::…` / `super::…` path names.

/// One path a `use` tree or inline path names.
struct Named {
    /// Byte offset of the first segment named below `crate::` / `super::` (in a group, the segment
    /// before the brace), so a multi-line group reports each module on its own line.
    at: usize,
    /// Whether the path starts at `crate::` (else `super::`).
    from_crate: bool,
    /// The full path, e.g. `["jobframework", "core", "sync", "Snapshot"]`.
    path: Vec<String>,
}

/// Every full path a `use` tree or inline path names, starting at `crate::` or `super::` (`super` resolved
/// against `here`, the module path of the file).
fn module_paths(code: &str, here: &[String]) -> Vec<Named> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let Some(kw) = ["crate::", "super::"].into_iter().find(|k| rest.starts_with(k)) else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // Only a path's first segment: not `foo::crate::`, not the end of an identifier.
        let prev = if i == 0 { b' ' } else { bytes[i - 1] };
        if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b':' {
            i += kw.len();
            continue;
        }
        let mut base: Vec<String> = Vec::new();
        let mut j = i;
        if kw == "super::" {
            base = here.to_vec();
            while code[j..].starts_with("super::") {
                base.pop();
                j += "super::".len();
            }
        } else {
            j += "crate::".len();
        }
        let mut paths = Vec::new();
        j = use_tree_at(code, j, &base, None, &mut paths);
        out.extend(paths.into_iter().map(|(at, path)| Named {
            at,
            from_crate: kw == "crate::",
            path,
        }));
        i = j.max(i + 1);
    }
    out
}

fn skip_space(code: &str, at: usize) -> usize {
    let rest = &code[at..];
    at + rest.len() - rest.trim_start().len()
}

/// Parses one use tree at `at` (`a::b::{c, d::e}` or `a::b`) below `base`, pushing each full path;
/// returns where it ends.
fn use_tree(code: &str, at: usize, base: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut paths = Vec::new();
    let end = use_tree_at(code, at, base, None, &mut paths);
    out.extend(paths.into_iter().map(|(_, p)| p));
    end
}

/// [`use_tree`], keeping with each path the offset of its first segment below the starting `base`
/// (`first`, when the caller's prefix already named one).
fn use_tree_at(
    code: &str,
    mut at: usize,
    base: &[String],
    mut first: Option<usize>,
    out: &mut Vec<(usize, Vec<String>)>,
) -> usize {
    let mut path = base.to_vec();
    loop {
        at = skip_space(code, at);
        if code[at..].starts_with('{') {
            at += 1;
            loop {
                at = skip_space(code, at);
                if code[at..].starts_with('}') {
                    return at + 1;
                }
                at = use_tree_at(code, at, &path, first, out);
                at = skip_space(code, at);
                if code[at..].starts_with(',') {
                    at += 1;
                    continue;
                }
                if code[at..].starts_with('}') {
                    at += 1;
                }
                return at;
            }
        }
        let name: String = code[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            break;
        }
        first.get_or_insert(at);
        at += name.len();
        if name != "self" {
            path.push(name);
        }
        if code[at..].starts_with("::") {
            at += 2;
        } else {
            break;
        }
    }
    if !path.is_empty() {
        out.push((first.unwrap_or(at), path));
    }
    at
}

/// One source file of `src/`: its path relative to `src/`, its module path, and its code with comments,
/// `#[cfg(test)]` modules and test files left out (what a test imports does not tie production files).
struct Source {
    rel: PathBuf,
    module: Vec<String>,
    /// Comment-free code, line for line.
    code: String,
}

fn sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file).to_path_buf();
        let mut module: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            module.pop();
        }
        let text = std::fs::read_to_string(&file).expect("source file is readable");
        let mut lines = Vec::new();
        let mut cfg_test = false;
        for line in text.lines() {
            let t = line.trim_start();
            if cfg_test
                && (t.starts_with("mod ") || t.starts_with("pub mod ") || t.starts_with("pub(crate) mod "))
                && t.ends_with('{')
            {
                break; // an inline test module: the rest of the file is tests
            }
            cfg_test = t.starts_with("#[cfg(test)]");
            lines.push(line.split("//").next().unwrap_or("").to_string());
        }
        out.push(Source {
            rel,
            module,
            code: lines.join("\n"),
        });
    }
    out
}

fn is_test_file(rel: &Path) -> bool {
    let stem = rel.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    stem == "tests" || stem.ends_with("_tests") || rel.iter().any(|c| c == "tests")
}

/// The public modules of `src/admission/`; its other modules are the engine.
const ADMISSION_FACE: &[&str] = &["metrics", "slices"];

/// Every `file:line` outside `src/admission/` that names a module of the admission engine
/// (`admission::sync`, `admission::run::…`): the job framework, the kinds, the wiring and the tools use
/// what `admission` exports at its top, and its public modules `metrics` and `slices`.
fn engine_imports(src: &Path) -> Vec<String> {
    let all = sources(src);
    let modules: std::collections::BTreeSet<Vec<String>> = all.iter().map(|s| s.module.clone()).collect();
    let mut out = Vec::new();
    for s in &all {
        if s.module.first().map(String::as_str) == Some("admission") {
            continue;
        }
        let mut lines: Vec<usize> = module_paths(&s.code, &s.module)
            .into_iter()
            .filter(|n| {
                n.path.len() >= 2
                    && n.path[0] == "admission"
                    && !ADMISSION_FACE.contains(&n.path[1].as_str())
                    && modules.contains(&n.path[..2])
            })
            .map(|n| s.code[..n.at].matches('\n').count() + 1)
            .collect();
        lines.dedup();
        out.extend(lines.into_iter().map(|n| format!("src/{}:{n}", s.rel.display())));
    }
    out
}

#[test]
fn nothing_outside_admission_imports_its_engine() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = engine_imports(&src);
    assert!(
        bad.is_empty(),
        "the admission engine is private to `src/admission/`; use what `admission` exports at its top (or its `metrics` / `slices`):\n{}",
        bad.join("\n")
    );
}

/// Arrows inside a room that the table above cannot say: (files under this folder of `src/`, may not
/// name this `crate::` path, why).
#[rustfmt::skip] // a table, one line per arrow
const NEVER: &[(&str, &str, &str)] = &[
    ("rayservice/service", "rayservice::job", "the RayService decisions are pure; the shell asks the gate"),
    ("rayservice/service", "rayservice::servicectl", "the RayService decisions are pure; the shell sits above"),
    ("rayservice/servicectl", "jobframework", "the Ray controllers run on kit, not on the job framework"),
    ("rayservice/rayjob", "jobframework", "the Ray controllers run on kit, not on the job framework"),
    ("rayservice/raycronjob", "jobframework", "the Ray controllers run on kit, not on the job framework"),
    ("rayservice/cluster", "jobframework", "the pure RayCluster building blocks know no job framework"),
    ("rayservice/dashboard", "jobframework", "the dashboard client knows no job framework"),
];

/// Every `file:line: from -> path (why)` that breaks [`NEVER`]; test files and test modules are left out.
fn forbidden_arrows(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources(src) {
        if is_test_file(&s.rel) {
            continue;
        }
        let rel = s.rel.to_string_lossy().replace('\\', "/");
        for (from, to, why) in NEVER {
            if !rel.starts_with(&format!("{from}/")) {
                continue;
            }
            let to: Vec<&str> = to.split("::").collect();
            let mut lines: Vec<usize> = module_paths(&s.code, &s.module)
                .into_iter()
                .filter(|n| n.path.len() >= to.len() && n.path.iter().zip(&to).all(|(a, b)| a == b))
                .map(|n| s.code[..n.at].matches('\n').count() + 1)
                .collect();
            lines.dedup();
            out.extend(
                lines
                    .into_iter()
                    .map(|n| format!("src/{rel}:{n}: {from} -> {} ({why})", to.join("::"))),
            );
        }
    }
    out
}

#[test]
fn no_forbidden_arrow_inside_a_room() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = forbidden_arrows(&src);
    assert!(bad.is_empty(), "arrows the rooms forbid:\n{}", bad.join("\n"));
}

/// The strongly connected components of more than one node (Tarjan; deep enough for a few hundred files),
/// each sorted, in order.
fn strong_components(
    edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    fn visit(
        v: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        index: &mut BTreeMap<String, (usize, usize)>,
        stack: &mut Vec<String>,
        counter: &mut usize,
        out: &mut Vec<Vec<String>>,
    ) {
        index.insert(v.to_string(), (*counter, *counter));
        *counter += 1;
        stack.push(v.to_string());
        for w in edges.get(v).into_iter().flatten() {
            if !index.contains_key(w) {
                visit(w, edges, index, stack, counter, out);
                let low = index[w].1.min(index[v].1);
                if let Some(e) = index.get_mut(v) {
                    e.1 = low;
                }
            } else if stack.contains(w) {
                let low = index[w].0.min(index[v].1);
                if let Some(e) = index.get_mut(v) {
                    e.1 = low;
                }
            }
        }
        if index[v].0 == index[v].1 {
            let mut comp = Vec::new();
            while let Some(w) = stack.pop() {
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                out.push(comp);
            }
        }
    }
    let mut index = BTreeMap::new();
    let mut stack = Vec::new();
    let mut counter = 0;
    let mut comps = Vec::new();
    let nodes: Vec<String> = edges.keys().cloned().collect();
    for v in &nodes {
        if !index.contains_key(v) {
            visit(v, edges, &mut index, &mut stack, &mut counter, &mut comps);
        }
    }
    comps.sort();
    comps
}

/// The circles of files that import each other inside one folder, each as `a.rs -> b.rs -> … -> a.rs`.
/// A folder's `mod.rs` is its face and takes no part; test files and test modules are left out.
fn file_circles(src: &Path) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let all = sources(src);
    let modules: BTreeSet<Vec<String>> = all.iter().map(|s| s.module.clone()).collect();
    // What a folder's face re-exports (`pub use scheduler::{AdmissionCore, …}` in `queue/mod.rs`):
    // `super::AdmissionCore` in a sibling file names `scheduler.rs`.
    let mut aliases: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for s in all
        .iter()
        .filter(|s| s.rel.file_name().is_some_and(|f| f == "mod.rs"))
    {
        let mut at = 0;
        while let Some(found) = s.code[at..].find("pub use ") {
            let start = at + found + "pub use ".len();
            let mut paths = Vec::new();
            at = use_tree(&s.code, start, &s.module, &mut paths).max(start);
            for p in paths.into_iter().filter(|p| p.len() >= 2 && !modules.contains(p)) {
                let from = p[..p.len() - 1].to_vec();
                if modules.contains(&from) {
                    let mut name = s.module.clone();
                    name.push(p[p.len() - 1].clone());
                    // A module of the same name (`pub use lifecycle::plan` beside `mod plan`) is
                    // what a path through it names.
                    if !modules.contains(&name) {
                        aliases.insert(name, from);
                    }
                }
            }
        }
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &all {
        let is_face = s
            .rel
            .file_name()
            .is_some_and(|f| f == "mod.rs" || f == "lib.rs" || f == "main.rs");
        if is_face || is_test_file(&s.rel) {
            continue;
        }
        let folder = &s.module[..s.module.len() - 1];
        for Named { path, .. } in module_paths(&s.code, &s.module) {
            // The longest prefix that is a module: a sibling file of the same folder is a tie.
            let prefixes = || (1..=path.len()).rev().map(|n| &path[..n]);
            let re_exported = prefixes().find_map(|p| aliases.get(p)).map(Vec::as_slice);
            let Some(target) = re_exported.or_else(|| prefixes().find(|p| modules.contains(*p))) else {
                continue;
            };
            if target.len() == s.module.len() && target[..target.len() - 1] == *folder && target != s.module {
                edges
                    .entry(s.module.join("/"))
                    .or_default()
                    .insert(target.join("/"));
            }
        }
    }
    let comps = strong_components(&edges);
    comps
        .iter()
        .map(|c| {
            let ties: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{a}.rs -> {b}.rs"))
                })
                .collect();
            ties.join(", ")
        })
        .collect()
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let circles: Vec<String> = file_circles(&src);
    assert!(
        circles.is_empty(),
        "files of one folder that import each other (move the shared piece down into a small module):\n{}",
        circles.join("\n")
    );
}

/// The circles between the sub-rooms of one top-level room (`rayservice/service/` and
/// `rayservice/job/`, or a file such as `rayservice/metrics.rs`), each as `a -> b, b -> a`. The room's
/// face (`rayservice/mod.rs`) takes no part; test files and test modules are left out.
fn sub_room_circles(src: &Path) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let all = sources(src);
    let modules: BTreeSet<Vec<String>> = all.iter().map(|s| s.module.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &all {
        if s.module.len() < 2 || is_test_file(&s.rel) {
            continue;
        }
        let (room, from) = (&s.module[0], &s.module[1]);
        for Named { path, .. } in module_paths(&s.code, &s.module) {
            let Some(target) = (2..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| modules.contains(*p))
            else {
                continue;
            };
            if target[0] == *room && target[1] != *from {
                edges
                    .entry(format!("{room}/{from}"))
                    .or_default()
                    .insert(format!("{room}/{}", target[1]));
            }
        }
    }
    strong_components(&edges)
        .iter()
        .map(|c| {
            let ties: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            ties.join(", ")
        })
        .collect()
}

#[test]
fn no_sub_rooms_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let circles = sub_room_circles(&src);
    assert!(
        circles.is_empty(),
        "sub-rooms of one room that import each other (the pure part below, its shell above):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_checkers_see_an_engine_import_and_a_circle() {
    let dir = std::env::temp_dir().join(format!("quotagate-circles-{}", std::process::id()));
    let jobs = dir.join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::create_dir_all(dir.join("admission")).unwrap();
    for (name, text) in [
        (
            "mod.rs",
            "pub mod metrics;\npub(crate) mod sync;\npub use sync::Snapshot;\n",
        ),
        ("sync.rs", "pub struct Snapshot;\npub fn replacement_for() {}\n"),
        ("metrics.rs", "pub struct Metrics;\n"),
    ] {
        std::fs::write(dir.join("admission").join(name), text).unwrap();
    }
    std::fs::write(
        jobs.join("mod.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\npub use d::{Core, other};\n",
    )
    .unwrap();
    std::fs::write(
        jobs.join("a.rs"),
        "use super::b::Thing;\nuse crate::admission::{Snapshot, sync::replacement_for};\n",
    )
    .unwrap();
    std::fs::write(
        jobs.join("b.rs"),
        "pub fn f() { super::a::g() }\n// super::c in a comment\nuse crate::admission::metrics::Metrics;\n",
    )
    .unwrap();
    std::fs::write(
        jobs.join("c.rs"),
        "use super::a;\n#[cfg(test)]\nmod tests {\n    use super::super::b;\n}\n",
    )
    .unwrap();
    // A circle through the face's re-export: `impl super::Core` in e.rs names d.rs.
    std::fs::write(jobs.join("d.rs"), "pub struct Core;\nuse super::e::share;\n").unwrap();
    std::fs::write(
        jobs.join("e.rs"),
        "impl super::Core { fn g() {} }\npub fn share() {}\n",
    )
    .unwrap();
    let circles = file_circles(&dir);
    let engine = engine_imports(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        circles,
        vec![
            "jobs/a.rs -> jobs/b.rs, jobs/b.rs -> jobs/a.rs".to_string(),
            "jobs/d.rs -> jobs/e.rs, jobs/e.rs -> jobs/d.rs".to_string(),
        ]
    );
    assert_eq!(engine, vec!["src/jobs/a.rs:2".to_string()]);
}

#[test]
fn the_checkers_see_a_forbidden_arrow_and_a_sub_room_circle() {
    let dir = std::env::temp_dir().join(format!("quotagate-rooms-{}", std::process::id()));
    let ray = dir.join("rayservice");
    for sub in ["service", "job", "rayjob"] {
        std::fs::create_dir_all(ray.join(sub)).unwrap();
    }
    for (name, text) in [
        (
            "mod.rs",
            "pub mod job;\npub mod metrics;\npub mod rayjob;\npub mod service;\n",
        ),
        ("metrics.rs", "use super::service::plan;\n"),
        ("service/mod.rs", "pub mod plan;\n#[cfg(test)]\nmod tests;\n"),
        (
            "service/plan.rs",
            "use crate::rayservice::job::gate::decide;\npub struct Plan;\n",
        ),
        (
            "service/tests.rs",
            "use crate::rayservice::job::gate;\nuse crate::jobframework::JobKind;\n",
        ),
        ("job/mod.rs", "pub mod gate;\n"),
        (
            "job/gate.rs",
            "use super::super::service::plan::Plan;\npub fn decide() {}\n",
        ),
        ("rayjob/mod.rs", "pub mod controller;\n"),
        (
            "rayjob/controller.rs",
            "use crate::jobframework::JobKind;\nuse crate::kit::shell;\n",
        ),
    ] {
        std::fs::write(ray.join(name), text).unwrap();
    }
    let circles = sub_room_circles(&dir);
    let forbidden = forbidden_arrows(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        circles,
        vec!["rayservice/job -> rayservice/service, rayservice/service -> rayservice/job".to_string()]
    );
    assert_eq!(
        forbidden,
        vec![
            "src/rayservice/rayjob/controller.rs:1: rayservice/rayjob -> jobframework (the Ray controllers run on kit, not on the job framework)".to_string(),
            "src/rayservice/service/plan.rs:1: rayservice/service -> rayservice::job (the RayService decisions are pure; the shell asks the gate)".to_string(),
        ]
    );
}
