//! Which jobs Kueue manages beyond the queue-labelled ones (Kueue's `Configuration`
//! `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`, and its `LocalQueueDefaulting`):
//! the rules its webhooks (`jobframework/defaults.go`: `ApplyDefaultLocalQueue`,
//! `WorkloadShouldBeSuspended`) and its reconciler apply, as pure functions over what is known of the
//! job's namespace.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use serde_json::Value;

use super::constants::{DEFAULT_LOCAL_QUEUE_NAME, label};

/// The label the API server puts on every Namespace, holding its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Namespaces Kueue's default selector leaves alone: the system's and the controller's own (Kueue's
/// `kueue-system`, and quotagate's).
pub const DEFAULT_UNMANAGED_NAMESPACES: [&str; 3] = ["kube-system", "kueue-system", "quotagate-system"];

/// The two switches of the configuration file, resolved (Kueue's defaults filled in).
#[derive(Clone, Debug, PartialEq)]
pub struct ManagedJobs {
    /// `manageJobsWithoutQueueName`: a job with no queue name is Kueue's too (its Workload has no
    /// queue, so it waits until the user names one).
    pub without_queue_name: bool,
    /// `managedJobsNamespaceSelector`: the namespaces where jobs without a queue name are managed
    /// (and where Pods are, and where the `default` LocalQueue is defaulted).
    pub namespace_selector: LabelSelector,
    /// Kueue v0.20's `WorkloadLevelWaitForPodsReady` gate on (with waitForPodsReady): the
    /// configured `maxTimeoutOnWorkload`, up to which a job's `kueue.x-k8s.io/wait-for-pods-ready`
    /// annotation may set its timeouts. `None`: the annotation is not judged (nor used).
    pub pods_ready_max_on_workload: Option<std::time::Duration>,
    /// Kueue v0.20's `WorkloadPriorityClassDefaulting` gate (on by default): a job naming no
    /// WorkloadPriorityClass takes the one named `default`, when it exists.
    pub default_workload_priority_class: bool,
    /// Kueue v0.20's `PodIntegrationCountSucceededPodsAsReady` gate (beta, on by default, #15734):
    /// a Succeeded pod of a pod group that does not serve counts as ready.
    pub count_succeeded_pods_as_ready: bool,
    /// Kueue v0.20's `WaitForPodsReadyMaxNotReady` gate (alpha, off by default, #16059): a pod
    /// group's `kueue.x-k8s.io/pod-group-max-not-ready-count` is honoured.
    pub pod_group_max_not_ready: bool,
}

impl Default for ManagedJobs {
    fn default() -> Self {
        ManagedJobs {
            without_queue_name: false,
            namespace_selector: default_selector(None),
            pods_ready_max_on_workload: None,
            default_workload_priority_class: true,
            count_succeeded_pods_as_ready: true,
            pod_group_max_not_ready: false,
        }
    }
}

/// Kueue's default (`apis/config/v1beta2/defaults.go`): every namespace but `kube-system` and the
/// controller's, by the name label.
pub fn default_selector(controller_namespace: Option<&str>) -> LabelSelector {
    let mut values: Vec<String> = DEFAULT_UNMANAGED_NAMESPACES
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(ns) = controller_namespace.filter(|n| !values.iter().any(|v| v == n)) {
        values.push(ns.to_string());
    }
    LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.to_string(),
            operator: "NotIn".to_string(),
            values: Some(values),
        }]),
    }
}

