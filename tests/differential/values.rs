//! Value checks of built-in kinds, quotagate's CRDs, and the shared samples created and read back.

use super::engine::*;
use super::sequences::*;
use serde_json::{Value, json};

fn leak(s: String) -> &'static str {
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

fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {
        "selector": {"app": "x"}, "ports": [{"port": 80}]}})
}

pub fn lq(name: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name},
        "spec": {"clusterQueue": "cq"}})
}

/// A named change to a valid object.
type Variant = (&'static str, Box<dyn Fn(&mut Value)>);

fn with(base: Value, f: impl Fn(&mut Value)) -> Value {
    let mut v = base;
    f(&mut v);
    v
}

/// Create, then read back (a 404 when refused): the refusal's Status and, when stored, the object.
fn create_read(name: &'static str, coll: &str, obj_name: &str, body: Value) -> Sequence {
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
    out.push(seq(
        "service clusterIP change is refused",
        vec![
            setup(post(SVCS, service())),
            patch(
                &format!("{SVCS}/s"),
                MERGE,
                json!({"spec": {"clusterIP": "10.0.0.99"}}),
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

fn rf(name: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}})
}

fn cq(name: &str, quota: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}})
}

fn raycluster(f: impl Fn(&mut Value)) -> Value {
    with(
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                "rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-worker", "image": "rayproject/ray:2.9.0"}]}}}]}}),
        f,
    )
}

fn workload(f: impl Fn(&mut Value)) -> Value {
    with(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}, "spec": {
            "queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}}}]}}}]}}),
        f,
    )
}

pub fn crds() -> Vec<Sequence> {
    let cq_name = "cq-{ns}";
    let mut out = vec![
        create_read("resourceflavor empty", RF, "rf-{ns}", rf("rf-{ns}")),
        create_read(
            "resourceflavor with nodeLabels and taints",
            RF,
            "rf-{ns}",
            with(
                rf("rf-{ns}"),
                |r| r["spec"] = json!({"nodeLabels": {"pool": "a"}, "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}),
            ),
        ),
        create_read(
            "resourceflavor taint effect Bogus",
            RF,
            "rf-{ns}",
            with(rf("rf-{ns}"), |r| {
                r["spec"] = json!({"nodeTaints": [{"key": "k", "effect": "Bogus"}]})
            }),
        ),
        create_read("clusterqueue valid", CQ, cq_name, cq(cq_name, json!("3"))),
        create_read(
            "clusterqueue nominalQuota -3",
            CQ,
            cq_name,
            cq(cq_name, json!("-3")),
        ),
        create_read(
            "clusterqueue nominalQuota not a quantity",
            CQ,
            cq_name,
            cq(cq_name, json!("lots")),
        ),
        create_read(
            "clusterqueue queueingStrategy Bogus",
            CQ,
            cq_name,
            with(cq(cq_name, json!("3")), |c| {
                c["spec"]["queueingStrategy"] = json!("Bogus")
            }),
        ),
        create_read(
            "clusterqueue flavor resources not matching coveredResources",
            CQ,
            cq_name,
            with(cq(cq_name, json!("3")), |c| {
                c["spec"]["resourceGroups"][0]["coveredResources"] = json!(["cpu", "memory"])
            }),
        ),
        create_read(
            "clusterqueue cohort name invalid",
            CQ,
            cq_name,
            with(cq(cq_name, json!("3")), |c| {
                c["spec"]["cohortName"] = json!("Not_Valid")
            }),
        ),
        create_read("localqueue valid", LQ, "lq", lq("lq")),
        create_read(
            "localqueue without clusterQueue",
            LQ,
            "lq",
            with(lq("lq"), |l| l["spec"] = json!({})),
        ),
        seq(
            "localqueue clusterQueue change",
            vec![
                post(LQ, lq("lq")),
                patch(
                    &format!("{LQ}/lq"),
                    MERGE,
                    json!({"spec": {"clusterQueue": "cq2"}}),
                ),
            ],
        ),
        create_read("workload valid", WL, "w", workload(|_| {})),
        create_read(
            "workload count -1",
            WL,
            "w",
            workload(|w| w["spec"]["podSets"][0]["count"] = json!(-1)),
        ),
        create_read(
            "workload without podSets",
            WL,
            "w",
            workload(|w| w["spec"]["podSets"] = json!([])),
        ),
        create_read(
            "workload podSet name invalid",
            WL,
            "w",
            workload(|w| w["spec"]["podSets"][0]["name"] = json!("Not_Valid")),
        ),
        create_read("raycluster valid", RC, "rc", raycluster(|_| {})),
        create_read(
            "raycluster without headGroupSpec",
            RC,
            "rc",
            raycluster(|r| {
                r["spec"].as_object_mut().unwrap().remove("headGroupSpec");
            }),
        ),
        create_read(
            "raycluster headGroupSpec serviceType Bogus",
            RC,
            "rc",
            raycluster(|r| r["spec"]["headGroupSpec"]["serviceType"] = json!("Bogus")),
        ),
        create_read(
            "raycluster worker replicas -1",
            RC,
            "rc",
            raycluster(|r| r["spec"]["workerGroupSpecs"][0]["replicas"] = json!(-1)),
        ),
        create_read(
            "raycluster worker group without groupName",
            RC,
            "rc",
            raycluster(|r| {
                r["spec"]["workerGroupSpecs"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("groupName");
            }),
        ),
        create_read(
            "raycluster with an unknown spec field dropped",
            RC,
            "rc",
            raycluster(|r| r["spec"]["bogus"] = json!(1)),
        ),
    ];
    out.push(seq(
        "raycluster suspend by merge patch",
        vec![
            post(RC, raycluster(|_| {})),
            patch(&format!("{RC}/rc"), MERGE, json!({"spec": {"suspend": true}})),
        ],
    ));
    out
}

/// Kinds the samples hold that both grounds serve: (apiVersion, kind) → (collection, namespaced).
fn collection(api_version: &str, kind: &str) -> Option<(String, bool)> {
    let (group_path, plural, namespaced) = match (api_version, kind) {
        ("v1", "ConfigMap") => ("/api/v1", "configmaps", true),
        ("v1", "Secret") => ("/api/v1", "secrets", true),
        ("v1", "Service") => ("/api/v1", "services", true),
        ("batch/v1", "Job") => ("/apis/batch/v1", "jobs", true),
        ("ray.io/v1", "RayCluster") => ("/apis/ray.io/v1", "rayclusters", true),
        ("ray.io/v1", "RayService") => ("/apis/ray.io/v1", "rayservices", true),
        ("ray.io/v1", "RayJob") => ("/apis/ray.io/v1", "rayjobs", true),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue") => ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", true),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue") => {
            ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", false)
        }
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor") => {
            ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", false)
        }
        _ => return None,
    };
    Some(if namespaced {
        (format!("{group_path}/namespaces/{{ns}}/{plural}"), true)
    } else {
        (format!("{group_path}/{plural}"), false)
    })
}

