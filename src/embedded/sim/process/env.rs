//! A container's environment as the kubelet builds it (`kubelet_pods.go` `makeEnvironmentVariables`):
//! the image's variables, then `envFrom`, then `env` in order, each value with `$(VAR)` expanded
//! against what came before; `command` and `args` are expanded against the whole result.
//! ConfigMaps and Secrets are read by the caller beforehand ([`referenced`]) and passed in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVarSource, Pod};

use crate::api::quantity::Quantity;

/// The node's capacity, what a `resourceFieldRef` to an unset limit reads (as on a real node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeCapacity {
    pub cpu_cores: u32,
    pub memory_bytes: u64,
}

/// What the pod's addresses are once its network exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addresses {
    pub pod_ip: String,
    pub host_ip: String,
    pub node_name: String,
}

/// ConfigMaps' `data` and Secrets' decoded `data`, by name, in the pod's namespace.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
}

impl Sources {
    /// A Secret's `data` as text (bytes that are not UTF-8 are replaced: environment values here are text).
    pub fn decode_secret(data: &BTreeMap<String, k8s_openapi::ByteString>) -> BTreeMap<String, String> {
        data.iter()
            .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
            .collect()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

fn invalid(field: String, message: impl Into<String>) -> EnvError {
    EnvError::Invalid {
        field,
        message: message.into(),
    }
}

/// The ConfigMaps and Secrets a container's `env`/`envFrom` name: (is_secret, name).
pub fn referenced(c: &Container) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for from in c.env_from.iter().flatten() {
        if let Some(r) = &from.config_map_ref {
            out.push((false, r.name.clone()));
        }
        if let Some(r) = &from.secret_ref {
            out.push((true, r.name.clone()));
        }
    }
    for e in c.env.iter().flatten() {
        if let Some(s) = &e.value_from {
            if let Some(r) = &s.config_map_key_ref {
                out.push((false, r.name.clone()));
            }
            if let Some(r) = &s.secret_key_ref {
                out.push((true, r.name.clone()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The environment of container `idx`, in order (later entries win in the process).
pub fn resolve(
    pod: &Pod,
    idx: usize,
    image_env: &[(String, String)],
    addrs: &Addresses,
    sources: &Sources,
    node: NodeCapacity,
) -> Result<Vec<(String, String)>, EnvError> {
    let Some(c) = pod.spec.as_ref().and_then(|s| s.containers.get(idx)) else {
        return Err(invalid(format!("spec.containers[{idx}]"), "no such container"));
    };
    let base = format!("spec.containers[{idx}]");
    let mut vars: Vec<(String, String)> = image_env.to_vec();
    for (i, from) in c.env_from.iter().flatten().enumerate() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (data, optional, what) = if let Some(r) = &from.config_map_ref {
            (
                sources.config_maps.get(&r.name),
                r.optional == Some(true),
                format!("configmap {:?}", r.name),
            )
        } else if let Some(r) = &from.secret_ref {
            (
                sources.secrets.get(&r.name),
                r.optional == Some(true),
                format!("secret {:?}", r.name),
            )
        } else {
            continue;
        };
        match data {
            Some(d) => vars.extend(d.iter().map(|(k, v)| (format!("{prefix}{k}"), v.clone()))),
            None if optional => {}
            None => {
                return Err(invalid(
                    format!("{base}.envFrom[{i}]"),
                    format!("{what} not found"),
                ));
            }
        }
    }
    for (i, e) in c.env.iter().flatten().enumerate() {
        let field = format!("{base}.env[{i}]");
        let value = match (&e.value, &e.value_from) {
            (_, Some(src)) => match from_source(pod, c, src, addrs, sources, node, &field)? {
                Some(v) => v,
                None => continue,
            },
            (Some(v), None) => expand(v, &|name| lookup(&vars, name)),
            (None, None) => String::new(),
        };
        vars.push((e.name.clone(), value));
    }
    Ok(vars)
}

fn lookup(vars: &[(String, String)], name: &str) -> Option<String> {
    vars.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// `command` + `args` with `$(VAR)` expanded against the container's environment.
pub fn command_line(c: &Container, env: &[(String, String)]) -> Vec<String> {
    c.command
        .iter()
        .chain(c.args.iter())
        .flatten()
        .map(|w| expand(w, &|name| lookup(env, name)))
        .collect()
}

/// `$(VAR)` becomes VAR's value when defined, `$$` becomes `$`; anything else stays as written
/// (Kubernetes' `third_party/forked/golang/expansion`).
pub fn expand(input: &str, get: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match get(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str(&rest[i..]);
                    rest = "";
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `Ok(None)`: an optional reference to a missing key or object (the variable is left out).
fn from_source(
    pod: &Pod,
    c: &Container,
    src: &EnvVarSource,
    addrs: &Addresses,
    sources: &Sources,
    node: NodeCapacity,
    field: &str,
) -> Result<Option<String>, EnvError> {
    if let Some(f) = &src.field_ref {
        return field_ref(pod, &f.field_path, addrs).map(Some).ok_or_else(|| {
            invalid(
                format!("{field}.valueFrom.fieldRef.fieldPath"),
                format!("unsupported field {:?}", f.field_path),
            )
        });
    }
    if let Some(r) = &src.resource_field_ref {
        return resource_ref(c, &r.resource, r.divisor.as_ref().map(|d| d.0.as_str()), node)
            .map(Some)
            .map_err(|m| invalid(format!("{field}.valueFrom.resourceFieldRef"), m));
    }
    let (data, key, optional, what) = if let Some(r) = &src.config_map_key_ref {
        (
            sources.config_maps.get(&r.name),
            &r.key,
            r.optional == Some(true),
            format!("configmap {:?}", r.name),
        )
    } else if let Some(r) = &src.secret_key_ref {
        (
            sources.secrets.get(&r.name),
            &r.key,
            r.optional == Some(true),
            format!("secret {:?}", r.name),
        )
    } else {
        return Err(invalid(
            format!("{field}.valueFrom"),
            "no source the process runtime supports",
        ));
    };
    match data.map(|d| d.get(key)) {
        Some(Some(v)) => Ok(Some(v.clone())),
        _ if optional => Ok(None),
        Some(None) => Err(invalid(
            format!("{field}.valueFrom"),
            format!("couldn't find key {key} in {what}"),
        )),
        None => Err(invalid(format!("{field}.valueFrom"), format!("{what} not found"))),
    }
}

/// The downward API fields the kubelet allows in environment variables.
fn field_ref(pod: &Pod, path: &str, addrs: &Addresses) -> Option<String> {
    let m = &pod.metadata;
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.and_then(|l| l.get(key)).cloned().unwrap_or_default())
    };
    Some(match path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "spec.nodeName" => addrs.node_name.clone(),
        "spec.serviceAccountName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => addrs.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => addrs.host_ip.clone(),
        p if p.starts_with("metadata.labels['") => return keyed("metadata.labels['", m.labels.as_ref()),
        p if p.starts_with("metadata.annotations['") => {
            return keyed("metadata.annotations['", m.annotations.as_ref());
        }
        _ => return None,
    })
}

/// `limits.cpu` etc. divided by `divisor`, rounded up; an unset limit reads the node's capacity.
fn resource_ref(
    c: &Container,
    resource: &str,
    divisor: Option<&str>,
    node: NodeCapacity,
) -> Result<String, String> {
    let (kind, name) = resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported resource {resource:?}"))?;
    let res = c.resources.as_ref();
    let set = match kind {
        "limits" => res.and_then(|r| r.limits.as_ref()),
        "requests" => res.and_then(|r| r.requests.as_ref()),
        _ => return Err(format!("unsupported resource {resource:?}")),
    }
    .and_then(|m| m.get(name));
    let value = match set {
        Some(q) => Quantity::parse(&q.0).map_err(|e| format!("{resource}: {e}"))?,
        None => match name {
            "cpu" => Quantity::from_value(i64::from(node.cpu_cores), crate::api::quantity::Format::DecimalSi),
            "memory" | "ephemeral-storage" => Quantity::from_value(
                i64::try_from(node.memory_bytes).unwrap_or(i64::MAX),
                crate::api::quantity::Format::DecimalSi,
            ),
            _ => return Err(format!("unsupported resource {resource:?}")),
        },
    };
    let divisor = match divisor {
        Some(d) => Quantity::parse(d).map_err(|e| format!("divisor: {e}"))?,
        None => Quantity::from_value(1, crate::api::quantity::Format::DecimalSi),
    };
    if divisor.nanos() <= 0 {
        return Err("divisor: must be greater than zero".into());
    }
    let (n, d) = (value.nanos(), divisor.nanos());
    // Rounded up, as the kubelet's ExtractContainerResourceValue does for cpu and memory.
    let q = n / d + i128::from(n % d > 0);
    Ok(q.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn expansion_follows_kubernetes() {
        // Cases from kubernetes third_party/forked/golang/expansion/expand_test.go (TestMapReference).
        let get = |n: &str| match n {
            "VAR_A" => Some("A".to_string()),
            "VAR_B" => Some("B".to_string()),
            "VAR_EMPTY" => Some(String::new()),
            _ => None,
        };
        for (input, want) in [
            ("$(VAR_A)", "A"),
            ("___$(VAR_B)___", "___B___"),
            ("$(VAR_A)-$(VAR_B)", "A-B"),
            ("$(VAR_EMPTY)", ""),
            ("$(VAR_DNE)", "$(VAR_DNE)"),
            ("$$(VAR_A)", "$(VAR_A)"),
            ("$$$(VAR_A)", "$A"),
            ("$(VAR_A", "$(VAR_A"),
            ("$VAR_A", "$VAR_A"),
            ("f000-$$VAR_A", "f000-$VAR_A"),
            ("$", "$"),
            (
                "ulimit -n 65536; ray start --head",
                "ulimit -n 65536; ray start --head",
            ),
        ] {
            assert_eq!(expand(input, &get), want, "{input}");
        }
    }

    #[test]
    fn env_as_kuberay_pods_carry_it() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "rc-head-x", "namespace": "ns", "uid": "u1", "labels": {"ray.io/cluster": "rc"}},
            "spec": {"serviceAccountName": "sa", "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                "resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}},
                "args": ["ray start --head --node-ip-address=$(MY_POD_IP) --x=$(RAY_CLUSTER_NAME)"],
                "env": [
                    {"name": "MY_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "RAY_CLUSTER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}},
                    {"name": "RAY_ADDRESS", "value": "$(MY_POD_IP):6379"},
                    {"name": "LATER", "value": "$(NOT_YET)"},
                    {"name": "NOT_YET", "value": "x"},
                    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                    {"name": "REQ_MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
                    {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
                    {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": true}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
                ]}]}
        }))
        .unwrap();
        let addrs = Addresses {
            pod_ip: "10.244.130.2".into(),
            host_ip: "10.244.130.1".into(),
            node_name: "n".into(),
        };
        let mut sources = Sources::default();
        sources
            .config_maps
            .insert("cm".into(), [("k".to_string(), "v".to_string())].into());
        let node = NodeCapacity {
            cpu_cores: 2,
            memory_bytes: 1 << 30,
        };
        let env = resolve(
            &pod,
            0,
            &words(&[("PATH", "/venv/bin:/usr/bin")]),
            &addrs,
            &sources,
            node,
        )
        .unwrap();
        let get = |k: &str| lookup(&env, k);
        assert_eq!(get("PATH").as_deref(), Some("/venv/bin:/usr/bin"));
        assert_eq!(get("MY_POD_IP").as_deref(), Some("10.244.130.2"));
        assert_eq!(get("RAY_ADDRESS").as_deref(), Some("10.244.130.2:6379"));
        assert_eq!(
            get("LATER").as_deref(),
            Some("$(NOT_YET)"),
            "only earlier variables expand"
        );
        assert_eq!(get("CPU").as_deref(), Some("2"), "1500m rounds up");
        assert_eq!(get("MEM_MI").as_deref(), Some("2048"));
        assert_eq!(
            get("REQ_MEM").as_deref(),
            Some("1073741824"),
            "unset: the node's capacity"
        );
        assert_eq!(get("FROM_CM").as_deref(), Some("v"));
        assert_eq!(get("OPT"), None);
        assert_eq!(get("NS").as_deref(), Some("ns"));
        let c = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            command_line(c, &env),
            vec!["ray start --head --node-ip-address=10.244.130.2 --x=rc".to_string()]
        );

        let missing = resolve(&pod, 0, &[], &addrs, &Sources::default(), node).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "spec.containers[0].env[8].valueFrom: configmap \"cm\" not found"
        );
        let mut bad = pod.clone();
        bad.spec.as_mut().unwrap().containers[0].env.as_mut().unwrap()[0]
            .value_from
            .as_mut()
            .unwrap()
            .field_ref
            .as_mut()
            .unwrap()
            .field_path = "spec.x".into();
        let err = resolve(&bad, 0, &[], &addrs, &sources, node).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: unsupported field \"spec.x\""
        );
        assert_eq!(
            referenced(c),
            vec![(false, "cm".to_string()), (true, "nope".to_string())]
        );
    }
}
