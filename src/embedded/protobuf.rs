//! Decodes the protobuf request bodies kubectl's typed commands send (`create role|rolebinding|service|
//! serviceaccount|configmap|secret|namespace|priorityclass …`) into the JSON object they stand for, for every
//! built-in kind the server serves. Nothing here knows a kind: the message is read through the Kubernetes
//! .proto schema (vendored in `vendor/k8s-proto/k8s`, compiled into a descriptor set by `build.rs`) and written as
//! Kubernetes JSON, where a handful of apimachinery types have their own JSON form (Time, Quantity,
//! IntOrString, RawExtension, …). The reply is JSON, which kubectl accepts.

use std::sync::LazyLock;

use base64::Engine;
use prost_reflect::{DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value as Pb};
use serde_json::{Map, Value, json};

use super::registry::ResourceInfo;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    #[error("protobuf body does not start with the k8s\\0 magic")]
    Magic,
    #[error("malformed protobuf body: {0}")]
    Malformed(String),
    #[error("protobuf request bodies are decoded only for built-in kinds, not {0}; send JSON")]
    Unsupported(String),
    #[error("the protobuf body holds a {found}, but the request is for a {expected}")]
    KindMismatch { found: String, expected: String },
}

static POOL: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/k8s.fds"))[..])
        .map_err(|e| e.to_string())
});

/// The proto package of a built-in API group: `""` is core, otherwise the group's first label
/// (`rbac.authorization.k8s.io` -> `rbac`), as the vendored files name them.
fn message_name(info: &ResourceInfo) -> String {
    let group = if info.group.is_empty() {
        "core"
    } else {
        info.group.split('.').next().unwrap_or_default()
    };
    format!("api.{group}.{}.{}", info.version, info.kind)
}

fn descriptor(name: &str) -> Result<MessageDescriptor, ProtobufError> {
    let pool = POOL
        .as_ref()
        .map_err(|e| ProtobufError::Malformed(format!("the Kubernetes schema did not load: {e}")))?;
    pool.get_message_by_name(name)
        .ok_or_else(|| ProtobufError::Unsupported(name.to_string()))
}

/// Decodes a `k8s\0` + runtime.Unknown body into the JSON object it stands for.
pub fn decode(body: &[u8], info: &ResourceInfo) -> Result<Value, ProtobufError> {
    if info.is_crd {
        return Err(ProtobufError::Unsupported(info.qualified_kind()));
    }
    let rest = body.strip_prefix(b"k8s\0").ok_or(ProtobufError::Magic)?;
    let unknown = DynamicMessage::decode(descriptor("apimachinery.pkg.runtime.Unknown")?, rest)
        .map_err(|e| ProtobufError::Malformed(e.to_string()))?;
    let text = |m: &DynamicMessage, f: &str| {
        m.get_field_by_name(f)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let type_meta = unknown
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned());
    let (api_version, kind) = type_meta
        .map(|t| (text(&t, "apiVersion"), text(&t, "kind")))
        .unwrap_or_default();
    if !kind.is_empty() && kind != info.kind {
        return Err(ProtobufError::KindMismatch {
            found: kind,
            expected: info.kind.clone(),
        });
    }
    let raw = unknown
        .get_field_by_name("raw")
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    let msg = DynamicMessage::decode(descriptor(&message_name(info))?, raw)
        .map_err(|e| ProtobufError::Malformed(e.to_string()))?;
    let mut obj = match message(&msg)? {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let api_version = if api_version.is_empty() {
        info.api_version()
    } else {
        api_version
    };
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(info.kind));
    Ok(Value::Object(obj))
}

