//! What kube-apiserver's Service registry allocates and keeps (`pkg/registry/core/service/storage/
//! alloc.go`, `strategy.go`): a Service's IP families, its ClusterIP from the service CIDR, and its
//! node ports from the node port range, on create; on update, the allocated values a client left out
//! are kept (`patchAllocatedValues`) and a changed `clusterIP` replaces `clusterIPs` when those were
//! not changed (`NormalizeClusterIPs`), so that validation sees the change.
//!
//! The embedded server's service CIDR is kubeadm's default, 10.96.0.0/12 (10.96.0.1 is left to the
//! `kubernetes` Service of a real cluster), a single-stack IPv4 cluster; node ports come from
//! 30000-32767. An address a client asks for is taken as given. With the process runtime, its
//! Service proxy hands out the addresses (it routes them on the host, `sim/proxy`): the server then
//! allocates none and the proxy records its own.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::error::ApiError;
use crate::api::validation::FieldError;

/// The service CIDR: 10.96.0.0/12.
const CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const CIDR_SIZE: u32 = 1 << 20;
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// kube-apiserver's default `--service-node-port-range`.
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The addresses and node ports the stored Services hold.
#[derive(Default)]
pub struct Taken {
    pub ips: HashSet<String>,
    pub node_ports: HashSet<i64>,
}

impl Taken {
    pub fn of<'a>(services: impl Iterator<Item = &'a Value>) -> Taken {
        let mut t = Taken::default();
        for s in services {
            let spec = s.get("spec").unwrap_or(&Value::Null);
            for ip in list(spec, "clusterIPs").iter().filter_map(Value::as_str) {
                t.ips.insert(ip.to_string());
            }
            if let Some(ip) = spec.get("clusterIP").and_then(Value::as_str) {
                t.ips.insert(ip.to_string());
            }
            for p in list(spec, "ports") {
                if let Some(n) = p.get("nodePort").and_then(Value::as_i64) {
                    t.node_ports.insert(n);
                }
            }
        }
        t
    }
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn str_at<'a>(v: &'a Map<String, Value>, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("spec").and_then(Value::as_object_mut)
}

fn needs_cluster_ip(spec: &Map<String, Value>) -> bool {
    matches!(
        str_at(spec, "type"),
        "" | "ClusterIP" | "NodePort" | "LoadBalancer"
    )
}

fn needs_node_ports(spec: &Map<String, Value>) -> bool {
    match str_at(spec, "type") {
        "NodePort" => true,
        "LoadBalancer" => spec.get("allocateLoadBalancerNodePorts") != Some(&Value::Bool(false)),
        _ => false,
    }
}

