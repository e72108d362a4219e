use super::*;

fn err(text: &str) -> String {
    Configuration::parse(text).unwrap_err().to_string()
}

const HEAD: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n";

/// The shape of Kueue's shipped `config/components/manager/controller_manager_config.yaml` (its
/// fields and values, comments left out): it loads, and waitForPodsReady is on with Kueue's v1beta2
/// defaults because the section is absent.
#[test]
fn kueues_default_manager_config_loads() {
    let text = r#"
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
  - "ray.io/raycluster"
  - "ray.io/rayservice"
  - "jobset.x-k8s.io/jobset"
  - "workload.codeflare.dev/appwrapper"
  - "trainer.kubeflow.org/trainjob"
  - "pod"
  - "deployment"
  - "statefulset"
  - "leaderworkerset.x-k8s.io/leaderworkerset"
"#;
    let cfg = Configuration::parse(text).unwrap();
    assert_eq!(cfg.version().unwrap(), Version::V1beta2);
    assert_eq!(
        cfg.wait_for_pods_ready(),
        Some(PodsReadyConfig::with_timeout(Duration::from_secs(1800))),
        "Kueue v1beta2 defaults: on, 30m, recovery = timeout, no block, backoff 60s..3600s"
    );
    assert_eq!(cfg.health_addr(), Some("0.0.0.0:8081".parse().unwrap()));
    assert_eq!(
        cfg.ignored(),
        vec![
            "clientConnection",
            "integrations.frameworks (other than batch/job, pod, ray.io/raycluster, ray.io/rayservice, ray.io/rayjob)",
            "metrics",
            "controller"
        ]
    );
    let all = Frameworks {
        batch_job: true,
        ray_cluster: true,
        ray_service: true,
        ray_job: true,
        pod: true,
    };
    assert_eq!(
        cfg.frameworks(),
        all,
        "Kueue's list names every kind quotagate implements"
    );
}

/// The sample shipped in `config/manager/`.
#[test]
fn the_shipped_sample_loads() {
    let text = include_str!("../../../config/manager/controller_manager_config.yaml");
    let cfg = Configuration::parse(text).unwrap();
    let w = cfg.wait_for_pods_ready().unwrap();
    assert_eq!(w.timeout, Duration::from_secs(600));
    assert_eq!(w.recovery_timeout, Some(Duration::from_secs(180)));
    assert_eq!((w.backoff_limit_count, w.block_admission), (None, false));
    assert!(cfg.ignored().is_empty(), "{:?}", cfg.ignored());
}

