//! The install manifest: `dist/install.yaml` is exactly what `quotagate install-manifests` prints,
//! and `config/` (its kustomize source) builds the same objects with the real kubectl's kustomize.
//! kubectl comes from env QUOTAGATE_KUBECTL or .venv-kubectl/bin/kubectl (scripts/install-kubectl.sh);
//! missing, the kustomize test prints a skip line, or fails when QUOTAGATE_REQUIRE_TOOLS=1.

use std::path::{Path, PathBuf};
use std::process::Command;

use quotagate::api::manifest::load_documents;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn install_manifests(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .arg("install-manifests")
        .args(args)
        .current_dir(root())
        .output()
        .expect("the quotagate binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn committed() -> String {
    std::fs::read_to_string(root().join("dist/install.yaml")).expect("dist/install.yaml exists")
}

#[test]
fn committed_install_manifest_is_exactly_what_the_binary_prints() {
    let (ok, printed, err) = install_manifests(&[]);
    assert!(ok, "{err}");
    assert!(
        printed == committed(),
        "dist/install.yaml is stale: run `cargo run -- install-manifests > dist/install.yaml`"
    );
}

#[test]
fn a_bad_flag_is_refused_with_its_name() {
    let (ok, out, err) = install_manifests(&["--namespace", "Not_A_Label"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(
        err.contains("--namespace \"Not_A_Label\": must be a DNS label"),
        "{err}"
    );
    let (ok, _, err) = install_manifests(&["--config", "no/such/file.yaml"]);
    assert!(!ok && err.contains("--config no/such/file.yaml"), "{err}");
}

fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let p = root().join(".venv-kubectl/bin/kubectl");
    p.exists().then_some(p)
}

fn name_of(d: &Value) -> String {
    let s = |p: &str| {
        d.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    format!(
        "{} {}/{}",
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name")
    )
}

#[test]
fn kustomize_of_config_default_builds_the_same_objects() {
    let Some(kubectl) = kubectl_path() else {
        assert!(
            std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "kubectl not installed: run scripts/install-kubectl.sh"
        );
        println!("skipped: kubectl not installed, run scripts/install-kubectl.sh");
        return;
    };
    let out = Command::new(kubectl)
        .args(["kustomize", "config/default"])
        .current_dir(root())
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let built = load_documents(&String::from_utf8_lossy(&out.stdout)).expect("kustomize prints YAML");
    let ours = load_documents(&committed()).expect("dist/install.yaml is YAML");
    // Same objects in the same order (kustomize's legacy order is Kueue's install order), each
    // equal field for field.
    let names = |docs: &[Value]| docs.iter().map(name_of).collect::<Vec<_>>();
    assert_eq!(names(&built), names(&ours));
    for (b, o) in built.iter().zip(&ours) {
        assert!(
            b == o,
            "{} differs between `kubectl kustomize config/default` and dist/install.yaml",
            name_of(o)
        );
    }
}

/// `docs/install.md` lists the manifest's objects as `install-manifests | grep -E '^kind:' | uniq -c`
/// prints them; a kind added to the manifest must show there too.
#[test]
fn the_install_guide_lists_the_objects_the_manifest_has() {
    let mut counted: Vec<(usize, String)> = Vec::new();
    for line in committed().lines().filter(|l| l.starts_with("kind:")) {
        match counted.last_mut() {
            Some((n, k)) if k == line => *n += 1,
            _ => counted.push((1, line.to_string())),
        }
    }
    let printed: String = counted.iter().map(|(n, k)| format!("{n:>7} {k}\n")).collect();
    let guide = std::fs::read_to_string(root().join("docs/install.md")).expect("docs/install.md exists");
    assert!(
        guide.contains(&printed),
        "docs/install.md's object list is stale; the manifest has:\n{printed}"
    );
}