/// A number from the object's uid, where the search for a free value starts (kube-apiserver picks at
/// random; the uid is random).
fn seed(obj: &Value) -> u32 {
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    uid.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

/// A create: IP families, the ClusterIP (unless `pick_ip` is off: the process runtime's proxy
/// allocates) and node ports. A node port asked for must be in the range and free.
pub fn on_create(obj: &mut Value, taken: &Taken, pick_ip: bool) -> Result<(), Vec<FieldError>> {
    let start = seed(obj);
    let Some(spec) = spec_mut(obj) else {
        return Ok(());
    };
    if str_at(spec, "type") == "ExternalName" {
        spec.remove("ipFamilies");
        spec.remove("ipFamilyPolicy");
        return Ok(());
    }
    let cluster_ip = str_at(spec, "clusterIP").to_string();
    if !cluster_ip.is_empty() && list_of(spec, "clusterIPs").is_empty() {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    families(spec);
    if pick_ip && needs_cluster_ip(spec) && cluster_ip.is_empty() && list_of(spec, "clusterIPs").is_empty() {
        let ip = (0..CIDR_SIZE)
            .map(|i| CIDR_BASE + (start.wrapping_add(i) % CIDR_SIZE))
            // The network address, the `kubernetes` Service's and the broadcast address stay free.
            .filter(|a| ![CIDR_BASE, CIDR_BASE + 1, CIDR_BASE + CIDR_SIZE - 1].contains(a))
            .map(|a| Ipv4Addr::from(a).to_string())
            .take(taken.ips.len() + 4)
            .find(|a| !taken.ips.contains(a));
        let Some(ip) = ip else {
            return Ok(());
        };
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    node_ports(spec, None, taken, start)
}

fn list_of<'a>(spec: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    spec.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `initIPFamilyFields` on a single-stack IPv4 cluster: a headless Service without a selector may
/// have both families and requires them; any other Service is `SingleStack` `IPv4` unless it says.
fn families(spec: &mut Map<String, Value>) {
    let headless = str_at(spec, "clusterIP") == "None";
    let selector = spec
        .get("selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty());
    let policy_set = !str_at(spec, "ipFamilyPolicy").is_empty();
    if headless && !selector {
        if !policy_set {
            let policy = if list_of(spec, "ipFamilies").len() == 1 {
                "SingleStack"
            } else {
                "RequireDualStack"
            };
            spec.insert("ipFamilyPolicy".into(), json!(policy));
        }
        if list_of(spec, "ipFamilies").is_empty() {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
        if list_of(spec, "ipFamilies").len() < 2 && str_at(spec, "ipFamilyPolicy") != "SingleStack" {
            spec.insert("ipFamilies".into(), json!(["IPv4", "IPv6"]));
        }
        return;
    }
    if !policy_set {
        spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
    }
    if list_of(spec, "ipFamilies").is_empty() {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
}

/// Node ports for the ports without one, and the checks of those asked for. `old`: the ports the
/// Service held before an update, whose node ports are its own.
fn node_ports(
    spec: &mut Map<String, Value>,
    old: Option<&HashSet<i64>>,
    taken: &Taken,
    start: u32,
) -> Result<(), Vec<FieldError>> {
    if !needs_node_ports(spec) {
        return Ok(());
    }
    let mut errs = Vec::new();
    let mut used: HashSet<i64> = HashSet::new();
    let mine = |n: i64| old.is_some_and(|o| o.contains(&n));
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for (i, p) in ports.iter_mut().enumerate() {
        let Some(n) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) else {
            continue;
        };
        let path = format!("spec.ports[{i}].nodePort");
        if !NODE_PORTS.contains(&n) {
            errs.push(FieldError::invalid(
                &path,
                format!(
                    "{n}: provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORTS.start(),
                    NODE_PORTS.end()
                ),
            ));
        } else if (taken.node_ports.contains(&n) && !mine(n)) || !used.insert(n) {
            errs.push(FieldError::invalid(
                &path,
                format!("{n}: provided port is already allocated"),
            ));
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let span = (NODE_PORTS.end() - NODE_PORTS.start() + 1) as u32;
    for p in ports.iter_mut() {
        if p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0) {
            continue;
        }
        // Free: held by no other Service (this one's own count as free) and not given out just now.
        let free_port = |n: &i64| (!taken.node_ports.contains(n) || mine(*n)) && !used.contains(n);
        let free = (0..span)
            .map(|i| NODE_PORTS.start() + i64::from(start.wrapping_add(i) % span))
            .find(free_port);
        match free {
            Some(n) => {
                used.insert(n);
                p["nodePort"] = json!(n);
            }
            None => {
                return Err(vec![FieldError::invalid(
                    "spec.ports",
                    "failed to allocate a nodePort: range is full",
                )]);
            }
        }
    }
    Ok(())
}

/// An update of `old` into `new`: what the client left out of the allocated values is kept, a
/// changed `clusterIP` stands for `clusterIPs` when those were left as they were, and node ports
/// are allocated for ports that need one now.
pub fn on_update(old: &Value, new: &mut Value, taken: &Taken) -> Result<(), Vec<FieldError>> {
    let start = seed(new);
    let empty = Map::new();
    let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let Some(spec) = spec_mut(new) else {
        return Ok(());
    };
    if needs_cluster_ip(old_spec) && needs_cluster_ip(spec) {
        let old_ip = str_at(old_spec, "clusterIP");
        let changed = !str_at(spec, "clusterIP").is_empty() && str_at(spec, "clusterIP") != old_ip;
        if changed && list_of(spec, "clusterIPs") == list_of(old_spec, "clusterIPs") {
            let ip = str_at(spec, "clusterIP").to_string();
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        if str_at(spec, "clusterIP").is_empty() && !old_ip.is_empty() {
            spec.insert("clusterIP".into(), json!(old_ip));
        }
        if list_of(spec, "clusterIPs").is_empty() && !list_of(old_spec, "clusterIPs").is_empty() {
            spec.insert("clusterIPs".into(), json!(list_of(old_spec, "clusterIPs")));
        }
        for f in ["ipFamilies", "ipFamilyPolicy"] {
            if spec.get(f).is_none_or(Value::is_null)
                && let Some(v) = old_spec.get(f)
            {
                spec.insert(f.into(), v.clone());
            }
        }
    }
    let old_ports: HashSet<i64> = list_of(old_spec, "ports")
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .collect();
    if needs_node_ports(old_spec) && needs_node_ports(spec) {
        // By port name, as `patchAllocatedValues`: a node port still in use by another port stays there.
        let in_new: HashSet<i64> = list_of(spec, "ports")
            .iter()
            .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect();
        let by_name: Vec<(String, i64)> = list_of(old_spec, "ports")
            .iter()
            .filter_map(|p| {
                let n = p.get("nodePort").and_then(Value::as_i64)?;
                Some((p.get("name").and_then(Value::as_str).unwrap_or("").to_string(), n))
            })
            .collect();
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                if p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0) {
                    continue;
                }
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                if let Some((_, n)) = by_name.iter().find(|(k, _)| k == name)
                    && !in_new.contains(n)
                {
                    p["nodePort"] = json!(n);
                }
            }
        }
    }
    node_ports(spec, Some(&old_ports), taken, start)
}

/// A refusal of the allocator's, as kube-apiserver words it.
pub fn refused(name: &str, errs: &[FieldError]) -> ApiError {
    ApiError::invalid("Service", name, errs).details(name, "", "Service")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s", "uid": "u-1"}, "spec": spec})
    }

    /// What kube-apiserver v1.36.3 gave the differential suite's Services (`service valid`,
    /// `service headless`, `service ExternalName`, `service NodePort`).
    #[test]
    fn a_create_gets_families_an_address_and_node_ports() {
        let mut s = svc(json!({"type": "ClusterIP", "selector": {"app": "x"}, "ports": [{"port": 80}]}));
        on_create(&mut s, &Taken::default(), true).unwrap();
        let ip = s["spec"]["clusterIP"].as_str().unwrap().to_string();
        let a: Ipv4Addr = ip.parse().unwrap();
        assert_eq!(a.octets()[0], 10);
        assert!((96..112).contains(&a.octets()[1]));
        assert_eq!(s["spec"]["clusterIPs"], json!([ip]));
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(s["spec"]["ipFamilyPolicy"], json!("SingleStack"));
        assert!(s["spec"]["ports"][0].get("nodePort").is_none());

        let mut taken = Taken::of([&s].into_iter());
        let mut s2 = svc(json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
        on_create(&mut s2, &taken, true).unwrap();
        assert_ne!(
            s2["spec"]["clusterIP"], s["spec"]["clusterIP"],
            "the same seed, another address"
        );

        let mut h = svc(json!({"type": "ClusterIP", "clusterIP": "None", "selector": {"a": "b"}}));
        on_create(&mut h, &taken, true).unwrap();
        assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));
        assert_eq!(h["spec"]["ipFamilyPolicy"], json!("SingleStack"));
        let mut h = svc(json!({"type": "ClusterIP", "clusterIP": "None"}));
        on_create(&mut h, &taken, true).unwrap();
        assert_eq!(h["spec"]["ipFamilyPolicy"], json!("RequireDualStack"));
        assert_eq!(h["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));

        let mut e = svc(json!({"type": "ExternalName", "externalName": "example.com"}));
        on_create(&mut e, &taken, true).unwrap();
        assert_eq!(
            e["spec"],
            json!({"type": "ExternalName", "externalName": "example.com"})
        );

        let mut np =
            svc(json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 30081}]}));
        on_create(&mut np, &taken, true).unwrap();
        let n = np["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!(NODE_PORTS.contains(&n) && n != 30081);
        taken = Taken::of([&np].into_iter());
        let mut again = svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30081}]}));
        let errs = on_create(&mut again, &taken, true).unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "spec.ports[0].nodePort: Invalid value: 30081: provided port is already allocated"
        );
        let mut out = svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}));
        assert!(on_create(&mut out, &taken, true).is_err());

        // With the process runtime's proxy handing out addresses, none is picked here.
        let mut p = svc(json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
        on_create(&mut p, &Taken::default(), false).unwrap();
        assert!(p["spec"].get("clusterIP").is_none());
        assert_eq!(p["spec"]["ipFamilies"], json!(["IPv4"]));
    }

    /// `patchAllocatedValues` and `NormalizeClusterIPs`: a PUT without the allocated values keeps them;
    /// a changed `clusterIP` is a changed `clusterIPs`, which validation then refuses.
    #[test]
    fn an_update_keeps_what_was_allocated() {
        let mut old = svc(json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}]}));
        on_create(&mut old, &Taken::default(), true).unwrap();
        let taken = Taken::of([&old].into_iter());
        let mut new = svc(json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}]}));
        on_update(&old, &mut new, &taken).unwrap();
        assert_eq!(new["spec"], old["spec"]);
        let mut moved = old.clone();
        moved["spec"]["clusterIP"] = json!("10.0.0.99");
        on_update(&old, &mut moved, &taken).unwrap();
        assert_eq!(moved["spec"]["clusterIPs"], json!(["10.0.0.99"]));
    }
}