#[test]
fn wait_for_pods_ready_defaults_per_version() {
    let v1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n";
    let cases: Vec<(&str, String, Option<PodsReadyConfig>)> = vec![
        ("v1beta1 without the section: off", v1.to_string(), None),
        (
            "v1beta1 enable: false",
            format!("{v1}waitForPodsReady:\n  enable: false\n  timeout: 5m\n"),
            None,
        ),
        (
            "v1beta1 enable: true blocks admission by default",
            format!("{v1}waitForPodsReady:\n  enable: true\n"),
            Some(PodsReadyConfig {
                block_admission: true,
                ..PodsReadyConfig::with_timeout(Duration::from_secs(1800))
            }),
        ),
        (
            "v1beta2 off through the feature gate",
            format!("{HEAD}featureGates:\n  DisableWaitForPodsReady: true\n"),
            None,
        ),
        (
            "v1beta2 enable: false",
            format!("{HEAD}waitForPodsReady:\n  enable: false\n"),
            None,
        ),
        (
            "v1beta2 every field",
            format!(
                "{HEAD}waitForPodsReady:\n  timeout: 1.5s\n  blockAdmission: true\n  recoveryTimeout: 0s\n  requeuingStrategy:\n    timestamp: Creation\n    backoffLimitCount: 2\n    backoffBaseSeconds: 1\n    backoffMaxSeconds: 10\n"
            ),
            Some(PodsReadyConfig {
                timeout: Duration::from_millis(1500),
                recovery_timeout: None,
                block_admission: true,
                timestamp: RequeuingTimestamp::Creation,
                backoff_limit_count: Some(2),
                backoff_base_seconds: 1,
                backoff_max_seconds: 10,
                workload_level: None,
                unscheduled_timeout: None,
            }),
        ),
        (
            "timeout 0s means the default",
            format!("{HEAD}waitForPodsReady:\n  timeout: 0s\n"),
            Some(PodsReadyConfig::with_timeout(Duration::from_secs(1800))),
        ),
        (
            // Kueue v0.20 (KEP-4803): the alpha gate turns the per-workload annotation on, capped
            // by maxTimeoutOnWorkload (2h when left out).
            "WorkloadLevelWaitForPodsReady with the default cap",
            format!("{HEAD}featureGates:\n  WorkloadLevelWaitForPodsReady: true\n"),
            Some(PodsReadyConfig {
                workload_level: Some(Duration::from_secs(7200)),
                ..PodsReadyConfig::with_timeout(Duration::from_secs(1800))
            }),
        ),
        (
            "WorkloadLevelWaitForPodsReady with maxTimeoutOnWorkload",
            format!(
                "{HEAD}featureGates:\n  WorkloadLevelWaitForPodsReady: true\nwaitForPodsReady:\n  maxTimeoutOnWorkload: 45m\n"
            ),
            Some(PodsReadyConfig {
                workload_level: Some(Duration::from_secs(2700)),
                ..PodsReadyConfig::with_timeout(Duration::from_secs(1800))
            }),
        ),
        (
            // Kueue v0.20 (KEP-13502, `PodsScheduledTrackingEnabled`): the gate and a positive
            // unscheduledTimeout turn the tracking on; `0s` or the gate off leave it off.
            "WaitForPodsReadyUnscheduledTimeout with unscheduledTimeout",
            format!(
                "{HEAD}featureGates:\n  WaitForPodsReadyUnscheduledTimeout: true\nwaitForPodsReady:\n  timeout: 30m\n  unscheduledTimeout: 5m\n"
            ),
            Some(PodsReadyConfig {
                unscheduled_timeout: Some(Duration::from_secs(300)),
                ..PodsReadyConfig::with_timeout(Duration::from_secs(1800))
            }),
        ),
        (
            "unscheduledTimeout 0s is off",
            format!(
                "{HEAD}featureGates:\n  WaitForPodsReadyUnscheduledTimeout: true\nwaitForPodsReady:\n  unscheduledTimeout: 0s\n"
            ),
            Some(PodsReadyConfig::with_timeout(Duration::from_secs(1800))),
        ),
        (
            "unscheduledTimeout without the gate is read and unused",
            format!("{HEAD}waitForPodsReady:\n  unscheduledTimeout: 5m\n"),
            Some(PodsReadyConfig::with_timeout(Duration::from_secs(1800))),
        ),
        (
            "maxTimeoutOnWorkload without the gate is read and unused (Kueue: gate off)",
            format!("{HEAD}waitForPodsReady:\n  maxTimeoutOnWorkload: 45m\n"),
            Some(PodsReadyConfig::with_timeout(Duration::from_secs(1800))),
        ),
    ];
    for (name, text, want) in cases {
        let cfg = Configuration::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cfg.wait_for_pods_ready(), want, "{name}");
    }
}

#[test]
fn bad_fields_are_named_by_their_path() {
    let cases = [
        (
            format!("{HEAD}waitForPodsReady:\n  timeout: soon\n"),
            "waitForPodsReady.timeout: \"soon\" is not a duration",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  timeout: -5m\n"),
            "waitForPodsReady.timeout: must be greater than or equal to 0",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  recoveryTimeout: -1s\n"),
            "waitForPodsReady.recoveryTimeout: must be greater than or equal to 0",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  maxTimeoutOnWorkload: -1h\n"),
            "waitForPodsReady.maxTimeoutOnWorkload: must be greater than or equal to 0",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  unscheduledTimeout: -1m\n"),
            "waitForPodsReady.unscheduledTimeout: must be greater than or equal to 0",
        ),
        (
            // KEP-4803: "Enabling DisableWaitForPodsReady and WorkloadLevelWaitForPodsReady feature
            // gates is not allowed."
            format!(
                "{HEAD}featureGates:\n  DisableWaitForPodsReady: true\n  WorkloadLevelWaitForPodsReady: true\n"
            ),
            "featureGates: DisableWaitForPodsReady and WorkloadLevelWaitForPodsReady cannot both be enabled",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  requeuingStrategy:\n    backoffLimitCount: -1\n"),
            "waitForPodsReady.requeuingStrategy.backoffLimitCount: must be greater",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  requeuingStrategy:\n    backoffBaseSeconds: many\n"),
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds: invalid type",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  requeuingStrategy:\n    timestamp: Admission\n"),
            "waitForPodsReady.requeuingStrategy.timestamp: unknown variant `Admission`",
        ),
        (
            format!("{HEAD}waitForPodsReady:\n  timeoutt: 5m\n"),
            "waitForPodsReady.timeoutt: unknown field `timeoutt`",
        ),
        (format!("{HEAD}colour: blue\n"), "unknown field `colour`"),
        (
            "apiVersion: config.kueue.x-k8s.io/v1\nkind: Configuration\n".to_string(),
            "apiVersion: must be config.kueue.x-k8s.io/v1beta2",
        ),
        (
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Config\n".to_string(),
            "kind: must be \"Configuration\"",
        ),
        ("kind: Configuration\n".to_string(), "missing field `apiVersion`"),
        (
            format!("{HEAD}health:\n  healthProbeBindAddress: here\n"),
            "health.healthProbeBindAddress: \"here\" is not an address",
        ),
        ("- a\n- b\n".to_string(), "not a mapping"),
        ("a: [\n".to_string(), "not YAML"),
    ];
    for (text, want) in cases {
        let got = err(&text);
        assert!(got.contains(want), "{text}\n  got: {got}\n  want: {want}");
    }
}

