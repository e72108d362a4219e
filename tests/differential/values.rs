//! Value checks of built-in kinds.

use super::engine::*;
use super::sequences::*;
use serde_json::{Value, json};

pub fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A Pod both grounds accept. Its token volume is left out so the ServiceAccount admission of the
/// real server adds nothing the embedded one would have to copy.
pub fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "automountServiceAccountToken": false,
        "containers": [{"name": "c", "image": "busybox"}]}})
}

pub fn job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
        "suspend": true,
        "template": {"spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{"name": "c", "image": "busybox"}]}}}})
}

pub fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "containers": [{"name": "c", "image": "busybox"}]}}}})
}

pub fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {
        "selector": {"app": "x"}, "ports": [{"port": 80}]}})
}

pub fn lq(name: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name},
        "spec": {"clusterQueue": "cq"}})
}

/// A named change to a valid object.
pub type Variant = (&'static str, Box<dyn Fn(&mut Value)>);

pub fn with(base: Value, f: impl Fn(&mut Value)) -> Value {
    let mut v = base;
    f(&mut v);
    v
}

/// Create, then read back (a 404 when refused): the refusal's Status and, when stored, the object.
pub fn create_read(name: &'static str, coll: &str, obj_name: &str, body: Value) -> Sequence {
    seq(name, vec![post(coll, body), get(&format!("{coll}/{obj_name}"))])
}

pub fn core() -> Vec<Sequence> {
    let c0 = "/spec/containers/0";
    let pods: Vec<Variant> = vec![
        ("pod valid", Box::new(|_| {})),
        (
            "pod restartPolicy Sometimes",
            Box::new(|p| p["spec"]["restartPolicy"] = json!("Sometimes")),
        ),
        (
            "pod without containers",
            Box::new(|p| p["spec"]["containers"] = json!([])),
        ),
        (
            "pod with an empty image",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["image"] = json!("")),
        ),
        (
            "pod with a negative cpu request",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["resources"] = json!({"requests": {"cpu": "-1"}})),
        ),
        (
            "pod with two containers of one name",
            Box::new(|p| {
                p["spec"]["containers"] = json!([{"name": "c", "image": "a"}, {"name": "c", "image": "b"}])
            }),
        ),
        (
            "pod with a container name not a DNS label",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["name"] = json!("Bad_Name")),
        ),
        (
            "pod with a request above its limit",
            Box::new(move |p| {
                p.pointer_mut(c0).unwrap()["resources"] =
                    json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
            }),
        ),
        (
            "pod with a quantity that does not parse",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["resources"] = json!({"requests": {"cpu": "lots"}})),
        ),
        (
            "pod with a port out of range",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["ports"] = json!([{"containerPort": 70000}])),
        ),
        (
            "pod with a port protocol Bogus",
            Box::new(move |p| {
                p.pointer_mut(c0).unwrap()["ports"] = json!([{"containerPort": 80, "protocol": "Bogus"}])
            }),
        ),
        (
            "pod with imagePullPolicy Sometimes",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["imagePullPolicy"] = json!("Sometimes")),
        ),
        (
            "pod with dnsPolicy Bogus",
            Box::new(|p| p["spec"]["dnsPolicy"] = json!("Bogus")),
        ),
        (
            "pod with a negative terminationGracePeriodSeconds",
            Box::new(|p| p["spec"]["terminationGracePeriodSeconds"] = json!(-1)),
        ),
        (
            "pod with a negative activeDeadlineSeconds",
            Box::new(|p| p["spec"]["activeDeadlineSeconds"] = json!(-1)),
        ),
        (
            "pod with an env var name that is empty",
            Box::new(move |p| p.pointer_mut(c0).unwrap()["env"] = json!([{"name": "", "value": "x"}])),
        ),
        (
            "pod with a volumeMount of no volume",
            Box::new(move |p| {
                p.pointer_mut(c0).unwrap()["volumeMounts"] = json!([{"name": "v", "mountPath": "/v"}])
            }),
        ),
        (
            "pod with a nodeSelector label value invalid",
            Box::new(|p| p["spec"]["nodeSelector"] = json!({"k": "not valid!"})),
        ),
        (
            "pod with a toleration operator Bogus",
            Box::new(|p| p["spec"]["tolerations"] = json!([{"key": "k", "operator": "Bogus"}])),
        ),
        (
            "pod with a schedulingGate",
            Box::new(|p| p["spec"]["schedulingGates"] = json!([{"name": "example.com/gate"}])),
        ),
        (
            "pod with a hostname not a DNS label",
            Box::new(|p| p["spec"]["hostname"] = json!("Not_A_Label")),
        ),
        (
            "pod with priority set by hand",
            Box::new(|p| p["spec"]["priority"] = json!(5)),
        ),
        (
            "pod with a negative memory limit",
            Box::new(move |p| {
                p.pointer_mut(c0).unwrap()["resources"] = json!({"limits": {"memory": "-1Gi"}})
            }),
        ),
        (
            "pod with an init container of the same name",
            Box::new(|p| p["spec"]["initContainers"] = json!([{"name": "c", "image": "busybox"}])),
        ),
    ];
    let mut out: Vec<Sequence> = pods
        .into_iter()
        .map(|(n, f)| create_read(n, PODS, "p", with(pod(), f)))
        .collect();
    out.push(seq(
        "pod image update is allowed, other spec updates are refused",
        vec![
            setup(post(PODS, pod())),
            patch(
                &format!("{PODS}/p"),
                MERGE,
                json!({"spec": {"activeDeadlineSeconds": 30}}),
            ),
            patch(
                &format!("{PODS}/p"),
                MERGE,
                json!({"spec": {"restartPolicy": "Never"}}),
            ),
        ],
    ));
    let svcs: Vec<Variant> = vec![
        ("service valid", Box::new(|_| {})),
        (
            "service type Bogus",
            Box::new(|s| s["spec"]["type"] = json!("Bogus")),
        ),
        (
            "service port 700000",
            Box::new(|s| s["spec"]["ports"][0]["port"] = json!(700000)),
        ),
        (
            "service port 0",
            Box::new(|s| s["spec"]["ports"][0]["port"] = json!(0)),
        ),
        (
            "service protocol Bogus",
            Box::new(|s| s["spec"]["ports"][0]["protocol"] = json!("Bogus")),
        ),
        (
            "service clusterIP bogus",
            Box::new(|s| s["spec"]["clusterIP"] = json!("bogus")),
        ),
        (
            "service headless",
            Box::new(|s| s["spec"]["clusterIP"] = json!("None")),
        ),
        (
            "service two ports without names",
            Box::new(|s| s["spec"]["ports"] = json!([{"port": 80}, {"port": 81}])),
        ),
        (
            "service two ports of one name",
            Box::new(|s| s["spec"]["ports"] = json!([{"name": "a", "port": 80}, {"name": "a", "port": 81}])),
        ),
        (
            "service without ports",
            Box::new(|s| s["spec"]["ports"] = json!([])),
        ),
        (
            "service ExternalName without externalName",
            Box::new(|s| s["spec"] = json!({"type": "ExternalName"})),
        ),
        (
            "service ExternalName",
            Box::new(|s| s["spec"] = json!({"type": "ExternalName", "externalName": "example.com"})),
        ),
        (
            "service NodePort",
            Box::new(|s| s["spec"]["type"] = json!("NodePort")),
        ),
        (
            "service targetPort named",
            Box::new(|s| s["spec"]["ports"][0]["targetPort"] = json!("http")),
        ),
        (
            "service targetPort out of range",
            Box::new(|s| s["spec"]["ports"][0]["targetPort"] = json!(70000)),
        ),
        (
            "service sessionAffinity Bogus",
            Box::new(|s| s["spec"]["sessionAffinity"] = json!("Bogus")),
        ),
    ];
    out.extend(
        svcs.into_iter()
            .map(|(n, f)| create_read(n, SVCS, "s", with(service(), f))),
    );
    // The new address is outside both servers' service ranges, so neither can have allocated it:
    // kube-apiserver's 10.0.0.0/24 once gave 10.0.0.99 to the Service, and the patch changed nothing.
    out.push(seq(
        "service clusterIP change is refused",
        vec![
            setup(post(SVCS, service())),
            patch(
                &format!("{SVCS}/s"),
                MERGE,
                json!({"spec": {"clusterIP": "10.0.1.99"}}),
            ),
        ],
    ));
    let secret = |extra: Value| {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    out.push(create_read(
        "secret data not base64",
        SECRETS,
        "s1",
        secret(json!({"data": {"k": "not base64!"}})),
    ));
    out.push(create_read(
        "secret key with a slash",
        SECRETS,
        "s1",
        secret(json!({"data": {"a/b": "dg=="}})),
    ));
    out.push(create_read(
        "secret type tls without its keys",
        SECRETS,
        "s1",
        secret(json!({"type": "kubernetes.io/tls"})),
    ));
    out.push(create_read(
        "secret type dockerconfigjson without its key",
        SECRETS,
        "s1",
        secret(json!({"type": "kubernetes.io/dockerconfigjson"})),
    ));
    out.push(seq(
        "secret type change is refused",
        vec![
            post(SECRETS, secret(json!({"type": "a/b"}))),
            patch(&format!("{SECRETS}/s1"), MERGE, json!({"type": "c/d"})),
        ],
    ));
    out.push(create_read(
        "serviceaccount with an invalid name",
        "/api/v1/namespaces/{ns}/serviceaccounts",
        "Bad_Name",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "Bad_Name"}}),
    ));
    out.push(create_read(
        "lease with a negative leaseDurationSeconds",
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        "l",
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": -1}}),
    ));
    out.push(create_read(
        "lease valid",
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        "l",
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}),
    ));
    out.push(create_read(
        "core event without involvedObject",
        "/api/v1/namespaces/{ns}/events",
        "e",
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "reason": "R", "message": "m"}),
    ));
    out.push(create_read(
        "events.k8s.io event without reportingController",
        "/apis/events.k8s.io/v1/namespaces/{ns}/events",
        "e",
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "action": "A", "reason": "R", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "{ns}"}}),
    ));
    out.push(create_read(
        "role with a rule without verbs",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        "r",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"]}]}),
    ));
    out.push(create_read(
        "rolebinding without roleRef kind",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        "rb",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "name": "r"}, "subjects": []}),
    ));
    out.push(create_read(
        "resourcequota with a negative hard",
        "/api/v1/namespaces/{ns}/resourcequotas",
        "q",
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "-1"}}}),
    ));
    out
}

