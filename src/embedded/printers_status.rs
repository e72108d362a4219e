//! The cells of the built-in printers that summarise a status: pods (`READY`, `STATUS`, `RESTARTS`),
//! nodes, services and jobs, as kubernetes `pkg/printers/internalversion` (v1.36) computes them.

use super::ages::{age, human_duration};
use super::event_fields::text;
use serde_json::{Value, json};

fn list<'a>(o: &'a Value, path: &str) -> &'a [Value] {
    o.pointer(path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn or_none(s: &str) -> String {
    if s.is_empty() { "<none>".into() } else { s.into() }
}

/// A terminated container's reason, else `Signal:N` or `ExitCode:N`.
fn terminated_reason(t: &Value) -> String {
    let reason = text(t, "/reason");
    if !reason.is_empty() {
        return reason.into();
    }
    match t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
        Some(s) => format!("Signal:{s}"),
        None => format!(
            "ExitCode:{}",
            t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
        ),
    }
}

fn condition_true(o: &Value, type_: &str) -> bool {
    list(o, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == type_ && text(c, "/status") == "True")
}

/// `Ready`, `Status`, `Restarts`, `Age`, `IP`, `Node`, `Nominated Node`, `Readiness Gates`.
pub fn pod(o: &Value, created: String) -> Vec<Value> {
    let mut restarts = 0i64;
    let mut last_restart = String::new();
    let mut note_restart = |s: &Value, restarts: &mut i64| {
        *restarts += s.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        let finished = text(s, "/lastState/terminated/finishedAt");
        if finished > last_restart.as_str() {
            last_restart = finished.to_string();
        }
    };
    let total = list(o, "/spec/containers").len();
    let mut ready = 0usize;
    let mut reason = text(o, "/status/phase").to_string();
    if !text(o, "/status/reason").is_empty() {
        reason = text(o, "/status/reason").into();
    }
    // A pod held by a scheduling gate says so while Pending.
    if reason == "Pending"
        && list(o, "/status/conditions")
            .iter()
            .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let inits = list(o, "/spec/initContainers");
    let mut initializing = false;
    for (i, s) in list(o, "/status/initContainerStatuses").iter().enumerate() {
        note_restart(s, &mut restarts);
        let terminated = s.pointer("/state/terminated");
        if terminated.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64) == Some(0)) {
            continue;
        }
        let sidecar = inits
            .iter()
            .find(|c| text(c, "/name") == text(s, "/name"))
            .is_some_and(|c| text(c, "/restartPolicy") == "Always");
        if sidecar && s.get("started").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let waiting = text(s, "/state/waiting/reason");
        reason = match terminated {
            Some(t) => format!("Init:{}", terminated_reason(t)),
            None if !waiting.is_empty() && waiting != "PodInitializing" => format!("Init:{waiting}"),
            None => format!("Init:{i}/{}", inits.len()),
        };
        initializing = true;
        break;
    }
    if !initializing || condition_true(o, "Initialized") {
        let mut running = false;
        for s in list(o, "/status/containerStatuses").iter().rev() {
            note_restart(s, &mut restarts);
            let waiting = text(s, "/state/waiting/reason");
            if !waiting.is_empty() {
                reason = waiting.into();
            } else if let Some(t) = s.pointer("/state/terminated") {
                reason = terminated_reason(t);
            } else if s.get("ready").and_then(Value::as_bool) == Some(true)
                && s.pointer("/state/running").is_some()
            {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if condition_true(o, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let phase = text(o, "/status/phase");
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        if text(o, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }
    let restarts = if last_restart.is_empty() {
        restarts.to_string()
    } else {
        format!("{restarts} ({} ago)", age(&last_restart))
    };
    let gates = list(o, "/spec/readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let met = gates
            .iter()
            .filter(|g| condition_true(o, text(g, "/conditionType")))
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        json!(created),
        json!(or_none(text(o, "/status/podIP"))),
        json!(or_none(text(o, "/spec/nodeName"))),
        json!(or_none(text(o, "/status/nominatedNodeName"))),
        json!(gates),
    ]
}

/// `Status`, `Roles`, `Age`, `Version`, `Internal-IP`, `External-IP`, `OS-Image`, `Kernel-Version`,
/// `Container-Runtime`.
pub fn node(o: &Value, created: String) -> Vec<Value> {
    let mut status: Vec<String> = list(o, "/status/conditions")
        .iter()
        .filter(|c| text(c, "/type") == "Ready")
        .map(|c| match text(c, "/status") {
            "True" => "Ready".to_string(),
            _ => "NotReady".to_string(),
        })
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            _ if k == "kubernetes.io/role" => v.as_str().filter(|r| !r.is_empty()).map(String::from),
            _ => None,
        })
        .collect();
    roles.sort();
    roles.dedup();
    let address = |type_: &str| {
        list(o, "/status/addresses")
            .iter()
            .find(|a| text(a, "/type") == type_)
            .map_or("<none>".to_string(), |a| text(a, "/address").to_string())
    };
    let info = |field: &str| {
        let v = text(o, &format!("/status/nodeInfo/{field}"));
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        json!(status.join(",")),
        json!(if roles.is_empty() {
            "<none>".into()
        } else {
            roles.join(",")
        }),
        json!(created),
        json!(text(o, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

/// `Type`, `Cluster-IP`, `External-IP`, `Port(s)`, `Age`, `Selector`.
pub fn service(o: &Value, created: String) -> Vec<Value> {
    let type_ = text(o, "/spec/type");
    let type_ = if type_.is_empty() { "ClusterIP" } else { type_ };
    let cluster_ip = or_none(text(o, "/spec/clusterIP"));
    let external: Vec<&str> = list(o, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match type_ {
        "ExternalName" => text(o, "/spec/externalName").to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<&str> = list(o, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| {
                    let ip = text(i, "/ip");
                    if ip.is_empty() { text(i, "/hostname") } else { ip }
                })
                .filter(|s| !s.is_empty())
                .collect();
            ips.extend(external.iter().copied());
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ => or_none(&external.join(",")),
    };
    let ports: Vec<String> = list(o, "/spec/ports")
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = text(p, "/protocol");
            let protocol = if protocol.is_empty() { "TCP" } else { protocol };
            match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                Some(n) => format!("{port}:{n}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let selector: Vec<String> = o
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    vec![
        json!(type_),
        json!(cluster_ip),
        json!(external),
        json!(or_none(&ports.join(","))),
        json!(created),
        json!(or_none(&selector.join(","))),
    ]
}

/// `Status`, `Completions`, `Duration`, `Age`, `Containers`, `Images`, `Selector`.
pub fn job(o: &Value, created: String) -> Vec<Value> {
    let has = |type_: &str| condition_true(o, type_);
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let succeeded = o
        .pointer("/status/succeeded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let completions = match (
        o.pointer("/spec/completions").and_then(Value::as_i64),
        o.pointer("/spec/parallelism").and_then(Value::as_i64),
    ) {
        (Some(c), _) => format!("{succeeded}/{c}"),
        (None, Some(p)) if p > 1 => format!("{succeeded}/1 of {p}"),
        (None, _) => format!("{succeeded}/1"),
    };
    let start = text(o, "/status/startTime").parse::<jiff::Timestamp>().ok();
    let end = text(o, "/status/completionTime").parse::<jiff::Timestamp>().ok();
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(jiff::Timestamp::now().as_second() - s.as_second()),
        (Some(s), Some(e)) => human_duration(e.as_second() - s.as_second()),
    };
    let mut cells = vec![json!(status), json!(completions), json!(duration), json!(created)];
    cells.extend(containers_images_selector(o, "/spec/template/spec"));
    cells
}

/// `Containers`, `Images`, `Selector` (the wide columns of jobs and deployments).
pub(super) fn containers_images_selector(o: &Value, spec: &str) -> Vec<Value> {
    let containers = o
        .pointer(&format!("{spec}/containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, "/image")).collect();
    vec![
        json!(names.join(",")),
        json!(images.join(",")),
        json!(label_selector(o.pointer("/spec/selector"))),
    ]
}

/// `metav1.FormatLabelSelector`: `a=b,c in (d,e)` sorted by key, `<none>` for no selector.
pub(super) fn label_selector(sel: Option<&Value>) -> String {
    match sel
        .filter(|s| s.is_object())
        .map(super::selector::selector_string)
    {
        Some(s) if !s.is_empty() => s,
        _ => "<none>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(pod_json: Value) -> (String, String, String) {
        let cells = pod(&pod_json, "1s".into());
        let s = |i: usize| cells[i].as_str().unwrap().to_string();
        (s(0), s(1), s(2))
    }

    /// kubernetes pkg/printers/internalversion/printers_test.go, TestPrintPod: the READY, STATUS
    /// and RESTARTS of a running pod, a waiting container, a terminated one and an init container.
    #[test]
    fn pod_ready_status_and_restarts_as_kubectl_prints_them() {
        let two = json!([{"name": "a"}, {"name": "b"}]);
        let running = json!({"spec": {"containers": two}, "status": {"phase": "podPhase",
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 3, "state": {"running": {}}},
                {"name": "b", "restartCount": 3}]}});
        assert_eq!(status_of(running), ("1/2".into(), "podPhase".into(), "6".into()));
        let waiting = json!({"spec": {"containers": two}, "status": {"phase": "podPhase",
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 3, "state": {"running": {}}},
                {"name": "b", "restartCount": 3, "state": {"waiting": {"reason": "ContainerWaitingReason"}}}]}});
        assert_eq!(
            status_of(waiting),
            ("1/2".into(), "ContainerWaitingReason".into(), "6".into())
        );
        let terminated = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "a", "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}});
        assert_eq!(status_of(terminated).1, "Signal:9");
        let init = json!({"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "restartCount": 0,
                "state": {"running": {}}}]}});
        assert_eq!(status_of(init).1, "Init:0/1");
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running"}});
        assert_eq!(status_of(deleting).1, "Terminating");
        let gated = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
        assert_eq!(status_of(gated).1, "SchedulingGated");
    }

    /// printers_test.go TestPrintJob: COMPLETIONS with and without spec.completions.
    #[test]
    fn job_completions_and_status() {
        let j = json!({"spec": {"completions": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"succeeded": 1}});
        let c = job(&j, "1s".into());
        assert_eq!(
            (c[0].as_str(), c[1].as_str(), c[2].as_str()),
            (Some("Running"), Some("1/2"), Some(""))
        );
        let j = json!({"spec": {"parallelism": 3}, "status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        let c = job(&j, "1s".into());
        assert_eq!(
            (c[0].as_str(), c[1].as_str()),
            (Some("Suspended"), Some("0/1 of 3"))
        );
    }

    #[test]
    fn service_ports_and_external_ips() {
        let s = json!({"spec": {"type": "NodePort", "clusterIP": "10.0.0.5",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "x"}}});
        let c = service(&s, "1s".into());
        assert_eq!(c[0], "NodePort");
        assert_eq!(c[2], "<none>");
        assert_eq!(c[3], "80:30080/TCP,53/UDP");
        assert_eq!(c[5], "app=x");
    }

    #[test]
    fn label_selectors_print_as_kubectl_does() {
        let sel = json!({"matchLabels": {"a": "b"}, "matchExpressions": [
            {"key": "c", "operator": "In", "values": ["d", "e"]}, {"key": "f", "operator": "DoesNotExist"}]});
        assert_eq!(label_selector(Some(&sel)), "a=b,c in (d,e),!f");
        assert_eq!(label_selector(None), "<none>");
        assert_eq!(label_selector(Some(&json!({}))), "<none>");
        // apimachinery sorts the requirements by key and the values of a set.
        let sel = json!({"matchLabels": {"z": "1", "b": "2"}, "matchExpressions": [
            {"key": "m", "operator": "NotIn", "values": ["y", "x"]}]});
        assert_eq!(label_selector(Some(&sel)), "b=2,m notin (x,y),z=1");
    }
}
