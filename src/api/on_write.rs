//! On write, in one place: defaulting and validation of quotagate's kinds on create and update (the API
//! server's sense of "admission"; quota admission is `crate::admission`). The webhook, the embedded API
//! server and `quotagate validate` call these same functions, so an object is judged the same wherever
//! it is written.

use serde::Deserialize;
use serde_json::Value;

use super::kueue;
use super::kueue::config::Frameworks;
use super::kueue::constants::label::QUEUE_NAME as QUEUE_NAME_LABEL;
use super::kueue::managed_jobs::{JobNamespace, ManagedJobs};
use super::kueue::validation as kueue_rules;
use super::manifest::check_document_with;
use super::ray::validation::RayFeatureGates;
use super::validation::{FieldError, Path};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

fn kind_of(obj: &Value) -> (&str, &str) {
    (
        obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        obj.get("kind").and_then(Value::as_str).unwrap_or(""),
    )
}

fn queue_name(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(QUEUE_NAME_LABEL))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn is_ray_job(api_version: &str, kind: &str) -> bool {
    api_version == "ray.io/v1" && (kind == "RayCluster" || kind == "RayService" || kind == "RayJob")
}

/// A RayCluster a RayJob created: the RayJob's Workload covers it (Kueue skips jobs owned by a managed job).
fn owned_by_ray_job(obj: &Value) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| {
            owners.iter().any(|o| {
                o.get("controller") == Some(&Value::Bool(true))
                    && o.get("kind").and_then(Value::as_str) == Some(super::ray::constants::CRD_RAY_JOB)
                    && o.get("apiVersion").and_then(Value::as_str) == Some("ray.io/v1")
            })
        })
}

/// A RayJob on an existing cluster (`clusterSelector`) is not queue-managed (Kueue's rule).
fn uses_cluster_selector(obj: &Value) -> bool {
    obj.pointer("/spec/clusterSelector")
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty())
}

/// Kueue's job defaulting: a queue-managed job is created suspended, so nothing runs before admission.
/// Returns true when the object was changed.
pub fn default_object(op: Operation, obj: &mut Value) -> bool {
    let (api_version, kind) = kind_of(obj);
    if op != Operation::Create
        || !is_ray_job(api_version, kind)
        || queue_name(obj).is_none()
        // A child RayCluster: its parent's Workload covers it (Kueue's webhook skips jobs whose owner is a
        // managed job).
        || super::ray::child_guard::owned_by_service(obj)
        || owned_by_ray_job(obj)
        || (kind == "RayJob" && uses_cluster_selector(obj))
    {
        return false;
    }
    match obj.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) if spec.get("suspend") != Some(&Value::Bool(true)) => {
            spec.insert("suspend".to_string(), Value::Bool(true));
            true
        }
        _ => false,
    }
}