/// One message as Kubernetes JSON: the apimachinery types with a JSON form of their own, otherwise an
/// object of the fields that were sent. Go's protobuf writes every non-pointer field, empty or not, where
/// its JSON leaves them out; empty strings are therefore left out (the same meaning in Go), and so are the
/// zero numbers and `false` of the non-pointer `omitempty` fields ([`OMITTED_WHEN_ZERO`]); a pointer field's
/// zero was set by the client and is kept.
fn message(m: &DynamicMessage) -> Result<Value, ProtobufError> {
    let field = |name: &str| m.get_field_by_name(name);
    Ok(match m.descriptor().full_name() {
        "apimachinery.pkg.apis.meta.v1.Time" => time(m, false),
        "apimachinery.pkg.apis.meta.v1.MicroTime" => time(m, true),
        "apimachinery.pkg.api.resource.Quantity" => field("string")
            .and_then(|v| v.as_str().map(|s| json!(s)))
            .unwrap_or(Value::Null),
        "apimachinery.pkg.apis.meta.v1.Duration" => json!(go_duration(
            field("duration").and_then(|v| v.as_i64()).unwrap_or(0)
        )),
        "apimachinery.pkg.util.intstr.IntOrString" => match field("type").and_then(|v| v.as_i64()) {
            Some(1) => json!(
                field("strVal")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            _ => json!(field("intVal").and_then(|v| v.as_i32()).unwrap_or(0)),
        },
        "apimachinery.pkg.runtime.RawExtension" | "apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            let name = if m.descriptor().full_name().ends_with("FieldsV1") {
                "Raw"
            } else {
                "raw"
            };
            let raw = field(name)
                .and_then(|v| v.as_bytes().cloned())
                .unwrap_or_default();
            if raw.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&raw)
                    .map_err(|e| ProtobufError::Malformed(format!("embedded JSON: {e}")))?
            }
        }
        _ => {
            let mut out = Map::new();
            let message = m.descriptor().full_name().to_string();
            for (f, v) in m.fields() {
                let v = value(v)?;
                let zero = v.as_bool() == Some(false) || v.as_f64() == Some(0.0);
                if v.is_null()
                    || v.as_str() == Some("")
                    || (zero && omitted_when_zero(&message, f.json_name()))
                {
                    continue;
                }
                out.insert(f.json_name().to_string(), v);
            }
            Value::Object(out)
        }
    })
}

fn value(v: &Pb) -> Result<Value, ProtobufError> {
    Ok(match v {
        Pb::Bool(b) => json!(b),
        Pb::I32(n) | Pb::EnumNumber(n) => json!(n),
        Pb::I64(n) => json!(n),
        Pb::U32(n) => json!(n),
        Pb::U64(n) => json!(n),
        Pb::F32(n) => json!(n),
        Pb::F64(n) => json!(n),
        Pb::String(s) => json!(s),
        Pb::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        Pb::Message(m) => message(m)?,
        Pb::List(items) => Value::Array(items.iter().map(value).collect::<Result<_, _>>()?),
        Pb::Map(entries) => {
            // Sorted, so the same body always stores the same JSON.
            let mut keys: Vec<&MapKey> = entries.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, value(&entries[k])?);
            }
            Value::Object(out)
        }
    })
}

