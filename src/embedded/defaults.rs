//! The defaults kube-apiserver fills in for the built-in kinds quotagate's users and controllers write
//! (`pkg/apis/core/v1/defaults.go`, `pkg/apis/batch/v1/defaults.go` and the registry strategies'
//! `PrepareForCreate`), so what a client reads back is what a real cluster would give it: a Pod's
//! `imagePullPolicy` and `restartPolicy`, a Job's `backoffLimit` and generated selector, a Secret's
//! `type`, a Namespace's `kubernetes.io/metadata.name` label (what namespace selectors match on).
//!
//! Called on every create and every main-resource update, after the metadata is stamped; a field
//! already set is never changed. The differential suite (`tests/differential/`) holds this to the real
//! server's answers.

use super::registry::ResourceInfo;
use serde_json::{Map, Value, json};

/// The label kube-apiserver keeps equal to a Namespace's name (`NamespaceDefaultLabelName`).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Fills in `obj`'s defaults. `create`: the object is being created (admission plugins that act on a
/// create only, such as `DefaultTolerationSeconds`, run then).
pub fn apply(info: &ResourceInfo, obj: &mut Value, create: bool) {
    let Some(o) = obj.as_object_mut() else { return };
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => namespace(o),
        ("", "secrets") => {
            o.entry("type").or_insert_with(|| json!("Opaque"));
        }
        ("", "pods") => {
            pod(o);
            if create {
                let spec = obj_at(o, "spec");
                default_tolerations(spec);
                // The pod strategy's `PrepareForCreate`: a negative grace period means "at once",
                // which the kubelet takes as 1 s.
                if spec
                    .get("terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .is_some_and(|g| g < 0)
                {
                    spec.insert("terminationGracePeriodSeconds".into(), json!(1));
                }
            }
        }
        ("batch", "jobs") => job(o),
        ("apps", "deployments") => deployment(o),
        ("batch", "cronjobs") => cron_job(o),
        ("apiextensions.k8s.io", "customresourcedefinitions") => crd_status(o),
        ("", "services") => {
            service(obj_at(o, "spec"));
            if create {
                // `PrepareForCreate` starts the status empty; Go writes its `loadBalancer` struct.
                o.insert("status".into(), json!({"loadBalancer": {}}));
            }
        }
        _ => {}
    }
}

