//! The `Priority` admission plugin (kube-apiserver `plugin/pkg/admission/priority`): a new pod's
//! `priority` and `preemptionPolicy` come from its PriorityClass, or from the global default class,
//! or are 0 and `PreemptLowerPriority`; a pod that names no existing class, or writes a priority or
//! policy of its own that differs, is refused with 403. An update keeps what the create set.

use serde_json::{Map, Value, json};

use super::error::ApiError;

/// The classes kube-apiserver makes at start-up (`scheduling.SystemPriorityClasses`), found by name
/// even where the store holds no object for them.
const SYSTEM_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

const PREEMPT_LOWER: &str = "PreemptLowerPriority";

/// A class as the plugin reads it: value and preemption policy.
fn class_of(pc: &Value) -> (i64, Option<String>) {
    (
        pc.get("value").and_then(Value::as_i64).unwrap_or(0),
        pc.get("preemptionPolicy")
            .and_then(Value::as_str)
            .map(String::from),
    )
}

/// Admits the pod `obj` at create. `class` finds a PriorityClass by name; `classes` are all of them
/// (for the global default: the one of lowest value, should a race have made two, as the plugin
/// picks).
pub fn on_create<'a>(
    obj: &mut Value,
    class: impl Fn(&str) -> Option<&'a Value>,
    classes: impl Iterator<Item = &'a Value>,
) -> Result<(), ApiError> {
    let pod_name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let forbidden = |why: String| {
        ApiError::new(403, "Forbidden", format!("pods {pod_name:?} is forbidden: {why}"))
            .details(&pod_name, "", "pods")
    };
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let named = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (priority, policy) = if named.is_empty() {
        let default = classes
            .filter(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|pc| pc.get("value").and_then(Value::as_i64).unwrap_or(0));
        match default {
            Some(pc) => {
                if let Some(n) = pc.pointer("/metadata/name").and_then(Value::as_str) {
                    spec.insert("priorityClassName".into(), json!(n));
                }
                class_of(pc)
            }
            None => (0, Some(PREEMPT_LOWER.to_string())),
        }
    } else if let Some(pc) = class(&named) {
        class_of(pc)
    } else if let Some((_, v)) = SYSTEM_CLASSES.iter().find(|(n, _)| *n == named) {
        (*v, Some(PREEMPT_LOWER.to_string()))
    } else {
        return Err(forbidden(format!("no PriorityClass with name {named} was found")));
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(forbidden(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority \
             admission controller computed {priority} from the given PriorityClass name"
        )));
    }
    spec.insert("priority".into(), json!(priority));
    if let Some(policy) = policy {
        if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str)
            && given != policy
        {
            return Err(forbidden(format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; \
                 priority admission controller computed {policy} from the given PriorityClass name"
            )));
        }
        spec.insert("preemptionPolicy".into(), json!(policy));
    }
    Ok(())
}

/// At update: what the create set stays when the new pod leaves it out (validation then refuses any
/// other change to the two fields).
pub fn on_update(obj: &mut Value, old: &Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let old_spec: Option<&Map<String, Value>> = old.get("spec").and_then(Value::as_object);
    for field in ["priority", "preemptionPolicy"] {
        if !spec.contains_key(field)
            && let Some(v) = old_spec.and_then(|s| s.get(field))
        {
            spec.insert(field.into(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn pc(name: &str, value: i64, global: bool, policy: Option<&str>) -> Value {
        let mut v = json!({"metadata": {"name": name}, "value": value, "globalDefault": global});
        if let Some(p) = policy {
            v["preemptionPolicy"] = json!(p);
        }
        v
    }

    fn admit(mut obj: Value, classes: &[Value]) -> Result<Value, String> {
        let find = |n: &str| classes.iter().find(|c| c["metadata"]["name"] == n);
        on_create(&mut obj, find, classes.iter()).map_err(|e| e.message)?;
        Ok(obj)
    }

    /// kube-apiserver `plugin/pkg/admission/priority/admission_test.go` (TestPodAdmission): the
    /// priority of a pod by its class, by the global default, by the system classes, and the
    /// refusals.
    #[test]
    fn a_pods_priority_comes_from_its_class() {
        let classes = [
            pc("default1", 1000, true, None),
            pc("nopreempt", 2000, false, Some("Never")),
        ];
        let p = admit(pod(json!({"priorityClassName": "nopreempt"})), &classes).unwrap();
        assert_eq!(
            (
                p["spec"]["priority"].clone(),
                p["spec"]["preemptionPolicy"].clone()
            ),
            (json!(2000), json!("Never"))
        );
        let p = admit(pod(json!({})), &classes).unwrap();
        assert_eq!(p["spec"]["priority"], 1000, "the global default");
        assert_eq!(p["spec"]["priorityClassName"], "default1", "named after it");
        let p = admit(pod(json!({})), &[]).unwrap();
        assert_eq!(
            (
                p["spec"]["priority"].clone(),
                p["spec"]["preemptionPolicy"].clone()
            ),
            (json!(0), json!("PreemptLowerPriority"))
        );
        let p = admit(pod(json!({"priorityClassName": "system-node-critical"})), &[]).unwrap();
        assert_eq!(p["spec"]["priority"], 2_000_001_000);
        assert_eq!(
            admit(pod(json!({"priorityClassName": "missing"})), &classes).unwrap_err(),
            r#"pods "p" is forbidden: no PriorityClass with name missing was found"#
        );
        assert_eq!(
            admit(pod(json!({"priority": 5})), &[]).unwrap_err(),
            r#"pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"#
        );
        assert!(
            admit(pod(json!({"priority": 0})), &[]).is_ok(),
            "the value it would compute"
        );
        assert_eq!(
            admit(
                pod(json!({"priorityClassName": "nopreempt", "preemptionPolicy": "PreemptLowerPriority"})),
                &classes
            )
            .unwrap_err(),
            r#"pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"#
        );
    }

    #[test]
    fn an_update_keeps_what_the_create_set() {
        let old = pod(json!({"priority": 7, "preemptionPolicy": "Never"}));
        let mut new = pod(json!({}));
        on_update(&mut new, &old);
        assert_eq!(new["spec"], json!({"priority": 7, "preemptionPolicy": "Never"}));
    }
}
