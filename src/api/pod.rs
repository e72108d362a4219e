//! Plain Pods as Kueue's pod integration handles them at admission (`pkg/controller/jobs/pod/
//! pod_webhook.go`): a queue-labelled Pod is created held by the `kueue.x-k8s.io/admission` scheduling
//! gate, labelled `kueue.x-k8s.io/managed: "true"` and carrying the `kueue.x-k8s.io/managed` finalizer;
//! a pod of a group (`kueue.x-k8s.io/pod-group-name`) also gets its role hash. Also the names and small
//! readers the Pod adapter shares with admission (gate, group, role hash).

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::kueue::config::Frameworks;
use super::kueue::constants::label;
use super::kueue::managed_jobs::{JobNamespace, ManagedJobs};
use super::validation::{FieldError, Path};

/// The scheduling gate that holds a queue-managed Pod until its Workload is admitted.
pub const SCHEDULING_GATE: &str = "kueue.x-k8s.io/admission";
/// The label the webhook puts on the Pods it manages, and its only allowed value.
pub const MANAGED_LABEL: &str = label::MANAGED;
pub const MANAGED_VALUE: &str = "true";
/// Kept on a managed Pod until its Workload no longer needs it.
pub const FINALIZER: &str = "kueue.x-k8s.io/managed";
pub const GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
pub const GROUP_TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
pub const ROLE_HASH_ANNOTATION: &str = "kueue.x-k8s.io/role-hash";
/// `"false"`: the group is not retried once one of its pods failed.
pub const RETRIABLE_IN_GROUP_ANNOTATION: &str = "kueue.x-k8s.io/retriable-in-group";
/// `"true"`: the group's Workload is created from its first pod, counted at the group's total, and
/// is not waiting for replacements while each role still has a pod (Kueue's fast admission).
pub const GROUP_FAST_ADMISSION_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-fast-admission";
/// `"true"`: a serving group, whose pods are long-running (no reclaimable pods).
pub const GROUP_SERVING_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-serving";
/// The condition Kueue writes on a Pod it deletes to stop it (its `ConditionTypeTerminationTarget`).
pub const TERMINATION_TARGET: &str = "TerminationTarget";
/// Namespaces Kueue's default `managedJobsNamespaceSelector` leaves alone (the system's and the
/// controller's own).
pub const UNMANAGED_NAMESPACES: [&str; 3] = super::kueue::managed_jobs::DEFAULT_UNMANAGED_NAMESPACES;

pub fn is_pod(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && obj.get("kind").and_then(Value::as_str) == Some("Pod")
}

fn label_of<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
}

fn annotation_of<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The pod's group, if it is in one.
pub fn group_name(meta: &ObjectMeta) -> Option<&str> {
    label_of(meta, GROUP_NAME_LABEL).filter(|g| !g.is_empty())
}

/// The annotation is set to `"true"` on the pod.
pub fn annotation_true(meta: &ObjectMeta, key: &str) -> bool {
    annotation_of(meta, key) == Some("true")
}

/// Kueue's `groupTotalCount`: the annotation as a positive integer, or why not.
pub fn group_total_count(meta: &ObjectMeta) -> Result<i32, String> {
    let v = annotation_of(meta, GROUP_TOTAL_COUNT_ANNOTATION)
        .ok_or_else(|| format!("failed to extract '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation"))?;
    let n = v
        .parse::<i32>()
        .map_err(|_| format!("strconv.Atoi: parsing {v:?}: invalid syntax"))?;
    if n < 1 {
        return Err(format!(
            "incorrect annotation value '{GROUP_TOTAL_COUNT_ANNOTATION}={v}': group total count should be greater than zero"
        ));
    }
    Ok(n)
}

