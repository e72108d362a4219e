//! Pruning of unknown fields, as kube-apiserver does it on every write: what an object's schema does
//! not declare is dropped before the object is stored (field validation, `field_validation.rs`, has
//! already refused it under `Strict` or warned about it under `Warn`).
//!
//! - A custom resource is pruned against its CRD's structural schema as apiextensions-apiserver's
//!   `pruning.PruneWithOptions` does (`pkg/apiserver/schema/pruning/algorithm.go`): a key the node's
//!   `properties` do not name goes unless the node has `additionalProperties` or
//!   `x-kubernetes-preserve-unknown-fields`, and an object whose schema names nothing at all loses
//!   every key. `apiVersion`, `kind` and `metadata` stay at the root and in an
//!   `x-kubernetes-embedded-resource`.
//! - A built-in kind loses what its Go type would not decode (`builtin_schemas.rs`, k8s-openapi's
//!   types). A node of that schema that names no field (a `RawExtension`, a `FieldsV1`) keeps what it
//!   holds, as the Go types' free-form values do.
//! - Every `metadata` (the root's and an embedded resource's) loses what ObjectMeta does not declare,
//!   as its decoding into `metav1.ObjectMeta` does (`schema/objectmeta.Coerce`).
//!
//! Nesting is bounded by the server's depth limit on every body (`limits.rs`).

use serde_json::Value;

use super::field_validation::Schema;
use super::registry::ResourceInfo;

/// Drops from `obj` (an object of `info`'s kind, in its stored form) every field its schema does not
/// declare, and in a custom resource every null its schema neither allows (`nullable`) nor defaults,
/// as apiextensions-apiserver's decoding does (`PruneNonNullableNullsWithoutDefaults`).
pub fn prune(info: &ResourceInfo, obj: &mut Value) {
    prune_with(info, obj, true);
}

/// As [`prune`], keeping nulls: an applied configuration is not decoded that way, and its nulls
/// are its own to interpret.
pub fn prune_applied(info: &ResourceInfo, obj: &mut Value) {
    prune_with(info, obj, false);
}

fn prune_with(info: &ResourceInfo, obj: &mut Value, nulls: bool) {
    let crd = info.schema.as_ref().map(super::registry::CrdSchema::get);
    let schema = crd.or_else(|| {
        // Events of `events.k8s.io` are stored in core v1's form (`events.rs`).
        let key = info.key();
        super::builtin_schemas::builtin(&key.group, &info.version, &info.kind)
            .or_else(|| super::builtin_schemas::builtin(&info.group, &info.version, &info.kind))
    });
    let rules = if crd.is_some() {
        Rules::Structural { nulls }
    } else {
        Rules::GoType
    };
    match schema {
        Some(s) => walk(obj, Schema::root(s), rules, true),
        None => meta(obj),
    }
}

/// How a node that names no field treats the keys under it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// A CRD's structural schema: such a node keeps nothing; with `nulls`, a null the field's schema
    /// does not allow goes too.
    Structural { nulls: bool },
    /// A Go type's schema: such a node is a free-form value and keeps everything.
    GoType,
}

/// `metadata` of `obj`, if an object, pruned against ObjectMeta.
fn meta(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata") {
        let s = super::builtin_schemas::object_meta();
        walk(m, Schema::root(s), Rules::GoType, false);
    }
}

