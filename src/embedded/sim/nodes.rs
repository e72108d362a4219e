//! Nodes with capacity: the pools a simulated cluster offers (`--nodes`, `--node-capacity`,
//! `--node-pool`), their parsing, and the Node objects a kubelet registers for them (capacity and
//! allocatable, the well-known labels, taints). Used by the embedded cluster's scheduler
//! (`scheduler.rs`) and by `quotagate node-agent` against a real API server.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::quantity::Quantity;
use crate::api::validation::{FieldError, Path};

/// At most this many Nodes in all: each is an object the scheduler looks at for every pending pod
/// (and, with the node agent, a Lease written every 10 s).
pub const MAX_NODES: u32 = 100;

/// "Unlimited", as the embedded cluster's single node is: what a Node offers for cpu, memory and pods
/// unless its capacity names them.
pub const DEFAULT_CAPACITY: &str = "cpu=1k,memory=4Ti,pods=1k";

/// A node taint (`key[=value]:effect`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// A group of identical Nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePool {
    /// Empty for the default pool (`--nodes`/`--node-capacity`); else the pool's name, part of its
    /// nodes' names and their `node.quotagate.io/pool` label.
    pub name: String,
    pub count: u32,
    /// Resource name -> quantity, as written (cpu, memory and pods not named get `DEFAULT_CAPACITY`'s).
    pub capacity: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

impl NodePool {
    /// The default pool: `count` nodes offering `capacity` (over `DEFAULT_CAPACITY`).
    pub fn plain(count: u32, capacity: Option<&BTreeMap<String, String>>) -> Self {
        NodePool {
            name: String::new(),
            count,
            capacity: with_defaults(capacity),
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// The pool's node names under `prefix`: `prefix-1..` for the default pool, `prefix-NAME-1..`.
    pub fn node_names(&self, prefix: &str) -> Vec<String> {
        (1..=self.count)
            .map(|i| {
                if self.name.is_empty() {
                    format!("{prefix}-{i}")
                } else {
                    format!("{prefix}-{}-{i}", self.name)
                }
            })
            .collect()
    }
}

/// `DEFAULT_CAPACITY` overridden by what `given` names.
pub fn with_defaults(given: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut cap = parse_capacity(DEFAULT_CAPACITY, ',').unwrap_or_default();
    if let Some(given) = given {
        cap.extend(given.clone());
    }
    cap
}

/// Every pool's nodes, named under `prefix`, with their pool; refused past `MAX_NODES` in all.
pub fn expand<'a>(pools: &'a [NodePool], prefix: &str) -> Result<Vec<(String, &'a NodePool)>, String> {
    let total: u64 = pools.iter().map(|p| u64::from(p.count)).sum();
    if total > u64::from(MAX_NODES) {
        return Err(format!(
            "{total} nodes asked for (--nodes and every --node-pool's count together); at most {MAX_NODES}"
        ));
    }
    let mut out = Vec::new();
    for p in pools {
        for n in p.node_names(prefix) {
            if out.iter().any(|(m, _): &(String, _)| *m == n) {
                return Err(format!(
                    "node {n} would be made twice: give the pools different names"
                ));
            }
            out.push((n, p));
        }
    }
    Ok(out)
}

/// `cpu=8,memory=32Gi` (entries split at `sep`): every entry a resource name and a non-negative
/// quantity.
pub fn parse_capacity(s: &str, sep: char) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for entry in s.split(sep).map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(format!(
                "{entry:?} is not name=quantity (e.g. cpu=8{sep}memory=32Gi)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty()
            || name.len() > 253
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        {
            return Err(format!("{name:?} is not a resource name"));
        }
        let q = Quantity::parse(value).map_err(|e| format!("{name}={value}: {e}"))?;
        if q.is_negative() {
            return Err(format!("{name}={value}: a capacity cannot be negative"));
        }
        if out.insert(name.to_string(), value.to_string()).is_some() {
            return Err(format!("{name} named twice"));
        }
    }
    if out.is_empty() {
        return Err(format!("no resource given (e.g. cpu=8{sep}memory=32Gi)"));
    }
    Ok(out)
}

fn first_error(errs: Vec<FieldError>) -> Result<(), String> {
    match errs.into_iter().next() {
        Some(e) => Err(e.to_string()),
        None => Ok(()),
    }
}

/// `k=v;k2=v2`: label keys (qualified names) and values as the API server checks them.
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for entry in s.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(format!("label {entry:?} is not key=value"));
        };
        let mut errs = Vec::new();
        crate::api::names::qualified_name(&Path::root(&format!("labels[{k}]")), k, &mut errs);
        crate::api::names::label_value(&Path::root(&format!("labels[{k}]")), v, &mut errs);
        first_error(errs)?;
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(format!("label {k} named twice"));
        }
    }
    Ok(out)
}

