use serde_json::{Value, json};

use super::*;
use crate::api::ray::roundtrip_tests::kuberay_docs;
use std::collections::BTreeMap;

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "ray", "image": "rayproject/ray:2.52.0"});
    if let (Value::Object(m), Value::Object(e)) = (&mut c, extra) {
        m.extend(e);
    }
    c
}

fn base_cluster() -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
        "spec": {
            "rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container(json!({}))]}}},
            "workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 5,
                "rayStartParams": {}, "template": {"spec": {"containers": [container(json!({}))]}}}]
        }
    })
}

fn base_service() -> Value {
    let cluster = base_cluster();
    json!({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "rs"},
           "spec": {"serveConfigV2": "applications: []\n", "rayClusterConfig": cluster["spec"].clone()}})
}

/// Sets `value` at a dotted path (numbers index arrays), creating objects on the way.
fn set(doc: &mut Value, path: &str, value: Value) {
    let mut cur = doc;
    for part in path.split('.') {
        cur = match part.parse::<usize>() {
            Ok(i) => {
                if let Some(a) = cur.as_array_mut().filter(|a| a.len() == i) {
                    a.push(Value::Null);
                }
                &mut cur[i]
            }
            Err(_) => {
                if cur.get(part).is_none() {
                    cur[part] = json!({});
                }
                &mut cur[part]
            }
        };
    }
    *cur = value;
}

fn cluster_errors(edits: &[(&str, Value)]) -> Vec<FieldError> {
    let mut doc = base_cluster();
    for (p, v) in edits {
        set(&mut doc, p, v.clone());
    }
    validate_ray_cluster(&serde_json::from_value(doc).unwrap())
}

fn service_errors(edits: &[(&str, Value)]) -> Vec<FieldError> {
    let mut doc = base_service();
    for (p, v) in edits {
        set(&mut doc, p, v.clone());
    }
    validate_ray_service(&serde_json::from_value(doc).unwrap())
}

#[test]
fn base_objects_are_valid() {
    assert_eq!(cluster_errors(&[]), vec![]);
    assert_eq!(service_errors(&[]), vec![]);
}

