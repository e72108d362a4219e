//! From `rayStartParams` to the `ray start` command line, as KubeRay's `BuildPod` does it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde_json::{Map, Number, Value};

use super::quantity::{ceil_units, parse_milli};
use crate::api::ray::constants as c;

/// Flags that keep an explicit `=false` instead of being dropped.
const KEEP_FALSE: [&str; 3] = ["log-color", "include-dashboard", "include-log-monitor"];
/// Container resources that map to a Ray custom resource.
const CUSTOM_ACCELERATORS: [(&str, &str); 2] = [
    ("aws.amazon.com/neuroncore", "neuron_cores"),
    ("google.com/tpu", "TPU"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    Head,
    Worker,
}

impl NodeType {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::Head => c::NODE_TYPE_HEAD,
            NodeType::Worker => c::NODE_TYPE_WORKER,
        }
    }
}

/// The GCS port workers dial: the head's `port` param, else 6379.
pub fn head_port(head_params: Option<&BTreeMap<String, String>>) -> String {
    head_params
        .and_then(|p| p.get("port"))
        .cloned()
        .unwrap_or_else(|| c::DEFAULT_GCS_SERVER_PORT.to_string())
}

/// Group-level `resources` override `num-cpus`/`memory`/`num-gpus`/`resources` params.
pub fn apply_group_resources(
    params: &mut BTreeMap<String, String>,
    resources: Option<&BTreeMap<String, String>>,
) {
    let Some(resources) = resources.filter(|r| !r.is_empty()) else {
        return;
    };
    let mut custom = Map::new();
    for (name, raw) in resources {
        let Some(milli) = parse_milli(raw) else {
            continue;
        };
        let lower = name.to_lowercase();
        if lower == "cpu" {
            params.insert("num-cpus".into(), ceil_units(milli).to_string());
        } else if lower == "memory" {
            params.insert("memory".into(), ceil_units(milli).to_string());
        } else if is_gpu_resource(&lower) {
            params.insert("num-gpus".into(), ceil_units(milli).to_string());
        } else {
            custom.insert(name.clone(), number(milli));
        }
    }
    if !custom.is_empty() {
        params.insert("resources".into(), format!("'{}'", Value::Object(custom)));
    }
}

/// Group-level Ray node labels become `--labels=k=v,...` (sorted).
pub fn apply_group_labels(params: &mut BTreeMap<String, String>, labels: Option<&BTreeMap<String, String>>) {
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        return;
    };
    let joined: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    params.insert("labels".into(), joined.join(","));
}

/// KubeRay's `setMissingRayStartParams`: worker `address`, head `dashboard-host`, metrics and agent ports, `block`.
pub fn fill_missing(params: &mut BTreeMap<String, String>, node: NodeType, head_port: &str, head_fqdn: &str) {
    match node {
        NodeType::Worker => {
            params
                .entry("address".into())
                .or_insert_with(|| format!("{head_fqdn}:{head_port}"));
        }
        NodeType::Head => {
            params
                .entry("dashboard-host".into())
                .or_insert_with(|| "0.0.0.0".into());
        }
    }
    params
        .entry("metrics-export-port".into())
        .or_insert_with(|| c::DEFAULT_METRICS_PORT.to_string());
    params.insert("block".into(), "true".into());
    params
        .entry("dashboard-agent-listen-port".into())
        .or_insert_with(|| c::DEFAULT_DASHBOARD_AGENT_LISTEN_PORT.to_string());
}

