//! Tests of the pure job-framework parts through a minimal batch-Job-like `GenericJob`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;

use super::names::NameLength;
use super::podset_info::*;
use super::priority::*;
use super::workload::*;
use super::*;
use crate::api::kueue::builders::{podset, workload_priority_class};
use crate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, label};
use crate::api::kueue::*;

/// A job with one template per podset, like batch/v1 Job with `parallelism` pods.
#[derive(Clone, Debug)]
struct TestJob {
    meta: ObjectMeta,
    suspended: bool,
    podsets: Vec<PodSet>,
    custom_priority_class: Option<Option<String>>,
}

impl TestJob {
    fn new(labels: &[(&str, &str)]) -> Self {
        let meta = ObjectMeta {
            name: Some("sample".into()),
            namespace: Some("team-a".into()),
            uid: Some("uid-1".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        };
        TestJob {
            meta,
            suspended: true,
            podsets: vec![podset("main", 3, [("cpu", "1")])],
            custom_priority_class: None,
        }
    }
    fn template(&mut self, i: usize) -> (&mut ObjectMeta, &mut PodSpec) {
        let t = &mut self.podsets[i].template;
        (
            t.metadata.get_or_insert_with(Default::default),
            t.spec.get_or_insert_with(Default::default),
        )
    }
}

impl JobWithPriorityClass for TestJob {
    fn priority_class(&self) -> Option<String> {
        self.custom_priority_class.clone().flatten()
    }
}

impl GenericJob for TestJob {
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("batch", "v1", "Job")
    }
    fn is_suspended(&self) -> bool {
        self.suspended
    }
    fn suspend(&mut self) {
        self.suspended = true;
    }
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let templates = self.podsets.iter_mut().map(|p| {
            let t = &mut p.template;
            (
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
            )
        });
        merge_all(templates, infos)?;
        self.suspended = false;
        Ok(())
    }
    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        let mut changed = false;
        for (i, info) in infos.iter().enumerate().take(self.podsets.len()) {
            let (m, s) = self.template(i);
            changed |= restore_template(m, s, info);
        }
        changed
    }
    fn finished(&self) -> Option<Finished> {
        None
    }
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        Ok(self.podsets.clone())
    }
    fn is_active(&self) -> bool {
        !self.suspended
    }
    fn pods_ready(&self) -> bool {
        false
    }
    fn as_with_priority_class(&self) -> Option<&dyn JobWithPriorityClass> {
        self.custom_priority_class
            .as_ref()
            .map(|_| self as &dyn JobWithPriorityClass)
    }
}

fn pod_class(name: &str, value: i32, global_default: bool) -> PriorityClass {
    PriorityClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        value,
        global_default: Some(global_default),
        ..Default::default()
    }
}

fn toleration(key: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }
}