/// Reads a `managedJobsNamespaceSelector` as written, or says what is wrong with it (the path is
/// relative to the selector).
pub fn parse_selector(v: &Value) -> Result<LabelSelector, (String, String)> {
    let sel: LabelSelector = serde_json::from_value(v.clone()).map_err(|e| (String::new(), e.to_string()))?;
    for (i, r) in sel.match_expressions.iter().flatten().enumerate() {
        let path = format!("matchExpressions[{i}]");
        let n = r.values.as_ref().map_or(0, Vec::len);
        match r.operator.as_str() {
            "In" | "NotIn" if n == 0 => {
                return Err((
                    format!("{path}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'".into(),
                ));
            }
            "Exists" | "DoesNotExist" if n > 0 => {
                return Err((
                    format!("{path}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Err((
                    format!("{path}.operator"),
                    format!("not a valid selector operator: {other:?}"),
                ));
            }
        }
        if r.key.is_empty() {
            return Err((format!("{path}.key"), "must not be empty".into()));
        }
    }
    Ok(sel)
}

/// A label selector applied to a label set (operators are checked by [`parse_selector`]; one it
/// does not know matches nothing).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    by_labels
        && sel.match_expressions.iter().flatten().all(|r| {
            let values = r.values.as_deref().unwrap_or_default();
            let got = labels.get(&r.key);
            match r.operator.as_str() {
                "In" => got.is_some_and(|v| values.contains(v)),
                "NotIn" => got.is_none_or(|v| !values.contains(v)),
                "Exists" => got.is_some(),
                "DoesNotExist" => got.is_none(),
                _ => false,
            }
        })
}

/// What admission knows of the namespace a job is created in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobNamespace {
    /// The Namespace's labels (the name label is added by [`ManagedJobs::namespace_matches`], as the
    /// API server always sets it).
    pub labels: BTreeMap<String, String>,
    /// A LocalQueue named `default` exists there.
    pub default_queue: bool,
}

impl ManagedJobs {
    /// Whether `managedJobsNamespaceSelector` selects namespace `ns` with these labels.
    pub fn namespace_matches(&self, ns: &str, labels: &BTreeMap<String, String>) -> bool {
        let mut all = labels.clone();
        all.insert(NAMESPACE_NAME_LABEL.to_string(), ns.to_string());
        selector_matches(&self.namespace_selector, &all)
    }

    /// Kueue's reconciler: a job with no queue name (and no managed owner) is managed only with
    /// `manageJobsWithoutQueueName` and in a selected namespace.
    pub fn manages_without_queue_name(&self, ns: &str, labels: &BTreeMap<String, String>) -> bool {
        self.without_queue_name && self.namespace_matches(ns, labels)
    }

    /// Kueue's job webhooks on create (`ApplyDefaultLocalQueue`, then `WorkloadShouldBeSuspended`),
    /// for a job object whose controller owner is not a managed job: the queue label defaulted to
    /// `default` when that LocalQueue exists in a selected namespace, and whether the job must be
    /// created suspended.
    pub fn default_new_job(&self, obj: &mut Value, facts: &JobNamespace) -> bool {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        let selected = self.namespace_matches(&ns, &facts.labels);
        let has_queue = |o: &Value| {
            o.pointer("/metadata/labels")
                .and_then(|l| l.get(label::QUEUE_NAME))
                .and_then(Value::as_str)
                .is_some_and(|q| !q.is_empty())
        };
        if !has_queue(obj) && facts.default_queue && selected {
            set_queue_label(obj, DEFAULT_LOCAL_QUEUE_NAME);
        }
        has_queue(obj) || (self.without_queue_name && selected)
    }
}

