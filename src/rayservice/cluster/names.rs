//! Object names KubeRay users and tools rely on (`<cluster>-head-svc`, `<rs>-serve-svc`, ...).

use crate::api::ray::RayClusterSpec;
use crate::api::ray::constants as c;

/// Pod name prefixes are cut to 50 characters so `-worker-` plus 5 random characters fit in 63.
const MAX_POD_PREFIX: usize = 50;

/// KubeRay's `PodName`: `<prefix>-<node type>` (lower-cased), with a trailing `-` when used as generateName.
pub fn pod_name(prefix: &str, node_type: &str, generate_name: bool) -> String {
    let prefix = truncate(prefix, MAX_POD_PREFIX);
    let mut out = format!("{prefix}-{node_type}").to_lowercase();
    if generate_name {
        out.push('-');
    }
    out
}

/// `generateName` (or the name, when deterministic) of the head Pod: `<cluster>-head-`.
pub fn head_pod_name(cluster: &str, deterministic: bool) -> String {
    pod_name(cluster, c::NODE_TYPE_HEAD, !deterministic)
}

/// `generateName` of a worker Pod: `<cluster>-<group>-worker-`.
pub fn worker_pod_generate_name(cluster: &str, group: &str) -> String {
    pod_name(&format!("{cluster}-{group}"), c::NODE_TYPE_WORKER, true)
}

/// Head Service of a RayCluster: `headService.metadata.name` if set, else `<cluster>-head-svc`.
pub fn head_service_name(cluster: &str, spec: &RayClusterSpec) -> String {
    spec.head_group_spec
        .head_service
        .as_ref()
        .and_then(|s| s.metadata.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{cluster}-{}", c::HEAD_SERVICE_SUFFIX))
}

/// `<owner>-head-svc`, the RayService-level head Service (owner-named, never user-overridden).
pub fn owner_head_service_name(owner: &str) -> String {
    format!("{owner}-{}", c::HEAD_SERVICE_SUFFIX)
}

/// `<name>-serve-svc`: the RayService serve Service, or a per-cluster one in incremental upgrades.
pub fn serve_service_name(name: &str) -> String {
    format!("{name}-{}", c::SERVE_SERVICE_SUFFIX)
}

/// Value of the `ray.io/serve` label on a RayService's serve Service: `<rs>-serve`.
pub fn serve_service_label(rayservice: &str) -> String {
    format!("{rayservice}-serve")
}

/// Headless Service for multi-host worker groups: `<cluster>-headless`.
pub fn headless_service_name(cluster: &str) -> String {
    format!("{cluster}-{}", c::HEADLESS_SERVICE_SUFFIX)
}

/// `<rs>-gateway` and `<rs>-httproute` for incremental upgrades.
pub fn gateway_name(rayservice: &str) -> String {
    format!("{rayservice}-{}", c::GATEWAY_SUFFIX)
}
pub fn httproute_name(rayservice: &str) -> String {
    format!("{rayservice}-{}", c::HTTPROUTE_SUFFIX)
}

/// A RayService's child cluster: `<rs>-<suffix>`; the caller supplies the 5 random characters so this stays pure.
pub fn child_cluster_name(rayservice: &str, random_suffix: &str) -> String {
    format!("{rayservice}-{random_suffix}")
}

/// `ray.io/identifier` value: `<cluster>-<node type>`, made a valid label value.
pub fn identifier(cluster: &str, node_type: &str) -> String {
    check_label(&format!("{cluster}-{node_type}"))
}

/// FQDN of the head Service that workers and drivers dial: `<head-svc>.<ns>.svc.<domain>`.
pub fn head_fqdn(cluster: &str, namespace: &str, spec: &RayClusterSpec, cluster_domain: &str) -> String {
    format!(
        "{}.{namespace}.svc.{cluster_domain}",
        head_service_name(cluster, spec)
    )
}

/// KubeRay's `CheckLabel`: keep the last 63 characters and do not start with punctuation.
pub fn check_label(s: &str) -> String {
    let s = keep_tail(s, 63);
    match s.chars().next() {
        Some(ch) if ch.is_ascii_punctuation() => format!("r{}", &s[ch.len_utf8()..]),
        _ => s.to_string(),
    }
}

/// KubeRay's `CheckName`: keep the last 50 characters and do not start with a digit.
pub fn check_name(s: &str) -> String {
    let s = keep_tail(s, 50);
    match s.chars().next() {
        Some(ch) if ch.is_ascii_digit() => format!("r{}", &s[1..]),
        _ => s.to_string(),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn keep_tail(s: &str, max: usize) -> &str {
    let n = s.chars().count();
    if n <= max {
        return s;
    }
    match s.char_indices().nth(n - max) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kuberay() {
        let spec = RayClusterSpec::default();
        assert_eq!(head_pod_name("rc", false), "rc-head-");
        assert_eq!(head_pod_name("rc", true), "rc-head");
        assert_eq!(
            worker_pod_generate_name("rc", "Small-Group"),
            "rc-small-group-worker-"
        );
        let long = "a".repeat(60);
        assert_eq!(
            worker_pod_generate_name(&long, "g"),
            format!("{}-worker-", "a".repeat(50))
        );
        assert_eq!(head_service_name("rc", &spec), "rc-head-svc");
        assert_eq!(serve_service_name("rs"), "rs-serve-svc");
        assert_eq!(headless_service_name("rc"), "rc-headless");
        assert_eq!(child_cluster_name("rs", "ab12c"), "rs-ab12c");
        assert_eq!(gateway_name("rs"), "rs-gateway");
        assert_eq!(httproute_name("rs"), "rs-httproute");
        assert_eq!(
            head_fqdn("rc", "ns", &spec, "cluster.local"),
            "rc-head-svc.ns.svc.cluster.local"
        );
        assert_eq!(identifier("rc", "head"), "rc-head");
    }

    #[test]
    fn custom_head_service_name_wins() {
        let mut spec = RayClusterSpec::default();
        let mut svc = crate::api::ray::raycluster::EmbeddedService::default();
        svc.metadata.name = Some("custom".into());
        spec.head_group_spec.head_service = Some(svc);
        assert_eq!(head_service_name("rc", &spec), "custom");
        assert_eq!(owner_head_service_name("rs"), "rs-head-svc");
    }

    #[test]
    fn label_and_name_repair() {
        assert_eq!(
            check_label(&format!("-{}", "x".repeat(10))),
            format!("r{}", "x".repeat(10))
        );
        assert_eq!(check_label(&"y".repeat(70)).len(), 63);
        assert_eq!(check_name("1abc"), "rabc");
        assert_eq!(check_name(&"z".repeat(55)).len(), 50);
    }
}