pub fn batch() -> Vec<Sequence> {
    let t = "/spec/template/spec";
    let jobs: Vec<Variant> = vec![
        ("job valid", Box::new(|_| {})),
        (
            "job parallelism -1",
            Box::new(|j| j["spec"]["parallelism"] = json!(-1)),
        ),
        (
            "job completions -1",
            Box::new(|j| j["spec"]["completions"] = json!(-1)),
        ),
        (
            "job backoffLimit -1",
            Box::new(|j| j["spec"]["backoffLimit"] = json!(-1)),
        ),
        (
            "job restartPolicy Always",
            Box::new(move |j| j.pointer_mut(t).unwrap()["restartPolicy"] = json!("Always")),
        ),
        (
            "job restartPolicy missing",
            Box::new(move |j| {
                j.pointer_mut(t)
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .remove("restartPolicy");
            }),
        ),
        (
            "job completionMode Bogus",
            Box::new(|j| j["spec"]["completionMode"] = json!("Bogus")),
        ),
        (
            "job indexed without completions",
            Box::new(|j| j["spec"]["completionMode"] = json!("Indexed")),
        ),
        (
            "job selector that does not match the template",
            Box::new(|j| {
                j["spec"]["manualSelector"] = json!(true);
                j["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
            }),
        ),
        (
            "job negative activeDeadlineSeconds",
            Box::new(|j| j["spec"]["activeDeadlineSeconds"] = json!(-5)),
        ),
        (
            "job negative ttlSecondsAfterFinished",
            Box::new(|j| j["spec"]["ttlSecondsAfterFinished"] = json!(-5)),
        ),
        (
            "job template without containers",
            Box::new(move |j| j.pointer_mut(t).unwrap()["containers"] = json!([])),
        ),
    ];
    let mut out: Vec<Sequence> = jobs
        .into_iter()
        .map(|(n, f)| create_read(n, JOBS, "j", with(job(), f)))
        .collect();
    out.push(seq(
        "job template change is refused",
        vec![
            setup(post(JOBS, job())),
            patch(
                &format!("{JOBS}/j"),
                MERGE,
                json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "busybox:2"}]}}}}),
            ),
        ],
    ));
    out.push(seq(
        "job resume by patch",
        vec![
            setup(post(JOBS, job())),
            patch(
                &format!("{JOBS}/j"),
                MERGE,
                json!({"spec": {"suspend": false, "parallelism": 0}}),
            ),
        ],
    ));
    out
}