fn set_queue_label(obj: &mut Value, queue: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if !labels.is_object() {
        *labels = Value::Object(Default::default());
    }
    if let Some(l) = labels.as_object_mut() {
        l.insert(label::QUEUE_NAME.to_string(), Value::String(queue.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn job(ns: &str, queue: Option<&str>) -> Value {
        let mut j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": ns}, "spec": {}});
        if let Some(q) = queue {
            j["metadata"]["labels"] = json!({label::QUEUE_NAME: q});
        }
        j
    }

    // Kueue: apis/config/v1beta2/defaults.go (the default selector leaves kube-system and the
    // controller's namespace out), and jobframework/defaults_test.go TestWorkloadShouldBeSuspended
    // ("job with queue name ", "job without queue name", "job without queue name with manageJobs",
    // "job without queue name with manageJobs in unmanaged ns").
    #[test]
    fn jobs_without_a_queue_are_suspended_only_when_managed_and_selected() {
        let off = ManagedJobs::default();
        let on = ManagedJobs {
            without_queue_name: true,
            ..ManagedJobs::default()
        };
        let none = JobNamespace::default();
        assert!(
            off.default_new_job(&mut job("team", Some("lq")), &none),
            "a queue name is always Kueue's"
        );
        assert!(!off.default_new_job(&mut job("team", None), &none));
        assert!(on.default_new_job(&mut job("team", None), &none));
        assert!(
            !on.default_new_job(&mut job("kube-system", None), &none),
            "the default selector leaves kube-system alone"
        );
        assert!(!on.default_new_job(&mut job("kueue-system", None), &none));
        let picky = ManagedJobs {
            without_queue_name: true,
            namespace_selector: parse_selector(&json!({"matchLabels": {"kueue-managed": "true"}})).unwrap(),
            ..ManagedJobs::default()
        };
        assert!(
            !picky.default_new_job(&mut job("team", None), &none),
            "namespace not selected"
        );
        let selected = JobNamespace {
            labels: labels(&[("kueue-managed", "true")]),
            default_queue: false,
        };
        assert!(picky.default_new_job(&mut job("team", None), &selected));
        assert!(
            picky.manages_without_queue_name("team", &selected.labels)
                && !picky.manages_without_queue_name("team", &BTreeMap::new())
        );
        assert!(!off.manages_without_queue_name("team", &selected.labels));
    }

    // Kueue: pkg/controller/jobs/job/job_webhook_test.go TestDefault ("LocalQueueDefaulting enabled,
    // default lq is created, job doesn't have queue label", and the cases where it does not exist or
    // the job names a queue), after jobframework/defaults.go ApplyDefaultLocalQueue:
    // the label is set only when the `default` LocalQueue exists, never over a name the user wrote,
    // and (since Kueue took the selector into it) only in a namespace the selector picks.
    #[test]
    fn the_default_local_queue_is_named_when_it_exists() {
        let m = ManagedJobs::default();
        let with_default = JobNamespace {
            labels: BTreeMap::new(),
            default_queue: true,
        };
        let mut j = job("team", None);
        assert!(
            m.default_new_job(&mut j, &with_default),
            "defaulted to a queue, so suspended"
        );
        assert_eq!(j["metadata"]["labels"][label::QUEUE_NAME], "default");
        let mut named = job("team", Some("lq"));
        m.default_new_job(&mut named, &with_default);
        assert_eq!(
            named["metadata"]["labels"][label::QUEUE_NAME],
            "lq",
            "a queue name the user wrote stays"
        );
        let mut no_lq = job("team", None);
        assert!(!m.default_new_job(&mut no_lq, &JobNamespace::default()));
        assert!(no_lq["metadata"].get("labels").is_none());
        let mut system = job("kube-system", None);
        assert!(
            !m.default_new_job(&mut system, &with_default),
            "not in a namespace the selector picks"
        );
    }

    #[test]
    fn selectors_are_checked_and_matched_as_kubernetes_does() {
        let bad = |v: Value| parse_selector(&v).unwrap_err().0;
        assert_eq!(
            bad(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            "matchExpressions[0].values"
        );
        assert_eq!(
            bad(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
            "matchExpressions[0].values"
        );
        assert_eq!(
            bad(json!({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]})),
            "matchExpressions[0].operator"
        );
        assert_eq!(bad(json!({"matchLabels": ["a"]})), "");
        let sel = parse_selector(&json!({"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]}, {"key": "frozen", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(selector_matches(
            &sel,
            &labels(&[("team", "a"), ("tier", "gold")])
        ));
        assert!(!selector_matches(
            &sel,
            &labels(&[("team", "a"), ("tier", "bronze")])
        ));
        assert!(!selector_matches(
            &sel,
            &labels(&[("team", "a"), ("tier", "gold"), ("frozen", "")])
        ));
        assert!(
            selector_matches(&LabelSelector::default(), &BTreeMap::new()),
            "an empty selector selects everything"
        );
    }
}
