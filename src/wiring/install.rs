//! `quotagate install-manifests`: everything a cluster needs, in one YAML stream, in the order
//! Kueue's release manifests (kustomize's) install it. The objects are `config/`'s (the kustomize
//! source, compiled in) and the CRDs the binary generates; the flags change what Kueue's overlays and
//! Helm values change: image, namespace, replicas, log level and the Kueue `Configuration`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use serde_json::Value;

use crate::api::kueue::config::Configuration;

/// The namespace, image and names of the shipped manifests.
pub const NAMESPACE: &str = "quotagate-system";
pub const IMAGE: &str = concat!("quotagate:", env!("CARGO_PKG_VERSION"));
pub const CONFIG_MAP: &str = "quotagate-manager-config";
pub const CONFIG_KEY: &str = "controller_manager_config.yaml";

/// `config/`, compiled in: what `kubectl kustomize config/default` reads besides the CRDs.
const SOURCES: &[(&str, &str)] = &[
    (
        "config/rbac/service_account.yaml",
        include_str!("../../config/rbac/service_account.yaml"),
    ),
    (
        "config/rbac/role.yaml",
        include_str!("../../config/rbac/role.yaml"),
    ),
    (
        "config/rbac/role_binding.yaml",
        include_str!("../../config/rbac/role_binding.yaml"),
    ),
    (
        "config/rbac/leader_election_role.yaml",
        include_str!("../../config/rbac/leader_election_role.yaml"),
    ),
    (
        "config/rbac/cert_role.yaml",
        include_str!("../../config/rbac/cert_role.yaml"),
    ),
    (
        "config/rbac/metrics_auth_role.yaml",
        include_str!("../../config/rbac/metrics_auth_role.yaml"),
    ),
    (
        "config/webhook/manifests.yaml",
        include_str!("../../config/webhook/manifests.yaml"),
    ),
    (
        "config/webhook/service.yaml",
        include_str!("../../config/webhook/service.yaml"),
    ),
    (
        "config/manager/manager.yaml",
        include_str!("../../config/manager/manager.yaml"),
    ),
    (
        "config/manager/service.yaml",
        include_str!("../../config/manager/service.yaml"),
    ),
];

/// The `services/proxy` grant of `--use-kubernetes-proxy`, outside the default install.
const KUBERNETES_PROXY_ROLE: (&str, &str) = (
    "config/rbac/kubernetes_proxy_role.yaml",
    include_str!("../../config/rbac/kubernetes_proxy_role.yaml"),
);

/// The Kueue `Configuration` the ConfigMap carries unless `--config` gives another.
pub const DEFAULT_CONFIG: &str = include_str!("../../config/manager/controller_manager_config.yaml");

/// Kueue's install order (kustomize's legacy order: its `manifests.yaml` is built that way).
const ORDER: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "Deployment",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// CRD groups the embedded cluster serves but a real cluster gets elsewhere (the Gateway API
/// release): installing ours would replace theirs.
const NOT_INSTALLED_GROUPS: &[&str] = &["gateway.networking.k8s.io"];

#[derive(Clone, Debug, PartialEq)]
pub struct InstallOptions {
    pub image: String,
    pub namespace: String,
    pub replicas: u32,
    /// `RUST_LOG` of the manager (an `EnvFilter` directive: `info`, `quotagate=debug,info`).
    pub log_level: String,
    /// The Kueue `Configuration` file's text.
    pub config: String,
    /// The manager reaches Ray dashboards through the API server (`--use-kubernetes-proxy`, off by
    /// default as in KubeRay), with the `services/proxy` grant that needs.
    pub use_kubernetes_proxy: bool,
    /// The manager container's resources instead of `config/manager/manager.yaml`'s (an empty one
    /// leaves the field out, as the chart's `with` does).
    pub resources: Option<ResourceRequirements>,
    /// The manager pod's node selector (none when empty).
    pub node_selector: BTreeMap<String, String>,
    /// The manager pod's tolerations (none when empty).
    pub tolerations: Vec<Toleration>,
    /// Flags appended to the manager container's args, after the shipped ones (`--manager-arg`,
    /// repeatable): `run`'s flags the other settings do not cover (`--simulated-ray-dashboards`,
    /// `--upgrade-deadline=30m`).
    pub extra_args: Vec<String>,
}