#[test]
fn switches_quotagate_does_not_implement_are_refused_when_on() {
    let v1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n";
    let refused = [
        format!("{HEAD}resources:\n  transformations:\n  - input: nvidia.com/mig-4g.5gb\n"),
        format!("{HEAD}resources:\n  quotaCheckStrategy: IgnoreUndeclared\n"),
        format!("{HEAD}objectRetentionPolicies:\n  workloads:\n    afterDeactivatedByKueue: 1h\n"),
    ];
    for text in refused {
        let e = Configuration::parse(&text).unwrap_err();
        assert!(matches!(e, ConfigError::NotImplemented { .. }), "{text}: {e}");
        assert!(e.to_string().contains("not implemented"), "{e}");
    }
    // Off is fine, and only noted as ignored.
    let off = [
        format!("{v1}fairSharing:\n  enable: false\n"),
        format!("{HEAD}resources:\n  excludeResourcePrefixes: []\n  quotaCheckStrategy: BlockUndeclared\n"),
        format!("{HEAD}objectRetentionPolicies:\n  workloads:\n    afterFinished: null\n"),
    ];
    for text in off {
        let cfg = Configuration::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(cfg.ignored().len(), 1, "{text}: {:?}", cfg.ignored());
    }
}

// Kueue: apis/config/v1beta2/defaults.go (the default managedJobsNamespaceSelector) and
// config/validation.go (a selector's rules, reported under its path).
#[test]
fn manage_jobs_without_queue_name_and_the_namespace_selector_are_read() {
    let cfg = Configuration::parse(HEAD).unwrap();
    let m = cfg.managed_jobs();
    assert!(!m.without_queue_name);
    assert!(
        !m.namespace_matches("kube-system", &Default::default())
            && m.namespace_matches("team-a", &Default::default())
    );
    let own = Configuration::parse(&format!(
        "{HEAD}namespace: gpu-admin\nmanageJobsWithoutQueueName: true\n"
    ))
    .unwrap();
    assert!(own.ignored().is_empty(), "{:?}", own.ignored());
    let m = own.managed_jobs();
    assert!(
        m.without_queue_name && !m.namespace_matches("gpu-admin", &Default::default()),
        "the controller's namespace is left alone"
    );
    let picky = Configuration::parse(&format!(
        "{HEAD}manageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector:\n  matchLabels:\n    kueue-managed: \"true\"\n"
    ))
    .unwrap()
    .managed_jobs();
    let on: std::collections::BTreeMap<String, String> =
        [("kueue-managed".to_string(), "true".to_string())].into();
    assert!(picky.namespace_matches("a", &on) && !picky.namespace_matches("a", &Default::default()));
    let e = Configuration::parse(&format!(
        "{HEAD}managedJobsNamespaceSelector:\n  matchExpressions:\n  - key: team\n    operator: In\n"
    ))
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("managedJobsNamespaceSelector.matchExpressions[0].values: "),
        "{e}"
    );
}