/// `key[=value]:effect;...`, as `kubectl taint` writes one.
pub fn parse_taints(s: &str) -> Result<Vec<Taint>, String> {
    let mut out: Vec<Taint> = Vec::new();
    for entry in s.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((kv, effect)) = entry.rsplit_once(':') else {
            return Err(format!(
                "taint {entry:?} is not key[=value]:effect (e.g. nvidia.com/gpu=present:NoSchedule)"
            ));
        };
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            return Err(format!(
                "taint {entry:?}: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let mut errs = Vec::new();
        crate::api::names::qualified_name(&Path::root(&format!("taints[{k}].key")), k, &mut errs);
        crate::api::names::label_value(&Path::root(&format!("taints[{k}].value")), v, &mut errs);
        first_error(errs)?;
        if out.iter().any(|t| t.key == k && t.effect == effect) {
            return Err(format!("taint {k}:{effect} named twice"));
        }
        out.push(Taint {
            key: k.to_string(),
            value: v.to_string(),
            effect: effect.to_string(),
        });
    }
    Ok(out)
}

/// `name=gpu,count=2,capacity=cpu=8;nvidia.com/gpu=4,labels=k=v;k2=v2,taints=k=v:NoSchedule`:
/// a named pool of `count` nodes (1 unless given), its capacity over `DEFAULT_CAPACITY`, labels and
/// taints (entries of each split at `;`).
pub fn parse_pool(s: &str) -> Result<NodePool, String> {
    let mut pool = NodePool {
        name: String::new(),
        count: 1,
        capacity: with_defaults(None),
        labels: BTreeMap::new(),
        taints: Vec::new(),
    };
    let mut seen = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!(
                "{part:?} is not key=value (keys: name, count, capacity, labels, taints)"
            ));
        };
        if seen.contains(&key) {
            return Err(format!("{key} given twice"));
        }
        seen.push(key);
        match key {
            "name" => {
                let mut errs = Vec::new();
                crate::api::names::dns_label(&Path::root("name"), value, &mut errs);
                first_error(errs)?;
                if value.len() > 40 {
                    return Err(format!("name={value}: a pool name is at most 40 characters"));
                }
                pool.name = value.to_string();
            }
            "count" => {
                pool.count = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_NODES).contains(n))
                    .ok_or_else(|| format!("count={value}: a pool has 1 to {MAX_NODES} nodes"))?;
            }
            "capacity" => {
                let given = parse_capacity(value, ';').map_err(|e| format!("capacity: {e}"))?;
                pool.capacity = with_defaults(Some(&given));
            }
            "labels" => pool.labels = parse_labels(value)?,
            "taints" => pool.taints = parse_taints(value)?,
            other => {
                return Err(format!(
                    "unknown key {other:?} (keys: name, count, capacity, labels, taints)"
                ));
            }
        }
    }
    if pool.name.is_empty() {
        return Err("a pool needs name=... (e.g. name=gpu,count=2,capacity=nvidia.com/gpu=4)".into());
    }
    Ok(pool)
}