impl Default for InstallOptions {
    fn default() -> Self {
        InstallOptions {
            image: IMAGE.to_string(),
            namespace: NAMESPACE.to_string(),
            replicas: 2,
            log_level: "info".to_string(),
            config: DEFAULT_CONFIG.to_string(),
            use_kubernetes_proxy: false,
            resources: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            extra_args: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "--namespace {0:?}: must be a DNS label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit)"
    )]
    Namespace(String),
    #[error("--image {0:?}: must be a non-empty image reference without spaces")]
    Image(String),
    #[error("--replicas {0}: at most 100")]
    Replicas(u32),
    #[error("--log-level {0:?}: {1}")]
    LogLevel(String, String),
    #[error("--config: {0}")]
    Config(String),
    #[error("--manager-arg {0:?}: blank, or holds a line break")]
    ManagerArg(String),
    #[error("{file}: {detail}")]
    Source { file: &'static str, detail: String },
    #[error("rendering YAML: {0}")]
    Render(String),
}

fn is_dns_label(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    !s.is_empty() && s.len() <= 63 && s.chars().all(ok_char) && !s.starts_with('-') && !s.ends_with('-')
}

impl InstallOptions {
    fn check(&self) -> Result<(), InstallError> {
        if !is_dns_label(&self.namespace) {
            return Err(InstallError::Namespace(self.namespace.clone()));
        }
        if self.image.is_empty() || self.image.chars().any(char::is_whitespace) {
            return Err(InstallError::Image(self.image.clone()));
        }
        if self.replicas > 100 {
            return Err(InstallError::Replicas(self.replicas));
        }
        if let Some(a) = self
            .extra_args
            .iter()
            .find(|a| a.trim().is_empty() || a.contains(['\n', '\r']))
        {
            return Err(InstallError::ManagerArg(a.clone()));
        }
        tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .map_err(|e| InstallError::LogLevel(self.log_level.clone(), e.to_string()))?;
        // The manager refuses a configuration it cannot honour at start; refuse it here already.
        Configuration::parse(&self.config).map_err(|e| InstallError::Config(e.to_string()))?;
        Ok(())
    }
}

/// Every object, ordered, with the options applied.
pub fn objects(opts: &InstallOptions) -> Result<Vec<Value>, InstallError> {
    opts.check()?;
    let mut docs = Vec::new();
    for crd in crate::api::all_crds() {
        if NOT_INSTALLED_GROUPS.contains(&crd.spec.group.as_str()) {
            continue;
        }
        docs.push(crate::api::crd_markers::to_value(&crd).map_err(|e| InstallError::Render(e.to_string()))?);
    }
    let extra = opts.use_kubernetes_proxy.then_some(KUBERNETES_PROXY_ROLE);
    for (file, text) in SOURCES.iter().copied().chain(extra) {
        let parsed = crate::api::manifest::load_documents(text).map_err(|e| InstallError::Source {
            file,
            detail: e.to_string(),
        })?;
        docs.extend(parsed);
    }
    docs.push(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
        "data": {CONFIG_KEY: opts.config},
    }));
    // Kueue's pod integration is opt-in: its webhooks, which every pod creation passes through, are
    // registered only when the configuration names `pod`, as Kueue's Helm chart does.
    let config = Configuration::parse(&opts.config).map_err(|e| InstallError::Config(e.to_string()))?;
    if config.frameworks().pod {
        for d in &mut docs {
            add_pod_hooks(d);
        }
    }
    for d in &mut docs {
        apply(d, opts);
    }
    docs.sort_by_key(rank);
    Ok(docs)
}

/// The pod webhooks, made from the batch Job ones (same service, selectors and policies) with the
/// pod's path and rule (Kueue's `/mutate--v1-pod` and `/validate--v1-pod`), right after them.
fn add_pod_hooks(d: &mut Value) {
    use super::webhook::{HOOKS, POD_MUTATING, POD_VALIDATING};
    let (job, pod) = match kind(d) {
        "MutatingWebhookConfiguration" => ("mjob.kb.io", POD_MUTATING),
        "ValidatingWebhookConfiguration" => ("vjob.kb.io", POD_VALIDATING),
        _ => return,
    };
    let Some(hook) = HOOKS.iter().find(|h| h.name == pod) else {
        return;
    };
    let Some(hooks) = d.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    let Some(at) = hooks.iter().position(|w| w["name"] == job) else {
        return;
    };
    let mut w = hooks[at].clone();
    w["name"] = Value::from(hook.name);
    w["clientConfig"]["service"]["path"] = Value::from(hook.path());
    w["rules"] = serde_json::json!([{"apiGroups": [hook.group], "apiVersions": [hook.version], "operations": hook.operations, "resources": [hook.resource]}]);
    hooks.insert(at + 1, w);
}