/// Rules that compare the old and new object (immutability while admitted or running).
fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (api_version, kind) = kind_of(new);
    // Read from the stored values in place: a clone of each whole Workload first was 2% of the
    // large-scale benchmark's CPU (issue 62).
    let parse = |v: &Value| kueue::Workload::deserialize(v);
    match (api_version, kind) {
        ("kueue.x-k8s.io/v1beta2", "Workload") => match (parse(old), parse(new)) {
            (Ok(o), Ok(n)) => kueue_rules::validate_workload_update(&o, &n),
            _ => Vec::new(), // parse errors are reported by the full check of `new`
        },
        ("kueue.x-k8s.io/v1beta2", "LocalQueue") => {
            match (
                kueue::LocalQueue::deserialize(old),
                kueue::LocalQueue::deserialize(new),
            ) {
                (Ok(o), Ok(n)) => kueue_rules::validate_local_queue_update(&o, &n),
                _ => Vec::new(),
            }
        }
        ("kueue.x-k8s.io/v1beta2", "AdmissionCheck") => {
            match (
                kueue::AdmissionCheck::deserialize(old),
                kueue::AdmissionCheck::deserialize(new),
            ) {
                (Ok(o), Ok(n)) => kueue_rules::validate_admission_check_update(&o, &n),
                _ => Vec::new(),
            }
        }
        (av, k) if is_ray_job(av, k) => {
            // A child of a RayService answers to its parent's gate (and says so).
            let mut errs = if k == "RayCluster" {
                super::ray::child_guard::validate_child_update(new, old)
            } else {
                Vec::new()
            };
            // KubeRay's CEL rule on spec.managedBy, `self == oldSelf`: evaluated when both old and
            // new set it (a transition rule), so a set value never changes hands.
            let managed_by = |v: &Value| {
                v.pointer("/spec/managedBy")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            if let (Some(o), Some(n)) = (managed_by(old), managed_by(new))
                && o != n
            {
                errs.push(FieldError::invalid(
                    &Path::root("spec").child("managedBy"),
                    format!("{n:?}: the managedBy field is immutable"),
                ));
            }
            // Kueue: the queue of a job cannot change while the job runs (it is admitted).
            let running = old.pointer("/spec/suspend") != Some(&Value::Bool(true));
            if errs.is_empty() && queue_name(old).is_some() && running && queue_name(old) != queue_name(new) {
                let path = Path::root("metadata").child("labels").key(QUEUE_NAME_LABEL);
                errs.push(FieldError::invalid(
                    &path,
                    "field is immutable while the job is admitted (unsuspended)",
                ));
            }
            // Kueue's `validatedUpdateForEnabledWorkloadSlice`: whether a job is elastic is fixed at
            // creation (its Workloads are built one way or the other). Since Kueue v0.18 (#11342) the
            // error names the annotation's own path.
            let elastic = |v: &Value| {
                v.pointer("/metadata/annotations")
                    .and_then(|a| a.get(kueue::constants::label::ELASTIC_JOB))
                    .and_then(Value::as_str)
                    == Some("true")
            };
            if elastic(old) != elastic(new) {
                let path = Path::root("metadata")
                    .child("annotations")
                    .key(kueue::constants::label::ELASTIC_JOB);
                errs.push(FieldError::invalid(
                    &path,
                    format!("{}: field is immutable", elastic(new)),
                ));
            }
            errs
        }
        _ => Vec::new(),
    }
}

/// Kueue's RayCluster webhook rules for a queue-managed cluster of its own (a RayService's children answer
/// to the service's Workload): the in-tree autoscaler only on an elastic job, whose podsets follow it
/// through workload slices (a plain job's reservation is fixed once admitted), and at most 7 worker groups
/// (Kueue's 8 podsets, one of them the head). Kueue judges a job that names a queue, and every job under
/// `manageJobsWithoutQueueName` (`without_queue_name`).
fn validate_queue_managed_cluster(obj: &Value, without_queue_name: bool) -> Vec<FieldError> {
    let (api_version, kind) = kind_of(obj);
    let judged = queue_name(obj).is_some() || without_queue_name;
    if (api_version, kind) == ("ray.io/v1", "RayJob") && judged {
        return validate_queue_managed_ray_job(obj);
    }
    if (api_version, kind) != ("ray.io/v1", "RayCluster")
        || !judged
        || super::ray::child_guard::owned_by_service(obj)
        || owned_by_ray_job(obj)
    {
        return Vec::new();
    }
    let spec = Path::root("spec");
    let mut errs = Vec::new();
    let elastic = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(kueue::constants::label::ELASTIC_JOB))
        .and_then(Value::as_str)
        == Some("true");
    let autoscaling = obj
        .pointer("/spec/enableInTreeAutoscaling")
        .and_then(Value::as_bool)
        == Some(true);
    if autoscaling && !elastic {
        errs.push(FieldError::invalid(
            &spec.child("enableInTreeAutoscaling"),
            "true: a kueue managed job can use autoscaling only when the ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic job",
        ));
    }
    let groups = obj
        .pointer("/spec/workerGroupSpecs")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if groups > 7 {
        errs.push(FieldError::new(
            spec.child("workerGroupSpecs").as_str(),
            super::validation::ErrorType::TooMany,
            format!("{groups}: must have at most 7 items"),
        ));
    }
    errs.extend(validate_tas_templates(obj, "/spec", &spec));
    errs
}