/// `SetDefaults_Service` (`pkg/apis/core/v1/defaults.go`): session affinity, type, each port's
/// protocol and target port, the traffic policies, and a LoadBalancer's node ports. The addresses
/// and node ports are the allocator's (`service_alloc.rs`).
fn service(spec: &mut Map<String, Value>) {
    set_default(spec, "sessionAffinity", json!("None"));
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    if spec.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        spec.insert("type".into(), json!("ClusterIP"));
    }
    for p in list_mut(spec, "ports") {
        if p.get("protocol")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            p.insert("protocol".into(), json!("TCP"));
        }
        let unset = match p.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(v) => v.as_i64() == Some(0),
        };
        if unset && let Some(port) = p.get("port").cloned() {
            p.insert("targetPort".into(), port);
        }
    }
    let type_ = spec.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible =
        matches!(type_.as_str(), "NodePort" | "LoadBalancer") || (type_ == "ClusterIP" && external_ips);
    if externally_accessible
        && spec
            .get("externalTrafficPolicy")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    if matches!(type_.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if type_ == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

fn obj_at<'a>(o: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = o.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

fn set_default(o: &mut Map<String, Value>, key: &str, v: Value) {
    if o.get(key).is_none_or(Value::is_null) {
        o.insert(key.into(), v);
    }
}

fn namespace(o: &mut Map<String, Value>) {
    let meta = obj_at(o, "metadata");
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    if name.is_empty() {
        return;
    }
    obj_at(meta, "labels").insert(NAMESPACE_NAME_LABEL.into(), json!(name));
    // `PrepareForCreate`: the namespace controller's finalizer, removed once the namespace is empty.
    set_default(obj_at(o, "spec"), "finalizers", json!(["kubernetes"]));
}

fn pod(o: &mut Map<String, Value>) {
    let spec = obj_at(o, "spec");
    pod_spec(spec);
    // `SetDefaults_Pod`: a container's limits stand in for the requests it leaves out.
    for field in ["containers", "initContainers"] {
        for c in list_mut(spec, field) {
            requests_from_limits(c);
        }
    }
    set_default(spec, "enableServiceLinks", json!(true));
    // `priority` and `preemptionPolicy` are the `Priority` admission plugin's (`priority.rs`).
}

/// `SetDefaults_Deployment` (`pkg/apis/apps/v1/defaults.go`): one replica, a 25%/25% rolling update,
/// ten old ReplicaSets kept, a 600 s progress deadline; the pod template as a pod's (`SetDefaults_PodSpec`).
fn deployment(o: &mut Map<String, Value>) {
    let spec = obj_at(o, "spec");
    set_default(spec, "replicas", json!(1));
    let strategy = obj_at(spec, "strategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let rolling = obj_at(strategy, "rollingUpdate");
        set_default(rolling, "maxUnavailable", json!("25%"));
        set_default(rolling, "maxSurge", json!("25%"));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    pod_spec(obj_at(obj_at(spec, "template"), "spec"));
}

/// `SetDefaults_CronJob` (`pkg/apis/batch/v1/defaults.go`) and the pod defaults of its job template.
fn cron_job(o: &mut Map<String, Value>) {
    let spec = obj_at(o, "spec");
    set_default(spec, "concurrencyPolicy", json!("Allow"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "successfulJobsHistoryLimit", json!(3));
    set_default(spec, "failedJobsHistoryLimit", json!(1));
    let template = obj_at(obj_at(obj_at(spec, "jobTemplate"), "spec"), "template");
    pod_spec(obj_at(template, "spec"));
}

/// What apiextensions-apiserver's naming and establishing controllers write to a new CRD's status
/// moments after it is stored (`pkg/controller/status/naming_controller.go`,
/// `pkg/controller/establish/establishing_controller.go`): its names accepted, `NamesAccepted` and
/// `Established` true, and its storage version recorded. Names are taken as accepted: the server
/// does not check them against other CRDs of the group.
fn crd_status(o: &mut Map<String, Value>) {
    let Some(spec) = o.get("spec").and_then(Value::as_object).cloned() else {
        return;
    };
    let mut names = spec
        .get("names")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind.is_empty() {
        return;
    }
    // `SetDefaults_CustomResourceDefinitionSpec`: the singular and list kind.
    names
        .entry("singular")
        .or_insert_with(|| json!(kind.to_lowercase()));
    names
        .entry("listKind")
        .or_insert_with(|| json!(format!("{kind}List")));
    let storage: Vec<Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    // Whole seconds, as metav1.Time is written (not `meta::now_rfc3339`: meta.rs calls this file).
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .map(|t| t.to_string())
        .unwrap_or_default();
    let status = obj_at(o, "status");
    status.insert("acceptedNames".into(), Value::Object(names));
    let has = |status: &Map<String, Value>, t: &str| {
        status
            .get("conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.get("type").and_then(Value::as_str) == Some(t))
            })
    };
    if !has(status, "NamesAccepted") || !has(status, "Established") {
        status.insert(
            "conditions".into(),
            json!([
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
                 "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": now,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
            ]),
        );
    }
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Some(list) = stored.as_array_mut() {
        for v in storage {
            if !list.contains(&v) {
                list.push(v);
            }
        }
    }
}

/// The `DefaultTolerationSeconds` admission plugin: a new pod tolerates a node that is not ready or
/// unreachable for 300 s unless it says otherwise for that taint.
fn default_tolerations(spec: &mut Map<String, Value>) {
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let tolerated = list_mut(spec, "tolerations").any(|t| {
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let exists = t.get("operator").and_then(Value::as_str) == Some("Exists");
            (effect.is_empty() || effect == "NoExecute") && (k == key || (k.is_empty() && exists))
        });
        if tolerated {
            continue;
        }
        let list = spec.entry("tolerations").or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(a) = list.as_array_mut() {
            a.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
            );
        }
    }
}