/// KubeRay's `generateRayStartCommand`: fills CPU/memory/GPU/accelerators from the Ray container's resources,
/// then renders `ray start [--head] --k=v ...` with flags sorted by name.
pub fn ray_start_command(
    node: NodeType,
    params: &mut BTreeMap<String, String>,
    resources: Option<&ResourceRequirements>,
) -> String {
    let limits = resources.and_then(|r| r.limits.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    let amount =
        |list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         key: &str| {
            list.and_then(|l| l.get(key))
                .and_then(|q| parse_milli(&q.0))
                .filter(|m| *m != 0)
        };
    if !params.contains_key("num-cpus")
        && let Some(cpu) = amount(limits, "cpu").or_else(|| amount(requests, "cpu"))
    {
        params.insert("num-cpus".into(), ceil_units(cpu).to_string());
    }
    if !params.contains_key("memory")
        && let Some(mem) = amount(limits, "memory")
    {
        params.insert("memory".into(), ceil_units(mem).to_string());
    }
    if let Some(limits) = limits {
        add_accelerators(params, limits);
    }
    let flags = render_flags(params);
    match node {
        NodeType::Head => format!("ray start --head {flags}"),
        NodeType::Worker => format!("ray start {flags}"),
    }
}

/// GPUs (`*gpu`, NVIDIA MIG slices) become `num-gpus`; the first TPU/Neuron limit becomes a Ray custom resource
/// unless one is already declared.
fn add_accelerators(
    params: &mut BTreeMap<String, String>,
    limits: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) {
    let mut custom = match params.get("resources") {
        None => Map::new(),
        Some(raw) => {
            match serde_json::from_str::<Value>(raw.trim_matches(|ch| "'\"` ".contains(ch))) {
                Ok(Value::Object(m)) => m,
                // KubeRay logs and leaves the params alone when `resources` is not a JSON object.
                _ => return,
            }
        }
    };
    let mut custom_done = CUSTOM_ACCELERATORS
        .iter()
        .any(|(_, ray)| custom.contains_key(*ray));
    for (key, q) in limits {
        let Some(milli) = parse_milli(&q.0).filter(|m| *m != 0) else {
            continue;
        };
        if !params.contains_key("num-gpus") && is_gpu_resource(key) {
            params.insert("num-gpus".into(), ceil_units(milli).to_string());
        }
        if !custom_done && let Some((_, ray)) = CUSTOM_ACCELERATORS.iter().find(|(k8s, _)| k8s == key) {
            if !custom.contains_key(*ray) {
                custom.insert((*ray).to_string(), number(milli));
                params.insert("resources".into(), format!("'{}'", Value::Object(custom.clone())));
            }
            custom_done = true;
        }
    }
}

/// `--k=v` for each param, sorted; `"true"` becomes a bare `--k`, `"false"` is dropped except for a few
/// flags Ray needs to see explicitly. Spacing matches KubeRay so the generated command is byte-identical.
pub fn render_flags(params: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (k, v) in params {
        let lower = v.to_lowercase();
        if (lower == "true" || lower == "false") && !KEEP_FALSE.contains(&k.as_str()) {
            if lower == "true" {
                out.push_str(&format!(" --{k} "));
            }
        } else {
            out.push_str(&format!(" --{k}={v} "));
        }
    }
    out
}

/// GPU-like extended resource: ends with `gpu`, or an NVIDIA MIG slice such as `nvidia.com/mig-2g.32gb`.
pub fn is_gpu_resource(key: &str) -> bool {
    if key.ends_with("gpu") {
        return true;
    }
    key.strip_prefix("nvidia.com/mig-")
        .and_then(|rest| rest.strip_suffix("gb"))
        .and_then(|rest| rest.split_once("g."))
        .is_some_and(|(a, b)| {
            !a.is_empty() && !b.is_empty() && a.chars().chain(b.chars()).all(|ch| ch.is_ascii_digit())
        })
}

/// A JSON number like Go's float64 marshalling: integral values without a fraction.
fn number(milli: i128) -> Value {
    if milli % 1000 == 0
        && let Ok(i) = i64::try_from(milli / 1000)
    {
        return Value::Number(Number::from(i));
    }
    Number::from_f64(milli as f64 / 1000.0)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// `bash -c --` (or `-lc` with login shells), KubeRay's wrapper for generated commands.
pub fn shell_command(login: bool) -> Vec<String> {
    vec![
        "/bin/bash".into(),
        if login { "-cl".into() } else { "-c".into() },
        "--".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn res(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ResourceRequirements {
        let list = |kv: &[(&str, &str)]| {
            Some(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            )
        };
        ResourceRequirements {
            limits: list(limits),
            requests: list(requests),
            ..Default::default()
        }
    }

    #[test]
    fn flags_are_sorted_and_booleans_special_cased() {
        let p = params(&[
            ("num-cpus", "1"),
            ("block", "true"),
            ("disable-usage-stats", "false"),
            ("log-color", "false"),
        ]);
        assert_eq!(render_flags(&p), " --block  --log-color=false  --num-cpus=1 ");
    }

    #[test]
    fn head_command_gets_defaults_and_container_resources() {
        let mut p = params(&[]);
        fill_missing(&mut p, NodeType::Head, "6379", "");
        let cmd = ray_start_command(
            NodeType::Head,
            &mut p,
            Some(&res(&[("cpu", "2"), ("memory", "5Gi")], &[])),
        );
        assert_eq!(
            cmd,
            "ray start --head  --block  --dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0  \
             --memory=5368709120  --metrics-export-port=8080  --num-cpus=2 "
        );
    }

    #[test]
    fn worker_command_dials_the_head_and_keeps_user_params() {
        let mut p = params(&[("num-cpus", "0"), ("metrics-export-port", "9000")]);
        fill_missing(
            &mut p,
            NodeType::Worker,
            "6380",
            "rc-head-svc.ns.svc.cluster.local",
        );
        let cmd = ray_start_command(NodeType::Worker, &mut p, Some(&res(&[("cpu", "500m")], &[])));
        assert!(
            cmd.starts_with("ray start  --address=rc-head-svc.ns.svc.cluster.local:6380 "),
            "{cmd}"
        );
        assert!(
            cmd.contains(" --num-cpus=0 ") && cmd.contains(" --metrics-export-port=9000 "),
            "{cmd}"
        );
    }

    #[test]
    fn cpu_request_is_used_when_no_limit_and_rounds_up() {
        let mut p = params(&[]);
        ray_start_command(
            NodeType::Worker,
            &mut p,
            Some(&res(&[], &[("cpu", "1500m"), ("memory", "1Gi")])),
        );
        assert_eq!(p.get("num-cpus").map(String::as_str), Some("2"));
        assert_eq!(p.get("memory"), None, "memory comes only from the limit");
    }

    #[test]
    fn accelerators_become_ray_resources() {
        let mut p = params(&[]);
        ray_start_command(
            NodeType::Worker,
            &mut p,
            Some(&res(&[("nvidia.com/gpu", "4"), ("google.com/tpu", "4")], &[])),
        );
        assert_eq!(p["num-gpus"], "4");
        assert_eq!(p["resources"], r#"'{"TPU":4}'"#);
        let mut p = params(&[("resources", r#"'{"TPU": 8}'"#)]);
        ray_start_command(
            NodeType::Worker,
            &mut p,
            Some(&res(&[("google.com/tpu", "4")], &[])),
        );
        assert_eq!(p["resources"], r#"'{"TPU": 8}'"#, "an explicit TPU resource wins");
        assert!(is_gpu_resource("nvidia.com/mig-2g.32gb"));
        assert!(!is_gpu_resource("nvidia.com/mig-xg.32gb"));
    }

    #[test]
    fn group_resources_and_labels_override_params() {
        let mut p = params(&[]);
        let r = params(&[
            ("CPU", "3"),
            ("memory", "1Gi"),
            ("nvidia.com/gpu", "1"),
            ("TPU", "4"),
        ]);
        apply_group_resources(&mut p, Some(&r));
        assert_eq!(
            (
                p["num-cpus"].as_str(),
                p["memory"].as_str(),
                p["num-gpus"].as_str()
            ),
            ("3", "1073741824", "1")
        );
        assert_eq!(p["resources"], r#"'{"TPU":4}'"#);
        apply_group_labels(&mut p, Some(&params(&[("zone", "b"), ("accel", "a100")])));
        assert_eq!(p["labels"], "accel=a100,zone=b");
        assert_eq!(head_port(Some(&params(&[("port", "6380")]))), "6380");
        assert_eq!(head_port(None), "6379");
    }
}
