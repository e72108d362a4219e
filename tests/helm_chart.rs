//! Issue 66, the Helm chart: `charts/quotagate` is exactly what `quotagate install-manifests
//! --helm-chart` writes (so it is generated from the same objects, like `dist/install.yaml`), the real
//! `helm lint` passes it, and the real `helm template` renders, for the default values and for
//! non-default ones, the same objects as `quotagate install-manifests` with the same settings as flags
//! (parsed as YAML documents, compared field for field; the Namespace aside, which is the release's).
//!
//! helm comes from env QUOTAGATE_HELM or the cache of scripts/install-helm.sh (helm v3.22.0 built from
//! its Go module); missing, the helm tests print a skip line, or fail when QUOTAGATE_REQUIRE_TOOLS=1.

use std::path::{Path, PathBuf};
use std::process::Command;

use quotagate::api::manifest::load_documents;
use serde_json::{Value, json};

mod control_plane_support;
use control_plane_support::helm_path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quotagate-helm-chart-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

fn run(mut cmd: Command) -> (bool, String, String) {
    let out = cmd.output().expect("the command runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn quotagate(args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(args).current_dir(root());
    run(cmd)
}

fn helm_or_skip() -> Option<PathBuf> {
    let helm = helm_path();
    if helm.is_none() {
        assert!(
            std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "helm not installed: run scripts/install-helm.sh"
        );
        println!("skipped: helm not installed, run scripts/install-helm.sh");
    }
    helm
}

fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("a readable dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&p).expect("a text file")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_committed_chart_is_exactly_what_the_binary_writes() {
    let dir = tmp("generated");
    let (ok, _, err) = quotagate(&["install-manifests", "--helm-chart", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let generated = files_under(&dir);
    let committed = files_under(&root().join("charts/quotagate"));
    let names = |f: &[(String, String)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&committed),
        names(&generated),
        "charts/quotagate is stale: run `cargo run -- install-manifests --helm-chart charts/quotagate`"
    );
    for ((name, c), (_, g)) in committed.iter().zip(&generated) {
        assert!(
            c == g,
            "charts/quotagate/{name} is stale: run `cargo run -- install-manifests --helm-chart charts/quotagate`"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn helm_lint_passes_the_chart() {
    let Some(helm) = helm_or_skip() else { return };
    let mut cmd = Command::new(helm);
    cmd.args(["lint", "--strict"])
        .arg(root().join("charts/quotagate"));
    let (ok, out, err) = run(cmd);
    assert!(ok, "helm lint failed:\n{out}{err}");
    assert!(out.contains("1 chart(s) linted, 0 chart(s) failed"), "{out}");
    assert!(!out.contains("[WARNING]") && !out.contains("[ERROR]"), "{out}");
    println!("{out}");
}

/// Helm stores the whole chart, gzipped JSON with each file base64-encoded, in its release Secret,
/// which may hold 1 MiB (`helm install` of the chart with its CRDs' descriptions failed on the real
/// control plane: `Secret "sh.helm.release.v1.quotagate.v1" is invalid: data: Too long`). The
/// packaged chart stays well below what that allows.
#[test]
fn the_packaged_chart_fits_helms_release_secret() {
    let Some(helm) = helm_or_skip() else { return };
    let dir = tmp("package");
    let mut cmd = Command::new(helm);
    cmd.arg("package")
        .arg(root().join("charts/quotagate"))
        .arg("--destination")
        .arg(&dir);
    let (ok, out, err) = run(cmd);
    assert!(ok, "helm package failed: {out}{err}");
    let tgz = dir.join(format!("quotagate-{}.tgz", env!("CARGO_PKG_VERSION")));
    let size = std::fs::metadata(&tgz).expect("the package").len();
    println!("{}: {size} bytes", tgz.file_name().unwrap().to_string_lossy());
    assert!(size < 400 * 1024, "the packaged chart is {size} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}

fn key(d: &Value) -> String {
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

/// `helm template` with `values` in `namespace` against `install-manifests` with `flags`.
fn same_objects(helm: &Path, case: &str, namespace: &str, values: Value, flags: &[&str]) {
    let dir = tmp(case);
    let values_file = dir.join("values.yaml");
    std::fs::write(&values_file, values.to_string()).unwrap();
    let mut cmd = Command::new(helm);
    cmd.args(["template", "quotagate"])
        .arg(root().join("charts/quotagate"))
        .args(["--namespace", namespace, "--include-crds", "-f"])
        .arg(&values_file);
    let (ok, rendered, err) = run(cmd);
    assert!(ok, "{case}: helm template failed: {err}");
    let mut args = vec!["install-manifests", "--namespace", namespace];
    args.extend(flags);
    let (ok, printed, err) = quotagate(&args);
    assert!(ok, "{case}: install-manifests {flags:?} failed: {err}");

    let mut from_helm = load_documents(&rendered).expect("helm renders YAML");
    let mut ours = load_documents(&printed).expect("install-manifests prints YAML");
    // The chart's CRDs carry no schema descriptions (Helm's release Secret holds 1 MiB).
    for d in ours
        .iter_mut()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
    {
        quotagate::wiring::helm::without_descriptions(d);
    }
    // The namespace is the release's (`helm install --create-namespace`), not the chart's.
    let ns = ours
        .iter()
        .position(|d| d["kind"] == "Namespace")
        .expect("a Namespace");
    assert_eq!(ours.remove(ns)["metadata"]["name"], namespace);
    from_helm.sort_by_key(key);
    ours.sort_by_key(key);
    let keys = |docs: &[Value]| docs.iter().map(key).collect::<Vec<_>>();
    assert_eq!(keys(&from_helm), keys(&ours), "{case}: different objects");
    for (h, o) in from_helm.iter().zip(&ours) {
        assert!(
            h == o,
            "{case}: {} differs\nhelm template:\n{h:#}\ninstall-manifests:\n{o:#}",
            key(o)
        );
    }
    println!("{case}: {} objects equal", ours.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn helm_template_renders_what_install_manifests_prints() {
    let Some(helm) = helm_or_skip() else { return };
    same_objects(&helm, "defaults", "quotagate-system", json!({}), &[]);
    same_objects(
        &helm,
        "image-namespace-replicas-log",
        "platform",
        json!({"controllerManager": {"replicas": 3, "manager": {
            "image": {"repository": "registry.example:5000/ml/quotagate", "tag": "1.2.3"},
            "logLevel": "quotagate=debug,info"}}}),
        &[
            "--image",
            "registry.example:5000/ml/quotagate:1.2.3",
            "--replicas",
            "3",
            "--log-level",
            "quotagate=debug,info",
        ],
    );
    // The Kueue Configuration's integrations (with `pod`: Kueue's pod webhooks too) and
    // waitForPodsReady, as Kueue's chart sets them: managerConfig.controllerManagerConfigYaml.
    let config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n\
                  integrations:\n  frameworks: [batch/job, ray.io/raycluster, ray.io/rayjob, pod]\n\
                  waitForPodsReady:\n  timeout: 5m\n  blockAdmission: true\n  recoveryTimeout: 1m\n";
    let config_file = tmp("config").join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    same_objects(
        &helm,
        "integrations-pod-waitforpodsready",
        "ml-system",
        json!({"managerConfig": {"controllerManagerConfigYaml": config}}),
        &["--config", config_file.to_str().unwrap()],
    );
    let without_pod = config.replace(", pod]", "]");
    std::fs::write(&config_file, &without_pod).unwrap();
    same_objects(
        &helm,
        "integrations-without-pod",
        "quotagate-system",
        json!({"managerConfig": {"controllerManagerConfigYaml": without_pod}}),
        &["--config", config_file.to_str().unwrap()],
    );
    same_objects(
        &helm,
        "use-kubernetes-proxy",
        "quotagate-system",
        json!({"useKubernetesProxy": true}),
        &["--use-kubernetes-proxy"],
    );
    // Flags for the manager beyond the values (quotagate's own value: neither Kueue's chart nor
    // KubeRay's has one), after the proxy flag, in their order.
    same_objects(
        &helm,
        "manager-extra-args-with-proxy",
        "quotagate-system",
        json!({"useKubernetesProxy": true, "controllerManager": {"manager": {
            "extraArgs": ["--upgrade-deadline=30m", "--feature-gates=RayServiceIncrementalUpgrade=false"]}}}),
        &[
            "--use-kubernetes-proxy",
            "--manager-arg",
            "--upgrade-deadline=30m",
            "--manager-arg=--feature-gates=RayServiceIncrementalUpgrade=false",
        ],
    );
    same_objects(
        &helm,
        "manager-extra-args",
        "quotagate-system",
        json!({"controllerManager": {"manager": {"extraArgs": ["--simulated-ray-dashboards"]}}}),
        &["--manager-arg", "--simulated-ray-dashboards"],
    );
    let resources =
        json!({"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}});
    let node_selector = json!({"node-role.kubernetes.io/control-plane": "", "pool": "system"});
    let tolerations = json!([
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoExecute", "tolerationSeconds": 300}
    ]);
    same_objects(
        &helm,
        "resources-nodeselector-tolerations",
        "quotagate-system",
        json!({"controllerManager": {"manager": {"resources": resources},
            "nodeSelector": node_selector, "tolerations": tolerations}}),
        &[
            "--resources",
            &resources.to_string(),
            "--node-selector",
            &node_selector.to_string(),
            "--tolerations",
            &tolerations.to_string(),
        ],
    );
    // No resources: `null` in Helm (which merges a `{}` into the defaults), `{}` for the flag.
    same_objects(
        &helm,
        "no-resources",
        "quotagate-system",
        json!({"controllerManager": {"manager": {"resources": null}}}),
        &["--resources", "{}"],
    );
    let _ = std::fs::remove_dir_all(config_file.parent().unwrap());
}

/// Bad values are refused naming the value, as bad flags are refused naming the flag.
#[test]
fn bad_values_and_flags_are_refused_with_their_names() {
    let (ok, _, err) = quotagate(&["install-manifests", "--tolerations", "{key: x}"]);
    assert!(!ok && err.contains("--tolerations"), "{err}");
    let (ok, _, err) = quotagate(&["install-manifests", "--manager-arg", " "]);
    assert!(!ok && err.contains("--manager-arg \" \""), "{err}");
    let Some(helm) = helm_or_skip() else { return };
    for (set, says) in [
        ("controllerManager.replicas=many", "/controllerManager/replicas"),
        ("useKubernetesProxy=maybe", "/useKubernetesProxy"),
        (
            "managerConfig.controllerManagerConfigYaml=a: [",
            "managerConfig.controllerManagerConfigYaml: not YAML",
        ),
    ] {
        let mut cmd = Command::new(&helm);
        cmd.args(["template", "quotagate"])
            .arg(root().join("charts/quotagate"))
            .args(["--set-string", set]);
        let (ok, _, err) = run(cmd);
        assert!(!ok && err.contains(says), "--set-string {set}: {err}");
    }
    let mut cmd = Command::new(&helm);
    cmd.args(["template", "quotagate"])
        .arg(root().join("charts/quotagate"))
        .args([
            "--set-json",
            r#"controllerManager.manager.extraArgs=["--a", " "]"#,
        ]);
    let (ok, _, err) = run(cmd);
    assert!(
        !ok && err.contains("/controllerManager/manager/extraArgs/1"),
        "extraArgs with a blank flag: {err}"
    );
}