/// `objects` as one YAML stream (`---` before each document).
pub fn manifests(opts: &InstallOptions) -> Result<String, InstallError> {
    let mut out = String::new();
    for d in objects(opts)? {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&d).map_err(|e| InstallError::Render(e.to_string()))?);
    }
    Ok(out)
}

fn kind(d: &Value) -> &str {
    d.get("kind").and_then(Value::as_str).unwrap_or_default()
}

/// Install order, then name within a kind (as kustomize sorts).
fn rank(d: &Value) -> (usize, String) {
    let k = ORDER.iter().position(|o| *o == kind(d)).unwrap_or(ORDER.len());
    let name = d
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    (k, name.to_string())
}

/// What kustomize's namespace transformer and Kueue's overlays change, and the manager's settings.
fn apply(d: &mut Value, opts: &InstallOptions) {
    let ns = Value::String(opts.namespace.clone());
    match kind(d) {
        "Namespace" => d["metadata"]["name"] = ns.clone(),
        "RoleBinding" | "ClusterRoleBinding" => {
            for s in d
                .get_mut("subjects")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if s.get("kind").and_then(Value::as_str) == Some("ServiceAccount") {
                    s["namespace"] = ns.clone();
                }
            }
        }
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            for w in d
                .get_mut("webhooks")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(svc) = w.pointer_mut("/clientConfig/service") {
                    svc["namespace"] = ns.clone();
                }
                // Not in the manager's own namespace, wherever it is installed.
                let values = w
                    .pointer_mut("/namespaceSelector/matchExpressions")
                    .and_then(Value::as_array_mut);
                for v in values
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.get_mut("values"))
                    .filter_map(Value::as_array_mut)
                    .flatten()
                {
                    if v.as_str() == Some(NAMESPACE) {
                        *v = ns.clone();
                    }
                }
            }
        }
        "Deployment" => {
            d["spec"]["replicas"] = Value::from(opts.replicas);
            if let Some(pod) = d
                .pointer_mut("/spec/template/spec")
                .and_then(Value::as_object_mut)
            {
                if !opts.node_selector.is_empty() {
                    pod.insert("nodeSelector".into(), serde_json::json!(opts.node_selector));
                }
                if !opts.tolerations.is_empty() {
                    pod.insert("tolerations".into(), serde_json::json!(opts.tolerations));
                }
            }
            let containers = d
                .pointer_mut("/spec/template/spec/containers")
                .and_then(Value::as_array_mut);
            for c in containers.into_iter().flatten() {
                c["image"] = Value::String(opts.image.clone());
                if let (Some(r), Some(c)) = (&opts.resources, c.as_object_mut()) {
                    match serde_json::json!(r) {
                        Value::Object(o) if o.is_empty() => c.remove("resources"),
                        v => c.insert("resources".into(), v),
                    };
                }
                if opts.use_kubernetes_proxy
                    && let Some(args) = c.get_mut("args").and_then(Value::as_array_mut)
                {
                    args.push(Value::from("--use-kubernetes-proxy"));
                }
                if let Some(args) = c.get_mut("args").and_then(Value::as_array_mut) {
                    args.extend(opts.extra_args.iter().cloned().map(Value::from));
                }
                for e in c
                    .get_mut("env")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if e.get("name").and_then(Value::as_str) == Some("RUST_LOG") {
                        e["value"] = Value::String(opts.log_level.clone());
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut)
        && meta.contains_key("namespace")
    {
        meta.insert("namespace".to_string(), ns);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn find<'a>(docs: &'a [Value], kind_: &str, name: &str) -> &'a Value {
        docs.iter()
            .find(|d| kind(d) == kind_ && d.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{kind_} {name} missing"))
    }

    #[test]
    fn defaults_hold_every_part_in_kueues_order() {
        let docs = objects(&InstallOptions::default()).unwrap();
        let kinds: Vec<&str> = docs.iter().map(kind).collect();
        let mut seen = kinds.clone();
        seen.dedup();
        assert_eq!(
            seen,
            ORDER
                .iter()
                .filter(|k| **k != "Secret")
                .copied()
                .collect::<Vec<_>>()
        );
        let crds: Vec<&str> = docs
            .iter()
            .filter(|d| kind(d) == "CustomResourceDefinition")
            .filter_map(|d| d.pointer("/metadata/name")?.as_str())
            .collect();
        assert!(
            crds.contains(&"clusterqueues.kueue.x-k8s.io") && crds.contains(&"rayservices.ray.io"),
            "{crds:?}"
        );
        assert!(
            !crds.iter().any(|n| n.ends_with("gateway.networking.k8s.io")),
            "{crds:?}"
        );
        let dep = find(&docs, "Deployment", "quotagate-controller-manager");
        assert_eq!(dep["spec"]["replicas"], 2);
        assert_eq!(
            dep.pointer("/spec/template/spec/containers/0/image"),
            Some(&Value::from(IMAGE))
        );
        let cm = find(&docs, "ConfigMap", CONFIG_MAP);
        assert_eq!(cm["data"][CONFIG_KEY], DEFAULT_CONFIG);
    }

    #[test]
    fn flags_reach_every_place_they_belong() {
        let opts = InstallOptions {
            image: "registry.example/quotagate:1.2".into(),
            namespace: "platform".into(),
            replicas: 3,
            log_level: "quotagate=debug,info".into(),
            config: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n".into(),
            use_kubernetes_proxy: true,
            resources: Some(ResourceRequirements {
                limits: Some([("cpu".to_string(), Quantity("2".into()))].into()),
                ..Default::default()
            }),
            node_selector: [("pool".to_string(), "system".to_string())].into(),
            tolerations: vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }],
            extra_args: vec![
                "--simulated-ray-dashboards".into(),
                "--upgrade-deadline=30m".into(),
            ],
        };
        let docs = objects(&opts).unwrap();
        let text = serde_json::to_string(&docs).unwrap();
        assert!(
            !text.contains(NAMESPACE),
            "the default namespace is left somewhere"
        );
        find(&docs, "Namespace", "platform");
        let dep = find(&docs, "Deployment", "quotagate-controller-manager");
        assert_eq!(dep["metadata"]["namespace"], "platform");
        assert_eq!(dep["spec"]["replicas"], 3);
        let c = &dep["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "registry.example/quotagate:1.2");
        assert_eq!(c["resources"], serde_json::json!({"limits": {"cpu": "2"}}));
        let pod = &dep["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"], serde_json::json!({"pool": "system"}));
        assert_eq!(
            pod["tolerations"],
            serde_json::json!([{"key": "dedicated", "operator": "Exists"}])
        );
        assert!(
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "RUST_LOG" && e["value"] == "quotagate=debug,info")
        );
        let crb = find(&docs, "ClusterRoleBinding", "quotagate-manager-rolebinding");
        assert_eq!(crb["subjects"][0]["namespace"], "platform");
        // The shipped args, the proxy flag, then the extra args in their order.
        assert_eq!(
            c["args"],
            serde_json::json!([
                "run",
                "--leader-elect=true",
                "--config=/controller_manager_config.yaml",
                "--use-kubernetes-proxy",
                "--simulated-ray-dashboards",
                "--upgrade-deadline=30m"
            ])
        );
        let proxy = find(
            &docs,
            "ClusterRoleBinding",
            "quotagate-kubernetes-proxy-rolebinding",
        );
        assert_eq!(proxy["subjects"][0]["namespace"], "platform");
        assert_eq!(
            find(&docs, "ClusterRole", "quotagate-kubernetes-proxy-role")["rules"][0]["resources"][0],
            "services/proxy"
        );
        // Off by default: neither the grant nor the flag.
        let default = serde_json::to_string(&objects(&InstallOptions::default()).unwrap()).unwrap();
        assert!(!default.contains("services/proxy") && !default.contains("--use-kubernetes-proxy"));
        let v = find(
            &docs,
            "ValidatingWebhookConfiguration",
            "quotagate-validating-webhook-configuration",
        );
        for w in v["webhooks"].as_array().unwrap() {
            assert_eq!(w["clientConfig"]["service"]["namespace"], "platform", "{w}");
        }
        let cm = find(&docs, "ConfigMap", CONFIG_MAP);
        assert_eq!(
            (
                cm["metadata"]["namespace"].as_str(),
                cm["data"][CONFIG_KEY].as_str()
            ),
            (Some("platform"), Some(opts.config.as_str()))
        );
    }

    #[test]
    fn bad_flags_are_refused_naming_the_flag() {
        let bad = |f: fn(&mut InstallOptions)| {
            let mut o = InstallOptions::default();
            f(&mut o);
            objects(&o).unwrap_err().to_string()
        };
        assert!(bad(|o| o.namespace = "Quota_Gate".into()).starts_with("--namespace \"Quota_Gate\""));
        assert!(bad(|o| o.namespace = "x".repeat(64)).starts_with("--namespace"));
        assert!(bad(|o| o.image = "a b".into()).starts_with("--image"));
        assert!(bad(|o| o.replicas = 1000).starts_with("--replicas 1000"));
        assert!(bad(|o| o.log_level = "quotagate=loud".into()).starts_with("--log-level"));
        assert!(bad(|o| o.extra_args = vec!["--a".into(), " ".into()]).starts_with("--manager-arg \" \""));
        assert!(bad(|o| o.extra_args = vec!["--a\n--b".into()]).starts_with("--manager-arg"));
        let e = bad(|o| {
            o.config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nresources:\n  transformations:\n  - input: x\n".into()
        });
        assert!(
            e.starts_with("--config: ") && e.contains("resources.transformations"),
            "{e}"
        );
    }

    /// The webhook configurations register exactly the hooks the webhook server serves; the pod
    /// hooks only with `pod` in `integrations.frameworks`.
    #[test]
    fn webhook_configurations_match_the_served_hooks() {
        use super::super::webhook::{HOOKS, POD_MUTATING, POD_VALIDATING};
        let served = |pods: bool| -> Vec<_> {
            HOOKS
                .iter()
                .filter(|h| pods || (h.name != POD_MUTATING && h.name != POD_VALIDATING))
                .map(|h| {
                    (
                        h.name.to_string(),
                        h.mutating,
                        h.path(),
                        h.group.to_string(),
                        h.version.to_string(),
                        h.resource.to_string(),
                        h.operations.join(","),
                    )
                })
                .collect()
        };
        assert_eq!(registered(&InstallOptions::default()), served(false));
        let with_pods = InstallOptions {
            config: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks: [batch/job, pod]\n".into(),
            ..Default::default()
        };
        let with = registered(&with_pods);
        assert_eq!(with, served(true));
        assert!(
            with.iter()
                .any(|h| h.0 == POD_MUTATING && h.2 == "/mutate--v1-pod" && h.5 == "pods" && h.6 == "CREATE"),
            "{with:?}"
        );
    }

    /// What the install's webhook configurations register, in order.
    fn registered(opts: &InstallOptions) -> Vec<(String, bool, String, String, String, String, String)> {
        let docs = objects(opts).unwrap();
        let mut registered = Vec::new();
        for (k, mutating) in [
            ("MutatingWebhookConfiguration", true),
            ("ValidatingWebhookConfiguration", false),
        ] {
            for d in docs.iter().filter(|d| kind(d) == k) {
                for w in d["webhooks"].as_array().unwrap() {
                    assert_eq!(
                        (w["failurePolicy"].as_str(), w["sideEffects"].as_str()),
                        (Some("Fail"), Some("None")),
                        "{w}"
                    );
                    assert_eq!(
                        w["clientConfig"]["service"]["name"],
                        crate::api::kueue::config::WEBHOOK_SERVICE
                    );
                    let rule = &w["rules"][0];
                    let ops: Vec<&str> = rule["operations"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    registered.push((
                        w["name"].as_str().unwrap().to_string(),
                        mutating,
                        w["clientConfig"]["service"]["path"].as_str().unwrap().to_string(),
                        rule["apiGroups"][0].as_str().unwrap().to_string(),
                        rule["apiVersions"][0].as_str().unwrap().to_string(),
                        rule["resources"][0].as_str().unwrap().to_string(),
                        ops.join(","),
                    ));
                }
            }
        }
        registered
    }
}