/// meta/v1 Time is RFC 3339 to the second, MicroTime to the microsecond; Go's zero time is null.
fn time(m: &DynamicMessage, micro: bool) -> Value {
    let seconds = m
        .get_field_by_name("seconds")
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    let nanos = m.get_field_by_name("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Ok(ts) = jiff::Timestamp::new(seconds, if micro { nanos - nanos % 1000 } else { 0 }) else {
        return Value::Null;
    };
    if micro {
        json!(format!("{}", ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ")))
    } else {
        json!(format!("{}", ts.strftime("%Y-%m-%dT%H:%M:%SZ")))
    }
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `150ms`, `0s`.
fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let ns = ns.unsigned_abs();
    if ns < 1_000 {
        return format!("{sign}{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{sign}{}µs", trim(ns as f64 / 1e3));
    }
    if ns < 1_000_000_000 {
        return format!("{sign}{}ms", trim(ns as f64 / 1e6));
    }
    let (h, rest) = (ns / 3_600_000_000_000, ns % 3_600_000_000_000);
    let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let s = trim(rest as f64 / 1e9);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, m) => format!("{sign}{m}m{s}s"),
        (h, m) => format!("{sign}{h}h{m}m{s}s"),
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.9}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Whether Go's JSON drops `field` of `message` when it is zero: a non-pointer `omitempty` number or bool.
fn omitted_when_zero(message: &str, field: &str) -> bool {
    OMITTED_WHEN_ZERO
        .binary_search_by(|e| {
            let (m, f) = e.rsplit_once('.').unwrap_or((e, ""));
            m.cmp(message).then(f.cmp(field))
        })
        .is_ok()
}

/// The non-pointer `omitempty` numbers and bools of the served kinds' Go types (`k8s.io/api` v0.36.3
/// `types.go` of each served group, and meta/v1's), as `message.jsonName`, sorted by message then field.
/// A zero there decodes to the Go zero value, which the real server's JSON leaves out.
const OMITTED_WHEN_ZERO: &[&str] = &[
    "api.admissionregistration.v1.ValidatingAdmissionPolicyStatus.observedGeneration",
    "api.apps.v1.DaemonSetSpec.minReadySeconds",
    "api.apps.v1.DaemonSetStatus.numberAvailable",
    "api.apps.v1.DaemonSetStatus.numberUnavailable",
    "api.apps.v1.DaemonSetStatus.observedGeneration",
    "api.apps.v1.DaemonSetStatus.updatedNumberScheduled",
    "api.apps.v1.DeploymentSpec.minReadySeconds",
    "api.apps.v1.DeploymentSpec.paused",
    "api.apps.v1.DeploymentStatus.availableReplicas",
    "api.apps.v1.DeploymentStatus.observedGeneration",
    "api.apps.v1.DeploymentStatus.readyReplicas",
    "api.apps.v1.DeploymentStatus.replicas",
    "api.apps.v1.DeploymentStatus.unavailableReplicas",
    "api.apps.v1.DeploymentStatus.updatedReplicas",
    "api.apps.v1.ReplicaSetSpec.minReadySeconds",
    "api.apps.v1.ReplicaSetStatus.availableReplicas",
    "api.apps.v1.ReplicaSetStatus.fullyLabeledReplicas",
    "api.apps.v1.ReplicaSetStatus.observedGeneration",
    "api.apps.v1.ReplicaSetStatus.readyReplicas",
    "api.apps.v1.StatefulSetSpec.minReadySeconds",
    "api.apps.v1.StatefulSetStatus.currentReplicas",
    "api.apps.v1.StatefulSetStatus.observedGeneration",
    "api.apps.v1.StatefulSetStatus.readyReplicas",
    "api.apps.v1.StatefulSetStatus.updatedReplicas",
    "api.authorization.v1.SubjectAccessReviewStatus.denied",
    "api.batch.v1.JobStatus.active",
    "api.batch.v1.JobStatus.failed",
    "api.batch.v1.JobStatus.succeeded",
    "api.core.v1.AWSElasticBlockStoreVolumeSource.partition",
    "api.core.v1.AWSElasticBlockStoreVolumeSource.readOnly",
    "api.core.v1.AzureFilePersistentVolumeSource.readOnly",
    "api.core.v1.AzureFileVolumeSource.readOnly",
    "api.core.v1.CSIPersistentVolumeSource.readOnly",
    "api.core.v1.CephFSPersistentVolumeSource.readOnly",
    "api.core.v1.CephFSVolumeSource.readOnly",
    "api.core.v1.CinderPersistentVolumeSource.readOnly",
    "api.core.v1.CinderVolumeSource.readOnly",
    "api.core.v1.Container.stdin",
    "api.core.v1.Container.stdinOnce",
    "api.core.v1.Container.tty",
    "api.core.v1.ContainerImage.sizeBytes",
    "api.core.v1.ContainerPort.hostPort",
    "api.core.v1.ContainerStateTerminated.signal",
    "api.core.v1.EphemeralContainerCommon.stdin",
    "api.core.v1.EphemeralContainerCommon.stdinOnce",
    "api.core.v1.EphemeralContainerCommon.tty",
    "api.core.v1.Event.count",
    "api.core.v1.EventSeries.count",
    "api.core.v1.FCVolumeSource.readOnly",
    "api.core.v1.FlexPersistentVolumeSource.readOnly",
    "api.core.v1.FlexVolumeSource.readOnly",
    "api.core.v1.GCEPersistentDiskVolumeSource.partition",
    "api.core.v1.GCEPersistentDiskVolumeSource.readOnly",
    "api.core.v1.GlusterfsPersistentVolumeSource.readOnly",
    "api.core.v1.GlusterfsVolumeSource.readOnly",
    "api.core.v1.ISCSIPersistentVolumeSource.chapAuthDiscovery",
    "api.core.v1.ISCSIPersistentVolumeSource.chapAuthSession",
    "api.core.v1.ISCSIPersistentVolumeSource.readOnly",
    "api.core.v1.ISCSIVolumeSource.chapAuthDiscovery",
    "api.core.v1.ISCSIVolumeSource.chapAuthSession",
    "api.core.v1.ISCSIVolumeSource.readOnly",
    "api.core.v1.NFSVolumeSource.readOnly",
    "api.core.v1.NodeSpec.unschedulable",
    "api.core.v1.PersistentVolumeClaimVolumeSource.readOnly",
    "api.core.v1.PodAttachOptions.stderr",
    "api.core.v1.PodAttachOptions.stdin",
    "api.core.v1.PodAttachOptions.stdout",
    "api.core.v1.PodAttachOptions.tty",
    "api.core.v1.PodCondition.observedGeneration",
    "api.core.v1.PodExecOptions.stderr",
    "api.core.v1.PodExecOptions.stdin",
    "api.core.v1.PodExecOptions.stdout",
    "api.core.v1.PodExecOptions.tty",
    "api.core.v1.PodLogOptions.follow",
    "api.core.v1.PodLogOptions.insecureSkipTLSVerifyBackend",
    "api.core.v1.PodLogOptions.previous",
    "api.core.v1.PodLogOptions.timestamps",
    "api.core.v1.PodSpec.hostIPC",
    "api.core.v1.PodSpec.hostNetwork",
    "api.core.v1.PodSpec.hostPID",
    "api.core.v1.PodStatus.observedGeneration",
    "api.core.v1.PortworxVolumeSource.readOnly",
    "api.core.v1.Probe.failureThreshold",
    "api.core.v1.Probe.initialDelaySeconds",
    "api.core.v1.Probe.periodSeconds",
    "api.core.v1.Probe.successThreshold",
    "api.core.v1.Probe.timeoutSeconds",
    "api.core.v1.QuobyteVolumeSource.readOnly",
    "api.core.v1.RBDPersistentVolumeSource.readOnly",
    "api.core.v1.RBDVolumeSource.readOnly",
    "api.core.v1.ReplicationControllerSpec.minReadySeconds",
    "api.core.v1.ReplicationControllerStatus.availableReplicas",
    "api.core.v1.ReplicationControllerStatus.fullyLabeledReplicas",
    "api.core.v1.ReplicationControllerStatus.observedGeneration",
    "api.core.v1.ReplicationControllerStatus.readyReplicas",
    "api.core.v1.ScaleIOPersistentVolumeSource.readOnly",
    "api.core.v1.ScaleIOPersistentVolumeSource.sslEnabled",
    "api.core.v1.ScaleIOVolumeSource.readOnly",
    "api.core.v1.ScaleIOVolumeSource.sslEnabled",
    "api.core.v1.ServicePort.nodePort",
    "api.core.v1.ServiceSpec.healthCheckNodePort",
    "api.core.v1.ServiceSpec.publishNotReadyAddresses",
    "api.core.v1.StorageOSPersistentVolumeSource.readOnly",
    "api.core.v1.StorageOSVolumeSource.readOnly",
    "api.core.v1.VolumeMount.readOnly",
    "api.core.v1.VolumeMountStatus.readOnly",
    "api.events.v1.Event.deprecatedCount",
    "api.scheduling.v1.PriorityClass.globalDefault",
    "apimachinery.pkg.apis.meta.v1.Condition.observedGeneration",
    "apimachinery.pkg.apis.meta.v1.ListOptions.allowWatchBookmarks",
    "apimachinery.pkg.apis.meta.v1.ListOptions.limit",
    "apimachinery.pkg.apis.meta.v1.ListOptions.watch",
    "apimachinery.pkg.apis.meta.v1.ObjectMeta.generation",
    "apimachinery.pkg.apis.meta.v1.Status.code",
    "apimachinery.pkg.apis.meta.v1.StatusDetails.retryAfterSeconds",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::registry::Registry;

    fn ld(num: u8, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(num << 3) | 2];
        let mut n = b.len();
        while n >= 0x80 {
            v.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        v.push(n as u8);
        v.extend_from_slice(b);
        v
    }

    fn varint(num: u8, n: u64) -> Vec<u8> {
        let mut v = vec![num << 3];
        let mut n = n;
        while n >= 0x80 {
            v.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        v.push(n as u8);
        v
    }

    fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        [
            b"k8s\0".to_vec(),
            ld(
                1,
                &[ld(1, api_version.as_bytes()), ld(2, kind.as_bytes())].concat(),
            ),
            ld(2, raw),
        ]
        .concat()
    }

    fn info(group: &str, kind: &str) -> ResourceInfo {
        let r = Registry::new(&[]);
        r.all()
            .iter()
            .find(|i| i.group == group && i.kind == kind)
            .map(|i| (**i).clone())
            .expect("a built-in kind")
    }

    #[test]
    fn a_configmap_with_labels_data_and_binary_data() {
        // ObjectMeta: name=1, generateName=2 (sent empty, as Go sends it), labels=11 (map entries).
        let meta = [
            ld(1, b"cm1"),
            ld(2, b""),
            ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            ld(1, &meta),
            ld(2, &[ld(1, b"a"), ld(2, b"1")].concat()),
            ld(3, &[ld(1, b"b"), ld(2, &[0xff, 0])].concat()),
        ]
        .concat();
        let v = decode(&body("v1", "ConfigMap", &raw), &info("", "ConfigMap")).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"a": "1"}, "binaryData": {"b": "/wA="}, "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn a_role_and_a_service_decode_from_the_schema() {
        // Role: metadata=1, rules=2 {verbs=1, apiGroups=2, resources=3}.
        let rule = [ld(1, b"get"), ld(1, b"list"), ld(2, b""), ld(3, b"pods")].concat();
        let raw = [ld(1, &ld(1, b"reader")), ld(2, &rule)].concat();
        let v = decode(
            &body("rbac.authorization.k8s.io/v1", "Role", &raw),
            &info("rbac.authorization.k8s.io", "Role"),
        )
        .unwrap();
        assert_eq!(
            v["rules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        assert_eq!(v["apiVersion"], "rbac.authorization.k8s.io/v1");

        // Service: spec=2 {ports=1 {name=1, protocol=2, port=3, targetPort=4 IntOrString{type=1,intVal=2}}, type=4}.
        let target = [varint(1, 0), varint(2, 8080)].concat();
        let port = [ld(1, b"80-8080"), ld(2, b"TCP"), varint(3, 80), ld(4, &target)].concat();
        let raw = [
            ld(1, &ld(1, b"web")),
            ld(2, &[ld(1, &port), ld(4, b"ClusterIP")].concat()),
        ]
        .concat();
        let v = decode(&body("v1", "Service", &raw), &info("", "Service")).unwrap();
        assert_eq!(
            v["spec"],
            json!({"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}], "type": "ClusterIP"})
        );
    }

    #[test]
    fn go_zero_values_of_omitempty_fields_are_left_out() {
        // As Go's client writes a ClusterIP Service: nodePort=5, healthCheckNodePort=12 and
        // publishNotReadyAddresses=13 are non-pointer fields, sent as zero; the real server's JSON
        // has none of them.
        let target = [varint(1, 0), varint(2, 8080)].concat();
        let port = [ld(2, b"TCP"), varint(3, 80), ld(4, &target), varint(5, 0)].concat();
        let spec = [ld(1, &port), ld(4, b"ClusterIP"), varint(12, 0), varint(13, 0)].concat();
        let raw = [ld(1, &ld(1, b"web")), ld(2, &spec)].concat();
        let v = decode(&body("v1", "Service", &raw), &info("", "Service")).unwrap();
        assert_eq!(
            v["spec"],
            json!({"ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}], "type": "ClusterIP"})
        );
        // PodSpec terminationGracePeriodSeconds=4 is a pointer: a zero was set, and is kept.
        let raw = [ld(1, &ld(1, b"p")), ld(2, &varint(4, 0))].concat();
        let v = decode(&body("v1", "Pod", &raw), &info("", "Pod")).unwrap();
        assert_eq!(v["spec"], json!({"terminationGracePeriodSeconds": 0}));
        // The table is sorted as the lookup reads it.
        let key = |e: &&str| e.rsplit_once('.').map(|(m, f)| (m.to_string(), f.to_string()));
        assert!(OMITTED_WHEN_ZERO.windows(2).all(|w| key(&w[0]) < key(&w[1])));
    }

    #[test]
    fn a_deployment_decodes_from_the_apps_messages() {
        // Deployment (proto/api/apps/v1): metadata=1, spec=2 {replicas=1, selector=2 LabelSelector
        // {matchLabels=1}, template=3 PodTemplateSpec {metadata=1 {labels=11}, spec=2 {containers=2
        // {name=1, image=2}}}, strategy=4 {type=1}}, as `kubectl create deployment` sends it.
        let labels = ld(11, &[ld(1, b"app"), ld(2, b"d1")].concat());
        let container = [ld(1, b"nginx"), ld(2, b"nginx")].concat();
        let template = [ld(1, &labels), ld(2, &ld(2, &container))].concat();
        let spec = [
            varint(1, 2),
            ld(2, &ld(1, &[ld(1, b"app"), ld(2, b"d1")].concat())),
            ld(3, &template),
            ld(4, &[]),
        ]
        .concat();
        let raw = [ld(1, &ld(1, b"d1")), ld(2, &spec), ld(3, &[])].concat();
        let deployment = ResourceInfo {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            ..info("", "ConfigMap")
        };
        let v = decode(&body("apps/v1", "Deployment", &raw), &deployment).unwrap();
        assert_eq!(v["apiVersion"], "apps/v1");
        assert_eq!(v["metadata"]["name"], "d1");
        assert_eq!(v["spec"]["replicas"], 2);
        assert_eq!(v["spec"]["selector"], json!({"matchLabels": {"app": "d1"}}));
        assert_eq!(v["spec"]["template"]["metadata"]["labels"], json!({"app": "d1"}));
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx"}])
        );
    }

    #[test]
    fn apimachinery_types_have_their_json_form() {
        // Lease spec: holderIdentity=1, leaseDurationSeconds=2, acquireTime=3 MicroTime{seconds=1,nanos=2}.
        let micro = [varint(1, 1_700_000_000), varint(2, 123_456_789)].concat();
        let raw = [
            ld(1, &ld(1, b"l")),
            ld(2, &[ld(1, b"me"), varint(2, 15), ld(3, &micro)].concat()),
        ]
        .concat();
        let v = decode(
            &body("coordination.k8s.io/v1", "Lease", &raw),
            &info("coordination.k8s.io", "Lease"),
        )
        .unwrap();
        assert_eq!(
            v["spec"],
            json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "acquireTime": "2023-11-14T22:13:20.123456Z"})
        );
        assert_eq!(go_duration(3_723_500_000_000), "1h2m3.5s");
        assert_eq!(go_duration(150_000_000), "150ms");
        assert_eq!(go_duration(0), "0s");
    }

    #[test]
    fn bad_bodies_are_refused_with_the_reason() {
        let cm = info("", "ConfigMap");
        assert_eq!(decode(b"nope", &cm).unwrap_err(), ProtobufError::Magic);
        assert!(matches!(
            decode(b"k8s\0\x12\xff", &cm),
            Err(ProtobufError::Malformed(_))
        ));
        let err = decode(&body("v1", "Secret", &[]), &cm).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the protobuf body holds a Secret, but the request is for a ConfigMap"
        );
        let crd = ResourceInfo { is_crd: true, ..cm };
        assert!(matches!(
            decode(&body("v1", "ConfigMap", &[]), &crd),
            Err(ProtobufError::Unsupported(_))
        ));
    }

    #[test]
    fn every_built_in_kind_has_a_message_in_the_schema() {
        for i in Registry::new(&[]).all().iter().filter(|i| !i.is_crd) {
            descriptor(&message_name(i)).unwrap_or_else(|e| panic!("{}: {e}", i.qualified_kind()));
        }
    }
}