fn flavors() -> BTreeMap<String, ResourceFlavor> {
    let spot = ResourceFlavor::build("spot")
        .node_label("instance-type", "spot")
        .toleration(toleration("spot"))
        .build();
    let gpu = ResourceFlavor::build("gpu")
        .node_label("accelerator", "a100")
        .build();
    let plain = ResourceFlavor::build("plain").build();
    [("spot", spot), ("gpu", gpu), ("plain", plain)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

#[test]
fn constructed_workload_carries_kueue_metadata() {
    let mut job = TestJob::new(&[
        (label::QUEUE_NAME, "user-queue"),
        (label::PRIORITY_CLASS, "high"),
        (label::MAX_EXEC_TIME_SECONDS, "600"),
        ("team", "a"),
        ("other", "x"),
    ]);
    job.meta.annotations = Some(
        [
            (
                "provreq.kueue.x-k8s.io/maxRunDuration".to_string(),
                "60".to_string(),
            ),
            ("unrelated".to_string(), "y".to_string()),
            // Kueue v0.20 (KEP-4803) copies the per-workload waitForPodsReady annotation.
            (
                "kueue.x-k8s.io/wait-for-pods-ready".to_string(),
                r#"{"timeoutSeconds": 60}"#.to_string(),
            ),
        ]
        .into(),
    );
    let podsets = job.pod_sets().unwrap();
    let priority = resolve_priority(
        &priority_source(&job, &podsets),
        &[workload_priority_class("high", 1000)],
        &[],
    )
    .unwrap();
    let opts = WorkloadOptions {
        label_keys_to_copy: vec!["team".into()],
        name_length: NameLength::Long,
    };
    let wl = construct_workload(&job, podsets, priority, &opts).unwrap();

    assert_eq!(
        wl.metadata.name.as_deref(),
        Some(super::names::workload_name("sample", "uid-1", &job.gvk(), "", NameLength::Long).as_str())
    );
    assert!(wl.metadata.name.as_deref().unwrap().starts_with("job-sample-"));
    assert_eq!(wl.metadata.namespace.as_deref(), Some("team-a"));
    let labels = wl.metadata.labels.clone().unwrap();
    assert_eq!(
        labels,
        [
            ("team".to_string(), "a".to_string()),
            (label::JOB_UID.to_string(), "uid-1".to_string())
        ]
        .into()
    );
    assert_eq!(
        wl.metadata
            .annotations
            .clone()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [
            "kueue.x-k8s.io/wait-for-pods-ready",
            "provreq.kueue.x-k8s.io/maxRunDuration"
        ]
    );
    assert_eq!(
        wl.metadata.finalizers.clone().unwrap(),
        [RESOURCE_IN_USE_FINALIZER]
    );
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("batch/v1", "Job", "sample", "uid-1")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(wl.spec.queue_name.as_deref(), Some("user-queue"));
    assert_eq!(wl.spec.priority, Some(1000));
    assert_eq!(
        wl.spec.priority_class_ref,
        Some(PriorityClassRef::workload_priority_class("high"))
    );
    assert_eq!(wl.spec.maximum_execution_time_seconds, Some(600));
    assert_eq!(wl.spec.active, None);
    assert_eq!(crate::api::kueue::validation::validate_workload(&wl), vec![]);
}

#[test]
fn workload_without_uid_cannot_be_owned() {
    let mut job = TestJob::new(&[]);
    job.meta.uid = None;
    let err = construct_workload(
        &job,
        vec![],
        Priority {
            class_ref: None,
            value: 0,
        },
        &WorkloadOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        JobFrameworkError::MissingField {
            kind: "Job".into(),
            field: "metadata.uid"
        }
    );
}

#[test]
fn bad_max_exec_time_label_is_ignored() {
    for v in ["0", "-5", "ten", "99999999999"] {
        let job = TestJob::new(&[(label::MAX_EXEC_TIME_SECONDS, v)]);
        assert_eq!(maximum_execution_time_seconds(job.meta()), None, "{v}");
    }
}

#[test]
fn priority_resolution_follows_kueue_order() {
    let wpcs = [workload_priority_class("high", 1000)];
    let pcs = [
        pod_class("pod-high", 500, false),
        pod_class("default-b", 20, true),
        pod_class("default-a", 10, true),
    ];
    let with_pc = |name: &str| {
        let mut j = TestJob::new(&[]);
        j.podsets[0].template.spec.as_mut().unwrap().priority_class_name = Some(name.into());
        j
    };
    let mut custom = with_pc("pod-high");
    custom.custom_priority_class = Some(None);
    let cases: Vec<(&str, TestJob, Result<Priority, JobFrameworkError>)> = vec![
        (
            "workload class label wins",
            {
                let mut j = with_pc("pod-high");
                j.meta.labels = Some([(label::PRIORITY_CLASS.to_string(), "high".to_string())].into());
                j
            },
            Ok(Priority {
                class_ref: Some(PriorityClassRef::workload_priority_class("high")),
                value: 1000,
            }),
        ),
        (
            "missing workload class is an error",
            TestJob::new(&[(label::PRIORITY_CLASS, "nope")]),
            Err(JobFrameworkError::WorkloadPriorityClassNotFound("nope".into())),
        ),
        (
            "podset priorityClassName",
            with_pc("pod-high"),
            Ok(Priority {
                class_ref: Some(PriorityClassRef::pod_priority_class("pod-high")),
                value: 500,
            }),
        ),
        (
            "missing pod class is an error",
            with_pc("gone"),
            Err(JobFrameworkError::PriorityClassNotFound("gone".into())),
        ),
        (
            "custom capability overrides podsets, empty means default",
            custom,
            Ok(Priority {
                class_ref: Some(PriorityClassRef::pod_priority_class("default-a")),
                value: 10,
            }),
        ),
        (
            "lowest global default",
            TestJob::new(&[]),
            Ok(Priority {
                class_ref: Some(PriorityClassRef::pod_priority_class("default-a")),
                value: 10,
            }),
        ),
    ];
    for (case, job, want) in cases {
        let podsets = job.pod_sets().unwrap();
        assert_eq!(
            resolve_priority(&priority_source(&job, &podsets), &wpcs, &pcs),
            want,
            "{case}"
        );
    }
    assert_eq!(
        resolve_priority(&PrioritySource::Default, &[], &[]),
        Ok(Priority {
            class_ref: None,
            value: DEFAULT_PRIORITY
        })
    );
}

// Kueue: pkg/controller/jobframework/defaults_test.go TestApplyDefaultWorkloadPriorityClass, each
// case by its name (the label Kueue's webhook writes is the class the Workload takes here).
#[test]
fn the_default_workload_priority_class_is_taken_as_kueue_defaults_it() {
    let default_wpc = [
        workload_priority_class("default", 100),
        workload_priority_class("high", 1000),
    ];
    let no_label = TestJob::new(&[]);
    let labelled = TestJob::new(&[(label::PRIORITY_CLASS, "high")]);
    let wpc = |n: &str| PrioritySource::WorkloadPriorityClass(n.to_string());
    // (case, job, classes, gate, owner managed, want)
    type Case<'a> = (
        &'a str,
        &'a TestJob,
        &'a [WorkloadPriorityClass],
        bool,
        bool,
        PrioritySource,
    );
    let cases: [Case<'_>; 5] = [
        (
            "feature gate enabled, no label, default WPC exists",
            &no_label,
            &default_wpc,
            true,
            false,
            wpc("default"),
        ),
        (
            "feature gate disabled, no label, default WPC exists",
            &no_label,
            &default_wpc,
            false,
            false,
            PrioritySource::Default,
        ),
        (
            "feature gate enabled, label already set",
            &labelled,
            &default_wpc,
            true,
            false,
            wpc("high"),
        ),
        (
            "feature gate enabled, no label, default WPC does not exist",
            &no_label,
            &default_wpc[1..],
            true,
            false,
            PrioritySource::Default,
        ),
        (
            "feature gate enabled, owner managed by kueue",
            &no_label,
            &default_wpc,
            true,
            true,
            PrioritySource::Default,
        ),
    ];
    for (case, job, classes, gate, owner_managed, want) in cases {
        let podsets = job.pod_sets().unwrap();
        let source = priority_source(job, &podsets);
        assert_eq!(
            default_workload_priority_class(source, gate, owner_managed, classes),
            want,
            "{case}"
        );
    }
    // KEP-10765: the default class goes ahead of the pod's own PriorityClass, and the Workload
    // carries its value and reference.
    let mut with_pc = TestJob::new(&[]);
    with_pc.podsets[0]
        .template
        .spec
        .as_mut()
        .unwrap()
        .priority_class_name = Some("pod-high".into());
    let podsets = with_pc.pod_sets().unwrap();
    let source =
        default_workload_priority_class(priority_source(&with_pc, &podsets), true, false, &default_wpc);
    assert_eq!(
        resolve_priority(&source, &default_wpc, &[pod_class("pod-high", 500, false)]),
        Ok(Priority {
            class_ref: Some(PriorityClassRef::workload_priority_class("default")),
            value: 100,
        })
    );
}

fn admitted(flavor_of: &[(&str, &str)]) -> Workload {
    let mut wl = Workload::build("job-sample-abcde", "team-a")
        .queue("user-queue")
        .podset("main", 3, [("cpu", "1"), ("nvidia.com/gpu", "1")])
        .reserve_quota("cq", "spot")
        .build();
    let psa = &mut wl
        .status
        .as_mut()
        .unwrap()
        .admission
        .as_mut()
        .unwrap()
        .pod_set_assignments[0];
    for (r, f) in flavor_of {
        psa.flavors.insert(r.to_string(), f.to_string());
    }
    wl
}

#[test]
fn info_from_status_gathers_flavors_podset_label_and_check_updates() {
    let mut wl = admitted(&[("cpu", "spot"), ("nvidia.com/gpu", "gpu")]);
    wl.status.as_mut().unwrap().admission_checks = vec![AdmissionCheckState {
        name: "prov".into(),
        state: CheckState::Ready,
        last_transition_time: None,
        message: String::new(),
        requeue_after_seconds: None,
        retry_count: None,
        pod_set_updates: vec![PodSetUpdate {
            name: "main".into(),
            node_selector: [("zone".to_string(), "a".to_string())].into(),
            tolerations: vec![toleration("spot")],
            ..Default::default()
        }],
    }];
    let infos = podsets_info_from_status(
        &wl,
        &flavors(),
        InfoOptions {
            assign_queue_labels: true,
        },
    )
    .unwrap();
    assert_eq!(infos.len(), 1);
    let info = &infos[0];
    assert_eq!(info.count, 3);
    let want_selector: BTreeMap<String, String> =
        [("instance-type", "spot"), ("accelerator", "a100"), ("zone", "a")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    assert_eq!(info.node_selector, want_selector);
    assert_eq!(
        info.tolerations,
        vec![toleration("spot")],
        "flavor and check tolerations are not duplicated"
    );
    assert_eq!(info.labels.get(label::PODSET).map(String::as_str), Some("main"));
    assert_eq!(
        info.labels.get(label::LOCAL_QUEUE_NAME).map(String::as_str),
        Some("user-queue")
    );
    assert_eq!(
        info.labels.get(label::CLUSTER_QUEUE_NAME).map(String::as_str),
        Some("cq")
    );

    let missing = admitted(&[("cpu", "nowhere")]);
    assert_eq!(
        podsets_info_from_status(&missing, &flavors(), InfoOptions::default()),
        Err(JobFrameworkError::FlavorNotFound("nowhere".into()))
    );
    let pending = Workload::build("w", "ns").podset("main", 1, []).build();
    assert_eq!(
        podsets_info_from_status(&pending, &flavors(), InfoOptions::default()),
        Err(JobFrameworkError::NotAdmitted("w".into()))
    );

    let mut conflicting = admitted(&[("cpu", "spot")]);
    conflicting.status.as_mut().unwrap().admission_checks = vec![AdmissionCheckState {
        name: "prov".into(),
        state: CheckState::Ready,
        last_transition_time: None,
        message: String::new(),
        requeue_after_seconds: None,
        retry_count: None,
        pod_set_updates: vec![PodSetUpdate {
            name: "main".into(),
            node_selector: [("instance-type".to_string(), "on-demand".to_string())].into(),
            ..Default::default()
        }],
    }];
    let err = podsets_info_from_status(&conflicting, &flavors(), InfoOptions::default()).unwrap_err();
    assert!(err.is_permanent());
    assert_eq!(
        err.to_string(),
        "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=instance-type, value1=spot, value2=on-demand"
    );
}

#[test]
fn run_then_restore_gives_back_the_original_job() {
    let mut job = TestJob::new(&[(label::QUEUE_NAME, "user-queue")]);
    {
        let (m, s) = job.template(0);
        m.labels = Some([("app".to_string(), "x".to_string())].into());
        s.node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
    }
    let original = job.clone();
    let saved: Vec<PodSetInfo> = job.podsets.iter().map(PodSetInfo::from_podset).collect();
    let wl = admitted(&[("cpu", "spot")]);
    let infos = podsets_info_from_status(&wl, &flavors(), InfoOptions::default()).unwrap();

    job.run_with_podsets_info(&infos).unwrap();
    assert!(!job.is_suspended());
    let spec = job.podsets[0].template.spec.clone().unwrap();
    assert_eq!(
        spec.node_selector
            .unwrap()
            .get("instance-type")
            .map(String::as_str),
        Some("spot")
    );
    assert_eq!(spec.tolerations.unwrap(), vec![toleration("spot")]);
    assert_eq!(
        job.podsets[0]
            .template
            .metadata
            .clone()
            .unwrap()
            .labels
            .unwrap()
            .get(label::PODSET)
            .map(String::as_str),
        Some("main")
    );

    job.suspend();
    assert!(job.restore_podsets_info(&saved));
    assert_eq!(job.podsets, original.podsets);
    assert!(
        !job.restore_podsets_info(&saved),
        "restoring twice changes nothing"
    );

    assert_eq!(
        job.run_with_podsets_info(&[]),
        Err(JobFrameworkError::PodSetsInfoLength { want: 1, got: 0 })
    );
}

#[test]
fn merge_conflict_leaves_template_unchanged() {
    let mut meta = ObjectMeta {
        labels: Some([("k".to_string(), "v1".to_string())].into()),
        ..Default::default()
    };
    let mut spec = PodSpec::default();
    let before = (meta.clone(), spec.clone());
    let info = PodSetInfo {
        labels: [("k".to_string(), "v2".to_string())].into(),
        node_selector: [("n".to_string(), "x".to_string())].into(),
        ..Default::default()
    };
    assert!(merge_into_template(&mut meta, &mut spec, &info).is_err());
    assert_eq!((meta, spec), before);
}

#[test]
fn equivalence_ignores_injected_tolerations_only_when_asked() {
    let job = TestJob::new(&[]);
    let wl = admitted(&[("cpu", "spot")]);
    let running = expected_running_podsets(&wl, &flavors(), InfoOptions::default()).unwrap();
    let job_podsets = vec![podset("main", 3, [("cpu", "1"), ("nvidia.com/gpu", "1")])];
    assert!(
        !podsets_equivalent(&job_podsets, &running, false),
        "flavor toleration differs"
    );
    assert!(podsets_equivalent(&job_podsets, &running, true));
    assert!(
        !podsets_equivalent(&job.pod_sets().unwrap(), &wl.spec.pod_sets, true),
        "requests differ"
    );
    let mut fewer = job_podsets.clone();
    fewer[0].count = Some(2);
    assert!(!podsets_equivalent(&fewer, &wl.spec.pod_sets, true));
    let pending = Workload::build("w", "ns").podset("main", 1, []).build();
    assert_eq!(
        expected_running_podsets(&pending, &flavors(), InfoOptions::default()),
        None
    );
}

#[test]
fn slices_chain_by_annotation() {
    let mut job = TestJob::new(&[]);
    job.meta.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
    job.meta.generation = Some(2);
    let name = workload_name_for_job(&job, NameLength::Long).unwrap();
    assert_eq!(
        name,
        super::names::workload_name("sample", "uid-1", &job.gvk(), "2", NameLength::Long)
    );

    let mut first = Workload::build("job-sample-11111", "team-a").build();
    prepare_workload_slice(&mut first, &[]).unwrap();
    let a = first.metadata.annotations.clone().unwrap();
    assert_eq!(a.get(label::ELASTIC_JOB).map(String::as_str), Some("true"));
    assert_eq!(
        a.get(label::WORKLOAD_SLICE_NAME).map(String::as_str),
        Some("job-sample-11111")
    );
    assert_eq!(a.get(label::WORKLOAD_SLICE_REPLACEMENT_FOR), None);

    let mut second = Workload::build("job-sample-22222", "team-a").build();
    prepare_workload_slice(&mut second, &[&first]).unwrap();
    let a = second.metadata.annotations.clone().unwrap();
    assert_eq!(
        a.get(label::WORKLOAD_SLICE_REPLACEMENT_FOR).map(String::as_str),
        Some("team-a/job-sample-11111")
    );
    assert_eq!(
        a.get(label::WORKLOAD_SLICE_NAME).map(String::as_str),
        Some("job-sample-11111"),
        "the chain keeps its first name"
    );

    let mut third = Workload::build("job-sample-33333", "team-a").build();
    assert_eq!(
        prepare_workload_slice(&mut third, &[&first, &second]),
        Err(JobFrameworkError::SliceCount(2))
    );
}

#[test]
fn template_spec_defaults_are_tolerated() {
    // A podset whose template has no metadata or spec still yields info and can be run.
    let ps = PodSet {
        name: Some("main".into()),
        template: PodTemplateSpec::default(),
        count: None,
        min_count: None,
        topology_request: None,
    };
    let info = PodSetInfo::from_podset(&ps);
    assert_eq!((info.name.as_str(), info.count), ("main", 1));
}

/// Found by `chaos --scenario clusters` (seed 86): an elastic RayCluster stopped after a slice chain
/// kept that chain's `workload-slice-name` in its templates, and the start on its next Workload failed
/// with a conflict on every pass, for good. A chain name is replaced; any other key still conflicts.
#[test]
fn a_stale_slice_chain_name_is_replaced_not_a_conflict() {
    let mut meta = ObjectMeta {
        annotations: Some(
            [
                (label::WORKLOAD_SLICE_NAME.to_string(), "old-chain".to_string()),
                ("user".to_string(), "kept".to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    let mut spec = PodSpec::default();
    let mut info = PodSetInfo {
        name: "main".into(),
        ..Default::default()
    };
    info.annotations
        .insert(label::WORKLOAD_SLICE_NAME.into(), "new-chain".into());
    merge_into_template(&mut meta, &mut spec, &info).unwrap();
    let a = meta.annotations.clone().unwrap();
    assert_eq!(
        (a[label::WORKLOAD_SLICE_NAME].as_str(), a["user"].as_str()),
        ("new-chain", "kept")
    );
    info.annotations.insert("user".into(), "other".into());
    assert!(
        merge_into_template(&mut meta, &mut spec, &info).is_err(),
        "a user's key still conflicts"
    );
}

/// KEP-13502's "Required-pod semantics" (Kueue v0.20's unscheduled-pods tracker): a pod bound to a
/// node (by `spec.nodeName` or `PodScheduled=True`) fills a slot; one held by a scheduling gate or
/// left Unschedulable does not but is live; a succeeded pod fills its slot; a failed pod, or one
/// being deleted, fills none and is not live.
#[test]
fn pods_scheduling_counts_as_kueue_tracker() {
    let pod =
        |v: serde_json::Value| -> k8s_openapi::api::core::v1::Pod { serde_json::from_value(v).unwrap() };
    let bound = pod(
        serde_json::json!({"spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}),
    );
    let scheduled = pod(serde_json::json!({"spec": {"containers": []},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}}));
    let unschedulable = pod(serde_json::json!({"spec": {"containers": []},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}));
    let gated = pod(
        serde_json::json!({"spec": {"containers": [], "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}),
    );
    let succeeded = pod(
        serde_json::json!({"spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Succeeded"}}),
    );
    let failed =
        pod(serde_json::json!({"spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Failed"}}));
    let deleting = pod(
        serde_json::json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}),
    );
    let got = count_pods_scheduling([
        (&bound, "a".to_string()),
        (&scheduled, "a".to_string()),
        (&unschedulable, "a".to_string()),
        (&gated, "b".to_string()),
        (&succeeded, "b".to_string()),
        (&failed, "c".to_string()),
        (&deleting, "c".to_string()),
    ]);
    assert_eq!(got.live, 4, "bound, scheduled, unschedulable, gated");
    assert_eq!(
        got.scheduled,
        BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)])
    );
}