/// Kueue's `ValidateTASPodSetRequest` on a Ray cluster spec's head and worker group templates
/// (`cluster` points at the spec in `obj`, `path` names it).
fn validate_tas_templates(obj: &Value, cluster: &str, path: &Path) -> Vec<FieldError> {
    let meta = |p: &str| -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> {
        obj.pointer(p)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
    };
    let mut errs = kueue::tas::validate_tas_podset_request(
        &path.child("headGroupSpec").child("template").child("metadata"),
        meta(&format!("{cluster}/headGroupSpec/template/metadata")).as_ref(),
    );
    let groups = obj
        .pointer(&format!("{cluster}/workerGroupSpecs"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    for i in 0..groups {
        errs.extend(kueue::tas::validate_tas_podset_request(
            &path
                .child("workerGroupSpecs")
                .index(i)
                .child("template")
                .child("metadata"),
            meta(&format!("{cluster}/workerGroupSpecs/{i}/template/metadata")).as_ref(),
        ));
    }
    errs
}

/// Kueue's RayJob webhook (`pkg/controller/jobs/rayjob/rayjob_webhook.go` validateCreate): a queued job
/// builds its own cluster and deletes it when it ends, since the cluster holds the queue's quota.
fn validate_queue_managed_ray_job(obj: &Value) -> Vec<FieldError> {
    let spec = Path::root("spec");
    let has_spec = obj.pointer("/spec/rayClusterSpec").is_some_and(|v| !v.is_null());
    match (uses_cluster_selector(obj), has_spec) {
        (true, true) => {
            return vec![FieldError::invalid(
                &spec.child("clusterSelector"),
                "a kueue managed job should not use an existing cluster",
            )];
        }
        // On an existing cluster: not queue-managed.
        (true, false) => return Vec::new(),
        (false, false) => {
            return vec![FieldError::required(
                &spec.child("rayClusterSpec"),
                "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
            )];
        }
        (false, true) => {}
    }
    let mut errs = Vec::new();
    if obj
        .pointer("/spec/shutdownAfterJobFinishes")
        .and_then(Value::as_bool)
        != Some(true)
    {
        errs.push(FieldError::invalid(
            &spec.child("shutdownAfterJobFinishes"),
            "a kueue managed job should delete the cluster after finishing",
        ));
    }
    // Kueue's `raycluster.ValidateCreate` on the job's cluster spec: its Workload follows the autoscaler
    // only through workload slices.
    let elastic = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(kueue::constants::label::ELASTIC_JOB))
        .and_then(Value::as_str)
        == Some("true");
    if obj
        .pointer("/spec/rayClusterSpec/enableInTreeAutoscaling")
        .and_then(Value::as_bool)
        == Some(true)
        && !elastic
    {
        errs.push(FieldError::invalid(
            &spec.child("rayClusterSpec").child("enableInTreeAutoscaling"),
            "true: a kueue managed job should only use autoscaling when workload slicing is enabled",
        ));
    }
    let groups = obj
        .pointer("/spec/rayClusterSpec/workerGroupSpecs")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if groups > 7 {
        let path = spec.child("rayClusterSpec").child("workerGroupSpecs");
        errs.push(FieldError::new(
            path.as_str(),
            super::validation::ErrorType::TooMany,
            format!("{groups}: must have at most 7 items"),
        ));
    }
    errs.extend(validate_tas_templates(
        obj,
        "/spec/rayClusterSpec",
        &spec.child("rayClusterSpec"),
    ));
    errs
}

/// Defaults, then validates. `Ok(())` lets the write through (with `new` possibly defaulted); `Err`
/// carries every broken rule. Objects that are not quotagate's kinds pass untouched.
pub fn admit(op: Operation, new: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
    admit_with(op, new, old, RayFeatureGates::default())
}

/// `admit` with the Ray feature gates of `--feature-gates`.
pub fn admit_with(
    op: Operation,
    new: &mut Value,
    old: Option<&Value>,
    gates: RayFeatureGates,
) -> Result<(), Vec<FieldError>> {
    admit_for(op, new, old, gates, Frameworks::default())
}

/// `admit_with`, judging only the job kinds of `frameworks` as Kueue jobs (`integrations.frameworks`:
/// Kueue registers no webhook for a framework it does not manage).
pub fn admit_for(
    op: Operation,
    new: &mut Value,
    old: Option<&Value>,
    gates: RayFeatureGates,
    frameworks: Frameworks,
) -> Result<(), Vec<FieldError>> {
    admit_in(
        op,
        new,
        old,
        gates,
        frameworks,
        &ManagedJobs::default(),
        &JobNamespace::default(),
    )
}

/// `admit_for` under the configuration's `manageJobsWithoutQueueName` and
/// `managedJobsNamespaceSelector`, knowing the object's namespace (its labels, and whether a
/// `default` LocalQueue is there for Kueue's LocalQueueDefaulting).
pub fn admit_in(
    op: Operation,
    new: &mut Value,
    old: Option<&Value>,
    gates: RayFeatureGates,
    frameworks: Frameworks,
    managed: &ManagedJobs,
    ns: &JobNamespace,
) -> Result<(), Vec<FieldError>> {
    if super::batch::is_job(new) {
        if !frameworks.batch_job {
            return Ok(());
        }
        let errors = super::batch::admit_in(op == Operation::Create, new, old, managed, ns, frameworks);
        return if errors.is_empty() { Ok(()) } else { Err(errors) };
    }
    if super::pod::is_pod(new) {
        // Kueue's pod webhook only exists with the `pod` framework (it is not in the default set).
        if !frameworks.pod {
            return Ok(());
        }
        let errors = super::pod::admit_in(op == Operation::Create, new, old, frameworks, managed, ns);
        return if errors.is_empty() { Ok(()) } else { Err(errors) };
    }
    let (api_version, kind) = kind_of(new);
    if !super::manifest::is_managed(api_version, kind) {
        return Ok(());
    }
    // Kueue's Ray webhooks (`ApplyDefaultLocalQueue`, `ApplyDefaultForSuspend`): the queue name
    // defaulted to the `default` LocalQueue, and a job Kueue manages created suspended: one that names
    // a queue, or, under `manageJobsWithoutQueueName`, any in a namespace the selector picks. A cluster
    // a RayService or RayJob owns is its parent's business; a RayJob on an existing cluster is no job.
    let child = super::pod::owner_managed(new, frameworks)
        || super::ray::child_guard::owned_by_service(new)
        || owned_by_ray_job(new);
    let managed_now = op == Operation::Create
        && is_ray_job(api_version, kind)
        && !child
        && !(kind == "RayJob" && uses_cluster_selector(new))
        && managed.default_new_job(new, ns);
    default_object(op, new);
    if managed_now && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("suspend".to_string(), Value::Bool(true));
    }
    let mut errors = check_document_with(new, gates).problems;
    if kind_of(new) == ("ray.io/v1", "RayService") {
        errors.retain(|e| !super::ray::validation::ray_service_stored_anyway(e));
    }
    // Kueue's job webhooks judge the job's spec; a write that leaves it alone (status, a label) is not
    // theirs to refuse, so a cluster stored before the webhook can still report why it waits.
    if op == Operation::Create || old.is_none_or(|o| o.get("spec") != new.get("spec")) {
        errors.extend(validate_queue_managed_cluster(new, managed.without_queue_name));
    }
    if let (Operation::Update, Some(old)) = (op, old) {
        errors.extend(validate_update(new, old));
    }
    // Kueue v0.20's `kueue.x-k8s.io/wait-for-pods-ready` on a Ray job Kueue manages (a RayCluster a
    // RayService or RayJob owns is its parent's).
    if let Some(max) = managed.pods_ready_max_on_workload
        && !child
        && is_ray_job(kind_of(new).0, kind_of(new).1)
        && (queue_name(new).is_some() || managed.without_queue_name)
    {
        let old = old.filter(|_| op == Operation::Update);
        errors.extend(super::kueue::pods_ready_annotation::validate_object(
            new, old, max,
        ));
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(annotations: Value, autoscaling: bool, groups: usize) -> Value {
        let group = |i: usize| serde_json::json!({"groupName": format!("g{i}"), "replicas": 1, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "w", "image": "ray"}]}}});
        serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "labels": {QUEUE_NAME_LABEL: "lq"}, "annotations": annotations},
            "spec": {"enableInTreeAutoscaling": autoscaling, "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}},
                "workerGroupSpecs": (0..groups).map(group).collect::<Vec<_>>()}
        })
    }

    // Kueue: pkg/controller/jobs/raycluster/raycluster_webhook.go validateCreate (its webhook tests'
    // "invalid managed - has auto scaler" and "worker groups limit exceeded" cases).
    #[test]
    fn queue_managed_clusters_follow_kueues_raycluster_webhook() {
        let fields = |obj: &mut Value| match admit(Operation::Create, obj, None) {
            Ok(()) => Vec::new(),
            Err(errs) => errs.iter().map(|e| e.field.clone()).collect::<Vec<_>>(),
        };
        let elastic = serde_json::json!({kueue::constants::label::ELASTIC_JOB: "true"});
        assert_eq!(
            fields(&mut cluster(serde_json::json!({}), true, 1)),
            vec!["spec.enableInTreeAutoscaling"]
        );
        assert!(
            fields(&mut cluster(elastic, true, 1)).is_empty(),
            "an elastic job may autoscale"
        );
        assert!(fields(&mut cluster(serde_json::json!({}), false, 7)).is_empty());
        assert_eq!(
            fields(&mut cluster(serde_json::json!({}), false, 8)),
            vec!["spec.workerGroupSpecs"]
        );
        let mut unqueued = cluster(serde_json::json!({}), true, 8);
        unqueued["metadata"]["labels"] = serde_json::json!({});
        assert!(
            fields(&mut unqueued).is_empty(),
            "not Kueue's business without a queue"
        );
        // Kueue's raycluster webhook `ValidateTASPodSetRequest` on each group's template.
        let mut tas = cluster(serde_json::json!({}), false, 2);
        tas["spec"]["workerGroupSpecs"][1]["template"]["metadata"] = serde_json::json!({"annotations": {
            kueue::tas::SLICE_SIZE: "2"}});
        assert_eq!(
            fields(&mut tas),
            vec!["spec.workerGroupSpecs[1].template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]"]
        );
    }

    // Kueue: pkg/controller/jobframework/validation.go validatedUpdateForEnabledWorkloadSlice (the
    // elastic-job toggle is immutable on update, whichever way it turns).
    #[test]
    fn the_elastic_annotation_cannot_be_added_or_removed() {
        let elastic = serde_json::json!({kueue::constants::label::ELASTIC_JOB: "true"});
        let update = |old: Value, mut new: Value| match admit(Operation::Update, &mut new, Some(&old)) {
            Ok(()) => Vec::new(),
            Err(errs) => errs
                .iter()
                .map(|e| (e.field.clone(), e.message.clone()))
                .collect::<Vec<_>>(),
        };
        let want = |v: &str| {
            vec![(
                format!("metadata.annotations[{}]", kueue::constants::label::ELASTIC_JOB),
                format!("{v}: field is immutable"),
            )]
        };
        assert_eq!(
            update(
                cluster(serde_json::json!({}), false, 1),
                cluster(elastic.clone(), false, 1)
            ),
            want("true")
        );
        assert_eq!(
            update(
                cluster(elastic.clone(), false, 1),
                cluster(serde_json::json!({}), false, 1)
            ),
            want("false")
        );
        assert!(update(cluster(elastic.clone(), false, 1), cluster(elastic, false, 2)).is_empty());
    }

    // Kueue: pkg/controller/jobs/raycluster/raycluster_webhook_test.go TestValidateDefault ("unmanaged",
    // "managed - by config", "managed - by queue") and the RayJob and RayService webhooks' `Default`,
    // which take `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector` the same way
    // (`ApplyDefaultForSuspend`); a cluster a RayService or RayJob owns is its parent's business, and a
    // RayJob on an existing cluster is no job.
    #[test]
    fn ray_kinds_without_a_queue_are_suspended_when_kueue_manages_them() {
        let all = ManagedJobs {
            without_queue_name: true,
            ..ManagedJobs::default()
        };
        let create = |mut obj: Value, m: &ManagedJobs| {
            admit_in(
                Operation::Create,
                &mut obj,
                None,
                RayFeatureGates::default(),
                Frameworks::default(),
                m,
                &JobNamespace::default(),
            )
            .map(|()| obj)
        };
        let suspended = |obj: &Value| obj.pointer("/spec/suspend") == Some(&Value::Bool(true));
        let mut unqueued = cluster(serde_json::json!({}), false, 1);
        unqueued["metadata"]["labels"] = serde_json::json!({});
        assert!(
            !suspended(&create(unqueued.clone(), &ManagedJobs::default()).unwrap()),
            "unmanaged"
        );
        assert!(
            suspended(&create(unqueued.clone(), &all).unwrap()),
            "managed - by config"
        );
        assert!(
            suspended(&create(cluster(serde_json::json!({}), false, 1), &ManagedJobs::default()).unwrap()),
            "managed - by queue"
        );
        let mut system = unqueued.clone();
        system["metadata"]["namespace"] = "kube-system".into();
        assert!(
            !suspended(&create(system, &all).unwrap()),
            "a namespace the selector leaves out"
        );
        let mut child = unqueued.clone();
        child["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "u", "controller": true}]);
        assert!(!suspended(&create(child, &all).unwrap()), "a RayJob's cluster");
        let head = serde_json::json!({"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}});
        let mut rj = ray_job(serde_json::json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": head}));
        rj["metadata"]["labels"] = serde_json::json!({});
        assert!(
            suspended(&create(rj, &all).unwrap()),
            "a RayJob managed by config"
        );
        let mut selected = ray_job(serde_json::json!({"clusterSelector": {"ray.io/cluster": "c"}}));
        selected["metadata"]["labels"] = serde_json::json!({});
        assert!(
            !suspended(&create(selected, &all).unwrap()),
            "a RayJob on an existing cluster"
        );
        let rs = serde_json::json!({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "rs", "namespace": "default"},
            "spec": {"rayClusterConfig": head}});
        assert!(
            suspended(&create(rs, &all).unwrap()),
            "a RayService managed by config"
        );
        // Kueue's validateCreate judges every cluster under manageJobsWithoutQueueName.
        let mut autoscaled = cluster(serde_json::json!({}), true, 1);
        autoscaled["metadata"]["labels"] = serde_json::json!({});
        let errs = create(autoscaled.clone(), &all).unwrap_err();
        assert_eq!(
            errs.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            vec!["spec.enableInTreeAutoscaling"]
        );
        assert!(create(autoscaled, &ManagedJobs::default()).is_ok());
    }

    fn ray_job(spec: Value) -> Value {
        serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "default", "labels": {QUEUE_NAME_LABEL: "lq"}},
            "spec": spec
        })
    }

    // Kueue: pkg/controller/jobs/rayjob/rayjob_webhook.go (Default suspends a queued job; validateCreate's
    // clusterSelector, rayClusterSpec and shutdownAfterJobFinishes rules).
    #[test]
    fn queue_managed_ray_jobs_follow_kueues_rayjob_webhook() {
        let head = serde_json::json!({"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}});
        let mut ok = ray_job(serde_json::json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": head}));
        assert_eq!(admit(Operation::Create, &mut ok, None), Ok(()));
        assert_eq!(
            ok["spec"]["suspend"],
            Value::Bool(true),
            "a queued RayJob is created suspended"
        );
        let fields = |mut obj: Value| {
            admit(Operation::Create, &mut obj, None)
                .err()
                .unwrap_or_default()
                .into_iter()
                .map(|e| e.field)
                .collect::<Vec<_>>()
        };
        // (KubeRay also refuses the defaulted suspend without shutdownAfterJobFinishes.)
        assert_eq!(
            fields(ray_job(serde_json::json!({"rayClusterSpec": head}))),
            vec!["spec.suspend", "spec.shutdownAfterJobFinishes"]
        );
        assert_eq!(
            fields(ray_job(
                serde_json::json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": head, "clusterSelector": {"ray.io/cluster": "c"}})
            )),
            vec!["spec.clusterSelector"]
        );
        // On an existing cluster: not queue-managed, so not suspended (KubeRay refuses suspend with a selector).
        let mut selected = ray_job(serde_json::json!({"clusterSelector": {"ray.io/cluster": "c"}}));
        assert_eq!(admit(Operation::Create, &mut selected, None), Ok(()));
        assert!(selected["spec"].get("suspend").is_none());
        // The cluster a RayJob creates carries its queue label, but the RayJob's Workload covers it.
        let mut child = cluster(serde_json::json!({}), false, 1);
        child["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "u", "controller": true}]);
        assert_eq!(admit(Operation::Create, &mut child, None), Ok(()));
        assert!(
            child["spec"].get("suspend").is_none(),
            "a RayJob's cluster is not held by a Workload of its own"
        );
        // Kueue `rayjob_webhook_test.go` (raycluster.ValidateCreate): the autoscaler only on an elastic job.
        let autoscaled =
            serde_json::json!({"enableInTreeAutoscaling": true, "headGroupSpec": head["headGroupSpec"]});
        assert_eq!(
            fields(ray_job(
                serde_json::json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": autoscaled})
            )),
            vec!["spec.rayClusterSpec.enableInTreeAutoscaling"]
        );
        let mut elastic =
            ray_job(serde_json::json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": autoscaled}));
        elastic["metadata"]["annotations"] =
            serde_json::json!({kueue::constants::label::ELASTIC_JOB: "true"});
        assert_eq!(
            admit(Operation::Create, &mut elastic, None),
            Ok(()),
            "an elastic job may autoscale"
        );
    }
}