/// (case, edits, expected field, expected error type, text the message must contain)
type Case = (
    &'static str,
    Vec<(&'static str, Value)>,
    &'static str,
    ErrorType,
    &'static str,
);

fn check(case: &str, errs: &[FieldError], field: &str, kind: ErrorType, text: &str) {
    assert!(
        errs.iter()
            .any(|e| e.field == field && e.kind == kind && e.message.contains(text)),
        "{case}: expected {kind:?} at {field} containing {text:?}, got {errs:#?}"
    );
}

#[test]
fn ray_cluster_rules() {
    let head_env = "spec.headGroupSpec.template.spec.containers.0.env";
    let cases: Vec<Case> = vec![
        (
            "name too long",
            vec![("metadata.name", json!("a".repeat(54)))],
            "metadata.name",
            ErrorType::TooLong,
            "no more than 53",
        ),
        (
            "name not dns1035",
            vec![("metadata.name", json!("1abc"))],
            "metadata.name",
            ErrorType::Invalid,
            "DNS-1035",
        ),
        (
            "name uppercase",
            vec![("metadata.name", json!("Abc"))],
            "metadata.name",
            ErrorType::Invalid,
            "DNS-1035",
        ),
        (
            "no head container",
            vec![("spec.headGroupSpec.template.spec.containers", json!([]))],
            "spec.headGroupSpec.template.spec.containers",
            ErrorType::Required,
            "at least one container",
        ),
        (
            "no worker container",
            vec![("spec.workerGroupSpecs.0.template.spec.containers", json!([]))],
            "spec.workerGroupSpecs[0].template.spec.containers",
            ErrorType::Required,
            "at least one container",
        ),
        (
            "duplicate group",
            vec![(
                "spec.workerGroupSpecs.1",
                base_cluster()["spec"]["workerGroupSpecs"][0].clone(),
            )],
            "spec.workerGroupSpecs[1].groupName",
            ErrorType::Duplicate,
            "more than once",
        ),
        (
            "group named head",
            vec![("spec.workerGroupSpecs.0.groupName", json!("headgroup"))],
            "spec.workerGroupSpecs[0].groupName",
            ErrorType::Invalid,
            "reserved",
        ),
        (
            "empty group name",
            vec![("spec.workerGroupSpecs.0.groupName", json!(""))],
            "spec.workerGroupSpecs[0].groupName",
            ErrorType::Required,
            "must not be empty",
        ),
        (
            "negative replicas",
            vec![("spec.workerGroupSpecs.0.replicas", json!(-1))],
            "spec.workerGroupSpecs[0].replicas",
            ErrorType::Invalid,
            "negative replicas",
        ),
        (
            "negative min",
            vec![("spec.workerGroupSpecs.0.minReplicas", json!(-1))],
            "spec.workerGroupSpecs[0].minReplicas",
            ErrorType::Invalid,
            "negative minReplicas",
        ),
        (
            "negative max",
            vec![("spec.workerGroupSpecs.0.maxReplicas", json!(-2))],
            "spec.workerGroupSpecs[0].maxReplicas",
            ErrorType::Invalid,
            "negative maxReplicas",
        ),
        (
            "min > max",
            vec![("spec.workerGroupSpecs.0.minReplicas", json!(6))],
            "spec.workerGroupSpecs[0].minReplicas",
            ErrorType::Invalid,
            "greater than maxReplicas 5",
        ),
        (
            "numOfHosts 0",
            vec![("spec.workerGroupSpecs.0.numOfHosts", json!(0))],
            "spec.workerGroupSpecs[0].numOfHosts",
            ErrorType::Invalid,
            "at least 1",
        ),
        (
            "resources twice",
            vec![
                ("spec.workerGroupSpecs.0.rayStartParams", json!({"num-cpus": "1"})),
                ("spec.workerGroupSpecs.0.resources", json!({"TPU": "4"})),
            ],
            "spec.workerGroupSpecs[0].resources",
            ErrorType::Invalid,
            "both rayStartParams and resources",
        ),
        (
            "labels in rayStartParams",
            vec![("spec.headGroupSpec.rayStartParams", json!({"labels": "a=b"}))],
            "spec.headGroupSpec.rayStartParams[labels]",
            ErrorType::Forbidden,
            "labels field",
        ),
        (
            "bad label key",
            vec![("spec.headGroupSpec.labels", json!({"bad key": "v"}))],
            "spec.headGroupSpec.labels[bad key]",
            ErrorType::Invalid,
            "qualified name",
        ),
        (
            "bad label value",
            vec![("spec.headGroupSpec.labels", json!({"k": "-v"}))],
            "spec.headGroupSpec.labels[k]",
            ErrorType::Invalid,
            "invalid label value",
        ),
        (
            "idle timeout needs v2",
            vec![("spec.workerGroupSpecs.0.idleTimeoutSeconds", json!(30))],
            "spec.workerGroupSpecs[0].idleTimeoutSeconds",
            ErrorType::Invalid,
            "autoscaler v2 is not enabled",
        ),
        (
            "negative idle timeout",
            vec![("spec.workerGroupSpecs.0.idleTimeoutSeconds", json!(-1))],
            "spec.workerGroupSpecs[0].idleTimeoutSeconds",
            ErrorType::Invalid,
            "non-negative",
        ),
        (
            "priority needs 2.56",
            vec![("spec.workerGroupSpecs.0.priority", json!(1))],
            "spec.workerGroupSpecs[0].priority",
            ErrorType::Invalid,
            "minimum Ray version is 2.56.0",
        ),
        (
            "suspended group with autoscaler",
            vec![
                ("spec.enableInTreeAutoscaling", json!(true)),
                ("spec.workerGroupSpecs.0.suspend", json!(true)),
            ],
            "spec.workerGroupSpecs[0].suspend",
            ErrorType::Forbidden,
            "autoscaler enabled",
        ),
        (
            "ft annotation and options",
            vec![
                ("metadata.annotations", json!({"ray.io/ft-enabled": "true"})),
                (
                    "spec.gcsFaultToleranceOptions",
                    json!({"redisAddress": "redis:6379"}),
                ),
            ],
            "spec.gcsFaultToleranceOptions",
            ErrorType::Invalid,
            "both set",
        ),
        (
            "redis address env without ft",
            vec![(
                head_env,
                json!([{"name": "RAY_REDIS_ADDRESS", "value": "r:6379"}]),
            )],
            "spec.gcsFaultToleranceOptions",
            ErrorType::Invalid,
            "implicitly enables",
        ),
        (
            "redis-password with ft",
            vec![
                ("spec.gcsFaultToleranceOptions", json!({"redisAddress": "r:6379"})),
                (
                    "spec.headGroupSpec.rayStartParams",
                    json!({"redis-password": "x"}),
                ),
            ],
            "spec.headGroupSpec.rayStartParams[redis-password]",
            ErrorType::Forbidden,
            "redisPassword",
        ),
        (
            "REDIS_PASSWORD env with ft",
            vec![
                ("spec.gcsFaultToleranceOptions", json!({"redisAddress": "r:6379"})),
                (head_env, json!([{"name": "REDIS_PASSWORD", "value": "x"}])),
            ],
            "spec.headGroupSpec.template.spec.containers[0].env",
            ErrorType::Forbidden,
            "REDIS_PASSWORD",
        ),
        (
            "external storage annotation with ft",
            vec![
                ("spec.gcsFaultToleranceOptions", json!({"redisAddress": "r:6379"})),
                (
                    "metadata.annotations",
                    json!({"ray.io/external-storage-namespace": "ns"}),
                ),
            ],
            "metadata.annotations[ray.io/external-storage-namespace]",
            ErrorType::Forbidden,
            "externalStorageNamespace",
        ),
        (
            "storage with redis backend",
            vec![(
                "spec.gcsFaultToleranceOptions",
                json!({"redisAddress": "r:6379", "storage": {"size": "1Gi"}}),
            )],
            "spec.gcsFaultToleranceOptions.storage",
            ErrorType::Forbidden,
            "rocksdb",
        ),
        (
            "rocksdb needs gate",
            vec![("spec.gcsFaultToleranceOptions", json!({"backend": "rocksdb"}))],
            "spec.gcsFaultToleranceOptions.backend",
            ErrorType::Forbidden,
            "feature gate",
        ),
        (
            "rocksdb with redis address",
            vec![(
                "spec.gcsFaultToleranceOptions",
                json!({"backend": "rocksdb", "redisAddress": "r"}),
            )],
            "spec.gcsFaultToleranceOptions.redisAddress",
            ErrorType::Forbidden,
            "rocksdb",
        ),
        (
            "redis username param",
            vec![(
                "spec.headGroupSpec.rayStartParams",
                json!({"redis-username": "u"}),
            )],
            "spec.headGroupSpec.rayStartParams[redis-username]",
            ErrorType::Forbidden,
            "redisUsername",
        ),
        (
            "v2 env without autoscaler",
            vec![(
                head_env,
                json!([{"name": "RAY_enable_autoscaler_v2", "value": "1"}]),
            )],
            "spec.headGroupSpec.template.spec.containers[0].env",
            ErrorType::Invalid,
            "enableInTreeAutoscaling is false",
        ),
        (
            "version and v2 env",
            vec![
                ("spec.enableInTreeAutoscaling", json!(true)),
                ("spec.autoscalerOptions", json!({"version": "v2"})),
                (
                    head_env,
                    json!([{"name": "RAY_enable_autoscaler_v2", "value": "1"}]),
                ),
            ],
            "spec.headGroupSpec.template.spec.containers[0].env",
            ErrorType::Invalid,
            "use only the former",
        ),
        (
            "v2 restart policy",
            vec![
                ("spec.enableInTreeAutoscaling", json!(true)),
                ("spec.autoscalerOptions", json!({"version": "v2"})),
                (
                    "spec.workerGroupSpecs.0.template.spec.restartPolicy",
                    json!("Always"),
                ),
            ],
            "spec.workerGroupSpecs[0].template.spec.restartPolicy",
            ErrorType::Invalid,
            "Never or unset",
        ),
        (
            "autoscaler idle timeout",
            vec![("spec.autoscalerOptions", json!({"idleTimeoutSeconds": -5}))],
            "spec.autoscalerOptions.idleTimeoutSeconds",
            ErrorType::Invalid,
            "non-negative",
        ),
        (
            "autoscaler gen cmd env",
            vec![(
                "spec.autoscalerOptions",
                json!({"env": [{"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": "x"}]}),
            )],
            "spec.autoscalerOptions.env",
            ErrorType::Forbidden,
            "injects it",
        ),
        (
            "token auth without version",
            vec![
                ("spec.authOptions", json!({"mode": "token"})),
                ("spec.rayVersion", Value::Null),
            ],
            "spec.rayVersion",
            ErrorType::Required,
            "2.52.0",
        ),
        (
            "token auth old ray",
            vec![
                ("spec.authOptions", json!({"mode": "token"})),
                ("spec.rayVersion", json!("2.51.0")),
            ],
            "spec.rayVersion",
            ErrorType::Invalid,
            "2.52.0 or later",
        ),
        (
            "k8s auth old ray",
            vec![(
                "spec.authOptions",
                json!({"mode": "token", "enableK8sTokenAuth": true}),
            )],
            "spec.rayVersion",
            ErrorType::Invalid,
            "2.55.0 or later",
        ),
        (
            "k8s auth with secret",
            vec![
                ("spec.rayVersion", json!("2.55.0")),
                (
                    "spec.authOptions",
                    json!({"mode": "token", "enableK8sTokenAuth": true, "secretName": "s"}),
                ),
            ],
            "spec.authOptions.secretName",
            ErrorType::Invalid,
            "enableK8sTokenAuth",
        ),
        (
            "k8s auth without token",
            vec![("spec.authOptions", json!({"enableK8sTokenAuth": true}))],
            "spec.authOptions.enableK8sTokenAuth",
            ErrorType::Invalid,
            "mode token",
        ),
        (
            "managedBy",
            vec![("spec.managedBy", json!("someone-else"))],
            "spec.managedBy",
            ErrorType::NotSupported,
            "must be either",
        ),
        (
            "history server gate",
            vec![("spec.historyServerOptions", json!({}))],
            "spec.historyServerOptions",
            ErrorType::Forbidden,
            "feature gate",
        ),
        (
            "network policy gate",
            vec![("spec.networkPolicy", json!({}))],
            "spec.networkPolicy",
            ErrorType::Forbidden,
            "feature gate",
        ),
        (
            "tls gate",
            vec![("spec.tlsOptions", json!({"enabled": true}))],
            "spec.tlsOptions",
            ErrorType::Forbidden,
            "feature gate",
        ),
        (
            "upgradeStrategy on child cluster",
            vec![
                (
                    "metadata.labels",
                    json!({"ray.io/originated-from-crd": "RayService"}),
                ),
                ("spec.upgradeStrategy", json!({"type": "Recreate"})),
            ],
            "spec.upgradeStrategy",
            ErrorType::Forbidden,
            "created by RayService",
        ),
        (
            "suspending and suspended",
            vec![(
                "status",
                json!({"conditions": [
            {"type": "RayClusterSuspending", "status": "True", "reason": "x", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "RayClusterSuspended", "status": "True", "reason": "x", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            )],
            "status.conditions",
            ErrorType::Invalid,
            "must not both be True",
        ),
    ];
    for (case, edits, field, kind, text) in cases {
        check(case, &cluster_errors(&edits), field, kind, text);
    }
}

#[test]
fn ray_service_rules() {
    let incr = |opts: Value| {
        vec![
            (
                "spec.upgradeStrategy",
                json!({"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": opts}),
            ),
            ("spec.rayClusterConfig.enableInTreeAutoscaling", json!(true)),
        ]
    };
    let good = json!({"maxSurgePercent": 20, "stepSizePercent": 10, "intervalSeconds": 30, "gatewayClassName": "istio"});
    assert_eq!(
        service_errors(&incr(good.clone())),
        vec![],
        "a complete incremental upgrade is valid"
    );
    let with = |k: &str, v: Value| {
        let mut o = good.clone();
        o[k] = v;
        incr(o)
    };
    let opts = "spec.upgradeStrategy.clusterUpgradeOptions";
    type ServiceCase = (
        &'static str,
        Vec<(&'static str, Value)>,
        String,
        ErrorType,
        &'static str,
    );
    let cases: Vec<ServiceCase> = vec![
        (
            "name too long",
            vec![("metadata.name", json!("a".repeat(48)))],
            "metadata.name".into(),
            ErrorType::TooLong,
            "no more than 47",
        ),
        (
            "name not dns1035",
            vec![("metadata.name", json!("a_b"))],
            "metadata.name".into(),
            ErrorType::Invalid,
            "DNS-1035",
        ),
        (
            "bad timeout",
            vec![(
                "metadata.annotations",
                json!({"ray.io/initializing-timeout": "soon"}),
            )],
            "metadata.annotations[ray.io/initializing-timeout]".into(),
            ErrorType::Invalid,
            "invalid format",
        ),
        (
            "zero timeout",
            vec![(
                "metadata.annotations",
                json!({"ray.io/initializing-timeout": "0"}),
            )],
            "metadata.annotations[ray.io/initializing-timeout]".into(),
            ErrorType::Invalid,
            "positive",
        ),
        (
            "negative duration",
            vec![(
                "metadata.annotations",
                json!({"ray.io/initializing-timeout": "-5m"}),
            )],
            "metadata.annotations[ray.io/initializing-timeout]".into(),
            ErrorType::Invalid,
            "positive duration",
        ),
        (
            "bad upgrade deadline",
            vec![(
                "metadata.annotations",
                json!({"quotagate.io/upgrade-deadline": "a while"}),
            )],
            "metadata.annotations[quotagate.io/upgrade-deadline]".into(),
            ErrorType::Invalid,
            "invalid format",
        ),
        (
            "cluster rules apply under rayClusterConfig",
            vec![("spec.rayClusterConfig.workerGroupSpecs.0.minReplicas", json!(9))],
            "spec.rayClusterConfig.workerGroupSpecs[0].minReplicas".into(),
            ErrorType::Invalid,
            "greater than maxReplicas",
        ),
        (
            "k8s token auth",
            vec![
                (
                    "spec.rayClusterConfig.authOptions",
                    json!({"mode": "token", "enableK8sTokenAuth": true}),
                ),
                ("spec.rayClusterConfig.rayVersion", json!("2.56.0")),
            ],
            "spec.rayClusterConfig.authOptions.enableK8sTokenAuth".into(),
            ErrorType::Forbidden,
            "not supported for RayService",
        ),
        (
            "head service name",
            vec![(
                "spec.rayClusterConfig.headGroupSpec.headService",
                json!({"metadata": {"name": "x"}}),
            )],
            "spec.rayClusterConfig.headGroupSpec.headService.metadata.name".into(),
            ErrorType::Forbidden,
            "must not be set",
        ),
        (
            "recreate on child",
            vec![(
                "spec.rayClusterConfig.upgradeStrategy",
                json!({"type": "Recreate"}),
            )],
            "spec.rayClusterConfig.upgradeStrategy".into(),
            ErrorType::Forbidden,
            "use spec.upgradeStrategy",
        ),
        (
            "negative deletion delay",
            vec![("spec.rayClusterDeletionDelaySeconds", json!(-1))],
            "spec.rayClusterDeletionDelaySeconds".into(),
            ErrorType::Invalid,
            "non-negative",
        ),
        (
            "managedBy",
            vec![("spec.managedBy", json!("x"))],
            "spec.managedBy".into(),
            ErrorType::NotSupported,
            "must be either",
        ),
        (
            "serve config not yaml",
            vec![("spec.serveConfigV2", json!("applications: [\n"))],
            "spec.serveConfigV2".into(),
            ErrorType::Invalid,
            "not valid YAML",
        ),
        (
            "serve config not a mapping",
            vec![("spec.serveConfigV2", json!("- a\n- b\n"))],
            "spec.serveConfigV2".into(),
            ErrorType::Invalid,
            "mapping",
        ),
        (
            "incremental needs autoscaler",
            vec![(
                "spec.upgradeStrategy",
                json!({"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": good}),
            )],
            "spec.rayClusterConfig.enableInTreeAutoscaling".into(),
            ErrorType::Required,
            "autoscaler is required",
        ),
        (
            "incremental needs options",
            vec![
                (
                    "spec.upgradeStrategy",
                    json!({"type": "NewClusterWithIncrementalUpgrade"}),
                ),
                ("spec.rayClusterConfig.enableInTreeAutoscaling", json!(true)),
            ],
            opts.to_string(),
            ErrorType::Required,
            "are required",
        ),
        (
            "surge > 100",
            with("maxSurgePercent", json!(101)),
            format!("{opts}.maxSurgePercent"),
            ErrorType::Invalid,
            "between 0 and 100",
        ),
        (
            "step missing",
            with("stepSizePercent", Value::Null),
            format!("{opts}.stepSizePercent"),
            ErrorType::Required,
            "between 0 and 100",
        ),
        (
            "step < 0",
            with("stepSizePercent", json!(-1)),
            format!("{opts}.stepSizePercent"),
            ErrorType::Invalid,
            "between 0 and 100",
        ),
        (
            "step > surge",
            with("stepSizePercent", json!(30)),
            format!("{opts}.stepSizePercent"),
            ErrorType::Invalid,
            "less than or equal to maxSurgePercent",
        ),
        (
            "interval 0",
            with("intervalSeconds", json!(0)),
            format!("{opts}.intervalSeconds"),
            ErrorType::Invalid,
            "greater than 0",
        ),
        (
            "interval missing",
            with("intervalSeconds", Value::Null),
            format!("{opts}.intervalSeconds"),
            ErrorType::Required,
            "greater than 0",
        ),
        (
            "gateway class missing",
            with("gatewayClassName", json!("")),
            format!("{opts}.gatewayClassName"),
            ErrorType::Required,
            "gatewayClassName is required",
        ),
    ];
    for (case, edits, field, kind, text) in cases {
        check(case, &service_errors(&edits), &field, kind, text);
    }
    // Attached to an existing Gateway or HTTPRoute: no Gateway of its own, no class needed; a blank
    // annotation attaches nothing and still needs one.
    for (key, value, ok) in [
        ("quotagate.io/gateway-ref", "infra/shared", true),
        ("quotagate.io/http-route-name", "my-route", true),
        ("quotagate.io/gateway-ref", " ", false),
    ] {
        let mut edits = with("gatewayClassName", Value::Null);
        edits.push(("metadata.annotations", json!({ key: value })));
        let errs = service_errors(&edits);
        assert_eq!(errs.is_empty(), ok, "{key}={value:?}: {errs:?}");
    }
}

#[test]
fn absent_min_max_take_crd_defaults() {
    let edits = [
        ("spec.workerGroupSpecs.0.maxReplicas", Value::Null),
        ("spec.workerGroupSpecs.0.minReplicas", json!(50)),
    ];
    assert_eq!(cluster_errors(&edits), vec![], "maxReplicas defaults to 2^31-1");
    let edits = [
        ("spec.workerGroupSpecs.0.minReplicas", Value::Null),
        ("spec.workerGroupSpecs.0.maxReplicas", json!(0)),
    ];
    assert_eq!(cluster_errors(&edits), vec![], "minReplicas defaults to 0");
}

#[test]
fn surge_defaults_to_100_so_any_step_up_to_100_is_valid() {
    let edits = vec![
        (
            "spec.upgradeStrategy",
            json!({"type": "NewClusterWithIncrementalUpgrade",
            "clusterUpgradeOptions": {"stepSizePercent": 100, "intervalSeconds": 1, "gatewayClassName": "g"}}),
        ),
        ("spec.rayClusterConfig.enableInTreeAutoscaling", json!(true)),
    ];
    assert_eq!(service_errors(&edits), vec![]);
}

/// KubeRay's embedded-GCS sample with its gate on: refused, because the PVC it asks the operator for is
/// what quotagate does not create (the message says so, not that a gate is off); with the user's own
/// claim it is valid.
#[test]
fn embedded_gcs_sample_with_its_gate_on() {
    let (_, doc) = kuberay_docs()
        .into_iter()
        .find(|(f, d)| f == "ray-cluster.embedded-gcs-ft.yaml" && d["kind"] == "RayCluster")
        .unwrap();
    let rc: RayCluster = serde_json::from_value(doc).unwrap();
    let gates = RayFeatureGates {
        embedded_gcs_storage: true,
        ..RayFeatureGates::default()
    };
    let errs = validate_ray_cluster_spec_with(&rc.spec, &BTreeMap::new(), &Path::root("spec"), gates);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].message.contains("not implemented by quotagate"),
        "{errs:?}"
    );
    assert!(
        !errs[0].message.contains("feature gate to be enabled"),
        "{errs:?}"
    );
    let mut own = rc.clone();
    let storage = own
        .spec
        .gcs_fault_tolerance_options
        .as_mut()
        .unwrap()
        .storage
        .as_mut()
        .unwrap();
    *storage = serde_json::from_value(json!({"claimName": "my-gcs-pvc"})).unwrap();
    let errs = validate_ray_cluster_spec_with(&own.spec, &BTreeMap::new(), &Path::root("spec"), gates);
    assert_eq!(errs, vec![]);
}

/// Each alpha field of KubeRay v1.7 with its gate off is refused in KubeRay's words
/// (`utils/validation.go`); with the gate on, as not implemented by quotagate.
#[test]
fn alpha_fields_gate_off_then_on() {
    let rc = |field: &str| -> RayCluster {
        let mut v = base_cluster();
        v["spec"][field] = json!({});
        serde_json::from_value(v).unwrap()
    };
    let all_on = crate::api::ray::features::parse(
        "RayClusterHistoryServer=true,RayClusterNetworkPolicy=true,RayClusterMTLS=true",
    )
    .unwrap();
    for (field, kuberay) in [
        (
            "historyServerOptions",
            "RayClusterHistoryServer feature gate is not enabled",
        ),
        (
            "networkPolicy",
            "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
        ),
        (
            "tlsOptions",
            "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
        ),
    ] {
        let rc = rc(field);
        let at = |gates| {
            validate_ray_cluster_spec_with(&rc.spec, &BTreeMap::new(), &Path::root("spec"), gates)
                .into_iter()
                .find(|e| e.field == format!("spec.{field}"))
                .unwrap_or_else(|| panic!("{field} refused"))
                .message
        };
        assert_eq!(at(RayFeatureGates::default()), kuberay);
        assert!(at(all_on).contains("not implemented by quotagate"), "{field}");
    }
}

#[test]
fn initializing_timeout_formats() {
    for (raw, secs) in [
        ("30m", 1800.0),
        ("1h30m", 5400.0),
        ("90", 90.0),
        ("1.5s", 1.5),
        ("500ms", 0.5),
    ] {
        assert_eq!(
            parse_initializing_timeout(raw).unwrap().as_secs_f64(),
            secs,
            "{raw}"
        );
    }
    for raw in ["", "m", "5", "abc", "5x", "0s", "-1"] {
        let ok = raw == "5";
        assert_eq!(parse_initializing_timeout(raw).is_ok(), ok, "{raw}");
    }
}

#[test]
fn every_sample_validates_clean() {
    let mut checked = 0;
    for (file, doc) in kuberay_docs() {
        let errs = match doc["kind"].as_str() {
            Some("RayCluster") => validate_ray_cluster(&serde_json::from_value(doc).unwrap()),
            Some("RayService") => validate_ray_service(&serde_json::from_value(doc).unwrap()),
            _ => continue,
        };
        checked += 1;
        if file == "ray-cluster.embedded-gcs-ft.yaml" {
            // Genuinely invalid under KubeRay v1.7 defaults: the rocksdb backend needs the alpha
            // GCSFaultToleranceEmbeddedStorage gate, which is off unless the operator enables it.
            let only: Vec<_> = errs.iter().map(|e| (e.field.as_str(), e.kind)).collect();
            assert_eq!(
                only,
                [("spec.gcsFaultToleranceOptions.backend", ErrorType::Forbidden)],
                "{file}"
            );
            continue;
        }
        assert_eq!(errs, vec![], "{file}");
    }
    // The fixtures hold 15 RayClusters and RayServices, the upstream samples (where present) 33 more.
    let want = if crate::api::ray::roundtrip_tests::upstream_dir().is_some() {
        48
    } else {
        15
    };
    assert!(checked >= want, "only {checked} samples checked");
}

/// KubeRay `utils/validation.go`: with RayJobDeletionPolicy off, a worker group cannot be suspended.
#[test]
fn worker_group_suspend_needs_the_job_deletion_policy_gate() {
    let mut v = base_cluster();
    v["spec"]["workerGroupSpecs"][0]["suspend"] = json!(true);
    let rc: RayCluster = serde_json::from_value(v).unwrap();
    let at = |gates| validate_ray_cluster_spec_with(&rc.spec, &BTreeMap::new(), &Path::root("spec"), gates);
    assert_eq!(at(RayFeatureGates::default()), vec![]);
    let off = crate::api::ray::features::parse("RayJobDeletionPolicy=false").unwrap();
    let errs = at(off);
    assert!(
        errs.iter().any(|e| e
            .message
            .contains("can be suspended only when the RayJobDeletionPolicy feature gate is enabled")),
        "{errs:?}"
    );
}

/// Source: KubeRay `ray-operator/test/e2erayservice/rayservice_validation_test.go` TestRayServiceValidation,
/// "RayService name too long with 48 characters": the apply succeeds (stored); the controller reports
/// `ValidationFailed` with `ValidateRayServiceMetadata`'s message (`utils/validation.go`). 47 fits.
#[test]
fn a_48_character_rayservice_name_is_stored_and_reported_with_kuberays_message() {
    let mut doc = base_service();
    set(&mut doc, "metadata.name", json!("a".repeat(48)));
    let rs: RayService = serde_json::from_value(doc).unwrap();
    let errs = validate_ray_service(&rs);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(ray_service_stored_anyway(&errs[0]), "stored: {errs:?}");
    let mut doc = serde_json::to_value(&rs).unwrap();
    doc["metadata"]["namespace"] = json!("default");
    assert_eq!(
        crate::api::on_write::admit(crate::api::on_write::Operation::Create, &mut doc, None),
        Ok(()),
        "stored"
    );
    assert_eq!(
        ray_service_name_too_long(&"a".repeat(48)).as_deref(),
        Some("The RayService metadata is invalid: RayService name should be no more than 47 characters")
    );
    assert_eq!(ray_service_name_too_long(&"a".repeat(47)), None);
    // The other name rule is not stored anyway.
    let mut doc = base_service();
    set(&mut doc, "metadata.name", json!("a_b"));
    let rs: RayService = serde_json::from_value(doc).unwrap();
    assert!(!validate_ray_service(&rs).iter().any(ray_service_stored_anyway));
}
