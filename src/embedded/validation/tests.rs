//! Each bad object here was sent to a real kube-apiserver v1.36.3 (`scripts/control-plane.sh up`) and
//! to the embedded store; the expected status, message and causes are the real server's, copied from
//! its answers. The checks they exercise are ports of `pkg/apis/core/validation/validation.go`,
//! `pkg/apis/batch/validation`, `pkg/apis/coordination/validation`, `pkg/apis/discovery/validation`,
//! `pkg/apis/rbac/validation` and `pkg/apis/core/validation/events.go`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::super::admission::AllowAll;
use super::super::error::ApiError;
use super::super::registry::{ResourceInfo, builtins};
use super::super::store::{Store, StoreConfig};

fn info(group: &str, plural: &str) -> ResourceInfo {
    builtins()
        .into_iter()
        .find(|b| b.group == group && b.plural == plural)
        .expect("a built-in kind")
}

fn store() -> Store {
    // The store starts with the `default` namespace.
    Store::new(StoreConfig::default(), Arc::new(AllowAll))
}

/// The error a create of `obj` gets from the embedded store.
fn refused(group: &str, plural: &str, obj: Value) -> ApiError {
    match store().create(&info(group, plural), Some("default"), obj, false) {
        Ok(o) => panic!("stored: {o}"),
        Err(e) => e,
    }
}