/// Whether the pod carries Kueue's admission gate.
pub fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|x| x.name == SCHEDULING_GATE))
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Succeeded or Failed.
pub fn is_terminated(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Kueue's `podSuspended`: ended, or still gated.
pub fn is_suspended(pod: &Pod) -> bool {
    is_terminated(pod) || is_gated(pod)
}

pub fn is_managed(meta: &ObjectMeta) -> bool {
    label_of(meta, MANAGED_LABEL) == Some(MANAGED_VALUE)
}

/// Kueue's `getRoleHash`: the stored annotation, else the first 8 hex digits of the SHA-256 of the JSON
/// of the fields that matter to admission (requests and ports of each container, node selector,
/// affinity, tolerations, runtime class, priority, spread constraints, overhead, resource claims).
pub fn role_hash(pod: &Pod) -> String {
    if let Some(h) = annotation_of(&pod.metadata, ROLE_HASH_ANNOTATION) {
        return h.to_string();
    }
    let spec = pod.spec.clone().unwrap_or_default();
    let containers = |cs: &[Container]| -> Value {
        if cs.is_empty() {
            return Value::Null;
        }
        cs.iter()
            .map(|c| json!({"resources": {"requests": c.resources.as_ref().and_then(|r| r.requests.clone())}, "ports": c.ports}))
            .collect()
    };
    // serde_json's maps are sorted by key, as Go's encoder writes a map.
    let shape = json!({"spec": {
        "initContainers": containers(spec.init_containers.as_deref().unwrap_or_default()),
        "containers": containers(&spec.containers),
        "nodeSelector": spec.node_selector,
        "affinity": spec.affinity,
        "tolerations": spec.tolerations,
        "runtimeClassName": spec.runtime_class_name,
        "priority": spec.priority,
        "topologySpreadConstraints": spec.topology_spread_constraints,
        "overhead": spec.overhead,
        "resourceClaims": spec.resource_claims,
    }});
    let digest = Sha256::digest(shape.to_string().as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

fn namespace_of(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
}

/// Kueue does not gate a Pod (nor suspend a job) whose controller is a job kind it manages (that
/// job's Workload covers it).
pub(crate) fn owner_managed(obj: &Value, frameworks: Frameworks) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| {
            owners
                .iter()
                .filter(|o| o.get("controller") == Some(&Value::Bool(true)))
                .any(|o| {
                    let av = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
                    match (av, o.get("kind").and_then(Value::as_str).unwrap_or("")) {
                        ("batch/v1", "Job") => frameworks.batch_job,
                        ("ray.io/v1", "RayCluster") => frameworks.ray_cluster,
                        ("ray.io/v1", "RayService") => frameworks.ray_service,
                        ("ray.io/v1", "RayJob") => frameworks.ray_job,
                        _ => false,
                    }
                })
        })
}

/// Kueue's pod webhook `Default`: a queue-labelled Pod in a managed namespace, not run by a managed job,
/// gets the finalizer, the managed label and the admission gate (and, in a group, its role hash).
/// True when the object was changed.
pub fn default_pod(obj: &mut Value, frameworks: Frameworks) -> bool {
    default_pod_in(obj, frameworks, &ManagedJobs::default(), &JobNamespace::default())
}

/// [`default_pod`] under the configuration's switches: only in a namespace the
/// `managedJobsNamespaceSelector` picks; the queue name defaulted to the `default` LocalQueue when it
/// exists; a Pod with no queue name managed too under `manageJobsWithoutQueueName`.
pub fn default_pod_in(
    obj: &mut Value,
    frameworks: Frameworks,
    managed: &ManagedJobs,
    ns: &JobNamespace,
) -> bool {
    if owner_managed(obj, frameworks) || !managed.namespace_matches(namespace_of(obj), &ns.labels) {
        return false;
    }
    if !managed.default_new_job(obj, ns) {
        return false;
    }
    let Ok(mut pod) = serde_json::from_value::<Pod>(obj.clone()) else {
        return false;
    };
    let meta = &mut pod.metadata;
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_string());
    }
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(MANAGED_LABEL.to_string(), MANAGED_VALUE.to_string());
    if !is_gated(&pod) {
        let gates = pod
            .spec
            .get_or_insert_with(Default::default)
            .scheduling_gates
            .get_or_insert_with(Vec::new);
        gates.push(k8s_openapi::api::core::v1::PodSchedulingGate {
            name: SCHEDULING_GATE.to_string(),
        });
    }
    // Kueue's webhook gates every managed pod for TAS and `prepare` lifts it when the admission is
    // not topology-aware; here only the pods that ask for a topology are gated.
    let asks_topology = pod.metadata.annotations.as_ref().is_some_and(|a| {
        [
            crate::api::kueue::tas::REQUIRED_TOPOLOGY,
            crate::api::kueue::tas::PREFERRED_TOPOLOGY,
            crate::api::kueue::tas::SLICE_REQUIRED_TOPOLOGY,
            crate::api::kueue::tas::UNCONSTRAINED_TOPOLOGY,
        ]
        .iter()
        .any(|k| a.contains_key(*k))
    });
    if asks_topology {
        let gates = pod
            .spec
            .get_or_insert_with(Default::default)
            .scheduling_gates
            .get_or_insert_with(Vec::new);
        if !gates
            .iter()
            .any(|g| g.name == crate::api::kueue::tas::TOPOLOGY_SCHEDULING_GATE)
        {
            gates.push(k8s_openapi::api::core::v1::PodSchedulingGate {
                name: crate::api::kueue::tas::TOPOLOGY_SCHEDULING_GATE.to_string(),
            });
        }
    }
    if group_name(&pod.metadata).is_some() {
        let hash = role_hash(&pod);
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ROLE_HASH_ANNOTATION.to_string(), hash);
    }
    // Only the fields defaulted are written back, so nothing else the user wrote changes form.
    let Ok(defaulted) = serde_json::to_value(&pod) else {
        return false;
    };
    for pointer in [
        "/metadata/finalizers",
        "/metadata/labels",
        "/metadata/annotations",
        "/spec/schedulingGates",
    ] {
        if let (Some(v), Some((parent, key))) = (defaulted.pointer(pointer), pointer.rsplit_once('/'))
            && let Some(slot) = obj.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            slot.insert(key.to_string(), v.clone());
        }
    }
    true
}