/// Each document of each sample, created (POST) and applied (server-side, as kubectl would), then
/// read back. Cluster-scoped names carry the namespace so sequences do not meet.
pub fn samples() -> Vec<Sequence> {
    // The shared samples sit beside the checkout (`../shared/manifests`); a checkout elsewhere (a
    // worktree) names them with QUOTAGATE_SHARED_MANIFESTS.
    let dir = std::env::var_os("QUOTAGATE_SHARED_MANIFESTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/manifests"));
    let mut files: Vec<_> = ["kueue", "kuberay"]
        .iter()
        .flat_map(|d| std::fs::read_dir(dir.join(d)).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        println!(
            "samples: none found in {} (set QUOTAGATE_SHARED_MANIFESTS)",
            dir.display()
        );
    }
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(docs) = quotagate::api::manifest::load_documents(&text) else {
            continue;
        };
        let file = f
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".yaml")
            .to_string();
        for (i, mut doc) in docs.into_iter().enumerate() {
            let (Some(av), Some(kind)) = (doc["apiVersion"].as_str(), doc["kind"].as_str()) else {
                continue;
            };
            let kind = kind.to_string();
            let Some((coll, namespaced)) = collection(av, &kind) else {
                continue;
            };
            let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
                continue;
            };
            meta.remove("namespace");
            let mut name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            if !namespaced {
                name = format!("{name}-{{ns}}");
                meta.insert("name".into(), json!(name));
            }
            let sample = format!("sample {file} #{i} {kind}");
            if name.is_empty() {
                // generateName: created, and the answer compared; there is no name to apply or read.
                out.push(seq(
                    leak(format!("{sample} created")),
                    vec![post(&coll, doc.clone())],
                ));
                continue;
            }
            let path = format!("{coll}/{name}");
            let body = doc.to_string();
            out.push(seq(
                leak(format!("{sample} created")),
                vec![post(&coll, doc.clone()), get(&path)],
            ));
            out.push(seq(
                leak(format!("{sample} applied")),
                vec![
                    apply(
                        &format!("{path}?fieldManager=kubectl&fieldValidation=Strict"),
                        &body,
                    ),
                    get(&path),
                ],
            ));
        }
    }
    out
}