fn causes(e: &ApiError) -> Vec<(String, String, String)> {
    e.details
        .causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

/// The real server's 422 message for `obj`, checked with the reason of each cause.
fn expect(group: &str, plural: &str, obj: Value, message: &str, reasons: &[&str]) {
    let e = refused(group, plural, obj);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{}", e.message);
    assert_eq!(e.message, message);
    let got: Vec<String> = causes(&e).into_iter().map(|c| c.0).collect();
    assert_eq!(got, reasons, "{message}");
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn c(extra: Value) -> Value {
    let mut v = json!({"name": "c", "image": "busybox"});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `ValidatePodSpec` / `validateContainers` / `validateContainerPorts`, as kube-apiserver v1.36.3 answered.
#[test]
fn pods_are_refused_in_the_real_servers_words() {
    expect(
        "",
        "pods",
        pod(
            "p1",
            json!({"restartPolicy": "Sometimes", "containers": [c(json!({}))]}),
        ),
        r#"Pod "p1" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never""#,
        &["FieldValueNotSupported"],
    );
    expect(
        "",
        "pods",
        pod("p2", json!({"containers": []})),
        r#"Pod "p2" is invalid: spec.containers: Required value"#,
        &["FieldValueRequired"],
    );
    expect(
        "",
        "pods",
        pod("p2b", json!({})),
        r#"Pod "p2b" is invalid: spec.containers: Required value"#,
        &["FieldValueRequired"],
    );
    expect(
        "",
        "pods",
        pod("p3", json!({"containers": [c(json!({"image": ""}))]})),
        r#"Pod "p3" is invalid: spec.containers[0].image: Required value"#,
        &["FieldValueRequired"],
    );
    expect(
        "",
        "pods",
        pod(
            "p4",
            json!({"containers": [c(json!({"resources": {"requests": {"cpu": "-1"}}}))]}),
        ),
        r#"Pod "p4" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod(
            "p4b",
            json!({"containers": [c(json!({"resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}))]}),
        ),
        r#"Pod "p4b" is invalid: [spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1, spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi]"#,
        &["FieldValueInvalid", "FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod("p5", json!({"containers": [c(json!({})), c(json!({}))]})),
        r#"Pod "p5" is invalid: spec.containers[1].name: Duplicate value: "c""#,
        &["FieldValueDuplicate"],
    );
    expect(
        "",
        "pods",
        pod("p6", json!({"containers": [c(json!({"name": "Bad_Name"}))]})),
        &format!(r#"Pod "p6" is invalid: spec.containers[0].name: Invalid value: "Bad_Name": {LABEL_MSG}"#),
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod("pd", json!({"containers": [c(json!({"name": "a.b"}))]})),
        r#"Pod "pd" is invalid: spec.containers[0].name: Invalid value: "a.b": must not contain dots"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod(
            "p7",
            json!({"containers": [c(json!({"ports": [{"containerPort": 700000, "protocol": "Bogus"}]}))]}),
        ),
        r#"Pod "p7" is invalid: [spec.containers[0].ports[0].containerPort: Invalid value: 700000: must be between 1 and 65535, inclusive, spec.containers[0].ports[0].protocol: Unsupported value: "Bogus": supported values: "SCTP", "TCP", "UDP"]"#,
        &["FieldValueInvalid", "FieldValueNotSupported"],
    );
    expect(
        "",
        "pods",
        pod(
            "p7c",
            json!({"containers": [c(json!({"ports": [{"containerPort": 80, "hostPort": -1, "name": "Bad_Port"}]}))]}),
        ),
        r#"Pod "p7c" is invalid: [spec.containers[0].ports[0].name: Invalid value: "Bad_Port": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive]"#,
        &["FieldValueInvalid", "FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod("p8", json!({"dnsPolicy": "Bogus", "containers": [c(json!({}))]})),
        r#"Pod "p8" is invalid: spec.dnsPolicy: Unsupported value: "Bogus": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None""#,
        &["FieldValueNotSupported"],
    );
    expect(
        "",
        "pods",
        pod("p9", json!({"containers": [c(json!({"image": " busybox"}))]})),
        r#"Pod "p9" is invalid: spec.containers[0].image: Invalid value: " busybox": must not have leading or trailing whitespace"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod(
            "p10",
            json!({"restartPolicy": "Sometimes", "containers": [c(json!({"image": ""}))]}),
        ),
        r#"Pod "p10" is invalid: [spec.containers[0].image: Required value, spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"]"#,
        &["FieldValueRequired", "FieldValueNotSupported"],
    );
    expect(
        "",
        "pods",
        pod(
            "p12",
            json!({"containers": [c(json!({"resources": {"requests": {"bogus": "1"}}}))]}),
        ),
        r#"Pod "p12" is invalid: [spec.containers[0].resources.requests[bogus]: Invalid value: "bogus": must be a standard resource type or fully qualified, spec.containers[0].resources.requests[bogus]: Invalid value: "bogus": must be a standard resource for containers]"#,
        &["FieldValueInvalid", "FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod(
            "p13",
            json!({"initContainers": [c(json!({}))], "containers": [c(json!({}))]}),
        ),
        r#"Pod "p13" is invalid: spec.initContainers[0].name: Duplicate value: "c""#,
        &["FieldValueDuplicate"],
    );
    expect(
        "",
        "pods",
        pod(
            "p14",
            json!({"activeDeadlineSeconds": 0, "containers": [c(json!({}))]}),
        ),
        r#"Pod "p14" is invalid: spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "pods",
        pod(
            "p15",
            json!({"nodeSelector": {"a": "bad value"}, "containers": [c(json!({}))]}),
        ),
        &format!(r#"Pod "p15" is invalid: spec.nodeSelector: Invalid value: "bad value": {LABEL_VALUE_MSG}"#),
        &["FieldValueInvalid"],
    );
}

fn svc(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

/// `ValidateService` / `validateServicePort`, as kube-apiserver v1.36.3 answered.
#[test]
fn services_are_refused_in_the_real_servers_words() {
    expect(
        "",
        "services",
        svc("s1", json!({"type": "Bogus", "ports": [{"port": 80}]})),
        r#"Service "s1" is invalid: spec.type: Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort""#,
        &["FieldValueNotSupported"],
    );
    expect(
        "",
        "services",
        svc("s2", json!({"ports": [{"port": 700000}]})),
        "Service \"s2\" is invalid: [spec.ports[0].port: Invalid value: 700000: must be between 1 and 65535, inclusive, spec.ports[0].targetPort: Invalid value: 700000: must be between 1 and 65535, inclusive]",
        &["FieldValueInvalid", "FieldValueInvalid"],
    );
    expect(
        "",
        "services",
        svc("s3", json!({"ports": [{"port": 80, "protocol": "Bogus"}]})),
        r#"Service "s3" is invalid: spec.ports[0].protocol: Unsupported value: "Bogus": supported values: "SCTP", "TCP", "UDP""#,
        &["FieldValueNotSupported"],
    );
    expect(
        "",
        "services",
        svc("s4", json!({"clusterIP": "bogus", "ports": [{"port": 80}]})),
        r#"Service "s4" is invalid: spec.clusterIPs[0]: Invalid value: "bogus": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "services",
        svc("s5", json!({"selector": {"a": "b"}})),
        r#"Service "s5" is invalid: spec.ports: Required value"#,
        &["FieldValueRequired"],
    );
    expect(
        "",
        "services",
        svc("s7", json!({"ports": [{"port": 80}, {"port": 81}]})),
        r#"Service "s7" is invalid: [spec.ports[0].name: Required value, spec.ports[1].name: Required value]"#,
        &["FieldValueRequired", "FieldValueRequired"],
    );
    expect(
        "",
        "services",
        svc(
            "s8",
            json!({"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}),
        ),
        r#"Service "s8" is invalid: spec.ports[1].name: Duplicate value: "a""#,
        &["FieldValueDuplicate"],
    );
    expect(
        "",
        "services",
        svc("s9b", json!({"ports": [{"port": 80, "targetPort": "Bad_Name"}]})),
        r#"Service "s9b" is invalid: spec.ports[0].targetPort: Invalid value: "Bad_Name": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "services",
        svc("s10", json!({"ports": [{"port": 80, "nodePort": 30001}]})),
        "Service \"s10\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
        &["FieldValueForbidden"],
    );
    expect(
        "",
        "services",
        svc(
            "s11",
            json!({"sessionAffinity": "Bogus", "ports": [{"port": 80}]}),
        ),
        r#"Service "s11" is invalid: spec.sessionAffinity: Unsupported value: "Bogus": supported values: "ClientIP", "None""#,
        &["FieldValueNotSupported"],
    );
    expect(
        "",
        "services",
        svc("s12", json!({"type": "ExternalName"})),
        r#"Service "s12" is invalid: spec.externalName: Required value"#,
        &["FieldValueRequired"],
    );
    expect(
        "",
        "services",
        svc("Svc", json!({"ports": [{"port": 80}]})),
        &format!(r#"Service "Svc" is invalid: metadata.name: Invalid value: "Svc": {LABEL_MSG}"#),
        &["FieldValueInvalid"],
    );
    let e = refused("", "services", svc("s.v", json!({"ports": [{"port": 80}]})));
    assert_eq!(
        e.message,
        r#"Service "s.v" is invalid: metadata.name: Invalid value: "s.v": must not contain dots"#
    );
    let s = store();
    let services = info("", "services");
    s.create(
        &services,
        Some("default"),
        svc("1svc", json!({"ports": [{"port": 80}]})),
        false,
    )
    .expect("v1.36 names Services by RFC 1123 labels: a leading digit is fine");
    s.create(
        &services,
        Some("default"),
        svc("headless", json!({"clusterIP": "None"})),
        false,
    )
    .expect("a headless Service needs no ports");
}

fn job(name: &str, spec: Value, template: Value) -> Value {
    let mut s = spec;
    s["template"] = json!({"spec": template});
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": s})
}

/// `validateJobSpec` and its pod template, as kube-apiserver v1.36.3 answered.
#[test]
fn jobs_are_refused_in_the_real_servers_words() {
    let t = json!({"restartPolicy": "Never", "containers": [c(json!({}))]});
    expect(
        "batch",
        "jobs",
        job("j1", json!({"parallelism": -1}), t.clone()),
        r#"Job.batch "j1" is invalid: spec.parallelism: Invalid value: -1: must be greater than or equal to 0"#,
        &["FieldValueInvalid"],
    );
    expect(
        "batch",
        "jobs",
        job("j1b", json!({"completions": -1, "backoffLimit": -2}), t.clone()),
        r#"Job.batch "j1b" is invalid: [spec.completions: Invalid value: -1: must be greater than or equal to 0, spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0]"#,
        &["FieldValueInvalid", "FieldValueInvalid"],
    );
    for (name, rp) in [("j2", json!("Always")), ("j3", Value::Null)] {
        let mut tt = t.clone();
        tt["restartPolicy"] = rp;
        expect(
            "batch",
            "jobs",
            job(name, json!({}), tt),
            &format!(
                r#"Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#
            ),
            &["FieldValueRequired"],
        );
    }
    let mut tt = t.clone();
    tt["restartPolicy"] = json!("Sometimes");
    expect(
        "batch",
        "jobs",
        job("js", json!({}), tt),
        r#"Job.batch "js" is invalid: [spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never", spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "OnFailure", "Never"]"#,
        &["FieldValueNotSupported", "FieldValueNotSupported"],
    );
    expect(
        "batch",
        "jobs",
        job(
            "j4",
            json!({}),
            json!({"restartPolicy": "Never", "containers": []}),
        ),
        r#"Job.batch "j4" is invalid: spec.template.spec.containers: Required value"#,
        &["FieldValueRequired"],
    );
    expect(
        "batch",
        "jobs",
        job("j6", json!({"completionMode": "Bogus"}), t.clone()),
        r#"Job.batch "j6" is invalid: spec.completionMode: Unsupported value: "Bogus": supported values: "NonIndexed", "Indexed""#,
        &["FieldValueNotSupported"],
    );
}

/// Updates: what a running pod, an allocated Service and a Job may not change (`ValidatePodUpdate`,
/// `ValidateServiceUpdate`, `ValidateJobSpecUpdate`), as kube-apiserver v1.36.3 answered.
#[test]
fn updates_keep_what_the_real_server_keeps() {
    let s = store();
    let pods = info("", "pods");
    s.create(
        &pods,
        Some("default"),
        // Tagged, so the image change below keeps the defaulted `imagePullPolicy` (an untagged image
        // defaults to `Always`, a tagged one to `IfNotPresent`: a change the real server refuses).
        pod("pok", json!({"containers": [c(json!({"image": "busybox:1"}))]})),
        false,
    )
    .expect("a valid pod");
    // The stored spec with `spec`'s fields over it, as a client that read the object sends it back
    // (so what the server defaulted at create, such as a pod's tolerations, stays).
    let update = |info: &ResourceInfo, name: &str, spec: Value| {
        let mut o = (*s.get(info, Some("default"), name).expect("stored")).clone();
        if let (Some(stored), Some(new)) = (o["spec"].as_object_mut(), spec.as_object()) {
            stored.extend(new.clone());
        }
        s.update(info, Some("default"), name, o, false, false)
    };
    let e = update(
        &pods,
        "pok",
        json!({"restartPolicy": "Never", "containers": [c(json!({"image": "busybox:1"}))]}),
    )
    .unwrap_err();
    assert!(
        e.message.starts_with("Pod \"pok\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"),
        "{}",
        e.message
    );
    update(
        &pods,
        "pok",
        json!({"containers": [c(json!({"image": "busybox:2"}))], "activeDeadlineSeconds": 10}),
    )
    .expect("the image and the deadline may change");
    update(&pods, "pok", json!({"containers": [c(json!({"image": "busybox:2"}))], "activeDeadlineSeconds": 10, "nodeName": "n1"}))
        .expect("the simulator's binding: nodeName set once");

    let services = info("", "services");
    s.create(
        &services,
        Some("default"),
        svc("sok", json!({"clusterIP": "10.0.0.10", "ports": [{"port": 80}]})),
        false,
    )
    .expect("a valid service");
    let e = update(
        &services,
        "sok",
        json!({"clusterIP": "10.0.0.99", "clusterIPs": ["10.0.0.99"], "ports": [{"port": 80}]}),
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        r#"Service "sok" is invalid: spec.clusterIPs[0]: Invalid value: ["10.0.0.99"]: may not change once set"#
    );

    let jobs = info("batch", "jobs");
    let t = json!({"restartPolicy": "Never", "containers": [c(json!({}))]});
    s.create(
        &jobs,
        Some("default"),
        job("jok", json!({"completions": 1}), t.clone()),
        false,
    )
    .expect("a valid job");
    let e = update(&jobs, "jok", json!({"completions": 5})).unwrap_err();
    assert_eq!(
        e.message,
        r#"Job.batch "jok" is invalid: spec.completions: Invalid value: 5: field is immutable"#
    );
    let mut t2 = s.get(&jobs, Some("default"), "jok").expect("stored")["spec"]["template"].clone();
    t2["spec"]["containers"][0]["image"] = json!("busybox:2");
    let e = update(&jobs, "jok", json!({"completions": 1, "template": t2})).unwrap_err();
    assert!(
        e.message.contains("spec.template: Invalid value: ") && e.message.ends_with(": field is immutable"),
        "{}",
        e.message
    );
}

/// `ValidateConfigMap`, `ValidateSecret`, and Go's base64 decoding of byte maps (a 400), as
/// kube-apiserver v1.36.3 answered.
#[test]
fn config_maps_and_secrets_are_refused_in_the_real_servers_words() {
    let e = refused(
        "",
        "secrets",
        json!({"metadata": {"name": "se1"}, "data": {"a": "not base64!"}}),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            r#"Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3"#
        )
    );
    let e = refused(
        "",
        "configmaps",
        json!({"metadata": {"name": "cm3"}, "binaryData": {"a": "!!"}}),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: illegal base64 data at input byte 0"#
        )
    );
    expect(
        "",
        "secrets",
        json!({"metadata": {"name": "se2"}, "data": {"bad key": "YQ=="}}),
        &format!(r#"Secret "se2" is invalid: data[bad key]: Invalid value: "bad key": {CONFIG_KEY_MSG}"#),
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "secrets",
        json!({"metadata": {"name": "se2b"}, "stringData": {"bad/key": "a"}}),
        &format!(r#"Secret "se2b" is invalid: data[bad/key]: Invalid value: "bad/key": {CONFIG_KEY_MSG}"#),
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "secrets",
        json!({"metadata": {"name": "se3"}, "type": "kubernetes.io/tls", "data": {}}),
        r#"Secret "se3" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]"#,
        &["FieldValueRequired", "FieldValueRequired"],
    );
    expect(
        "",
        "configmaps",
        json!({"metadata": {"name": "cm1"}, "data": {"..": "b"}}),
        r#"ConfigMap "cm1" is invalid: data[..]: Invalid value: "..": must not be '..'"#,
        &["FieldValueInvalid"],
    );
    expect(
        "",
        "configmaps",
        json!({"metadata": {"name": "cm2"}, "data": {"a": "a"}, "binaryData": {"a": "YQ=="}}),
        r#"ConfigMap "cm2" is invalid: data[a]: Invalid value: "a": duplicate of key present in binaryData"#,
        &["FieldValueInvalid"],
    );
}

/// Go's `base64.StdEncoding` offsets: the first bad byte, missing padding at the end, trailing data.
#[test]
fn base64_errors_name_gos_offsets() {
    assert_eq!(super::go_base64("YQ=="), Ok(()));
    assert_eq!(super::go_base64("YWJj\nZA=="), Ok(()));
    assert_eq!(super::go_base64(""), Ok(()));
    assert_eq!(super::go_base64("not base64!"), Err(3));
    assert_eq!(super::go_base64("!!"), Err(0));
    assert_eq!(super::go_base64("YQ"), Err(0));
    assert_eq!(super::go_base64("YQ="), Err(3));
    assert_eq!(super::go_base64("YQ==YQ=="), Err(4));
}

/// Events (core and `events.k8s.io`), Leases, EndpointSlices and RBAC, as kube-apiserver v1.36.3 answered.
#[test]
fn other_kinds_are_refused_in_the_real_servers_words() {
    expect(
        "",
        "events",
        json!({"metadata": {"name": "e1b"}, "involvedObject": {"namespace": "other", "kind": "Pod", "name": "x"}, "type": "Bogus"}),
        r#"Event "e1b" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace"#,
        &["FieldValueInvalid"],
    );
    expect(
        "events.k8s.io",
        "events",
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"}}),
        r#"Event "e2" is invalid: [eventTime: Required value, type: Invalid value: "": has invalid value: ]"#,
        &["FieldValueRequired", "FieldValueInvalid"],
    );
    expect(
        "coordination.k8s.io",
        "leases",
        json!({"metadata": {"name": "l1"}, "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}),
        r#"Lease.coordination.k8s.io "l1" is invalid: [spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0]"#,
        &["FieldValueInvalid", "FieldValueInvalid"],
    );
    expect(
        "discovery.k8s.io",
        "endpointslices",
        json!({"metadata": {"name": "es1"}, "addressType": "Bogus", "endpoints": [{"addresses": []}], "ports": [{"port": 80, "protocol": "Bogus"}]}),
        r#"EndpointSlice.discovery.k8s.io "es1" is invalid: [addressType: Unsupported value: "Bogus": supported values: "FQDN", "IPv4", "IPv6", ports[0].protocol: Unsupported value: "Bogus": supported values: "SCTP", "TCP", "UDP", endpoints[0].addresses: Required value: must contain at least 1 address]"#,
        &[
            "FieldValueNotSupported",
            "FieldValueNotSupported",
            "FieldValueRequired",
        ],
    );
    expect(
        "discovery.k8s.io",
        "endpointslices",
        json!({"metadata": {"name": "es2"}, "addressType": "IPv4", "endpoints": [{"addresses": ["bogus"]}]}),
        r#"EndpointSlice.discovery.k8s.io "es2" is invalid: endpoints[0].addresses[0]: Invalid value: "bogus": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"#,
        &["FieldValueInvalid"],
    );
    expect(
        "rbac.authorization.k8s.io",
        "roles",
        json!({"metadata": {"name": "r1"}, "rules": [{"resources": ["pods"]}, {"apiGroups": [""], "verbs": ["get"], "nonResourceURLs": ["/x"]}]}),
        r#"Role.rbac.authorization.k8s.io "r1" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, rules[0].apiGroups: Required value: resource rules must supply at least one api group, rules[1].nonResourceURLs: Invalid value: ["/x"]: namespaced rules cannot apply to non-resource URLs, rules[1].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs]"#,
        &[
            "FieldValueRequired",
            "FieldValueRequired",
            "FieldValueInvalid",
            "FieldValueInvalid",
        ],
    );
    expect(
        "rbac.authorization.k8s.io",
        "rolebindings",
        json!({"metadata": {"name": "rb1"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Bogus", "name": ""}, "subjects": [{"kind": "Bogus", "name": ""}, {"kind": "ServiceAccount", "name": "x", "apiGroup": "bogus"}]}),
        r#"RoleBinding.rbac.authorization.k8s.io "rb1" is invalid: [roleRef.kind: Unsupported value: "Bogus": supported values: "Role", "ClusterRole", roleRef.name: Required value, subjects[0].name: Required value, subjects[0].kind: Unsupported value: "Bogus": supported values: "ServiceAccount", "User", "Group", subjects[1].apiGroup: Unsupported value: "bogus": supported values: ""]"#,
        &[
            "FieldValueNotSupported",
            "FieldValueRequired",
            "FieldValueRequired",
            "FieldValueNotSupported",
            "FieldValueNotSupported",
        ],
    );
}

/// kubernetes pkg/apis/rbac/validation `ValidateRoleBindingUpdate`: `roleRef` is fixed once bound; the
/// subjects may change.
#[test]
fn a_bindings_role_ref_cannot_change() {
    let s = store();
    let rb = info("rbac.authorization.k8s.io", "rolebindings");
    let binding = |role: &str| {
        json!({"metadata": {"name": "rb1"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": "sa1"}]})
    };
    s.create(&rb, Some("default"), binding("r1"), false)
        .expect("a valid binding");
    let mut same = binding("r1");
    same["subjects"][0]["name"] = json!("sa2");
    s.update(&rb, Some("default"), "rb1", same, false, false)
        .expect("the subjects may change");
    let e = s
        .update(&rb, Some("default"), "rb1", binding("other"), false, false)
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        r#"RoleBinding.rbac.authorization.k8s.io "rb1" is invalid: roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"other"}: cannot change roleRef"#
    );
}

/// kubernetes pkg/apis/apps/validation `ValidateDeploymentSpec` and
/// `ValidatePodTemplateSpecForReplicaSet`, on a Deployment (served in real-cluster mode).
#[test]
fn deployments_are_refused_in_the_real_servers_words() {
    let deployments = ResourceInfo {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        plural: "deployments".into(),
        ..info("", "configmaps")
    };
    let errs = |spec: Value| -> Vec<String> {
        super::validate(
            &deployments,
            &json!({"metadata": {"name": "d"}, "spec": spec}),
            None,
        )
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect()
    };
    let template = |labels: Value, restart: &str| {
        json!({"metadata": {"labels": labels}, "spec": {"restartPolicy": restart, "dnsPolicy": "ClusterFirst",
            "containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Always",
                            "terminationMessagePolicy": "File"}]}})
    };
    assert_eq!(
        errs(
            json!({"selector": {"matchLabels": {"app": "one"}}, "template": template(json!({"app": "one"}), "Always")})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        errs(
            json!({"replicas": -1, "selector": {"matchLabels": {"app": "one"}}, "template": template(json!({"app": "two"}), "Never")})
        ),
        [
            "spec.replicas: -1: must be greater than or equal to 0",
            r#"spec.template.metadata.labels: {"app":"two"}: `selector` does not match template `labels`"#,
            r#"spec.template.spec.restartPolicy: "Never": supported values: "Always""#,
        ]
    );
    assert_eq!(
        errs(json!({"selector": {}, "template": template(json!({"app": "one"}), "Always")})),
        ["spec.selector: {}: empty selector is invalid for deployment"]
    );
    assert_eq!(
        errs(json!({"template": template(json!({"app": "one"}), "Always")})),
        ["spec.selector: "]
    );
}