#[test]
fn go_durations() {
    let ok = [
        ("0", 0),
        ("0s", 0),
        ("300ms", 300),
        ("1.5s", 1500),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        (".5s", 500),
    ];
    for (s, ms) in ok {
        assert_eq!(
            parse_go_duration(s).unwrap().value,
            Duration::from_millis(ms),
            "{s}"
        );
    }
    assert!(parse_go_duration("-5m").unwrap().negative);
    for bad in ["", "5", "5x", "m", "1.2.3s", "s5", "99999999999999999999999h"] {
        assert!(parse_go_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn fair_sharing_is_read_as_kueue_reads_it() {
    use PreemptionStrategy::{LessThanInitialShare as Initial, LessThanOrEqualToFinalShare as Final};
    let v1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n";
    let on = [
        (
            format!("{HEAD}fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]\n"),
            vec![Final],
        ),
        (
            format!("{HEAD}fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n"),
            vec![Initial],
        ),
        (
            format!(
                "{HEAD}fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n"
            ),
            vec![Final, Initial],
        ),
        // v1beta1 defaults an empty list to both, in Kueue's order.
        (
            format!("{v1}fairSharing:\n  enable: true\n"),
            vec![Final, Initial],
        ),
    ];
    for (text, want) in on {
        let cfg = Configuration::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(cfg.fair_sharing(), Some(want), "{text}");
        assert!(!cfg.ignored().contains(&"fairSharing"), "{text}");
    }
    let off = [format!("{v1}fairSharing:\n  enable: false\n"), HEAD.to_string()];
    for text in off {
        let cfg = Configuration::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(cfg.fair_sharing(), None, "{text}");
    }
    let bad = [
        (
            format!("{HEAD}fairSharing: {{}}\n"),
            "fairSharing.preemptionStrategies: Required value",
        ),
        (
            format!(
                "{HEAD}fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n"
            ),
            "fairSharing.preemptionStrategies: Unsupported value",
        ),
        (
            format!("{HEAD}fairSharing:\n  preemptionStrategies: [Fairest]\n"),
            "fairSharing.preemptionStrategies",
        ),
    ];
    for (text, want) in bad {
        let e = err(&text);
        assert!(e.starts_with(want), "{text}\n  got: {e}\n  want: {want}");
    }
}

/// Kueue's `pkg/config/validation_test.go` cases "valid admissionFairSharing configuration",
/// "invalid admissionFairSharing.usageHalfLifeTime configuration", "invalid
/// admissionFairSharing.usageSamplingInterval configuration" and "invalid
/// admissionFairSharing.resourceWeights configuration"; defaults as `apis/config/v1beta2/defaults.go`.
#[test]
fn admission_fair_sharing_is_read_defaulted_and_validated() {
    let cfg = Configuration::parse(&format!(
        "{HEAD}admissionFairSharing:\n  usageHalfLifeTime: 1s\n  usageSamplingInterval: 1s\n  resourceWeights:\n    cpu: 0.5\n    memory: 0.5\n"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let afs = cfg.admission_fair_sharing().unwrap_or_else(|| panic!("on"));
    assert_eq!(afs.usage_half_life_time, Duration::from_secs(1));
    assert_eq!(afs.usage_sampling_interval, Duration::from_secs(1));
    assert_eq!(afs.resource_weights.get("cpu"), Some(&0.5));
    assert!(cfg.ignored().is_empty(), "{:?}", cfg.ignored());
    // Defaults: the sampling interval is 5m (also for an explicit 0s); the half-life has none (0s).
    for text in [
        format!("{HEAD}admissionFairSharing: {{}}\n"),
        format!("{HEAD}admissionFairSharing:\n  usageSamplingInterval: 0s\n"),
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nadmissionFairSharing: {}\n"
            .to_string(),
    ] {
        let afs = Configuration::parse(&text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .admission_fair_sharing()
            .unwrap_or_else(|| panic!("{text}: on"));
        assert_eq!(afs.usage_sampling_interval, Duration::from_secs(300), "{text}");
        assert_eq!(afs.usage_half_life_time, Duration::ZERO, "{text}");
        assert!(afs.resource_weights.is_empty());
    }
    // Absent, or its feature gate off: not on.
    assert!(
        Configuration::parse(HEAD)
            .unwrap_or_else(|e| panic!("{e}"))
            .admission_fair_sharing()
            .is_none()
    );
    let gated = format!("{HEAD}admissionFairSharing: {{}}\nfeatureGates:\n  AdmissionFairSharing: false\n");
    let gated = Configuration::parse(&gated).unwrap_or_else(|e| panic!("{e}"));
    assert!(gated.admission_fair_sharing().is_none());
    assert!(gated.ignored().is_empty(), "{:?}", gated.ignored());
    let bad = [
        (
            "  usageHalfLifeTime: -1s\n  usageSamplingInterval: 1s\n",
            "admissionFairSharing.usageHalfLifeTime: ",
        ),
        (
            "  usageSamplingInterval: -1s\n",
            "admissionFairSharing.usageSamplingInterval: ",
        ),
        (
            "  usageSamplingInterval: 1s\n  resourceWeights:\n    cpu: -0.5\n",
            "admissionFairSharing.resourceWeights[cpu]: ",
        ),
        (
            "  usageHalfLifeTime: 1s\n  halfLife: 1s\n",
            "admissionFairSharing.halfLife: unknown field `halfLife`",
        ),
    ];
    for (body, want) in bad {
        let text = format!("{HEAD}admissionFairSharing:\n{body}");
        let got = err(&text);
        assert!(got.starts_with(want), "{text}\n  got: {got}\n  want: {want}");
    }
}

/// Kueue's `PrioritizePreemptorWorkloads` gate: off unless the file turns it on, and read (not
/// listed as ignored) when named.
#[test]
fn the_prioritize_preemptor_workloads_gate_is_read_from_feature_gates() {
    let parse = |t: &str| Configuration::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert!(!parse(HEAD).prioritize_preemptor_workloads());
    for (value, on) in [("true", true), ("false", false)] {
        let cfg = parse(&format!(
            "{HEAD}featureGates:\n  PrioritizePreemptorWorkloads: {value}\n"
        ));
        assert_eq!(cfg.prioritize_preemptor_workloads(), on, "{value}");
        assert!(cfg.ignored().is_empty(), "{value}: {:?}", cfg.ignored());
    }
}

/// Kueue v0.20's beta gates `WorkloadPriorityClassDefaulting` and
/// `RecomputeAssignmentUponPreemptionTargetsOverlap` (`pkg/features/kube_features.go`: both
/// `Default: true` from 0.20): on unless the file turns them off; the first is read by the job
/// controllers, the second by the admission loop, so neither is listed as ignored.
#[test]
fn the_kueue_v0_20_beta_gates_are_on_unless_turned_off() {
    let parse = |t: &str| Configuration::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    let plain = parse(HEAD);
    assert!(plain.workload_priority_class_defaulting());
    assert!(plain.managed_jobs().default_workload_priority_class);
    assert!(plain.recompute_upon_preemption_targets_overlap());
    for (value, on) in [("true", true), ("false", false)] {
        let cfg = parse(&format!(
            "{HEAD}featureGates:\n  WorkloadPriorityClassDefaulting: {value}\n"
        ));
        assert_eq!(cfg.workload_priority_class_defaulting(), on, "{value}");
        assert_eq!(cfg.managed_jobs().default_workload_priority_class, on, "{value}");
        assert!(cfg.ignored().is_empty(), "{value}: {:?}", cfg.ignored());
        let cfg = parse(&format!(
            "{HEAD}featureGates:\n  RecomputeAssignmentUponPreemptionTargetsOverlap: {value}\n"
        ));
        assert_eq!(cfg.recompute_upon_preemption_targets_overlap(), on, "{value}");
        assert!(cfg.ignored().is_empty(), "{value}: {:?}", cfg.ignored());
    }
}

/// The pod group readiness gates of Kueue v0.20 (`pkg/features/kube_features.go`):
/// `PodIntegrationCountSucceededPodsAsReady` (beta, on, #15734) and `WaitForPodsReadyMaxNotReady`
/// (alpha, off, #16059). Both are read by the pod group controller, so neither is listed as ignored.
#[test]
fn the_pod_group_readiness_gates_take_kueue_v0_20_defaults_and_the_file() {
    let parse = |t: &str| Configuration::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    let plain = parse(HEAD).managed_jobs();
    assert!(plain.count_succeeded_pods_as_ready);
    assert!(!plain.pod_group_max_not_ready);
    for (value, on) in [("true", true), ("false", false)] {
        let cfg = parse(&format!(
            "{HEAD}featureGates:\n  PodIntegrationCountSucceededPodsAsReady: {value}\n  WaitForPodsReadyMaxNotReady: {value}\n"
        ));
        assert_eq!(cfg.managed_jobs().count_succeeded_pods_as_ready, on, "{value}");
        assert_eq!(cfg.managed_jobs().pod_group_max_not_ready, on, "{value}");
        assert!(cfg.ignored().is_empty(), "{value}: {:?}", cfg.ignored());
    }
}

/// `integrations.frameworks` picks the job kinds (Kueue's `pkg/config/validation.go`
/// `validateIntegrations`: an unregistered name is NotSupported, a repeated one Duplicate). Without
/// the list: Kueue's default `batch/job` plus the Ray kinds.
#[test]
fn integrations_frameworks_pick_the_job_kinds() {
    let parse = |t: &str| Configuration::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert_eq!(parse(HEAD).frameworks(), Frameworks::default());
    assert_eq!(
        Frameworks::default(),
        Frameworks {
            batch_job: true,
            ray_cluster: true,
            ray_service: true,
            ray_job: true,
            pod: false
        }
    );
    let only_jobs = parse(&format!("{HEAD}integrations:\n  frameworks: [batch/job]\n"));
    assert_eq!(
        only_jobs.frameworks(),
        Frameworks {
            batch_job: true,
            ray_cluster: false,
            ray_service: false,
            ray_job: false,
            pod: false
        }
    );
    assert!(only_jobs.ignored().is_empty(), "{:?}", only_jobs.ignored());
    let ray_only = parse(&format!(
        "{HEAD}integrations:\n  frameworks: [ray.io/rayservice, ray.io/raycluster]\n"
    ));
    assert_eq!(
        ray_only.frameworks(),
        Frameworks {
            batch_job: false,
            ray_cluster: true,
            ray_service: true,
            ray_job: false,
            pod: false
        }
    );
    let unknown = err(&format!(
        "{HEAD}integrations:\n  frameworks: [batch/job, batch/cronjob]\n"
    ));
    assert!(
        unknown.starts_with("integrations.frameworks[1]: Unsupported value: \"batch/cronjob\": supported values: \"batch/job\", \"deployment\","),
        "{unknown}"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}integrations:\n  frameworks: [pod, batch/job, pod]\n"
        )),
        "integrations.frameworks[2]: Duplicate value: \"pod\""
    );
    assert!(
        err(&format!("{HEAD}integrations:\n  framework: [pod]\n"))
            .starts_with("integrations.framework: unknown field")
    );
}

#[test]
fn workload_retention_after_finished_is_read_and_a_negative_one_refused() {
    let cfg = Configuration::parse(&format!(
        "{HEAD}objectRetentionPolicies:\n  workloads:\n    afterFinished: 90s\n"
    ))
    .unwrap();
    assert_eq!(cfg.workload_retention(), Some(std::time::Duration::from_secs(90)));
    assert!(cfg.ignored().is_empty(), "{:?}", cfg.ignored());
    let zero = Configuration::parse(&format!(
        "{HEAD}objectRetentionPolicies:\n  workloads:\n    afterFinished: 0s\n"
    ))
    .unwrap();
    assert_eq!(
        zero.workload_retention(),
        Some(std::time::Duration::ZERO),
        "0s deletes at once"
    );
    assert_eq!(Configuration::parse(HEAD).unwrap().workload_retention(), None);
    let e = Configuration::parse(&format!(
        "{HEAD}objectRetentionPolicies:\n  workloads:\n    afterFinished: -1m\n"
    ))
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("objectRetentionPolicies.workloads.afterFinished")
            && e.to_string().contains("greater than or equal to 0"),
        "{e}"
    );
}

// Kueue: apis/config/v1beta1/configuration_types.go (`podOptions`, "Deprecated: This field will be
// removed on v1beta2, use ManagedJobsNamespaceSelector"), configuration_conversion.go (the conversion
// to v1beta2 "ignores deprecated PodOptions field") and pkg/config/config.go (strict decoding into
// v1beta2, which has no such field: `strict decoding error: unknown field ...`, as config_test.go's
// "invalid config" case reports one).
#[test]
fn pod_options_are_read_and_not_applied_in_v1beta1_and_refused_in_v1beta2() {
    let options = "integrations:\n  frameworks: [pod]\n  podOptions:\n    namespaceSelector:\n      matchExpressions:\n      - key: kubernetes.io/metadata.name\n        operator: NotIn\n        values: [team-b]\n    podSelector:\n      matchLabels:\n        app: x\n";
    let v1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n";
    let old = Configuration::parse(&format!("{v1}{options}")).unwrap();
    assert!(
        old.ignored()
            .iter()
            .any(|n| n.starts_with("integrations.podOptions")),
        "{:?}",
        old.ignored()
    );
    let m = old.managed_jobs();
    assert!(
        m.namespace_matches("team-b", &Default::default()),
        "the namespace selector of podOptions is not applied"
    );
    assert!(old.frameworks().pod);
    assert_eq!(
        err(&format!("{HEAD}{options}")),
        "integrations.podOptions: strict decoding error: unknown field \"integrations.podOptions\""
    );
    // v1beta1 decodes it as strictly as its other fields.
    assert!(
        err(&format!(
            "{v1}integrations:\n  podOptions:\n    labelSelector: {{}}\n"
        ))
        .starts_with("integrations.podOptions.labelSelector: unknown field")
    );
}

/// Kueue `apis/config/v1beta2/defaults.go` (gcInterval 1m, origin `multikueue`, workerLostTimeout
/// 15m, the AllAtOnce dispatcher, stepSize 3 for the incremental one) and `pkg/config/validation.go`
/// `validateMultiKueue` (negative durations, a bad origin, incrementalDispatcherConfig without the
/// incremental dispatcher, stepSize < 1); quotagate refuses dispatchers it does not run.
#[test]
fn multi_kueue_is_read_defaulted_and_validated() {
    let absent = Configuration::parse(HEAD).unwrap().multi_kueue();
    assert_eq!(absent, MultiKueueSettings::default());
    assert_eq!(
        (
            absent.gc_interval,
            absent.origin.as_str(),
            absent.worker_lost_timeout,
            absent.dispatcher
        ),
        (
            Duration::from_secs(60),
            "multikueue",
            Duration::from_secs(900),
            Dispatcher::AllAtOnce
        )
    );
    let cfg = Configuration::parse(&format!(
        "{HEAD}multiKueue:\n  gcInterval: 30s\n  origin: mgr-a\n  workerLostTimeout: 2m\n  dispatcherName: {DISPATCHER_INCREMENTAL}\n"
    ))
    .unwrap();
    assert!(cfg.ignored().is_empty(), "{:?}", cfg.ignored());
    assert_eq!(
        cfg.multi_kueue(),
        MultiKueueSettings {
            gc_interval: Duration::from_secs(30),
            origin: "mgr-a".into(),
            worker_lost_timeout: Duration::from_secs(120),
            dispatcher: Dispatcher::Incremental { step: 3 },
        }
    );
    let step1 = Configuration::parse(&format!(
        "{HEAD}multiKueue:\n  dispatcherName: {DISPATCHER_INCREMENTAL}\n  incrementalDispatcherConfig:\n    stepSize: 1\n"
    ))
    .unwrap();
    assert_eq!(
        step1.multi_kueue().dispatcher,
        Dispatcher::Incremental { step: 1 }
    );
    let gc_off = Configuration::parse(&format!("{HEAD}multiKueue:\n  gcInterval: 0s\n")).unwrap();
    assert_eq!(gc_off.multi_kueue().gc_interval, Duration::ZERO);
    for (body, want) in [
        (
            "gcInterval: -1s",
            "multiKueue.gcInterval: must be greater than or equal to 0",
        ),
        (
            "workerLostTimeout: -5m",
            "multiKueue.workerLostTimeout: must be greater than or equal to 0",
        ),
        (
            "origin: not/valid",
            "multiKueue.origin: Invalid value: \"not/valid\"",
        ),
        (
            "dispatcherName: example.com/mine",
            "multiKueue.dispatcherName: Unsupported value: \"example.com/mine\"",
        ),
        (
            "incrementalDispatcherConfig:\n    stepSize: 2",
            "multiKueue.incrementalDispatcherConfig: incrementalDispatcherConfig is only valid when dispatcherName is set to the incremental dispatcher",
        ),
        (
            "dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n  incrementalDispatcherConfig:\n    stepSize: 0",
            "multiKueue.incrementalDispatcherConfig.stepSize: must be greater than or equal to 1",
        ),
        (
            "gcIntervall: 1m",
            "multiKueue.gcIntervall: unknown field `gcIntervall`",
        ),
        (
            "externalFrameworks:\n  - name: Foo.v1.example.com",
            "multiKueue.externalFrameworks: not implemented",
        ),
    ] {
        let e = err(&format!("{HEAD}multiKueue:\n  {body}\n"));
        assert!(e.starts_with(want), "{body:?}: {e}");
    }
}