fn job(o: &mut Map<String, Value>) {
    let uid = o
        .get("metadata")
        .and_then(|m| m.get("uid"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        // A `generateName` create: defaulted once the name is generated (the labels carry it).
        return;
    }
    let spec = obj_at(o, "spec");
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    let backoff = if spec.get("backoffLimitPerIndex").is_some_and(|v| !v.is_null()) {
        json!(i32::MAX)
    } else {
        json!(6)
    };
    set_default(spec, "backoffLimit", backoff);
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let replacement = if spec.get("podFailurePolicy").is_some_and(|v| !v.is_null()) {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    set_default(spec, "podReplacementPolicy", json!(replacement));
    set_default(spec, "manualSelector", json!(false));
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    let template = obj_at(spec, "template");
    if !manual && !uid.is_empty() {
        let labels = obj_at(obj_at(template, "metadata"), "labels");
        for (k, v) in [
            ("batch.kubernetes.io/controller-uid", &uid),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("job-name", &name),
        ] {
            labels.entry(k).or_insert_with(|| json!(v));
        }
    }
    pod_spec(obj_at(template, "spec"));
    let template_labels = template.get("metadata").and_then(|m| m.get("labels")).cloned();
    if !manual && !uid.is_empty() {
        let selector = obj_at(spec, "selector");
        obj_at(selector, "matchLabels")
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert_with(|| json!(uid));
    }
    // A Job without labels of its own takes its template's, the generated ones included.
    let meta = obj_at(o, "metadata");
    if meta
        .get("labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && let Some(l) = template_labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
    {
        meta.insert("labels".into(), l);
    }
}

fn list_mut<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    o.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// `SetDefaults_PodSpec` and what it reaches: containers, probes, ports, volumes.
fn pod_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    // v1's deprecated `serviceAccount` mirrors `serviceAccountName` (and stands in for it when alone).
    if spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        && let Some(sa) = spec
            .get("serviceAccount")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    {
        spec.insert("serviceAccountName".into(), json!(sa));
    }
    if let Some(sa) = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        spec.insert("serviceAccount".into(), json!(sa));
    }
    for field in ["containers", "initContainers"] {
        for c in list_mut(spec, field) {
            container(c);
        }
    }
    for v in list_mut(spec, "volumes") {
        volume(v);
    }
}

fn container(c: &mut Map<String, Value>) {
    if c.get("imagePullPolicy").is_none_or(Value::is_null) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag(image) == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    for p in list_mut(c, "ports") {
        set_default(p, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(p)) = c.get_mut(probe) {
            set_default(p, "timeoutSeconds", json!(1));
            set_default(p, "periodSeconds", json!(10));
            set_default(p, "successThreshold", json!(1));
            set_default(p, "failureThreshold", json!(3));
            http_get(p);
        }
    }
    if let Some(Value::Object(l)) = c.get_mut("lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(Value::Object(h)) = l.get_mut(hook) {
                http_get(h);
            }
        }
    }
    for e in list_mut(c, "env") {
        if let Some(Value::Object(from)) = e.get_mut("valueFrom")
            && let Some(Value::Object(f)) = from.get_mut("fieldRef")
        {
            set_default(f, "apiVersion", json!("v1"));
        }
    }
}

fn http_get(handler: &mut Map<String, Value>) {
    if let Some(Value::Object(h)) = handler.get_mut("httpGet") {
        set_default(h, "path", json!("/"));
        set_default(h, "scheme", json!("HTTP"));
    }
}

/// `SetDefaults_Volume` and its sources: a volume with no source is an `emptyDir`; file modes 0644.
fn volume(v: &mut Map<String, Value>) {
    if !v.keys().any(|k| k != "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(Value::Object(s)) = v.get_mut(source) {
            set_default(s, "defaultMode", json!(0o644));
        }
    }
    if let Some(Value::Object(h)) = v.get_mut("hostPath") {
        set_default(h, "type", json!(""));
    }
}

fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(limits) = c
        .get("resources")
        .and_then(|r| r.get("limits"))
        .and_then(Value::as_object)
        .cloned()
    else {
        return;
    };
    let requests = obj_at(obj_at(c, "resources"), "requests");
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
}