/// Go's name for this machine's architecture, as a kubelet reports it.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The Node as a kubelet registers it: labels (the well-known ones, the pool's), taints, addresses,
/// capacity and allocatable (equal: nothing is reserved for the system), and Ready.
pub fn node_object(name: &str, index: u32, pool: &NodePool) -> Value {
    let now = crate::embedded::meta::now_rfc3339();
    let arch = go_arch();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), arch.to_string()),
        ("node.quotagate.io/agent".to_string(), "simulated".to_string()),
    ]);
    if !pool.name.is_empty() {
        labels.insert("node.quotagate.io/pool".into(), pool.name.clone());
    }
    labels.extend(pool.labels.clone());
    let mut spec = json!({});
    if !pool.taints.is_empty() {
        spec["taints"] = pool
            .taints
            .iter()
            .map(|t| {
                let mut o = json!({"key": t.key, "effect": t.effect});
                if !t.value.is_empty() {
                    o["value"] = json!(t.value);
                }
                o
            })
            .collect();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": pool.capacity,
            "allocatable": pool.capacity,
            "addresses": [
                // TEST-NET-1 (RFC 5737): nothing answers there; the pods are simulated.
                {"type": "InternalIP", "address": format!("192.0.2.{}", index.clamp(1, 254))},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "simulated node"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "simulated node"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "simulated node"),
                condition("Ready", "True", "KubeletReady", "quotagate node-agent is posting ready status"),
            ],
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                "osImage": "quotagate node-agent (simulated pods)",
                "containerRuntimeVersion": "quotagate-sim://1",
                "kubeletVersion": concat!("quotagate-", env!("CARGO_PKG_VERSION")),
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": arch,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_reads_its_capacity_labels_and_taints() {
        let p = parse_pool(
            "name=gpu,count=2,capacity=cpu=8;nvidia.com/gpu=4,labels=accel=a100;zone=z1,taints=nvidia.com/gpu=present:NoSchedule;spot:NoExecute",
        )
        .unwrap();
        assert_eq!((p.name.as_str(), p.count), ("gpu", 2));
        assert_eq!(p.capacity["cpu"], "8");
        assert_eq!(p.capacity["nvidia.com/gpu"], "4");
        assert_eq!(p.capacity["memory"], "4Ti", "not named: the default");
        assert_eq!(p.labels["accel"], "a100");
        assert_eq!(
            p.taints,
            [
                Taint {
                    key: "nvidia.com/gpu".into(),
                    value: "present".into(),
                    effect: "NoSchedule".into()
                },
                Taint {
                    key: "spot".into(),
                    value: "".into(),
                    effect: "NoExecute".into()
                },
            ]
        );
        assert_eq!(p.node_names("sim-node"), ["sim-node-gpu-1", "sim-node-gpu-2"]);
        let n = node_object("sim-node-gpu-1", 1, &p);
        assert_eq!(
            n["metadata"]["labels"]["kubernetes.io/hostname"],
            "sim-node-gpu-1"
        );
        assert_eq!(n["metadata"]["labels"]["node.quotagate.io/pool"], "gpu");
        assert_eq!(n["metadata"]["labels"]["accel"], "a100");
        assert_eq!(
            n["spec"]["taints"],
            json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, {"key": "spot", "effect": "NoExecute"}])
        );
        assert_eq!(n["status"]["allocatable"]["nvidia.com/gpu"], "4");
        assert_eq!(n["status"]["capacity"], n["status"]["allocatable"]);
    }

    #[test]
    fn bad_pools_say_what_is_wrong() {
        for (s, want) in [
            ("count=2", "needs name="),
            ("name=Gpu", "name"),
            ("name=gpu,count=0", "count=0"),
            ("name=gpu,count=101", "1 to 100"),
            ("name=gpu,capacity=cpu=-1", "cannot be negative"),
            ("name=gpu,capacity=cpu=lots", "cpu=lots"),
            ("name=gpu,labels=a", "not key=value"),
            ("name=gpu,labels=a=b c", "labels[a]"),
            ("name=gpu,taints=k=v", "key[=value]:effect"),
            ("name=gpu,taints=k=v:Never", "effect \"Never\""),
            ("name=gpu,size=2", "unknown key"),
            ("name=gpu,name=cpu", "given twice"),
            ("name=gpu,gpu", "not key=value"),
        ] {
            let err = parse_pool(s).expect_err(s);
            assert!(err.contains(want), "{s}: {err}");
        }
    }

    #[test]
    fn too_many_nodes_are_refused_before_anything_is_made() {
        let big = |name: &str, count| NodePool {
            name: name.into(),
            ..NodePool::plain(count, None)
        };
        assert_eq!(expand(&[big("", 60), big("a", 40)], "n").unwrap().len(), 100);
        let err = expand(&[big("", 60), big("a", 41)], "n").unwrap_err();
        assert!(err.contains("101 nodes") && err.contains("at most 100"), "{err}");
        let err = expand(&[big("a", 1), big("a", 1)], "n").unwrap_err();
        assert!(err.contains("n-a-1"), "{err}");
    }
}