fn labels_path(key: &str) -> Path {
    Path::root("metadata").child("labels").key(key)
}

fn annotations_path(key: &str) -> Path {
    Path::root("metadata").child("annotations").key(key)
}

/// Kueue's `validateCommon` plus `ValidateJobOnCreate`'s queue-name rule.
pub fn validate_create(pod: &Pod) -> Vec<FieldError> {
    let meta = &pod.metadata;
    // Kueue's `validateTopologyRequest`: the Pod's own TAS annotations.
    let mut errs = super::kueue::tas::validate_tas_podset_request(&Path::root("metadata"), Some(meta));
    if let Some(q) = label_of(meta, label::QUEUE_NAME).filter(|q| !q.is_empty()) {
        super::names::dns_subdomain(&labels_path(label::QUEUE_NAME), q, &mut errs);
    }
    if let Some(v) = label_of(meta, MANAGED_LABEL)
        && v != MANAGED_VALUE
    {
        errs.push(FieldError::forbidden(
            labels_path(MANAGED_LABEL).as_str(),
            format!("managed label value can only be '{MANAGED_VALUE}'"),
        ));
    }
    let both = format!(
        "both the '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{GROUP_NAME_LABEL}' label should be set"
    );
    let total = annotation_of(meta, GROUP_TOTAL_COUNT_ANNOTATION);
    match group_name(meta) {
        None if total.is_some() => {
            errs.push(FieldError::required(labels_path(GROUP_NAME_LABEL).as_str(), both));
            return errs;
        }
        None => return errs,
        Some(g) => {
            super::names::dns_subdomain(&labels_path(GROUP_NAME_LABEL), g, &mut errs);
            if total.is_none() {
                errs.push(FieldError::required(
                    annotations_path(GROUP_TOTAL_COUNT_ANNOTATION).as_str(),
                    both,
                ));
                return errs;
            }
        }
    }
    if let Err(why) = group_total_count(meta) {
        errs.push(FieldError::invalid(
            &annotations_path(GROUP_TOTAL_COUNT_ANNOTATION),
            format!("{:?}: {why}", total.unwrap_or_default()),
        ));
    }
    errs
}