/// The tag of an image reference as the container runtime reads it: `latest` when none is given, none
/// when it is pinned by digest only.
fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    // A `:` after the last `/` starts the tag (a `:` before it is a registry's port).
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest => None,
        None => Some("latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::registry::builtins;

    fn defaulted(group: &str, plural: &str, mut obj: Value) -> Value {
        let info = builtins()
            .into_iter()
            .find(|b| b.group == group && b.plural == plural)
            .expect("a built-in kind");
        apply(&info, &mut obj, true);
        obj
    }

    /// What kube-apiserver v1.36.3 returned for the differential suite's `job valid` (`SetDefaults_Job`
    /// and the Job strategy's generated selector).
    #[test]
    fn a_job_gets_its_counts_its_policies_and_a_selector_naming_its_uid() {
        let j = defaulted(
            "batch",
            "jobs",
            json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        );
        let spec = &j["spec"];
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["parallelism"], 1);
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["manualSelector"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}})
        );
        let labels = json!({"batch.kubernetes.io/controller-uid": "u1", "batch.kubernetes.io/job-name": "j",
            "controller-uid": "u1", "job-name": "j"});
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        assert_eq!(
            j["metadata"]["labels"], labels,
            "a Job without labels takes its template's"
        );
        assert_eq!(
            spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert!(
            spec["template"]["spec"].get("tolerations").is_none(),
            "a template is not a pod"
        );
    }

    #[test]
    fn a_job_with_a_manual_selector_or_a_parallelism_keeps_them() {
        let j = defaulted(
            "batch",
            "jobs",
            json!({"metadata": {"name": "j", "uid": "u1", "labels": {"team": "a"}}, "spec": {
                "parallelism": 3, "manualSelector": true, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}}),
        );
        assert!(
            j["spec"].get("completions").is_none(),
            "parallelism alone leaves completions unset"
        );
        assert_eq!(j["spec"]["selector"], json!({"matchLabels": {"a": "b"}}));
        assert_eq!(j["spec"]["template"]["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(j["metadata"]["labels"], json!({"team": "a"}));
    }

    #[test]
    fn a_pod_gets_the_kubelets_defaults_and_the_admission_plugins_tolerations() {
        let p = defaulted(
            "",
            "pods",
            json!({"metadata": {"name": "p"}, "spec": {
                "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}],
                "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
                    "readinessProbe": {"httpGet": {"port": 80}},
                    "resources": {"limits": {"cpu": "1"}}}],
                "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}]}}),
        );
        let spec = &p["spec"];
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always", "an untagged image is `latest`");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 10);
        assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "1"}),
            "requests default to limits"
        );
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        let keys: Vec<_> = spec["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            keys,
            ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"],
            "only the taint the pod does not tolerate yet gets the 300 s toleration"
        );
    }

    #[test]
    fn a_namespace_is_labelled_with_its_name_and_a_secret_is_opaque() {
        let ns = defaulted(
            "",
            "namespaces",
            json!({"metadata": {"name": "team-a", "labels": {"x": "y"}}}),
        );
        assert_eq!(
            ns["metadata"]["labels"],
            json!({"x": "y", "kubernetes.io/metadata.name": "team-a"})
        );
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        let s = defaulted("", "secrets", json!({"metadata": {"name": "s"}}));
        assert_eq!(s["type"], "Opaque");
        let t = defaulted(
            "",
            "secrets",
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls"}),
        );
        assert_eq!(t["type"], "kubernetes.io/tls");
    }

    #[test]
    fn an_image_without_a_tag_is_pulled_always_and_a_pinned_one_if_not_present() {
        assert_eq!(image_tag("busybox"), Some("latest"));
        assert_eq!(image_tag("rayproject/ray:2.9.0"), Some("2.9.0"));
        assert_eq!(image_tag("registry:5000/ray"), Some("latest"));
        assert_eq!(image_tag("registry:5000/ray:2.41"), Some("2.41"));
        assert_eq!(image_tag("ray@sha256:abcd"), None);
        assert_eq!(image_tag("ray:2.41@sha256:abcd"), Some("2.41"));
    }
}

#[cfg(test)]
mod served_in_real_cluster_mode {
    use super::*;
    use crate::embedded::registry::builtins;

    fn info(group: &str, version: &str, plural: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            ..builtins().remove(0)
        }
    }

    /// `SetDefaults_Deployment` (k8s.io/kubernetes pkg/apis/apps/v1/defaults.go), the pod template
    /// defaulted as a pod's.
    #[test]
    fn a_deployment_gets_its_strategy_history_and_deadline() {
        let mut d = json!({"metadata": {"name": "d1"}, "spec": {"selector": {"matchLabels": {"app": "d1"}},
            "template": {"metadata": {"labels": {"app": "d1"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        apply(&info("apps", "v1", "deployments"), &mut d, true);
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(
            spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        // A Recreate strategy gets no rollingUpdate.
        let mut r = json!({"spec": {"strategy": {"type": "Recreate"}}});
        apply(&info("apps", "v1", "deployments"), &mut r, true);
        assert_eq!(r["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    /// apiextensions-apiserver's naming and establishing controllers: a stored CRD reads back with its
    /// names accepted, `NamesAccepted` and `Established` true, its storage version recorded.
    #[test]
    fn a_crd_reads_back_established() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": false}, {"name": "v2", "served": true, "storage": true}]}});
        let crds = info("apiextensions.k8s.io", "v1", "customresourcedefinitions");
        apply(&crds, &mut crd, true);
        let status = &crd["status"];
        assert_eq!(
            status["acceptedNames"],
            json!({"kind": "Widget", "plural": "widgets", "shortNames": ["wd"], "singular": "widget", "listKind": "WidgetList"})
        );
        let conditions: Vec<(&str, &str, &str)> = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            conditions,
            [
                ("NamesAccepted", "True", "NoConflicts"),
                ("Established", "True", "InitialNamesAccepted")
            ]
        );
        assert_eq!(status["storedVersions"], json!(["v2"]));
        // A later storage version is added; the first stays recorded.
        crd["spec"]["versions"][0]["storage"] = json!(true);
        crd["spec"]["versions"][1]["storage"] = json!(false);
        apply(&crds, &mut crd, false);
        assert_eq!(crd["status"]["storedVersions"], json!(["v2", "v1"]));
    }
}
