//! `quotagate create resourceflavor`: kueuectl's generator
//! (kubernetes-sigs/kueue:cmd/kueuectl/app/create/create_resourceflavor.go) with its flags:
//! `--node-labels KEY=VALUE,...`, `--node-taints KEY[=VALUE]:EFFECT,...` and
//! `--tolerations KEY[=VALUE][:EFFECT]|:EFFECT,...`. Parsing is pure; the error names the flag and
//! the item, then says what is wrong as kueuectl says it.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Taint, Toleration};
use kube::api::{Api, PostParams};

use super::{CliError, DryRun};
use crate::api::kueue::{ResourceFlavor, ResourceFlavorSpec};
use crate::api::names::{is_label_key, is_label_value};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ResourceFlavorArgs {
    pub name: String,
    /// Labels of the nodes this flavor stands for, as KEY=VALUE[,KEY=VALUE].
    #[arg(long, value_delimiter = ',')]
    pub node_labels: Vec<String>,
    /// Taints those nodes have, as KEY[=VALUE]:EFFECT[,...].
    #[arg(long, value_delimiter = ',')]
    pub node_taints: Vec<String>,
    /// Tolerations added to pods admitted on this flavor, as KEY[=VALUE][:EFFECT] or :EFFECT [,...].
    #[arg(long, value_delimiter = ',')]
    pub tolerations: Vec<String>,
    #[arg(long, value_enum, default_value_t = DryRun::None)]
    pub dry_run: DryRun,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// kueuectl's splitSpecItem: `KEY[=VALUE][:EFFECT]`, at most one `:` and one `=`.
fn split_item(s: &str) -> Option<(&str, &str, &str)> {
    let (kv, effect) = match s.split_once(':') {
        Some((_, e)) if e.contains(':') => return None,
        Some((kv, e)) => (kv, e),
        None => (s, ""),
    };
    let (key, value) = match kv.split_once('=') {
        Some((_, v)) if v.contains('=') => return None,
        Some((k, v)) => (k, v),
        None => (kv, ""),
    };
    Some((key, value, effect))
}

fn effect(e: &str) -> Result<String, String> {
    if EFFECTS.contains(&e) {
        Ok(e.to_string())
    } else {
        Err(format!("invalid taint effect: {e}, unsupported taint effect"))
    }
}

/// The key and value rules both generators apply (a label key and a label value).
fn key_value(what: &str, item: &str, key: &str, value: &str, key_required: bool) -> Result<(), String> {
    if (key_required || !key.is_empty()) && !is_label_key(key) {
        return Err(format!(
            "invalid {what} spec: {item}, key {key:?} is not a qualified name (alphanumeric, '-', '_' or '.', starting and ending alphanumeric, optionally under a DNS prefix/)"
        ));
    }
    if !value.is_empty() && !is_label_value(value) {
        return Err(format!(
            "invalid {what} spec: {item}, value {value:?} is not a valid label value (at most 63 of alphanumeric, '-', '_' or '.', starting and ending alphanumeric)"
        ));
    }
    Ok(())
}

/// kueuectl's parseTaint: `KEY=VALUE:EFFECT` or `KEY:EFFECT`.
fn taint(item: &str) -> Result<Taint, String> {
    if item.is_empty() {
        return Err("invalid taint spec".into());
    }
    let (key, value, eff) = split_item(item).ok_or_else(|| format!("invalid taint spec: {item}"))?;
    if eff.is_empty() {
        return Err(format!("invalid taint spec: {item}"));
    }
    let eff = effect(eff)?;
    key_value("taint", item, key, value, true)?;
    Ok(Taint {
        key: key.into(),
        value: (!value.is_empty()).then(|| value.into()),
        effect: eff,
        time_added: None,
    })
}

/// kueuectl's parseTaints: every item parsed, no two with the same key and effect.
pub fn taints(items: &[String]) -> Result<Vec<Taint>, CliError> {
    let bad = |message: String| CliError::Flag {
        flag: "node-taints",
        message,
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for item in items {
        let t = taint(item).map_err(bad)?;
        if !seen.insert((t.key.clone(), t.effect.clone())) {
            return Err(bad(format!(
                "duplicated taints with the same key and effect: {item}"
            )));
        }
        out.push(t);
    }
    Ok(out)
}

/// kueuectl's parseToleration: `KEY=VALUE:EFFECT`, `KEY:EFFECT`, `KEY=VALUE`, `:EFFECT` or `KEY`;
/// `Exists` unless both key and value are given.
fn toleration(item: &str) -> Result<Toleration, String> {
    if item.is_empty() {
        return Err("invalid toleration spec".into());
    }
    let (key, value, eff) = split_item(item).ok_or_else(|| format!("invalid toleration spec: {item}"))?;
    if key.is_empty() && !value.is_empty() {
        return Err(format!("invalid toleration spec: {item}"));
    }
    let eff = if eff.is_empty() { None } else { Some(effect(eff)?) };
    key_value("toleration", item, key, value, false)?;
    let exists = key.is_empty() || value.is_empty();
    Ok(Toleration {
        key: (!key.is_empty()).then(|| key.into()),
        operator: Some(if exists { "Exists" } else { "Equal" }.into()),
        value: (!value.is_empty()).then(|| value.into()),
        effect: eff,
        toleration_seconds: None,
    })
}

pub fn tolerations(items: &[String]) -> Result<Vec<Toleration>, CliError> {
    items
        .iter()
        .map(|i| {
            toleration(i).map_err(|message| CliError::Flag {
                flag: "tolerations",
                message,
            })
        })
        .collect()
}

/// `--node-labels`: pflag's string-to-string, `KEY=VALUE` pairs (the API server checks the rest).
pub fn node_labels(items: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for item in items {
        let (k, v) = item.split_once('=').ok_or_else(|| CliError::Flag {
            flag: "node-labels",
            message: format!("{item} must be formatted as key=value"),
        })?;
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// The ResourceFlavor kueuectl would create: only the fields given are set.
pub fn resource_flavor(a: &ResourceFlavorArgs) -> Result<ResourceFlavor, CliError> {
    let labels = node_labels(&a.node_labels)?;
    let taints = taints(&a.node_taints)?;
    let tolerations = tolerations(&a.tolerations)?;
    let spec = ResourceFlavorSpec {
        node_labels: (!labels.is_empty()).then_some(labels),
        node_taints: (!taints.is_empty()).then_some(taints),
        tolerations: (!tolerations.is_empty()).then_some(tolerations),
        ..Default::default()
    };
    Ok(ResourceFlavor::new(&a.name, spec))
}

pub async fn create_resource_flavor(
    client: &kube::Client,
    a: &ResourceFlavorArgs,
) -> Result<String, CliError> {
    let rf = resource_flavor(a)?;
    if a.dry_run != DryRun::Client {
        let pp = PostParams {
            dry_run: a.dry_run == DryRun::Server,
            ..Default::default()
        };
        Api::<ResourceFlavor>::all(client.clone())
            .create(&pp, &rf)
            .await?;
    }
    Ok(format!(
        "resourceflavor.kueue.x-k8s.io/{} created{}\n",
        a.name,
        a.dry_run.suffix()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn err(r: Result<impl std::fmt::Debug, CliError>) -> String {
        r.unwrap_err().to_string()
    }

    // kueuectl's create_resourceflavor_test TestResourceFlavorOptions_parseTaints, case by case.
    #[test]
    fn taints_parse_as_kueuectl_parses_them() {
        let t = |v: &[&str]| err(taints(&s(v)));
        assert_eq!(t(&[""]), "invalid --node-taints: invalid taint spec");
        assert_eq!(
            t(&["NoSchedule"]),
            "invalid --node-taints: invalid taint spec: NoSchedule"
        );
        assert_eq!(
            t(&["key=value"]),
            "invalid --node-taints: invalid taint spec: key=value"
        );
        assert_eq!(
            t(&["key=value:NoSchedule:NoSchedule"]),
            "invalid --node-taints: invalid taint spec: key=value:NoSchedule:NoSchedule"
        );
        assert_eq!(
            t(&["key=value=value:NoSchedule"]),
            "invalid --node-taints: invalid taint spec: key=value=value:NoSchedule"
        );
        assert!(
            t(&["key=value:NoSchedule", "key=value:NoSchedule"])
                .starts_with("invalid --node-taints: duplicated taints with the same key and effect")
        );
        assert!(
            t(&["=value:NoSchedule"])
                .starts_with("invalid --node-taints: invalid taint spec: =value:NoSchedule, key \"\"")
        );
        assert!(
            t(&["@=value:NoSchedule"])
                .starts_with("invalid --node-taints: invalid taint spec: @=value:NoSchedule, key \"@\"")
        );
        assert!(
            t(&["key=@:NoSchedule"])
                .starts_with("invalid --node-taints: invalid taint spec: key=@:NoSchedule, value \"@\"")
        );
        assert_eq!(
            t(&["key=value:Invalid"]),
            "invalid --node-taints: invalid taint effect: Invalid, unsupported taint effect"
        );
        // "create resourceflavor with node taints": one key may carry several effects.
        let ok = taints(&s(&[
            "key1=value:NoSchedule",
            "key1=value:PreferNoSchedule",
            "key2:NoExecute",
        ]))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            json!([{"key": "key1", "value": "value", "effect": "NoSchedule"}, {"key": "key1", "value": "value", "effect": "PreferNoSchedule"}, {"key": "key2", "effect": "NoExecute"}])
        );
    }

    // kueuectl's create_resourceflavor_test TestResourceFlavorOptions_parseTolerations.
    #[test]
    fn tolerations_parse_as_kueuectl_parses_them() {
        let t = |v: &[&str]| err(tolerations(&s(v)));
        assert_eq!(t(&[""]), "invalid --tolerations: invalid toleration spec");
        assert_eq!(
            t(&["key=value:NoSchedule:NoSchedule"]),
            "invalid --tolerations: invalid toleration spec: key=value:NoSchedule:NoSchedule"
        );
        assert_eq!(
            t(&["key=value=value:NoSchedule"]),
            "invalid --tolerations: invalid toleration spec: key=value=value:NoSchedule"
        );
        assert_eq!(
            t(&["=value:NoSchedule"]),
            "invalid --tolerations: invalid toleration spec: =value:NoSchedule"
        );
        assert!(t(&["@=value:NoSchedule"]).contains("key \"@\""));
        assert!(t(&["key=@:NoSchedule"]).contains("value \"@\""));
        assert_eq!(
            t(&["key=value:Invalid"]),
            "invalid --tolerations: invalid taint effect: Invalid, unsupported taint effect"
        );
        assert_eq!(
            t(&[":Invalid"]),
            "invalid --tolerations: invalid taint effect: Invalid, unsupported taint effect"
        );
        let ok = tolerations(&s(&[
            "key",
            ":NoSchedule",
            "key=value",
            "key:NoSchedule",
            "key=value:NoSchedule",
        ]))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            json!([
                {"key": "key", "operator": "Exists"},
                {"operator": "Exists", "effect": "NoSchedule"},
                {"key": "key", "operator": "Equal", "value": "value"},
                {"key": "key", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "key", "operator": "Equal", "value": "value", "effect": "NoSchedule"}
            ])
        );
    }

    // kueuectl's create_resourceflavor_test TestResourceFlavorCmd "with node labels": only the given
    // fields are set, and a flag without `=` names the flag.
    #[test]
    fn the_flavor_carries_only_what_was_given() {
        let a = ResourceFlavorArgs {
            name: "rf".into(),
            node_labels: s(&["kubernetes.io/arch=arm64", "kubernetes.io/os=linux"]),
            ..Default::default()
        };
        let v = serde_json::to_value(resource_flavor(&a).unwrap()).unwrap();
        assert_eq!(
            v["spec"],
            json!({"nodeLabels": {"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux"}})
        );
        let bare = serde_json::to_value(
            resource_flavor(&ResourceFlavorArgs {
                name: "rf".into(),
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        assert!(bare.get("spec").is_none_or(|s| s == &json!({})), "{bare}");
        let e = err(resource_flavor(&ResourceFlavorArgs {
            name: "rf".into(),
            node_labels: s(&["arch"]),
            ..Default::default()
        }));
        assert_eq!(e, "invalid --node-labels: arch must be formatted as key=value");
    }
}