/// Kueue's pod webhook `ValidateUpdate`: the create rules, the queue (and priority class) fixed once
/// the pod runs, the group name fixed, and an unretriable group never made retriable again.
pub fn validate_update(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mut errs = validate_create(new);
    if !is_suspended(new) {
        for key in [label::QUEUE_NAME, label::PRIORITY_CLASS] {
            let (n, o) = (label_of(&new.metadata, key), label_of(&old.metadata, key));
            if n != o {
                errs.push(FieldError::invalid(
                    &labels_path(key),
                    format!("{:?}: field is immutable", n.unwrap_or_default()),
                ));
            }
        }
    }
    if let Some(old_group) = group_name(&old.metadata)
        && group_name(&new.metadata) != Some(old_group)
    {
        let n = group_name(&new.metadata).unwrap_or_default();
        errs.push(FieldError::invalid(
            &labels_path(GROUP_NAME_LABEL),
            format!("{n:?}: field is immutable"),
        ));
    }
    let unretriable = |p: &Pod| annotation_of(&p.metadata, RETRIABLE_IN_GROUP_ANNOTATION) == Some("false");
    if group_name(&new.metadata).is_some() && unretriable(old) && !unretriable(new) {
        errs.push(FieldError::forbidden(
            annotations_path(RETRIABLE_IN_GROUP_ANNOTATION).as_str(),
            "unretriable pod group can't be converted to retriable",
        ));
    }
    errs
}

/// Defaults and validates a Pod write, as the embedded server's and the webhook's pod rules. Pods in
/// unmanaged namespaces, and objects that do not parse as a Pod, are left alone.
pub fn admit(create: bool, new: &mut Value, old: Option<&Value>, frameworks: Frameworks) -> Vec<FieldError> {
    admit_in(
        create,
        new,
        old,
        frameworks,
        &ManagedJobs::default(),
        &JobNamespace::default(),
    )
}