fn walk(value: &mut Value, schema: Schema, rules: Rules, resource: bool) {
    let schema = schema.resolved();
    let resource = resource || schema.flag("x-kubernetes-embedded-resource");
    if resource {
        meta(value);
    }
    if schema.flag("x-kubernetes-preserve-unknown-fields") {
        // Unknown keys stay; the declared ones are still pruned inside.
        if let Value::Object(map) = value
            && let Some(props) = schema.node.get("properties").and_then(Value::as_object)
        {
            for (k, v) in map.iter_mut() {
                if let Some(s) = props.get(k) {
                    walk(v, schema.at(s), rules, false);
                }
            }
        }
        return;
    }
    match value {
        Value::Object(map) => {
            let props = schema.node.get("properties").and_then(Value::as_object);
            let additional = schema.node.get("additionalProperties");
            if rules == Rules::GoType && props.is_none() && !additional.is_some_and(Value::is_object) {
                return;
            }
            map.retain(|k, v| {
                if resource && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    return true;
                }
                let declared = props
                    .and_then(|p| p.get(k))
                    .or(additional.filter(|a| a.is_object()));
                if v.is_null()
                    && rules == (Rules::Structural { nulls: true })
                    && declared.is_some_and(|s| {
                        let s = schema.at(s).resolved();
                        !s.flag("nullable") && s.node.get("default").is_none()
                    })
                {
                    return false;
                }
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => {
                        walk(v, schema.at(s), rules, false);
                        true
                    }
                    (None, Some(s)) if s.is_object() => {
                        walk(v, schema.at(s), rules, false);
                        true
                    }
                    (None, Some(Value::Bool(true))) => true,
                    (None, _) => false,
                }
            });
        }
        Value::Array(items) => {
            if let Some(s) = schema.node.get("items") {
                for v in items {
                    walk(v, schema.at(s), rules, false);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> ResourceInfo {
        ResourceInfo {
            group: "ray.io".into(),
            version: "v1".into(),
            kind: "RayCluster".into(),
            plural: "rayclusters".into(),
            singular: "raycluster".into(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            has_status: true,
            is_crd: true,
            printer_columns: vec![],
            schema: Some(crate::embedded::CrdSchema::ready(schema)),
        }
    }

    fn builtin(plural: &str) -> ResourceInfo {
        super::super::registry::builtins()
            .into_iter()
            .find(|i| i.plural == plural && i.group.is_empty())
            .unwrap()
    }

    /// apiextensions-apiserver's `prunenulls_test.go`: a null goes unless its schema is `nullable` or
    /// has a `default`; a key the schema does not name is not touched by this rule, and an applied
    /// configuration keeps its nulls.
    #[test]
    fn a_custom_resource_loses_the_nulls_its_schema_does_not_allow() {
        let info = crd(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "template": {"type": "object", "properties": {
                    "metadata": {"type": "object"},
                    "maybe": {"type": "string", "nullable": true},
                    "count": {"type": "integer", "default": 1}
                }},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }}));
        let written = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "a"},
            "spec": {"template": {"metadata": null, "maybe": null, "count": null},
                     "labels": {"x": null}, "items": [{"a": null}], "free": {"x": null}}});
        let mut obj = written.clone();
        prune(&info, &mut obj);
        assert_eq!(
            obj["spec"],
            json!({"template": {"maybe": null, "count": null}, "labels": {}, "items": [{}], "free": {"x": null}})
        );
        let mut applied = written.clone();
        prune_applied(&info, &mut applied);
        assert_eq!(applied, written);
    }

    /// apiextensions-apiserver's pruning tests (`pkg/apiserver/schema/pruning/algorithm_test.go`):
    /// unknown keys go, `additionalProperties` and `x-kubernetes-preserve-unknown-fields` keep theirs,
    /// an object schema without properties keeps nothing, embedded resources keep their type meta.
    #[test]
    fn a_custom_resource_is_pruned_against_its_structural_schema() {
        let info = crd(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "suspend": {"type": "boolean"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "groups": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "empty": {"type": "object"},
                "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }}));
        let mut obj = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "a", "lables": {"x": "y"}, "labels": {"x": "y"}},
            "spec": {"suspend": true, "bogus": 1, "labels": {"any": "x"},
                     "groups": [{"name": "g", "nmae": "h"}],
                     "free": {"deep": {"x": 1}, "known": {"a": "1", "b": "2"}},
                     "empty": {"x": 1},
                     "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "nmae": "q"},
                                  "spec": {"x": "1", "y": "2"}, "other": 1}},
            "status": {"ready": true, "extra": 1}, "extra": {}});
        prune(&info, &mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "a", "labels": {"x": "y"}},
                "spec": {"suspend": true, "labels": {"any": "x"}, "groups": [{"name": "g"}],
                         "free": {"deep": {"x": 1}, "known": {"a": "1"}},
                         "empty": {},
                         "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                      "spec": {"x": "1"}}},
                "status": {"ready": true}})
        );
    }

    /// A built-in kind drops what its Go type does not declare, as decoding into it does
    /// (test/integration/apiserver/field_validation_test.go, the `Ignore` and `Warn` cases).
    #[test]
    fn a_built_in_kind_keeps_only_its_types_fields() {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "lables": {}},
            "data": {"a": "1"}, "dta": {"b": "2"}});
        prune(&builtin("configmaps"), &mut cm);
        assert_eq!(
            cm,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
        );
        let mut pod = json!({"metadata": {"name": "p", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostnet": 1}],
                     "resources": {"requests": {"cpu": "1"}}}], "bogus": true},
            "status": {"phase": "Running", "nope": 1}});
        prune(&builtin("pods"), &mut pod);
        assert_eq!(
            pod,
            json!({"metadata": {"name": "p", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
                "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                         "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running"}})
        );
    }

    /// `events.k8s.io` Events are stored in core v1's form, and pruned as such.
    #[test]
    fn an_events_k8s_io_event_is_pruned_in_its_stored_form() {
        let info = super::super::registry::builtins()
            .into_iter()
            .find(|i| i.group == "events.k8s.io")
            .unwrap();
        let mut e =
            json!({"metadata": {"name": "e"}, "involvedObject": {"name": "x"}, "message": "m", "bogus": 1});
        prune(&info, &mut e);
        assert_eq!(
            e,
            json!({"metadata": {"name": "e"}, "involvedObject": {"name": "x"}, "message": "m"})
        );
    }
}