/// [`admit`] knowing the configuration's managed-jobs switches and the Pod's namespace.
pub fn admit_in(
    create: bool,
    new: &mut Value,
    old: Option<&Value>,
    frameworks: Frameworks,
    managed: &ManagedJobs,
    ns: &JobNamespace,
) -> Vec<FieldError> {
    if !managed.namespace_matches(namespace_of(new), &ns.labels) {
        return Vec::new();
    }
    if create {
        default_pod_in(new, frameworks, managed, ns);
    }
    let Ok(pod) = serde_json::from_value::<Pod>(new.clone()) else {
        return Vec::new();
    };
    match old.map(|o| serde_json::from_value::<Pod>(o.clone())) {
        Some(Ok(old)) if !create => {
            // A write that leaves labels and annotations alone (status, a finalizer, ungating) is not
            // the webhook's to refuse.
            if old.metadata.labels == pod.metadata.labels
                && old.metadata.annotations == pod.metadata.annotations
            {
                return Vec::new();
            }
            validate_update(&pod, &old)
        }
        _ => validate_create(&pod),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(labels: Value, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}})
    }

    fn on() -> Frameworks {
        Frameworks {
            pod: true,
            ..Frameworks::default()
        }
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    // Kueue: pod_webhook_test.go TestDefault ("pod with queue matching ns selector", "doesn’t match the
    // managedJobsNamespaceSelector", "pod with owner managed by kueue (Job)", "pod with a group name
    // label"), and getRoleHash: the same shape is the same role, other requests another.
    #[test]
    fn a_queue_labelled_pod_is_created_gated_managed_and_finalized() {
        let mut queued = pod(json!({label::QUEUE_NAME: "lq"}), json!({}));
        assert!(admit(true, &mut queued, None, on()).is_empty());
        assert_eq!(queued["metadata"]["labels"][MANAGED_LABEL], "true");
        assert_eq!(queued["metadata"]["finalizers"], json!([FINALIZER]));
        assert_eq!(
            queued["spec"]["schedulingGates"],
            json!([{"name": SCHEDULING_GATE}])
        );
        assert_eq!(
            queued["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1",
            "the rest stays as written"
        );
        assert!(
            queued["metadata"]["annotations"]
                .get(ROLE_HASH_ANNOTATION)
                .is_none(),
            "a single pod has no role"
        );

        let mut plain = pod(json!({}), json!({}));
        assert!(!default_pod(&mut plain, on()), "no queue: not Kueue's");
        let mut system = pod(json!({label::QUEUE_NAME: "lq"}), json!({}));
        system["metadata"]["namespace"] = json!("kube-system");
        assert!(!default_pod(&mut system, on()));
        let mut of_job = pod(json!({label::QUEUE_NAME: "lq"}), json!({}));
        of_job["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]);
        assert!(!default_pod(&mut of_job, on()), "the Job's Workload covers it");

        let mut member = pod(
            json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "g"}),
            json!({GROUP_TOTAL_COUNT_ANNOTATION: "2"}),
        );
        assert!(admit(true, &mut member, None, on()).is_empty());
        let hash = member["metadata"]["annotations"][ROLE_HASH_ANNOTATION]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(hash.len(), 8);
        let mut twin = pod(
            json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "g"}),
            json!({GROUP_TOTAL_COUNT_ANNOTATION: "2"}),
        );
        twin["metadata"]["name"] = json!("twin");
        default_pod(&mut twin, on());
        assert_eq!(
            twin["metadata"]["annotations"][ROLE_HASH_ANNOTATION],
            hash.as_str(),
            "same shape, same role"
        );
        let mut bigger = twin.clone();
        bigger["metadata"]["annotations"] = json!({GROUP_TOTAL_COUNT_ANNOTATION: "2"});
        bigger["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2");
        default_pod(&mut bigger, on());
        assert_ne!(
            bigger["metadata"]["annotations"][ROLE_HASH_ANNOTATION],
            hash.as_str(),
            "other requests, other role"
        );
    }

    // Kueue: pod_webhook_test.go TestValidateCreate ("pod with group total count and no group name",
    // "pod with group name and no group total count", "pod with empty group total count", "pod with 0
    // group total count", "pod with incorrect group name"), and pod_webhook.go validateManagedLabel.
    #[test]
    fn create_rules_follow_kueues_pod_webhook() {
        let total = |v: &str| json!({GROUP_TOTAL_COUNT_ANNOTATION: v});
        let cases: Vec<(&str, Value, Value, Vec<&str>)> = vec![
            (
                "valid single",
                json!({label::QUEUE_NAME: "lq"}),
                json!({}),
                vec![],
            ),
            (
                "valid group",
                json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "g"}),
                total("2"),
                vec![],
            ),
            (
                "managed label not true",
                json!({MANAGED_LABEL: "false"}),
                json!({}),
                vec!["metadata.labels[kueue.x-k8s.io/managed]"],
            ),
            (
                "total count without group",
                json!({label::QUEUE_NAME: "lq"}),
                total("2"),
                vec!["metadata.labels[kueue.x-k8s.io/pod-group-name]"],
            ),
            (
                "group without total count",
                json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "g"}),
                json!({}),
                vec!["metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"],
            ),
            (
                "total count not a number",
                json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "g"}),
                total("two"),
                vec!["metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"],
            ),
            (
                "total count zero",
                json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "g"}),
                total("0"),
                vec!["metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"],
            ),
            (
                "group name not a name",
                json!({label::QUEUE_NAME: "lq", GROUP_NAME_LABEL: "G_1"}),
                total("1"),
                vec!["metadata.labels[kueue.x-k8s.io/pod-group-name]"],
            ),
            (
                "bad queue name",
                json!({label::QUEUE_NAME: "Bad_Queue"}),
                json!({}),
                vec!["metadata.labels[kueue.x-k8s.io/queue-name]"],
            ),
        ];
        for (name, labels, annotations, want) in cases {
            let mut obj = pod(labels, annotations);
            assert_eq!(fields(&admit(true, &mut obj, None, on())), want, "{name}");
        }
        let errs = admit(
            true,
            &mut pod(json!({GROUP_NAME_LABEL: "g"}), total("0")),
            None,
            on(),
        );
        assert!(
            errs[0]
                .message
                .contains("group total count should be greater than zero"),
            "{errs:?}"
        );
    }

    // Kueue: pod_webhook_test.go TestValidateUpdate ("pod group name is changed", "retriable in group
    // annotation is removed"), and jobframework's ValidateJobOnUpdate: the queue name is fixed once the
    // pod is no longer suspended (ungated).
    #[test]
    fn update_rules_follow_kueues_pod_webhook() {
        let parse = |v: Value| serde_json::from_value::<Pod>(v).unwrap();
        let mut gated = pod(json!({label::QUEUE_NAME: "a"}), json!({}));
        default_pod(&mut gated, on());
        let mut moved = gated.clone();
        moved["metadata"]["labels"][label::QUEUE_NAME] = json!("b");
        assert!(
            validate_update(&parse(moved.clone()), &parse(gated.clone())).is_empty(),
            "gated: free to move"
        );
        let mut running = gated.clone();
        running["spec"]["schedulingGates"] = json!(null);
        let mut running_moved = running.clone();
        running_moved["metadata"]["labels"][label::QUEUE_NAME] = json!("b");
        assert_eq!(
            fields(&validate_update(&parse(running_moved), &parse(running))),
            vec!["metadata.labels[kueue.x-k8s.io/queue-name]"]
        );

        let member = pod(
            json!({GROUP_NAME_LABEL: "g"}),
            json!({GROUP_TOTAL_COUNT_ANNOTATION: "2", RETRIABLE_IN_GROUP_ANNOTATION: "false"}),
        );
        let mut renamed = member.clone();
        renamed["metadata"]["labels"][GROUP_NAME_LABEL] = json!("h");
        assert_eq!(
            fields(&validate_update(&parse(renamed), &parse(member.clone()))),
            vec!["metadata.labels[kueue.x-k8s.io/pod-group-name]"]
        );
        let mut retriable = member.clone();
        retriable["metadata"]["annotations"] = json!({GROUP_TOTAL_COUNT_ANNOTATION: "2"});
        assert_eq!(
            fields(&validate_update(&parse(retriable), &parse(member))),
            vec!["metadata.annotations[kueue.x-k8s.io/retriable-in-group]"]
        );
    }

    #[test]
    fn pods_are_judged_only_with_the_pod_framework() {
        use crate::api::on_write::{Operation, admit_for};
        let mut queued = pod(json!({label::QUEUE_NAME: "lq"}), json!({}));
        assert!(
            admit_for(
                Operation::Create,
                &mut queued,
                None,
                Default::default(),
                Frameworks::default()
            )
            .is_ok()
        );
        assert!(
            queued["spec"].get("schedulingGates").is_none(),
            "no pod webhook without the framework"
        );
        assert!(admit_for(Operation::Create, &mut queued, None, Default::default(), on()).is_ok());
        assert_eq!(queued["spec"]["schedulingGates"][0]["name"], SCHEDULING_GATE);
        // A queue-labelled pod gets the label set right; any other pod may not carry a wrong one.
        let mut bad = pod(json!({MANAGED_LABEL: "false"}), json!({}));
        assert!(
            admit_for(
                Operation::Create,
                &mut bad,
                None,
                Default::default(),
                Frameworks::default()
            )
            .is_ok()
        );
        assert!(admit_for(Operation::Create, &mut bad, None, Default::default(), on()).is_err());
    }
}
